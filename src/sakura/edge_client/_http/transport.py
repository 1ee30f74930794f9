"""HTTP transport for the shard API: keep-alive, timeouts, deadlines, retries, resume, integrity.

Standard library only (``http.client``), so the phone-side library pulls in no HTTP stack.
Every shard is verified against the manifest's length and sha256 before it is returned; a
mismatch is refetched from scratch, never used. An interrupted shard resumes with a ``Range``
request guarded by ``If-Range`` (the shard's strong ETag). In redirect mode the server answers
307 with ``X-Sakura-Range``; the client reads exactly those bytes from the redirect target.

Nothing the server says sizes a read: a document is capped by the caller's limit, a shard by the
length the session checked against the model. Time is bounded too (:mod:`.deadlines`): every
operation must keep up a minimum useful rate, and a watchdog (:mod:`.connections`) unblocks a
request that falls behind, is cancelled or outlives the transport. Redirects follow
:class:`~sakura.edge_client._http.urls.UrlPolicy` and never carry the API key.
"""

from __future__ import annotations

import contextlib
import http.client
import json
import logging
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass

from sakura.edge_client._http.connections import ConnectionPool
from sakura.edge_client._http.deadlines import MIN_USEFUL_RATE, STALLED, CancelFlag, NetworkBudget, Operation, Retryable
from sakura.edge_client._http.responses import (
    RETRYABLE_STATUS,
    Progress,
    Response,
    check_span,
    check_status,
    resume_headers,
    retry_after,
    sakura_range,
    server_error,
    span_headers,
)
from sakura.edge_client._http.urls import Origin, UrlPolicy, origin, request_target
from sakura.edge_client.errors import EdgeError, EditCancelled, ServerError, ShardCorrupt, TransportError
from sakura.edge_client.link import DirectLink, Link
from sakura.platform.integrity import matches
from sakura.platform.retry import RetryPolicy

log = logging.getLogger("sakura.edge_client")

USER_AGENT = "sakura-edge/1"
REDIRECT_STATUS = frozenset({301, 302, 303, 307, 308})
MAX_JSON_BODY = 16 << 20
#: Pooled connections older than this are not reused (uvicorn closes idle ones after 5 s).
IDLE_S = 4.0



class Abandon(Exception):
    """Raised by a progress callback to stop a download on purpose (not retried)."""


