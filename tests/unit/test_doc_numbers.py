"""No number in the docs without a source (issue 37, item 2): every *result figure* in the prose of
README.md and docs/*.md is generated from its JSON, or its sentence names where it comes from.

A **result figure** is a number in the prose (outside fenced code, inline code, HTML comments,
link targets and generated tables and figures) that

* carries a unit of measure: a factor (``1.43x``) or a share (``20%``), or, after a space, a time
  (``µs``, ``ms``, ``s``, ``min``, ``h``), a size (``B``, ``kB``, ``MB``, ``GB``, ``TB``, ``KiB``,
  ``MiB``, ``GiB``), a rate (``kbit/s``, ``Mbit/s``, ``Gbit/s``, ``Tb/s``, ``MB/s``, ``GB/s``,
  ``req/s``, ``requests/s``, ``GETs/s``, ``templates/min``, ``TFLOP/s``), ``dB``, ``J``, ``W`` or ``mW``;
* or is a decimal without a unit (``0.97``, ``1.05-1.21``, ``7.5e-4``): a ratio or a score,

with a range (``88-157 Mbit/s``) one figure. Not figures: counts and other integers without a unit
(``3 traces``, ``25 shards``, ports, dates), shapes (``1024x1024``), names with digits (``klein 4B``,
``SD3.5``, ``FLUX.2``) and versions (a decimal after one of :data:`VERSIONED`: ``Python 3.11``).

Its **source** is looked for in its sentence (for a typed table: the table and the paragraph just
above it). A figure is sourced where

1. it is *generated*: between ``<!-- fig: ... -->`` and ``<!-- /fig -->`` (or in a generated table):
   ``bench/tables.py`` writes it from its JSON, and ``--check`` (and ``test_doc_tables``) fails
   when it differs;
2. its sentence names a *bench JSON* that exists, ``bench/out/NAME.json``, where a reader sees it.
   A typed table cannot: a table of results is generated, never typed;
3. its sentence names the *code* that fixes it, in backticks, near it (within :data:`REACH`
   characters; anywhere in a typed table): a ``sakura.`` name that imports, a
   path of the checkout that exists (``tests/unit/...py``: a test that pins it), a command-line flag
   a parser of ``src/`` or ``bench/`` defines, or an ``UPPER_CASE`` constant ``src/`` defines: a
   setting or a limit, not a measurement;
4. its sentence says it is *not our measurement*, with one of :data:`LABELS` near it (as in 3; a
   label at the head of a sentence speaks for all of it): an estimate, a goal, a default, a
   published figure (``et al.``, ``the paper``).

A section that quotes a JSON written before runs recorded their provenance says so: "measured
before provenance was recorded", with the command that reruns it (the line under a generated table
of it does); and once every JSON it names records its provenance (rerun), it says so no more.
"""

from __future__ import annotations

import importlib
import json
import re
from functools import cache
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
OUT = ROOT / "bench" / "out"

#: Words after which a decimal is a version, not a figure.
VERSIONED = ("Python", "torch", "Ray", "schema", "SD", "SeaweedFS", "diffusers", "UFS", "version", "format")
#: Words that say a figure is not our measurement (matched case-insensitively, whole words) ...
LABELS = ("estimate", "estimated", "estimates", "goal", "goals", "default", "et al.", "paper", "paper's", "published")
LABEL = re.compile(rf"(?<!\w)(?:{'|'.join(re.escape(label) for label in LABELS)})(?!\w)", re.I)
#: A label, or the code that fixes a figure, stands within this many characters of it, in its sentence.
REACH = 80

_SPACED_UNITS = (r"µs|ms|s|min|h|B|kB|MB|GB|TB|KiB|MiB|GiB|kbit/s|Mbit/s|Gbit/s|Tb/s|MB/s|GB/s|req/s|requests/s"
                 r"|GETs/s|templates/min|TFLOP/s|dB|J|W|mW")
_NUM = r"[-+±−]?\d[\d,]*(?:\.\d+)?(?:e-?\d+)?"
FIGURE = re.compile(
    rf"(?<![\w.,/\-+±−~^])(?P<num>{_NUM}(?:\s?(?:-|–|to)\s?{_NUM})?)"
    rf"(?:(?P<attached>x|%)(?![\w])|\s(?P<unit>{_SPACED_UNITS})(?![\w/]))?"
    r"(?![\w.]?\d)")
