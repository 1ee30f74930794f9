"""``bench/refresh.py``: which bench JSON describe older code and the commands that refresh them,
each file after the files it reads; and its runner, which never lets a command that times this
machine share it, never runs two commands on one file at once, and stops starting on a failure."""

from __future__ import annotations

import ast
import json

import pytest

from tests.helpers import bench_module
from tests.unit.test_doc_tables import MODULES, ROOT, _older


@pytest.fixture(scope="module")
def refresh():
    yield from bench_module("refresh")


ANALYTIC = "python bench/e2e.py --workload klein-4b-ref1024 --update --json bench/out/{}"
MEASURED = "python bench/e2e.py --workload reference --update --json bench/out/{}"
CODEC = "python bench/codec.py --model tiny-flux --json bench/out/{}"


def _stamp(provenance_module, command: str, older: bool = False) -> dict:
    stamp = {**provenance_module.provenance(*MODULES), "command": command}
    return _older(stamp) if older else stamp


def _write(bench_out, name: str, data: dict) -> None:
    (bench_out / name).write_text(json.dumps(data))


@pytest.mark.parametrize(("command", "alone"), [
    ("python bench/e2e.py --workload klein-4b-ref1024 --workload sd35m-ref512 --json x.json", False),
    ("python bench/e2e.py --workload=kontext-ref512 --json x.json", False),
    ("python bench/e2e.py --json x.json", True),  # its default: the reference model, timed here
    ("python bench/e2e.py --workload klein-4b-ref1024 --workload reference --json x.json", True),
    ("python bench/regime.py --workload sd35m-ref512 --update --json x.json", False),
    ("python bench/energy.py --json x.json", True),  # its defaults include the reference model
    ("python bench/codec.py --model tiny-flux --json x.json", True),  # not a simulation: timed
    ("python bench/sensitivity.py --json x.json", True),  # measures the reference model too
])
def test_only_a_simulation_of_analytic_workloads_may_share_the_machine(refresh, command, alone):
    assert refresh.times_this_machine(command) is alone


def test_a_simulation_says_its_default_workloads(refresh):
    assert refresh.default_workloads(ROOT / "bench" / "e2e.py") == ("reference",)
    assert "reference" in refresh.default_workloads(ROOT / "bench" / "regime.py")
    assert refresh.default_workloads(ROOT / "bench" / "codec.py") is None


def test_only_the_runs_of_older_code_rerun_and_a_reader_after_its_input(refresh, provenance_module, bench_out):
    old, new = MEASURED.format("parts.json"), ANALYTIC.format("parts.json")
    stamp = _stamp(provenance_module, "python bench/e2e.py --json bench/out/parts.json")
    _write(bench_out, "parts.json", {"provenance": stamp, "workloads": {
        "reference": {"provenance": _stamp(provenance_module, old, older=True)},
        "klein-4b-ref1024": {"provenance": _stamp(provenance_module, new)}}})
    codec = _stamp(provenance_module, CODEC.format("codec-x.json"), older=True)
    _write(bench_out, "codec-x.json", {"provenance": codec})
    reader = _stamp(provenance_module, ANALYTIC.format("a-reader.json"))
    _write(bench_out, "a-reader.json", {"provenance": reader, "workloads": {"klein-4b-ref1024": {
        "provenance": reader, "codec_rates_source": {"source": "codec-x.json", "codec_digest": codec["code_digest"]}}}})
    fresh = _stamp(provenance_module, ANALYTIC.format("fresh.json"))
    _write(bench_out, "fresh.json", {"provenance": fresh})

    reruns = refresh.plan()
    assert [(r.writes, r.command) for r in reruns] == [  # the timed ones as early as their inputs allow
        ("codec-x.json", codec["command"]), ("parts.json", old), ("a-reader.json", reader["command"])]
    by_file = {r.writes: r for r in reruns}
    assert "sakura.evaluation.regime" in by_file["parts.json"].why and by_file["parts.json"].alone
    assert by_file["a-reader.json"].why == "reads codec-x.json, rerun here"
    assert by_file["a-reader.json"].after == {"codec-x.json"} and not by_file["a-reader.json"].alone


