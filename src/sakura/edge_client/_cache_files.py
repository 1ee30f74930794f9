"""The shard cache's files: the names it writes, the folder lock, the start-up scan, atomic
writes and bounded reads. Standard library, numpy and :mod:`sakura.platform` only (the phone path)."""

from __future__ import annotations

import hashlib
import io
import logging
import math
import os
import time
import zipfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from sakura.platform import layout
from sakura.platform.ids import validate_template_id
from sakura.platform.integrity import TMP_PREFIX, read_regular

try:
    import fcntl
except ImportError:  # pragma: no cover - not POSIX: no cross-process guard
    fcntl = None  # type: ignore[assignment]

log = logging.getLogger("sakura.edge_client._cache")

USED = ".used"
MANIFEST = "manifest.json"
_LOCK = ".lock"
_OBJECT, _OBJECT_SUFFIX = "object-", ".zst"  # "-" is outside object names: no file name is two things
_INDEX_DIGITS = 7  # shard indexes, as the server's shard URLs bound them
_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)
_NONBLOCK = getattr(os, "O_NONBLOCK", 0)
#: Without a lock (no ``fcntl``, or a file system without locks) a temp file this old is a crashed write's.
STALE_TMP_S = 3600.0


def check_index(index: int) -> int:
    if isinstance(index, bool) or not isinstance(index, int) or not 0 <= index < 10**_INDEX_DIGITS:
        raise layout.InvalidName(f"invalid shard index {index!r}")
    return index


def shard_name(index: int, level: str) -> str:
    return f"{check_index(index)}.{layout.validate_level(level)}"


def object_name(name: str) -> str:
    """The file of a context or source object (names are unique across both kinds in a manifest)."""
    return f"{_OBJECT}{layout.validate_object_name(name)}{_OBJECT_SUFFIX}"


def is_object(name: str) -> bool:
    if not (name.startswith(_OBJECT) and name.endswith(_OBJECT_SUFFIX)):
        return False
    try:
        layout.validate_object_name(name[len(_OBJECT):-len(_OBJECT_SUFFIX)])
    except layout.InvalidName:
        return False
    return True


