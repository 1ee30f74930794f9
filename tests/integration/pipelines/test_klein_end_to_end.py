"""FLUX.2 [klein] KV from a pipeline folder, cloud to phone: `sakura models export tiny-klein`,
`sakura build --model DIR` (Ray), Ray Serve, `sakura edit --model DIR` (the phone loads VAE and
transformer only) -> the stock pipeline's image at the lossless level."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from skimage.io import imread

from sakura.cli import main as sakura
from sakura.edge_client import EdgeSession, _compute_model
from sakura.evaluation import psnr_db
from sakura.platform.context import decode_context
from sakura.platform.images import fit_image, load_image
from sakura.platform.library import TemplateLibrary
from sakura.platform.models import EditRequest, Schedule, Template, load_model
from sakura.platform.store import open_store
from sakura.platform.template_image import decode_published
from sakura.platform.verify import PARITY_MAX_ABS
from tests.integration.conftest import serve_apps

PROMPT, PHOTO, SCHEDULE = "a brick wall texture", "skimage:coffee", Schedule(steps=3, strength=0.8)


@pytest.fixture(scope="module")
def klein(tmp_path_factory) -> Path:
    folder = tmp_path_factory.mktemp("klein") / "tiny-klein"
    assert sakura(["models", "export", "tiny-klein", "--out", str(folder)]) == 0
    return folder


@pytest.fixture(scope="module")
def library(klein, tmp_path_factory, ray_cluster) -> str:
    from skimage import io as skio

    root = tmp_path_factory.mktemp("klein-lib")
    skio.imsave(root / "brick.png", load_image("skimage:brick"), check_contrast=False)
    (root / "spec.yaml").write_text(
        f"templates:\n  - id: brick\n    task: custom\n    image: brick.png\n    prompt: {PROMPT}\n"
    )
    store = f"file://{root}/lib"
    argv = [
        "build", "--spec", str(root / "spec.yaml"), "--model", str(klein), "--store", store, "--create",
        "--ray-address", ray_cluster.address, "--calibration", "1", "--steps", "3", "--strength", "0.8",
    ]
    assert sakura(argv) == 0
    return store


@pytest.fixture(scope="module")
def server(library):
    with serve_apps({"/klein": {"store": library}}, health="/klein/healthz") as base:
        yield base + "/klein"


@pytest.fixture(scope="module")
def stock(klein, library) -> np.ndarray:
    """What the unmodified Flux2KleinKVPipeline computes for the same edit, from the prompt
    embeddings the library ships (the build's text encoder ran in a one-thread Ray actor; its last
    bits may differ from this process's run of it)."""
    cloud = load_model(str(klein))
    root = Path(library.removeprefix("file://")).parent
    store, manifest = open_store(library), TemplateLibrary(open_store(library)).manifest("brick", 1)
    image = manifest.images[0]  # the template's image from now on: what the build's JPEG decodes to
    template = Template(decode_published(store.get(image.key), image.width, image.height), PROMPT)
    assert np.abs(template.image - fit_image(load_image(str(root / "brick.png")), cloud.resolution)).mean() < 0.02
    request = EditRequest(fit_image(load_image(PHOTO), cloud.resolution), seed=0)
    context = {c.name: decode_context(store.get(c.key), tuple(c.shape), c.dtype, c.encoding) for c in manifest.context}
    return cloud.stock_image(template, request, SCHEDULE, context)


def test_the_library_ships_prompt_embeddings_and_no_text_encoder_runs_on_the_phone(library):
    manifest = TemplateLibrary(open_store(library)).manifest("brick", 1)
    assert manifest.model.family == "flux2-klein" and len(manifest.shards) == 4
    assert [(c.name, c.shape, c.dtype) for c in manifest.context] == [("prompt_embeds", (32, 96), "float32")]
    # coded by the transform codec, the edit within the parity tolerance: a fraction of the array's bytes
    assert manifest.context[0].encoding == "lowrank" and manifest.context[0].length < 32 * 96 * 4 / 3
    assert manifest.schedule.steps == 3 and manifest.schedule.strength == 0.8


def test_sakura_edit_at_the_lossless_level_is_the_stock_pipelines_image(klein, server, stock, tmp_path, capsys):
    out = tmp_path / "edited.png"
    assert sakura(["edit", "--server", server, "--template", "brick", "--image", PHOTO, "--out", str(out),
                   "--model", str(klein), "--policy", "fixed-full", "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["levels"] == {"full": 4}
    expected = (np.clip(stock, 0, 1) * 255).round().astype(np.int16)
    assert np.abs(imread(out).astype(np.int16) - expected).max() <= 1  # PNG rounding of a <= 1e-5 difference


def test_a_lossy_level_stays_close_to_the_stock_image(klein, server, stock):
    phone = load_model(str(klein), phone=True)
    with EdgeSession(server, models=lambda _: phone) as session:
        full = session.edit(load_image(PHOTO), "brick", policy="fixed-full")
        compact = session.edit(load_image(PHOTO), "brick", policy="fixed-compact")
    # Within PARITY_MAX_ABS, not bit-exact: the build captured the KV in a one-thread Ray actor and
    # the stock run here uses two threads, so float sums round differently (same threads: 0.0).
    assert np.abs(full.image - stock).max() <= PARITY_MAX_ABS
    assert compact.levels == ["compact"] * 4 and compact.bytes < full.bytes
    assert psnr_db(stock, compact.image) > 30.0, psnr_db(stock, compact.image)  # the codec's compact target


def test_a_phone_that_holds_the_text_encoder_encodes_the_prompt_instead_of_fetching_it(klein, server, stock,
                                                                                      tmp_path):
    whole = load_model(str(klein))  # the stock on-device pipeline's phone: text encoder included
    assert whole.encodes_prompt and not load_model(str(klein), phone=True).encodes_prompt
    with EdgeSession(server, models=lambda _: whole, encode_prompts=True, cache_dir=tmp_path) as session:
        asked = _recorded(session)
        result = session.edit(load_image(PHOTO), "brick", 1, policy="fixed-full")
        encode_s = session.compute_model.prepare_s(whole.name, _compute_model.PROMPT)
        again = session.edit(load_image(PHOTO), "brick", 1, policy="fixed-full")  # warm: the embeddings it made
    assert asked[0].endswith("/preamble?context=0") and not [p for p in asked if "/context/" in p]
    assert encode_s is not None and result.timeline.precompute_s == encode_s > 0
    # The phone's own embeddings, not the shipped ones: equal up to the threads' rounding, like the KV.
    assert np.abs(result.image - stock).max() <= PARITY_MAX_ABS
    assert again.timeline.precompute_s == 0.0 and np.array_equal(again.image, result.image)


def test_the_phone_vae_makes_the_source_from_the_template_jpeg(klein, server, stock):
    """The phone alone computes every block from the template's JPEG (bundled with the manifest),
    never the reference latents' bytes, and its image is the stock pipeline's."""
    phone = load_model(str(klein), phone=True)
    with EdgeSession(server, models=lambda _: phone) as session:
        asked = _recorded(session)
        result = session.edit(load_image(PHOTO), "brick", policy="on-device")
        prepare_s = session.compute_model.prepare_s(phone.name, _compute_model.SOURCE)
    assert asked == ["/v1/templates/brick/versions/latest/preamble?images=1&hashes=0"]  # no shard needs a sha256
    assert result.computed == [0, 1, 2, 3] and result.bytes == 0 and prepare_s is not None and prepare_s > 0
    assert np.abs(result.image - stock).max() <= PARITY_MAX_ABS


def _recorded(session: EdgeSession) -> list[str]:
    """The paths the session's transport asks for from now on."""
    asked: list[str] = []
    for name in ("get", "download"):
        call = getattr(session.transport, name)
        setattr(session.transport, name,
                lambda path, *a, _call=call, **k: (asked.append(path), _call(path, *a, **k))[1])
    return asked


def test_sakura_edit_encode_prompts_hands_the_session_the_whole_pipeline(klein):
    from sakura import edit

    args = edit._parser().parse_args(["--server", "http://127.0.0.1:1", "--template", "brick", "--image", PHOTO,
                                      "--out", "x.png", "--model", str(klein), "--encode-prompts"])
    assert args.encode_prompts and edit._models(args)["models"]("any").encodes_prompt
    args.encode_prompts = False
    assert not edit._models(args)["models"]("any").encodes_prompt
