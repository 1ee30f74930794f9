"""Where the simulation benches' analytic workloads take their codec rates (``bench/_simulation.py``):
every bench the same way, from the codec bench JSON the options name, and never from how fast this
machine decoded the reference model's KV during the run (``bench/session.py`` and
``bench/energy.py`` once took that, so their klein figures moved with the machine's load)."""

from __future__ import annotations

from pathlib import Path

import pytest

from sakura.evaluation.workloads import MeasuredWorkload
from tests.unit.evaluation.pinned_geometry import pinned

ROOT = Path(__file__).resolve().parents[3]
WORKLOAD = "klein-4b-ref1024"


@pytest.fixture
def simulation(monkeypatch):
    monkeypatch.syspath_prepend(str(ROOT / "bench"))
    import _simulation

    return _simulation


def _reference(decode_factor: float = 1.0) -> MeasuredWorkload:
    g = pinned()
    return MeasuredWorkload("reference", [g.scaled(1.0, decode_factor=decode_factor)], fidelity=[])


def _edits(simulation, reference: MeasuredWorkload, *options: str):
    args = simulation.parser(None, (WORKLOAD,)).parse_args(list(options))
    return simulation.edits_of(WORKLOAD, reference, simulation.analytic_rates(args, reference))


def test_an_analytic_workloads_edit_does_not_follow_the_machines_decode_speed(simulation):
    _, quiet, source = _edits(simulation, _reference())
    _, loaded, _ = _edits(simulation, _reference(decode_factor=5.0))
    assert quiet == loaded
    assert source["bracket"] == "conservative" and source["decode_source"].startswith("codec-")


def test_the_rates_option_picks_the_bracket(simulation):
    reference = _reference()
    _, conservative, _ = _edits(simulation, reference)
    _, optimistic, source = _edits(simulation, reference, "--rates", "reference")
    assert source["bracket"] == "optimistic"
    compact = conservative[0].levels[0]
    assert sum(optimistic[0].sizes[compact]) < sum(conservative[0].sizes[compact])

