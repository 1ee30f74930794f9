"""The on-device template cache: encoded shards on disk under a byte budget, evicted LRU by template.

Layout: ``<dir>/<template>/<version>/manifest.json``, ``<dir>/<template>/<version>/<index>.<level>``
and ``<dir>/<template>/<version>/object-<name>.zst`` (context and source objects, still encoded,
and what the phone made itself from them, with its own sha256);
a template's last use is the mtime of ``<dir>/<template>/.used``. Only the best cached level of a
shard is kept. Every name is checked against the project's grammars and every path must resolve to
itself inside the folder (no ``..``, no planted symlink), else :class:`CachePathError`.

Writes are atomic and best effort: temp file, fsync, rename; an ``OSError`` (disk full,
permissions) is logged and the write returns False. Reads are verified (a shard or an object
against the manifest's sha256, a manifest against the checksum stored with it), and a file of
another size than the manifest's length is dropped before a byte of it is read; a bad or
unreadable file is a miss, and a bad one is deleted.

One folder, one cache: every :class:`ShardCache` opened on a folder in a process shares one state
and one budget (the smallest any open handle asked for). Across processes an exclusive ``flock``
on ``<dir>/.lock`` decides the owner; a second process runs without the cache (every read a miss,
every write refused) and takes the folder over at a later write or touch once it is free. The
cache is an optimisation, so it never fails or stalls an edit because another process has it.
"""

from __future__ import annotations

import collections
import hashlib
import itertools
import os
import threading
import weakref
from collections.abc import Callable
from pathlib import Path

import numpy as np

from sakura.edge_client import _cache_files as files
from sakura.edge_client._cache_files import MANIFEST, USED, log
from sakura.edge_client.errors import CachePathError, ConfigError
from sakura.platform import layout
from sakura.platform.caching import Budget, register_eviction
from sakura.platform.ids import validate_template_id
from sakura.platform.integrity import matches, write_atomic


