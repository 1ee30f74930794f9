"""Result tables, and the figures the text quotes, in the docs, generated from the bench JSON they
come from, never typed.

    python bench/tables.py            # rewrite every generated table and figure in README.md and docs/*.md
    python bench/tables.py --check    # exit 1 where a table or figure differs from what its JSON gives

A table sits between ``<!-- table: NAME -->`` and ``<!-- /table -->``; NAME is a key of
:data:`TABLES`, whose function reads ``bench/out`` and returns the table's markdown, ending in a
line that names its source JSON and the commit and command that wrote it, and says so where the
code the JSON measured has changed since (``_provenance.changed_since``). Every table of
:data:`TABLES` sits in exactly one of :data:`DOCS` (``--check`` fails on one that is in none).
A figure in the text sits between ``<!-- fig: ... -->`` and ``<!-- /fig -->`` (see :data:`FIG`); the
sentence around it names its JSON. A JSON written before runs recorded their provenance is named
as such under its tables, with the command that reruns it (:data:`LEGACY_COMMANDS`).
"""

from __future__ import annotations

import argparse
import functools
import json
import math
import re
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

from _figures import FIG, REDUCE, pointer_figure
from _provenance import changed_since, run_stamps

from sakura.evaluation.regime import crossovers as crossings

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "bench" / "out"
#: The pages that may carry generated tables: the README and every page of the docs site.
DOCS = (ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md")))
MARKED = re.compile(r"(<!-- table: (?P<name>[a-z0-9-]+) -->\n)(?P<body>.*?)(<!-- /table -->)", re.DOTALL)


def _load(name: str) -> dict:
    """A JSON of ``bench/out``; ``NAME@COMMIT`` is the file as that commit holds it (git), for a
    figure of an earlier run that the text quotes as such."""
    if "@" in name:
        return _load_at(*name.split("@", 1))
    return json.loads((OUT / name).read_text())


#: Earlier runs' JSON as their commits hold them (``NAME@COMMIT``), kept so that a clone without
#: that history (a shallow CI checkout) renders and checks the same figures.
HISTORY = OUT / "history"


@functools.cache
def _load_at(name: str, commit: str) -> dict:
    kept = HISTORY / f"{name}@{commit}"
    if kept.is_file():
        return json.loads(kept.read_text())
    try:
        text = subprocess.run(["git", "show", f"{commit}:bench/out/{name}"], cwd=ROOT, capture_output=True,
                              text=True, check=True).stdout
    except (OSError, subprocess.CalledProcessError) as exc:
        raise FileNotFoundError(f"bench/out/{name} at commit {commit}: {exc}") from None
    return json.loads(text)


#: The commands that wrote the bench JSON measured before runs recorded their provenance (from each
#: bench's docstring and argparse, as its page gives them): what the line under a table asks to rerun.
LEGACY_COMMANDS = {
    "energy.json": ("python bench/energy.py --json bench/out/energy.json --plots bench/out/energy",
                    "python bench/energy.py --workload sd35m-ref512 --starts 2 --session-traces 1 --session-edits 10 "
                    "--update --json bench/out/energy.json --plots bench/out/energy",
                    "python bench/energy.py --workload kontext-ref512 --starts 1 --session-traces 1 --session-edits 5 "
                    "--update --json bench/out/energy.json --plots bench/out/energy"),
    "session.json": ("python bench/session.py --sessions 20 --json bench/out/session.json --plots bench/out/session",),
    "e2e_live.json": ("python bench/e2e_live.py --json bench/out/e2e_live.json",),
    "e2e_live-bench-flux.json": ("python bench/e2e_live.py --model bench-flux --link kernel "
                                 "--json bench/out/e2e_live-bench-flux.json",),
    "reference.json": ("python bench/reference.py --pairs 16 --steps 8 --json bench/out/reference.json",),
    "capture-klein-4b-shape.json": ("python bench/capture.py --model klein-4b-shape --blocks 2",),
    "phone-loads.json": ("python bench/phone_loads.py",),
    "build.json": ("python bench/build.py --templates 16 --json bench/out/build.json",),
    "adaptation-trace-link.json": ("python bench/adaptation.py --repeats 10 "
                                   "--json bench/out/adaptation-trace-link.json",),
    "adaptation-kernel-link.json": ("python bench/adaptation.py --link kernel --repeats 10 "
                                    "--json bench/out/adaptation-kernel-link.json",),
}


def legacy_commands(name: str) -> tuple[str, ...]:
    """The command(s) to rerun a JSON written without provenance: its own ``command`` if it kept one."""
    data = _load(name)
    return (data["command"],) if isinstance(data.get("command"), str) else LEGACY_COMMANDS.get(name, ("?",))


def _source(*names: str) -> str:
    """The line under a table: its JSON files, and the commit and command of every run that wrote
    them (a file updated with ``--update`` holds parts of several runs, each part stamped); a file
    written before runs recorded their provenance says so, and how to rerun it."""
    runs: dict[tuple[str, str], None] = {}
    legacy = [name for name in names if "provenance" not in _load(name)]
    for name in names:
        if name not in legacy:
            for p in run_stamps(_load(name)):
                runs[(p.get("commit", "?")[:10], p.get("command", "?"))] = None
    files = ", ".join(f"`bench/out/{n}`" for n in names)
    changed = sorted({m for name in names for m in _changed(name)})
    stale = (f" **Measured on older code**: {', '.join(f'`{m}`' for m in changed)} changed since; rerun "
             "to refresh." if changed else "")
    stamped = f" ({'; '.join(f'commit {c}: `{cmd}`' for c, cmd in runs)})" if runs else ""
    before = "".join(f" {f'`bench/out/{n}` was' if len(names) > 1 else 'It was'} measured before provenance was "
                     f"recorded; rerun {' then '.join(f'`{c}`' for c in legacy_commands(n))} to refresh it."
                     for n in legacy)
    return f"\nFrom {files}{stamped}.{stale}{before}\n"


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


#: The systems of the energy and session tables, as their columns name them.
ENERGY_SYSTEMS = (("sakura", "SAKURA"), ("sakura-fetch-only", "fetch-only"), ("cachegen", "CacheGen"),
                  ("on-device", "on-device"), ("on-device-prepared", "on-device-prepared"))
SESSION_SYSTEMS = (("sakura", "SAKURA"), ("on-device", "on-device"), ("on-device-prepared", "on-device-prepared"),
                   ("sakura-fetch-only", "fetch-only"))


def _energy_label(name: str, entry: dict, key: str, most: int, unit: str) -> str:
    """A workload's row label, with its count where it ran fewer (starts per trace, session edits)."""
    n = entry[key]
    per = " per trace" if key == "starts_per_trace" else ""
    return name if n == most else f"{name} ({n} {unit}{'s' if n != 1 else ''}{per})"


def energy_workloads() -> str:
    """Median joules and seconds per edit, pooled over every family, per workload and system."""
    w = _load("energy.json")["workloads"]
    most = max(e["starts_per_trace"] for e in w.values())
    lines = [_row(["workload", *(label for _, label in ENERGY_SYSTEMS)]), _row(["---"] * (1 + len(ENERGY_SYSTEMS)))]
    for name, entry in w.items():
        overall = entry["families"]["overall"]
        lines.append(_row([_energy_label(name, entry, "starts_per_trace", most, "start"),
                           *(f"{overall[s]['joules_median']:.0f} J, {overall[s]['latency_median_s']:.2f} s"
                             for s, _ in ENERGY_SYSTEMS)]))
    return "\n".join(lines) + "\n" + _source("energy.json")


def energy_families() -> str:
    """klein 4B with a 1024x1024 reference, per family: joules (radio / compute / screen) and seconds."""
    d = _load("energy.json")
    radios, families = d["setup"]["family_radio"], d["workloads"]["klein-4b-ref1024"]["families"]
    systems = SESSION_SYSTEMS
    lines = [_row(["family (radio)", *(label for _, label in systems)]), _row(["---"] * (1 + len(systems)))]
    for family, table in families.items():
        if family == "overall":
            continue
        label = f"{family} ({radios.get(family, 'pooled')})"
        lines.append(_row([label, *(f"{t['joules_median']:.0f} J ({t['radio_j_median']:.0f} / "
                                    f"{t['compute_j_median']:.0f} / {t['base_j_median']:.0f}), "
                                    f"{t['latency_median_s']:.1f} s" for t in (table[s] for s, _ in systems))]))
    return "\n".join(lines) + "\n" + _source("energy.json")


def sustained_sessions() -> str:
    """First and last edit of a throttling session (one edit every ``session_every_s``), the last
    edit's speed, and joules per edit over the session, per workload and system."""
    w = _load("energy.json")["workloads"]
    most = max(e["session_edits"] for e in w.values())
    lines = [_row(["workload", *(label for _, label in SESSION_SYSTEMS)]), _row(["---"] * (1 + len(SESSION_SYSTEMS)))]
    for name, entry in w.items():
        overall = entry["sustained"]["throttling"]["overall"]
        cells = []
        for system, _ in SESSION_SYSTEMS:
            v = overall[system]
            cells.append(f"{v['first']['latency_median_s']:.1f} -> {v['last']['latency_median_s']:.1f} s "
                         f"({v['last']['speed_median']:.2f}), {v['joules_total_median'] / len(v['per_edit']):.0f} J")
        lines.append(_row([_energy_label(name, entry, "session_edits", most, "edit"), *cells]))
    return "\n".join(lines) + "\n" + _source("energy.json")


#: The rows of the catalogue table: workload, its label, system, what the cache keeps.
CATALOGUE_ROWS = (("reference", "reference", "sakura-fetch-only", "catalogues", "fetch-only, shards"),
                  ("klein-4b-ref1024", "klein 4B/1024", "sakura-fetch-only", "catalogues", "fetch-only, shards"),
                  ("klein-4b-ref1024", "klein 4B/1024", "sakura", "catalogues", "SAKURA, shards"),
                  ("klein-4b-ref1024", "klein 4B/1024", "sakura", "objects_kept", "SAKURA, shards and objects (today)"))
CATALOGUE_COLUMNS = (("256MB", "lru", "256 MB: LRU"), ("256MB", "lfu-history", "256 MB: LFU-history"),
                     ("1GB", "lru", "1 GB: LRU"), ("1GB", "lfu", "1 GB: LFU"),
                     ("1GB", "lfu-history", "1 GB: LFU-history"))


def catalogue_hits() -> str:
    """Hit ratio from an empty cache / steady / drifting, per catalogue size, budget and eviction."""
    w = _load("session.json")["workloads"]
    lines = [_row(["workload, client, what the cache keeps", "templates", *(c[2] for c in CATALOGUE_COLUMNS)]),
             _row(["---"] * (2 + len(CATALOGUE_COLUMNS)))]
    for workload, label, system, kept, what in CATALOGUE_ROWS:
        for i, (n, budgets) in enumerate(w[workload]["systems"][system][kept].items()):
            cells = [f"{v['hit_ratio']:.2f} / {v['hit_ratio_steady']:.2f} / {v['hit_ratio_drifting']:.2f}"
                     for v in (budgets[b][e] for b, e, _ in CATALOGUE_COLUMNS)]
            lines.append(_row([f"{label}, {what}" if i == 0 else "", f"{int(n):,}", *cells]))
    return "\n".join(lines) + "\n" + _source("session.json")


def e2e_live() -> str:
    """Live edits through Ray Serve over a kernel-shaped link against the simulator: the medians of
    each (trace, start, system), their error, and the idle link in round trips."""
    return _live_table("e2e_live.json", idle=True)


def e2e_live_bench_flux() -> str:
    """The same check on ``bench-flux``, seconds of compute an edit."""
    return _live_table("e2e_live-bench-flux.json", idle=False)


def _live_table(name: str, *, idle: bool) -> str:
    d = _load(name)
    head = ["trace (start)", "system", "measured s", "simulated s", "error", "calibrated"]
    if idle:
        head += ["idle link live / sim (RTT)", "one packet (RTT)", "idle beyond it, live (RTT)"]
    lines, last = [_row(head), _row(["---"] * len(head))], None
    for r in d["rows"]:
        trace = f"{r['trace']} ({r['start_s']:.0f} s)"
        cells = [trace if trace != last else "", r["system"], f"{r['measured_s']:.3f}", f"{r['simulated_s']:.3f}",
                 f"{r['error']:+.1%}", f"{r['error_calibrated']:+.1%}"]
        if idle:
            cells += [f"{_rtt(r['live_gap_rtt'])} / {_rtt(r['sim_gap_rtt'])}", _rtt(r["packet_rtt"]),
                      _rtt(r["live_idle_rtt"])]
        lines.append(_row(cells))
        last = trace
    return "\n".join(lines) + "\n" + _source(name)


def _rtt(x: float | None) -> str:
    return "-" if x is None else f"{x:.2f}"


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



def _klein_energy_best(key: str, radio: str | None) -> tuple[list[float], list[float]]:
    """Per klein workload of ``energy.json``, the best on-device / SAKURA ratio on its constant-link map
    (in joules under ``radio``'s power model, or in seconds) and the rate (Mbit/s) where it is."""
    best, rates = [], []
    for name, entry in _load("energy.json")["workloads"].items():
        if name.startswith("klein-"):
            regime = entry["regime"]
            ratios = (regime[radio] if radio else regime)[key]
            i = max(range(len(ratios)), key=lambda j: ratios[j])
            best.append(ratios[i])
            rates.append(regime["rates_mbps"][i])
    return best, rates


def _span(values: list[float], fmt: str) -> str:
    texts = list(dict.fromkeys(format(v, fmt) for v in (min(values), max(values))))
    return "-".join(texts)


def _session_joules(workload: str, cadence: str) -> str:
    """Joules per edit over a whole session of the reference model (all families), as its table counts them."""
    v = _load("energy.json")["workloads"][workload]["sustained"][cadence]["overall"]["sakura"]
    return f"{v['joules_total_median'] / len(v['per_edit']):.0f}"


#: The phones of the compute-or-fetch tables: SAKURA's system on it, and the other ways it may edit.
PHONES = {"stock": ("sakura", ("sakura-fetch-only", "on-device", "on-device-prepared")),  # hybrid-vs-best
          "light": ("sakura", ("sakura-fetch-only", "on-device-prepared")),  # two-phones
          "own": ("sakura-own-encoder", ("sakura-fetch-only", "on-device-prepared", "on-device"))}


def _over_best_cells(files: str, phone: str, start: str, workloads: str, families: str) -> list[tuple[float, str]]:
    """SAKURA's median over the best other way of ``phone`` (see :data:`PHONES`), per workload and family
    (``*`` for all; comma-separated), with where: the cells of the compute-or-fetch tables. ``files``:
    ``e2e`` (their JSON) or one JSON (``NAME@COMMIT`` for an earlier run)."""
    system, others = PHONES[phone]
    reports = _e2e_workloads() if files == "e2e" else list(_load(files)["workloads"].items())
    cells = []
    for name, report in reports:
        if workloads != "*" and name not in workloads.split(","):
            continue
        state = report if start == "cold" else report["warm"]
        for family in FAMILIES if families == "*" else families.split(","):
            cell = _over_best(state, family, system, others)
            if cell != "-":
                cells.append((float(cell), f"{name}, {phone}, {family}"))
    return cells


def _over_best_figure(files: str, phone: str, start: str, workloads: str, families: str, reduce: str = "range") -> str:
    """The range (or ``min``, ``max``, ``each``: ``a / b / c``) of :func:`_over_best_cells`."""
    values = [v for v, _ in _over_best_cells(files, phone, start, workloads, families)]
    if reduce == "each":
        return " / ".join(f"{v:.2f}" for v in values)
    return f"{REDUCE[reduce](values)[0]:.2f}" if reduce in ("min", "max") else _span(values, ".2f")


def _two_phones_extreme(which: str, part: str) -> str:
    """The most or least of the two-phones table (cold, each system on its own phone): its value,
    or its ``workload``, ``phone`` or ``family``."""
    cells = [c for phone in ("light", "own") for c in _over_best_cells("e2e", phone, "cold", "*", "*")]
    value, where = (max if which == "most" else min)(cells)
    workload, phone, family = where.split(", ")
    return {"value": f"{value:.2f}", "workload": workload, "family": family,
            "phone": "the stock pipeline's" if phone == "own" else "the light"}[part]


def _lowest_prepared(workload: str) -> str:
    """The lowest on-device-prepared / SAKURA of ``workload`` over every constant-link map of
    ``bench/out/regime*.json`` (both codecs, both brackets, every profile), cold and warm."""
    maps = [_load(path.name)["maps"] for path in sorted(OUT.glob("regime*.json"))]
    entries = [e for m in maps for e in m.get(workload, {}).values()]
    ratios = [r for entry in entries for start in ("cold", "warm")
              for r in entry[start]["ratios"]["ondevice_prepared_over_sakura"] if r is not None]
    return f"{min(ratios):.2f}"


def _ahead(name: str, workload: str, profile: str, key: str) -> str:
    """The link rates (Mbit/s) where SAKURA is ahead of a baseline on a constant-link map, cold."""
    return _winning_ranges(_load(name)["maps"][workload][profile], key)


#: Inline figures no pointer reaches (``<!-- fig: NAME -->``): each returns the text it shows.
FIGURES: dict[str, Callable[..., str]] = {
    "klein-best-joules-5g": lambda: _span(_klein_energy_best("ondevice_over_sakura_joules", "5g-nsa")[0], ".2f"),
    "klein-best-joules-5g-gbps": lambda: _span([r / 1e3 for r in _klein_energy_best(
        "ondevice_over_sakura_joules", "5g-nsa")[1]], ".1f"),
    "klein-best-seconds": lambda: _span(_klein_energy_best("ondevice_over_sakura_seconds", None)[0], ".1f"),
    "reference-session-joules": lambda: _session_joules("reference", "throttling"),
    "reference-session-joules-back-to-back": lambda: _session_joules("reference", "back-to-back"),
    "over-best": _over_best_figure,
    "two-phones": _two_phones_extreme,
    "lowest-prepared": _lowest_prepared,
    "ahead": _ahead,
}

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
    "catalog-scale": catalog_scale,
    "build-throughput": build_throughput,
    "reference-tasks": reference_tasks,
    "klein-capture": klein_capture,
    "phone-loads": phone_loads,
    "e2e-live": e2e_live,
    "e2e-live-bench-flux": e2e_live_bench_flux,
    "energy-workloads": energy_workloads,
    "energy-families": energy_families,
    "sustained-sessions": sustained_sessions,
    "catalogue-hits": catalogue_hits,
}


