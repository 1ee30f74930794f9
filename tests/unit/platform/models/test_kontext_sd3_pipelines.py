"""FLUX.1 Kontext and SD3 pipeline folders: per-step KV on the pipeline's own VAE, text encoders
and scheduler; SAKURA's replay equals the stock pipeline run with SAKURA's masking, and the price
of that masking against the unmodified pipeline is reported; the phone never imports
``transformers``; typed errors."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

from sakura.cli import main
from sakura.platform.errors import ImageError, ModelError
from sakura.platform.images import fit_image, load_image
from sakura.platform.kv import ShardKey
from sakura.platform.models import EditRequest, Schedule, Template, load_model
from sakura.platform.models.pipelines import PipelineError
from sakura.platform.models.pipelines import vae_codec as ours
from sakura.platform.models.pipelines.tiny import export
from tests.helpers import WITHOUT_TRANSFORMERS

SCHEDULE = Schedule(steps=2, strength=0.8)
PIPELINES = {"tiny-kontext": "FluxKontextPipeline", "tiny-sd3-pipeline": "StableDiffusion3Pipeline"}


@pytest.fixture(scope="module")
def folders(tmp_path_factory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("pipelines")
    return {name: export(name, root / name) for name in PIPELINES}


@pytest.fixture(scope="module")
def clouds(folders):
    return {name: load_model(str(path)) for name, path in folders.items()}


@pytest.fixture(scope="module")
def edit(clouds):
    res = clouds["tiny-kontext"].resolution
    assert all(cloud.resolution == res for cloud in clouds.values())
    template = Template(fit_image(load_image("skimage:brick"), res), "a brick wall texture")
    request = EditRequest(fit_image(load_image("skimage:coffee"), res), seed=3)
    return template, request


def test_latent_helpers_equal_diffusers_own(clouds, edit):
    from diffusers.pipelines.flux.pipeline_flux_kontext import FluxKontextPipeline as K
    from diffusers.pipelines.flux.pipeline_flux_kontext import calculate_shift as kontext_shift
    from diffusers.pipelines.stable_diffusion_3.pipeline_stable_diffusion_3 import calculate_shift as sd3_shift

    grid = torch.randn(2, 4, 6, 8, generator=torch.Generator().manual_seed(0))
    packed = ours.pack(grid)
    assert torch.equal(packed, K._pack_latents(grid, 2, 4, 6, 8))
    assert torch.equal(ours.unpack(packed, 6, 8), K._unpack_latents(packed, 6 * 8, 8 * 8, 8))  # pixels, VAE scale 8
    # each pipeline's call with a scheduler config lacking the keys (SD3's falls back to max_shift 1.16)
    assert ours.calculate_shift(1024, {}) == kontext_shift(1024, 256, 4096, 0.5, 1.15)
    assert ours.calculate_shift(1024, {}, 1.16) == sd3_shift(1024, 256, 4096, 0.5, 1.16)
    config = dict(base_image_seq_len=128, max_image_seq_len=2048, base_shift=0.3, max_shift=1.2)
    assert ours.calculate_shift(700, config) == kontext_shift(700, 128, 2048, 0.3, 1.2)

    kontext, (template, _) = clouds["tiny-kontext"], edit
    processor = kontext.pipe.image_processor  # what FluxKontextPipeline.__call__ does to its image input
    image = processor.preprocess(processor.resize(kontext.codec.tensor(template.image), 64, 64), 64, 64)
    with torch.no_grad():  # as in the pipeline's __call__
        _, reference, _, ids = kontext.pipe.prepare_latents(image, 1, 4, 64, 64, torch.float32, torch.device("cpu"),
                                                            None, latents=torch.zeros(1, 256, 16))
    cells = kontext.codec.encode(template.image)
    assert torch.equal(cells.reshape(1, -1, cells.shape[-1]), reference)
    assert torch.equal(torch.cat([kontext._ids(False), kontext._ids(True)]),
                       torch.cat([K._prepare_latent_image_ids(1, 16, 16, "cpu", torch.float32), ids]))


def test_an_export_is_the_same_pipeline_every_time(folders, tmp_path):
    """Tokenizers included: the ``tokenizers`` BPE trainer breaks ties differently on every run."""
    for name, folder in folders.items():
        again = export(name, tmp_path / name)
        files = sorted(p.relative_to(folder) for p in folder.rglob("*") if p.is_file())
        assert files == sorted(p.relative_to(again) for p in again.rglob("*") if p.is_file())
        assert [f for f in files if (folder / f).read_bytes() != (again / f).read_bytes()] == []


@pytest.mark.parametrize("name", PIPELINES)
def test_verify_reports_parity_with_the_masked_pipeline_and_the_price_of_masking(folders, name, capsys):
    assert main(["models", "verify", str(folders[name]), "--json", "--steps", "2", "--repeats", "1"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["exact"] and report["rel_l2_diff"] == 0.0
    assert report["pipeline"] == PIPELINES[name] and report["pipeline_parity"] is True
    assert report["pipeline_max_abs_diff"] == 0.0  # bit-exact, not merely within 1e-5
    assert 10.0 < report["stock_psnr_db"] < 100.0  # the masking changes the image, by a finite price
    assert report["shards"] == 2 * report["layers"]  # per-step KV: (step, layer)


@pytest.mark.parametrize("name", PIPELINES)
def test_the_unmodified_stock_is_diffusers_own_pipeline(folders, clouds, edit, name):
    """``stock_psnr_db`` compares with the pipeline as diffusers ships it (its own attention
    processors), and the masked run is another image."""
    import diffusers

    cloud, (template, request) = clouds[name], edit
    context = cloud.template_context(template)
    stock = getattr(diffusers, PIPELINES[name]).from_pretrained(folders[name])
    assert "Template" not in type(next(iter(stock.transformer.attn_processors.values()))).__name__
    ours_unmodified = cloud.unmodified_stock_image(template, request, SCHEDULE, context)
    cloud_pipe = cloud.pipe
    try:
        cloud.pipe = stock
        stock.set_progress_bar_config(disable=True)
        unmodified = cloud.unmodified_stock_image(template, request, SCHEDULE, context)
        np.testing.assert_array_equal(unmodified, ours_unmodified)
    finally:
        cloud.pipe = cloud_pipe
    assert not np.array_equal(cloud.stock_image(template, request, SCHEDULE, context), ours_unmodified)


@pytest.mark.parametrize("name", PIPELINES)
def test_img2img_starts_from_the_photo_and_the_kv_depends_on_the_step_not_the_photo(clouds, edit, name):
    cloud, (template, request) = clouds[name], edit
    other = EditRequest(fit_image(load_image("skimage:astronaut"), cloud.resolution), seed=9)
    a, b = cloud.capture(template, request, SCHEDULE), cloud.capture(template, other, SCHEDULE)
    assert tuple(a.kv.keys) == cloud.kv_geometry(SCHEDULE.steps).keys
    assert all(np.array_equal(a.kv[k].k, b.kv[k].k) and np.array_equal(a.kv[k].v, b.kv[k].v) for k in a.kv.keys)
    assert not np.array_equal(a.kv[ShardKey(0, 0)].k, a.kv[ShardKey(1, 0)].k)  # the timestep modulates them
    assert not torch.equal(a.output, b.output)
    same_noise = EditRequest(other.image, seed=request.seed)  # only the photo differs
    assert not torch.equal(cloud.capture(template, same_noise, SCHEDULE).output, a.output)


_PHONE = WITHOUT_TRANSFORMERS + """
import sys
import numpy as np
from sakura.platform.kv import KVPair, ShardKey, TemplateKV
from sakura.platform.models import EditRequest, Schedule, load_model
phone = load_model(sys.argv[1], phone=True)
saved = np.load(sys.argv[2])
keys = [ShardKey(int(s), int(l)) for s, l in saved["keys"]]
kv = TemplateKV(str(saved["fingerprint"]), {k: KVPair(saved[f"k{k.step}_{k.layer}"], saved[f"v{k.step}_{k.layer}"])
                                           for k in keys})
