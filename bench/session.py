"""A growing catalogue on the phone: sessions of edits over catalogues of 100 to 10,000 templates
whose popularity follows a Zipf law, through the phone's template cache at two budgets and three
eviction policies.

    python bench/session.py --json bench/out/session.json --plots bench/out/session

Per workload (default: the reference model measured here, and klein-4B at a 1024x1024
reference on ``flagship-npu``) and system (SAKURA, and its fetch-only client), a pool of cold
edits is simulated over every trace (``--starts`` per trace), and a hit's latency with the kept
shards read from flash (``sakura.evaluation.catalogue``). Each configuration runs ``--sessions``
sessions of ``--edits`` edits from an empty cache (``hit_ratio``), and the same after
``--warmup`` edits have filled it (``hit_ratio_steady``: a phone in use for weeks), and that with
popularity drifting to new templates (``hit_ratio_drifting``: a new template takes the top rank
every ``--drift-every`` edits, an estimate of a catalogue that grows every week). Eviction:
``lru`` (what the phone's cache does today: least recently used template first), ``lfu`` and
``lfu-history`` (``sakura.platform.caching``). Zipf exponent 0.8 (``ZIPF_ALPHA``, its source
there), swept over ``--alphas`` at the largest budget for 1,000 templates.

Flash: a hit reads the kept shards at :data:`FLASH_MBPS`, :data:`FLASH_ACCESS_S` per read.
``catalogues``: the cache keeps the manifest and the fetched shards (the client before it kept
objects; a manifest's bytes are not counted); ``objects_kept``: it keeps the template's context
and source objects too (prompt embeddings, reference latents), as today's client does, so a hit
is a warm edit (simulated from the same start with them on the phone).
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

import numpy as np

from sakura.edge_client.timeline import Timeline
from sakura.emulation.traces import BandwidthTrace, load_traces
from sakura.evaluation.catalogue import ZIPF_ALPHA, PooledEdit, drifting, run_catalogue, zipf_ranks
from sakura.evaluation.geometry import EditGeometry
from sakura.evaluation.runs import simulate_runs
from sakura.evaluation.simulator import EditSimulator

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _provenance import provenance  # noqa: E402
from _simulation import SIMULATED, analytic_rates, edits_of, parser, reference_workload, rtt_s  # noqa: E402

#: UFS 4.0 sequential read, "up to 4,200 megabytes per second" (Samsung Newsroom, 'Samsung Develops
#: High-Performance UFS 4.0 Storage', 2022): 33,600 Mbit/s.
FLASH_MBPS = 33_600.0
#: Per read (estimate: a flash page read and a file open are well under a millisecond).
FLASH_ACCESS_S = 0.0005
DEFAULT_WORKLOADS = ("reference", "klein-4b-ref1024")
SYSTEMS = ("sakura", "sakura-fetch-only")
CATALOGUES = (100, 1_000, 10_000)
BUDGETS = {"256MB": 256 * 2**20, "1GB": 2**30}
EVICTIONS = ("lru", "lfu", "lfu-history")


def main(argv: list[str] | None = None) -> int:
    p = parser(__doc__, DEFAULT_WORKLOADS)
    p.add_argument("--starts", type=int, default=3, help="start times per trace for the pool of edits")
    p.add_argument("--sessions", type=int, default=30, help="sessions per configuration (seeds)")
    p.add_argument("--edits", type=int, default=100, help="edits per session")
    p.add_argument("--warmup", type=int, default=1000, help="edits before a steady-state session")
    p.add_argument("--alphas", default="0.6,0.8,1.0", help="Zipf exponents of the sweep")
    p.add_argument("--drift-every", type=int, default=20,
                   help="edits between new templates taking the top rank, for hit_ratio_drifting (an estimate)")
    args = p.parse_args(argv)
    started = time.time()
    families = load_traces(args.traces)
    rtt = rtt_s(args)
    reference = reference_workload(args.repeats)
    out: dict = {"provenance": provenance(*SIMULATED, "sakura.evaluation.catalogue", "sakura.platform.caching"),
                 "setup": {"zipf_alpha": ZIPF_ALPHA, "flash_mbps": FLASH_MBPS, "flash_access_s": FLASH_ACCESS_S,
                           "sessions": args.sessions, "edits": args.edits, "warmup": args.warmup,
                           "budgets": BUDGETS, "starts_per_trace": args.starts},
                 "workloads": {}}
    rates = analytic_rates(args, reference)  # the codec bench JSON, read once for every workload
    for name in args.workload or DEFAULT_WORKLOADS:
        profile, geometries, rates_source = edits_of(name, reference, rates)
        runs = simulate_runs(geometries, families, starts=args.starts, rtt_s=rtt, systems=SYSTEMS)
        warm = simulate_runs(geometries, families, starts=args.starts, rtt_s=rtt, systems=SYSTEMS, warm_template=True)
        g = geometries[0]
        template_bytes = {lv: float(np.mean([sum(x.sizes[lv]) for x in geometries])) for lv in g.levels}
        report: dict = {"device_profile": profile.name, "codec_rates_source": rates_source,
                        "template_bytes": template_bytes, "systems": {}}
        for system in SYSTEMS:
            full_hit = [_full_hit_s(g, system) for g in geometries]
            pool = [_pooled(r.edits[system], w.edits[system], r.sim.g, full_hit[r.case]) for r, w in zip(runs, warm)]
            report["systems"][system] = {"pool": _pool_stats(pool), "catalogues": _catalogues(pool, args),
                                         "alpha_sweep": _alpha_sweep(pool, args),
                                         "objects_kept": _catalogues(pool, args, keep_objects=True)}
        out["workloads"][name] = report
        _print(name, report)
        if args.plots:
            _plot(args.plots, name, report)
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(out, indent=1))
    print(f"done in {time.time() - started:.0f} s")
    return 0


def _full_hit_s(g: EditGeometry, system: str) -> float:
    """The edit with every shard on the phone's flash (and its manifest and objects)."""
    flash = BandwidthTrace.constant(FLASH_MBPS, duration=1e7)
    return EditSimulator(g, flash, 0.0, rtt_s=FLASH_ACCESS_S, warm_template=True).run(system).latency_s


