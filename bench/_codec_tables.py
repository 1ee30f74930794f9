"""The codec tables of ``docs/codec.md``, each from the JSON of a codec bench: the reference model's
methods (rate, error, quality), every model's rank spectrum and levels, importance weighting, shared
bases, per-step bases and the context objects. ``bench/tables.py`` registers and renders them."""

from __future__ import annotations

from _sources import OUT, _load, _num, _row, _source

#: The methods of the reference model's codec table, in order, with their labels.
REFERENCE_ROWS = (
    ("compact", "**compact** (v2)"), ("medium", "**medium** (v2)"), ("full", "full (lossless, fp32 KV)"),
    ("compact-v1", "compact of v1 (importance classes)"), ("medium-v1", "medium of v1"),
    ("compact-v1-random", "v1 compact, random ranking"), ("medium-v1-random", "v1 medium, random ranking"),
    ("int4-kivi", "KIVI int4 + zstd"), ("int8", "int8 per token + zstd"),
    ("cachegen-fine", "CacheGen-style fine"), ("cachegen-coarse", "CacheGen-style coarse"),
)


def codec_reference() -> str:
    data = _load("codec-reference-frontier.json")["methods"]
    lines = [_row(["reference", "ratio vs fp16", "attn-out rel err", "PSNR dB (worst template)", "SSIM",
                   "template_rel_db", "decode / layer"]), _row(["---"] * 7)]
    for name, label in REFERENCE_ROWS:
        if name in data:
            m = data[name]
            lines.append(_row([label, _num(m["ratio_vs_fp16"], 2), _num(m["attn_out_rel_err"], 4),
                               f"{_num(m['psnr_db'])} ({_num(m.get('psnr_db_worst_template'))})", _num(m["ssim"], 3),
                               _num(m["template_rel_db"]), _num(m["decode_vs_compute"], 3)]))
    return "\n".join(lines) + "\n" + _source("codec-reference-frontier.json")


#: The models of the codec bench, as their JSON files name them.
MODELS = (("reference", "codec-reference-frontier.json"), ("tiny-flux", "codec-tiny-flux.json"),
          ("tiny-sd3", "codec-tiny-sd3.json"), ("bench-flux", "codec-bench-flux.json"),
          ("tiny-klein", "codec-tiny-klein.json"), ("klein-4b-shape, 2 blocks", "codec-klein-4b-shape.json"))


def codec_models() -> str:
    lines = [_row(["model", "tokens x width", "K rank 90% / 99%", "V rank 90% / 99%", "compact: ratio, attn err",
                   "medium: ratio, attn err", "v1 medium: ratio, attn err", "decode to factors / layer"]),
             _row(["---"] * 8)]
    present = [(label, name) for label, name in MODELS
               if (OUT / name).exists() and "rank_spectrum" in _load(name)]  # measured with codec v2
    for label, name in present:
        d = _load(name)
        r, m = d["rank_spectrum"], d["methods"]
        lines.append(_row([label, f"{r['tokens']} x {r['width']}",
                           f"{_num(r['K_r90_mean'], 0)} / {_num(r['K_r99_mean'], 0)}",
                           f"{_num(r['V_r90_mean'], 0)} / {_num(r['V_r99_mean'], 0)}",
                           *(_level(m, key) for key in ("compact", "medium", "medium-v1")),
                           _num(m["medium"].get("factored_decode_vs_compute"), 3)]))
    return "\n".join(lines) + "\n" + _source(*(name for _, name in present))


def _level(methods: dict, key: str) -> str:
    if key not in methods:
        return "-"
    m = methods[key]
    return f"{_num(m['ratio_vs_fp16'], 2)}x, {_num(m['attn_out_rel_err'], 4)}"


def codec_importance() -> str:
    data = _load("codec-reference-frontier.json")["importance"]
    gains = data["lr_gain_at_equal_bytes"]
    lines = [_row(["weighted fit, marginal allocation", "PSNR dB", "unweighted fit at equal bytes",
                   "uniform allocation at equal bytes"]), _row(["---"] * 4)]
    at = {other: {round(p["ratio"], 6): p for p in g["points"]} for other, g in gains.items()}
    for point in data["curves"]["lr"]:
        key = round(point["ratio"], 6)
        cells = []
        for other in ("lr-unweighted", "lr-uniform"):
            p = at[other].get(key)
            cells.append("-" if p is None else f"{_num(p['other_psnr_db'])} ({p['gain_db']:+.2f} dB)")
        lines.append(_row([f"target {point['target']}: {_num(point['ratio'], 1)}x", _num(point["psnr_db"]), *cells]))
    means = [gains[o]["mean_gain_db"] for o in ("lr-unweighted", "lr-uniform")]
    lines.append(_row(["mean gain", "", *(f"{g:+.2f} dB" if g is not None else "-" for g in means)]))
    return "\n".join(lines) + "\n" + _source("codec-reference-frontier.json")


def shared_bases() -> str:
    d = _load("shared-bases.json")
    lines = [_row(["template", "level", "own bases (v2)", "shared bases, warm phone", "cold: + the bases object"]),
             _row(["---"] * 5)]
    for t in d["templates"]:
        for level in ("compact", "medium"):
            r = t[level]
            lines.append(_row([t["template"], level, f"{r['own_basis_bytes']:,} B",
                               f"{r['shared_basis_bytes']:,} B ({r['warm_over_own']:.2f}x)",
                               f"{r['shared_basis_bytes'] + t['basis_object_bytes']:,} B ({r['cold_over_own']:.2f}x)"]))
    return "\n".join(lines) + "\n" + _source("shared-bases.json")


def per_step() -> str:
    d = _load("per-step.json")
    lines = [_row(["model", "level", "each shard alone (v2, built)", "one basis per layer, steps alone",
                   "one basis per layer, steps as differences"]), _row(["---"] * 5)]
    for m in d["models"]:
        for level, r in m["levels"].items():
            ratio = m["kv_bytes_fp16"] / r["built_bytes"]
            lines.append(_row([f"{m['model']} ({m['steps']} steps x {m['layers']} layers)", level,
                               f"{r['built_bytes']:,} B ({ratio:.1f}x, err {r['built_rms_error']:.4f})",
                               f"{r['layer_basis_intra_bytes']:,} B",
                               f"{r['layer_basis_inter_bytes']:,} B (err {r['layer_basis_rms_error']:.4f})"]))
    return "\n".join(lines) + "\n" + _source("per-step.json")


def context_objects() -> str:
    d = _load("context-objects.json")
    lines = [_row(["pipeline", "object", "shape", "as the text encoder made it (zstd)",
                   "transform-coded within parity"]), _row(["---"] * 5)]
    for m in d["models"]:
        for name, o in m["objects"].items():
            coded = o["coded_within_parity_bytes"]
            if not o.get("coded", True):
                cell = "not coded (not 2-D)"
            elif coded is None:
                cell = "never within parity"
            else:
                cell = f"{coded:,} B ({o['shipped_bytes'] / coded:.1f}x)"
            lines.append(_row([m["model"], name, " x ".join(map(str, o["shape"])), f"{o['shipped_bytes']:,} B", cell]))
    return "\n".join(lines) + "\n" + _source("context-objects.json")
