"""A malicious shard server for edge-client tests (standard library ``http.server`` on 127.0.0.1).

It serves a genuine library (fetched from an upstream shard API) with one attack applied per
*scenario*: the first path segment names the scenario, so ``HostileServer.url_for("drip")`` is a
server URL of its own and one process can run every attack. A scenario is a function of
``(server, handler, path)`` that answers the request itself and returns True, or returns False
to let the genuine answer through. Every request is recorded with its headers.
"""

from __future__ import annotations

import hashlib
import http.client
import http.server
import json
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

from tests.edge_servers import LoopbackServer

Handler = http.server.BaseHTTPRequestHandler
Scenario = Callable[["HostileServer", Handler, str], bool]


@dataclass
class Seen:
    scenario: str
    path: str
    headers: dict[str, str]


class HostileServer(LoopbackServer):
    def __init__(self, upstream_url: str, scenarios: dict[str, Scenario]) -> None:
        self.upstream = upstream_url
        self.scenarios = scenarios
        self.seen: list[Seen] = []
        self.lock = threading.Lock()
        server = self

        class _Handler(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"
            timeout = 30

            def log_message(self, *args: object) -> None:
                return None

            def do_GET(self) -> None:  # noqa: N802 (http.server's naming)
                scenario, _, rest = self.path.lstrip("/").partition("/")
                with server.lock:
                    server.seen.append(Seen(scenario, "/" + rest, dict(self.headers.items())))
                attack = server.scenarios.get(scenario)
                try:
                    if attack is None or not attack(server, self, "/" + rest):
                        status, headers, body = server.genuine("/" + rest, self.headers.get("Range"))
                        send(self, status, body, headers)
                except (BrokenPipeError, ConnectionResetError):
                    self.close_connection = True

        super().__init__(_Handler)

    def url_for(self, scenario: str) -> str:
        return f"{self.url}/{scenario}"

    def requests(self, scenario: str) -> list[Seen]:
        with self.lock:
            return [s for s in self.seen if s.scenario == scenario]

    # -- the genuine library -----------------------------------------------------------------
    def genuine(self, path: str, range_header: str | None = None) -> tuple[int, dict[str, str], bytes]:
        host, port = self.upstream.removeprefix("http://").split(":")
        conn = http.client.HTTPConnection(host, int(port), timeout=30)
        try:
            conn.request("GET", path, headers={"Range": range_header} if range_header else {})
            resp = conn.getresponse()
            keep = ("content-type", "etag", "content-range", "accept-ranges", "x-sakura-manifest-length",
                    "x-sakura-bundled", "x-sakura-version", "x-sakura-level")
            return resp.status, {k: v for k, v in resp.getheaders() if k.lower() in keep}, resp.read()
        finally:
            conn.close()

    def manifest(self, template: str = "portrait", version: int = 1) -> dict:
        status, _, body = self.genuine(f"/v1/templates/{template}/versions/{version}/manifest")
        assert status == 200, status
        return json.loads(body)


# -- building scenarios: (server, handler, path) -> True when answered ---------------------------
def is_manifest(path: str) -> bool:
    """A request for the manifest, alone or in a preamble."""
    return path.split("?")[0].endswith(("/manifest", "/preamble"))


def is_shard(path: str) -> bool:
    return "/shards/" in path


def when(match: Callable[[str], bool], act: Callable[[HostileServer, Handler, str], object]) -> Scenario:
    """A scenario answering the requests ``match`` accepts with ``act(server, handler, path)``."""
    def scenario(s: HostileServer, h: Handler, path: str) -> bool:
        if not match(path):
            return False
        act(s, h, path)
        return True
    return scenario


def on_manifest(patch: Callable[[dict], dict]) -> Scenario:
    """A scenario answering manifest requests with the genuine manifest after ``patch``."""
    return when(is_manifest, lambda s, h, path: send_json(h, patch(s.manifest())))


# -- building answers ---------------------------------------------------------------------------
def send(h: Handler, status: int, body: bytes = b"", headers: dict[str, str] | None = None) -> None:
    h.send_response(status)
    for key, value in (headers or {}).items():
        h.send_header(key, value)
    h.send_header("Content-Length", str(len(body)))
    h.end_headers()
    h.wfile.write(body)


def send_json(h: Handler, doc: object) -> None:
    """A JSON answer; to a preamble request, a preamble carrying ``doc`` as its manifest and no objects."""
    body = json.dumps(doc).encode()
    headers = {"Content-Type": "application/json"}
    if h.path.split("?")[0].endswith("/preamble"):
        headers |= {"X-Sakura-Manifest-Length": str(len(body)), "X-Sakura-Bundled": "0"}
    send(h, 200, body, headers)


def drip(h: Handler, stop: threading.Event, interval_s: float, declared: int = 1 << 20) -> None:
    """A 200 that declares ``declared`` bytes, then sends one byte every ``interval_s``."""
    h.send_response(200)
    h.send_header("Content-Length", str(declared))
    h.end_headers()
    for _ in range(declared):
        if stop.wait(interval_s):
            break
        h.wfile.write(b"{")
        h.wfile.flush()
    h.close_connection = True


def endless(h: Handler, stop: threading.Event, declared: int | None = None, chunk: bytes = b"\0" * (64 << 10)) -> None:
    """A 200 whose body never ends (no length, or a huge declared one), as fast as the client reads."""
    h.send_response(200)
    if declared is not None:
        h.send_header("Content-Length", str(declared))
    else:
        h.send_header("Connection", "close")
    h.end_headers()
    deadline = time.monotonic() + 60
    while not stop.is_set() and time.monotonic() < deadline:
        h.wfile.write(chunk)
    h.close_connection = True


def with_payload(manifest: dict, index: int, level: str, payload: bytes) -> dict:
    """``manifest`` with shard ``index`` at ``level`` replaced by ``payload`` (length and sha256 to match)."""
    loc = manifest["shards"][index]["levels"][level]
    loc["length"] = len(payload)
    loc["sha256"] = hashlib.sha256(payload).hexdigest()
    return manifest


def rename_level(manifest: dict, old: str, new: str) -> dict:
    for level in manifest["levels"]:
        if level["name"] == old:
            level["name"] = new
    for shard in manifest["shards"]:
        shard["levels"][new] = shard["levels"].pop(old)
    return manifest
