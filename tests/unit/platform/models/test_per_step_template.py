"""FLUX.1 Kontext and SD3 pipelines on the phone compute their template KV themselves, a pass of
the reference tokens per step: each step's pass, from the template latent the phone's VAE makes of
the published JPEG, gives the capture's bits; a step's pass runs alone; stopping stops the
forward; malformed sources, missing context and foreign steps are refused before any work."""

from __future__ import annotations

import itertools
import threading

import numpy as np
import pytest
import torch

from sakura.platform.errors import ModelError
from sakura.platform.images import fit_image, load_image
from sakura.platform.kv import TemplateKV
from sakura.platform.models import EditRequest, Schedule, load_model
from sakura.platform.models.pipelines.per_step import POOLED_PROMPT_EMBEDS, TEMPLATE_LATENT
from sakura.platform.models.pipelines.tiny import export
from sakura.platform.template_image import decode_published, template_for

SCHEDULE = Schedule(steps=3, strength=0.8)
PIPELINES = ("tiny-kontext", "tiny-sd3-pipeline")


@pytest.fixture(scope="module", params=PIPELINES)
def models(request, tmp_path_factory):
    """The cloud's adapter (text encoders included) and the phone's (VAE and transformer only)."""
    folder = export(request.param, tmp_path_factory.mktemp("per-step") / request.param)
    return load_model(str(folder)), load_model(str(folder), phone=True)


@pytest.fixture(scope="module")
def published(models):
    """A template as a build makes it (its image the published JPEG's pixels), its captured KV,
    the JPEG and the template's context objects."""
    cloud, _ = models
    template, jpeg = template_for(cloud, fit_image(load_image("skimage:brick"), cloud.resolution),
                                  "a brick wall texture")
    assert jpeg is not None
    request = EditRequest(fit_image(load_image("skimage:coffee"), cloud.resolution), seed=3)
    return template, cloud.capture(template, request, SCHEDULE).kv, jpeg, cloud.template_context(template)


def _worker_threads() -> list[str]:
    return [t.name for t in threading.enumerate() if t.name == "sakura-template-kv"]


def test_the_phone_computes_every_steps_kv_bit_for_bit_from_the_published_jpeg(models, published):
    cloud, phone = models
    template, kv, jpeg, context = published
    assert phone.pipe is None and phone.computes_template
    source = phone.source_from_image(decode_published(jpeg, phone.resolution, phone.resolution))
    assert {name: array.shape for name, array in source.items()} == phone.source_limits()
    assert np.array_equal(source[TEMPLATE_LATENT], cloud.template_source(template)[TEMPLATE_LATENT])
    computed = list(phone.iter_template_kv(source, context=context, task="custom", schedule=SCHEDULE))
    assert [key for key, _ in computed] == list(phone.kv_geometry(SCHEDULE.steps).keys) == kv.keys
    for key, pair in computed:
        assert np.array_equal(pair.k, kv[key].k) and np.array_equal(pair.v, kv[key].v), key
    assert not _worker_threads()


def test_a_steps_pass_runs_alone_and_mixes_with_fetched_shards(models, published):
    _, phone = models
    template, kv, _, context = published
    source = phone.template_source(template)  # the VAE alone makes it
    last = SCHEDULE.steps - 1
    alone = dict(phone.iter_template_kv(source, context=context, task="custom", schedule=SCHEDULE, step=last))
    assert sorted(alone) == [key for key in kv.keys if key.step == last]
    assert all(np.array_equal(pair.k, kv[key].k) and np.array_equal(pair.v, kv[key].v) for key, pair in alone.items())
    mixed = TemplateKV(kv.model_fingerprint, {key: alone.get(key, kv[key]) for key in kv.keys})
    request = EditRequest(fit_image(load_image("skimage:astronaut"), phone.resolution), seed=4)
    assert torch.equal(phone.replay(mixed, template.prompt, request, SCHEDULE, context=context),
                       phone.replay(kv, template.prompt, request, SCHEDULE, context=context))


def test_stopping_a_pass_abandons_its_forward(models, published):
    cloud, phone = models
    template, _, _, context = published
    attention = phone._attention_modules()
    calls = []
    counters = [a.register_forward_pre_hook(lambda m, _: calls.append(threading.current_thread().name))
                for a in attention]
    try:
        blocks = phone.iter_template_kv(cloud.template_source(template), context=context, task="custom",
                                        schedule=SCHEDULE, step=1)
        first = list(itertools.islice(blocks, 1))
        blocks.close()
    finally:
        for handle in counters:
            handle.remove()
    assert [key.step for key, _ in first] == [1] and first[0][0].layer == 0
    assert calls.count("sakura-template-kv") == 1  # the later blocks never ran
    assert not _worker_threads() and all(not a._forward_hooks for a in attention)


@pytest.mark.parametrize("change", [
    lambda s, c: ({}, c),
    lambda s, c: ({TEMPLATE_LATENT: s[TEMPLATE_LATENT][:-1]}, c),
    lambda s, c: ({TEMPLATE_LATENT: s[TEMPLATE_LATENT].astype(np.float64)}, c),
    lambda s, c: ({TEMPLATE_LATENT: np.full_like(s[TEMPLATE_LATENT], np.nan)}, c),
    lambda s, c: (s, {k: v for k, v in c.items() if k != POOLED_PROMPT_EMBEDS}),
    lambda s, c: (s, {**c, POOLED_PROMPT_EMBEDS: c[POOLED_PROMPT_EMBEDS][:-1]}),
], ids=["no-latent", "short", "float64", "nan", "no-pooled", "short-pooled"])
def test_malformed_sources_and_context_are_refused_before_any_work(models, published, change):
    cloud, phone = models
    template, _, _, context = published
    source, ctx = change(cloud.template_source(template), context)
    with pytest.raises(ModelError):
        phone.iter_template_kv(source, context=ctx, task="custom", schedule=SCHEDULE)
    assert not _worker_threads()


@pytest.mark.parametrize("step", [-1, 3, True, "0"])
def test_a_step_outside_the_edit_is_refused(models, published, step):
    cloud, phone = models
    template, _, _, context = published
    with pytest.raises(ModelError, match="step"):
        phone.iter_template_kv(cloud.template_source(template), context=context, task="custom",
                               schedule=SCHEDULE, step=step)
