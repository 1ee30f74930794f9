"""klein at its real shapes: klein-4b-shape's structure and KV formula (built on the meta device:
nothing allocated), and the per-block measurement and extrapolation ``bench/capture.py`` runs,
checked on a klein-shaped model small enough to run whole."""

from __future__ import annotations

import dataclasses
import importlib.util

import pytest
import torch

from sakura.evaluation.block_costs import Measurement, bench_edit, extrapolate, measure, per_block
from sakura.platform.errors import ModelError
from sakura.platform.models import Schedule, load_model, named_models, registry
from sakura.platform.models.pipelines import klein_shapes
from sakura.platform.models.pipelines.klein import KleinAdapter
from sakura.platform.models.pipelines.klein_shapes import KLEIN_4B, KLEIN_9B, KleinShape, build_adapter, named_builder
from sakura.platform.verify import verify_adapter

#: 2 double + 4 single blocks of 2 heads x 16, a two-level VAE: 64x64 pixels (the stock pipeline's
#: least) -> 256 reference tokens.
TINY = KleinShape(
    name="tiny-klein-shape",
    transformer=dict(patch_size=1, in_channels=16, num_layers=2, num_single_layers=4, attention_head_dim=16,
                     num_attention_heads=2, joint_attention_dim=24, timestep_guidance_channels=32,
                     axes_dims_rope=(4, 4, 4, 4), guidance_embeds=False),
    vae=dict(block_out_channels=(8, 16), down_block_types=("DownEncoderBlock2D",) * 2,
             up_block_types=("UpDecoderBlock2D",) * 2, layers_per_block=1, latent_channels=4, norm_num_groups=4),
    text_encoder={}, text_encoder_name="none", resolution=64, max_sequence_length=8,
)


def _meta_transformer(shape: KleinShape, blocks: int | None = None) -> torch.nn.Module:
    from diffusers import Flux2Transformer2DModel

    with torch.device("meta"):
        return Flux2Transformer2DModel(**shape.transformer_config(blocks))


def test_klein_4b_shape_is_klein_4b_and_a_build_of_n_blocks_keeps_its_width():
    assert (KLEIN_4B.double_blocks, KLEIN_4B.single_blocks, KLEIN_4B.heads, KLEIN_4B.head_dim) == (5, 20, 24, 128)
    assert (KLEIN_9B.double_blocks, KLEIN_9B.single_blocks, KLEIN_9B.heads) == (8, 24, 32)
    assert KLEIN_4B.transformer["joint_attention_dim"] == 3 * KLEIN_4B.text_encoder["hidden_size"] == 7680
    whole = _meta_transformer(KLEIN_4B)
    assert (len(whole.transformer_blocks), len(whole.single_transformer_blocks)) == (5, 20)
    assert 3.8e9 < sum(p.numel() for p in whole.parameters()) < 4.0e9  # "4B"
    two = _meta_transformer(KLEIN_4B, blocks=2)
    assert (len(two.transformer_blocks), len(two.single_transformer_blocks)) == (1, 1)
    for block in (two.transformer_blocks[0], two.single_transformer_blocks[0]):
        assert (block.attn.heads, block.attn.inner_dim) == (24, 24 * 128)
    assert [KLEIN_4B.split(n) for n in (None, 1, 2, 5, 10, 25)] == [(5, 20), (1, 0), (1, 1), (1, 4), (2, 8), (5, 20)]
    for bad in (0, 26):
        with pytest.raises(ModelError, match="blocks"):
            KLEIN_4B.split(bad)
    spec = named_models()["klein-4b-shape"]
    module, _, name = spec.build.partition(":")
    assert spec.family == "flux2-klein" and module == klein_shapes.__name__ and getattr(klein_shapes, name)


def test_kv_bytes_per_block_is_two_times_tokens_heads_head_dim_fp16():
    assert (KLEIN_4B.tokens(512), KLEIN_4B.tokens(1024)) == (32 ** 2, 64 ** 2)
    assert KLEIN_4B.kv_bytes_per_block(512) == 2 * 1024 * 24 * 128 * 2 == 12_582_912
    assert KLEIN_4B.kv_bytes_per_block(1024) == 2 * 4096 * 24 * 128 * 2
    assert KLEIN_9B.kv_bytes_per_block(1024) == 2 * 4096 * 32 * 128 * 2
    with pytest.raises(ModelError, match="multiple of 16"):
        KLEIN_4B.tokens(520)


