"""``s3://bucket/prefix`` stores through boto3, for AWS or any S3-compatible service.

The endpoint comes from ``?endpoint=URL`` in the URI, else ``SAKURA_S3_ENDPOINT``, else boto3's
own configuration (``AWS_ENDPOINT_URL``...); credentials from the standard AWS chain.
Create-only writes send ``If-None-Match: *``.
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Sequence
from typing import Any, Literal
from urllib.parse import parse_qs, urlparse

from sakura.platform.store.base import (
    AlreadyExists,
    NotFound,
    ObjectInfo,
    ObjectStore,
    PreconditionFailed,
    StoreError,
    TransientStoreError,
    check_key,
    cursor_prefixes,
    folder_after,
    folder_key,
    listing_complete,
)

_TRANSIENT_CODES = {"SlowDown", "RequestTimeout", "InternalError", "ServiceUnavailable", "Throttling",
                    "ConditionalRequestConflict", "503", "500", "502", "504"}
_MISSING_CODES = {"NoSuchKey", "404", "NotFound"}
#: A cursor with at most this many :func:`cursor_prefixes` has each asked about at once (a template
#: id rarely has more "-" or "." in it); past it, first whether any key begins with them.
_DIRECT_PROBES = 4


#: The query keys an s3:// URI may carry.
QUERY_KEYS = ("endpoint",)
#: What an S3 client in another process (a Ray actor or replica) needs from this one's environment.
CLIENT_ENV = ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_DEFAULT_REGION", "AWS_REGION",
              "AWS_ENDPOINT_URL", "AWS_ENDPOINT_URL_S3", "AWS_CA_BUNDLE", "SAKURA_S3_ENDPOINT")


class S3Store(ObjectStore):
    def __init__(self, uri: str, client: Any | None = None) -> None:
        parsed = urlparse(uri)
        if parsed.scheme != "s3" or not parsed.netloc:
            raise StoreError(f"not an s3:// URI: {uri!r}")
        self.bucket = parsed.netloc
        self.prefix = parsed.path.strip("/")
        query = parse_qs(parsed.query, keep_blank_values=True)
        unknown = sorted(set(query) - set(QUERY_KEYS))
        if unknown:
            raise StoreError(f"store URI {_without_query(uri)!r}: unknown query key {unknown[0]!r}; "
                             f"an s3:// URI takes {', '.join(f'?{k}=' for k in QUERY_KEYS)} only "
                             "(e.g. s3://bucket/prefix?endpoint=http://127.0.0.1:9000)")
        endpoint = query.get("endpoint", [os.environ.get("SAKURA_S3_ENDPOINT")])[0]
        self.uri = f"s3://{self.bucket}/{self.prefix}".rstrip("/")
        self.endpoint = endpoint
        self._client = client or _make_client(endpoint)

    def _key(self, key: str) -> str:
        check_key(key)
        return f"{self.prefix}/{key}" if self.prefix else key

    def get(self, key: str, byte_range: tuple[int, int] | None = None) -> bytes:
        kwargs: dict[str, Any] = {"Bucket": self.bucket, "Key": self._key(key)}
        if byte_range is not None:
            start, end = byte_range
            if not 0 <= start <= end:
                raise StoreError(f"invalid byte range {byte_range}")
            if start == end:
                return b""
            kwargs["Range"] = f"bytes={start}-{end - 1}"
        with self._errors(key):
            return self._client.get_object(**kwargs)["Body"].read()

    def head(self, key: str) -> ObjectInfo | None:
        try:
            with self._errors(key):
                response = self._client.head_object(Bucket=self.bucket, Key=self._key(key))
        except NotFound:
            return None
        return ObjectInfo(key, int(response["ContentLength"]), response["ETag"])

    def put(self, key: str, data: bytes) -> ObjectInfo:
        with self._errors(key):
            response = self._client.put_object(Bucket=self.bucket, Key=self._key(key), Body=data)
        return ObjectInfo(key, len(data), response["ETag"])

    def put_if_absent(self, key: str, data: bytes) -> ObjectInfo:
        try:
            with self._errors(key):
                response = self._client.put_object(Bucket=self.bucket, Key=self._key(key), Body=data, IfNoneMatch="*")
        except PreconditionFailed:
            raise AlreadyExists(f"{self.uri}/{key} already exists") from None
        return ObjectInfo(key, len(data), response["ETag"])

    def list(self, prefix: str = "") -> Iterator[ObjectInfo]:
        full = f"{self.prefix}/{prefix}" if self.prefix else prefix
        strip = len(self.prefix) + 1 if self.prefix else 0
        paginator = self._client.get_paginator("list_objects_v2")
        with self._errors(prefix or "/"):
            pages = list(paginator.paginate(Bucket=self.bucket, Prefix=full))
        for page in pages:
            for obj in page.get("Contents", []):
                yield ObjectInfo(obj["Key"][strip:], int(obj["Size"]), obj["ETag"])

    def list_folders(self, prefix: str, *, after: str = "", limit: int = 1000) -> Sequence[str]:
        """Servers list common prefixes in key order (AWS) or by entry name (SeaweedFS), and start
        after a key or after an entry name: asking from ``after`` itself, with its prefixes that
        folder order puts after it asked for apiece (:func:`cursor_prefixes`), and reading on
        until nothing still to come can sort before the page (:func:`listing_complete`), gives
        the same page from either."""
        full = f"{self.prefix}/{prefix}" if self.prefix else prefix
        kwargs: dict[str, Any] = {"Bucket": self.bucket, "Prefix": full, "Delimiter": "/",
                                  "MaxKeys": min(limit + 1, 1000)}
        with self._errors(prefix or "/"):
            names = self._cursor_folders(full, after)
            if after:
                kwargs["StartAfter"] = full + after
            while True:
                page = self._client.list_objects_v2(**kwargs)
                listed = [p["Prefix"][len(full):].rstrip("/") for p in page.get("CommonPrefixes", [])]
                names.update(n for n in listed if folder_after(n, after))
                chosen = sorted(names, key=folder_key)[:limit]
                done = len(chosen) == limit and bool(listed) and listing_complete(chosen, listed[-1])
                if done or not page.get("IsTruncated"):
                    return chosen
                kwargs["ContinuationToken"] = page["NextContinuationToken"]

    def _cursor_folders(self, full: str, after: str) -> set[str]:
        """Which of ``after``'s :func:`cursor_prefixes` are folders: a request each, for those that
        begin some key only. A cursor is the client's word ("a-a-a-...": up to 127 prefixes), so past
        :data:`_DIRECT_PROBES` of them a request for the longest, then a bisection, finds those (each
        prefix extends the one before: they are a leading run). A request costs what the store's own
        names allow (one per prefix a key shares, ``log2(prefixes) + 1`` more), never what the
        cursor's length asks; a cursor the service handed out, all of whose prefixes begin its own
        folder's keys, pays the one request for the longest."""
        prefixes = cursor_prefixes(after)
        if len(prefixes) > _DIRECT_PROBES and not self._has_key(full + prefixes[-1]):
            live, dead = 0, len(prefixes) - 1  # prefixes[:live] may begin keys, prefixes[dead:] do not
            while live < dead:
                mid = (live + dead) // 2
                live, dead = (mid + 1, dead) if self._has_key(full + prefixes[mid]) else (live, mid)
            prefixes = prefixes[:live]
        return {p for p in prefixes if self._has_key(full + p + "/")}

    def _has_key(self, full_prefix: str) -> bool:
        """Whether some key begins with ``full_prefix`` (one request, whatever the listing order)."""
        return bool(self._client.list_objects_v2(Bucket=self.bucket, Prefix=full_prefix, MaxKeys=1).get("KeyCount"))

    def delete(self, key: str) -> None:
        with self._errors(key):
            self._client.delete_object(Bucket=self.bucket, Key=self._key(key))

    def check_reachable(self) -> None:
        try:
            with self._errors("/"):
                self._client.head_bucket(Bucket=self.bucket)
        except NotFound:
            raise NotFound(f"bucket {self.bucket!r} does not exist at {self.endpoint or 'the default AWS endpoint'}: "
                           "create it, or fix the bucket name or ?endpoint= in the store URI") from None

    def root_exists(self) -> bool:
        try:
            self.check_reachable()
        except NotFound:
            return False
        return True

    def presigned_url(self, key: str, expires_s: int = 300) -> str:
        return self._client.generate_presigned_url(
            "get_object", Params={"Bucket": self.bucket, "Key": self._key(key)}, ExpiresIn=expires_s
        )

    def _errors(self, key: str) -> _S3Errors:
        return _S3Errors(f"{self.uri}/{key}")


