"""Codec levels against baselines, on the same captured templates, in one run.

    python bench/codec.py --model reference --frontier --json bench/out/codec-reference-frontier.json

For each method: size ratio vs fp16, KV and attention-output error, PSNR/SSIM of the edited
image vs the exact-KV image (same seed and request), ``template_rel_db`` (how much closer the
compressed KV keeps the output than another template's exact KV would), encode and decode
throughput on one thread, decode time per shard over the model's compute per layer (to K/V, and
to factors: what a phone attending in factored form decodes), and for transform levels the
replay time on factors over that on rebuilt K/V. Transform levels encode each template's shards
together with the calibration edit's queries, as the build does. ``rank_spectrum``: per shard, the
rank holding 90% and 99% of K's and V's energy about their mean (heads side by side).
``--frontier`` adds v1 class layouts (importance-ranked and random) and a sweep of transform
targets: weighted and unweighted fits, marginal and uniform allocation; ``importance`` then says
what weighting and allocation buy at equal bytes.
"""

from __future__ import annotations

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
from _args import bench_parser  # noqa: E402
from _baselines import KiviInt4, Method, SakuraLevel, UniformInt8  # noqa: E402
from _codec_report import frontier_summary, rank_spectrum  # noqa: E402
from _pipelines import loadable  # noqa: E402
from _provenance import provenance  # noqa: E402

from sakura.evaluation import psnr_db  # noqa: E402
from sakura.evaluation.cachegen import CACHEGEN_LEVELS, Roundtrip  # noqa: E402
from sakura.platform import importance as imp  # noqa: E402
from sakura.platform.codec import LevelSpec, QueryProbe, TransformSpec, default_levels, v1_levels  # noqa: E402
from sakura.platform.images import fit_image, load_image  # noqa: E402
from sakura.platform.kv import KVShard, ShardKey, TemplateKV  # noqa: E402
from sakura.platform.models import EditRequest, Schedule, Template, load_model, query_probe  # noqa: E402
from sakura.platform.models.registry import default_steps  # noqa: E402
from sakura.platform.spec import load_spec  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
CALIBRATION = [("skimage:chelsea", 101), ("skimage:rocket", 102)]
HELD_OUT = [("skimage:retina", 201), ("skimage:hubble_deep_field", 202), ("skimage:camera", 203)]


#: Transform targets of the frontier sweep (relative attention-output error), and its variants.
TARGETS = (0.002, 0.004, 0.008, 0.015, 0.03, 0.06)
VARIANTS = {
    "lr": dict(weighted=True, allocation="marginal"),
    "lr-unweighted": dict(weighted=False, allocation="marginal"),
    "lr-uniform": dict(weighted=True, allocation="uniform"),
}


def frontier() -> list[Method]:
    """Extra points for the size/quality frontier: v1 class layouts with and without importance,
    and transform levels over a sweep of targets, weighted or not, allocated or not."""
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
    for variant, options in VARIANTS.items():
        for target in TARGETS:
            level = LevelSpec(name="lr", transform=TransformSpec(target=target, **options))  # type: ignore[arg-type]
            out.append(SakuraLevel(f"{variant}@{target}", level, description=f"frontier transform {variant}, "
                                   f"target {target}"))
    return out


