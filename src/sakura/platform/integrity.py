"""Bytes that are whole or absent: atomic file writes, bounded reads of regular files, and the
length + sha256 check every payload passes before it is trusted (a shard from the network, a file
from a disk that can rot).

One implementation for the library's local store, the server's disk cache and the phone's cache.
A write goes to a temp file beside its target (created exclusively, so never through a planted
link), is flushed and (unless the caller says the copy is disposable) fsynced, then renamed over
the target: a crash leaves the old file or the new one, never half of one, and at most a temp
file whose name starts with :data:`TMP_PREFIX` for a later scan to remove.
"""

from __future__ import annotations

import contextlib
import errno
import hashlib
import os
import stat
import uuid
from collections.abc import Iterator
from pathlib import Path

__all__ = ["TMP_PREFIX", "matches", "read_regular", "temp_beside", "write_atomic"]

#: Temp files start with this: scans skip them, and may remove stale ones.
TMP_PREFIX = ".tmp-"


def matches(data: bytes | bytearray, sha256: str, length: int | None = None) -> bool:
    """``data`` is ``length`` bytes long (when given) and its sha256 (hex) is ``sha256``."""
    return (length is None or len(data) == length) and hashlib.sha256(data).hexdigest() == sha256


@contextlib.contextmanager
def temp_beside(path: Path, data: bytes, *, durable: bool = True) -> Iterator[Path]:
    """A temp file holding ``data`` in ``path``'s folder (made if missing), for the caller to
    rename or link into place; removed on exit if it is still there. ``durable``: fsync it first."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f"{TMP_PREFIX}{uuid.uuid4().hex}")
    try:
        with open(tmp, "xb") as fh:  # O_EXCL: never through a planted link
            fh.write(data)
            if durable:
                fh.flush()
                os.fsync(fh.fileno())
        yield tmp
    finally:
        with contextlib.suppress(OSError):
            if os.path.lexists(tmp):  # not renamed into place (a planted link is removed, not followed)
                os.unlink(tmp)


def write_atomic(path: Path, data: bytes, *, durable: bool = True, sync_dir: bool = False) -> None:
    """Replace ``path`` with ``data`` in one rename; an ``OSError`` propagates and leaves no temp
    file. ``sync_dir``: make the rename itself durable (before the caller deletes a copy it
    replaces, so a power cut cannot leave neither)."""
    with temp_beside(path, data, durable=durable) as tmp:
        os.replace(tmp, path)
    if sync_dir:
        _sync_dir(path.parent)


def _sync_dir(folder: Path) -> None:
    try:
        fd = os.open(folder, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
    except OSError:  # some file systems cannot sync a directory: best effort
        pass


_NONBLOCK = getattr(os, "O_NONBLOCK", 0)
_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)


def read_regular(path: Path, limit: int, *, follow_links: bool = True) -> bytes:
    """Up to ``limit + 1`` bytes of ``path`` (more than ``limit`` tells the caller it is too large),
    read only if it is a regular file: a FIFO or a device put where a file should be is an
    ``OSError``, never a read that waits for a writer or never ends (opened non-blocking, checked
    with ``fstat`` before reading). ``follow_links=False``: a link is an ``OSError`` too."""
    flags = os.O_RDONLY | _NONBLOCK | (0 if follow_links else _NOFOLLOW)
    with os.fdopen(os.open(path, flags), "rb") as f:
        if not stat.S_ISREG(os.fstat(f.fileno()).st_mode):
            raise OSError(errno.EINVAL, f"{path}: not a regular file")
        return f.read(limit + 1)

