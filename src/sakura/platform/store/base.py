"""The object-store interface: what the build job, the server and the operator commands need.

Keys are ``/``-separated relative paths. One conditional write makes the library safe: the
create-only put, which must be atomic (of two writers racing on one key exactly one succeeds).
Every mutable object is a log of create-only records (:mod:`sakura.platform.record_log`), so no
compare-and-swap is needed (SeaweedFS's ``If-Match`` is not atomic). Implementations are chosen
by URI scheme (:mod:`.registry`).
"""

from __future__ import annotations

import abc
import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

from sakura.platform.errors import SakuraError


class StoreError(SakuraError, RuntimeError):
    code = "store_error"


class NotFound(StoreError, KeyError):
    code = "not_found"

    def __str__(self) -> str:  # KeyError would quote the message
        return str(self.args[0]) if self.args else "not found"


class AlreadyExists(StoreError):
    code = "already_exists"


class PreconditionFailed(StoreError):
    """A server refused a conditional request (HTTP 412); :meth:`ObjectStore.put_if_absent`
    reports it as :class:`AlreadyExists`."""

    code = "precondition_failed"


class TransientStoreError(StoreError):
    """Worth retrying: timeouts, throttling, 5xx, a server that is briefly down."""

    code = "store_unavailable"


class InvalidKey(StoreError, ValueError):
    code = "invalid_key"


@dataclass(frozen=True)
class ObjectInfo:
    key: str
    size: int
    etag: str


_SEGMENT = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._=-]{0,127}$")


def check_key(key: str) -> str:
    """Refuse keys that could escape the store root (``..``, absolute, empty segments)."""
    parts = key.split("/") if isinstance(key, str) else []
    if not parts or len(key) > 1024 or any(_SEGMENT.fullmatch(p) is None for p in parts):
        raise InvalidKey(f"invalid object key {key!r}")
    return key


def folder_after(name: str, after: str) -> bool:
    """Whether folder ``name`` comes after folder ``after`` in folder order ("" comes first)."""
    return not after or name + "/" > after + "/"


def folder_key(name: str) -> str:
    """What folder order sorts by: the name and its "/" (S3's order of common prefixes)."""
    return name + "/"


def cursor_prefixes(after: str) -> list[str]:
    """The folders that may come after ``after`` in folder order yet before it in name order: its
    own prefixes where it goes on with a character that sorts before "/" ("a" for "a.b", since
    "a/" > "a.b/"). A server that lists by entry name (SeaweedFS) starts after ``after`` by name
    and never returns them, so a listing asks for each."""
    return [after[:i] for i in range(1, len(after)) if after[i] < "/"]


def listing_complete(chosen: Sequence[str], last: str) -> bool:
    """Whether a folder listing read up to ``last`` (in the server's order) holds every folder that
    comes before one of ``chosen`` in folder order. Only an extension of a chosen name ("a.b" of
    "a") can come before it in folder order and after it in name order, and a server that lists
    by name returns those right after it: so unless ``last`` is a chosen name or one of its
    extensions, nothing still to come sorts before the chosen ones."""
    return not any(last == n or (last.startswith(n) and last[len(n)] < "/") for n in chosen)


class ObjectStore(abc.ABC):
    """A flat key space under one root URI."""

    uri: str

    @abc.abstractmethod
    def get(self, key: str, byte_range: tuple[int, int] | None = None) -> bytes:
        """The object's bytes, or ``[start, end)`` of them. Raises :class:`NotFound`."""

    @abc.abstractmethod
    def head(self, key: str) -> ObjectInfo | None: ...

    @abc.abstractmethod
    def put(self, key: str, data: bytes) -> ObjectInfo:
        """Write (or overwrite) atomically: readers see the old object or the new one."""

    @abc.abstractmethod
    def put_if_absent(self, key: str, data: bytes) -> ObjectInfo:
        """Create-only write, atomic: of two writers racing on one key exactly one succeeds.
        Raises :class:`AlreadyExists` if the key exists."""

    @abc.abstractmethod
    def list(self, prefix: str = "") -> Iterator[ObjectInfo]:
        """Objects whose key starts with ``prefix``, in key order."""

    def list_folders(self, prefix: str, *, after: str = "", limit: int = 1000) -> Sequence[str]:
        """The names of the folders directly under ``prefix`` (which ends in ``/``) in folder order
        (the order of ``name + "/"``, as S3 lists common prefixes), those after the folder
        ``after`` only, at most ``limit``. This default reads every key under ``prefix``; stores
        override it with a listing that costs what the page holds."""
        names: set[str] = set()
        for obj in self.list(prefix):  # in whatever order the store lists keys
            name, sep, _ = obj.key[len(prefix):].partition("/")
            if sep and folder_after(name, after):
                names.add(name)
        return sorted(names, key=folder_key)[:limit]

    def key_folders(self, prefix: str, *, after: str = "", limit: int = 1000) -> Sequence[str]:
        """:meth:`list_folders` without the folders no key can name (another tool's: nothing in one
        can be read, and a page that ended at one could hand out no cursor), listing on past them:
        one listing more per ``limit`` of those."""
        names: list[str] = []
        while True:
            listed = self.list_folders(prefix, after=after, limit=limit)
            names += [n for n in listed if _SEGMENT.fullmatch(n)]
            if len(names) >= limit or len(listed) < limit:
                return names[:limit]
            after = listed[-1]

    @abc.abstractmethod
    def delete(self, key: str) -> None:
        """Delete if present (deleting a missing key is not an error)."""

    def check_reachable(self) -> None:
        """Raise a :class:`StoreError` now if the store cannot be used."""
        next(iter(self.list("templates/")), None)

    def root_exists(self) -> bool:
        """Whether the store's root (a directory, a bucket) exists. Read-only: unlike
        :meth:`check_reachable`, never creates it. A store with no root to check answers True."""
        return True
