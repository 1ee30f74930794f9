"""The kernel-shaped link keeps delivering when the trace's rate falls: tbf cannot send a packet
longer than its burst, so a GSO packet queued at a high rate used to block the queue once the
rate (and with it the burst) fell: 'no route to host' and shards stuck at 0 bytes."""

from __future__ import annotations

import http.server
import socketserver
import threading
import urllib.request
from collections.abc import Iterator

import numpy as np
import pytest

from sakura.emulation import KernelLink, kernel_link_support
from sakura.emulation.traces import BandwidthTrace
from tests.integration.edge_client.test_edge_service import require

BODY = b"\0" * (12 << 20)  # ~1.5 s at 67 Mbit/s, then ~3 s at 9 Mbit/s


class _Blob(http.server.BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        self.send_response(200)
        self.send_header("Content-Length", str(len(BODY)))
        self.end_headers()
        try:
            self.wfile.write(BODY)
        except OSError:
            pass

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def blob_server() -> Iterator[tuple[str, int]]:
    server = socketserver.ThreadingTCPServer(("127.0.0.1", 0), _Blob)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield server.server_address
    server.shutdown()
    server.server_close()


def _download(url: str) -> int:
    received = 0
    with urllib.request.urlopen(url, timeout=8) as response:
        while chunk := response.read(1 << 16):
            received += len(chunk)
    return received


def test_a_download_survives_the_rate_falling_from_67_to_9_mbit(blob_server):
    ok, why = kernel_link_support()
    require(ok, f"kernel link emulation unavailable here: {why}")
    step_down = BandwidthTrace("step-down", "test", np.array([0.0, 1.0]), np.array([67.0, 9.0]), 600.0)
    with KernelLink(step_down, blob_server, rtt_s=0.03) as link:
        assert link.call(_download, link.url + "/") == len(BODY)