def _pooled(edit: Timeline, warm: Timeline, g: EditGeometry, full_hit_s: float) -> PooledEdit:
    """``edit`` from a phone without the template; ``warm``: the same start with its manifest and objects."""
    kept = [s for s in edit.shards if s.source == "network" and not s.computed]
    return PooledEdit(miss_s=edit.latency_s, miss_bytes=edit.network_bytes + edit.preamble_bytes,
                      kept_bytes=sum(g.sizes[s.level][s.index] for s in kept), kept_fraction=len(kept) / g.shards,
                      full_hit_s=full_hit_s, objects_bytes=edit.preamble_bytes, warm_s=warm.latency_s,
                      warm_bytes=warm.network_bytes)


def _pool_stats(pool: list[PooledEdit]) -> dict:
    return {"miss_median_s": float(np.median([e.miss_s for e in pool])),
            "hit_median_s": float(np.median([e.hit(e.kept_fraction)[0] for e in pool])),
            "full_hit_median_s": float(np.median([e.full_hit_s for e in pool])),
            "miss_bytes_median": float(np.median([e.miss_bytes for e in pool])),
            "kept_bytes_median": float(np.median([e.kept_bytes for e in pool])), "edits": len(pool)}


def _sessions(pool: list[PooledEdit], n: int, budget: int, eviction: str, alpha: float, args, *,
              warmup: int, drift_every: int | None = None, keep_objects: bool = False) -> dict:
    results = []
    for seed in range(args.sessions):
        rng = np.random.default_rng(seed)
        ranks = zipf_ranks(n, alpha, warmup + args.edits, rng)
        templates = ranks if drift_every is None else drifting(ranks, drift_every)
        results.append(run_catalogue(templates, pool, budget, eviction, rng, warmup=warmup, keep_objects=keep_objects))
    latency = [s for r in results for s in r.latency_s]
    return {"hit_ratio": float(np.mean([r.hit_ratio for r in results])),
            "latency_mean_s": float(np.mean(latency)), "latency_median_s": float(np.median(latency)),
            "bytes_per_edit": float(np.mean([b for r in results for b in r.bytes_fetched]))}


