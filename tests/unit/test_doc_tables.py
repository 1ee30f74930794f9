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


@pytest.mark.parametrize(("ratios", "expected"), [
    ([1.2, 1.1, 1.3], "always"),
    ([0.5, 0.9, 0.99], "never"),
    ([0.5, 2.0, 4.0], "> 2"),  # crosses 1 between 1 and 4 Mbit/s, at 2 in log-log
    ([2.0, 0.5, 2.0], "< 2, > 8"),  # the second crossing between 4 and 16, at 8
    ([0.5, 2.0, 0.5], "2-8"),
])
def test_the_ranges_where_sakura_is_ahead_follow_every_crossing(tables, ratios, expected):
    entry = {"cold": {"rates_mbps": [1.0, 4.0, 16.0][:len(ratios)], "ratios": {"k": ratios}}}
    assert tables._winning_ranges(entry, "k") == expected
