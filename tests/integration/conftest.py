"""Real servers for integration tests on free loopback ports: SeaweedFS (a real S3 server) and
moto's S3 server (both from ``tests/s3_servers.py``, which the serve benchmark also starts), and a
Ray cluster."""

from __future__ import annotations

import contextlib
import os
import socket
import time
from collections.abc import Iterator

import pytest

from tests.edge_servers import free_port
from tests.s3_servers import S3Server, SeaweedS3, WeedMissing

# Credentials for the moto server, in this process only: the Ray cluster below starts without
# them, as a real cluster's nodes would not have the driver's, so every S3 use on it goes through
# what the build job and the Serve app forward (sakura.platform.store.store_environment).
for _key, _value in {"AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing",
                     "AWS_DEFAULT_REGION": "us-east-1"}.items():
    os.environ.setdefault(_key, _value)


@pytest.fixture(scope="session")
def seaweed_server(tmp_path_factory) -> Iterator[SeaweedS3]:
    try:
        server = SeaweedS3(str(tmp_path_factory.mktemp("seaweedfs")))
    except WeedMissing as exc:  # CI installs the dev extra: there a missing server is a failure
        (pytest.fail if os.environ.get("CI") else pytest.skip)(str(exc))
    server.start()
    yield server
    server.stop()


@pytest.fixture
def seaweed_uri(seaweed_server: SeaweedS3) -> str:
    return f"s3://{seaweed_server.new_bucket()}/lib?endpoint={seaweed_server.endpoint}"


@pytest.fixture(scope="session")
def s3_server() -> Iterator[S3Server]:
    server = S3Server()
    server.start()
    yield server
    if server.running:
        server.stop()


@pytest.fixture
def s3_uri(s3_server: S3Server) -> str:
    return f"s3://{s3_server.new_bucket()}/lib?endpoint={s3_server.endpoint}"


def ray_environment(**extra: str) -> dict[str, str]:
    """What a test node's Ray processes start with: none of the driver's S3 credentials, and node
    failure detected within about 2 s of a raylet's death (a dead node refuses the health check at
    once; a busy one still has the default 10 s per check)."""
    return {**{k: v for k, v in os.environ.items() if not k.startswith("AWS_")},
            "RAY_health_check_period_ms": "500", "RAY_health_check_failure_threshold": "4", **extra}


class RayCluster:
    """A Ray head started once per test session; in-process code and subprocesses both join it.

    ``ray start --block`` runs in its own process group, so stopping it kills exactly this
    cluster (``ray stop`` would kill every Ray on the machine).
    """

    def __init__(self) -> None:
        import subprocess
        import sys
        import time
        from pathlib import Path

        os.environ["RAY_AUTH_MODE"] = "disabled"  # loopback-only test cluster
        self.port = free_port()
        self.address = f"127.0.0.1:{self.port}"
        self.metrics_port = free_port()  # Ray's Prometheus endpoint of this (only) node
        ray_cli = str(Path(sys.executable).with_name("ray"))
        self._proc = subprocess.Popen(
            [ray_cli, "start", "--head", "--block", f"--port={self.port}", "--num-cpus=2",
             "--include-dashboard=false", "--disable-usage-stats", f"--metrics-export-port={self.metrics_port}"],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True,
            # metrics reach the endpoint within a second (Ray's default: every 10 s)
            env=ray_environment(RAY_metrics_report_interval_ms="1000"))
        deadline = time.time() + 120
        while time.time() < deadline:
            with socket.socket() as s:
                if s.connect_ex(("127.0.0.1", self.port)) == 0:
                    return
            time.sleep(0.5)
        self.stop()
        raise RuntimeError("the Ray head did not come up")

    def stop(self) -> None:
        import signal
        import subprocess

        try:
            os.killpg(self._proc.pid, signal.SIGTERM)
            self._proc.wait(timeout=10)
        except (ProcessLookupError, subprocess.TimeoutExpired):
            pass
        try:
            os.killpg(self._proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        # `ray start` left a pointer to this (now dead) cluster that a later ray.init() would follow.
        pointer = "/tmp/ray/ray_current_cluster"
        try:
            with open(pointer) as fh:
                if fh.read().strip().endswith(f":{self.port}"):
                    os.unlink(pointer)
        except OSError:
            pass


@pytest.fixture(scope="session")
def ray_cluster() -> Iterator[RayCluster]:
    import ray

    cluster = RayCluster()
    try:
        ray.init(address=cluster.address, logging_level="WARNING", log_to_driver=False)
        yield cluster
    finally:
        ray.shutdown()
        cluster.stop()


@contextlib.contextmanager
def serve_apps(apps: dict[str, dict], *, health: str = "/healthz", num_replicas: int = 1,
               name: str = "app", actor_options: dict | None = None) -> Iterator[str]:
    """Ray Serve on a free loopback port with one ``build_app(args)`` per route prefix (applications
    ``{name}0``, ``{name}1``...), ready when ``health`` answers; shut down afterwards (a later
    module's ``serve.start`` would otherwise attach to this instance and never listen on its own
    port). Yields the base URL."""
    import httpx
    from ray import serve

    from sakura.serve.app import build_app

    port = free_port()
    # one proxy, on the head: worker nodes on this machine would all bind the same port
    serve.start(proxy_location="HeadOnly", http_options={"host": "127.0.0.1", "port": port})
    try:
        for i, (prefix, args) in enumerate(apps.items()):
            serve.run(build_app(args, num_replicas=num_replicas, actor_options=actor_options), name=f"{name}{i}",
                      route_prefix=prefix)
        base = f"http://127.0.0.1:{port}"
        deadline = time.time() + 60
        while time.time() < deadline:
            try:
                if httpx.get(base + health, timeout=5).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            time.sleep(0.5)
        yield base
    finally:
        serve.shutdown()