def test_a_reader_of_an_input_rerun_since_at_other_code_reruns(refresh, provenance_module, bench_out):
    _write(bench_out, "codec-x.json", {"provenance": _stamp(provenance_module, CODEC.format("codec-x.json"))})
    reader = _stamp(provenance_module, ANALYTIC.format("a-reader.json"))
    _write(bench_out, "a-reader.json", {"provenance": reader, "codec_rates_source": {
        "source": "codec-x.json", "codec_digest": "0" * 64}})
    why = "reads codec-x.json, rerun since at other code"
    assert [(r.writes, r.why) for r in refresh.plan()] == [("a-reader.json", why)]


class _Machine:
    """Fake processes on a logical clock: each runs for ``polls`` polls; the checks hold at every start."""

    def __init__(self, jobs: int, failing: str = "") -> None:
        self.jobs, self.failing, self.running, self.started, self.peak = jobs, failing, [], [], 0

    def start(self, rerun, log):
        assert not any(r.alone for r in self.running), f"{rerun.command} started beside a timed command"
        assert not (rerun.alone and self.running), f"timed {rerun.command} started beside others"
        assert rerun.writes not in {r.writes for r in self.running}, "two commands on one file at once"
        assert rerun.after.isdisjoint(r.writes for r in self.running), "a reader started before its input ended"
        self.running.append(rerun)
        self.started.append(rerun.command)
        self.peak = max(self.peak, len(self.running))
        assert len(self.running) <= self.jobs
        return _Process(self, rerun, polls=3)


class _Process:
    def __init__(self, machine: _Machine, rerun, polls: int) -> None:
        self.machine, self.rerun, self.left = machine, rerun, polls

    def poll(self):
        self.left -= 1
        if self.left > 0:
            return None
        self.machine.running.remove(self.rerun)
        return 1 if self.rerun.command == self.machine.failing else 0


def _reruns(refresh):
    rerun = refresh.Rerun
    return [rerun("codec a", "codec-a.json", "", alone=True),
            rerun("sim 1", "sim.json", "", alone=False, after=frozenset({"codec-a.json"})),
            rerun("sim 2", "sim.json", "", alone=False),
            rerun("other 1", "other.json", "", alone=False),
            rerun("third", "third.json", "", alone=False),
            rerun("live", "live.json", "", alone=True),
            rerun("after live", "late.json", "", alone=False)]


def test_the_runner_keeps_timed_commands_alone_and_files_in_order(refresh, tmp_path):
    machine = _Machine(jobs=2)
    assert refresh.run(_reruns(refresh), 2, tmp_path, start=machine.start, poll_s=0) == []
    assert machine.started.index("sim 1") < machine.started.index("sim 2")
    assert machine.started.index("live") < machine.started.index("after live")
    assert sorted(machine.started) == sorted(r.command for r in _reruns(refresh)) and machine.peak == 2


def test_after_a_failure_the_runner_starts_nothing_new(refresh, tmp_path):
    machine = _Machine(jobs=2, failing="sim 1")
    failed = refresh.run(_reruns(refresh), 2, tmp_path, start=machine.start, poll_s=0)
    assert [r.command for r in failed] == ["sim 1"]
    assert "live" not in machine.started and "sim 2" not in machine.started


def test_timed_commands_go_first_but_never_before_what_they_wait_for(refresh):
    rerun = refresh.Rerun
    reruns = [rerun("sim part", "f.json", "", alone=False), rerun("timed part", "f.json", "", alone=True),
              rerun("reads g", "h.json", "", alone=True, after=frozenset({"g.json"})),
              rerun("g", "g.json", "", alone=False), rerun("timed", "k.json", "", alone=True)]
    order = [r.command for r in refresh._alone_first(reruns)]
    assert order == ["timed", "sim part", "timed part", "g", "reads g"]


@pytest.fixture()
def simulation():
    yield from bench_module("_simulation")


def test_a_simulated_figure_digests_every_evaluation_module_the_simulation_imports(simulation):
    """A module the simulation reads but the digest leaves out would let its figures describe code
    that has since changed, unseen by ``bench/refresh.py`` (``sim_estimator`` nearly was)."""
    package = ROOT / "src" / "sakura" / "evaluation"
    todo, seen = ["simulator", "runs", "regime"], set()
    while todo:
        name = todo.pop()
        if name in seen:
            continue
        seen.add(name)
        tree = ast.parse((package / f"{name}.py").read_text())
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("sakura.evaluation."):
                todo.append(node.module.removeprefix("sakura.evaluation.").split(".")[0])
    assert {f"sakura.evaluation.{m}" for m in seen} <= set(simulation.SIMULATED)