VERSION = re.compile(rf"\b(?:{'|'.join(VERSIONED)})\s+\S*$")
CITED_JSON = re.compile(r"bench/out/([\w.\-]+\.json)")
TICKED = re.compile(r"`([^`\n]+)`")
GENERATED_TABLE = re.compile(r"<!-- table: [a-z0-9-]+ -->\n.*?<!-- /table -->", re.S)
GENERATED_FIGURE = re.compile(r"<!-- fig: (?P<spec>[^>]+?) -->(?P<body>[^<]*)<!-- /fig -->")
FENCE = re.compile(r"^( *)(```|~~~).*?^\1\2[ \t]*$", re.S | re.M)
BEFORE_PROVENANCE = "measured before provenance was recorded"
SENTENCE_END = re.compile(r"(?<!\be\.g)(?<!\bi\.e)(?<!\bal)(?<!\bvs)[.!?]\)?\s+(?=[A-Z*(`\[])"
                          r"|\n(?=\s*(?:[*-]|\d+\.|#) )")


def _blank(match: re.Match) -> str:
    """A span replaced by spaces, newlines kept, so positions and lines still count."""
    return re.sub(r"[^\n]", " ", match.group(0))


def _prose(text: str) -> str:
    """``text`` with what is not prose blanked: code, generated tables, links' targets, comments
    and generated figures (rule 1 sources them)."""
    text = FENCE.sub(_blank, text)
    text = GENERATED_TABLE.sub(_blank, text)
    text = GENERATED_FIGURE.sub(_blank, text)
    text = re.sub(r"<!--.*?-->", _blank, text, flags=re.S)
    text = re.sub(r"`[^`]*`", _blank, text)
    return re.sub(r"\]\([^)\s]*\)", lambda m: "]" + " " * (len(m.group(0)) - 1), text)


def figures(prose: str) -> list[re.Match]:
    """The result figures in a stretch of prose (see the module's docstring)."""
    found = []
    for m in FIGURE.finditer(prose):
        num, unit = m.group("num"), m.group("attached") or m.group("unit")
        if unit is None and not re.search(r"\d[.e]", num):
            continue  # an integer without a unit: a count, a port, a date
        if unit is None and VERSION.search(prose[max(0, m.start() - 40):m.start()]):
            continue
        found.append(m)
    return found


@cache
def _code_text() -> str:
    return "\n".join(p.read_text() for d in ("src", "bench") for p in sorted((ROOT / d).rglob("*.py")))


@cache
def _resolves(dotted: str) -> bool:
    """Whether ``sakura.a.b.c`` names a module or an attribute of one."""
    parts = dotted.split(".")
    for i in range(len(parts), 0, -1):
        try:
            obj = importlib.import_module(".".join(parts[:i]))
        except ImportError:
            continue
        try:
            for name in parts[i:]:
                obj = getattr(obj, name)
        except AttributeError:
            return False
        return True
    return False


def _names_code(tick: str) -> bool:
    """Whether an inline-code span names code that fixes a figure (rule 3)."""
    tick = tick.strip()
    if re.fullmatch(r"sakura(\.\w+)+(\(\))?", tick):
        return _resolves(tick.removesuffix("()"))
    if re.fullmatch(r"(src|tests|infra|examples)/[\w./\-]+|bench/\w+\.py", tick):
        return (ROOT / tick).exists()
    if re.fullmatch(r"--[a-z][a-z0-9-]*", tick.split(" ")[0].split("=")[0]):
        flag = tick.split(" ")[0].split("=")[0]
        return re.search(rf"""["']{re.escape(flag)}["']""", _code_text()) is not None
    if re.fullmatch(r"[A-Z][A-Z0-9_]{2,}", tick):
        return re.search(rf"^\s*{tick}\s*(:[^=\n]*)?=", _code_text(), re.M) is not None
    return False


def source(unit: str, *, typed_table: bool = False) -> str | None:
    """What sources every figure of one sentence (or typed table), or None: a bench JSON it names
    (rule 2); for a typed table, code or a label anywhere in it (rules 3 and 4)."""
    if not typed_table and any((OUT / name).exists() for name in CITED_JSON.findall(unit)):
        return "bench JSON"
    if typed_table and (LABEL.search(unit) or any(_names_code(t) for t in TICKED.findall(unit))):
        return "code or label"
    return None


def _near(sentence: str, start: int, end: int) -> bool:
    """Whether code (rule 3) or a label (rule 4) stands within :data:`REACH` characters of a figure
    in its sentence (``sentence`` as written, inline code and all), or a label at its head (within
    its first :data:`REACH` characters) speaks for the whole sentence."""
    def shown(text: str) -> int:  # characters a reader sees: a generated figure's marker is not
        return len(re.sub(r"<!--.*?-->", "", text, flags=re.S))

    if any(shown(sentence[:m.start()]) < REACH for m in LABEL.finditer(sentence)):
        return True
    spans = [m.span() for m in LABEL.finditer(sentence)]
    spans += [m.span() for m in TICKED.finditer(sentence) if _names_code(m.group(1))]
    return any(shown(sentence[b:start]) < REACH if b <= start else shown(sentence[end:a]) < REACH for a, b in spans)


