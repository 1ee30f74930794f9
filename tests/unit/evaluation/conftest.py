"""One example template built for the reference model, and its measured geometry."""

from __future__ import annotations

import pytest

from sakura.evaluation import FidelityTable, measure_geometry
from sakura.evaluation.workload import build_examples, example_spec, load_cases
from sakura.platform.models import Schedule, load_model
from sakura.platform.spec import parse_spec


@pytest.fixture(scope="session")
def measured(tmp_path_factory):
    spec = example_spec()
    one = parse_spec({"templates": [spec.templates[1].model_dump(mode="json")]}, source="test", base_dir=spec.base_dir)
    uri = f"file://{tmp_path_factory.mktemp('eval-lib')}"
    build_examples(uri, one)
    adapter = load_model("reference")
    case = load_cases(uri, one, adapter.resolution)[0]
    geometry, decoded = measure_geometry(adapter, case.manifest, case.payloads, case.template, case.request, repeats=3)
    schedule = Schedule(case.manifest.schedule.steps, case.manifest.schedule.strength)
    fidelity = FidelityTable(adapter, decoded, geometry.levels[-1], case.manifest.prompt, case.request, schedule)
    return case, geometry, fidelity
