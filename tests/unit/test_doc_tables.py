"""The result tables in the docs are what their bench JSON gives: generated between markers by
``bench/tables.py``, so a table that differs from its JSON (edited by hand, or its JSON rerun)
fails here. Rewrite them with ``python bench/tables.py``."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def tables():
    sys.path.insert(0, str(ROOT / "bench"))
    try:
        import tables

        yield tables
    finally:
        sys.path.remove(str(ROOT / "bench"))
        sys.modules.pop("tables", None)


@pytest.mark.parametrize("doc", ["README.md"])
def test_every_generated_table_matches_its_json(tables, doc):
    text = (ROOT / doc).read_text()
    names = [m.group("name") for m in tables.MARKED.finditer(text)]
    assert names, f"{doc} has no generated tables"
    _, changed = tables.render(text)
    assert changed == [], f"stale tables in {doc}: {changed}; run python bench/tables.py"


def test_a_table_edited_by_hand_is_caught(tables):
    text = (ROOT / "README.md").read_text()
    match = next(tables.MARKED.finditer(text))
    edited = text.replace(match.group("body"), match.group("body").replace("|", "| 9", 1), 1)
    assert tables.render(edited)[1] == [match.group("name")]