class ShardCache:
    """A handle on a cache folder; :meth:`close` (or garbage collection) lets go of it."""

    def __init__(self, directory: str | Path, budget_bytes: int) -> None:
        if isinstance(budget_bytes, bool) or budget_bytes < 0:
            raise ConfigError("the cache budget must be >= 0 bytes")
        root = Path(directory).expanduser()
        root.mkdir(parents=True, exist_ok=True)
        self.dir = root.resolve(strict=True)
        self._folder, token = _attach(self.dir, int(budget_bytes))
        self._close = weakref.finalize(self, _detach, self.dir, self._folder, token)

    def close(self) -> None:
        self._close()

    # -- reading -------------------------------------------------------------------------
    @property
    def used_bytes(self) -> int:
        return self._folder.used_bytes

    @property
    def budget(self) -> int:
        return self._folder.budget

    @property
    def owned(self) -> bool:
        """False while another process holds the folder: the cache is then off for this one."""
        return self._folder.owned

    def levels(self, template: str, version: int, index: int) -> list[str]:
        return self._folder.levels(self._version_dir(template, version), files.check_index(index))

    def read(self, template: str, version: int, index: int, level: str, sha256: str,
             length: int | None = None) -> bytes | None:
        """A shard if it verifies against ``sha256`` and, when given, the manifest's ``length``: a
        file of any other size is a miss without a byte of it read."""
        path = self._path(template, version, files.shard_name(index, level))
        return self._folder.read(path, _sha256_is(sha256), length)

    def has_object(self, template: str, version: int, name: str) -> bool:
        """Whether a context or source object is kept (unverified until :meth:`read_object`)."""
        return self._folder.has(self._path(template, version, files.object_name(name)))

    def read_object(self, template: str, version: int, name: str, sha256: str,
                    length: int | None = None) -> bytes | None:
        """A context or source object (still encoded) if it verifies against ``sha256`` (and
        ``length``, as :meth:`read`)."""
        return self._folder.read(self._path(template, version, files.object_name(name)), _sha256_is(sha256), length)

    def read_manifest(self, template: str, version: int) -> bytes | None:
        """The cached manifest if its stored checksum verifies; a bad one is deleted (refetch it)."""
        return self._folder.read(self._path(template, version, MANIFEST), files.unframe)

    # -- writing -------------------------------------------------------------------------
    def write(self, template: str, version: int, index: int, level: str, data: bytes, *, rank: dict[str, int]) -> bool:
        """Keep a shard, then drop worse cached levels of it; False when it is not kept (it does
        not fit, a better level is cached, or the disk failed)."""
        path = self._path(template, version, files.shard_name(index, level))
        return self._folder.write_shard(path, index, level, data, rank)

    def write_object(self, template: str, version: int, name: str, data: bytes) -> bool:
        """Keep a verified context or source object: a later edit of the version starts warm."""
        return self._folder.store(self._path(template, version, files.object_name(name)), data, replaces=[])

    def write_made(self, template: str, version: int, name: str, arrays: dict[str, np.ndarray]) -> bool:
        """Keep arrays the phone made itself for the version (the source its image codec made from
        the template's image), which no manifest lists a sha256 for: stored with their own."""
        data = files.pack_arrays(arrays)
        return self.write_object(template, version, name, hashlib.sha256(data).digest() + data)

    def read_made(self, template: str, version: int, name: str) -> dict[str, np.ndarray] | None:
        """What :meth:`write_made` kept, if it still matches the sha256 stored with it."""
        data = self._folder.read(self._path(template, version, files.object_name(name)), _self_checked)
        return None if data is None else files.unpack_arrays(data)

    def write_manifest(self, template: str, version: int, data: bytes) -> bool:
        return self._folder.store(self._path(template, version, MANIFEST), files.frame(data), replaces=[])

    def touch(self, template: str) -> None:
        """Mark ``template`` as just used (LRU order)."""
        self._folder.touch(self._checked(self.dir / validate_template_id(template) / USED))

    # -- paths ---------------------------------------------------------------------------
    def _version_dir(self, template: str, version: int) -> Path:
        return self.dir / validate_template_id(template) / str(layout.validate_version(version))

    def _path(self, template: str, version: int, name: str) -> Path:
        return self._checked(self._version_dir(template, version) / name)

    def _checked(self, path: Path) -> Path:
        """``path`` if it resolves to itself inside the folder (no link anywhere on the way)."""
        try:
            real = path.resolve()
        except (OSError, RuntimeError) as exc:  # a symlink loop
            raise CachePathError(f"refusing cache path {path}: {exc}") from exc
        if real != path or not real.is_relative_to(self.dir):
            raise CachePathError(f"refusing cache path {path}: it resolves to {real} (a link, or outside the folder)")
        return path


def _sha256_is(sha256: str) -> Callable[[bytes], bytes | None]:
    """A read's check: the bytes if their sha256 is the one the manifest lists, else None."""
    return lambda data: data if matches(data, sha256) else None


def _self_checked(data: bytes) -> bytes | None:
    """A made object's check: its bytes after the sha256 they start with, if it matches."""
    body = data[32:]
    return body if len(data) >= 32 and hashlib.sha256(body).digest() == data[:32] else None


