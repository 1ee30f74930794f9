"""Per-step models (a KV per step and layer: Kontext, SD3.5): would one basis per layer across the
steps, with each step's coefficients coded as differences from the step before, beat coding each
shard alone (wire format v2 as built)?

    python bench/per_step.py --model tiny-kontext --model tiny-sd3-pipeline --steps 28 --json bench/out/per-step.json

For each per-step pipeline (a tiny one by name, exported first, or a folder)
and each default transform level: the shards as built (each its own basis, the level's target met
by marginal allocation); then per layer and tensor one basis fitted over every step's tokens
(:func:`lowrank.fit` on the steps stacked), quantised once at the finest step the built shards
of that layer chose, every step's coefficients at that step: sent alone (intra) or as the
difference of their integer codes from the step before (inter: lossless on the codes, so the error
is the intra one). Errors are the calibration queries' relative attention-output error.
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

from sakura.platform import importance as imp  # noqa: E402
from sakura.platform.codec import decode_shard, default_levels, encode_shards, peek_header  # noqa: E402
from sakura.platform.codec.container import CHECKSUM_BYTES, HEADER, SECTION, compress, planes_bytes  # noqa: E402
from sakura.platform.codec.format_v2 import TENSOR, LowRankHeader  # noqa: E402
from sakura.platform.codec.lowrank import fit, quantise  # noqa: E402
from sakura.platform.codec.transform import joint  # noqa: E402
from sakura.platform.images import fit_image, load_image  # noqa: E402
from sakura.platform.models import EditRequest, Schedule, Template, load_model, query_probe  # noqa: E402

TEMPLATE, PROMPT, CALIBRATION = "skimage:coffee", "warm tones", ("skimage:chelsea", 101)


def _frames(raw: list[bytes]) -> int:
    return sum(SECTION.size + len(compress(r, 9)) for r in raw)


def measure(model: str, steps: int) -> dict:
    adapter = load_model(loadable(model))
    res, schedule = adapter.resolution, Schedule(steps=steps)
    template = Template(fit_image(load_image(TEMPLATE), res), PROMPT, "style_transfer")
    request = EditRequest(fit_image(load_image(CALIBRATION[0]), res), seed=CALIBRATION[1])
    captured = adapter.capture(template, request, schedule)
    kv, keys = captured.kv, captured.kv.keys
    scores = imp.from_attention([captured.attention_mass]) if captured.attention_mass else imp.from_key_norms(kv)
    probe: dict = {}
    adapter.replay(kv, PROMPT, request, schedule, probe=probe)
    probes = [query_probe(probe[k]) for k in keys]
    layers = sorted({k.layer for k in keys})
    overhead = HEADER.size + 8 + 1 + CHECKSUM_BYTES  # container, level name, section count, trailer
    out: dict = {"model": model, "steps": steps, "layers": len(layers), "shards": len(keys),
                 "kv_bytes_fp16": kv.nbytes_fp16, "levels": {}}
    for name, level in default_levels().items():
        if level.transform is None:
            continue
        payloads = dict(zip(keys, encode_shards([kv[k] for k in keys], level, [scores[k] for k in keys], probes)))
        built = sum(map(len, payloads.values()))
        own_err = [_error(p, kv[k], decode_shard(payloads[k])) for k, p in zip(keys, probes)]
        basis_bytes = intra = inter = 0
        rebuilt: dict = {k: [None, None] for k in keys}
        for layer in layers:
            chain = [k for k in keys if k.layer == layer]  # steps in order
            for which in (0, 1):
                headers = [peek_header(payloads[k]) for k in chain]
                assert all(isinstance(h, LowRankHeader) for h in headers)
                step = min(h.tensors[which].coef_step for h in headers)  # type: ignore[union-attr]
                x = [joint((kv[k].k, kv[k].v)[which]).astype(np.float64) for k in chain]
                code = quantise(fit(np.concatenate(x)), step)
                raw = code.raw_sections()
                basis_bytes += TENSOR.size + _frames(raw[:-1])  # mean, basis steps and codes: once per layer
                tokens = x[0].shape[0]
                codes = code.coef_codes.reshape(len(chain), tokens, code.rank)
                intra += sum(_frames([planes_bytes(np.ascontiguousarray(c.T))]) for c in codes)
                inter += _frames([planes_bytes(np.ascontiguousarray(codes[0].T))]) + sum(
                    _frames([planes_bytes(np.ascontiguousarray((b - a).T))]) for a, b in zip(codes, codes[1:]))
                dense = code.factors().dense().reshape(len(chain), tokens, -1)
                for k, d in zip(chain, dense):
                    heads, _, head_dim = kv[k].k.shape
                    rebuilt[k][which] = d.reshape(tokens, heads, head_dim).transpose(1, 0, 2)
        shared_err = [_error(p, kv[k], type(kv[k])(*rebuilt[k])) for k, p in zip(keys, probes)]
        frame = overhead * len(keys)
        out["levels"][name] = {
            "built_bytes": built, "layer_basis_intra_bytes": basis_bytes + intra + frame,
            "layer_basis_inter_bytes": basis_bytes + inter + frame, "layer_bases_bytes": basis_bytes,
            "built_rms_error": float(np.sqrt(np.mean(np.square(own_err)))),
            "layer_basis_rms_error": float(np.sqrt(np.mean(np.square(shared_err)))),
        }
        r = out["levels"][name]
        print(f"{model} {name}: built {built} B ({kv.nbytes_fp16 / built:.1f}x fp16, err {r['built_rms_error']:.4f}); "
              f"layer basis intra {r['layer_basis_intra_bytes']} B, inter {r['layer_basis_inter_bytes']} B "
              f"(err {r['layer_basis_rms_error']:.4f})", flush=True)
    return out


def _error(probe, exact_pair, pair) -> float:
    exact = probe.output(exact_pair.k, exact_pair.v)
    return float(np.sqrt(probe.squared_error(exact, pair.k, pair.v)))


def main() -> int:
    p = bench_parser(__doc__)
    p.add_argument("--model", action="append", required=True,
                   help="a tiny per-step pipeline's name (tiny-kontext, tiny-sd3-pipeline) or a folder (repeatable)")
    p.add_argument("--steps", type=int, default=8)
    args = p.parse_args()
    results = [measure(model, args.steps) for model in args.model]
    if args.json:
        args.json.write_text(json.dumps({"provenance": provenance("sakura.platform.codec"), "models": results},
                                        indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
