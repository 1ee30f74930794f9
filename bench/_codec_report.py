"""Summaries bench/codec.py adds to its JSON: each model's rank spectrum, and what importance
weighting and error allocation buy at equal bytes on the transform frontier."""

from __future__ import annotations

import math

import numpy as np

from sakura.platform.codec.transform import joint
from sakura.platform.kv import TemplateKV


def rank_spectrum(kvs: list[TemplateKV]) -> dict:
    """Per shard, the rank holding 90% and 99% of K's and V's energy about their mean (the heads
    side by side, as the transform codes them), and their mean and largest over shards."""
    rows = []
    for kv in kvs:
        for key in kv:
            pair = kv[key]
            row: dict = {"shard": str(key)}
            for name, x in (("K", pair.k), ("V", pair.v)):
                m = joint(x).astype(np.float64)
                s = np.linalg.svd(m - m.mean(axis=0), compute_uv=False)
                energy = np.cumsum(s**2) / max(float((s**2).sum()), 1e-300)
                row[name] = {q: int(np.searchsorted(energy, p) + 1) for q, p in (("r90", 0.9), ("r99", 0.99))}
            rows.append(row)
    heads, tokens, head_dim = kvs[0][kvs[0].keys[0]].k.shape
    summary: dict = {"tokens": tokens, "width": heads * head_dim, "max_rank": min(tokens, heads * head_dim)}
    for name in ("K", "V"):
        for q in ("r90", "r99"):
            values = [r[name][q] for r in rows]
            summary[f"{name}_{q}_mean"], summary[f"{name}_{q}_max"] = float(np.mean(values)), int(max(values))
    return {**summary, "per_shard": rows}


def frontier_summary(results: dict, targets: tuple[float, ...], variants: list[str]) -> dict:
    """Each transform variant's curve (ratio vs fp16, PSNR, attention-output error per target), and
    the PSNR the first variant (weighted, marginal) gains over each other one at equal bytes: the
    other's PSNR interpolated at the same ratio (linear in log ratio, inside its range only)."""
    curves = {v: sorted(({"target": t, "ratio": results[f"{v}@{t}"]["ratio_vs_fp16"],
                          "psnr_db": results[f"{v}@{t}"]["psnr_db"],
                          "attn_out_rel_err": results[f"{v}@{t}"]["attn_out_rel_err"]}
                         for t in targets if f"{v}@{t}" in results), key=lambda p: p["ratio"])
              for v in variants}
    base, gains = variants[0], {}
    for other in variants[1:]:
        points = []
        for p in curves[base]:
            theirs = _interpolate(curves[other], p["ratio"])
            if theirs is not None:
                points.append({"ratio": p["ratio"], "psnr_db": p["psnr_db"], "other_psnr_db": theirs,
                               "gain_db": p["psnr_db"] - theirs})
        gains[other] = {"points": points,
                        "mean_gain_db": float(np.mean([p["gain_db"] for p in points])) if points else None}
    return {"curves": curves, f"{base}_gain_at_equal_bytes": gains}


def _interpolate(curve: list[dict], ratio: float) -> float | None:
    for a, b in zip(curve, curve[1:]):
        if a["ratio"] <= ratio <= b["ratio"]:
            if b["ratio"] == a["ratio"]:
                return float(a["psnr_db"])
            t = (math.log(ratio) - math.log(a["ratio"])) / (math.log(b["ratio"]) - math.log(a["ratio"]))
            return float(a["psnr_db"] + t * (b["psnr_db"] - a["psnr_db"]))
    return None
