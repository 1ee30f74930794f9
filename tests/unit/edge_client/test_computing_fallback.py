"""A phone that can compute the template's blocks finishes an edit alone when the link or the
server lets a download down (``docs/architecture.md``, the fetch stage): attacks of the hostile
server (:mod:`tests.unit.edge_client.test_hostile_server`) against a computing phone."""

from __future__ import annotations

import threading

import numpy as np
import pytest

from sakura.edge_client import EditResult
from sakura.edge_client.device import Device
from sakura.edge_client.policy import FixedPolicy
from sakura.edge_client.timeline import Progress
from tests.hostile_server import HostileServer, is_shard, send, when
from tests.unit.edge_client.test_hostile_server import FAST_RETRY, SCENARIOS, TIMEOUT_S, attack

SCENARIOS["unavailable-shard"] = when(is_shard, lambda s, h, path: send(h, 503, b"overloaded"))


class _WaitsForAFailure(Device):
    """A phone whose model asks for its first shard only once a download has failed (or, should
    none ever fail, after ``patience_s``): the failure comes first on any machine, however fast
    the model would have outrun it."""

    def __init__(self, patience_s: float = 60.0) -> None:
        self.failure, self.patience_s, self._first = threading.Event(), patience_s, True

    def on_progress(self, event: Progress) -> None:
        if event.kind == "failed":
            self.failure.set()

    def after_compute(self, seconds: float) -> None:
        if self._first:
            self._first = False
            self.failure.wait(self.patience_s)


LET_DOWN = ["unavailable-shard", "endless-shard", "bomb", "drip-shard"]
SCENARIOS.update({f"computing-{name}": SCENARIOS[name] for name in LET_DOWN})  # requests counted apart


@pytest.fixture(scope="module")
def hostile(api):
    with HostileServer(api.url, SCENARIOS) as server:
        yield server


@pytest.mark.parametrize("attacked", LET_DOWN)
def test_a_computing_phone_finishes_alone_when_every_download_fails(hostile, reference_model, tmp_path, attacked):
    """A phone that fetches every shard but can compute them: a download the link or the server
    lets down (a 503, a body past its length, a payload that does not decode, a drip) does not fail
    the edit. The shard is computed, the failure is in the timeline and told to the app, no shard
    is asked for once one failed (those in flight may still arrive, verified), and with no shard
    intact the image is the phone alone's."""
    policy = FixedPolicy("compact")
    policy.computes = True  # type: ignore[attr-defined]
    device, scenario = _WaitsForAFailure(), f"computing-{attacked}"
    outcome, tries = attack(hostile, scenario, reference_model, tmp_path, policy=policy, device=device,
                            on_progress=device.on_progress, timeout_s=TIMEOUT_S)
    assert isinstance(outcome, EditResult), outcome
    requested = [r.path for r in hostile.requests(scenario)]
    assert tries <= FAST_RETRY.attempts, requested
    shards = outcome.timeline.shards
    assert device.failure.is_set() and any(s.failed for s in shards), [s.failed for s in shards]
    assert all(s.computed for s in shards if s.failed), outcome.levels
    # Requests stop at the failure: some shards are never asked for, and the phone computes them,
    # whether the fetch stage reached them first (it marks them "not requested") or the model did
    # (a race of this machine's threads: the phone computes the reference model's blocks in
    # milliseconds, and a run that required the mark failed two times in three)
    never = [s.index for s in shards if not any(f"/shards/{s.index}/" in p for p in requested)]
    assert never and all(shards[i].computed for i in never), (never, requested, outcome.levels)
    unasked = [s.index for s in shards if s.failed.startswith("not requested")]
    assert set(unasked) <= set(never), (unasked, requested)
    if outcome.computed == list(range(6)):  # no shard arrived intact: the phone alone's image
        alone, _ = attack(hostile, "genuine", reference_model, tmp_path / "alone", policy="on-device")
        np.testing.assert_allclose(outcome.image, alone.image, atol=1e-6)
