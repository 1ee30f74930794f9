"""FLUX.2 [klein] on the phone computes its template KV itself: the stock ``extract`` forward over
the reference tokens alone, paused after each block, gives the capture's bits; stopping stops
the forward; the phone path never imports ``transformers``."""

from __future__ import annotations

import itertools
import subprocess
import sys
import threading

import numpy as np
import pytest
import torch

from sakura.platform.context import decode_context, encode_context
from sakura.platform.errors import ModelError
from sakura.platform.images import fit_image, load_image
from sakura.platform.kv import TemplateKV
from sakura.platform.models import EditRequest, Schedule, Template, load_model
from sakura.platform.models.pipelines.klein import REFERENCE_IDS, REFERENCE_LATENTS
from sakura.platform.template_image import decode_published, publish_image
from tests.helpers import WITHOUT_TRANSFORMERS

SCHEDULE = Schedule(steps=2, strength=0.8)


@pytest.fixture(scope="module")
def phone(klein_folder):
    return load_model(str(klein_folder), phone=True)


@pytest.fixture(scope="module")
def published(klein):
    """A template, its captured KV and what ships with it, decoded as a phone decodes it."""
    template = Template(fit_image(load_image("skimage:brick"), klein.resolution), "a brick wall texture")
    kv = klein.capture(template, EditRequest(fit_image(load_image("skimage:coffee"), klein.resolution)), SCHEDULE).kv
    source = {name: decode_context(*encode_context(array)) for name, array in klein.template_source(template).items()}
    return template, kv, source, klein.template_context(template)


def _worker_threads() -> list[str]:
    return [t.name for t in threading.enumerate() if t.name == "sakura-template-kv"]


def test_the_phone_computes_the_published_kv_bit_for_bit_and_mixes_it(klein, phone, published):
    template, kv, source, context = published
    assert phone.pipe is None and phone.computes_template and set(source) == set(phone.source_limits())
    assert {name: array.shape for name, array in source.items()} == phone.source_limits()
    computed = list(phone.iter_template_kv(source, context=context, task=template.task, schedule=SCHEDULE))
    assert [key for key, _ in computed] == list(phone.kv_geometry(SCHEDULE.steps).keys) == kv.keys
    for key, pair in computed:
        assert np.array_equal(pair.k, kv[key].k) and np.array_equal(pair.v, kv[key].v), key
    mixed = TemplateKV(kv.model_fingerprint, {key: pair if key.layer < 2 else kv[key] for key, pair in computed})
    request = EditRequest(fit_image(load_image("skimage:astronaut"), phone.resolution), seed=4)
    assert torch.equal(phone.replay(mixed, template.prompt, request, SCHEDULE, context=context),
                       phone.replay(kv, template.prompt, request, SCHEDULE, context=context))
    assert not _worker_threads()


def test_the_phone_vae_makes_the_published_source_from_the_published_jpeg(klein, phone):
    """A phone without the pipeline makes, from the template's JPEG, the bits the cloud's stock
    ``prepare_image_latents`` makes from the same decoded pixels."""
    jpeg, pixels = publish_image(fit_image(load_image("skimage:brick"), klein.resolution))
    cloud = klein.template_source(Template(pixels, "a brick wall texture"))
    here = phone.source_from_image(decode_published(jpeg, klein.resolution, klein.resolution))
    assert set(here) == set(cloud) == {REFERENCE_LATENTS, REFERENCE_IDS}
    for name in cloud:
        assert here[name].dtype == cloud[name].dtype and np.array_equal(here[name], cloud[name]), name


def test_stopping_abandons_the_forward_and_replay_may_run_between_blocks(phone, published):
    template, kv, source, context = published
    attention = [b.attn for b in [*phone.model.transformer_blocks, *phone.model.single_transformer_blocks]]
    calls = []
    counters = [a.register_forward_pre_hook(lambda m, _: calls.append(threading.current_thread().name))
                for a in attention]
    try:
        blocks = phone.iter_template_kv(source, context=context, task=template.task, schedule=SCHEDULE)
        first = list(itertools.islice(blocks, 1))
        request = EditRequest(fit_image(load_image("skimage:astronaut"), phone.resolution), seed=4)
        phone.replay(kv, template.prompt, request, SCHEDULE, context=context)  # the same model, meanwhile
        second = next(blocks)
        blocks.close()
    finally:
        for handle in counters:
            handle.remove()
    assert [first[0][0].layer, second[0].layer] == [0, 1]
    assert calls.count("sakura-template-kv") == 2  # blocks 2 and 3 never ran
    assert not _worker_threads() and all(not a._forward_hooks for a in attention)
    assert not torch.is_inference_mode_enabled()


@pytest.mark.parametrize("change", [
    lambda s: {REFERENCE_LATENTS: s[REFERENCE_LATENTS]},
    lambda s: {**s, REFERENCE_LATENTS: s[REFERENCE_LATENTS][:-1]},
    lambda s: {**s, REFERENCE_IDS: s[REFERENCE_IDS] + 0.5},
    lambda s: {**s, REFERENCE_IDS: -s[REFERENCE_IDS] - 1},
    lambda s: {**s, REFERENCE_IDS: s[REFERENCE_IDS].astype(np.float16)},
], ids=["no-ids", "short", "fractional-ids", "negative-ids", "float16-ids"])
def test_malformed_sources_are_refused_before_any_work(phone, published, change):
    template, _, source, context = published
    with pytest.raises(ModelError):
        phone.iter_template_kv(change(source), context=context, task=template.task, schedule=SCHEDULE)
    assert not _worker_threads()


_PHONE = WITHOUT_TRANSFORMERS + """
import sys
import numpy as np
from sakura.platform.models import Schedule, load_model
phone = load_model(sys.argv[1], phone=True)
saved = np.load(sys.argv[2])
source = {"reference_latents": saved["latents"], "reference_ids": saved["ids"]}
kv = dict(phone.iter_template_kv(source, context={}, task="custom", schedule=Schedule(steps=2, strength=0.8)))
np.savez(sys.argv[3], **{f"{side}{key.layer}": getattr(pair, side) for key, pair in kv.items() for side in "kv"})
print("transformers" in sys.modules)
"""


def test_the_phone_computes_without_importing_transformers(klein_folder, published, tmp_path):
    _, kv, source, _ = published
    np.savez(tmp_path / "source.npz", latents=source[REFERENCE_LATENTS], ids=source[REFERENCE_IDS])
    done = subprocess.run([sys.executable, "-c", _PHONE, str(klein_folder), str(tmp_path / "source.npz"),
                           str(tmp_path / "kv.npz")], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip().splitlines()[-1] == "False"
    computed = np.load(tmp_path / "kv.npz")
    for key in kv.keys:
        assert np.array_equal(computed[f"k{key.layer}"], kv[key].k)
        assert np.array_equal(computed[f"v{key.layer}"], kv[key].v)
