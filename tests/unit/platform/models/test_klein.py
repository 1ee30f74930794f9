"""FLUX.2 [klein] KV pipeline folders: exact replay on diffusers' own KV seam, parity with the
stock ``Flux2KleinKVPipeline``, a phone that never imports ``transformers``, typed errors."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

from sakura.platform.errors import ModelError
from sakura.platform.images import fit_image, load_image
from sakura.platform.kv import ShardKey
from sakura.platform.models import EditRequest, Schedule, Template, load_model
from sakura.platform.models.pipelines import PipelineError
from sakura.platform.models.pipelines import flux2_latents as ours
from sakura.platform.models.pipelines.tiny import export
from sakura.platform.verify import verify_model
from tests.helpers import WITHOUT_TRANSFORMERS

SCHEDULE = Schedule(steps=3, strength=0.8)


@pytest.fixture(scope="module")
def edit(klein):
    res = klein.resolution
    template = Template(fit_image(load_image("skimage:brick"), res), "a brick wall texture")
    request = EditRequest(fit_image(load_image("skimage:coffee"), res), seed=3)
    return template, request


def test_latent_helpers_equal_diffusers_own(klein, edit):
    from diffusers.pipelines.flux2.pipeline_flux2_klein_kv import Flux2KleinKVPipeline as P
    from diffusers.pipelines.flux2.pipeline_flux2_klein_kv import compute_empirical_mu

    g = torch.Generator().manual_seed(0)
    grid = torch.randn(2, 16, 6, 4, generator=g)
    packed, ids = ours.pack(grid), ours.latent_ids(grid)
    assert torch.equal(packed, P._pack_latents(grid)) and torch.equal(ids, P._prepare_latent_ids(grid))
    assert torch.equal(ours.unpack(packed, ids), P._unpack_latents_with_ids(packed, ids))
    assert torch.equal(ours.patchify(grid), P._patchify_latents(grid))
    assert torch.equal(ours.unpatchify(grid), P._unpatchify_latents(grid))
    embeds = torch.randn(2, 7, 5, generator=g)
    assert torch.equal(ours.text_ids(embeds), P._prepare_text_ids(embeds))
    for seq, steps in [(256, 4), (4096, 28), (5000, 50)]:
        assert ours.empirical_mu(seq, steps) == compute_empirical_mu(seq, steps)
    photo = torch.rand(1, 3, 64, 64, generator=g) * 2 - 1
    assert torch.equal(ours.encode_image(klein.vae, photo), klein.pipe._encode_vae_image(photo, generator=None))


def test_replay_is_exact_and_the_edit_equals_the_stock_pipeline(klein_folder):
    report = verify_model(str(klein_folder), steps=3, repeats=1)
    assert report.exact and report.rel_l2_diff == 0.0
    assert report.pipeline == "Flux2KleinKVPipeline" and report.pipeline_parity
    assert report.pipeline_max_abs_diff == 0.0  # bit-exact, not merely within 1e-5
    assert report.shards == 4 and report.template_tokens == 256


def test_img2img_starts_from_the_users_photo_and_the_kv_does_not_depend_on_it(klein, edit):
    template, request = edit
    other = EditRequest(fit_image(load_image("skimage:astronaut"), klein.resolution), seed=9)
    a, b = klein.capture(template, request, SCHEDULE), klein.capture(template, other, SCHEDULE)
    assert all(np.array_equal(a.kv[k].k, b.kv[k].k) and np.array_equal(a.kv[k].v, b.kv[k].v) for k in a.kv.keys)
    assert not torch.equal(a.output, b.output)


def test_replay_reads_each_shard_once_in_the_order_blocks_run(klein_folder, klein, edit):
    template, request = edit
    kv = klein.capture(template, request, SCHEDULE).kv
    phone = load_model(str(klein_folder), phone=True)
    read: list[ShardKey] = []

    class Recording:
        model_fingerprint, keys, template_tokens = kv.model_fingerprint, kv.keys, kv.template_tokens

        def __getitem__(self, key):
            read.append(key)
            return kv[key]

    phone.replay(Recording(), template.prompt, request, SCHEDULE, context=klein.template_context(template))
    assert tuple(read) == phone.kv_geometry(SCHEDULE.steps).keys


_PHONE = WITHOUT_TRANSFORMERS + """
import sys
import numpy as np
from sakura.platform.kv import KVPair, ShardKey, TemplateKV
from sakura.platform.models import EditRequest, Schedule, load_model
phone = load_model(sys.argv[1], phone=True)
saved = np.load(sys.argv[2])
kv = TemplateKV(str(saved["fingerprint"]),
                {ShardKey(None, i): KVPair(saved[f"k{i}"], saved[f"v{i}"]) for i in range(4)})
