"""Where the generated tables and figures of the docs read their numbers: a bench JSON of
``bench/out``, or an earlier run's as its commit holds it (:func:`_load`), and the line under each
table that names its JSON with the commit and command of every run that wrote it, and says where
the code measured has changed since (:func:`_source`); plus the cell formatting the tables share
(:func:`_num`, :func:`_row`). ``bench/tables.py`` renders the docs with them."""

from __future__ import annotations

import contextlib
import functools
import json
import math
import subprocess
from collections.abc import Iterator
from pathlib import Path

from _provenance import changed_since, run_stamps

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "bench" / "out"


#: The names :func:`_load` is reading for, one set per open :func:`reads` block.
_READING: list[set[str]] = []


@contextlib.contextmanager
def reads() -> Iterator[set[str]]:
    """The names of the bench JSON read while the block runs (``NAME@COMMIT`` as such): what a
    figure was made from, whichever way its function reached them."""
    names: set[str] = set()
    _READING.append(names)
    try:
        yield names
    finally:
        _READING.remove(names)


def on_older_code(names: set[str] | list[str]) -> bool:
    """Whether a figure made from ``names`` describes older code: one of them (not an earlier run
    quoted as such, ``NAME@COMMIT``) measured code that has changed since, or was built on inputs
    that no longer describe today's code (the line under a table says which)."""
    return any(_changed(name) or _stale_inputs(name) for name in names if "@" not in name)


def _load(name: str) -> dict:
    """A JSON of ``bench/out``; ``NAME@COMMIT`` is the file as that commit holds it (git), for a
    figure of an earlier run that the text quotes as such."""
    for names in _READING:
        names.add(name)
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
    inputs = {i: why for name in names for i, why in _stale_inputs(name).items()}
    stale += (" **Built on older inputs**: " + ", ".join(f"`bench/out/{i}` ({why})" for i, why in inputs.items())
              + "; rerun them, then this, to refresh." if inputs else "")
    stamped = f" ({'; '.join(f'commit {c}: `{cmd}`' for c, cmd in runs)})" if runs else ""
    before = "".join(f" {f'`bench/out/{n}` was' if len(names) > 1 else 'It was'} measured before provenance was "
                     f"recorded; rerun {' then '.join(f'`{c}`' for c in legacy_commands(n))} to refresh it."
                     for n in legacy)
    return f"\nFrom {files}{stamped}.{stale}{before}\n"


#: Where a simulated figure records the bench JSON it took its codec rates from (``source``,
#: ``decode_source``, ``context``) and the code digest of the run that wrote each.
INPUT_FIELDS = (("source", "codec_digest"), ("decode_source", "decode_digest"), ("context", "context_digest"))


def _inputs(data: object) -> dict[str, str | None]:
    """The bench JSON a figure's runs read their rates from (every ``codec_rates_source`` in it):
    name -> the code digest of the run it read."""
    found: dict[str, str | None] = {}
    if isinstance(data, dict):
        rates = data.get("codec_rates_source")
        if isinstance(rates, dict):
            found.update({rates[n]: rates[d] for n, d in INPUT_FIELDS if n in rates and d in rates})
        for value in data.values():
            found.update(_inputs(value))
    elif isinstance(data, list):
        for value in data:
            found.update(_inputs(value))
    return found


@functools.cache
def _stale_inputs(name: str) -> dict[str, str]:
    """The inputs of a JSON's figures that no longer describe today's code: one rerun since at other
    code (its digest is not the one the figure read), or one itself measured on older code (a decode
    rate measured on an older codec is older code, whatever the simulator's own digest says)."""
    stale = {}
    for source, digest in _inputs(_load(name)).items():
        if not (OUT / source).is_file():
            stale[source] = "no longer kept"
        elif _load(source).get("provenance", {}).get("code_digest") != digest:
            stale[source] = "rerun since at other code"
        elif _changed(source) or _stale_inputs(source):
            stale[source] = "measured on older code"
    return stale


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
