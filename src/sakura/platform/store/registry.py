"""Stores by URI scheme: ``file://`` (and bare paths) and ``s3://``; more via :func:`register_scheme`."""

from __future__ import annotations

import os
import re
from collections.abc import Callable
from pathlib import Path
from urllib.parse import urlparse

from sakura.platform.retry import RetryPolicy
from sakura.platform.store.base import ObjectStore, StoreError
from sakura.platform.store.retry import RetryingStore

Factory = Callable[[str], ObjectStore]
_SCHEMES: dict[str, Factory] = {}


def register_scheme(scheme: str, factory: Factory) -> None:
    _SCHEMES[scheme] = factory


def _local(uri: str) -> ObjectStore:
    from sakura.platform.store.local import LocalStore

    parsed = urlparse(uri)
    if parsed.netloc not in ("", "localhost"):
        raise StoreError(f"file:// URIs name a local path, not host {parsed.netloc!r}: {uri}")
    if not parsed.path.strip():
        raise StoreError(f"store URI {uri!r} names no directory; use file://./DIR or file:///abs/DIR")
    root = Path(parsed.path).expanduser().resolve()
    if root == Path(root.anchor):
        raise StoreError(f"store URI {uri!r} is the filesystem root; name a directory for the library")
    return LocalStore(root)


def _s3(uri: str) -> ObjectStore:
    from sakura.platform.store.s3 import S3Store

    return S3Store(uri)


register_scheme("file", _local)
register_scheme("s3", _s3)


def store_environment(*uris: str) -> dict[str, str]:
    """The environment variables of this process that the stores ``uris`` name need wherever they
    are opened (S3 credentials, region and endpoint for s3:// URIs): what a Ray job hands the
    actors and replicas it starts, which otherwise see only their node's environment."""
    if not any(urlparse(uri).scheme == "s3" for uri in uris):
        return {}
    from sakura.platform.store.s3 import CLIENT_ENV

    return {name: os.environ[name] for name in CLIENT_ENV if os.environ.get(name)}


def open_store(uri: str, *, retry: RetryPolicy | None = RetryPolicy()) -> ObjectStore:
    """The store a URI names; a relative ``file://./dir`` or a bare path is a local directory.

    A URI that names no directory (``file://``, an empty path) or the filesystem root is refused:
    it is almost always an unset variable, and the library would land in the current directory or /.
    """
    if not uri.strip():
        raise StoreError("empty store URI; use file://./DIR, file:///abs/DIR or s3://bucket/prefix")
    if "://" not in uri:
        if uri.lower().startswith("file:"):
            raise StoreError(f"store URI {uri!r} is not file://PATH; use file://./DIR or file:///abs/DIR")
        prefix = re.match(r"([a-z][a-z0-9+.-]*):", uri.lower())
        if prefix and len(prefix.group(1)) > 1:  # not a Windows drive letter
            raise StoreError(f"store URI {uri!r} is malformed: write {prefix.group(1)}://... (two slashes), "
                             "e.g. s3://bucket/prefix or file://./DIR")
        uri = Path(uri).expanduser().resolve().as_uri()  # a bare path is a local folder
    if uri.startswith("file:") and "?" in uri:
        raise StoreError(f"store URI {uri!r}: a file:// URI takes no query (?{uri.split('?', 1)[1]})")
    if uri.startswith("file://./") or uri.startswith("file://../"):
        uri = Path(uri[len("file://"):]).resolve().as_uri()
    scheme = urlparse(uri).scheme
    factory = _SCHEMES.get(scheme)
    if factory is None:
        raise StoreError(f"unsupported store scheme {scheme!r} in {uri!r}; known: {sorted(_SCHEMES)}")
    store = factory(uri)
    return RetryingStore(store, retry) if retry is not None else store
