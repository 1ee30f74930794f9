"""One example template built for the reference model, its measured geometry, and the geometry
measured once and kept (``pinned_geometry``) for the simulator's claims."""

from __future__ import annotations

import pytest

from sakura.evaluation import FidelityTable
from sakura.evaluation.geometry import EditGeometry
from sakura.platform.models import Schedule
from tests.unit.evaluation.pinned_geometry import measure_example, pinned


@pytest.fixture(scope="session")
def measured(tmp_path_factory):
    adapter, case, geometry, decoded = measure_example(tmp_path_factory.mktemp("eval-lib"))
    schedule = Schedule(case.manifest.schedule.steps, case.manifest.schedule.strength)
    fidelity = FidelityTable(adapter, decoded, geometry.levels[-1], case.manifest.prompt, case.request, schedule)
    return case, geometry, fidelity


@pytest.fixture(scope="session")
def pinned_geometry() -> EditGeometry:
    return pinned()
