"""Every request's metrics and access line, and the caps on headers and on the request target: a
pure ASGI middleware.

Pure ASGI rather than ``@app.middleware("http")``: Starlette's ``BaseHTTPMiddleware`` runs the
app in a task of its own and re-streams the response body through a memory channel, work on every
request (``bench/serve_load`` saw a change within its noise; it is gone because it is work).
Latency is taken when the last body byte has been handed to the server.
"""

from __future__ import annotations

import logging
import time
from typing import Any

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from sakura.serve.errors import error_response
from sakura.serve.metrics import UNMATCHED_ROUTE, ServeMetrics

MAX_HEADER_BYTES = 16 << 10
#: The longest request target (path and query) the service reads: its own longest URL is a few
#: hundred bytes; anything far longer is refused before a route parses it.
MAX_TARGET_BYTES = 8 << 10
#: Under Ray Serve's logger, so a replica writes it with Serve's logging_config (JSON: one object
#: per request, these fields beside Serve's request_id, route, replica...); outside Serve, where
#: nothing configures ``ray.serve``, an application adds its own handler.
access_log = logging.getLogger("ray.serve.sakura.access")
#: The fields of an access line, as a JSON formatter writes each request's.
ACCESS_FIELDS = ("http_method", "http_path", "http_status", "response_bytes", "latency_ms", "api_route")


class AccessMiddleware:
    def __init__(self, app: ASGIApp, metrics: ServeMetrics) -> None:
        self.app, self.metrics = app, metrics

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        start = time.perf_counter()
        answer: dict[str, Any] = {"status": 500, "bytes": 0}

        async def observed(message: Message) -> None:
            if message["type"] == "http.response.start":
                answer["status"] = message["status"]
                length = dict(message.get("headers", ())).get(b"content-length", b"0")
                answer["bytes"] = int(length) if length.isdigit() else 0
            await send(message)

        try:
            if sum(len(k) + len(v) for k, v in scope.get("headers", [])) > MAX_HEADER_BYTES:
                await error_response(431, "headers_too_large", f"request headers exceed {MAX_HEADER_BYTES} bytes")(
                    scope, receive, observed)
            elif len(scope.get("raw_path") or scope["path"]) + len(scope.get("query_string", b"")) > MAX_TARGET_BYTES:
                await error_response(414, "uri_too_long", f"the request target exceeds {MAX_TARGET_BYTES} bytes")(
                    scope, receive, observed)
            else:
                await self.app(scope, receive, observed)
        finally:  # an error no handler caught is answered 500 further out, and counted as one here
            self._record(scope, answer["status"], answer["bytes"], time.perf_counter() - start)

    def _record(self, scope: Scope, status: int, size: int, elapsed: float) -> None:
        route = getattr(scope.get("route"), "path", UNMATCHED_ROUTE)
        self.metrics.request(route, status, size, elapsed)
        method, path = loggable(scope["method"]), loggable(scope["path"][:MAX_TARGET_BYTES])
        fields = (method, path, status, size, round(elapsed * 1000, 2), route)
        access_log.info("%s %s %s %d B %.2f ms", *fields[:5], extra=dict(zip(ACCESS_FIELDS, fields)))


def loggable(text: str) -> str:
    """``text`` as one field of a log line: every character that is not printable (a line break,
    an escape sequence, U+2028), a space and a backslash written as Python escapes them
    (``\\n``, ``\\x20``, ``\\\\``), so what a client sent (``%0A`` or ``%20`` in a path) can
    neither forge a line of a plain-text log nor a field of one, and an escape it typed stays
    apart from one made here; other text as it is."""
    if text.isprintable() and " " not in text and "\\" not in text:
        return text
    return "".join(c if c.isprintable() and c not in " \\" else _escaped(c) for c in text)


def _escaped(char: str) -> str:
    return "\\x20" if char == " " else char.encode("unicode_escape").decode("ascii")
