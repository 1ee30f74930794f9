"""Result tables in the docs, generated from the bench JSON they quote, never typed.

    python bench/tables.py            # rewrite every generated table in README.md and docs/*.md
    python bench/tables.py --check    # exit 1 where a table differs from what its JSON gives

A table sits between ``<!-- table: NAME -->`` and ``<!-- /table -->``; NAME is a key of
:data:`TABLES`, whose function reads ``bench/out`` and returns the table's markdown, ending in a
line that names its source JSON and the commit and command that wrote it, and says so where the
code the JSON measured has changed since (``_provenance.changed_since``). Every table of
:data:`TABLES` sits in exactly one of :data:`DOCS` (``--check`` fails on one that is in none).
"""

from __future__ import annotations

import argparse
import functools
import json
import math
import re
import sys
from collections.abc import Callable
from pathlib import Path

from _provenance import changed_since, run_stamps

from sakura.evaluation.regime import crossovers as crossings

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "bench" / "out"
#: The pages that may carry generated tables: the README and every page of the docs site.
DOCS = (ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md")))
MARKED = re.compile(r"(<!-- table: (?P<name>[a-z0-9-]+) -->\n)(?P<body>.*?)(<!-- /table -->)", re.DOTALL)


def _load(name: str) -> dict:
    return json.loads((OUT / name).read_text())


def _source(*names: str) -> str:
    """The line under a table: its JSON files, and the commit and command of every run that wrote
    them (a file updated with ``--update`` holds parts of several runs, each part stamped)."""
    runs: dict[tuple[str, str], None] = {}
    for name in names:
        for p in run_stamps(_load(name)):
            runs[(p.get("commit", "?")[:10], p.get("command", "?"))] = None
    files = ", ".join(f"`bench/out/{n}`" for n in names)
    changed = sorted({m for name in names for m in _changed(name)})
    stale = (f" **Measured on older code**: {', '.join(f'`{m}`' for m in changed)} changed since; rerun "
             "to refresh." if changed else "")
    return f"\nFrom {files} ({'; '.join(f'commit {c}: `{cmd}`' for c, cmd in runs)}).{stale}\n"


@functools.cache
def _changed(name: str) -> tuple[str, ...]:
    """The modules a JSON's runs measured whose code has changed since (see ``changed_since``)."""
    data = _load(name)
    modules = data.get("provenance", {}).get("modules", [])
    return tuple(sorted({m for run in run_stamps(data) for m in changed_since(run, modules)}))


def _num(x: float | None, digits: int = 1) -> str:
    if x is None or (isinstance(x, float) and math.isnan(x)):
        return "-"
    if math.isinf(x):
        return "inf"
    return f"{x:.{digits}f}"


def _row(cells: list[str]) -> str:
    return "| " + " | ".join(cells) + " |"


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


#: The regime runs of the codec table: (label, JSON), before (v1) and after (v2), each bracket.
REGIMES = (("v1, conservative", "regime-v1.json"), ("v2, conservative", "regime.json"),
           ("v1, optimistic", "regime-v1-optimistic.json"), ("v2, optimistic", "regime-optimistic.json"))


def _winning_ranges(entry: dict, key: str) -> str:
    """The link rates (Mbit/s, cold) where SAKURA is ahead of a baseline (``key`` >= 1): "always",
    "never", or its ranges, each edge where the ratio crosses 1 (interpolated as the regime bench
    does). Hovering near 1 the hybrid ties its baseline, so a ratio may cross more than once."""
    rates, ratios = entry["cold"]["rates_mbps"], entry["cold"]["ratios"][key]
    ahead = [r is not None and r >= 1.0 for r in ratios]
    if all(ahead):
        return "always"
    if not any(ahead):
        return "never"
    ranges, start = [], rates[0] if ahead[0] else None
    for i in range(1, len(rates)):
        if ahead[i] == ahead[i - 1]:
            continue
        edge = (crossings(rates[i - 1:i + 1], ratios[i - 1:i + 1]) or [rates[i]])[0]
        if ahead[i]:
            start = edge
        else:
            ranges.append(f"{start:.0f}-{edge:.0f}" if start != rates[0] else f"< {edge:.0f}")
    if ahead[-1]:
        ranges.append(f"> {start:.0f}")
    return ", ".join(ranges)


def regime_codec() -> str:
    """Per analytic workload on flagship-npu: on-device / SAKURA over lumos-5g and the link rate it
    crosses 1 at (cold), with each codec and bracket."""
    runs = [(label, _load(name)) for label, name in REGIMES if (OUT / name).exists()]
    lines = [_row(["workload (flagship-npu)", "codec, rates", "bytes / decode measured on",
                   "lumos-5g on-device / SAKURA", "uncached / SAKURA", "bound",
                   "SAKURA ahead of on-device at (Mbit/s, cold)"]),
             _row(["---"] * 7)]
    workloads = [w for w in runs[0][1]["maps"] if "flagship-npu" in runs[0][1]["maps"][w]]
    for workload in workloads:
        for label, data in runs:
            entry = data["maps"].get(workload, {}).get("flagship-npu")
            if entry is None:
                continue
            ratios = entry["families"]["ratios"].get("lumos-5g", {})
            source = data.get("codec_rates_source", {})
            measured_on = f"{source.get('model', '-')} / {source.get('decode_model', source.get('model', '-'))}"
            lines.append(_row([workload, label, measured_on,
                               _num(ratios.get("ondevice_over_sakura"), 2),
                               _num(ratios.get("ondevice_uncached_over_sakura"), 2),
                               _num(entry["workload"]["ondevice_over_sakura_bound"], 2),
                               _winning_ranges(entry, "ondevice_over_sakura")]))
    return "\n".join(lines) + "\n" + _source(*(name for label, name in REGIMES if (OUT / name).exists()))


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


def cold_bytes() -> str:
    """Per analytic workload (flagship-npu) and bracket: what a cold light phone downloads besides the
    manifest (context objects, the template's JPEG) and the KV at each level."""
    runs = [(label, _load(name)) for label, name in REGIMES if (OUT / name).exists()]
    lines = [_row(["workload", "codec, rates", "context + JPEG", "KV at compact", "KV at medium", "KV at full"]),
             _row(["---"] * 6)]
    for workload, profiles in runs[0][1]["maps"].items():
        for label, data in runs:
            entry = data["maps"].get(workload, {}).get("flagship-npu" if "flagship-npu" in profiles else "this-machine")
            if entry is None:
                continue
            w = entry["workload"]
            mb = [f"{w['bytes_per_level'][lv] / 1e6:,.1f} MB" for lv in ("compact", "medium", "full")]
            objects = (w["context_bytes"] + w["source_bytes"]) / 1e6
            lines.append(_row([workload, label, f"{objects:.2f} MB", *mb]))
    return "\n".join(lines) + "\n" + _source(*(name for _, name in REGIMES if (OUT / name).exists()))


def crossovers() -> str:
    """Every workload and profile of ``regime.json``: compute, the link rate SAKURA wins above against
    each baseline (cold), and the lumos-5g medians' ratios."""
    d = _load("regime.json")
    keys = ("cachegen_over_sakura", "ondevice_over_sakura", "ondevice_uncached_over_sakura",
            "ondevice_prepared_over_sakura")
    lines = [_row(["workload", "profile", "KV MB (fp16)", "compute s: SAKURA / on-device / uncached",
                   "SAKURA ahead at (Mbit/s, cold): CacheGen / on-device / uncached / prepared",
                   "lumos-5g: CacheGen / on-device / uncached over SAKURA"]), _row(["---"] * 6)]
    for workload, profiles in d["maps"].items():
        for profile, entry in profiles.items():
            w, ratios = entry["workload"], entry["families"]["ratios"].get("lumos-5g", {})
            compute = w["ondevice_compute_s"]
            lines.append(_row([f"`{workload}`", f"`{profile}`", f"{w['kv_bytes_fp16'] / 1e6:,.0f}",
                               f"{w['sakura_compute_s']:.2f} / {compute['on-device']:.2f} / "
                               f"{compute['on-device-uncached']:.2f}",
                               " / ".join(_winning_ranges(entry, k) for k in keys),
                               " / ".join(_num(ratios.get(k), 2) for k in keys[:3])]))
    return "\n".join(lines) + "\n" + _source("regime.json")


def paper_regime() -> str:
    """klein-4b-ref1024 on flagship-npu over the real traces (``e2e-workloads.json``): medians and
    their ratios per family; where runs were hopeless for SAKURA (counted at its lower bound) its
    median is a lower bound and the ratios upper bounds (marked)."""
    d = _load("e2e-workloads.json")["workloads"]["klein-4b-ref1024"]
    lines = [_row(["family", "SAKURA s", "on-device s", "uncached s", "CacheGen s", "CacheGen / SAKURA",
                   "uncached / SAKURA", "on-device / SAKURA", "warm: uncached / on-device over SAKURA",
                   "hopeless runs"]), _row(["---"] * 10)]
    for family, systems in d["families"].items():
        hopeless = d["hopeless_runs"].get(family, 0)
        low, high = ("≥ ", "≤ ") if hopeless else ("", "")
        r, warm = d["ratios"][family], d["warm"]["ratios"][family]

        def ratio(x: float | None, mark: str = high) -> str:
            return "-" if x is None else f"{mark}{x:.2f}"

        lines.append(_row([family, f"{low}{systems['sakura']['median_s']:.2f}",
                           *(f"{systems[s]['median_s']:.2f}" for s in ("on-device", "on-device-uncached", "cachegen")),
                           ratio(r["cachegen_over_sakura"]), ratio(r["ondevice_uncached_over_sakura"]),
                           ratio(r["ondevice_over_sakura"]),
                           f"{ratio(warm['ondevice_uncached_over_sakura'])} / {ratio(warm['ondevice_over_sakura'])}",
                           str(hopeless)]))
    return "\n".join(lines) + "\n" + _source("e2e-workloads.json")


#: The e2e runs of the compute-or-fetch tables, and the families they show.
E2E = ("e2e-own-encoder.json", "e2e-kontext.json")
FAMILIES = ("fcc-broadband", "lumos-4g", "lumos-5g", "mahimahi-cellular", "norway-hsdpa")


def _e2e_workloads() -> list[tuple[str, dict]]:
    return [(name, report) for f in E2E if (OUT / f).exists() for name, report in _load(f)["workloads"].items()]


def _over_best(state: dict, family: str, system: str, others: tuple[str, ...]) -> str:
    table = state["families"].get(family)
    if table is None or system not in table:
        return "-"
    best = min(table[o]["median_s"] for o in others if o in table)
    return f"{table[system]['median_s'] / best:.2f}"


def hybrid_vs_best() -> str:
    """SAKURA's median over the best of fetching only, the stock on-device pipeline and the prepared
    one, per workload, cold and warm."""
    others = ("sakura-fetch-only", "on-device", "on-device-prepared")
    lines = [_row(["workload", "start", *FAMILIES]), _row(["---"] * (2 + len(FAMILIES)))]
    for name, report in _e2e_workloads():
        for start, state in (("cold", report), ("warm", report["warm"])):
            lines.append(_row([name, start, *(_over_best(state, f, "sakura", others) for f in FAMILIES)]))
    return "\n".join(lines) + "\n" + _source(*(f for f in E2E if (OUT / f).exists()))


def two_phones() -> str:
    """Each system on its own phone, cold: the light phone's SAKURA against the other ways a phone
    without a text encoder edits, the own-encoder phone's against those and the stock pipeline."""
    light, own = ("sakura-fetch-only", "on-device-prepared"), ("sakura-fetch-only", "on-device-prepared", "on-device")
    lines = [_row(["workload", "start", "phone", *FAMILIES]), _row(["---"] * (3 + len(FAMILIES)))]
    for name, report in _e2e_workloads():
        lines.append(_row([name, "cold", "light", *(_over_best(report, f, "sakura", light) for f in FAMILIES)]))
        lines.append(_row([name, "cold", "own encoder",
                           *(_over_best(report, f, "sakura-own-encoder", own) for f in FAMILIES)]))
    return "\n".join(lines) + "\n" + _source(*(f for f in E2E if (OUT / f).exists()))


#: The reference model's e2e run on this machine's compute, and the groups its tables show.
THIS_MACHINE = "e2e-this-machine.json"
GROUPS = (*FAMILIES, "cellular", "overall")


def this_machine_latency() -> str:
    """Median / p90 seconds per system (rows) and family (columns), and each system's mean PSNR."""
    families = _load(THIS_MACHINE)["families"]
    systems = list(dict.fromkeys(s for g in GROUPS for s in families.get(g, {})))
    lines = [_row(["system", *GROUPS, "PSNR dB (overall)"]), _row(["---"] * (len(GROUPS) + 2))]
    for system in systems:
        cells = [f"{t['median_s']:.2f} / {t['p90_s']:.2f}" if (t := families.get(g, {}).get(system)) else "-"
                 for g in GROUPS]
        psnr = families.get("overall", {}).get(system, {}).get("psnr_db")
        lines.append(_row([f"`{system}`", *cells, _num(psnr)]))
    return "\n".join(lines) + "\n" + _source(THIS_MACHINE)


def this_machine_ratios() -> str:
    """Ratios of medians per family: the baselines over SAKURA, on-device by token ratio, and SAKURA
    over the oracle and the bound."""
    d = _load(THIS_MACHINE)
    keys = (("cachegen_over_sakura", "CacheGen"), ("cachegen_matched_over_sakura", "CacheGen matched"),
            ("ondevice_over_sakura", "on-device"), ("ondevice_uncached_over_sakura", "uncached"))
    lines = [_row(["family", *(f"{label} / SAKURA" for _, label in keys),
                   "on-device / SAKURA, compute only, token ratio 1, 2, 4", "SAKURA / oracle", "SAKURA / bound"]),
             _row(["---"] * (len(keys) + 4))]
    for group in GROUPS:
        r, by_ratio = d["ratios"].get(group, {}), d.get("ondevice_by_token_ratio", {}).get(group, {})
        lines.append(_row([group, *(_num(r.get(k), 2) for k, _ in keys),
                           ", ".join(_num(v, 2) for v in by_ratio.values()) or "-",
                           _num(r.get("sakura_over_oracle"), 2), _num(r.get("sakura_over_bound"), 2)]))
    return "\n".join(lines) + "\n" + _source(THIS_MACHINE)


def sensitivity() -> str:
    d = _load("sensitivity.json")
    lines = [_row(["change", "CacheGen / SAKURA", "on-device / SAKURA", "on-device-uncached / SAKURA"]),
             _row(["---"] * 4)]
    for label, row in d["rows"].items():
        lines.append(_row([label, *(_num(row["lumos-5g"][k], 2) for k in d["ratios"])]))
    return "\n".join(lines) + "\n" + _source("sensitivity.json")


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


TABLES: dict[str, Callable[[], str]] = {
    "sensitivity": sensitivity,
    "hybrid-vs-best": hybrid_vs_best,
    "two-phones": two_phones,
    "this-machine-latency": this_machine_latency,
    "this-machine-ratios": this_machine_ratios,
    "paper-regime": paper_regime,
    "crossovers": crossovers,
    "context-objects": context_objects,
    "cold-bytes": cold_bytes,
    "regime-codec": regime_codec,
    "per-step": per_step,
    "codec-reference": codec_reference,
    "codec-models": codec_models,
    "codec-importance": codec_importance,
    "shared-bases": shared_bases,
    "serve-load": serve_load,
}


def render(text: str) -> tuple[str, list[str]]:
    """``text`` with every marked table regenerated, and the names of those that changed."""
    changed: list[str] = []

    def fill(match: re.Match) -> str:
        name = match.group("name")
        if name not in TABLES:
            raise SystemExit(f"unknown table {name!r}; known: {', '.join(TABLES)}")
        body = TABLES[name]()
        if body != match.group("body"):
            changed.append(name)
        return match.group(1) + body + match.group(4)

    return MARKED.sub(fill, text), changed


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--check", action="store_true", help="change nothing; exit 1 if a table is stale")
    args = p.parse_args(argv)
    stale, placed = [], set()
    for doc in DOCS:
        text = doc.read_text()
        placed.update(m.group("name") for m in MARKED.finditer(text))
        text, changed = render(text)
        stale += [f"{doc.relative_to(ROOT)}: {name}" for name in changed]
        if changed and not args.check:
            doc.write_text(text)
    if stale:
        print(("stale: " if args.check else "rewrote: ") + ", ".join(stale))
    missing = [name for name in TABLES if name not in placed]
    if missing:
        print(f"in no doc (add its markers to the page its text is on): {', '.join(missing)}")
    return 1 if (stale or missing) and args.check else 0


if __name__ == "__main__":
    sys.exit(main())
