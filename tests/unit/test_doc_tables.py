"""The result tables in the docs are what their bench JSON gives: generated between markers by
``bench/tables.py``, so a table that differs from its JSON (edited by hand, or its JSON rerun)
fails here. Rewrite them with ``python bench/tables.py``. The tables sit on the docs pages
(``docs/*.md``) whose text quotes them; none may be lost when text moves between pages."""

from __future__ import annotations

import importlib
import json
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def _docs_with_tables() -> list[str]:
    """Every doc that carries a generated table, relative to the checkout."""
    docs = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
    return [doc.relative_to(ROOT).as_posix() for doc in docs if "<!-- table: " in doc.read_text()]


@pytest.mark.parametrize("doc", _docs_with_tables())
def test_every_generated_table_matches_its_json(tables, doc):
    text = (ROOT / doc).read_text()
    names = [m.group("name") for m in tables.MARKED.finditer(text)]
    assert names, f"{doc} has a table marker the renderer does not read (a typo in it?)"
    _, changed = tables.render(text)
    assert changed == [], f"stale tables in {doc}: {changed}; run python bench/tables.py"


def test_every_table_the_renderer_knows_is_in_exactly_one_doc(tables):
    placed = [m.group("name") for doc in _docs_with_tables() for m in tables.MARKED.finditer((ROOT / doc).read_text())]
    assert placed, "no doc carries a generated table"
    assert sorted(placed) == sorted(tables.TABLES), "a table is lost (in no doc) or in two docs"


def test_the_renderer_rewrites_every_doc_with_tables(tables):
    assert {ROOT / doc for doc in _docs_with_tables()} <= set(tables.DOCS)


def test_a_table_edited_by_hand_is_caught(tables):
    text = (ROOT / _docs_with_tables()[0]).read_text()
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


MODULES = ["sakura.evaluation.regime", "sakura.platform.retry"]


def test_a_run_is_stale_in_exactly_the_modules_whose_code_changed(provenance_module):
    stamp = provenance_module.provenance(*MODULES)
    assert provenance_module.changed_since(stamp, MODULES) == []
    edited = {**stamp, "code_digest": "0" * 64}  # the source changed: each module's code is compared
    assert provenance_module.changed_since(edited, MODULES) == []  # (here only in "comments")
    edited["module_digests"] = {**stamp["module_digests"], "sakura.platform.retry": "1" * 64}
    assert provenance_module.changed_since(edited, MODULES) == ["sakura.platform.retry"]
    unknown = {k: v for k, v in edited.items() if k != "module_digests"}  # nothing to compare with
    assert provenance_module.changed_since(unknown, MODULES) == MODULES


def test_comments_and_docstrings_are_not_code_but_a_changed_line_is(provenance_module):
    code = provenance_module._without_docstrings
    base = 'def f(x):\n    """Twice x."""\n    return 2 * x  # doubled\n'
    assert code(base) == code('def f(x):\n    """Two times x, reworded."""\n\n    return 2*x\n')
    assert code(base) != code('def f(x):\n    """Twice x."""\n    return 3 * x\n')


def _older(stamp: dict) -> dict:
    """``stamp`` as if ``sakura.evaluation.regime`` had changed since its run."""
    return {**stamp, "code_digest": "0" * 64,
            "module_digests": {**stamp["module_digests"], "sakura.evaluation.regime": "2" * 64}}


def test_a_table_says_when_its_figures_were_measured_on_older_code(tables, provenance_module, bench_out):
    stamp = provenance_module.provenance(*MODULES)
    for name, prov in (("fresh.json", stamp), ("stale.json", _older(stamp))):
        (bench_out / name).write_text(json.dumps({"provenance": prov}))
    assert "older code" not in tables._source("fresh.json")
    assert "**Measured on older code**: `sakura.evaluation.regime` changed since" in tables._source("stale.json")


def test_a_figure_in_the_text_says_when_older_code_measured_it(tables, provenance_module, bench_out, monkeypatch):
    """An inline figure carries the flag the line under a table carries, whichever way it read its
    JSON: a pointer, a divisor in another file, or a named figure's own function."""
    sources = importlib.import_module("_sources")
    stamp = provenance_module.provenance(*MODULES)
    for name, prov in (("fresh.json", stamp), ("stale.json", _older(stamp))):
        (bench_out / name).write_text(json.dumps({"provenance": prov, "value": 3.0}))
    monkeypatch.setitem(tables.FIGURES, "stale-value", lambda: f"{sources._load('stale.json')['value']:.0f}")

    def rendered(spec: str) -> str:
        return next(tables.FIG.finditer(tables.render(f"<!-- fig: {spec} -->?<!-- /fig -->")[0])).group("body")

    assert rendered("fresh.json | /value | .0f") == "3"
    assert rendered("stale.json | /value | .0f") == "3" + tables.OLDER_CODE
    assert rendered("fresh.json | /value | .1f | over stale.json:/value") == "1.0" + tables.OLDER_CODE
    assert rendered("stale-value") == "3" + tables.OLDER_CODE
    assert not sources.on_older_code({"stale.json@0123abc"})  # an earlier run, quoted as such


def test_a_table_says_when_the_figures_it_was_built_on_no_longer_describe_todays_code(
        tables, provenance_module, bench_out):
    """A simulated figure takes its codec rates from other bench JSON: it is as stale as they are."""
    sources = importlib.import_module("_sources")
    fresh = provenance_module.provenance(*MODULES)
    older = _older(fresh)

    def source(name: str, files: dict[str, dict]) -> str:
        for old in bench_out.iterdir():
            old.unlink()
        for file, data in files.items():
            (bench_out / file).write_text(json.dumps(data))
        for cache in (sources._changed, sources._stale_inputs):
            cache.cache_clear()
        return tables._source(name)

    def built_on(input_digest: str, name: str = "codec.json") -> dict:
        return {"provenance": fresh, "setup": {"codec_rates_source": {
            "source": name, "codec_digest": input_digest, "context": "uncoded"}}}

    today = fresh["code_digest"]
    assert "older inputs" not in source("figure.json", {
        "figure.json": built_on(today), "codec.json": {"provenance": fresh}})
    assert "`bench/out/codec.json` (rerun since at other code)" in source("figure.json", {
        "figure.json": built_on("8" * 64), "codec.json": {"provenance": fresh}})
    assert "`bench/out/codec.json` (measured on older code)" in source("figure.json", {
        "figure.json": built_on(older["code_digest"]), "codec.json": {"provenance": older}})
    assert "`bench/out/figure.json` (measured on older code)" in source("map.json", {  # through a figure
        "map.json": built_on(today, "figure.json"), "figure.json": built_on(older["code_digest"]),
        "codec.json": {"provenance": older}})
    assert "`bench/out/codec.json` (no longer kept)" in source("figure.json", {"figure.json": built_on(today)})
