"""The tables of running SAKURA: its models on held-out edits, their capture and what a phone loads
(``docs/models.md``), building templates (``docs/operating.md``), and serving them under load and
at catalogue scale (``docs/serving-performance.md``). ``bench/tables.py`` registers and renders them."""

from __future__ import annotations

from _sources import OUT, _load, _row, _source


def reference_tasks() -> str:
    """The reference editing model on held-out pairs: PSNR against the classical target, against
    copying the user's image, and the attention mass its top template tokens get."""
    tasks = _load("reference.json")["tasks"]
    lines = [_row(["task", "model", "copy the user image", "gain", "top 10% / 30% of template tokens get"]),
             _row(["---"] * 5)]
    for i, (task, t) in enumerate(tasks.items()):
        share = f"{t['top10_share']:.1%} / {t['top30_share']:.1%}" + (" of the attention" if i == 0 else "")
        lines.append(_row([task, f"{t['psnr_db']:.1f} dB", f"{t['copy_psnr_db']:.1f} dB", f"{t['gain_db']:+.1f} dB",
                           share]))
    return "\n".join(lines) + "\n" + _source("reference.json")


def klein_capture() -> str:
    """klein 4B's shape per reference size: capture of all blocks and replay per step, extrapolated
    from the blocks built (wall clock), the measured KV and one VAE encode."""
    d = _load("capture-klein-4b-shape.json")
    blocks = d["structure"]["double_blocks"] + d["structure"]["single_blocks"]
    lines = [_row(["reference", "tokens (ref / text)", f"capture, all {blocks} blocks", "replay per step",
                   f"template KV fp16 (measured = 2 x tokens x {d['structure']['heads']} x "
                   f"{d['structure']['head_dim']} x 2 B x {blocks})", "one VAE encode"]), _row(["---"] * 6)]
    for res, r in d["resolutions"].items():
        w = r["whole_model"]["wall"]
        lines.append(_row([f"{res}x{res}", f"{r['reference_tokens']} / {r['text_tokens']}", f"{w['capture_s']:.0f} s",
                           f"{w['replay_s']:.0f} s", f"{w['kv_bytes_fp16'] / 1e6:.1f} MB",
                           f"{r['measurement']['vae_encode_s']['wall']:.1f} s"]))
    return "\n".join(lines) + "\n" + _source("capture-klein-4b-shape.json")


def phone_loads() -> str:
    """Parameters the phone loads against the stock pipeline's, and the peak RSS of one edit."""
    d = _load("phone-loads.json")
    lines = [_row(["pipeline", "SAKURA phone params", "stock pipeline params",
                   "peak RSS, one edit: SAKURA phone / stock"]), _row(["---"] * 4)]
    for name, t in d["tiny"].items():
        p, rss = t["parameters"], t["peak_rss_bytes"]
        lines.append(_row([name, f"{p['sakura_phone']:,}", f"{p['stock']:,}",
                           f"{rss['sakura_phone'] / 2**20:.0f} / {rss['stock'] / 2**20:.0f} MiB"]))
    for name, c in d["configs"].items():
        p, encoder = c["parameters"], c["components"]["text_encoder"]
        model, size = name.removesuffix("-shape").split("-")
        label = f"{model} {size.upper()}"
        lines.append(_row([f"{label} (from configs)",
                           f"{p['sakura_phone'] / 1e9:.2f} B ({p['sakura_phone'] * 2 / 1e9:.1f} GB bf16)",
                           f"{p['stock'] / 1e9:.2f} B ({p['stock'] * 2 / 1e9:.1f} GB; + {c['text_encoder']} "
                           f"{encoder / 1e9:.2f} B)", ""]))
    return "\n".join(lines) + "\n" + _source("phone-loads.json")


def build_throughput() -> str:
    """Templates built per minute with one and two workers, per model."""
    d = _load("build.json")
    lines = [_row(["model", "1 worker", "2 workers", "speed-up"]), _row(["---"] * 4)]
    for model, runs in ((m, r) for m, r in d.items() if m != "provenance"):
        lines.append(_row([model, f"{runs['1']['templates_per_min']:.1f} templates/min",
                           f"{runs['2']['templates_per_min']:.1f} templates/min", f"{runs['2']['speedup']:.2f}x"]))
    return "\n".join(lines) + "\n" + _source("build.json")


#: The serve bench's runs, one column pair (wrk, Python clients) each, and its modes in row order.
SERVE_RUNS = (("Ray's proxy", "serve_load.json"), ("HAProxy ingress", "serve_load-haproxy.json"))
SERVE_MODES = (("memory", "serve-proxy-memory"), ("node disk", "serve-proxy-disk"),
               ("store (S3)", "serve-proxy-store"), ("redirect: 307, then presigned GET", "serve-redirect"),
               ("redirect: the 307 alone", "serve-redirect, 307 only"),
               ("redirect: the presigned GET alone", "serve-redirect, presigned GET"), ("nginx", "static-nginx"),
               ("nginx, 4 shards per range", "static-nginx, 4 shards per range"))


