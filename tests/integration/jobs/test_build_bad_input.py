"""Bad build input is refused by the preflight (before any claim is written), and an error that only a
worker can find (a damaged image) reads as one line naming the file, not as a stray traceback line."""

from __future__ import annotations

from pathlib import Path

import pytest

from sakura.jobs import build as build_job
from tests.integration.jobs.test_build import write_spec
from tests.unit.platform.test_images import write_huge_png


@pytest.fixture
def no_workers(monkeypatch) -> None:
    """Bad input must stop in the preflight: reaching the Ray workers is a failure (and needs no Ray)."""

    def reached(*_args, **_kwargs):
        raise AssertionError("the build got past its preflight")

    monkeypatch.setattr(build_job, "run_jobs", reached)


def _build(spec: Path, store: str) -> int:
    return build_job.main(["--spec", str(spec), "--model", "tiny-flux", "--store", store, "--create"])


def _written(root: Path) -> list[str]:
    return sorted(
        str(p.relative_to(root)) for p in root.rglob("*") if p.is_file() and p.suffix not in (".png", ".yaml")
    )


@pytest.mark.parametrize("store", ["file://", "file://localhost"])  # file:/// too: unit-tested, never built into
def test_a_store_that_names_no_directory_is_refused(store, tmp_path, monkeypatch, no_workers, capsys):
    spec = write_spec(tmp_path, {"tpl-a": "skimage:brick"})
    monkeypatch.chdir(tmp_path)
    assert _build(spec, store) == 2
    err = capsys.readouterr().err
    assert f"store {store} is not usable" in err and "Traceback" not in err
    assert _written(tmp_path) == []


@pytest.mark.parametrize("image", ["huge.png", "notes.png"])
def test_a_bad_image_is_refused_before_any_claim(image, tmp_path, no_workers, request, capsys):
    spec = write_spec(tmp_path, {"tpl-a": "skimage:brick", "tpl-b": "skimage:coffee"})
    write_huge_png(tmp_path / "huge.png")
    (tmp_path / "notes.png").write_text("a text file with an image's name\n")
    spec.write_text(spec.read_text().replace("image: tpl-b.png", f"image: {image}"))
    decodes = request.getfixturevalue("decodes")  # from here on, no image may be decoded
    assert _build(spec, f"file://{tmp_path}/lib") == 2
    err = capsys.readouterr().err
    assert "template 'tpl-b'" in err and str(tmp_path / image) in err and "Traceback" not in err
    assert ("12000x12000" in err) if image == "huge.png" else ("not an image" in err)
    assert not (tmp_path / "lib").exists()
    assert decodes == []


def test_deeply_nested_yaml_is_refused(tmp_path, no_workers, capsys):
    spec = write_spec(tmp_path, {"tpl-a": "skimage:brick"})
    spec.write_text(spec.read_text() + "extra: " + "[" * 10000 + "]" * 10000 + "\n")
    assert _build(spec, f"file://{tmp_path}/lib") == 2
    assert "nested deeper than" in capsys.readouterr().err
    assert not (tmp_path / "lib").exists()


def test_a_worker_error_reads_as_the_typed_errors_message(tmp_path, ray_cluster):
    """A file that stops being an image after the preflight fails in the worker, through Ray."""
    import ray

    from sakura.jobs.builder import BuildJob, BuildSettings, TemplateBuilder
    from sakura.platform.codec import default_levels
    from sakura.platform.spec import load_spec

    spec_path = write_spec(tmp_path, {"tpl-a": "skimage:brick"})
    entry = load_spec(spec_path).templates[0]
    (tmp_path / "tpl-a.png").write_text("replaced by a text file\nwith several lines\n")
    settings = BuildSettings(model="tiny-flux", levels=tuple(default_levels().values()), steps=4, calibration=1,
                             store=f"file://{tmp_path}/lib")
    actor = ray.remote(TemplateBuilder).options(num_cpus=1).remote(settings, threads=1)
    try:
        with pytest.raises(Exception) as info:
            ray.get(actor.build.remote(BuildJob(entry, str(tmp_path), 1, "0" * 64)), timeout=120)
    finally:
        ray.kill(actor)
    line = build_job._first_line(info.value)
    assert line == f"{tmp_path / 'tpl-a.png'}: not an image in a format Pillow reads (PNG, JPEG, WebP...)"


def test_untyped_errors_keep_their_type_and_first_line():
    assert build_job._first_line(ValueError("first\nsecond")) == "ValueError: first"
    assert build_job._first_line(RuntimeError()) == "RuntimeError"
