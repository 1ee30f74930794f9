from __future__ import annotations

import os
from pathlib import Path

import pytest

from sakura.examples import TEMPLATES as EXAMPLES
from sakura.platform.errors import SpecError
from sakura.platform.spec import MAX_SPEC_BYTES, Task, load_spec
from tests.unit.platform.test_images import write_huge_png


def test_example_spec_has_one_template_per_task():
    spec = load_spec(EXAMPLES)
    assert {t.task for t in spec.templates} == {Task.FACE_SWAP, Task.TRY_ON, Task.STYLE_TRANSFER}


def _write(tmp_path: Path, body: str) -> Path:
    path = tmp_path / "spec.yaml"
    path.write_text(body)
    return path


GOOD = "  - id: ok\n    task: try_on\n    image: skimage:brick\n    prompt: p\n"


@pytest.mark.parametrize(
    "entry, template, field",
    [
        ("  - id: Bad/Id\n    task: try_on\n    image: skimage:brick\n    prompt: p\n", "Bad/Id", "id"),
        ("  - id: t1\n    task: teleport\n    image: skimage:brick\n    prompt: p\n", "t1", "task"),
        ("  - id: t2\n    task: try_on\n    image: nowhere.png\n    prompt: p\n", "t2", "image"),
        ("  - id: t3\n    task: try_on\n    image: skimage:nonexistent\n    prompt: p\n", "t3", "image"),
        ("  - id: t4\n    task: try_on\n    image: skimage:brick\n", "t4", "prompt"),
        ("  - id: t5\n    task: try_on\n    image: skimage:brick\n    prompt: p\n    colour: red\n", "t5", "colour"),
        (
            "  - id: t6\n    task: try_on\n    image: skimage:brick\n    prompt: p\n    resolution: -3\n",
            "t6",
            "resolution",
        ),
        ("  - task: try_on\n    image: skimage:brick\n    prompt: p\n", "#2", "id"),
        (GOOD, "ok", "id"),  # duplicate of the first entry
    ],
)
def test_invalid_entries_name_file_template_and_field(tmp_path, entry, template, field):
    path = _write(tmp_path, "templates:\n" + GOOD + entry)
    with pytest.raises(SpecError) as info:
        load_spec(path)
    message = str(info.value)
    assert str(path) in message and f"template {template!r}" in message and f"field '{field}'" in message


@pytest.mark.parametrize(
    "body",
    [
        "base_dir: /etc\ntemplates:\n" + GOOD,
        "templates: 3\n",
        "- a\n",
        "templates: []\n",
        "templates: [\n",
        "other: 1\ntemplates:\n" + GOOD,
    ],
)
def test_malformed_files_are_spec_errors(tmp_path, body):
    path = _write(tmp_path, body)
    with pytest.raises(SpecError, match=str(path)):
        load_spec(path)


def test_missing_file_is_a_spec_error(tmp_path):
    with pytest.raises(SpecError, match="not found"):
        load_spec(tmp_path / "absent.yaml")


def test_relative_image_paths_resolve_against_the_spec_folder(tmp_path):
    from skimage import data, io

    (tmp_path / "imgs").mkdir()
    io.imsave(tmp_path / "imgs" / "brick.png", data.brick(), check_contrast=False)
    spec = load_spec(
        _write(tmp_path, "templates:\n  - id: local\n    task: custom\n    image: imgs/brick.png\n    prompt: p\n")
    )
    assert spec.templates[0].image == "imgs/brick.png" and spec.base_dir == tmp_path


ENTRY = "  - id: deep\n    task: custom\n    image: skimage:brick\n    prompt: "