def _catalogues(pool: list[PooledEdit], args, *, keep_objects: bool = False) -> dict:
    out: dict = {}
    for n in CATALOGUES:
        for label, budget in BUDGETS.items():
            for eviction in EVICTIONS:
                kw = dict(keep_objects=keep_objects)
                fresh = _sessions(pool, n, budget, eviction, ZIPF_ALPHA, args, warmup=0, **kw)
                steady = _sessions(pool, n, budget, eviction, ZIPF_ALPHA, args, warmup=args.warmup, **kw)
                drift = _sessions(pool, n, budget, eviction, ZIPF_ALPHA, args, warmup=args.warmup,
                                  drift_every=args.drift_every, **kw)
                out.setdefault(str(n), {}).setdefault(label, {})[eviction] = {
                    **fresh, "hit_ratio_steady": steady["hit_ratio"], "latency_mean_steady_s": steady["latency_mean_s"],
                    "bytes_per_edit_steady": steady["bytes_per_edit"], "hit_ratio_drifting": drift["hit_ratio"]}
    return out


def _alpha_sweep(pool: list[PooledEdit], args) -> dict:
    label = list(BUDGETS)[-1]
    return {alpha: {eviction: _sessions(pool, 1_000, BUDGETS[label], eviction, float(alpha), args,
                                        warmup=args.warmup)["hit_ratio"] for eviction in EVICTIONS}
            for alpha in args.alphas.split(",")}


def _print(name: str, report: dict) -> None:
    print(f"\n{name} ({report['device_profile']}): template "
          + ", ".join(f"{lv} {b / 1e6:.1f} MB" for lv, b in report["template_bytes"].items()))
    for system, entry in report["systems"].items():
        pool = entry["pool"]
        print(f"  {system}: miss {pool['miss_median_s']:.2f} s, hit {pool['hit_median_s']:.2f} s, "
              f"kept {pool['kept_bytes_median'] / 1e6:.1f} MB (medians)")
        for kept in ("catalogues", "objects_kept"):
            print(f"   {'shards kept' if kept == 'catalogues' else 'shards, manifest and objects kept'}:")
            for n, budgets in entry[kept].items():
                for label, policies in budgets.items():
                    print(f"    {n:>6s} templates, {label:>5s}: " + "  ".join(
                        f"{ev} {v['hit_ratio']:.2f}/{v['hit_ratio_steady']:.2f}/{v['hit_ratio_drifting']:.2f} "
                        f"{v['latency_mean_s']:.2f} s" for ev, v in policies.items()))
    print("  hit ratio from an empty cache / after the warm-up / after it with drifting popularity; "
          "mean latency per edit from an empty cache")


def _plot(out: Path, name: str, report: dict) -> None:
    from sakura.evaluation.energy_plots import hit_ratios

    out.mkdir(parents=True, exist_ok=True)
    for system, entry in report["systems"].items():
        table = {(label, ev): {int(n): entry["catalogues"][n][label][ev]["hit_ratio_steady"]
                               for n in entry["catalogues"]}
                 for label in BUDGETS for ev in EVICTIONS}
        hit_ratios(out / f"hit-ratio-{name}-{system}.png", table,
                   f"{name}, {system}: steady-state hit ratio (Zipf {ZIPF_ALPHA})")


if __name__ == "__main__":
    sys.exit(main())
