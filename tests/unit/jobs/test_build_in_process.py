"""The build job without Ray (what the evaluation builds through): the job's skip rule, claims
and publish, and its checks before anything is written."""

from __future__ import annotations

import json

import pytest

from sakura.examples import TEMPLATES
from sakura.jobs.build import build_in_process
from sakura.platform.errors import SakuraError
from sakura.platform.library import TemplateLibrary
from sakura.platform.spec import load_spec, parse_spec


def one_template(resolution: int | None = None, prompt: str | None = None):
    """The first example template (its prompt replaced: other content at the cost of one step)."""
    spec = load_spec(TEMPLATES)
    entry = spec.templates[0].model_dump(mode="json") | {"resolution": resolution}
    if prompt is not None:
        entry["prompt"] = prompt
    return parse_spec({"templates": [entry]}, source="test", base_dir=spec.base_dir)


def test_a_second_build_of_the_same_content_publishes_nothing(tmp_path):
    uri = f"file://{tmp_path}/lib"
    spec = one_template()
    first = build_in_process(spec, uri, model="reference", steps=1)
    assert [(r.status, r.version) for r in first] == [("published", 1)]
    again = build_in_process(spec, uri, model="reference", steps=1)
    assert [(r.status, r.version) for r in again] == [("unchanged", 1)]
    other_steps = build_in_process(spec, uri, model="reference", steps=2)  # other content: a new version
    assert [(r.status, r.version) for r in other_steps] == [("published", 2)]
    assert TemplateLibrary.open(uri).versions(spec.templates[0].id) == [1, 2]


def test_a_spec_the_model_cannot_build_is_refused_before_anything_is_written(tmp_path):
    with pytest.raises(SakuraError, match="resolution"):
        build_in_process(one_template(resolution=64), f"file://{tmp_path}/lib", model="reference")
    assert not (tmp_path / "lib").exists() or not any((tmp_path / "lib").rglob("*.json"))


def test_a_store_that_does_not_exist_is_a_typo_unless_create_says_otherwise(tmp_path, capsys):
    from sakura.jobs.build import main

    argv = ["--spec", str(TEMPLATES), "--model", "reference", "--store", f"file://{tmp_path}/sakura-dta"]
    assert main(argv) == 2
    assert "does not exist: check the path, or pass --create" in capsys.readouterr().err
    assert not (tmp_path / "sakura-dta").exists()


def test_a_build_for_another_model_publishes_but_leaves_latest_and_says_why(tmp_path, capsys):
    uri = f"file://{tmp_path}/lib"
    spec = one_template()
    build_in_process(spec, uri, model="reference", steps=1)
    [row] = build_in_process(spec, uri, model="tiny-sd3", steps=1)
    assert (row.status, row.version) == ("published", 2) and "latest stays at v1" in row.error
    assert "--allow-model-change" in capsys.readouterr().err
    assert TemplateLibrary.open(uri).resolve(spec.templates[0].id, "latest") == 1
    [moved] = build_in_process(spec, uri, model="tiny-flux", steps=1, allow_model_change=True)
    assert moved.error == "" and TemplateLibrary.open(uri).resolve(spec.templates[0].id, "latest") == 3