@pytest.mark.parametrize(
    "body",
    [
        "templates:\n" + ENTRY + "[" * 5000 + "]" * 5000 + "\n",  # flow sequences
        "templates:\n" + ENTRY + "{a: " * 3000 + "1" + "}" * 3000 + "\n",  # flow mappings
        "templates:\n" + ENTRY + "\n" + "".join("      " + " " * i + "k:\n" for i in range(700)),  # block
        "x: " + "[" * 20000 + "]" * 20000 + "\ntemplates:\n" + GOOD,  # outside the templates
    ],
    ids=["flow-list", "flow-map", "block", "top-level"],
)
def test_deeply_nested_yaml_is_a_spec_error(tmp_path, body):
    path = _write(tmp_path, body)
    with pytest.raises(SpecError) as info:
        load_spec(path)
    assert str(path) in str(info.value) and "nested deeper than" in str(info.value)


@pytest.mark.parametrize(
    "body, field",
    [
        ("templates:\n" + ENTRY + "[" * 12 + "]" * 12 + "\n", "prompt"),  # nested, within the depth limit
        ("templates:\n" + GOOD + "    resolution: {a: {b: {c: [1, 2]}}}\n", "resolution"),
        ("loop: &x [*x]\ntemplates:\n" + GOOD, "loop"),  # a self-referencing value
        ("templates:\n  - &x [*x]\n", "(entry)"),
    ],
)
def test_nested_and_self_referencing_values_name_the_field(tmp_path, body, field):
    path = _write(tmp_path, body)
    with pytest.raises(SpecError) as info:
        load_spec(path)
    assert str(path) in str(info.value) and f"field '{field}'" in str(info.value)


def test_images_are_checked_from_their_headers(tmp_path, decodes):
    write_huge_png(tmp_path / "huge.png")
    (tmp_path / "notes.png").write_text("not an image\n")
    for name, words in (("huge.png", "12000x12000"), ("notes.png", "not an image")):
        path = _write(
            tmp_path, f"templates:\n{GOOD}  - id: tpl-x\n    task: custom\n    image: {name}\n    prompt: p\n"
        )
        with pytest.raises(SpecError) as info:
            load_spec(path)
        message = str(info.value)
        assert str(path) in message and "template 'tpl-x'" in message and "field 'image'" in message
        assert str(tmp_path / name) in message and words in message
    assert decodes == []


def test_a_fifo_or_a_device_named_as_the_spec_is_refused_never_read(tmp_path):
    """A FIFO would wait forever for a writer, ``/dev/zero`` would never end: neither is read."""
    fifo = tmp_path / "spec.yaml"
    os.mkfifo(fifo)
    for path in (fifo, Path("/dev/zero")):
        with pytest.raises(SpecError, match="not a regular file"):
            load_spec(path)


def test_a_spec_over_the_size_limit_is_refused(tmp_path):
    path = tmp_path / "spec.yaml"
    path.write_text("templates: []\n" + "#" * MAX_SPEC_BYTES)
    with pytest.raises(SpecError, match="larger than"):
        load_spec(path)


@pytest.mark.parametrize("body, where, expected", [
    ("templates:\n  - id: a\n    image: [unclosed\n", "line 4, column 1", "flow sequence at line 3, column 12"),
    ("templates:\n  - id: a\n   image: x\n", "line 3, column 4", "block collection at line 2, column 3"),
])
def test_a_yaml_error_is_one_line_naming_the_file_line_and_column(tmp_path, body, where, expected):
    path = _write(tmp_path, body)
    with pytest.raises(SpecError) as err:
        load_spec(path)
    message = str(err.value)
    assert message.startswith(f"{path}, {where}: not valid YAML") and expected in message
    assert "\n" not in message and "<unicode string>" not in message and "indentation" in message


def test_a_misspelt_field_is_one_problem_that_names_the_field_meant(tmp_path):
    entry = GOOD.replace("prompt:", "promt:")
    assert entry != GOOD
    with pytest.raises(SpecError) as err:
        load_spec(_write(tmp_path, "templates:\n" + entry))
    assert [p["field"] for p in err.value.problems] == ["promt"]
    assert "did you mean 'prompt'?" in err.value.problems[0]["message"]