def _units(text: str) -> list[tuple[int, str, str, bool]]:
    """(line, prose, original, typed table) per sentence, heading and typed table of a page."""
    prose = _prose(text)
    out = []
    # blocks: runs of non-blank lines; a typed table with the paragraph before it is one unit
    blocks = [(m.start(), m.group(0)) for m in re.finditer(r"(?:[^\n]*\S[^\n]*\n?)+", prose)]
    previous = ""
    for start, block in blocks:
        line = prose.count("\n", 0, start) + 1
        original = text[start:start + len(block)]
        if block.lstrip().startswith("|"):
            out.append((line, previous + "\n" + block, previous + "\n" + original, True))
            previous = ""
            continue
        for sentence, offset in _sentences(block):
            out.append((line + block.count("\n", 0, offset), sentence, original[offset:offset + len(sentence)], False))
        previous = original
    return out


def _sentences(block: str) -> list[tuple[str, int]]:
    """A block's sentences (split after ``.``, ``!`` or ``?`` before a capital), each with its offset;
    a heading or a list item starts a sentence."""
    cuts = [0] + [m.end() for m in SENTENCE_END.finditer(block)]
    return [(block[a:b], a) for a, b in zip(cuts, [*cuts[1:], len(block)], strict=True) if block[a:b].strip()]


def unsourced(text: str) -> list[tuple[int, str, str]]:
    """(line, figure, sentence) for every result figure of a page without a source."""
    bad = []
    for line, prose, original, typed in _units(text):
        found = figures(prose)
        if not found or source(original, typed_table=typed):
            continue
        bad += [(line + prose.count("\n", 0, m.start()), m.group(0).strip(), " ".join(original.split()))
                for m in found if typed or not _near(original, m.start(), m.end())]
    return bad


def _rel(doc: Path) -> str:
    return doc.relative_to(ROOT).as_posix()


@pytest.mark.parametrize("doc", DOCS, ids=_rel)
def test_every_result_figure_in_the_docs_has_a_source(doc):
    bad = unsourced(doc.read_text())
    assert not bad, f"{_rel(doc)}: figures without a source (see this test's docstring for the rule):\n" + "\n".join(
        f"  line {line}: {fig!r} in: {sentence[:300]}" for line, fig, sentence in bad)


@cache
def _has_provenance(name: str) -> bool:
    return "provenance" in json.loads((OUT / name).read_text())


@pytest.mark.parametrize("doc", DOCS, ids=_rel)
def test_a_section_quoting_a_json_without_provenance_says_so(doc):
    bad = []
    for block in re.split(r"\n(?=#+ )", FENCE.sub(_blank, doc.read_text())):
        quoted = {*CITED_JSON.findall(block), *(m.group("spec").split(" | ")[0]
                                               for m in GENERATED_FIGURE.finditer(block) if " | " in m.group("spec"))}
        legacy = sorted(name for name in quoted if (OUT / name).exists() and not _has_provenance(name))
        says = BEFORE_PROVENANCE in " ".join(block.split())
        if legacy and not says:
            bad.append(f"say '{BEFORE_PROVENANCE}; rerun with <command> to refresh' of {', '.join(legacy)} in: "
                       f"{' '.join(block.split())[:200]}")
        elif says and not legacy:  # rerun since: the note is stale
            bad.append(f"every JSON it names records its provenance now; drop '{BEFORE_PROVENANCE}' in: "
                       f"{' '.join(block.split())[:200]}")
    assert not bad, f"{_rel(doc)}:\n" + "\n".join(bad)


@pytest.mark.parametrize("doc", DOCS, ids=_rel)
def test_no_line_starts_with_a_generated_figure(doc):
    """Markdown takes a line that starts with ``<!--`` for a block of HTML, which ends the paragraph
    around it: a figure's marker goes on the line of the words before it."""
    starts = [i for i, line in enumerate(doc.read_text().splitlines(), 1) if line.lstrip().startswith("<!-- fig:")]
    assert not starts, f"{_rel(doc)}: lines {starts} start with a figure's marker"


def test_every_json_the_docs_name_exists():
    missing = sorted({f"{_rel(doc)}: bench/out/{name}" for doc in DOCS
                      for name in CITED_JSON.findall(doc.read_text()) if not (OUT / name).exists()})
    assert not missing, missing


# The rule itself, on made-up text.