request = EditRequest(saved["photo"], seed=3)
latent = phone.replay(kv, "", request, Schedule(steps=3, strength=0.8), context={"prompt_embeds": saved["embeds"]})
np.save(sys.argv[3], phone.latent_to_image(latent))
print("components", sorted(vars(phone.pipe or object()).keys()) if phone.pipe else None, "transformers" in sys.modules)
"""


def test_the_phone_loads_vae_and_transformer_only_and_never_imports_transformers(klein_folder, klein, edit, tmp_path):
    template, request = edit
    kv = klein.capture(template, request, SCHEDULE).kv
    context = klein.template_context(template)
    arrays = {f"{side}{i}": getattr(kv[ShardKey(None, i)], side) for i in range(4) for side in "kv"}
    np.savez(tmp_path / "kv.npz", fingerprint=kv.model_fingerprint, photo=request.image,
             embeds=context["prompt_embeds"], **arrays)
    done = subprocess.run([sys.executable, "-c", _PHONE, str(klein_folder), str(tmp_path / "kv.npz"),
                           str(tmp_path / "out.npy")], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip().splitlines()[-1] == "components None False"
    expected = klein.stock_image(template, request, SCHEDULE, context)
    np.testing.assert_array_equal(np.load(tmp_path / "out.npy"), expected)


def test_a_phone_adapter_cannot_encode_prompts(klein_folder, edit):
    phone = load_model(str(klein_folder), phone=True)
    assert phone.fingerprint == load_model(str(klein_folder)).fingerprint
    with pytest.raises(ModelError, match="text encoder"):
        phone.template_context(edit[0])


def test_bad_folders_are_typed_errors_naming_the_file_and_field(klein_folder, tmp_path):
    def broken(change) -> Path:
        copy = tmp_path / f"copy{len(list(tmp_path.iterdir()))}"
        shutil.copytree(klein_folder, copy)
        change(copy)
        return copy

    missing = broken(lambda d: shutil.rmtree(d / "vae"))
    with pytest.raises(PipelineError, match=r"vae.*missing"):
        load_model(str(missing))

    def rename(d: Path) -> None:
        index = json.loads((d / "model_index.json").read_text())
        (d / "model_index.json").write_text(json.dumps({**index, "_class_name": "WanImageToVideoPipeline"}))

    with pytest.raises(PipelineError, match=r"model_index.json: field '_class_name': unsupported"):
        load_model(str(broken(rename)))
    settings = broken(lambda d: (d / "sakura.json").write_text('{"resolution": 3}'))
    with pytest.raises(PipelineError, match=r"sakura.json: field 'resolution'"):
        load_model(str(settings))
    odd = broken(lambda d: (d / "sakura.json").write_text('{"resolution": 70}'))  # the VAE and patch need 4s
    with pytest.raises(PipelineError, match=r"sakura.json: field 'resolution': 70 is not a multiple of 4"):
        load_model(str(odd), phone=True)


def test_a_reference_image_the_model_cannot_take_is_refused(klein):
    with pytest.raises(ModelError, match="reference image is 48x48"):
        klein.capture(Template(np.zeros((48, 48, 3), np.float32), "p"), EditRequest(np.zeros((64, 64, 3), np.float32)),
                      SCHEDULE)


def test_kv_of_another_pipeline_is_refused(klein_folder, klein, edit, tmp_path):
    other = load_model(str(export("tiny-klein", tmp_path / "other")))  # same config, other... same seed
    assert other.fingerprint == klein.fingerprint  # a deterministic export: the same model
    with torch.no_grad():
        other.model.proj_out.weight.add_(1.0)
    other._fingerprint = None
    template, request = edit
    with pytest.raises(ModelError, match="built for model"):
        other.replay(klein.capture(template, request, SCHEDULE).kv, "", request, SCHEDULE,
                     context=klein.template_context(template))


def test_an_export_is_the_same_pipeline_every_time(klein_folder, tmp_path):
    again = export("tiny-klein", tmp_path / "again")
    files = sorted(p.relative_to(klein_folder) for p in klein_folder.rglob("*") if p.is_file())
    assert files == sorted(p.relative_to(again) for p in again.rglob("*") if p.is_file())
    assert all((klein_folder / f).read_bytes() == (again / f).read_bytes() for f in files)
    tokenizer = load_model(str(klein_folder)).pipe.tokenizer
    assert tokenizer.decode(tokenizer("a brick wall texture")["input_ids"]) == "a brick wall texture"
