"""The compute-or-fetch tables of ``docs/evaluation.md``: where SAKURA is ahead of computing on the
phone, on the regime bench's constant-link maps (:data:`REGIMES`, :func:`_winning_ranges`) and over
the real traces of the e2e runs (:data:`E2E`, :func:`_over_best`), and how the ratios move with the
model's assumptions (sensitivity). ``bench/tables.py`` registers and renders them."""

from __future__ import annotations

from _sources import OUT, _load, _num, _row, _source

from sakura.evaluation.regime import crossovers as crossings

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
#: The other ways the stock pipeline's phone may edit: what SAKURA is set against in the e2e tables.
STOCK_OTHERS = ("sakura-fetch-only", "on-device", "on-device-prepared")
#: The e2e run on the slower phone profile.
FLAGSHIP_GPU = "e2e-hybrid-flagship-gpu.json"


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
    lines = [_row(["workload", "start", *FAMILIES]), _row(["---"] * (2 + len(FAMILIES)))]
    for name, report in _e2e_workloads():
        for start, state in (("cold", report), ("warm", report["warm"])):
            lines.append(_row([name, start, *(_over_best(state, f, "sakura", STOCK_OTHERS) for f in FAMILIES)]))
    return "\n".join(lines) + "\n" + _source(*(f for f in E2E if (OUT / f).exists()))


def flagship_gpu() -> str:
    """The klein workloads on the slower phone (``--device-profile flagship-gpu``), where the hybrid
    has most to add: the phone alone over SAKURA (the run's own ratio), and SAKURA over the best
    other way (as :func:`hybrid_vs_best`), per workload, cold and warm."""
    lines = [_row(["workload", "start", "ratio", *FAMILIES]), _row(["---"] * (3 + len(FAMILIES)))]
    for name, report in _load(FLAGSHIP_GPU)["workloads"].items():
        for start, state in (("cold", report), ("warm", report["warm"])):
            lines.append(_row([name, start, "on-device / SAKURA",
                               *(_num(state["ratios"][f]["ondevice_over_sakura"], 2) for f in FAMILIES)]))
            lines.append(_row([name, start, "SAKURA / best other",
                               *(_over_best(state, f, "sakura", STOCK_OTHERS) for f in FAMILIES)]))
    return "\n".join(lines) + "\n" + _source(FLAGSHIP_GPU)


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


def sensitivity() -> str:
    d = _load("sensitivity.json")
    lines = [_row(["change", "CacheGen / SAKURA", "on-device / SAKURA", "on-device-uncached / SAKURA"]),
             _row(["---"] * 4)]
    for label, row in d["rows"].items():
        lines.append(_row([label, *(_num(row["lumos-5g"][k], 2) for k in d["ratios"])]))
    return "\n".join(lines) + "\n" + _source("sensitivity.json")
