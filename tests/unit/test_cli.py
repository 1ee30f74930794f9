from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from sakura.cli import main
from sakura.examples import TEMPLATES as EXAMPLES


@pytest.mark.parametrize("model", ["tiny-flux", "tiny-sd3"])
def test_models_verify_json_reports_exact_replay(model, capsys):
    assert main(["models", "verify", model, "--json", "--repeats", "1"]) == 0
    report = json.loads(capsys.readouterr().out)
    expected_keys = {
        "model", "fingerprint", "steps", "layers", "template_tokens", "request_tokens", "kv_bytes_fp16",
        "max_abs_diff", "rel_l2_diff", "full_s", "replay_s", "exact",
    }
    assert expected_keys <= set(report)
    assert report["model"] == model and report["steps"] == 4 and report["exact"] is True
    assert report["max_abs_diff"] == 0.0 and report["rel_l2_diff"] == 0.0  # bit-identical, as docs/models.md shows
    assert report["template_tokens"] == 256
    assert report["kv_bytes_fp16"] == report["steps"] * report["layers"] * 2 * 256 * 64 * 2


def test_unknown_model_exits_with_a_clear_message(capsys):
    assert main(["models", "verify", "gpt-7"]) == 1
    err = capsys.readouterr().err
    assert "unknown model 'gpt-7'" in err and "tiny-flux" in err
    assert main(["models", "verify", "tiny-flx"]) == 1
    assert "did you mean 'tiny-flux'" in capsys.readouterr().err


def test_spec_check(capsys, tmp_path):
    assert main(["spec", "check", str(EXAMPLES)]) == 0
    assert "face-lfw85" in capsys.readouterr().out
    bad = tmp_path / "bad.yaml"
    bad.write_text("templates:\n  - id: x\n    task: nope\n    image: skimage:brick\n    prompt: p\n")
    assert main(["spec", "check", str(bad)]) == 1
    assert "field 'task'" in capsys.readouterr().err


def test_console_script_is_installed():
    exe = Path(sys.executable).with_name("sakura")
    proc = subprocess.run([str(exe), "models", "list", "--json"], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert "tiny-sd3" in json.loads(proc.stdout)


def test_a_template_id_typo_names_the_closest_published_ids(ref_library, capsys):
    for argv in (
        ["catalog", "show", "portrat"],
        ["alias", "set", "portrat", "stable", "1"],
        ["gc", "--keep", "1", "--template", "portrat"],
    ):
        assert main([*argv, "--store", ref_library]) == 1, argv
        assert capsys.readouterr().err.strip() == "sakura: error: unknown template 'portrat'; did you mean 'portrait'?"


def test_gc_dry_run_names_what_gc_would_retire_and_changes_nothing(tmp_path, capsys):
    from sakura.platform.library import TemplateLibrary
    from tests.helpers import make_library

    uri = f"file://{tmp_path}/lib"
    make_library(uri, ["skimage:brick", "skimage:grass", "skimage:coffee"])  # v1..v3, latest -> 3
    before = sorted(p.relative_to(tmp_path) for p in tmp_path.rglob("*"))
    assert main(["gc", "--keep", "1", "--dry-run", "--json", "--store", uri]) == 0
    assert json.loads(capsys.readouterr().out) == {"tpl": [1, 2]}
    assert sorted(p.relative_to(tmp_path) for p in tmp_path.rglob("*")) == before
    assert TemplateLibrary.open(uri).versions("tpl") == [1, 2, 3]


def test_a_bare_group_prints_its_own_help_and_version_and_models_list_say_what_there_is(capsys):
    assert main(["catalog"]) == 2
    assert "usage: sakura catalog" in capsys.readouterr().out
    with pytest.raises(SystemExit) as stop:
        main(["--version"])
    assert stop.value.code == 0 and capsys.readouterr().out.startswith("sakura ")
    assert main(["models", "list", "--json"]) == 0
    assert "reference" in json.loads(capsys.readouterr().out)


def test_an_unexpected_error_is_one_line_unless_debug_asks_for_the_traceback(monkeypatch, capsys):
    import sakura.cli

    def broken(_args):
        raise KeyError("a bug")

    monkeypatch.setattr(sakura.cli, "_models_list", broken)
    assert main(["models", "list"]) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "unexpected KeyError: 'a bug'" in err and "--debug" in err
    with pytest.raises(KeyError):
        main(["--debug", "models", "list"])


def test_spec_check_reports_every_problem_at_once(tmp_path, capsys):
    bad = tmp_path / "bad.yaml"
    bad.write_text("templates:\n"
                   "  - {id: x, task: nope, image: 'skimage:brick', prompt: p}\n"
                   "  - {id: 'BAD!', task: try_on, image: 'skimage:brick', prompt: p}\n"
                   "  - {id: x, task: try_on, image: 'skimage:brick', prompt: p}\n"
                   "colour: red\n")
    assert main(["spec", "check", str(bad), "--json"]) == 1
    problems = json.loads(capsys.readouterr().out)["problems"]
    fields = [(p["template"], p["field"]) for p in problems]
    assert fields == [("x", "task"), ("BAD!", "id"), ("x", "id"), ("", "colour")]
    assert not any(p["message"].startswith("Value error") for p in problems)
    assert main(["spec", "check", str(bad)]) == 1
    err = capsys.readouterr().err
    assert err.startswith(f"sakura: error: {bad}: 4 problems\n") and err.count("\n") == 5


def test_a_store_that_does_not_exist_is_refused_not_listed_as_empty(tmp_path, capsys):
    for argv in (["catalog", "ls"], ["gc", "--keep", "1"]):
        assert main([*argv, "--store", f"file://{tmp_path}/sakura-dta"]) == 1
        assert "does not exist: check the path" in capsys.readouterr().err
    assert list(tmp_path.iterdir()) == []
