"""The reference model's edit geometry as measured once and kept (``tests/golden/reference-geometry.json``):
the simulator's tests take their compute and decode times from it, so what they assert follows from
the code under test and not from how busy this machine is while the suite runs. Rewrite it after a
change to the codec or the reference model with ``python -m tests.unit.evaluation.pinned_geometry --write``."""

from __future__ import annotations

import json
import sys
import tempfile
from pathlib import Path

from sakura.evaluation import measure_geometry
from sakura.evaluation.geometry import EditGeometry
from sakura.evaluation.workload import TemplateCase, build_examples, example_spec, load_cases
from sakura.platform.models import ModelAdapter, load_model
from sakura.platform.spec import parse_spec

GOLDEN = Path(__file__).resolve().parents[2] / "golden" / "reference-geometry.json"


def measure_example(root: Path) -> tuple[ModelAdapter, TemplateCase, EditGeometry, dict]:
    """The second example template built into a library under ``root`` for the reference model,
    and its geometry measured on this machine (with the decoded KV of each level)."""
    spec = example_spec()
    one = parse_spec({"templates": [spec.templates[1].model_dump(mode="json")]}, source="test", base_dir=spec.base_dir)
    uri = f"file://{root}"
    build_examples(uri, one)
    adapter = load_model("reference")
    case = load_cases(uri, one, adapter.resolution)[0]
    geometry, decoded = measure_geometry(adapter, case.manifest, case.payloads, case.template, case.request, repeats=3)
    return adapter, case, geometry, decoded


def pinned() -> EditGeometry:
    return EditGeometry.from_dict(json.loads(GOLDEN.read_text()))


def main(argv: list[str]) -> int:
    if argv != ["--write"]:
        print(__doc__)
        return 2
    with tempfile.TemporaryDirectory() as folder:
        _, _, geometry, _ = measure_example(Path(folder))
    GOLDEN.write_text(json.dumps(geometry.to_dict(), indent=1, sort_keys=True) + "\n")
    print(f"wrote {GOLDEN}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
