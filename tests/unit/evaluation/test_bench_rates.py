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


def _args(simulation, *options: str):
    return simulation.parser(None, (WORKLOAD,)).parse_args(list(options))


def test_an_analytic_workloads_edit_does_not_follow_the_machines_decode_speed(simulation):
    args = _args(simulation)
    _, quiet, source = simulation.edits_of(WORKLOAD, _reference(), args)
    _, loaded, _ = simulation.edits_of(WORKLOAD, _reference(decode_factor=5.0), args)
    assert quiet == loaded
    assert source["bracket"] == "conservative" and source["decode_source"].startswith("codec-")


def test_the_rates_option_picks_the_bracket(simulation):
    reference = _reference()
    _, conservative, _ = simulation.edits_of(WORKLOAD, reference, _args(simulation))
    _, optimistic, source = simulation.edits_of(WORKLOAD, reference, _args(simulation, "--rates", "reference"))
    assert source["bracket"] == "optimistic"
    compact = conservative[0].levels[0]
    assert sum(optimistic[0].sizes[compact]) < sum(conservative[0].sizes[compact])

