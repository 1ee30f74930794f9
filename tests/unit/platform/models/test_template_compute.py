"""The phone computes template KV itself: a template-only pass, block by block, gives the same
bits as the KV the library publishes (what ``capture`` records), from the source objects as
they arrive over the network."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
import torch

from sakura.evaluation.workload import example_spec
from sakura.jobs.builder import CALIBRATION
from sakura.platform.context import decode_context, encode_context
from sakura.platform.errors import ModelError
from sakura.platform.images import fit_image, load_image
from sakura.platform.kv import TemplateKV
from sakura.platform.models import EditRequest, Schedule, Template, load_model
from sakura.platform.models.reference import TEMPLATE_CELLS
from sakura.platform.models.reference_dit import ReferenceBlock

SCHEDULE = Schedule(steps=2)


@pytest.fixture(scope="module")
def reference():
    return load_model("reference")


def _example(adapter, entry) -> Template:
    spec = example_spec()
    image = fit_image(load_image(entry.image, spec.base_dir), adapter.resolution)
    return Template(image, entry.prompt, entry.task.value)


def _round_trip(source: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """The source objects as a phone decodes them (the context codec)."""
    out = {}
    for name, array in source.items():
        data, shape, dtype = encode_context(array)
        out[name] = decode_context(data, shape, dtype)
    return out


@pytest.mark.parametrize("entry", example_spec().templates, ids=lambda e: e.id)
def test_computed_kv_equals_the_published_kv_bit_for_bit_and_mixes_with_it(reference, entry):
    template = _example(reference, entry)
    photo = CALIBRATION.get(entry.task.value, CALIBRATION["default"])[0]
    captured = reference.capture(template, EditRequest(fit_image(load_image(photo), reference.resolution)), SCHEDULE).kv
    source = _round_trip(reference.template_source(template))
    computed = list(reference.iter_template_kv(source, context={}, task=entry.task.value, schedule=SCHEDULE))
    assert [key for key, _ in computed] == list(reference.kv_geometry(SCHEDULE.steps).keys) == captured.keys
    for key, pair in computed:
        assert np.array_equal(pair.k, captured[key].k) and np.array_equal(pair.v, captured[key].v), key
        assert pair.k.dtype == captured[key].k.dtype
    # Blocks 0..2 computed on the phone, 3..5 fetched: the same image as the published KV alone.
    mixed = TemplateKV(captured.model_fingerprint,
                       {key: pair if key.layer <= 2 else captured[key] for key, pair in computed})
    request = EditRequest(fit_image(load_image("skimage:astronaut"), reference.resolution), seed=5)
    assert torch.equal(reference.replay(mixed, template.prompt, request, SCHEDULE),
                       reference.replay(captured, template.prompt, request, SCHEDULE))


def test_the_caller_may_stop_after_any_block_and_the_work_stops(reference, monkeypatch):
    finished = []
    finish = ReferenceBlock.finish
    monkeypatch.setattr(ReferenceBlock, "finish", lambda self, *a: finished.append(self.layer) or finish(self, *a))
    template = _example(reference, example_spec().templates[1])
    blocks = reference.iter_template_kv(reference.template_source(template), context={}, task=template.task,
                                        schedule=SCHEDULE)
    first = list(itertools.islice(blocks, 2))
    assert not torch.is_inference_mode_enabled()  # never left on between blocks
    blocks.close()
    assert [key.layer for key, _ in first] == [0, 1]
    assert finished == [0]  # block 1's K/V needed only its first half
    with pytest.raises(StopIteration):
        next(blocks)


def test_source_shape_and_limits_are_the_models(reference):
    template = _example(reference, example_spec().templates[0])
    source = reference.template_source(template)
    limits = reference.source_limits()
    assert set(source) == set(limits) == {TEMPLATE_CELLS}
    assert source[TEMPLATE_CELLS].shape == limits[TEMPLATE_CELLS] and source[TEMPLATE_CELLS].dtype == np.float32
    assert reference.computes_template


@pytest.mark.parametrize("change", [
    lambda s: {},
    lambda s: {TEMPLATE_CELLS: s[TEMPLATE_CELLS][:-1]},
    lambda s: {TEMPLATE_CELLS: s[TEMPLATE_CELLS].astype(np.float16)},
    lambda s: {TEMPLATE_CELLS: s[TEMPLATE_CELLS].astype(np.float64)},
    lambda s: {TEMPLATE_CELLS: np.full_like(s[TEMPLATE_CELLS], np.nan)},
    lambda s: {TEMPLATE_CELLS: s[TEMPLATE_CELLS][None]},
], ids=["missing", "short", "float16", "float64", "nan", "extra-dim"])
def test_malformed_sources_are_refused_before_any_work(reference, change):
    source = reference.template_source(_example(reference, example_spec().templates[0]))
    with pytest.raises(ModelError, match="source"):
        reference.iter_template_kv(change(source), context={}, task="try_on", schedule=SCHEDULE)


def test_an_unknown_task_is_refused(reference):
    source = reference.template_source(_example(reference, example_spec().templates[0]))
    with pytest.raises(ModelError, match="tasks"):
        reference.iter_template_kv(source, context={}, task="teleport", schedule=SCHEDULE)


@pytest.mark.parametrize("name", ["tiny-flux", "tiny-sd3"])
def test_bare_transformers_cannot_compute_template_kv(name):
    """Without a pipeline's context objects (the template prompt's pooled embedding) and VAE, a bare
    transformer's adapter fetches its template KV (the pipelines' compute it: ``test_per_step_template``)."""
    adapter = load_model(name)
    assert not adapter.computes_template and adapter.source_limits() == {}
    template = Template(np.zeros((adapter.resolution,) * 2 + (3,), np.float32), "p")
    assert adapter.template_source(template) == {}
    with pytest.raises(ModelError, match="cannot compute"):
        adapter.iter_template_kv({}, context={}, task="custom", schedule=SCHEDULE)
