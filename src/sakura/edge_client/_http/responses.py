"""One HTTP response as the transport reads it: its body into a buffer (paced by the link,
watched by the deadlines), what becomes of its connection afterwards, and the checks of its
status for shard downloads (resume, redirect spans) and for errors."""

from __future__ import annotations

import http.client
import json
from collections.abc import Callable
from typing import Protocol

from sakura.edge_client._http.connections import CLOSE, POOL, ConnectionPool, Lane, Watch
from sakura.edge_client._http.deadlines import Operation, Retryable
from sakura.edge_client._http.urls import Origin
from sakura.edge_client.errors import RedirectError, ServerError
from sakura.edge_client.link import Link
from sakura.platform.layout import parse_number

#: The most digits of an offset in ``X-Sakura-Range``: an object of up to a petabyte.
_SPAN_DIGITS = 15
RETRYABLE_STATUS = frozenset({429, 500, 502, 503, 504})
MAX_ERROR_BODY = 64 << 10

#: Called with (bytes received so far, expected total) after every chunk; may raise :class:`Abandon`.
Progress = Callable[[int, int], None]


class Carrier(Protocol):
    """What a response needs of the transport that read it: where its connection goes back, the
    link that paces its body, and the size of a read."""

    pool: ConnectionPool
    link: Link
    chunk_bytes: int


class Response:
    """Reads one response; the connection goes back to the pool only if the body was read whole
    and the watchdog never touched it."""

    def __init__(self, transport: Carrier, where: Origin, conn: http.client.HTTPConnection,
                 resp: http.client.HTTPResponse, watch: Watch, op: Operation, began: float,
                 lane: Lane | None = None) -> None:
        self.transport, self.where, self.conn, self.resp, self.watch, self.op = transport, where, conn, resp, watch, op
        #: When its first bytes (status line, headers) were read: the link's time for the response
        #: starts there, not at the first body byte a packet later.
        self.began = began
        self.lane = lane  # a request may be waiting behind this response on the connection
        self.complete = False

    def finish(self) -> None:
        whole = self.watch.finish() and self.complete and not self.resp.will_close
        fate = self.lane.finish(whole) if self.lane is not None else POOL if whole else CLOSE
        if fate == POOL:
            self.transport.pool.give_back(self.where, self.conn)
        elif fate == CLOSE:
            self.conn.close()

    def drain(self) -> None:
        self.resp.read(MAX_ERROR_BODY)
        self.complete = self.resp.isclosed()

    def read_into(self, out: bytearray, limit: int, progress: Progress | None, *, exact: bool = True) -> float | None:
        first: float | None = None
        link, size, op = self.transport.link, self.transport.chunk_bytes, self.op
        while self.resp.length is None or self.resp.length > 0:
            chunk = self.resp.read1(size)
            if not chunk:
                break
            first = first or self.began
            if len(out) + len(chunk) > limit:
                if exact:
                    raise Retryable(f"response body exceeds the expected {limit} bytes")
                raise ServerError(self.resp.status, "too_large", f"response exceeds {limit} bytes")
            out += chunk
            op.got(len(chunk))
            link.on_bytes(len(chunk))
            op.stop_if_needed()
            if progress is not None:
                progress(len(out), limit)
        if self.resp.length:
            raise http.client.IncompleteRead(b"", self.resp.length)
        self.resp.read()  # marks the response done so the connection can carry the next request
        self.complete = True
        return first


def resume_headers(received: bytearray, sha256: str) -> dict[str, str]:
    return {"Range": f"bytes={len(received)}-", "If-Range": f'"{sha256}"'} if received else {}


def span_headers(span: tuple[int, int], received: bytearray) -> dict[str, str]:
    return {"Range": f"bytes={span[0] + len(received)}-{span[1]}"}


def sakura_range(resp: http.client.HTTPResponse, length: int) -> tuple[int, int] | None:
    """The payload's bytes at the redirect target, from our server's ``X-Sakura-Range``."""
    span = resp.getheader("X-Sakura-Range")
    if span is None:
        return None  # a plain redirect (e.g. to https): the target serves the shard itself
    # canonical ASCII decimal only: int() also takes " 7", "+7", "7_0" and non-ASCII digits ("\u0667")
    first, _, last = span.removeprefix("bytes=").partition("-")
    start, end = parse_number(first, max_digits=_SPAN_DIGITS), parse_number(last, max_digits=_SPAN_DIGITS)
    if start is None or end is None:
        raise RedirectError(f"redirect with a malformed X-Sakura-Range ({span[:80]!r})")
    if end - start + 1 != length:
        raise RedirectError(f"X-Sakura-Range {span[:80]!r} does not cover the manifest's {length} bytes")
    return start, end


def check_span(r: Response, span: tuple[int, int], received: bytearray) -> None:
    """A redirect target must answer our Range with exactly those bytes (fail fast otherwise)."""
    status = r.resp.status
    if status in RETRYABLE_STATUS:
        r.drain()
        raise Retryable(f"redirect target answered {status}", retry_after(dict(r.resp.getheaders())))
    if status == 200:
        raise RedirectError("the redirect target ignored the Range request (HTTP 200 for the whole object)")
    if status != 206:
        raise ServerError(status, "redirect_failed", f"redirect target answered {status}")
    start = span[0] + len(received)
    content_range = r.resp.getheader("Content-Range", "")
    if not content_range.startswith(f"bytes {start}-{span[1]}/"):
        raise RedirectError(f"the redirect target sent {content_range[:80]!r} for bytes {start}-{span[1]}")


def check_status(r: Response, received: bytearray) -> None:
    status = r.resp.status
    if status in RETRYABLE_STATUS:
        r.drain()
        raise Retryable(f"HTTP {status}", retry_after(dict(r.resp.getheaders())))
    if status == 200:
        received.clear()  # the server ignored our Range (or If-Range failed): start over
    elif status == 206:
        content_range = r.resp.getheader("Content-Range", "")
        if not content_range.startswith(f"bytes {len(received)}-"):
            received.clear()
            raise Retryable(f"unexpected Content-Range {content_range[:80]!r}")
    else:
        raise server_error(status, r.resp.read(MAX_ERROR_BODY))


def retry_after(headers: dict[str, str]) -> float | None:
    value = {k.lower(): v for k, v in headers.items()}.get("retry-after")
    try:
        return max(0.0, float(value)) if value is not None else None
    except ValueError:
        return None


def server_error(status: int, body: bytes) -> ServerError:
    try:
        doc = json.loads(body[:MAX_ERROR_BODY])
        return ServerError(status, str(doc.get("code", "http_error")), str(doc.get("message", ""))[:500])
    except (ValueError, AttributeError, RecursionError):
        return ServerError(status, "http_error", f"HTTP {status}")
