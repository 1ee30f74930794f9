"""Codec levels against baselines, on the same captured templates, in one run.

    python bench/codec.py --model tiny-flux --json OUT.json [--templates 3] [--requests 2]

For each method: size ratio vs fp16, KV and attention-output error, PSNR/SSIM of the edited
image vs the exact-KV image (same seed and request), ``template_rel_db`` (how much closer the
compressed KV keeps the output than another template's exact KV would), encode and decode
throughput on one thread, and decode time per shard over the model's compute per layer.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import math
import statistics
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import torch
from skimage.metrics import structural_similarity
from threadpoolctl import threadpool_limits

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _baselines import KiviInt4, Method, SakuraLevel, UniformInt8  # noqa: E402

from sakura.evaluation import psnr_db  # noqa: E402
from sakura.evaluation.cachegen import CACHEGEN_LEVELS  # noqa: E402
from sakura.platform import importance as imp  # noqa: E402
from sakura.platform.codec import default_levels  # noqa: E402
from sakura.platform.images import fit_image, load_image  # noqa: E402
from sakura.platform.kv import TemplateKV  # noqa: E402
from sakura.platform.models import EditRequest, Schedule, Template, load_model  # noqa: E402
from sakura.platform.models.registry import default_steps  # noqa: E402
from sakura.platform.spec import load_spec  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
CALIBRATION = [("skimage:chelsea", 101), ("skimage:rocket", 102)]
HELD_OUT = [("skimage:retina", 201), ("skimage:hubble_deep_field", 202), ("skimage:camera", 203)]


def frontier() -> list[Method]:
    """Extra points for the size/quality frontier: class layouts with and without importance."""
    from sakura.platform.codec import parse_levels

    layouts = {
        "u3": [(1.0, 3)], "u4": [(1.0, 4)],
        "mix-8/4/2": [(0.1, 8), (0.3, 4), (0.6, 2)],
        "mix-6/3/2": [(0.1, 6), (0.3, 3), (0.6, 2)],
    }
    out: list[Method] = []
    for name, classes in layouts.items():
        level_spec = {"name": name.replace("/", "-"), "classes": [{"fraction": f, "bits": b} for f, b in classes]}
        (level,) = parse_levels([level_spec]).values()
        out.append(SakuraLevel(name, level, description=f"frontier {name}"))
        if len(classes) > 1:
            out.append(SakuraLevel(f"{name}-random", level, random_ranking=True,
                                   description=f"frontier {name}, random ranking"))
    return out


def methods(with_frontier: bool = False) -> list[Method]:
    levels = default_levels()
    extra = frontier() if with_frontier else []
    return extra + [
        SakuraLevel("compact", levels["compact"], description="SAKURA compact"),
        SakuraLevel("medium", levels["medium"], description="SAKURA medium"),
        SakuraLevel("full", levels["full"], description="SAKURA full (lossless)"),
        SakuraLevel("medium-random", levels["medium"], random_ranking=True,
                    description="importance-blind: medium's classes, random token ranking"),
        SakuraLevel("compact-random", levels["compact"], random_ranking=True,
                    description="importance-blind: compact's classes, random token ranking"),
        UniformInt8(),
        KiviInt4(),
        *CACHEGEN_LEVELS,
    ]


@dataclass
class Case:
    """One template with its exact KV, importance, and per held-out request the exact outputs."""

    template: Template
    kv: TemplateKV
    scores: imp.ImportanceScores
    requests: list[EditRequest]
    exact: list[torch.Tensor] = field(default_factory=list)
    wrong: list[torch.Tensor] = field(default_factory=list)
    probes: list[dict] = field(default_factory=list)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", default="tiny-flux")
    parser.add_argument("--spec", default=str(ROOT / "examples" / "templates.yaml"))
    parser.add_argument("--templates", type=int, default=3, help="how many spec templates to use")
    parser.add_argument("--requests", type=int, default=2, help="held-out requests per template")
    parser.add_argument("--steps", type=int, help="denoising steps (default: the model's library default)")
    parser.add_argument("--methods", nargs="*", help="only these methods")
    parser.add_argument("--frontier", action="store_true", help="add uniform and mixed-class points, ranked and random")
    parser.add_argument("--json", help="write the figures here")
    args = parser.parse_args()

    adapter = load_model(args.model)
    args.steps = args.steps or default_steps(args.model)
    schedule = Schedule(steps=args.steps)
    print(f"model {args.model}: capturing {args.templates} templates, {args.requests} held-out requests each")
    cases, layer_s = prepare(adapter, schedule, args)
    chosen = [m for m in methods(args.frontier) if not args.methods or m.name in args.methods]
    results = {m.name: evaluate(m, adapter, schedule, cases, layer_s) for m in chosen}
    print_table(results)
    if args.json:
        Path(args.json).write_text(json.dumps({
            "model": args.model, "steps": args.steps, "templates": len(cases), "requests": args.requests,
            "layer_compute_s": layer_s, "methods": results,
        }, indent=2))
    return 0


def prepare(adapter, schedule: Schedule, args) -> tuple[list[Case], float]:
    spec = load_spec(args.spec)
    res = adapter.resolution
    entries = spec.templates[: args.templates]
    if len(entries) < 2:
        raise SystemExit("need at least two templates (one serves as the wrong template of the other)")

    def request(ref: str, seed: int) -> EditRequest:
        return EditRequest(fit_image(load_image(ref), res), seed=seed)

    cases = []
    for entry in entries:
        template = Template(fit_image(load_image(entry.image, spec.base_dir), res), entry.prompt, entry.task.value)
        captures = [adapter.capture(template, request(*c), schedule) for c in CALIBRATION]
        # Models on a pipeline's own KV seam (FLUX.2 klein) expose no attention: rank by key norm.
        scores = (imp.from_attention(c.attention_mass for c in captures) if captures[0].attention_mass
                  else imp.from_key_norms(captures[0].kv))
        cases.append(Case(template, captures[0].kv, scores, [request(*r) for r in HELD_OUT[: args.requests]]))
    layer_times = []
    for i, case in enumerate(cases):
        other = cases[(i + 1) % len(cases)].kv
        for req in case.requests:
            probe: dict | None = {} if adapter.supports_probe else None
            start = time.perf_counter()
            case.exact.append(adapter.replay(case.kv, case.template.prompt, req, schedule, probe=probe))
            layer_times.append((time.perf_counter() - start) / (schedule.steps * adapter.info().layers))
            case.probes.append(probe)
            case.wrong.append(adapter.replay(other, case.template.prompt, req, schedule))
    return cases, statistics.median(layer_times)


def evaluate(method: Method, adapter, schedule: Schedule, cases: list[Case], layer_s: float) -> dict:
    fp16 = nbytes = 0
    enc_s = dec_s = 0.0
    kv_err, attn_err, psnr, ssim, rel_db = [], [], [], [], []
    bit_exact = True
    layers = adapter.info().layers
    for case in cases:
        decoded = {}
        with threadpool_limits(limits=1), _torch_threads(1):
            for key in case.kv:
                pair = case.kv[key]
                rt = method.roundtrip(pair, key, case.scores[key], layers)
                decoded[key] = rt.pair
                nbytes += rt.nbytes
                enc_s, dec_s = enc_s + rt.encode_s, dec_s + rt.decode_s
                fp16 += pair.k.size * 2 * 2
                bit_exact &= np.array_equal(rt.pair.k, pair.k) and np.array_equal(rt.pair.v, pair.v)
        kv_err.append(_kv_rel_err(case.kv, decoded))
        approx = TemplateKV(case.kv.model_fingerprint, decoded)
        for req, exact, wrong, probe in zip(case.requests, case.exact, case.wrong, case.probes):
            attn_err.append(_attn_rel_err(probe, case.kv, decoded))
            out = adapter.replay(approx, case.template.prompt, req, schedule)
            img, ref = adapter.latent_to_image(out), adapter.latent_to_image(exact)
            psnr.append(psnr_db(ref, img))
            ssim.append(float(structural_similarity(ref, img, channel_axis=2, data_range=1.0)))
            err = float((out - exact).norm())
            rel_db.append(math.inf if err == 0 else 20 * math.log10(float((wrong - exact).norm()) / err))
    shards = sum(len(c.kv) for c in cases)
    result = {
        "description": method.description,
        "ratio_vs_fp16": fp16 / nbytes,
        "kv_rel_err": float(np.mean(kv_err)),
        "attn_out_rel_err": float(np.mean(attn_err)),
        "psnr_db": float(np.mean(psnr)),
        "ssim": float(np.mean(ssim)),
        "template_rel_db": float(np.mean(rel_db)),
        "template_rel_db_min": float(np.min(rel_db)),
        "encode_mb_s": fp16 / enc_s / 1e6,
        "decode_mb_s": fp16 / dec_s / 1e6,
        "decode_vs_compute": (dec_s / shards) / layer_s,
        "bit_exact": bool(bit_exact),
    }
    print(f"  {method.name:16s} ratio {result['ratio_vs_fp16']:5.2f}  psnr {result['psnr_db']:6.1f}  "
          f"rel_db {result['template_rel_db']:6.1f}", flush=True)
    return result


def _kv_rel_err(kv: TemplateKV, decoded: dict) -> float:
    num = den = 0.0
    for key in kv:
        for a, b in ((kv[key].k, decoded[key].k), (kv[key].v, decoded[key].v)):
            a64 = a.astype(np.float64)
            num += float(((b.astype(np.float64) - a64) ** 2).sum())
            den += float((a64**2).sum())
    return math.sqrt(num / den)


def _attn_rel_err(probe: dict | None, kv: TemplateKV, decoded: dict) -> float:
    """Attention output of the held-out request's queries: decoded vs exact template KV (NaN for
    models that cannot be probed)."""
    if probe is None:
        return math.nan
    def tensors(pair, like):
        return (torch.from_numpy(np.ascontiguousarray(x)).to(like.dtype) for x in (pair.k, pair.v))

    errs = []
    for key, p in probe.items():
        exact = p.attend(*tensors(kv[key], p.key))
        approx = p.attend(*tensors(decoded[key], p.key))
        errs.append(float((approx - exact).norm() / exact.norm()))
    return float(np.mean(errs))


@contextlib.contextmanager
def _torch_threads(n: int):
    saved = torch.get_num_threads()
    torch.set_num_threads(n)
    try:
        yield
    finally:
        torch.set_num_threads(saved)


def print_table(results: dict) -> None:
    cols = ["ratio_vs_fp16", "kv_rel_err", "attn_out_rel_err", "psnr_db", "ssim", "template_rel_db",
            "encode_mb_s", "decode_mb_s", "decode_vs_compute"]
    print(f"{'method':16s} " + " ".join(f"{c[:12]:>12s}" for c in cols))
    for name, r in results.items():
        print(f"{name:16s} " + " ".join(f"{r[c]:12.4g}" for c in cols))


if __name__ == "__main__":
    sys.exit(main())