def methods(with_frontier: bool = False) -> list[Method]:
    levels, v1 = default_levels(), v1_levels()
    extra = frontier() if with_frontier else []
    return extra + [
        SakuraLevel("compact", levels["compact"], description="SAKURA compact (transform, format v2)"),
        SakuraLevel("medium", levels["medium"], description="SAKURA medium (transform, format v2)"),
        SakuraLevel("full", levels["full"], description="SAKURA full (lossless)"),
        SakuraLevel("compact-v1", v1["compact"], description="format v1 compact: importance-ranked classes"),
        SakuraLevel("medium-v1", v1["medium"], description="format v1 medium: importance-ranked classes"),
        SakuraLevel("medium-v1-random", v1["medium"], random_ranking=True,
                    description="importance-blind: v1 medium's classes, random token ranking"),
        SakuraLevel("compact-v1-random", v1["compact"], random_ranking=True,
                    description="importance-blind: v1 compact's classes, random token ranking"),
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
    #: The calibration edit's queries per shard (what transform levels measure their error on).
    calibration: list[QueryProbe | None] | None = None


def main() -> int:
    parser = bench_parser(__doc__)
    parser.add_argument("--model", default="tiny-flux", help="a named model, a tiny pipeline's name (exported "
                        "first: tiny-klein, tiny-kontext, tiny-sd3-pipeline) or a pipeline folder")
    parser.add_argument("--spec", default=str(ROOT / "examples" / "templates.yaml"))
    parser.add_argument("--templates", type=int, default=3, help="how many spec templates to use")
    parser.add_argument("--requests", type=int, default=2, help="held-out requests per template")
    parser.add_argument("--steps", type=int, help="denoising steps (default: the model's library default)")
    parser.add_argument("--methods", nargs="*", help="only these methods")
    parser.add_argument("--frontier", action="store_true", help="add uniform and mixed-class points, ranked and random")
    parser.add_argument("--blocks", type=int, help="klein shapes only: keep the first N blocks (4B random weights "
                        "take 16 GB in fp32)")
    parser.add_argument("--label", help="the model's name in the JSON (default: --model; e.g. for a folder)")
    args = parser.parse_args()

    adapter = _adapter(args.model, args.blocks)
    args.steps = args.steps or default_steps(args.model)
    schedule = Schedule(steps=args.steps)
    print(f"model {args.model}: capturing {args.templates} templates, {args.requests} held-out requests each")
    cases, layer_s = prepare(adapter, schedule, args)
    chosen = [m for m in methods(args.frontier) if not args.methods or m.name in args.methods]
    results = {m.name: evaluate(m, adapter, schedule, cases, layer_s) for m in chosen}
    print_table(results)
    report = {
        "provenance": provenance("sakura.platform.codec", "sakura.platform.models._factored", "_baselines",
                                 "sakura.evaluation.cachegen"),
        "model": args.label or args.model, "blocks": args.blocks, "steps": args.steps, "templates": len(cases),
        "kv_itemsize": int(cases[0].kv.dtype.itemsize),  # type: ignore[union-attr]
        "requests": args.requests,
        "layer_compute_s": layer_s, "rank_spectrum": rank_spectrum([c.kv for c in cases]), "methods": results,
    }
    if args.frontier:
        report["importance"] = frontier_summary(results, TARGETS, list(VARIANTS))
    if args.json:
        Path(args.json).write_text(json.dumps(report, indent=2) + "\n")
    return 0


def _adapter(model: str, blocks: int | None):
    if blocks is None:
        return load_model(loadable(model))
    from sakura.platform.models.pipelines.klein_shapes import SHAPES, build_adapter

    if model not in SHAPES:
        raise SystemExit(f"--blocks takes a klein shape ({', '.join(sorted(SHAPES))}), not {model!r}")
    return build_adapter(SHAPES[model], blocks=blocks)


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
        case = Case(template, captures[0].kv, scores, [request(*r) for r in HELD_OUT[: args.requests]])
        if adapter.supports_probe:  # the queries the build measures transform levels on
            probe: dict = {}
            adapter.replay(case.kv, template.prompt, request(*CALIBRATION[0]), schedule, probe=probe)
            case.calibration = [query_probe(probe[key]) for key in case.kv.keys]
        cases.append(case)
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
    enc_s = dec_s = factored_s = 0.0
    kv_err, attn_err, psnr, ssim, rel_db, replay_ratio, worst, ranks = [], [], [], [], [], [], [], []
    bit_exact = True
    layers = adapter.info().layers
    transform = isinstance(method, SakuraLevel) and method.level.transform is not None
    for case in cases:
        keys = case.kv.keys
        with threadpool_limits(limits=1), _torch_threads(1):
            trips, factored, case_ranks = _roundtrips(method, case, layers)
        ranks += case_ranks
        decoded = {key: rt.pair for key, rt in zip(keys, trips)}
        for key, rt in zip(keys, trips):
            pair = case.kv[key]
            nbytes += rt.nbytes
            enc_s, dec_s = enc_s + rt.encode_s, dec_s + rt.decode_s
            fp16 += pair.k.size * 2 * 2
            bit_exact &= np.array_equal(rt.pair.k, pair.k) and np.array_equal(rt.pair.v, pair.v)
        factored_s += factored
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
        worst.append(float(np.mean(psnr[-len(case.requests):])))
        if transform and adapter.attends_factored:
            replay_ratio.append(_factored_replay_ratio(adapter, schedule, case, approx, method))
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
        "psnr_db_worst_template": min(worst),  # the lowest of the templates' mean PSNRs
        "encode_mb_s": fp16 / enc_s / 1e6,
        "decode_mb_s": fp16 / dec_s / 1e6,
        "decode_vs_compute": (dec_s / shards) / layer_s,
        "factor_decode_mb_s": fp16 / factored_s / 1e6,
        "factored_decode_vs_compute": (factored_s / shards) / layer_s,
        "replay_factored_vs_dense": float(np.mean(replay_ratio)) if replay_ratio else None,
        "bit_exact": bool(bit_exact),
    }
    if ranks:  # version 2: each tensor's rank, as a share of min(tokens, width); identity bases count as 1
        heads, tokens, head_dim = cases[0].kv[cases[0].kv.keys[0]].k.shape
        top = min(tokens, heads * head_dim)
        for i, name in enumerate(("k", "v")):
            result[f"{name}_rank_share"] = float(np.mean([1.0 if r[i] is None else r[i] / top for r in ranks]))
            result[f"{name}_identity_share"] = float(np.mean([r[i] is None for r in ranks]))
    print(f"  {method.name:22s} ratio {result['ratio_vs_fp16']:6.2f}  psnr {result['psnr_db']:6.1f}  "
          f"attn {result['attn_out_rel_err']:.4f}  rel_db {result['template_rel_db']:6.1f}", flush=True)
    return result