@pytest.mark.parametrize(("text", "expected"), [
    ("SAKURA is 1.43x faster, in 3.2 s, at 52.3 dB, with 7.8 MB and 21 ms.", ["1.43x", "3.2 s", "52.3 dB", "7.8 MB",
                                                                               "21 ms"]),
    ("on-device / SAKURA 1.33, lumos-5g 0.97-1.07, 88-157 Mbit/s, within 7%.", ["1.33", "0.97-1.07",
                                                                               "88-157 Mbit/s", "7%"]),
    ("3 traces of 25 shards on port 8000, 1024x1024, klein 4B, SD3.5, FLUX.2, on 2026-12-01.", []),
    ("Python 3.11, torch 2.13, Ray 2.60, schema 1.3, SD 1.5.", []),
    ("`1.43x` in code, [a link](page.md#1.5), <!-- 2.5 s -->", []),
])
def test_what_counts_as_a_result_figure(text, expected):
    assert [m.group(0).strip() for m in figures(_prose(text))] == expected


@pytest.mark.parametrize(("sentence", "sourced"), [
    ("SAKURA is 1.43x faster (`bench/out/e2e-workloads.json`).", True),
    ("SAKURA is 1.43x faster (`bench/out/no-such-run.json`).", False),
    ("SAKURA is <!-- fig: e2e-workloads.json | /x | .2f -->1.43<!-- /fig -->x faster.", True),
    ("SAKURA is 1.43x faster.", False),
    ("A round trip of 40 ms (an estimate).", True),
    ("The goal is 1.4x.", True),
    ("`timeout_s` (default 10 s) bounds each wait.", True),
    ("The manifest is at most 16 MiB (`sakura.platform.manifest`).", True),
    ("The manifest is at most 16 MiB (`sakura.platform.no_such_module`).", False),
    ("Each block takes 0.25 s (`--block-s`).", True),
    ("Each block takes 0.25 s (`--no-such-flag`).", False),
    ("Pinned by `tests/unit/test_doc_numbers.py`: 3.2 s.", True),
])
def test_what_counts_as_a_source(sentence, sourced):
    assert (unsourced(sentence + "\n") == []) is sourced


def test_a_typed_table_of_results_is_not_sourced_by_naming_its_json():
    table = "From `bench/out/e2e-workloads.json`:\n\n| system | s |\n|---|---|\n| sakura | 5.15 |\n"
    assert [fig for _, fig, _ in unsourced(table)] == ["5.15"]
    constants = ("Device profiles are in `sakura.evaluation.profiles`:\n\n"
                 "| profile | TFLOP/s |\n|---|---|\n| a | 17.9 |\n")
    assert unsourced(constants) == []


@pytest.mark.parametrize("doc", [d for d in DOCS if "<!-- fig: " in d.read_text()], ids=_rel)
def test_every_generated_figure_matches_its_json(tables, doc):
    _, changed = tables.render(doc.read_text())
    assert changed == [], f"stale in {_rel(doc)}: {changed}; run python bench/tables.py"


def test_a_figure_edited_by_hand_is_caught(tables):
    spec = "e2e-workloads.json | /workloads/klein-4b-ref1024/families/lumos-5g/sakura/median_s | .2f"
    text, changed = tables.render(f"<!-- fig: {spec} -->9.99<!-- /fig --> s")
    right = next(tables.FIG.finditer(text)).group("body")  # with its mark while older code measured it
    assert changed == [f"figure {spec}"] and right.startswith(tables.figure(spec)) and right != "9.99"
    assert tables.render(text) == (text, [])


def test_a_figure_over_several_values_takes_their_range(tables):
    spec = "e2e-workloads.json | /workloads/*/families/lumos-5g/sakura/median_s | .1f range"
    values = [w["families"]["lumos-5g"]["sakura"]["median_s"]
              for w in json.loads((OUT / "e2e-workloads.json").read_text())["workloads"].values()]
    assert tables.figure(spec) == "-".join(dict.fromkeys(f"{v:.1f}" for v in sorted({min(values), max(values)})))
    with pytest.raises(SystemExit, match="needs min, max or range"):
        tables.figure(spec.removesuffix(" range"))


def test_every_earlier_run_the_docs_quote_is_kept_beside_its_figures():
    """A figure pinned to an earlier run (``NAME@COMMIT``) reads that run's JSON from
    ``bench/out/history``, so a clone without the history (a shallow checkout) renders it too."""
    pinned = {m.group(0) for doc in DOCS for m in re.finditer(r"[\w.-]+\.json@[0-9a-f]{7,40}", doc.read_text())}
    assert pinned, "no figure quotes an earlier run: drop this test and bench/out/history"
    missing = sorted(p for p in pinned if not (ROOT / "bench" / "out" / "history" / p).is_file())
    assert not missing, f"archive them: git show COMMIT:bench/out/NAME > bench/out/history/NAME@COMMIT: {missing}"
