"""The build's side of publishing: a rerun completes a publish that a crash cut short (without
undoing an operator's rollback), and level files are never overwritten. No Ray: plan() and the
builder run in-process, with failures injected at exact points."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from sakura.jobs.build import Row, plan
from sakura.jobs.builder import BuildJob, BuildSettings, TemplateBuilder, content_hash
from sakura.platform import layout
from sakura.platform.codec import default_levels
from sakura.platform.library import TemplateLibrary
from sakura.platform.spec import parse_spec
from sakura.platform.store import AlreadyExists, open_store
from tests.helpers import make_builder
from tests.unit.platform.library_helpers import Faulty, build_files, level_bytes, put_version, synthetic_manifest

FINGERPRINT = "f" * 64


class Crash(Exception):
    """The driver dies here."""


@pytest.fixture(params=["file", "s3"])
def uri(request, tmp_path):
    return f"file://{tmp_path}/lib" if request.param == "file" else request.getfixturevalue("s3_uri")


def _spec_and_settings(uri: str):
    spec = parse_spec({"templates": [{"id": "tpl-new", "task": "try_on", "image": "skimage:brick", "prompt": "p"}]},
                      source="test", base_dir=Path("."))
    return spec, BuildSettings(model="tiny-flux", levels=tuple(default_levels().values()), steps=1, store=uri)


def _write_level(library: TemplateLibrary, job: BuildJob) -> None:
    key = layout.level_key(job.entry.id, job.version, "compact")
    library.store.put_if_absent(key, level_bytes(job.entry.id, job.version))


def test_a_rerun_completes_a_publish_cut_short_after_the_manifest(uri):
    spec, settings = _spec_and_settings(uri)
    library = TemplateLibrary(open_store(uri))
    rows, (job,) = plan(spec, settings, library, FINGERPRINT)
    _write_level(library, job)

    def die_after_manifest(op, key):
        if key.endswith("manifest.json"):
            raise Crash

    with pytest.raises(Crash):  # the driver dies between the manifest and `latest`
        TemplateLibrary(Faulty(open_store(uri), after=die_after_manifest)).publish(
            synthetic_manifest("tpl-new", job.version, job.content_hash))
    assert library.versions("tpl-new") == [job.version] and "latest" not in library.aliases("tpl-new")

    assert plan(spec, settings, library, FINGERPRINT) == ([Row("tpl-new", "completed", job.version)], [])
    assert library.resolve("tpl-new", "latest") == job.version
    assert plan(spec, settings, library, FINGERPRINT) == ([Row("tpl-new", "unchanged", job.version)], [])


def test_a_rerun_leaves_an_operators_rollback_alone(uri):
    spec, settings = _spec_and_settings(uri)
    library = TemplateLibrary(open_store(uri))
    put_version(library, "tpl-new", "0" * 64)  # v1, from other inputs
    _, (job,) = plan(spec, settings, library, FINGERPRINT)
    _write_level(library, job)
    library.publish(synthetic_manifest("tpl-new", job.version, job.content_hash))  # v2, complete
    library.set_alias("tpl-new", "latest", 1)  # the operator rolls back
    assert plan(spec, settings, library, FINGERPRINT) == ([Row("tpl-new", "unchanged", job.version)], [])
    assert library.resolve("tpl-new", "latest") == 1


def test_the_builder_never_overwrites_a_level_file(tmp_path):
    """Two builds writing one version number (today's version reuse) must not corrupt it."""
    uri = f"file://{tmp_path}/lib"
    library = TemplateLibrary(open_store(uri))
    manifest = build_files(library, "tpl")  # another build's file is at versions/1/compact.parquet
    builder = make_builder()
    builder = TemplateBuilder(replace(builder.settings, store=uri), adapter=builder.adapter)
    spec = parse_spec({"templates": [{"id": "tpl", "task": "try_on", "image": "skimage:brick", "prompt": "p"}]},
                      source="test", base_dir=Path("."))
    digest = content_hash(spec.templates[0], spec.base_dir, builder.adapter.fingerprint, builder.settings)
    with pytest.raises(AlreadyExists):
        builder.build(BuildJob(spec.templates[0], ".", manifest.version, digest))
    assert library.store.get(manifest.levels[0].key) == level_bytes("tpl", manifest.version)
