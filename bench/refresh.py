"""Rerun every bench whose figures describe older code, so that no figure in the docs does.

    python bench/refresh.py                 # what is stale, why, and the commands that refresh it
    python bench/refresh.py --run --jobs 2  # run them, then regenerate the docs (bench/tables.py)

A bench JSON is stale where a run that wrote it (a part of it, for a file built with ``--update``)
measured code that has changed since: those runs' commands rerun it. It is also stale where it read
its codec rates from another bench JSON that is rerun here, was rerun since at other code, or is
itself stale: then every command of it reruns, after its inputs.

A command that times this machine's compute runs alone: a neighbour, even at nice 19, skews what it
measures (docs/evaluation.md). Every bench times this machine except a simulation (a bench that
names its ``DEFAULT_WORKLOADS``) whose workloads are all analytic. The other commands run
``--jobs`` at a time, never two writing the same JSON at once (``--update`` reads the file it
rewrites). ``--run`` refuses a tree with uncommitted code: a figure records the commit it measured.
"""

from __future__ import annotations

import argparse
import ast
import functools
import shlex
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

import _sources
from _provenance import changed_since, dirty, run_stamps
from _sources import ROOT, _inputs, _load, _stale_inputs, legacy_commands

__all__ = ["Rerun", "default_workloads", "plan", "run", "times_this_machine"]

BENCH = ROOT / "bench"


@dataclass(frozen=True)
class Rerun:
    """One command that refreshes (part of) the bench JSON ``writes``."""

    command: str
    writes: str
    why: str
    alone: bool
    #: The JSON whose reruns must finish first (the inputs it reads its rates from).
    after: frozenset[str] = field(default_factory=frozenset)


def plan() -> list[Rerun]:
    """Every rerun that the bench JSON of ``bench/out`` need, each file after the files it reads."""
    names = sorted(p.name for p in _sources.OUT.glob("*.json"))
    inputs = {name: set(_inputs(_load(name))) & set(names) for name in names}
    names = _input_order(names, inputs)
    reasons = {name: _own_reasons(name) for name in names}
    for name in names:  # inputs first: an input rerun here makes every file reading it stale
        why = [f"reads {i}, rerun here" for i in sorted(inputs[name]) if reasons[i]]
        why += [f"reads {i}, {what}" for i, what in _stale_inputs(name).items() if not reasons.get(i)]
        if why:
            reasons[name] = {command: "; ".join(why) for command in _commands(name)} | reasons[name]
    return _alone_first([Rerun(command, name, why, times_this_machine(command), frozenset(inputs[name]))
                         for name in names for command, why in reasons[name].items()])


def _alone_first(reruns: list[Rerun]) -> list[Rerun]:
    """``reruns`` in an order that keeps every one after those it waits for (:func:`_waits_for`),
    the commands that time this machine as early as that allows: each runs with nothing beside
    it, and one met halfway would idle the other cores until the longest simulation ended."""
    ordered: list[Rerun] = []
    left = list(range(len(reruns)))
    while left:
        ready = [i for i in left if all(j not in left for j in _waits_for(reruns, i))]
        pick = next((i for i in ready if reruns[i].alone), ready[0])
        ordered.append(reruns[pick])
        left.remove(pick)
    return ordered


def _waits_for(reruns: Sequence[Rerun], i: int) -> list[int]:
    """The reruns that must end before rerun ``i`` starts: those of the files it reads, and those
    of its own file before it (``--update`` reads the file it rewrites)."""
    return [j for j, r in enumerate(reruns)
            if r.writes in reruns[i].after or (r.writes == reruns[i].writes and j < i)]


def _own_reasons(name: str) -> dict[str, str]:
    """The commands of ``name``'s runs that measured code changed since -> which modules changed."""
    data = _load(name)
    if "provenance" not in data:
        return dict.fromkeys(legacy_commands(name), "measured before provenance was recorded")
    modules = data["provenance"].get("modules", [])
    reasons: dict[str, str] = {}
    for stamp in run_stamps(data):
        changed = changed_since(stamp, modules)
        if changed:
            reasons[stamp.get("command", "?")] = "measured older " + ", ".join(changed)
    return reasons


def _commands(name: str) -> list[str]:
    """Every command that wrote ``name``, in the order its parts were written."""
    data = _load(name)
    if "provenance" not in data:
        return list(legacy_commands(name))
    return list(dict.fromkeys(stamp.get("command", "?") for stamp in run_stamps(data)))


def _input_order(names: Sequence[str], inputs: dict[str, set[str]]) -> list[str]:
    """``names`` with every file after the files it reads (depth first, stable otherwise)."""
    ordered: list[str] = []

    def visit(name: str, path: tuple[str, ...]) -> None:
        if name in ordered or name in path:
            return
        for i in sorted(inputs.get(name, ())):
            visit(i, (*path, name))
        ordered.append(name)

    for name in names:
        visit(name, ())
    return ordered


