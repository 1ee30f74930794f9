"""Result tables, and the figures the text quotes, in the docs, generated from the bench JSON they
come from, never typed.

    python bench/tables.py            # rewrite every generated table and figure in README.md and docs/*.md
    python bench/tables.py --check    # exit 1 where a table or figure differs from what its JSON gives

A table sits between ``<!-- table: NAME -->`` and ``<!-- /table -->``; NAME is a key of
:data:`TABLES`, whose function reads ``bench/out`` and returns the table's markdown, ending in a
line that names its source JSON and the commit and command that wrote it, and says so where the
code the JSON measured has changed since (``_provenance.changed_since``). Every table of
:data:`TABLES` sits in exactly one of :data:`DOCS` (``--check`` fails on one that is in none).
A figure in the text sits between ``<!-- fig: ... -->`` and ``<!-- /fig -->`` (see ``_figures.FIG``); the
sentence around it names its JSON. A JSON written before runs recorded their provenance is named
as such under its tables, with the command that reruns it (``_sources.LEGACY_COMMANDS``).

This module holds the command, the registry :data:`TABLES` and :func:`render`; the rest lives
beside it, one idea a module:

* ``_sources``: loading the bench JSON (``NAME@COMMIT`` for an earlier run) and the provenance
  line under each table (``_source``), with the cell formatting the tables share;
* the table functions, by the pages they sit on: ``_codec_tables`` (codec), ``_regime_tables``
  (evaluation: regime maps, compute or fetch, sensitivity), ``_e2e_tables`` (validation and beyond:
  this machine, live, energy, sessions, catalogue hits) and ``_ops_tables`` (models, operating,
  serving performance);
* ``_named_figures``: the named figures the prose quotes (``FIGURES``) and :func:`figure`, on top
  of the inline-figure grammar of ``_figures``.

The names other code reads from here (``figure``, ``FIGURES``, ``OUT``, ``_source``, ``_changed``,
``_winning_ranges``) are imported into this module.
"""

from __future__ import annotations

import argparse
import re
import sys
from collections.abc import Callable

from _codec_tables import codec_importance, codec_models, codec_reference, context_objects, per_step, shared_bases
from _e2e_tables import (
    catalogue_hits,
    e2e_live,
    e2e_live_bench_flux,
    energy_families,
    energy_workloads,
    sustained_sessions,
    this_machine_latency,
    this_machine_ratios,
)
from _figures import FIG
from _named_figures import FIGURES, figure
from _ops_tables import build_throughput, catalog_scale, klein_capture, phone_loads, reference_tasks, serve_load
from _regime_tables import (
    _winning_ranges,
    cold_bytes,
    crossovers,
    flagship_gpu,
    hybrid_vs_best,
    paper_regime,
    regime_codec,
    sensitivity,
    two_phones,
)
from _sources import (
    HISTORY,
    LEGACY_COMMANDS,
    OUT,
    ROOT,
    _changed,
    _load,
    _source,
    legacy_commands,
    on_older_code,
    reads,
)

__all__ = ["DOCS", "FIGURES", "HISTORY", "LEGACY_COMMANDS", "MARKED", "OLDER_CODE", "OUT", "ROOT", "TABLES", "_changed",
           "_load", "_source", "_winning_ranges", "figure", "legacy_commands", "main", "render"]


#: The pages that may carry generated tables: the README and every page of the docs site.
DOCS = (ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md")))
MARKED = re.compile(r"(<!-- table: (?P<name>[a-z0-9-]+) -->\n)(?P<body>.*?)(<!-- /table -->)", re.DOTALL)
#: What follows an inline figure whose JSON measured older code (:func:`_sources.on_older_code`),
#: the figure's counterpart of the line under a table, until its bench is rerun.
OLDER_CODE = " (older code)"


TABLES: dict[str, Callable[[], str]] = {
    "sensitivity": sensitivity,
    "hybrid-vs-best": hybrid_vs_best,
    "two-phones": two_phones,
    "flagship-gpu": flagship_gpu,
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
        with reads() as names:
            body = figure(match.group("spec"))
        body += OLDER_CODE if on_older_code(names) else ""
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