class _LruByTemplate:
    """The shard cache's eviction order over its files (``<root>/<template>/<version>/<name>``):
    for a file coming in, the other versions of its template first (oldest first), then the other
    templates, least recently used first (a template's last use is the mtime of its ``.used`` file,
    so the order outlives the process); never the incoming file's own version. Within a version
    the shards go from the last index down, then the context and source objects (every edit of
    the version needs them), and the manifest last."""

    def __init__(self) -> None:
        self._files: set[Path] = set()

    def used(self, key: Path) -> None:
        self._files.add(key)

    def forget(self, key: Path) -> None:
        self._files.discard(key)

    def victims(self, incoming: Path | None) -> list[Path]:
        keep = incoming.parent if incoming is not None else None
        by_version: dict[Path, list[Path]] = collections.defaultdict(list)
        for path in self._files:
            if path.parent != keep:
                by_version[path.parent].append(path)
        by_template: dict[Path, list[Path]] = collections.defaultdict(list)
        for version in sorted(by_version, key=lambda v: int(v.name)):
            by_template[version.parent].append(version)
        in_use_first = sorted(by_template, key=lambda t: (keep is None or t != keep.parent, _last_used(t)))
        return [path for template in in_use_first for version in by_template[template]
                for path in sorted(by_version[version], key=_eviction_rank, reverse=True)]


def _last_used(template: Path) -> float:
    try:
        return (template / USED).stat().st_mtime
    except OSError:
        return 0.0


def _eviction_rank(path: Path) -> int:
    """Larger goes first: shards by index, then objects, the manifest last."""
    if path.name == MANIFEST:
        return -2
    return -1 if files.is_object(path.name) else int(path.name.partition(".")[0])


EVICTION = "lru-template"
register_eviction(EVICTION, _LruByTemplate)


