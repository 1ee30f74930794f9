"""Cancel returns at any point of an edit (issue 37): while the first edit's model loads (the load
goes on for the next edit, never twice at once), between two layers when every shard is ready,
and between two template blocks the phone computes. No wall-clock bounds: loaders that block on
events the test holds, and hooks that count what ran after the cancel."""

from __future__ import annotations

import threading

import numpy as np
import pytest

from sakura.edge_client import EdgeSession
from sakura.edge_client._compute_model import ComputeModel
from sakura.edge_client._models import ModelLoads
from sakura.edge_client._template_kv import TemplateComputer
from sakura.edge_client.device import Device
from sakura.edge_client.errors import EditCancelled
from sakura.platform.errors import UnknownModel
from sakura.platform.images import load_image
from sakura.platform.kv import KVPair, ShardKey
from tests.unit.edge_client.test_session import PHOTO

HANG_GUARD_S = 60  # a test that fails must not hang for ever; never a bound on how soon


class BlockingLoader:
    """A model loader that blocks until the test releases it, recording every load."""

    def __init__(self, model: object) -> None:
        self.model = model
        self.entered, self.release, self.returned = threading.Event(), threading.Event(), threading.Event()
        self.loads: list[str] = []

    def __call__(self, name: str) -> object:
        self.loads.append(name)
        self.entered.set()
        self.release.wait(HANG_GUARD_S)
        self.returned.set()
        return self.model


def test_cancel_while_the_first_model_loads_returns_before_the_load_ends_and_the_next_edit_uses_it(
        api, reference_model):
    loader = BlockingLoader(reference_model)
    cancel = threading.Event()
    threading.Thread(target=lambda: loader.entered.wait(HANG_GUARD_S) and cancel.set(), daemon=True).start()
    with EdgeSession(api.url, models=loader) as session:
        with pytest.raises(EditCancelled):
            session.edit(load_image(PHOTO), "portrait", policy="fixed-full", cancel=cancel)
        assert loader.entered.is_set() and not loader.returned.is_set()  # returned while the load still ran
        loader.release.set()
        result = session.edit(load_image(PHOTO), "portrait", policy="fixed-full")
    assert loader.loads == ["reference"]  # the cancelled edit's load is the one the next edit used
    assert result.image.shape == (reference_model.resolution, reference_model.resolution, 3)


def test_edits_waiting_for_one_model_share_its_load():
    model = object()
    loader = BlockingLoader(model)
    loads = ModelLoads(loader)  # type: ignore[arg-type]
    got: list[object] = []
    waiters = [threading.Thread(target=lambda: got.append(loads.get("m"))) for _ in range(3)]
    for waiter in waiters:
        waiter.start()
    loader.entered.wait(HANG_GUARD_S)
    loader.release.set()
    for waiter in waiters:
        waiter.join(HANG_GUARD_S)
    assert got == [model] * 3 and loader.loads == ["m"]
    assert loads.get("m", threading.Event()) is model and loader.loads == ["m"]


def test_a_cancelled_wait_leaves_the_load_for_the_next_one():
    loader = BlockingLoader(object())
    loads = ModelLoads(loader)  # type: ignore[arg-type]
    cancel = threading.Event()
    threading.Thread(target=lambda: loader.entered.wait(HANG_GUARD_S) and cancel.set(), daemon=True).start()
    with pytest.raises(EditCancelled):
        loads.get("m", cancel)
    assert not loader.returned.is_set()
    loader.release.set()
    assert loads.get("m") is loader.model and loader.loads == ["m"]


def test_a_failed_load_reaches_every_waiter_and_the_next_edit_tries_again():
    calls: list[str] = []

    def flaky(name: str) -> object:
        calls.append(name)
        if len(calls) == 1:
            raise UnknownModel(f"no model {name}")
        return "loaded"

    loads = ModelLoads(flaky)  # type: ignore[arg-type]
    with pytest.raises(UnknownModel):
        loads.get("m")
    assert loads.get("m") == "loaded" and calls == ["m", "m"]


class CancelAtFirstLayer(Device):
    """Presses cancel when the model reads its first shard, and counts the shards it reads."""

    def __init__(self, cancel: threading.Event) -> None:
        self.cancel, self.reads = cancel, 0

    def after_compute(self, seconds: float) -> None:
        self.reads += 1
        self.cancel.set()


def test_cancel_between_two_layers_stops_the_model_at_the_next_shard(api, reference_model):
    """The phone computes every shard (on-device): nothing is waited for, so only the cancel check
    at each shard read can stop the model before it reads shard 1."""
    cancel = threading.Event()
    device = CancelAtFirstLayer(cancel)
    with EdgeSession(api.url, device=device, models=lambda _: reference_model) as session:
        with pytest.raises(EditCancelled):
            session.edit(load_image(PHOTO), "portrait", policy="on-device", cancel=cancel)
    assert device.reads == 1


def test_cancel_between_two_template_blocks_stops_the_pass():
    keys = [ShardKey(None, layer) for layer in range(4)]
    computed: list[int] = []
    cancel = threading.Event()

    def blocks(step: int | None):
        for key in keys:
            computed.append(key.layer)
            cancel.set()  # pressed while block 0 computes
            yield key, KVPair(np.zeros((1, 1, 1)), np.zeros((1, 1, 1)))

    computer = TemplateComputer(blocks, keys, ComputeModel(), "m", cancel=cancel)
    with pytest.raises(EditCancelled):
        computer.compute(3)  # the pass runs through blocks 0..3: it stops after block 0
    assert computed == [0] and computer.frontier == 1
