"""Context objects (the template prompt's embeddings the phone needs without a text encoder):
how small the transform codec gets them while the edit stays within the parity tolerance.

    python bench/context_objects.py --model tiny-klein --model tiny-kontext --model tiny-sd3-pipeline \\
        --json bench/out/context-objects.json

For each pipeline and 2-D context object of the example template (the build codes no other): the
object as the text encoder made it (its array, zstd, lossless), then coded like a shard's tensor
(:mod:`sakura.platform.codec.lowrank`: a PCA basis, one step, zstd) at every rung of the transform
ladder, coarse to fine, each replayed in a real edit (exact KV, the coded context) against the edit
with the object as made: the coarsest rung whose image is within ``PARITY_MAX_ABS`` is what coding
it would ship (the build bisects, and keeps half the tolerance as a margin).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _args import bench_parser  # noqa: E402
from _pipelines import loadable  # noqa: E402
from _provenance import provenance  # noqa: E402

from sakura.platform.codec.container import SECTION, compress  # noqa: E402
from sakura.platform.codec.format_v2 import TENSOR  # noqa: E402
from sakura.platform.codec.lowrank import fit, quantise  # noqa: E402
from sakura.platform.codec.transform import LADDER  # noqa: E402
from sakura.platform.context import encode_context  # noqa: E402
from sakura.platform.images import fit_image, load_image  # noqa: E402
from sakura.platform.models import EditRequest, Schedule, Template, load_model  # noqa: E402
from sakura.platform.verify import PARITY_MAX_ABS  # noqa: E402

TEMPLATE, PHOTO = "skimage:coffee", "skimage:astronaut"
PROMPT = "recolour the photo in the warm tones of this coffee picture"


def measure(model: str, steps: int) -> dict:
    adapter = load_model(loadable(model))
    res, schedule = adapter.resolution, Schedule(steps=steps)
    template = Template(fit_image(load_image(TEMPLATE), res), PROMPT, "style_transfer")
    request = EditRequest(fit_image(load_image(PHOTO), res), seed=3)
    kv = adapter.capture(template, request, schedule).kv
    context = adapter.template_context(template)

    def image(ctx: dict) -> np.ndarray:
        return adapter.latent_to_image(adapter.replay(kv, PROMPT, request, schedule, context=ctx))

    shipped = image(context)
    out: dict = {"model": model, "steps": steps, "objects": {}}
    for name, array in sorted(context.items()):
        raw = len(encode_context(array)[0])
        if array.ndim != 2:  # the build codes 2-D objects only
            out["objects"][name] = {"shape": list(array.shape), "dtype": str(array.dtype), "shipped_bytes": raw,
                                    "coded_within_parity_bytes": None, "coded": False, "rungs": []}
            continue
        f = fit(np.asarray(array, dtype=np.float64))
        rungs = []
        for relative in LADDER:
            code = quantise(f, relative * f.rms)
            coded = code.factors().dense().reshape(array.shape).astype(array.dtype)
            nbytes = TENSOR.size + sum(SECTION.size + len(compress(s, 9)) for s in code.raw_sections())
            diff = float(np.abs(image({**context, name: coded}) - shipped).max())
            rungs.append({"relative_step": relative, "bytes": nbytes, "rank": code.rank, "max_abs_diff": diff})
            if diff <= PARITY_MAX_ABS:
                break
        passing = [r for r in rungs if r["max_abs_diff"] <= PARITY_MAX_ABS]
        out["objects"][name] = {"shape": list(array.shape), "dtype": str(array.dtype), "shipped_bytes": raw,
                                "coded_within_parity_bytes": passing[0]["bytes"] if passing else None,
                                "coded": True, "rungs": rungs}
        best = passing[0]["bytes"] if passing else None
        print(f"{model} {name} {array.shape}: shipped {raw} B, coded within parity "
              f"{best if best is not None else 'never'} B", flush=True)
    return out


def main() -> int:
    p = bench_parser(__doc__)
    p.add_argument("--model", action="append", required=True, help="a pipeline (tiny by name) with context objects")
    p.add_argument("--steps", type=int, default=3)
    args = p.parse_args()
    results = [measure(model, args.steps) for model in args.model]
    if args.json:
        args.json.write_text(json.dumps({"provenance": provenance("sakura.platform.codec", "sakura.platform.context"),
                                         "parity_max_abs": PARITY_MAX_ABS, "models": results}, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
