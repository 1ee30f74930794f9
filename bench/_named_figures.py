"""The named inline figures the prose quotes (``<!-- fig: NAME ARG... -->``, :data:`FIGURES`): those no
JSON pointer reaches, each computed from its bench JSON as its table counts it; :func:`figure` renders
one of these or a pointer figure (the grammar of both is ``_figures.FIG``). ``bench/tables.py``
renders them into the docs."""

from __future__ import annotations

from collections.abc import Callable
from typing import NamedTuple

from _figures import REDUCE, pointer_figure
from _regime_tables import FAMILIES, STOCK_OTHERS, _e2e_workloads, _over_best, _winning_ranges
from _sources import OUT, _load


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
PHONES = {"stock": ("sakura", STOCK_OTHERS),  # hybrid-vs-best
          "light": ("sakura", ("sakura-fetch-only", "on-device-prepared")),  # two-phones
          "own": ("sakura-own-encoder", ("sakura-fetch-only", "on-device-prepared", "on-device"))}


#: Named sets of workloads a figure may take instead of a list: those whose template KV the phone
#: computes (``Architecture.phone_computes_template``: all of them since per-step pipelines compute
#: theirs a pass per step), and the per-step ones.
WORKLOAD_SETS = {"computing": "reference,klein-4b-ref512,klein-4b-ref1024,klein-9b-ref1024,kontext-ref512,sd35m-ref512",
                 "per-step": "kontext-ref512,sd35m-ref512"}


def _over_best_cells(files: str, phone: str, start: str, workloads: str, families: str) -> list[tuple[float, str]]:
    """SAKURA's median over the best other way of ``phone`` (see :data:`PHONES`), per workload and family
    (``*`` for all; comma-separated, or a name of :data:`WORKLOAD_SETS`), with where: the cells of the
    compute-or-fetch tables. ``files``: ``e2e`` (their JSON) or one JSON (``NAME@COMMIT`` for an earlier run)."""
    system, others = PHONES[phone]
    reports = _e2e_workloads() if files == "e2e" else list(_load(files)["workloads"].items())
    wanted = WORKLOAD_SETS.get(workloads, workloads).split(",")
    cells = []
    for name, report in reports:
        if workloads != "*" and name not in wanted:
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


def _two_phones_extreme(which: str, part: str, workloads: str = "*") -> str:
    """The most or least of the two-phones table (cold, each system on its own phone; ``workloads``
    comma-separated, ``*`` for all): its value, or its ``workload``, ``phone`` or ``family``."""
    cells = [c for phone in ("light", "own") for c in _over_best_cells("e2e", phone, "cold", workloads, "*")]
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


def _live_worst(name: str, key: str, part: str) -> str:
    """Of a live validation (``bench/e2e_live.py``'s JSON), the edit the simulator missed by most
    (largest ``|key|``: ``error`` or ``error_calibrated``): its ``system`` or its trace's ``family``."""
    row = max(_load(name)["rows"], key=lambda r: abs(r[key]))
    return {"system": row["system"], "family": row["trace"].split("/")[0]}[part]


#: The drifting-popularity cases of ``session.json`` the eviction prose weighs (klein 4B, 1 GB).
DRIFT_CASES = (("sakura", "catalogues", "shards"), ("sakura-fetch-only", "catalogues", "fetch-only"),
               ("sakura", "objects_kept", "objects kept"))
POLICY_NAMES = {"lru": "LRU", "lfu": "in-cache LFU", "lfu-history": "LFU with history"}


class _Lead(NamedTuple):
    """One drifting case: the best policy's lead over the one it is weighed against."""
    by: float
    best: float
    other: float
    label: str
    size: int
    policy: str


def _drift_eviction() -> str:
    """Which eviction policy keeps the most under drifting popularity, case by case: where LRU wins,
    its largest lead over the next; where it loses, the largest lead of the winner over LRU."""
    systems = _load("session.json")["workloads"]["klein-4b-ref1024"]["systems"]
    wins, losses = [], []
    for system, part, label in DRIFT_CASES:
        for size, budgets in systems[system][part].items():
            ratios = {p: v["hit_ratio_drifting"] for p, v in budgets["1GB"].items()}
            best = max(ratios, key=lambda p: ratios[p])
            other = max((p for p in ratios if p != "lru"), key=lambda p: ratios[p]) if best == "lru" else "lru"
            lead = _Lead(ratios[best] - ratios[other], ratios[best], ratios[other], label, int(size), best)
            (wins if best == "lru" else losses).append(lead)

    def where(cases: list[_Lead]) -> str:
        return " and ".join(f"{n:,}" for n in sorted({c.size for c in cases})) + " templates"

    def largest(cases: list[_Lead]) -> str:
        c = max(cases)
        return f"{c.by:.2f} ({c.best:.2f} against {c.other:.2f}, {c.label} at {c.size:,})"

    parts = []
    if wins:
        parts.append(f"LRU is best in {len(wins)} of the {len(wins) + len(losses)} (catalogues of {where(wins)}), "
                     f"by up to {largest(wins)}")
    if losses:
        names = " or ".join(POLICY_NAMES[p] for p in sorted({c.policy for c in losses}))
        parts.append(f"{names} in {len(losses)} (catalogues of {where(losses)}), by at most {largest(losses)} "
                     "over LRU")
    return ", and ".join(parts)


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
    "live-worst": _live_worst,
    "drift-eviction": _drift_eviction,
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
