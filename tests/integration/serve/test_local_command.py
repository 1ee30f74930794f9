"""`sakura serve` runs the service locally and stops cleanly on Ctrl-C."""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from pathlib import Path

import httpx

from tests.integration.conftest import free_port


def test_sakura_serve_starts_serves_and_stops_on_ctrl_c(tmp_path):
    store = tmp_path / "lib"
    store.mkdir()
    port = free_port()
    exe = str(Path(sys.executable).with_name("sakura"))
    proc = subprocess.Popen([exe, "serve", "--store", f"file://{store}", "--port", str(port)],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, start_new_session=True)
    try:
        deadline = time.time() + 120
        while time.time() < deadline:
            try:
                if httpx.get(f"http://127.0.0.1:{port}/v1/templates", timeout=2).json() == {"templates": []}:
                    break
            except (httpx.HTTPError, ValueError):
                time.sleep(0.5)
        else:
            raise AssertionError("service did not come up")
        proc.send_signal(signal.SIGINT)
        out, _ = proc.communicate(timeout=90)
        assert proc.returncode == 0, out[-2000:]
        assert "stopped" in out
    finally:
        if proc.poll() is None:
            proc.kill()
    import psutil

    leftovers = [p for p in psutil.process_iter(["cmdline"]) if f"{port}" in " ".join(p.info["cmdline"] or [])]
    assert not leftovers
    try:
        httpx.get(f"http://127.0.0.1:{port}/healthz", timeout=2)
        raise AssertionError("still serving after Ctrl-C")
    except httpx.HTTPError:
        pass
