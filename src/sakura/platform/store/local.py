"""``file://`` stores: a directory tree, the embedded default.

Atomicity comes from the filesystem: every write goes to a temporary file in the target's
directory and is then renamed over the target (plain put) or hard-linked to it (create-only:
``link`` fails if the target exists). The etag is the sha256 of the content. ``*.lock`` files,
which the compare-and-swap of older releases left beside their objects, are no keys.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import tempfile
from collections.abc import Iterator, Sequence
from pathlib import Path

from sakura.platform.integrity import TMP_PREFIX, temp_beside
from sakura.platform.store.base import (
    AlreadyExists,
    InvalidKey,
    NotFound,
    ObjectInfo,
    ObjectStore,
    StoreError,
    check_key,
    folder_after,
)

_TMP_PREFIX = TMP_PREFIX
_LOCK_SUFFIX = ".lock"


class LocalStore(ObjectStore):
    def __init__(self, root: str | Path) -> None:
        self.root = Path(root).expanduser().resolve()
        self.uri = self.root.as_uri()

    def _path(self, key: str) -> Path:
        path = self.root / check_key(key)
        if path.name.startswith(_TMP_PREFIX) or path.name.endswith(_LOCK_SUFFIX):
            raise InvalidKey(f"invalid object key {key!r}")
        return path

    def get(self, key: str, byte_range: tuple[int, int] | None = None) -> bytes:
        path = self._path(key)
        try:
            with path.open("rb") as fh:
                if byte_range is None:
                    return fh.read()
                start, end = byte_range
                if not 0 <= start <= end:
                    raise StoreError(f"invalid byte range {byte_range}")
                fh.seek(start)
                return fh.read(end - start)
        except (FileNotFoundError, IsADirectoryError, NotADirectoryError):
            raise NotFound(f"{self.uri}/{key} not found") from None
        except OSError as exc:
            raise StoreError(f"cannot read {self.uri}/{key}: {exc}") from exc

    def head(self, key: str) -> ObjectInfo | None:
        try:
            data = self.get(key)
        except NotFound:
            return None
        return ObjectInfo(key, len(data), _etag(data))

    def put(self, key: str, data: bytes) -> ObjectInfo:
        path = self._path(key)
        with self._temp(path, data) as tmp:
            os.replace(tmp, path)
        return ObjectInfo(key, len(data), _etag(data))

    def put_if_absent(self, key: str, data: bytes) -> ObjectInfo:
        path = self._path(key)
        with self._temp(path, data) as tmp:
            try:
                os.link(tmp, path)
            except FileExistsError:
                raise AlreadyExists(f"{self.uri}/{key} already exists") from None
        return ObjectInfo(key, len(data), _etag(data))

    def list(self, prefix: str = "") -> Iterator[ObjectInfo]:
        base = self.root / prefix.rsplit("/", 1)[0] if "/" in prefix else self.root
        if not base.is_dir():
            return
        keys = []
        for dirpath, _, files in os.walk(base):
            for name in files:
                if name.startswith(_TMP_PREFIX) or name.endswith(_LOCK_SUFFIX):
                    continue
                key = Path(dirpath, name).relative_to(self.root).as_posix()
                if key.startswith(prefix):
                    keys.append(key)
        for key in sorted(keys):
            path = self.root / key
            with contextlib.suppress(FileNotFoundError):
                yield ObjectInfo(key, path.stat().st_size, "")

    def list_folders(self, prefix: str, *, after: str = "", limit: int = 1000) -> Sequence[str]:
        base = self.root / check_key(prefix.rstrip("/")) if prefix.strip("/") else self.root
        try:
            entries = [e.name for e in os.scandir(base) if e.is_dir() and not e.name.startswith(_TMP_PREFIX)]
        except (FileNotFoundError, NotADirectoryError):
            return []
        return sorted((n for n in entries if folder_after(n, after)), key=lambda n: n + "/")[:limit]

    def delete(self, key: str) -> None:
        path = self._path(key)
        with contextlib.suppress(FileNotFoundError):
            path.unlink()
        for parent in path.parents:  # tidy empty directories up to the root
            if parent == self.root or not parent.is_relative_to(self.root):
                break
            try:
                parent.rmdir()
            except OSError:
                break

    def check_reachable(self) -> None:
        try:
            self.root.mkdir(parents=True, exist_ok=True)
            probe = tempfile.NamedTemporaryFile(dir=self.root, prefix=_TMP_PREFIX, delete=True)
            probe.close()
        except OSError as exc:
            raise StoreError(f"store {self.uri} is not writable: {exc}") from exc

    def root_exists(self) -> bool:
        return self.root.is_dir()

    @contextlib.contextmanager
    def _temp(self, path: Path, data: bytes) -> Iterator[Path]:
        """:func:`~sakura.platform.integrity.temp_beside`, a failure to write it a StoreError."""
        with contextlib.ExitStack() as stack:
            try:
                tmp = stack.enter_context(temp_beside(path, data))
            except OSError as exc:
                raise StoreError(f"cannot write under {path.parent}: {exc}") from exc
            yield tmp


def _etag(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()
