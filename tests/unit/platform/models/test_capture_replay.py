"""Replaying captured template KV gives exactly (bit for bit) the output of computing the template tokens."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from sakura.platform.errors import ModelError
from sakura.platform.kv import ShardKey
from sakura.platform.models import ModelAdapter, Schedule, load_model
from tests.conftest import make_request, make_template


def rel_l2(a: torch.Tensor, b: torch.Tensor) -> float:
    return float((a - b).norm() / b.norm())


@pytest.fixture(scope="module")
def setup(adapter: ModelAdapter, schedule: Schedule):
    template = make_template(adapter)
    calibration = make_request(adapter, "skimage:astronaut", seed=1)
    other = make_request(adapter, "skimage:coffee", seed=2)
    return template, calibration, other


def test_replay_equals_full_computation_for_a_different_request(adapter, schedule, setup):
    template, calibration, other = setup
    captured = adapter.capture(template, calibration, schedule)
    full = adapter.full(template, other, schedule)
    replayed = adapter.replay(captured.kv, template.prompt, other, schedule)
    assert torch.equal(replayed, full), rel_l2(replayed, full)  # bit-identical: the same attention call
    # and the request really is different: the calibration output is far from this one
    assert rel_l2(captured.output, full) > 1e-2


def test_without_the_mask_replay_is_not_exact(adapter, schedule, setup):
    template, calibration, other = setup
    leaked = adapter.capture(template, calibration, schedule, masked=False)
    full = adapter.full(template, other, schedule, masked=False)
    replayed = adapter.replay(leaked.kv, template.prompt, other, schedule)
    assert rel_l2(replayed, full) > 1e-3


def test_template_kv_does_not_depend_on_the_request(adapter, schedule, setup):
    template, calibration, other = setup
    a = adapter.capture(template, calibration, schedule).kv
    b = adapter.capture(template, other, schedule).kv
    assert a.keys == b.keys
    for key in a:
        np.testing.assert_array_equal(a[key].k, b[key].k)
        np.testing.assert_array_equal(a[key].v, b[key].v)


def test_the_template_matters(adapter, schedule, setup):
    template, _, other = setup
    brick = adapter.full(template, other, schedule)
    grass = adapter.full(make_template(adapter, "skimage:grass"), other, schedule)
    assert rel_l2(grass, brick) > 1e-2


def test_capture_records_one_shard_per_step_and_layer(adapter, schedule, setup):
    template, calibration, _ = setup
    captured = adapter.capture(template, calibration, schedule)
    info = adapter.info()
    expected = [ShardKey(s, layer) for s in range(schedule.steps) for layer in range(info.layers)]
    assert captured.kv.keys == expected
    pair = captured.kv[expected[0]]
    assert pair.k.shape == (info.heads, info.image_tokens, info.head_dim)
    assert captured.kv.nbytes_fp16 == len(expected) * 2 * pair.k.size * 2
    assert sorted(captured.attention_mass) == expected
    for mass in captured.attention_mass.values():
        assert mass.shape == (info.heads, info.image_tokens)
        assert (mass >= 0).all() and (mass.sum(axis=1) <= 1.0 + 1e-5).all() and mass.sum() > 0


def test_replay_refuses_kv_of_another_model(adapter, schedule, setup):
    template, calibration, other = setup
    captured = adapter.capture(template, calibration, schedule)
    stranger = load_model("tiny-sd3" if adapter.family == "flux" else "tiny-flux")
    with pytest.raises(ModelError, match="built for model"):
        stranger.replay(captured.kv, template.prompt, other, schedule)


def test_replay_refuses_kv_missing_shards(adapter, setup):
    template, calibration, other = setup
    captured = adapter.capture(template, calibration, Schedule(steps=2))
    with pytest.raises(ModelError, match="lacks"):
        adapter.replay(captured.kv, template.prompt, other, Schedule(steps=4))


def test_processors_match_the_stock_ones_outside_runs(adapter):
    """Installed processors compute exactly what diffusers' own processors compute."""
    stock = type(adapter.model).from_config(adapter.model.config).eval()
    stock.load_state_dict(adapter.model.state_dict())
    inputs = _random_inputs(adapter)
    with torch.inference_mode():
        ours = adapter.model(**inputs, return_dict=False)[0]
        theirs = stock(**inputs, return_dict=False)[0]
    torch.testing.assert_close(ours, theirs, rtol=1e-5, atol=1e-6)


def _random_inputs(adapter: ModelAdapter) -> dict[str, torch.Tensor]:
    g = torch.Generator().manual_seed(0)
    cfg, info = adapter.model.config, adapter.info()
    text = torch.randn(1, info.text_tokens, cfg.joint_attention_dim, generator=g)
    pooled = torch.randn(1, cfg.pooled_projection_dim, generator=g)
    if adapter.family == "flux":
        n = info.image_tokens
        return dict(
            hidden_states=torch.randn(1, n, cfg.in_channels, generator=g),
            encoder_hidden_states=text,
            pooled_projections=pooled,
            timestep=torch.tensor([0.5]),
            img_ids=torch.randn(n, 3, generator=g),
            txt_ids=torch.zeros(info.text_tokens, 3),
        )
    side = adapter.codec.grid
    return dict(
        hidden_states=torch.randn(1, cfg.in_channels, side, side, generator=g),
        encoder_hidden_states=text,
        pooled_projections=pooled,
        timestep=torch.tensor([500.0]),
    )


def test_kv_geometry_is_what_capture_records_and_the_order_replay_reads(adapter, schedule, setup):
    """The client checks a server's manifest against ``kv_geometry``: it must be exactly the
    shards capture writes, in the order replay consumes them (a different order would stall the
    bounded pipeline), with capture's shape and dtype."""
    template, calibration, other = setup
    captured = adapter.capture(template, calibration, schedule)
    geometry = adapter.kv_geometry(schedule.steps)
    assert list(geometry.keys) == captured.kv.keys
    pair = captured.kv[geometry.keys[0]]
    assert geometry.shape == pair.k.shape and geometry.dtype == pair.k.dtype
    assert geometry.shard_nbytes == pair.nbytes
    read: list[ShardKey] = []

    class Recording:
        model_fingerprint, keys = captured.kv.model_fingerprint, captured.kv.keys
        template_tokens = captured.kv.template_tokens

        def __getitem__(self, key: ShardKey):
            read.append(key)
            return captured.kv[key]

    adapter.replay(Recording(), template.prompt, other, schedule)
    assert tuple(read) == geometry.keys