class _Folder:
    """The state of one cache folder in this process, shared by every handle on it."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.lock = threading.Lock()
        self.files: Budget[Path] = Budget(0, eviction=EVICTION)  # what is on disk, as counted
        self.budgets: dict[int, int] = {}  # per open handle
        self.owned = self.closed = self.warned = False
        self.lock_fd: int | None = None

    @property
    def used_bytes(self) -> int:
        with self.lock:
            return self.files.used

    @property
    def budget(self) -> int:
        with self.lock:
            return self.files.budget

    def levels(self, folder: Path, index: int) -> list[str]:
        with self.lock:
            return self._levels(folder, index)

    def has(self, path: Path) -> bool:
        with self.lock:
            return path in self.files

    def read(self, path: Path, verify: Callable[[bytes], bytes | None], length: int | None = None) -> bytes | None:
        """``path``'s bytes if ``verify`` takes them; a file whose size is not ``length`` (when
        given: what the manifest says the object has) is dropped unread, whatever size it has."""
        with self.lock:
            if path not in self.files:
                return None
            size = self.files.cost(path)
            if length is not None and size != length:
                self._delete(path)  # never the object asked for: not worth reading (a planted file of gigabytes)
                return None
            try:
                data = files.read_at_most(path, size)
            except OSError as exc:
                log.warning("cached %s is unreadable, dropped: %s", self._name(path), exc)
                self._delete(path)
                return None
            good = verify(data) if len(data) == size else None
            if good is None:
                self._delete(path)  # bit rot, a torn write or tampering: never used
            return good

    def write_shard(self, path: Path, index: int, level: str, data: bytes, rank: dict[str, int]) -> bool:
        with self.lock:
            if not self._own():
                return False
            cached = [other for other in self._levels(path.parent, index) if other != level]
            if any(rank.get(other, -1) > rank.get(level, -1) for other in cached):
                return False  # a better level is kept already
            return self._store(path, data, [path.parent / f"{index}.{other}" for other in cached])

    def store(self, path: Path, data: bytes, *, replaces: list[Path]) -> bool:
        with self.lock:
            return self._own() and self._store(path, data, replaces)

    def touch(self, used: Path) -> None:
        with self.lock:
            if not self._own():
                return
            try:
                used.parent.mkdir(exist_ok=True)
                files.touch_file(used)
            except OSError as exc:
                log.warning("could not mark %s as used: %s", self._name(used.parent), exc)

    # -- handles and the cross-process lock ----------------------------------------------
    def attach(self, token: int, budget: int) -> None:
        with self.lock:
            self.budgets[token] = budget
            self.files.budget = min(self.budgets.values())
            if not self._own():
                return
            self._shrink()  # a smaller budget applies at once

    def detach(self, token: int) -> bool:
        """Forget a handle; True when it was the last (the folder is then let go)."""
        with self.lock:
            self.budgets.pop(token, None)
            if self.budgets:
                self.files.budget = min(self.budgets.values())
                return False
            self.closed = True
            self._disown()
            return True

    def _own(self) -> bool:
        """Own the folder for this process if no other process does (called under the lock)."""
        if self.owned or self.closed:
            return self.owned
        try:
            taken = files.lock_folder(self.root)
        except OSError as exc:
            return self._refuse(f"its lock file cannot be opened ({exc})")
        if taken is None:
            return self._refuse("another process is using it")
        if self.warned:
            log.info("cache folder %s is free again: caching resumes", self.root)
        self.lock_fd, stale_after = taken
        self.owned = True
        for path, size in files.scan(self.root, stale_after).items():
            self.files.add(path, size)
        self._shrink()  # the budget may have shrunk since the folder was filled
        return True

    def _refuse(self, why: str) -> bool:
        if not self.warned:
            log.warning("cache folder %s is off for this process: %s", self.root, why)
            self.warned = True
        return False

    def _disown(self) -> None:
        if self.lock_fd is not None:
            os.close(self.lock_fd)  # releases the flock
        self.lock_fd, self.owned = None, False
        for path in self.files:
            self.files.drop(path)

    # -- internals -----------------------------------------------------------------------
    def _levels(self, folder: Path, index: int) -> list[str]:
        prefix = f"{index}."
        return [p.name[len(prefix):] for p in self.files if p.parent == folder and p.name.startswith(prefix)]

    def _store(self, path: Path, data: bytes, replaces: list[Path]) -> bool:
        """Write ``path``, then drop ``replaces`` (never before: a failed write keeps them)."""
        freed = sum(self.files.cost(p) for p in set(replaces) - {path})
        victims = self.files.plan(path, len(data), freed=freed)
        if victims is None:
            return False  # cannot fit even with everything else evicted: evict nothing
        for victim in victims:
            self._delete(victim)
        if not self.files.fits(len(data), freed=freed + self.files.cost(path)):
            return False  # something could not be evicted
        try:
            write_atomic(path, data, sync_dir=bool(replaces))
        except OSError as exc:
            log.warning("could not cache %s: %s", self._name(path), exc)
            return False
        self.files.add(path, len(data))
        for worse in replaces:
            if worse != path:
                self._delete(worse)
        return True

    def _shrink(self) -> None:
        for victim in self.files.plan(None) or []:
            self._delete(victim)

    def _delete(self, path: Path) -> None:
        try:
            path.unlink(missing_ok=True)
        except OSError as exc:  # still on disk, so still counted
            log.warning("could not delete cached %s: %s", self._name(path), exc)
            return
        self.files.drop(path)

    def _name(self, path: Path) -> str:
        return str(path.relative_to(self.root))


# -- one state per folder per process --------------------------------------------------------
_REGISTRY: dict[Path, _Folder] = {}
_REGISTRY_LOCK = threading.Lock()
_TOKENS = itertools.count()


def _attach(root: Path, budget: int) -> tuple[_Folder, int]:
    with _REGISTRY_LOCK:
        folder = _REGISTRY.get(root)
        if folder is None:
            folder = _REGISTRY[root] = _Folder(root)
        token = next(_TOKENS)
        folder.attach(token, budget)
        return folder, token


def _detach(root: Path, folder: _Folder, token: int) -> None:
    with _REGISTRY_LOCK:
        if folder.detach(token) and _REGISTRY.get(root) is folder:
            del _REGISTRY[root]


def _after_fork_in_child() -> None:
    """A forked child shares the parent's lock (one open file description): it must not use it."""
    global _REGISTRY_LOCK
    _REGISTRY_LOCK = threading.Lock()
    for folder in _REGISTRY.values():
        folder.lock = threading.Lock()
        folder._disown()  # the child retries the lock like any other process


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)
