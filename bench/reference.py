"""Evaluate the trained reference model on held-out pairs, per task.

    python bench/reference.py --json OUT.json [--pairs 16] [--steps 8] [--grid OUT.png]

Per task: PSNR and SSIM of the model's output (exact template KV) against the classical target,
next to the "copy the user image" baseline; how concentrated request attention is on template
tokens (share of the mass on the top 10% / 30% of template tokens, per head and layer; uniform
attention gives 10% / 30%); and the output with ``medium`` and ``compact`` KV against the exact
one. A PNG grid shows user image, template, target, exact-KV output, medium and compact outputs.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np
from _args import bench_parser
from _provenance import provenance
from skimage.metrics import peak_signal_noise_ratio, structural_similarity

from sakura.evaluation.plots import image_grid
from sakura.jobs import reference_data as data
from sakura.platform.codec import decode_shard, default_levels, encode_shard
from sakura.platform.importance import from_attention
from sakura.platform.kv import TemplateKV
from sakura.platform.models import EditRequest, Schedule, Template, load_model


def main() -> int:
    parser = bench_parser(__doc__)
    parser.add_argument("--pairs", type=int, default=16, help="held-out pairs per task")
    parser.add_argument("--steps", type=int, default=8)
    parser.add_argument("--seed", type=int, default=1234)
    parser.add_argument("--grid", default="bench/out/reference-grid.png", help="PNG grid of examples")
    args = parser.parse_args()

    adapter = load_model("reference")
    schedule = Schedule(steps=args.steps)
    levels = default_levels()
    rng = np.random.default_rng(args.seed)
    report: dict = {"provenance": provenance("sakura.platform.models", "sakura.platform.codec",
                                             "sakura.platform.importance", "sakura.jobs.reference_data"),
                    "steps": args.steps, "pairs_per_task": args.pairs, "tasks": {}}
    grid_rows, grid_labels = [], []
    for task in data.TASKS:
        batch = data.sample_batch("held_out", args.pairs, rng, tasks=(task,))
        rows = [evaluate_pair(adapter, schedule, levels, task, batch, i) for i in range(args.pairs)]
        report["tasks"][task] = summarise(rows)
        grid_rows += [r["images"] for r in rows[:2]]
        grid_labels += [f"{task} #{i + 1}" for i in range(min(2, len(rows)))]
        t = report["tasks"][task]
        print(f"{task:15s} model {t['psnr_db']:5.2f} dB (ssim {t['ssim']:.3f})  copy {t['copy_psnr_db']:5.2f} dB  "
              f"gain {t['gain_db']:+5.2f} dB  top10% {t['top10_share']:.1%} top30% {t['top30_share']:.1%}  "
              f"medium {t['medium_psnr_vs_exact_db']:.1f} dB compact {t['compact_psnr_vs_exact_db']:.1f} dB",
              flush=True)
    if args.grid:
        Path(args.grid).parent.mkdir(parents=True, exist_ok=True)
        image_grid(Path(args.grid), grid_rows, row_labels=grid_labels,
                   columns=["user photo", "template", "target (the task's algorithm)", "edit, exact KV",
                            "edit, medium level", "edit, compact level"],
                   title="reference model, held-out pairs: what it was asked, and its edits at each codec level")
        report["grid"] = args.grid
    if args.json:
        Path(args.json).write_text(json.dumps(report, indent=2))
    return 0


def evaluate_pair(adapter, schedule, levels, task: str, batch: data.Batch, i: int) -> dict:
    template = Template(batch.template[i], prompt=task, task=task)
    request = EditRequest(batch.user[i], seed=1000 + i)
    captured = adapter.capture(template, request, schedule)
    exact = adapter.latent_to_image(captured.output)
    scores = from_attention([captured.attention_mass])
    outs = {}
    for name in ("medium", "compact"):
        decoded = {k: decode_shard(encode_shard(captured.kv[k], levels[name], scores[k])) for k in captured.kv}
        kv = TemplateKV(captured.kv.model_fingerprint, decoded)
        outs[name] = adapter.latent_to_image(adapter.replay(kv, template.prompt, request, schedule))
    target, user = batch.target[i], batch.user[i]
    return {
        "psnr": psnr(target, exact), "ssim": ssim(target, exact), "copy_psnr": psnr(target, user),
        "copy_ssim": ssim(target, user), "medium": psnr(exact, outs["medium"]), "compact": psnr(exact, outs["compact"]),
        "top10": concentration(captured.attention_mass, 0.1), "top30": concentration(captured.attention_mass, 0.3),
        "images": [user, batch.template[i], target, exact, outs["medium"], outs["compact"]],
    }


def summarise(rows: list[dict]) -> dict:
    mean = lambda key: float(np.mean([r[key] for r in rows]))  # noqa: E731
    return {
        "psnr_db": mean("psnr"), "ssim": mean("ssim"),
        "copy_psnr_db": mean("copy_psnr"), "copy_ssim": mean("copy_ssim"),
        "gain_db": mean("psnr") - mean("copy_psnr"),
        "top10_share": mean("top10"), "top30_share": mean("top30"),
        "medium_psnr_vs_exact_db": mean("medium"), "compact_psnr_vs_exact_db": mean("compact"),
    }


def concentration(mass: dict, fraction: float) -> float:
    """Mean over layers and heads of the share of template attention on the top tokens."""
    shares = []
    for m in mass.values():
        ranked = -np.sort(-m, axis=1)
        top = max(1, int(round(fraction * m.shape[1])))
        shares.append(ranked[:, :top].sum(axis=1) / ranked.sum(axis=1))
    return float(np.mean(shares))


def psnr(ref: np.ndarray, img: np.ndarray) -> float:
    return float(peak_signal_noise_ratio(ref, img, data_range=1.0)) if not np.array_equal(ref, img) else float("inf")


def ssim(ref: np.ndarray, img: np.ndarray) -> float:
    return float(structural_similarity(ref, img, channel_axis=2, data_range=1.0))


if __name__ == "__main__":
    sys.exit(main())
