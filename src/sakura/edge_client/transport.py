"""HTTP transport for the shard API: keep-alive, timeouts, retries, resume, integrity.

Standard library only (``http.client``), so the phone-side library pulls in no HTTP stack.
Every shard is verified against the manifest's length and sha256 before it is returned; a
mismatch is refetched from scratch, never used. An interrupted shard resumes with a ``Range``
request guarded by ``If-Range`` (the shard's strong ETag). In redirect mode the server answers
307 with ``X-Sakura-Range``; the client reads those bytes from the redirect target, without
sending it the API key.
"""

from __future__ import annotations

import hashlib
import http.client
import json
import random
import threading
import time
from dataclasses import dataclass
from typing import Callable
from urllib.parse import urljoin, urlsplit

from sakura.edge_client.errors import EditCancelled, ServerError, ShardCorrupt, TransportError
from sakura.edge_client.link import DirectLink, Link

USER_AGENT = "sakura-edge/1"
RETRYABLE_STATUS = frozenset({429, 500, 502, 503, 504})
MAX_ERROR_BODY = 64 << 10
MAX_JSON_BODY = 16 << 20

#: Called with (bytes received so far, expected total) after every chunk; may raise :class:`Abandon`.
Progress = Callable[[int, int], None]


class Abandon(Exception):
    """Raised by a progress callback to stop a download on purpose (not retried)."""


@dataclass(frozen=True)
class RetryPolicy:
    attempts: int = 5
    backoff_s: float = 0.1
    max_backoff_s: float = 2.0

    def delay(self, attempt: int, retry_after: float | None) -> float:
        """Exponential backoff with jitter; a server's ``Retry-After`` is honoured up to the cap."""
        base = min(self.max_backoff_s, self.backoff_s * 2 ** (attempt - 1))
        if retry_after is not None:
            base = max(base, min(retry_after, self.max_backoff_s))
        return base * (0.75 + 0.5 * random.random())


@dataclass(frozen=True)
class Reply:
    status: int
    headers: dict[str, str]
    body: bytes

    def json(self) -> dict:
        try:
            value = json.loads(self.body)
        except (UnicodeDecodeError, json.JSONDecodeError):
            raise ServerError(self.status, "bad_json", "the server's answer is not JSON") from None
        if not isinstance(value, dict):
            raise ServerError(self.status, "bad_json", "the server's answer is not a JSON object")
        return value


@dataclass(frozen=True)
class Download:
    data: bytes
    requested_at: float  # time.monotonic() of the first request
    first_byte_at: float
    arrived_at: float
    attempts: int
    resumed: int


class _Retryable(Exception):
    def __init__(self, message: str, retry_after: float | None = None) -> None:
        super().__init__(message)
        self.retry_after = retry_after


