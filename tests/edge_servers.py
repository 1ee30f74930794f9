"""Servers for edge-client tests: the real shard API on uvicorn (no Ray), and an HTTP proxy in
front of any server that records every request and injects faults."""

from __future__ import annotations

import http.client
import http.server
import re
import socket
import struct
import threading
import time
from dataclasses import dataclass, field


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class ApiServer:
    """``sakura.serve.api`` (the same app Ray Serve runs) on uvicorn in a thread."""

    def __init__(self, store: str, *, keep_alive_s: int = 5, **config: object) -> None:
        import uvicorn

        from sakura.serve.api import create_api
        from sakura.serve.config import ServeConfig

        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        app = create_api(ServeConfig(store=store, **config))
        self._server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=self.port, log_level="warning",
                                                     timeout_keep_alive=keep_alive_s))
        self._thread = threading.Thread(target=self._server.run, daemon=True)

    def __enter__(self) -> ApiServer:
        self._thread.start()
        deadline = time.time() + 30
        while not self._server.started:
            if time.time() > deadline:
                raise RuntimeError("uvicorn did not start")
            time.sleep(0.02)
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.should_exit = True
        self._thread.join(timeout=10)


@dataclass
class Recorded:
    method: str
    path: str
    headers: dict[str, str]
    body: bytes
    client_port: int


@dataclass
class Fault:
    """``action`` for the next ``times`` requests whose path matches ``pattern``."""

    pattern: str
    action: str  # "reset:<bytes>", "status:<code>", "corrupt", "hang"
    times: int = 1
    hits: int = field(default=0)
    #: "hang": requests the server holds now (it answers none; each is held for ``HANG_S`` or
    #: until the proxy stops), so a test can tell that a client gave up before the server did.
    held: int = field(default=0)


class LoopbackServer:
    """A threaded standard-library HTTP server on a free 127.0.0.1 port, run in a thread while
    used as a context manager; ``stopping`` is set first, so handlers that wait can return."""

    def __init__(self, handler: type[http.server.BaseHTTPRequestHandler]) -> None:
        self.stopping = threading.Event()
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self._server = http.server.ThreadingHTTPServer(("127.0.0.1", self.port), handler)
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    def __enter__(self):
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stopping.set()
        self._server.shutdown()
        self._server.server_close()


#: How long the proxy holds a request it hangs: far longer than any client here waits for one,
#: so that a request still held when a client returns shows the client did not wait for it.
HANG_S = 60.0


class FaultProxy(LoopbackServer):
    def __init__(self, upstream_port: int) -> None:
        self.upstream_port = upstream_port
        self.requests: list[Recorded] = []
        self.faults: list[Fault] = []
        self.lock = threading.Lock()
        proxy = self

        class Handler(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: object) -> None:
                return None

            def _any(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(length) if length else b""
                with proxy.lock:
                    proxy.requests.append(
                        Recorded(self.command, self.path, dict(self.headers.items()), body, self.client_address[1])
                    )
                proxy._handle(self, self._fault())

            def _fault(self) -> Fault | None:
                with proxy.lock:
                    for fault in proxy.faults:
                        if fault.hits < fault.times and re.search(fault.pattern, self.path):
                            fault.hits += 1
                            return fault
                return None

            do_GET = do_PUT = do_POST = do_HEAD = _any

        super().__init__(Handler)

    def add(self, pattern: str, action: str, times: int = 1) -> Fault:
        fault = Fault(pattern, action, times)
        with self.lock:
            self.faults.append(fault)
        return fault

    def shard_requests(self) -> list[Recorded]:
        return [r for r in self.requests if "/shards/" in r.path]

    # -- forwarding ----------------------------------------------------------------------
    def _handle(self, h: http.server.BaseHTTPRequestHandler, fault: Fault | None) -> None:
        action = fault.action if fault else None
        if fault is not None and action == "hang":
            with self.lock:
                fault.held += 1
            self.stopping.wait(HANG_S)
            with self.lock:
                fault.held -= 1
            h.close_connection = True
            return
        if action and action.startswith("status:"):
            code = int(action.split(":")[1])
            body = b'{"code": "store_unavailable", "message": "injected"}'
            h.send_response(code)
            h.send_header("Content-Type", "application/json")
            h.send_header("Retry-After", "0")
            h.send_header("Content-Length", str(len(body)))
            h.end_headers()
            h.wfile.write(body)
            return
        status, headers, body = self._upstream(h)
        if action == "corrupt" and body:
            body = bytes([body[0] ^ 0xFF]) + body[1:]
        h.send_response(status)
        for key, value in headers:
            if key.lower() not in ("content-length", "connection", "transfer-encoding", "date", "server"):
                h.send_header(key, value)
        h.send_header("Content-Length", str(len(body)))
        h.end_headers()
        if action and action.startswith("reset:"):
            h.wfile.write(body[: int(action.split(":")[1])])
            h.wfile.flush()
            time.sleep(0.3)  # let the client read what was sent: an RST discards unread bytes
            # RST instead of FIN: the client sees "connection reset" mid-body.
            h.connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            h.connection.close()
            h.close_connection = True
            return
        h.wfile.write(body)

    def _upstream(self, h: http.server.BaseHTTPRequestHandler) -> tuple[int, list[tuple[str, str]], bytes]:
        conn = http.client.HTTPConnection("127.0.0.1", self.upstream_port, timeout=30)
        try:
            forwarded = ("range", "if-range", "if-none-match", "x-api-key", "authorization")
            forward = {k: v for k, v in h.headers.items() if k.lower() in forwarded}
            conn.request(h.command, h.path, headers=forward)
            resp = conn.getresponse()
            return resp.status, resp.getheaders(), resp.read()
        finally:
            conn.close()