@dataclass(frozen=True)
class Reply:
    status: int
    headers: dict[str, str]
    body: bytes
    first_byte_at: float | None = None  # time.monotonic() the response began (status line and headers read)

    def json(self) -> dict:
        try:
            value = json.loads(self.body)
        except (ValueError, RecursionError):  # not UTF-8, not JSON, or a number too long for int()
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
        urls: UrlPolicy = UrlPolicy(),
        min_rate_bytes_per_s: float = MIN_USEFUL_RATE,
        idle_s: float = IDLE_S,
    ) -> None:
        self.urls = urls
        self.base_url = urls.server(base_url)
        self.api_key, self.timeout_s, self.retry = api_key, timeout_s, retry
        self.min_rate = min_rate_bytes_per_s
        self.link: Link = link or DirectLink()
        self.chunk_bytes = chunk_bytes
        self.pool = ConnectionPool(timeout_s=timeout_s, idle_s=idle_s)

    # -- public --------------------------------------------------------------------------
    def get(self, path: str, headers: dict[str, str] | None = None, *, cancel: CancelFlag | None = None,
            limit: int = MAX_JSON_BODY, ride: bool = False) -> Reply:
        """GET a small document (catalogue, manifest) of at most ``limit`` bytes; retries transient
        failures. ``ride``: a shard asked for as a document (the first one, with the preamble), which
        the next shard request may ride behind (:meth:`download`)."""
        op = self._operation(path, cancel, None)
        for attempt in range(1, self.retry.attempts + 1):
            op.begin_attempt()
            try:
                status, resp_headers, body, first = self._document(
                    self.base_url + path, self._headers(headers), limit, op, ride)
                if status in RETRYABLE_STATUS:
                    raise Retryable(f"HTTP {status}", retry_after(resp_headers))
                if status >= 400:
                    raise server_error(status, body)
                return Reply(status, resp_headers, body, first)
            except EdgeError:
                raise
            except (OSError, http.client.HTTPException, Retryable) as exc:
                self._backoff_or_raise(attempt, exc, path, op)
        raise AssertionError("unreachable")

    def download(
        self,
        path: str,
        *,
        sha256: str,
        length: int,
        progress: Progress | None = None,
        cancel: CancelFlag | None = None,
        budget: NetworkBudget | None = None,
        ride: bool = False,
    ) -> Download:
        """Fetch one shard's bytes, resuming after interruptions; raises :class:`Abandon` from
        ``progress``. ``ride``: one of a stream of shard requests, each sent before the response
        ahead of it ends (pipelined behind it on its connection when it can; see :meth:`_exchange`)."""
        op = self._operation(path, cancel, budget)
        received = bytearray()
        first_byte_at: float | None = None
        attempt = resumed = corrupt = 0
        with budget.busy() if budget is not None else contextlib.nullcontext():
            while True:
                attempt += 1
                op.begin_attempt()
                try:
                    if received:
                        resumed += 1
                    # an attempt cut short after its last byte (a stall judged at the end) has nothing left to ask
                    got = self._stream_into(self.base_url + path, received, sha256, length, progress, op, ride) \
                        if len(received) < length else None
                    first_byte_at = first_byte_at or got
                    if matches(received, sha256, length):
                        return Download(bytes(received), op.start, first_byte_at or op.start, time.monotonic(),
                                        attempt, resumed)
                    corrupt += 1
                    received.clear()
                    if corrupt >= self.retry.attempts:
                        raise ShardCorrupt(f"{path}: {corrupt} copies failed their sha256/length check")
                except EdgeError:
                    raise
                except (OSError, http.client.HTTPException, Retryable) as exc:
                    self._backoff_or_raise(attempt - corrupt, exc, path, op)

    def close(self) -> None:
        """Close every connection; downloads in flight stop with a :class:`TransportError`."""
        self.pool.close()
        self.link.close()

    @property
    def closed(self) -> bool:
        """The session closed it: nothing more may be sent."""
        return self.pool.closed

    def _operation(self, what: str, cancel: CancelFlag | None, budget: NetworkBudget | None) -> Operation:
        return Operation(what, timeout_s=self.timeout_s, min_rate=self.min_rate, cancel=cancel, budget=budget,
                         closed=lambda: self.closed)

    def edit_budget(self) -> NetworkBudget:
        """A fresh per-edit deadline (see :class:`NetworkBudget`)."""
        return NetworkBudget(self.retry.attempts * self.timeout_s, self.min_rate)

    # -- one exchange, following redirects --------------------------------------------------
    def _document(self, url: str, headers: dict[str, str], limit: int, op: Operation,
                  ride: bool = False) -> tuple[int, dict[str, str], bytes, float | None]:
        visited = {url}
        while True:
            with self._exchange(url, headers, op, ride=ride) as r:
                if r.resp.status in REDIRECT_STATUS:
                    r.drain()
                    url = self.urls.follow(url, r.resp.getheader("Location"), visited)
                    headers = {"User-Agent": USER_AGENT}  # credentials never go past the first hop
                    continue
                body = bytearray()
                first = r.read_into(body, limit, None, exact=False)
                return r.resp.status, {k.lower(): v for k, v in r.resp.getheaders()}, bytes(body), first

    def _stream_into(
        self, url: str, received: bytearray, sha256: str, length: int, progress: Progress | None, op: Operation,
        ride: bool = False,
    ) -> float | None:
        """One attempt, appending body bytes to ``received``; returns the first byte's time."""
        headers = self._headers(resume_headers(received, sha256))
        span: tuple[int, int] | None = None  # the payload's bytes in the redirect target (X-Sakura-Range)
        visited = {url}
        while True:
            with self._exchange(url, headers, op, ride=ride) as r:
                if r.resp.status in REDIRECT_STATUS:
                    r.drain()
                    span = span or sakura_range(r.resp, length)
                    url = self.urls.follow(url, r.resp.getheader("Location"), visited)
                    headers = {"User-Agent": USER_AGENT, **(span_headers(span, received) if span
                                                            else resume_headers(received, sha256))}
                    continue
                if span is not None:
                    check_span(r, span, received)
                else:
                    check_status(r, received)
                return r.read_into(received, length, progress)

    @contextlib.contextmanager
    def _exchange(self, url: str, headers: dict[str, str], op: Operation, *, ride: bool = False) -> Iterator[Response]:
        """Send one request under the watchdog. ``ride`` (shard requests): sent at once behind the
        response streaming on a :class:`~sakura.edge_client._http.connections.Lane` to the same origin when
        one takes it, so its bytes follow that response's on one connection; its own response opens
        a lane in turn. A reused connection that fails before any response byte (the server closed
        it while idle, or the response ahead failed) is retried on a fresh one, without counting as
        an attempt."""
        op.stop_if_needed()
        where = origin(url, self.urls.schemes)

        def send(conn: http.client.HTTPConnection) -> None:
            conn.request("GET", request_target(url), headers=headers)

        self.link.on_request()
        boarded = self._board(where, send, op) if ride else None
        ways: list[http.client.HTTPConnection | str] = [boarded] if boarded is not None else []
        for way in [*ways, "pooled", "fresh"]:
            if isinstance(way, str):
                conn, reused = self.pool.take(where, fresh=way == "fresh")
            else:
                conn, reused = way, True
            with self.pool.watch(conn, op.check) as watch:
                try:
                    if conn is not boarded:
                        send(conn)
                    resp = conn.getresponse()
                    began = time.monotonic()
                except (OSError, http.client.HTTPException) as exc:
                    conn.close()
                    watch.finish()
                    if reused and isinstance(exc, (ConnectionError, http.client.BadStatusLine)) and op.check() is None:
                        continue
                    raise
                lane = self.pool.open_lane(where, conn) if ride and resp.status in (200, 206) else None
                response = Response(self, where, conn, resp, watch, op, began, lane)
                try:
                    yield response
                finally:
                    response.finish()
                return

    def _board(self, where: Origin, send: Callable[[http.client.HTTPConnection], None],
               op: Operation) -> http.client.HTTPConnection | None:
        """The connection this request was sent on behind a streaming response, once that response
        was read whole (its own is next on it); None if no lane took it, or the response ahead failed."""
        lane = self.pool.board(where, send)
        if lane is None:
            return None
        reason, mine = lane.wait_turn(op.check, self.pool.poll_s)
        if reason is not None:
            if mine:
                lane.conn.close()  # its response is never read
            op.stop_if_needed()
        return lane.conn if mine else None

    def _headers(self, extra: dict[str, str] | None) -> dict[str, str]:
        headers = {"User-Agent": USER_AGENT}
        if self.api_key:
            headers["X-Api-Key"] = self.api_key
        headers.update(extra or {})
        return headers

    def _backoff_or_raise(self, attempt: int, exc: Exception, path: str, op: Operation) -> None:
        reason = op.check()
        if reason == STALLED:
            exc = op.error(reason)  # the watchdog cut a stalled attempt short: retried like a timeout
        elif reason is not None:
            raise op.error(reason) from exc
        if attempt >= self.retry.attempts:
            raise TransportError(f"{path}: gave up after {attempt} attempts: {exc or type(exc).__name__}") from exc
        delay = min(self.retry.delay(attempt, getattr(exc, "retry_after", None)),
                    max(0.0, op.deadline() - time.monotonic()) + 0.01)
        log.info("%s: %s; attempt %d of %d in %.1f s", path, exc or type(exc).__name__, attempt + 1,
                 self.retry.attempts, delay)
        if op.cancel is not None:
            if op.cancel.wait(delay):
                raise EditCancelled("the edit was cancelled")
        else:
            time.sleep(delay)
        reason = op.check()
        if reason not in (None, STALLED):
            raise op.error(reason)
