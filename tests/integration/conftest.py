"""Real servers for integration tests: an S3-protocol server (moto) on a free loopback port."""

from __future__ import annotations

import os
import socket
import uuid
from typing import Iterator

import pytest


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class S3Server:
    """moto's threaded HTTP server; stop() and start() keep its data (the backend is in-process)."""

    def __init__(self) -> None:
        from moto.server import ThreadedMotoServer

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

    def client(self):
        import boto3

        return boto3.client("s3", endpoint_url=self.endpoint, region_name="us-east-1")

    def new_bucket(self) -> str:
        name = f"sakura-{uuid.uuid4().hex[:12]}"
        self.client().create_bucket(Bucket=name)
        return name


@pytest.fixture(scope="session")
def s3_server() -> Iterator[S3Server]:
    for key, value in {"AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing",
                       "AWS_DEFAULT_REGION": "us-east-1"}.items():
        os.environ.setdefault(key, value)
    server = S3Server()
    server.start()
    yield server
    if server.running:
        server.stop()


@pytest.fixture
def s3_uri(s3_server: S3Server) -> str:
    return f"s3://{s3_server.new_bucket()}/lib?endpoint={s3_server.endpoint}"
