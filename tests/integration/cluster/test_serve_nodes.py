"""Ray Serve with replicas on two worker nodes, one node SIGKILLed while phones edit: every edit
completes (the client retries) or ends in a typed error, and none uses wrong bytes."""

from __future__ import annotations

import threading
import time

import numpy as np
import pytest

from sakura.edge_client import EdgeSession
from sakura.platform.errors import SakuraError
from sakura.platform.images import load_image
from sakura.platform.models import load_model
from tests.helpers import exact_edit, make_library
from tests.integration.conftest import serve_apps

pytestmark = pytest.mark.cluster

TEMPLATE_IMAGE, PHOTO = "skimage:astronaut", "skimage:coffee"
CLIENTS = 4
EDITS_AFTER_KILL = 3  # per client


def test_edits_survive_a_replica_node_killed_under_them(ray_cluster, worker_nodes, s3_server):
    model = load_model("reference")
    # one replica per node: each needs the unit of `sakura_replica` that only the two workers have
    doomed, survivor = worker_nodes(sakura_replica=1), worker_nodes(sakura_replica=1)
    uri = f"s3://{s3_server.new_bucket()}/lib?endpoint={s3_server.endpoint}"
    make_library(uri, [TEMPLATE_IMAGE], template_id="portrait", model="reference", steps=4)
    expected = {seed: exact_edit(model, TEMPLATE_IMAGE, PHOTO, seed=seed) for seed in range(CLIENTS)}
    outcomes: list[tuple[int, float, object]] = []  # (client, finished at, image or error)
    killed = threading.Event()
    killed_at: list[float] = []

    def phone(client: int, base: str) -> None:
        after_kill = 0
        while after_kill < EDITS_AFTER_KILL:
            after_kill += killed.is_set()
            try:  # a fresh session each time: a cold phone fetches every shard through the service
                with EdgeSession(base, models=lambda _: model) as session:
                    result: object = session.edit(load_image(PHOTO), "portrait", policy="fixed-full",
                                                  seed=client).image
            except SakuraError as exc:
                result = exc
            outcomes.append((client, time.monotonic(), result))

    with serve_apps({"/": {"store": uri}}, num_replicas=2, actor_options={"resources": {"sakura_replica": 1}},
                    name="nodes") as base:
        assert doomed.runs("ServeReplica") and survivor.runs("ServeReplica")
        phones = [threading.Thread(target=phone, args=(c, base)) for c in range(CLIENTS)]
        for t in phones:
            t.start()
        while len(outcomes) < CLIENTS:  # every phone is editing
            time.sleep(0.05)
        doomed.kill(wait=False)
        killed_at.append(time.monotonic())
        killed.set()
        for t in phones:
            t.join(timeout=300)
        assert not any(t.is_alive() for t in phones)

    errors = [r for _, _, r in outcomes if isinstance(r, Exception)]
    images = [(c, r) for c, _, r in outcomes if isinstance(r, np.ndarray)]
    for client, image in images:
        np.testing.assert_array_equal(image, expected[client])  # never wrong bytes
    assert all(isinstance(e, SakuraError) for e in errors), errors
    after = [r for _, at, r in outcomes if at > killed_at[0]]
    assert sum(isinstance(r, np.ndarray) for r in after) >= CLIENTS * (EDITS_AFTER_KILL - 1), (len(after), errors)

