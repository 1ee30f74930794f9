"""The on-device template cache: encoded shards on disk under a byte budget, evicted LRU by template.

Layout: ``<dir>/<template>/<version>/manifest.json`` and ``<dir>/<template>/<version>/<index>.<level>``;
a template's last use is the mtime of ``<dir>/<template>/.used``. Only the best cached level of a
shard is kept. Writes are atomic (temp file + rename), reads are checked against the manifest's
sha256 (a bad file is deleted and reported as a miss), and partial templates are normal.
One process owns a cache directory at a time.
"""

from __future__ import annotations

import hashlib
import os
import threading
import time
import uuid
from pathlib import Path

from sakura.platform.ids import validate_template_id

_USED = ".used"
_TMP = ".tmp-"


class ShardCache:
    def __init__(self, directory: str | Path, budget_bytes: int) -> None:
        if budget_bytes < 0:
            raise ValueError("the cache budget must be >= 0 bytes")
        self.dir, self.budget = Path(directory), int(budget_bytes)
        self.dir.mkdir(parents=True, exist_ok=True)
        self._lock = threading.Lock()
        self._sizes: dict[Path, int] = {}
        self._used = 0  # sum of _sizes, kept as files come and go
        self._scan()

    # -- reading -------------------------------------------------------------------------
    @property
    def used_bytes(self) -> int:
        with self._lock:
            return self._used

    def levels(self, template: str, version: int, index: int) -> list[str]:
        folder = self._version_dir(template, version)
        with self._lock:
            return [p.name.split(".", 1)[1] for p in self._sizes if p.parent == folder and p.name.startswith(f"{index}.")]

    def read(self, template: str, version: int, index: int, level: str, sha256: str) -> bytes | None:
        return self._read(self._version_dir(template, version) / f"{index}.{level}", sha256)

    def read_manifest(self, template: str, version: int) -> bytes | None:
        return self._read(self._version_dir(template, version) / "manifest.json", None)

    # -- writing -------------------------------------------------------------------------
    def write(self, template: str, version: int, index: int, level: str, data: bytes, *, rank: dict[str, int]) -> bool:
        """Keep a shard (replacing worse cached levels of it); False when it cannot fit the budget."""
        folder = self._version_dir(template, version)
        with self._lock:
            worse = [p for p in self._sizes if p.parent == folder and p.name.startswith(f"{index}.")
                     and rank.get(p.name.split(".", 1)[1], -1) < rank[level]]
            for path in worse:
                self._delete(path)
        return self._store(folder / f"{index}.{level}", data, keep=template)

    def write_manifest(self, template: str, version: int, data: bytes) -> bool:
        return self._store(self._version_dir(template, version) / "manifest.json", data, keep=template)

    def touch(self, template: str) -> None:
        folder = self.dir / validate_template_id(template)
        folder.mkdir(parents=True, exist_ok=True)
        (folder / _USED).touch()
        os.utime(folder / _USED, ns=(time.time_ns(), time.time_ns()))

    # -- internals -----------------------------------------------------------------------
    def _version_dir(self, template: str, version: int) -> Path:
        if isinstance(version, bool) or not isinstance(version, int) or version < 1:
            raise ValueError(f"version must be a positive integer, got {version!r}")
        return self.dir / validate_template_id(template) / str(version)

    def _read(self, path: Path, sha256: str | None) -> bytes | None:
        with self._lock:
            if path not in self._sizes:
                return None
            try:
                data = path.read_bytes()
            except OSError:
                self._forget(path)
                return None
            if sha256 is not None and hashlib.sha256(data).hexdigest() != sha256:
                self._delete(path)  # bit rot or tampering: never used
                return None
            return data

    def _store(self, path: Path, data: bytes, *, keep: str) -> bool:
        with self._lock:
            if len(data) > self.budget:
                return False
            if path in self._sizes:
                self._delete(path)
            self._evict_for(len(data), keep)
            if self._used + len(data) > self.budget:
                return False
            path.parent.mkdir(parents=True, exist_ok=True)
            tmp = path.with_name(f"{_TMP}{uuid.uuid4().hex}")
            tmp.write_bytes(data)
            os.replace(tmp, path)
            self._remember(path, len(data))
            return True

    def _evict_for(self, nbytes: int, keep: str) -> None:
        """Evict whole templates, least recently used first, never ``keep`` (the one in use)."""
        for template in self._templates_by_age():
            if self._used + nbytes <= self.budget:
                return
            if template.name != keep:
                for path in [p for p in self._sizes if template in p.parents]:
                    self._delete(path)

    def _templates_by_age(self) -> list[Path]:
        folders = {p.parent.parent for p in self._sizes}

        def last_used(folder: Path) -> float:
            try:
                return (folder / _USED).stat().st_mtime
            except OSError:
                return 0.0

        return sorted(folders, key=last_used)

    def _delete(self, path: Path) -> None:
        self._forget(path)
        path.unlink(missing_ok=True)

    def _remember(self, path: Path, size: int) -> None:
        self._forget(path)
        self._sizes[path] = size
        self._used += size

    def _forget(self, path: Path) -> None:
        self._used -= self._sizes.pop(path, 0)

    def _scan(self) -> None:
        for path in self.dir.glob("*/*/*"):
            if not path.is_file():
                continue
            if path.name.startswith(_TMP):
                path.unlink(missing_ok=True)  # a write that crashed before its rename
            else:
                self._remember(path, path.stat().st_size)
        while self._used > self.budget and self._sizes:  # the budget shrank
            oldest = self._templates_by_age()[0]
            for path in [p for p in self._sizes if oldest in p.parents]:
                self._delete(path)