class _S3Errors:
    """Map botocore's exceptions onto the store's typed errors."""

    def __init__(self, where: str) -> None:
        self.where = where

    def __enter__(self) -> None:
        return None

    def __exit__(self, exc_type: type | None, exc: BaseException | None, tb: object) -> Literal[False]:
        if exc is None or isinstance(exc, StoreError):
            return False
        from botocore.exceptions import BotoCoreError, ClientError, ConnectionError, HTTPClientError, NoCredentialsError

        if isinstance(exc, ClientError):
            code = str(exc.response.get("Error", {}).get("Code", ""))
            status = str(exc.response.get("ResponseMetadata", {}).get("HTTPStatusCode", ""))
            if code in _MISSING_CODES or status == "404":
                raise NotFound(f"{self.where} not found") from None
            if code == "PreconditionFailed" or status == "412":
                raise PreconditionFailed(f"{self.where}: precondition failed") from None
            if code in _TRANSIENT_CODES or status.startswith("5"):
                raise TransientStoreError(f"{self.where}: {code or status}") from exc
            raise StoreError(f"{self.where}: {code or status}: {exc}") from exc
        if isinstance(exc, (ConnectionError, HTTPClientError)):
            raise TransientStoreError(f"{self.where}: {exc}") from exc
        if isinstance(exc, NoCredentialsError):
            raise StoreError(f"{self.where}: no S3 credentials found: set AWS_ACCESS_KEY_ID and "
                             "AWS_SECRET_ACCESS_KEY (or AWS_PROFILE, ~/.aws/credentials, or an IAM role on "
                             "the machine); on a Ray cluster every node needs them") from None
        if isinstance(exc, BotoCoreError):
            raise StoreError(f"{self.where}: {exc}") from exc
        return False


def _without_query(uri: str) -> str:
    return uri.split("?", 1)[0]


def _make_client(endpoint: str | None) -> Any:
    import boto3
    from botocore.config import Config

    config = Config(connect_timeout=3, read_timeout=30, retries={"max_attempts": 1, "mode": "standard"},
                    s3={"addressing_style": "path"})
    return boto3.session.Session().client("s3", endpoint_url=endpoint, config=config)