context = {"prompt_embeds": saved["embeds"], "pooled_prompt_embeds": saved["pooled"]}
latent = phone.replay(kv, "", EditRequest(saved["photo"], seed=3), Schedule(steps=2, strength=0.8), context=context)
np.save(sys.argv[3], phone.latent_to_image(latent))
print(phone.pipe, "transformers" in sys.modules)
"""


@pytest.mark.parametrize("name", PIPELINES)
def test_the_phone_loads_vae_and_transformer_only_and_replays_equal_to_the_cloud(folders, clouds, edit, name, tmp_path):
    cloud, (template, request) = clouds[name], edit
    kv = cloud.capture(template, request, SCHEDULE).kv
    context = cloud.template_context(template)
    arrays = {f"{side}{k.step}_{k.layer}": getattr(kv[k], side) for k in kv.keys for side in "kv"}
    np.savez(tmp_path / "kv.npz", fingerprint=kv.model_fingerprint, keys=np.array([(k.step, k.layer) for k in kv.keys]),
             photo=request.image, embeds=context["prompt_embeds"], pooled=context["pooled_prompt_embeds"], **arrays)
    phone = tmp_path / "phone"  # the phone's copy of the folder: no text encoders, no tokenizers
    shutil.copytree(folders[name], phone, ignore=shutil.ignore_patterns("text_encoder*", "tokenizer*"))
    done = subprocess.run([sys.executable, "-c", _PHONE, str(phone), str(tmp_path / "kv.npz"),
                           str(tmp_path / "out.npy")], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip().splitlines()[-1] == "None False"
    np.testing.assert_array_equal(np.load(tmp_path / "out.npy"),
                                  cloud.stock_image(template, request, SCHEDULE, context))


def test_a_phone_adapter_has_the_clouds_fingerprint_and_cannot_encode_prompts(folders, clouds, edit):
    template, request = edit
    phone = load_model(str(folders["tiny-sd3-pipeline"]), phone=True)
    cloud = clouds["tiny-sd3-pipeline"]
    assert phone.fingerprint == cloud.fingerprint and phone.context_limits() == cloud.context_limits()
    with pytest.raises(ModelError, match="text encoders"):
        phone.template_context(template)
    with pytest.raises(ModelError, match="text encoders"):
        phone.replay(cloud.capture(template, request, SCHEDULE).kv, template.prompt, request, SCHEDULE)


@pytest.mark.parametrize("name", PIPELINES)
def test_prompt_embeddings_of_the_wrong_shape_are_refused(clouds, edit, name):
    cloud, (template, request) = clouds[name], edit
    kv = cloud.capture(template, request, SCHEDULE).kv
    good = cloud.template_context(template)
    assert {k: v.shape for k, v in good.items()} == cloud.context_limits()
    bad = [({**good, "prompt_embeds": good["prompt_embeds"][:-1]}, "prompt_embeds of shape"),
           ({**good, "pooled_prompt_embeds": good["pooled_prompt_embeds"][None]}, "pooled_prompt_embeds of shape"),
           ({**good, "prompt_embeds": np.full_like(good["prompt_embeds"], np.nan)}, "finite"),
           ({"prompt_embeds": good["prompt_embeds"]}, "needs the template's 'pooled_prompt_embeds'")]
    for context, message in bad:
        with pytest.raises(ModelError, match=message):
            cloud.replay(kv, template.prompt, request, SCHEDULE, context=context)


def test_bad_folders_and_inputs_are_typed_errors_naming_the_file_and_field(folders, clouds, edit, tmp_path):
    def broken(name: str, change) -> Path:
        copy = tmp_path / f"copy{len(list(tmp_path.iterdir()))}"
        shutil.copytree(folders[name], copy)
        change(copy)
        return copy

    missing = broken("tiny-sd3-pipeline", lambda d: shutil.rmtree(d / "text_encoder_3"))
    with pytest.raises(PipelineError, match=r"text_encoder_3.*missing"):
        load_model(str(missing))
    assert load_model(str(missing), phone=True).pipe is None  # the phone never needed it
    with pytest.raises(PipelineError, match=r"vae.*missing"):
        load_model(str(broken("tiny-kontext", lambda d: shutil.rmtree(d / "vae"))), phone=True)
    resolution = broken("tiny-kontext", lambda d: (d / "sakura.json").write_text('{"resolution": 66}'))
    with pytest.raises(PipelineError, match=r"sakura.json: field 'resolution': 66 is not a multiple of 4"):
        load_model(str(resolution))
    clip = broken("tiny-sd3-pipeline",
                  lambda d: (d / "sakura.json").write_text('{"resolution": 64, "clip_max_length": 77}'))
    with pytest.raises(PipelineError,
                       match=r"sakura.json: field 'clip_max_length': 77; tokenizer's model_max_length is 16"):
        load_model(str(clip))
    patches = broken("tiny-sd3-pipeline", lambda d: (d / "sakura.json").write_text('{"resolution": 128}'))
    with pytest.raises(PipelineError, match=r"field 'resolution': 128 makes 32x32 patches"):
        load_model(str(patches), phone=True)

    template, request = edit
    small = Template(np.zeros((48, 48, 3), np.float32), template.prompt)
    for cloud in clouds.values():
        with pytest.raises(ImageError, match="the image is 48x48, the model takes 64x64"):
            cloud.capture(small, request, SCHEDULE)
        with pytest.raises(ImageError, match="the image is 48x48"):
            cloud.stock_image(small, request, SCHEDULE, {})


def test_kv_of_another_pipeline_is_refused(clouds, edit):
    template, request = edit
    kv = clouds["tiny-kontext"].capture(template, request, SCHEDULE).kv
    sd3 = clouds["tiny-sd3-pipeline"]
    with pytest.raises(ModelError, match="built for model"):
        sd3.replay(kv, template.prompt, request, SCHEDULE, context=sd3.template_context(template))
