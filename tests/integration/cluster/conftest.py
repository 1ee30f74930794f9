"""Worker nodes that join the session's Ray cluster: real raylets on this machine, each with one
CPU and a resource named after it, that a test can SIGKILL."""

from __future__ import annotations

import contextlib
import itertools
import json
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.integration.conftest import RayCluster, ray_environment

JOIN_TIMEOUT_S = 120
#: Starts of a node whose raylet died before it joined. Ray's raylet gives its dashboard agent a
#: fixed 15 s to write its port file and aborts otherwise (ray-project/ray#65983): on this 2-core
#: machine, beside the unit tests, the agent's start can take longer. What these tests watch is
#: SAKURA losing a node that had joined, so a node that never joined is started again.
JOIN_ATTEMPTS = 3


class WorkerNode:
    """``ray start --block --address=HEAD`` in its own session; ``resources`` besides its own."""

    def __init__(self, cluster: RayCluster, name: str, resources: dict[str, float] | None = None) -> None:
        self.name = name
        ray_cli = str(Path(sys.executable).with_name("ray"))
        command = [ray_cli, "start", "--block", f"--address={cluster.address}", "--num-cpus=1",
                   f"--resources={json.dumps({name: 1, **(resources or {})})}", "--disable-usage-stats"]
        for _ in range(JOIN_ATTEMPTS):
            self._proc = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                          start_new_session=True, env=ray_environment())
            joined = self._wait_until(lambda node: node["Alive"] and name in node["Resources"], starting=True)
            if joined is not None:
                self.node_id = joined
                return
            self.kill(wait=False)  # whatever of it still runs
        raise RuntimeError(f"worker node {name} died before joining, {JOIN_ATTEMPTS} times")

    def _wait_until(self, condition, *, starting: bool = False) -> str | None:
        """The first node ``condition`` holds for; None if ``starting`` and ``ray start`` ended
        first (it blocks while its raylet lives)."""
        import ray

        deadline = time.time() + JOIN_TIMEOUT_S
        while time.time() < deadline:
            for node in ray.nodes():
                if condition(node):
                    return node["NodeID"]
            if starting and self._proc.poll() is not None:
                return None
            time.sleep(0.3)
        self.kill(wait=False)
        raise RuntimeError(f"worker node {self.name} did not reach the expected state")

    def processes(self) -> list:
        """``ray start`` and every process under it: the raylet and the workers it started."""
        import psutil

        try:
            root = psutil.Process(self._proc.pid)
            return [root, *root.children(recursive=True)]
        except psutil.NoSuchProcess:
            return []

    def runs(self, title: str) -> bool:
        """Whether a process of the node has ``title`` in its command line (Ray titles an actor's
        process ``ray::ClassName...``)."""
        import psutil

        for proc in self.processes():
            try:
                if title in " ".join(proc.cmdline()):
                    return True
            except psutil.Error:
                continue
        return False

    def kill(self, *, wait: bool = True) -> None:
        """SIGKILL every process of the node at once (``ray start``, the raylet and the workers it
        started, whichever process group they put themselves in); ``wait``: until the head has
        marked the node dead."""
        import psutil

        for proc in self.processes():
            with contextlib.suppress(psutil.NoSuchProcess):
                proc.kill()
        self._proc.wait()
        if wait:
            self._wait_until(lambda node: node["NodeID"] == self.node_id and not node["Alive"])


_NODE_NAMES = (f"sakura_test_node_{i}" for i in itertools.count())


@pytest.fixture
def worker_nodes(ray_cluster: RayCluster) -> Iterator:
    """``worker_nodes(**resources)`` starts a node; every node still up is killed when the test
    ends, so a test sees only the head and the nodes it started (a builder placed on a node left
    over from an earlier test would escape the test's watch)."""
    started: list[WorkerNode] = []

    def start(**resources: float) -> WorkerNode:
        started.append(node := WorkerNode(ray_cluster, next(_NODE_NAMES), resources))
        return node

    yield start
    for node in started:
        node.kill()