def figure(spec: str) -> str:
    """The text of one inline figure (see :data:`FIG`)."""
    if " | " not in spec:
        name, *args = spec.split()
        if name not in FIGURES:
            raise SystemExit(f"unknown figure {name!r}; known: {', '.join(FIGURES)}")
        try:
            return FIGURES[name](*args)
        except (FileNotFoundError, KeyError, IndexError, ValueError, TypeError) as exc:
            raise SystemExit(f"figure {spec!r}: {type(exc).__name__} {exc}") from None
    return pointer_figure(spec, _load)


def render(text: str) -> tuple[str, list[str]]:
    """``text`` with every marked table and figure regenerated, and the names of those that changed."""
    changed: list[str] = []

    def fill(match: re.Match) -> str:
        name = match.group("name")
        if name not in TABLES:
            raise SystemExit(f"unknown table {name!r}; known: {', '.join(TABLES)}")
        body = TABLES[name]()
        if body != match.group("body"):
            changed.append(name)
        return match.group(1) + body + match.group(4)

    def fill_figure(match: re.Match) -> str:
        body = figure(match.group("spec"))
        if body != match.group("body"):
            changed.append(f"figure {match.group('spec')}")
        return match.group(0).replace(f"-->{match.group('body')}<!--", f"-->{body}<!--", 1)

    return FIG.sub(fill_figure, MARKED.sub(fill, text)), changed


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--check", action="store_true", help="change nothing; exit 1 if a table or figure is stale")
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
