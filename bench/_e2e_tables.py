"""The end-to-end tables of an edit as the phone lives it: the reference model's run on this machine's
compute and the live edits through Ray Serve against the simulator (``docs/validation.md``), and the
joules per edit, sustained sessions and catalogue hit ratios (``docs/beyond.md``).
``bench/tables.py`` registers and renders them."""

from __future__ import annotations

from _regime_tables import FAMILIES
from _sources import _load, _num, _row, _source

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