def times_this_machine(command: str) -> bool:
    """Whether ``command`` times this machine's compute: every bench does, except a simulation
    (one whose module names ``DEFAULT_WORKLOADS``) run on analytic workloads only."""
    args = shlex.split(command)
    script = next((a for a in args if a.endswith(".py")), "")
    defaults = default_workloads(ROOT / script) if script else None
    if defaults is None:
        return True
    named = [args[i + 1] for i, a in enumerate(args[:-1]) if a == "--workload"]
    named += [a.split("=", 1)[1] for a in args if a.startswith("--workload=")]
    return not all(_is_analytic(w) for w in named or defaults)


@functools.cache
def default_workloads(script: Path) -> tuple[str, ...] | None:
    """The ``DEFAULT_WORKLOADS`` a bench script names (read, not imported), or None."""
    if not script.is_file():
        return None
    for node in ast.parse(script.read_text()).body:
        if isinstance(node, ast.Assign) and any(getattr(t, "id", None) == "DEFAULT_WORKLOADS" for t in node.targets):
            return tuple(ast.literal_eval(node.value))
    return None


def _is_analytic(workload: str) -> bool:
    from sakura.evaluation.workloads import Analytic, workload_spec

    try:
        return isinstance(workload_spec(workload), Analytic)
    except ValueError:
        return False


# -- running the plan -------------------------------------------------------------------------------
class Process(Protocol):
    def poll(self) -> int | None:
        """The exit code once ended, else None."""


#: Starts one command (its log file given) and returns its process.
Launch = Callable[[Rerun, Path], Process]


def launch(rerun: Rerun, log: Path) -> Process:
    """``rerun``'s command from the repository root, ``python`` as this interpreter."""
    args = shlex.split(rerun.command)
    if args and args[0] == "python":
        args[0] = sys.executable
    with log.open("wb") as sink:
        return subprocess.Popen(args, cwd=ROOT, stdout=sink, stderr=subprocess.STDOUT)


def run(reruns: Sequence[Rerun], jobs: int, logs: Path, start: Launch = launch, poll_s: float = 0.5) -> list[Rerun]:
    """Run ``reruns``: each after the reruns of the files it reads and the earlier ones of its own
    file, a command that times this machine with nothing beside it, the others ``jobs`` at a time.
    Returns those that failed (after a failure nothing new starts; those running finish)."""
    pending, running, done, failed = list(range(len(reruns))), dict[int, Process](), set[int](), list[int]()
    began: dict[int, float] = {}
    logs.mkdir(parents=True, exist_ok=True)
    while pending or running:
        for i, process in list(running.items()):
            code = process.poll()
            if code is not None:
                del running[i]
                if code:
                    failed.append(i)
                else:
                    done.add(i)
                minutes = (time.monotonic() - began[i]) / 60
                print(f"{'FAILED' if code else 'done'} in {minutes:.0f} min: {reruns[i].command}", flush=True)
        if failed:
            pending.clear()
        for i in _startable(reruns, pending, running, done, jobs):
            pending.remove(i)
            began[i] = time.monotonic()
            running[i] = start(reruns[i], logs / f"{i:02d}-{reruns[i].writes}.log")
            print(f"{'alone' if reruns[i].alone else 'start'}: {reruns[i].command}", flush=True)
        if running:
            time.sleep(poll_s)
    return [reruns[i] for i in failed]


def _startable(reruns: Sequence[Rerun], pending: list[int], running: dict[int, Process], done: set[int],
               jobs: int) -> list[int]:
    """The pending reruns that may start now, in plan order. One that times this machine waits
    for the others to finish, and nothing starts beside it, or after it before it has run."""
    if any(reruns[i].alone for i in running):
        return []
    busy, chosen = {reruns[i].writes for i in running}, list[int]()
    for i in pending:
        rerun = reruns[i]
        ready = all(j in done for j in _waits_for(reruns, i))
        if rerun.alone:
            return [i] if ready and not running and not chosen else chosen
        if ready and rerun.writes not in busy and len(running) + len(chosen) < jobs:
            chosen.append(i)
            busy.add(rerun.writes)
    return chosen


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--run", action="store_true", help="run the reruns, then bench/tables.py")
    p.add_argument("--jobs", type=int, default=2, help="commands at once that do not time this machine")
    p.add_argument("--logs", type=Path, help="each command's output (default: a new temporary folder)")
    args = p.parse_args(argv)
    reruns = plan()
    for r in reruns:
        print(f"{'alone ' if r.alone else '      '}{r.writes}: {r.why}\n    {r.command}")
    if not reruns:
        print("every bench JSON describes today's code")
    if not args.run or not reruns:
        return 0
    if dirty():
        print("refusing: the tree has uncommitted code; commit it first (a figure records its commit)")
        return 2
    logs = args.logs or Path(tempfile.mkdtemp(prefix="sakura-refresh-"))
    print(f"logs: {logs}", flush=True)
    failed = run(reruns, max(1, args.jobs), logs)
    if failed:
        print("failed: " + "; ".join(r.command for r in failed))
        return 1
    return subprocess.run([sys.executable, str(BENCH / "tables.py")], cwd=ROOT).returncode


if __name__ == "__main__":
    sys.exit(main())
