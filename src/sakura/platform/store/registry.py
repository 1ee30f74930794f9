"""Stores by URI scheme: ``file://`` (and bare paths) and ``s3://``; more via :func:`register_scheme`."""

from __future__ import annotations

from typing import Callable
from urllib.parse import urlparse

from sakura.platform.store.base import ObjectStore, StoreError
from sakura.platform.store.retry import RetryingStore, RetryPolicy

Factory = Callable[[str], ObjectStore]
_SCHEMES: dict[str, Factory] = {}


def register_scheme(scheme: str, factory: Factory) -> None:
    _SCHEMES[scheme] = factory


def _local(uri: str) -> ObjectStore:
    from sakura.platform.store.local import LocalStore

    parsed = urlparse(uri)
    if parsed.netloc not in ("", "localhost"):
        raise StoreError(f"file:// URIs name a local path, not host {parsed.netloc!r}: {uri}")
    return LocalStore(parsed.path)


def _s3(uri: str) -> ObjectStore:
    from sakura.platform.store.s3 import S3Store

    return S3Store(uri)


register_scheme("file", _local)
register_scheme("s3", _s3)


def open_store(uri: str, *, retry: RetryPolicy | None = RetryPolicy()) -> ObjectStore:
    """The store a URI names; a relative ``file://./dir`` or a bare path is a local directory."""
    if "://" not in uri:
        uri = "file://" + uri
    if uri.startswith("file://./") or uri.startswith("file://../"):
        from pathlib import Path

        uri = Path(uri[len("file://"):]).resolve().as_uri()
    scheme = urlparse(uri).scheme
    factory = _SCHEMES.get(scheme)
    if factory is None:
        raise StoreError(f"unsupported store scheme {scheme!r} in {uri!r}; known: {sorted(_SCHEMES)}")
    store = factory(uri)
    return RetryingStore(store, retry) if retry is not None else store