class HttpTransport:
    def __init__(
        self,
        base_url: str,
        *,
        api_key: str | None = None,
        timeout_s: float = 10.0,
        retry: RetryPolicy = RetryPolicy(),
        link: Link | None = None,
        chunk_bytes: int = 16 << 10,
    ) -> None:
        parts = urlsplit(base_url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValueError(f"server URL must be http(s)://host[:port][/prefix], got {base_url!r}")
        self.base_url = base_url.rstrip("/")
        self.api_key, self.timeout_s, self.retry = api_key, timeout_s, retry
        self.link: Link = link or DirectLink()
        self.chunk_bytes = chunk_bytes
        self._idle: dict[tuple[str, str, int], list[http.client.HTTPConnection]] = {}
        self._lock = threading.Lock()

    # -- public --------------------------------------------------------------------------
    def get(self, path: str, headers: dict[str, str] | None = None, *, cancel: threading.Event | None = None) -> Reply:
        """GET a small document (catalogue, manifest); retries transient failures."""
        for attempt in range(1, self.retry.attempts + 1):
            try:
                status, resp_headers, body = self._request(self.base_url + path, self._headers(headers), MAX_JSON_BODY)
                if status in RETRYABLE_STATUS:
                    raise _Retryable(f"HTTP {status}", _retry_after(resp_headers))
                if status >= 400:
                    raise _server_error(status, body)
                return Reply(status, resp_headers, body)
            except (OSError, http.client.HTTPException, _Retryable) as exc:
                self._backoff_or_raise(attempt, exc, path, cancel)
        raise AssertionError("unreachable")

    def download(
        self,
        path: str,
        *,
        sha256: str,
        length: int,
        progress: Progress | None = None,
        cancel: threading.Event | None = None,
    ) -> Download:
        """Fetch one shard's bytes, resuming after interruptions; raises :class:`Abandon` from ``progress``."""
        received = bytearray()
        requested_at = time.monotonic()
        first_byte_at: float | None = None
        attempt = resumed = corrupt = 0
        while True:
            attempt += 1
            try:
                if received:
                    resumed += 1
                got = self._stream_into(path, received, sha256, length, progress, cancel)
                first_byte_at = first_byte_at or got
                if len(received) == length and hashlib.sha256(received).hexdigest() == sha256:
                    return Download(bytes(received), requested_at, first_byte_at, time.monotonic(), attempt, resumed)
                corrupt += 1
                received.clear()
                if corrupt >= self.retry.attempts:
                    raise ShardCorrupt(f"{path}: {corrupt} copies failed their sha256/length check")
            except (OSError, http.client.HTTPException, _Retryable) as exc:
                self._backoff_or_raise(attempt - corrupt, exc, path, cancel)

    def close(self) -> None:
        with self._lock:
            idle, self._idle = self._idle, {}
        for conns in idle.values():
            for conn in conns:
                conn.close()

    # -- one attempt ---------------------------------------------------------------------
    def _stream_into(
        self, path: str, received: bytearray, sha256: str, length: int,
        progress: Progress | None, cancel: threading.Event | None,
    ) -> float | None:
        """One request, appending body bytes to ``received``; returns the first byte's time."""
        headers = self._headers(None)
        if received:
            headers.update({"Range": f"bytes={len(received)}-", "If-Range": f'"{sha256}"'})
        url = self.base_url + path
        conn, resp = self._open(url, headers)
        with _Response(self, url, conn, resp) as r:
            if resp.status == 307:
                r.drain()
                target, span = _redirect_target(url, resp)
                return self._stream_redirect(target, span, received, length, progress, cancel)
            self._check_status(resp, received, length)
            return r.read_into(received, length, progress, cancel)

    def _stream_redirect(
        self, url: str, span: tuple[int, int], received: bytearray, length: int,
        progress: Progress | None, cancel: threading.Event | None,
    ) -> float | None:
        start, end = span
        if end - start + 1 != length:
            raise ServerError(307, "bad_redirect", f"X-Sakura-Range covers {end - start + 1} bytes, the manifest {length}")
        headers = {"User-Agent": USER_AGENT, "Range": f"bytes={start + len(received)}-{end}"}
        conn, resp = self._open(url, headers)
        with _Response(self, url, conn, resp) as r:
            if resp.status != 206:
                r.drain()
                if resp.status in RETRYABLE_STATUS or resp.status == 200:
                    raise _Retryable(f"redirect target answered {resp.status}")
                raise ServerError(resp.status, "redirect_failed", f"redirect target answered {resp.status}")
            return r.read_into(received, length, progress, cancel)

    def _check_status(self, resp: http.client.HTTPResponse, received: bytearray, length: int) -> None:
        if resp.status in RETRYABLE_STATUS:
            raise _Retryable(f"HTTP {resp.status}", _retry_after(dict(resp.getheaders())))
        if resp.status == 200:
            received.clear()  # the server ignored our Range (or If-Range failed): start over
        elif resp.status == 206:
            content_range = resp.getheader("Content-Range", "")
            if not content_range.startswith(f"bytes {len(received)}-"):
                received.clear()
                raise _Retryable(f"unexpected Content-Range {content_range!r}")
        else:
            raise _server_error(resp.status, resp.read(MAX_ERROR_BODY))

    # -- connections ---------------------------------------------------------------------
    def _open(self, url: str, headers: dict[str, str]) -> tuple[http.client.HTTPConnection, http.client.HTTPResponse]:
        parts = urlsplit(url)
        conn = self._take(_origin(url))
        target = parts.path + (f"?{parts.query}" if parts.query else "")
        self.link.on_request()
        try:
            conn.request("GET", target, headers=headers)
            return conn, conn.getresponse()
        except BaseException:
            conn.close()
            raise

    def _request(self, url: str, headers: dict[str, str], limit: int) -> tuple[int, dict[str, str], bytes]:
        conn, resp = self._open(url, headers)
        with _Response(self, url, conn, resp) as r:
            body = bytearray()
            r.read_into(body, limit, None, None, exact=False)
            return resp.status, {k.lower(): v for k, v in resp.getheaders()}, bytes(body)

    def _take(self, origin: tuple[str, str, int]) -> http.client.HTTPConnection:
        with self._lock:
            pool = self._idle.get(origin)
            if pool:
                return pool.pop()
        cls = http.client.HTTPSConnection if origin[0] == "https" else http.client.HTTPConnection
        return cls(origin[1], origin[2], timeout=self.timeout_s)

    def _give_back(self, url: str, conn: http.client.HTTPConnection) -> None:
        with self._lock:
            self._idle.setdefault(_origin(url), []).append(conn)

    def _headers(self, extra: dict[str, str] | None) -> dict[str, str]:
        headers = {"User-Agent": USER_AGENT}
        if self.api_key:
            headers["X-Api-Key"] = self.api_key
        headers.update(extra or {})
        return headers

    def _backoff_or_raise(self, attempt: int, exc: Exception, path: str, cancel: threading.Event | None) -> None:
        if attempt >= self.retry.attempts:
            raise TransportError(f"{path}: gave up after {attempt} attempts: {exc or type(exc).__name__}") from exc
        delay = self.retry.delay(attempt, getattr(exc, "retry_after", None))
        if cancel is not None:
            if cancel.wait(delay):
                raise EditCancelled("the edit was cancelled")
        else:
            time.sleep(delay)


class _Response:
    """Reads one response; the connection goes back to the pool only if the body was read whole."""

    def __init__(self, transport: HttpTransport, url: str, conn: http.client.HTTPConnection, resp: http.client.HTTPResponse) -> None:
        self.transport, self.url, self.conn, self.resp = transport, url, conn, resp
        self.complete = False

    def __enter__(self) -> "_Response":
        return self

    def __exit__(self, *exc: object) -> None:
        if self.complete and not self.resp.will_close:
            self.transport._give_back(self.url, self.conn)
        else:
            self.conn.close()

    def drain(self) -> None:
        self.resp.read(MAX_ERROR_BODY)
        self.complete = self.resp.isclosed()

    def read_into(
        self, out: bytearray, limit: int, progress: Progress | None, cancel: threading.Event | None, *, exact: bool = True,
    ) -> float | None:
        first: float | None = None
        link, size = self.transport.link, self.transport.chunk_bytes
        while self.resp.length is None or self.resp.length > 0:
            chunk = self.resp.read1(size)
            if not chunk:
                break
            first = first or time.monotonic()
            if len(out) + len(chunk) > limit:
                if exact:
                    raise _Retryable(f"response body exceeds the expected {limit} bytes")
                raise ServerError(self.resp.status, "too_large", f"response exceeds {limit} bytes")
            out += chunk
            link.on_bytes(len(chunk))
            if cancel is not None and cancel.is_set():
                raise EditCancelled("the edit was cancelled")
            if progress is not None:
                progress(len(out), limit)
        if self.resp.length:
            raise http.client.IncompleteRead(bytes(), self.resp.length)
        self.resp.read()  # marks the response done so the connection can carry the next request
        self.complete = True
        return first


def _origin(url: str) -> tuple[str, str, int]:
    """(scheme, host, port): the key of a connection pool."""
    parts = urlsplit(url)
    return parts.scheme, parts.hostname or "", parts.port or (443 if parts.scheme == "https" else 80)


def _redirect_target(url: str, resp: http.client.HTTPResponse) -> tuple[str, tuple[int, int]]:
    location, span = resp.getheader("Location"), resp.getheader("X-Sakura-Range", "")
    try:
        start, end = (int(x) for x in span.removeprefix("bytes=").split("-"))
    except ValueError:
        raise ServerError(307, "bad_redirect", f"redirect without a valid X-Sakura-Range ({span!r})") from None
    if not location or start < 0 or end < start:
        raise ServerError(307, "bad_redirect", "redirect without a Location or with an empty range")
    return urljoin(url, location), (start, end)


def _retry_after(headers: dict[str, str]) -> float | None:
    value = {k.lower(): v for k, v in headers.items()}.get("retry-after")
    try:
        return max(0.0, float(value)) if value is not None else None
    except ValueError:
        return None


def _server_error(status: int, body: bytes) -> ServerError:
    try:
        doc = json.loads(body[:MAX_ERROR_BODY])
        return ServerError(status, str(doc.get("code", "http_error")), str(doc.get("message", ""))[:500])
    except (ValueError, AttributeError):
        return ServerError(status, "http_error", f"HTTP {status}")