def _synthetic(double: list[float], single: list[float], transformer: float) -> Measurement:
    seconds = {phase: {"double": double, "single": single} for phase in ("capture", "replay")}
    return Measurement(resolution=512, reference_tokens=1024, text_tokens=512,
                       built={"double": len(double), "single": len(single)},
                       seconds={"wall": seconds, "cpu": seconds},
                       transformer_s={c: {"capture": transformer, "replay": transformer} for c in ("wall", "cpu")},
                       vae_encode_s={"wall": 0.0, "cpu": 0.0},
                       kv_bytes_fp16={"double": [10] * len(double), "single": [10] * len(single)})


def test_extrapolation_is_the_rest_of_the_transformer_plus_each_kind_times_its_count():
    m = _synthetic(double=[1.0, 3.0], single=[2.0], transformer=7.5)  # 1.5 s outside the blocks
    assert per_block(m)["capture"] == {"double_s": 2.0, "single_s": 2.0, "other_s": 1.5}
    assert extrapolate(m, 5, 20) == {"capture_s": 1.5 + 5 * 2.0 + 20 * 2.0, "replay_s": 51.5, "kv_bytes_fp16": 250.0}
    with pytest.raises(ModelError, match="no single block"):
        extrapolate(_synthetic(double=[1.0], single=[], transformer=1.0), 5, 20)


def test_measured_kv_is_the_formula_and_extrapolating_a_part_predicts_the_whole_models_kv():
    part, whole = build_adapter(TINY, blocks=2), build_adapter(TINY)
    assert isinstance(part, KleinAdapter) and part.info().layers == 2 and whole.info().layers == 6
    mp, mw = measure(part), measure(whole, repeats=2)
    assert mp.built == {"double": 1, "single": 1} and mw.built == {"double": 2, "single": 4}
    assert mp.reference_tokens == TINY.tokens(64) == 256
    for m in (mp, mw):
        assert all(b == TINY.kv_bytes_per_block(64) for kind in ("double", "single") for b in m.kv_bytes_fp16[kind])
        for clock in ("wall", "cpu"):  # every block timed in both phases
            assert all(len(m.seconds[clock][p][k]) == m.built[k]
                       for p in ("capture", "replay") for k in ("double", "single"))
    kv_bytes = 6 * TINY.kv_bytes_per_block(64)
    assert extrapolate(mp, 2, 4)["kv_bytes_fp16"] == extrapolate(mw, 2, 4)["kv_bytes_fp16"] == kv_bytes
    # on a whole build the extrapolation is the measured forward: the arithmetic adds up
    for clock in ("wall", "cpu"):
        predicted = extrapolate(mw, 2, 4, clock)
        for phase in ("capture", "replay"):
            assert predicted[f"{phase}_s"] == pytest.approx(mw.transformer_s[clock][phase], rel=1e-9)


def test_a_shape_loads_by_name_and_replays_exactly_with_random_prompt_embeddings(monkeypatch):
    spec = registry.NamedModel(name=TINY.name, family="flux2-klein", description="test", config=dict(TINY.transformer),
                               resolution=64, pack=4, text_tokens=8, init_gain=1.0, build=named_builder(TINY))
    monkeypatch.setitem(registry._NAMED, TINY.name, spec)
    adapter = load_model(TINY.name)
    assert isinstance(adapter, KleinAdapter) and adapter.fingerprint == load_model(TINY.name).fingerprint
    report = verify_adapter(adapter, steps=2, repeats=1)
    assert report.max_abs_diff == 0.0 and report.pipeline_max_abs_diff == 0.0 and report.shards == 6
    other = dataclasses.replace(spec, seed=1)
    monkeypatch.setitem(registry._NAMED, TINY.name, other)
    assert load_model(TINY.name).fingerprint != adapter.fingerprint


def test_without_transformers_a_shape_builds_for_the_phone_and_replays_the_clouds_kv(monkeypatch):
    template, request = bench_edit(64)
    schedule = Schedule(steps=2, strength=0.8)
    cloud = build_adapter(TINY)
    kv, context = cloud.capture(template, request, schedule).kv, cloud.template_context(template)
    find_spec = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec",
                        lambda name, *args: None if name == "transformers" else find_spec(name, *args))
    phone = build_adapter(TINY)
    assert phone.pipe is None and phone.fingerprint == cloud.fingerprint
    assert torch.equal(phone.replay(kv, template.prompt, request, schedule, context=context),
                       cloud.replay(kv, template.prompt, request, schedule, context=context))
    with pytest.raises(ModelError, match="whole pipeline"):
        phone.capture(template, request, schedule)