def test_build_json_summarises_each_template_as_an_object(tmp_path, capsys):
    from sakura.jobs.build import main

    uri = f"file://{tmp_path}/lib"
    # one step: the same rows at a quarter of the build (what is built is not what this test reads)
    build_in_process(load_spec(TEMPLATES), uri, model="reference", steps=1)  # so the job below has nothing to build
    assert main(["--spec", str(TEMPLATES), "--model", "reference", "--store", uri, "--steps", "1", "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert [(r["template_id"], r["status"], r["version"]) for r in rows] == [
        (e.id, "unchanged", 1) for e in sorted(load_spec(TEMPLATES).templates, key=lambda e: e.id)]


def test_a_template_whose_builder_died_gets_a_new_claim_until_its_tries_run_out(tmp_path):
    from sakura.jobs.build import BUILD_ATTEMPTS, _retry_after_lost_actor
    from sakura.jobs.builder import BuildJob, BuildSettings
    from sakura.platform.codec import default_levels
    from sakura.platform.library import ClaimAbandoned
    from tests.unit.platform.library_helpers import build_files

    library = TemplateLibrary.open(f"file://{tmp_path}/lib")
    settings = BuildSettings(model="reference", levels=tuple(default_levels().values()), steps=1)
    entry = one_template().templates[0]
    lost = build_files(library, entry.id)  # the claim and files of the build whose actor died
    job = BuildJob(entry, str(tmp_path), lost.version, "c" * 64)
    tries = {entry.id: 1}
    died = RuntimeError("the actor died unexpectedly")
    for attempt in range(2, BUILD_ATTEMPTS + 1):
        retry = _retry_after_lost_actor(library, settings, job, tries, died)
        assert isinstance(retry, BuildJob) and retry.version == job.version + 1 and tries[entry.id] == attempt
        with pytest.raises(ClaimAbandoned):  # the lost build can never publish
            library.publish(lost.model_copy(update={"version": job.version}))
        job = retry
    final = _retry_after_lost_actor(library, settings, job, tries, died)
    assert not isinstance(final, BuildJob) and final.status == "failed"
    assert f"died {BUILD_ATTEMPTS} times" in final.error and "the actor died unexpectedly" in final.error
    assert library.clean_orphans(entry.id) == [lost.version]  # the retries' claims never got files here
    assert library.versions(entry.id) == [] and library.claim_version(entry.id, "d" * 64) == job.version + 1


def test_the_build_says_when_it_crops_and_resizes_a_template_image(tmp_path, capsys):
    """A 600x400 template shrunk to the model's square without a word from the build surprised an
    operator; an image already at the model's size gets no note."""
    from PIL import Image

    from sakura.jobs.build import prepare
    from sakura.platform.models import load_model

    side = load_model("reference").resolution
    Image.new("RGB", (side, side), (90, 30, 10)).save(tmp_path / "square.png")
    entries = [{"id": "wide", "task": "try_on", "image": "skimage:coffee", "prompt": "p"},
               {"id": "square", "task": "try_on", "image": "square.png", "prompt": "p"}]
    spec = parse_spec({"templates": entries}, source="test", base_dir=tmp_path)
    prepare(spec, model="reference", store=f"file://{tmp_path}/lib", create=True)
    notes = capsys.readouterr().err.strip().splitlines()
    assert notes == [f"sakura build: wide: its image is 600x400; the model works at {side}x{side}, so it is "
                     "centre-cropped to 400x400 and resized"]


def test_a_build_leaves_a_rolled_back_latest_and_says_so_unless_told_to_move_it(tmp_path, capsys):
    uri = f"file://{tmp_path}/lib"
    specs = [one_template(prompt=f"edit {n}") for n in range(4)]  # four contents, one step each
    tid = specs[0].templates[0].id
    build_in_process(specs[0], uri, model="reference", steps=1)
    build_in_process(specs[1], uri, model="reference", steps=1)
    library = TemplateLibrary.open(uri)
    library.set_alias(tid, "latest", 1)  # the operator rolls back
    capsys.readouterr()
    (row,) = build_in_process(specs[2], uri, model="reference", steps=1)
    assert (row.status, row.version) == ("published", 3) and library.resolve(tid, "latest") == 1
    assert "latest stays at v1, where `sakura alias set` put it" in row.error
    assert "--move-latest" in capsys.readouterr().err
    (row,) = build_in_process(specs[3], uri, model="reference", steps=1, move_latest=True)
    assert row.error == "" and library.resolve(tid, "latest") == 4


def test_the_example_templates_build_for_any_model_at_its_own_resolution(tmp_path):
    """The evaluation builds the example spec for every model it measures (``measure_workload``):
    a resolution pinned in it refused every model but the one it named (bench-flux works at 64)."""
    from sakura.jobs.build import prepare
    from sakura.platform.models import load_model

    spec = load_spec(TEMPLATES)
    assert all(entry.resolution is None for entry in spec.templates)
    assert load_model("bench-flux").resolution == 64 != load_model("reference").resolution
    prepare(spec, model="bench-flux", store=f"file://{tmp_path}/lib", create=True)  # refuses before any write