def _roundtrips(method: Method, case: Case, layers: int) -> tuple[list[Roundtrip], float, list]:
    """Every shard of ``case`` through ``method`` (a template at once where it can), the seconds
    decoding them to the form the phone attends to took, and version 2's ranks."""
    keys = case.kv.keys
    if isinstance(method, SakuraLevel):
        t = method.roundtrip_template([case.kv[k] for k in keys], keys, [case.scores[k] for k in keys],
                                      case.calibration)
        return t.trips, t.factored_s, t.ranks
    trips = [method.roundtrip(case.kv[k], k, case.scores[k], layers) for k in keys]
    return trips, sum(t.decode_s for t in trips), []


class _Factored:
    """A template's KV as the phone holds version 2 shards: factored."""

    def __init__(self, kv: TemplateKV, shards: dict[ShardKey, KVShard]) -> None:
        self.model_fingerprint, self.keys, self.template_tokens = kv.model_fingerprint, kv.keys, kv.template_tokens
        self._shards = shards

    def __getitem__(self, key: ShardKey) -> KVShard:
        return self._shards[key]


def _factored_replay_ratio(adapter, schedule: Schedule, case: Case, rebuilt: TemplateKV, method: SakuraLevel) -> float:
    """Replay time on factors over replay time on rebuilt K/V (one thread, fastest of three each)."""
    from sakura.platform.codec import decode_shard, encode_shards

    keys = case.kv.keys
    payloads = encode_shards([case.kv[k] for k in keys], method.level, [case.scores[k] for k in keys],
                             case.calibration)
    factored = _Factored(case.kv, {k: decode_shard(p, factored=True) for k, p in zip(keys, payloads)})
    times = {}
    with threadpool_limits(limits=1), _torch_threads(1):
        for name, kv in (("factored", factored), ("dense", rebuilt)):
            runs = []
            for _ in range(3):
                start = time.perf_counter()
                adapter.replay(kv, case.template.prompt, case.requests[0], schedule)
                runs.append(time.perf_counter() - start)
            times[name] = min(runs)
    return times["factored"] / times["dense"]


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
    print(f"{'method':22s} " + " ".join(f"{c[:12]:>12s}" for c in cols))
    for name, r in results.items():
        print(f"{name:22s} " + " ".join(f"{r[c]:12.4g}" for c in cols))


if __name__ == "__main__":
    sys.exit(main())
