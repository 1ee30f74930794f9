"""The reference model: step-independent template KV, exact replay, deterministic training."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from sakura.jobs import reference_data as data
from sakura.jobs.train_reference import TrainConfig, train
from sakura.platform.errors import ModelError
from sakura.platform.kv import ShardKey
from sakura.platform.models import EditRequest, Schedule, Template
from sakura.platform.models.reference import ReferenceAdapter
from sakura.platform.models.reference_dit import ReferenceEditDiT
from sakura.platform.models.seeding import seed_weights


@pytest.fixture(scope="module")
def adapter() -> ReferenceAdapter:
    model = ReferenceEditDiT(hidden=32, depth=3, heads=2)
    seed_weights(model, seed=0, gain=2.0)  # untrained but not zero: attention is non-trivial
    return ReferenceAdapter(model.eval(), name="reference-test")


def _pair(task: str, seed: int) -> tuple[Template, EditRequest]:
    batch = data.sample_batch("held_out", 1, np.random.default_rng(seed), tasks=(task,))
    return Template(batch.template[0], "p", task), EditRequest(batch.user[0], seed=seed)


def test_one_step_independent_shard_per_layer_and_exact_replay(adapter):
    template, calibration = _pair("try_on", 1)
    _, other = _pair("try_on", 2)
    schedule = Schedule(steps=4)
    captured = adapter.capture(template, calibration, schedule)
    assert captured.kv.keys == [ShardKey(None, layer) for layer in range(3)]
    assert sorted(captured.attention_mass) == captured.kv.keys
    full = adapter.full(template, other, schedule)
    replayed = adapter.replay(captured.kv, template.prompt, other, schedule)
    assert torch.equal(replayed, full)
    leaked = adapter.capture(template, calibration, schedule, masked=False)
    unmasked = adapter.full(template, other, schedule, masked=False)
    assert float((adapter.replay(leaked.kv, "p", other, schedule) - unmasked).norm() / unmasked.norm()) > 1e-3


def test_template_task_changes_the_kv_and_unknown_tasks_are_refused(adapter):
    template, request = _pair("style_transfer", 3)
    style = adapter.capture(template, request, Schedule(steps=1)).kv
    face = adapter.capture(Template(template.image, "p", "face_swap"), request, Schedule(steps=1)).kv
    assert not np.array_equal(style[ShardKey(None, 0)].k, face[ShardKey(None, 0)].k)
    with pytest.raises(ModelError, match="tasks"):
        adapter.capture(Template(template.image, "p", "teleport"), request, Schedule(steps=1))


def test_output_is_an_image_in_unit_range(adapter):
    template, request = _pair("face_swap", 4)
    out = adapter.latent_to_image(adapter.full(template, request, Schedule(steps=2)))
    assert out.shape == (32, 32, 3) and out.min() >= 0.0 and out.max() <= 1.0


def test_training_is_deterministic():
    config = TrainConfig(steps=3, batch=4, hidden=32, depth=2, heads=2, log_every=100)
    first, second = train(config, log=lambda _: None), train(config, log=lambda _: None)
    assert first.losses == second.losses
    for key, value in first.state_dict.items():
        assert torch.equal(value, second.state_dict[key]), key
    other_seed = train(TrainConfig(**{**config.__dict__, "seed": 1}), log=lambda _: None)
    assert other_seed.losses != first.losses