def lock_folder(root: Path) -> tuple[int | None, float] | None:
    """Take ``root``'s exclusive lock for this process: ``(its fd, how old a temp file must be to
    be a crash's)``, or None while another process holds it. Raises OSError if it cannot try."""
    if fcntl is None:
        return None, STALE_TMP_S
    fd = os.open(root / _LOCK, os.O_RDWR | os.O_CREAT | _NOFOLLOW, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        os.close(fd)
        return None
    except OSError:  # a file system without locks: temp files may be another process's
        return fd, STALE_TMP_S
    return fd, 0.0  # nobody else writes here: every temp file is a crash's


def scan(root: Path, stale_after: float) -> dict[Path, int]:
    """The size of every cache file under ``root`` (regular files with names the cache writes;
    never a link), removing temp files at least ``stale_after`` seconds old."""
    sizes: dict[Path, int] = {}
    now = time.time()
    for template in _entries(root, _is_template_dir):
        for version in _entries(Path(template.path), _is_version_dir):
            for entry in _entries(Path(version.path), lambda e: e.is_file(follow_symlinks=False)):
                try:
                    stat = entry.stat(follow_symlinks=False)
                    if entry.name.startswith(TMP_PREFIX) and now - stat.st_mtime >= stale_after:
                        os.unlink(entry.path)  # a write that crashed before its rename
                    elif _is_cache_file(entry.name):
                        sizes[Path(entry.path)] = stat.st_size
                except OSError as exc:
                    log.warning("cache scan skipped %s: %s", entry.path, exc)
    return sizes


def read_at_most(path: Path, size: int) -> bytes:
    """Up to ``size + 1`` bytes of ``path``, a regular file, never through a link: more than
    ``size`` means tampering; a FIFO or a device swapped in for a cache file is an ``OSError``."""
    return read_regular(path, size, follow_links=False)


def touch_file(path: Path) -> None:
    """Create ``path`` if need be and set its mtime to now; an ``OSError`` if it is a link, a
    directory or a FIFO (opened non-blocking: never a wait for a reader)."""
    os.close(os.open(path, os.O_WRONLY | os.O_CREAT | _NOFOLLOW | _NONBLOCK, 0o644))
    os.utime(path, ns=(time.time_ns(), time.time_ns()))


def frame(manifest: bytes) -> bytes:
    """A manifest with its checksum, as cached: ``<sha256 hex>\\n<manifest>``."""
    return hashlib.sha256(manifest).hexdigest().encode() + b"\n" + manifest


def unframe(blob: bytes) -> bytes | None:
    """The manifest in ``blob`` if its checksum verifies, else None."""
    digest, newline, body = blob.partition(b"\n")
    return body if newline and digest == hashlib.sha256(body).hexdigest().encode() else None


def _is_cache_file(name: str) -> bool:
    if name == MANIFEST or is_object(name):
        return True
    index, _, level = name.partition(".")
    try:
        layout.validate_level(level)
    except layout.InvalidName:
        return False
    return layout.parse_number(index, max_digits=_INDEX_DIGITS) is not None


def _is_template_dir(entry: os.DirEntry[str]) -> bool:
    try:
        validate_template_id(entry.name)
    except ValueError:
        return False
    return entry.is_dir(follow_symlinks=False)


def _is_version_dir(entry: os.DirEntry[str]) -> bool:
    number = layout.parse_number(entry.name)
    return number is not None and 1 <= number <= layout.MAX_VERSION and entry.is_dir(follow_symlinks=False)


def _entries(folder: Path, keep: Callable[[os.DirEntry[str]], bool]) -> list[os.DirEntry[str]]:
    try:
        with os.scandir(folder) as it:
            return [entry for entry in it if keep(entry)]
    except OSError as exc:
        log.warning("cache scan skipped %s: %s", folder, exc)
        return []


def pack_arrays(arrays: dict[str, np.ndarray]) -> bytes:
    """Named arrays as one file (numpy's ``.npz``, uncompressed)."""
    named: dict[str, Any] = dict(arrays)  # Any: numpy's stub takes ** for its own keywords too
    out = io.BytesIO()
    np.savez(out, **named)
    return out.getvalue()


def unpack_arrays(data: bytes) -> dict[str, np.ndarray] | None:
    """What :func:`pack_arrays` wrote, or None: only stored (uncompressed) ``.npy`` members of numeric
    arrays, each header checked against the bytes that follow it before anything is allocated, so
    nothing larger than ``data`` ever is (never a pickled object); the model checks the shapes."""
    arrays: dict[str, np.ndarray] = {}
    try:
        with zipfile.ZipFile(io.BytesIO(data)) as archive:
            for info in archive.infolist():
                name = info.filename.removesuffix(".npy")
                if (name == info.filename or name in arrays or info.compress_type != zipfile.ZIP_STORED
                        or info.flag_bits & 1 or info.file_size > len(data)):  # bit 0: encrypted
                    return None
                arrays[name] = _npy(archive.read(info))
    except (ValueError, OSError, EOFError, zipfile.BadZipFile, NotImplementedError):
        return None  # NotImplementedError: zipfile's word for a version or method it does not read
    return arrays


def _npy(raw: bytes) -> np.ndarray:
    """One ``.npy`` file of numbers; ValueError unless its header declares exactly the bytes after it."""
    stream = io.BytesIO(raw)
    version = np.lib.format.read_magic(stream)
    if version not in ((1, 0), (2, 0)):
        raise ValueError(f"unsupported .npy version {version}")
    read_header = np.lib.format.read_array_header_1_0 if version == (1, 0) else np.lib.format.read_array_header_2_0
    shape, _, dtype = read_header(stream)
    if dtype.kind not in "biufc" or math.prod(shape) * dtype.itemsize != len(raw) - stream.tell():
        raise ValueError(f"a .npy header declaring {dtype} {shape} over {len(raw) - stream.tell()} bytes")
    stream.seek(0)
    return np.lib.format.read_array(stream, allow_pickle=False)
