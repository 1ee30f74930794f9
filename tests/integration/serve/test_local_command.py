"""`sakura serve` runs the service locally and stops cleanly and quietly on Ctrl-C or SIGTERM."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

from tests.integration.conftest import free_port


@pytest.mark.parametrize("stop, as_json", [(signal.SIGINT, False), (signal.SIGTERM, True)])
def test_sakura_serve_starts_serves_and_stops_quietly_on_a_signal(tmp_path, stop, as_json):
    """Ctrl-C or a SIGTERM (what systemd and Kubernetes send) stops it without Serve's graceful
    shutdown of its own local Ray (which waited ~30 s for the controller), and the terminal shows
    what a person needs: the startup line and "stopped", no Ray or Serve chatter."""
    store = tmp_path / "lib"
    store.mkdir()
    port = free_port()
    exe = str(Path(sys.executable).with_name("sakura"))
    argv = [exe, "serve", "--store", f"file://{store}", "--port", str(port), *(["--json"] if as_json else [])]
    proc = subprocess.Popen(argv,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, start_new_session=True)
    try:
        deadline = time.time() + 120
        while time.time() < deadline:
            try:
                catalogue = httpx.get(f"http://127.0.0.1:{port}/v1/templates", timeout=2).json()
                if catalogue == {"templates": [], "next_cursor": None}:
                    break
            except (httpx.HTTPError, ValueError):
                time.sleep(0.5)
        else:
            raise AssertionError("service did not come up")
        proc.send_signal(stop)
        out, _ = proc.communicate(timeout=90)
        assert proc.returncode == 0, out[-2000:]
        url = f"http://127.0.0.1:{port}"
        expected = ([json.dumps({"event": "serving", "store": f"file://{store}", "url": url, "mode": "proxy"}),
                     json.dumps({"event": "stopped"})] if as_json
                    else [f"serving file://{store} on {url} (proxy mode); Ctrl-C stops", "stopped"])
        assert out.splitlines() == expected, out[-2000:]
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