def serve_load() -> str:
    """Per shard size and mode, MB/s (req/s below 1 MB, and for the 307s) and its fraction of nginx
    in the same run under the same client; an empty cell is a mode that client does not drive."""
    runs = [(label, name, _load(name)) for label, name in SERVE_RUNS if (OUT / name).exists()]
    lines = [_row(["shard", "mode", *(f"{label}, {client}" for label, _, _ in runs for client in ("wrk", "Python"))]),
             _row(["---"] * (2 + 2 * len(runs)))]
    sizes = sorted(runs[0][2]["shard_mb"], key=float, reverse=True)
    for size in sizes:
        mb = float(size)
        shard = f"{mb:g} MB" if mb >= 1 else f"{mb * 1000:.0f} kB"
        for label, key in SERVE_MODES:
            cells = []
            for _, _, data in runs:
                rows = data["shard_mb"].get(size, {})
                for row in (rows.get(key), rows.get(f"{key} (python clients)")):
                    if row is None:
                        cells.append("")
                        continue
                    ratio = row["mb_s_vs_static"]  # none for the 307s: no body
                    per_request = ratio is None or (mb < 1 and "per range" not in key)  # a run of shards: its MB/s
                    rate = f"{row['req_s']:,.0f} req/s" if per_request else f"{row['mb_s']:.0f} MB/s"
                    plain = key == "static-nginx" or ratio is None
                    cells.append(rate if plain else f"{rate} = {ratio:.{2 if ratio >= 0.1 else 3}f}x")
            if any(cells):
                lines.append(_row([shard, label, *cells]))
    setup = "; ".join(f"{label}: {data['clients']} clients x {data['seconds']:g} s per mode, store "
                      f"{data.get('store', 'moto')}{_load_average(data)}" for label, _, data in runs)
    return "\n".join(lines) + f"\n\n{setup}.\n" + _source(*(name for _, name, _ in runs))


def _load_average(data: dict) -> str:
    """The range of the machine's 1-minute load average over a serve run's rows, if it has them."""
    loads = [r["load_1m"] for rows in data["shard_mb"].values() for r in rows.values() if "load_1m" in r]
    return f", load average {min(loads):.1f}-{max(loads):.1f} on {data['cpus']} CPUs" if loads else ""


def catalog_scale() -> str:
    """Request latencies and costs with a small and a large catalogue, and their p99 ratios."""
    d = _load("catalog_scale.json")
    small, large = d["baseline"], d["large"]

    def ms(r: dict, key: str) -> str:
        return f"{r[key]['p50_ms']:.1f} / {r[key]['p99_ms']:.1f} ms"

    def ms_uncached(r: dict, key: str) -> str:
        return ms(r["uncached"], key)

    lines = [_row(["", f"{small['templates']:,} templates", f"{large['templates']:,} templates", "ratio"]),
             _row(["---"] * 4)]
    for label, cell, ratio in (
            ("manifest p50 / p99, default caches", lambda r: ms(r, "manifest"), d["p99_ratios"]["manifest"]),
            ("shard p50 / p99, default caches", lambda r: ms(r, "shard"), d["p99_ratios"]["shard"]),
            ("manifest p50 / p99, caches out of the way", lambda r: ms_uncached(r, "manifest"),
             d["p99_ratios_uncached"]["manifest"]),
            ("shard p50 / p99, caches out of the way", lambda r: ms_uncached(r, "shard"),
             d["p99_ratios_uncached"]["shard"])):
        lines.append(_row([label, cell(small), cell(large), f"p99 {ratio:.2f}x"]))
    rows = (("catalogue page (100) p50, first / deep",
             lambda r: f"{_ms_short(r['catalogue_first_page']['p50_ms'])} / "
                       f"{_ms_short(r['catalogue_deep_page']['p50_ms'])} ms"),
            ("build planning, one template", lambda r: f"{r['build_plan_one_template_s'] * 1e3:.1f} ms"),
            ("`gc --dry-run`, one template", lambda r: f"{r['gc_dry_run_one_template_s'] * 1e3:.1f} ms"),
            ("`sakura catalog ls` (all templates)", lambda r: f"{r['catalog_ls_s']:.2f} s" if r["catalog_ls_s"] < 1
             else f"{r['catalog_ls_s']:.1f} s"),
            ("serving process (uvicorn) RSS growth", lambda r: f"{r['server_rss_growth_mb']:.1f} MiB"),
            ("Ray Serve replica RSS, ready / after the requests",
             lambda r: f"{r['replica_rss_ready_mb']:.0f} / {r['replica_rss_after_mb']:.0f} MiB"))
    for label, cell in rows:
        lines.append(_row([label, cell(small), cell(large), ""]))
    return "\n".join(lines) + "\n" + _source("catalog_scale.json")


def _ms_short(x: float) -> str:
    return f"{x:.1f}" if x < 10 else f"{x:.0f}"
