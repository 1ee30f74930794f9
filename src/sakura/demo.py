"""``sakura demo``: the mission so far, on the embedded default.

1. Verifies that replaying cached template KV is exact on every model family.
2. Edits a photo with each example template using the trained reference model: captures the
   template's KV once, encodes it at every codec level, decodes it and replays, writing one PNG
   per template (user photo, template, then the edit at each level) and a size/fidelity table.
"""

from __future__ import annotations

import argparse
import math
from pathlib import Path

import numpy as np

from sakura.platform.codec import decode_shard, default_levels, encode_shard
from sakura.platform.images import fit_image, load_image, save_grid
from sakura.platform.importance import from_attention
from sakura.platform.kv import TemplateKV
from sakura.platform.models import EditRequest, Schedule, Template, load_model
from sakura.platform.spec import load_spec
from sakura.platform.verify import verify_model

EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "templates.yaml"
#: The user's photo for each task (none of them a template image).
USER_PHOTOS = {"face_swap": "skimage:lfw_subset/93", "try_on": "skimage:chelsea", "style_transfer": "skimage:astronaut"}
CALIBRATION_PHOTO = "skimage:rocket"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="sakura demo", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--spec", type=Path, default=EXAMPLES)
    parser.add_argument("--out", type=Path, default=Path("demo-out"))
    parser.add_argument("--steps", type=int, default=8)
    args = parser.parse_args(argv)

    print("== exact replay of cached template KV")
    for name in ("tiny-flux", "tiny-sd3", "reference"):
        r = verify_model(name, steps=4, repeats=1)
        print(f"   {name:10s} {r.shards:3d} shards  rel_l2 {r.rel_l2_diff:.1e}  exact {r.exact}")
    print(f"== edits with the reference model ({args.steps} steps) -> {args.out}/")
    args.out.mkdir(parents=True, exist_ok=True)
    adapter = load_model("reference")
    spec = load_spec(args.spec)
    levels = default_levels()
    schedule = Schedule(steps=args.steps)
    res = adapter.resolution
    print(f"   {'template':14s} {'level':8s} {'bytes':>8s} {'vs fp16':>8s} {'PSNR vs full':>12s}")
    for entry in spec.templates:
        template = Template(fit_image(load_image(entry.image, spec.base_dir), res), entry.prompt, entry.task.value)
        calibration = EditRequest(fit_image(load_image(CALIBRATION_PHOTO), res), seed=7)
        captured = adapter.capture(template, calibration, schedule)
        scores = from_attention([captured.attention_mass])
        user = EditRequest(fit_image(load_image(USER_PHOTOS.get(entry.task.value, CALIBRATION_PHOTO)), res), seed=1)
        images, sizes = {}, {}
        for name, level in levels.items():
            payloads = {k: encode_shard(captured.kv[k], level, scores[k]) for k in captured.kv}
            kv = TemplateKV(captured.kv.model_fingerprint, {k: decode_shard(p) for k, p in payloads.items()})
            images[name] = adapter.latent_to_image(adapter.replay(kv, template.prompt, user, schedule))
            sizes[name] = sum(map(len, payloads.values()))
        for name, size in sizes.items():
            psnr = "(reference)" if name == "full" else _psnr(images["full"], images[name])
            print(f"   {entry.id:14s} {name:8s} {size:8d} {captured.kv.nbytes_fp16 / size:7.2f}x {psnr:>12s}")
        save_grid([[user.image, template.image, *images.values()]], args.out / f"{entry.id}.png", scale=6)
    print(f"   columns of each PNG: user photo, template, then {', '.join(levels)}")
    return 0


def _psnr(ref: np.ndarray, img: np.ndarray) -> str:
    mse = float(np.mean((ref - img) ** 2))
    return "identical" if mse == 0 else f"{10 * math.log10(1.0 / mse):.1f} dB"
