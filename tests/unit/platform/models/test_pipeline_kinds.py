"""The pipeline classes SAKURA runs are one table of names (:data:`PIPELINE_KINDS`): reading it
imports none of the loaders (nor the per-step adapters only they import), and a class is loaded
through the ``module:function`` its row names."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from sakura.platform.models.pipelines import PipelineError, PipelineKind, load_pipeline, register_pipeline
from sakura.platform.models.pipelines.folder import INDEX, PIPELINE_KINDS


def test_reading_the_table_imports_no_loader():
    code = ("import sys; from sakura.platform.models.pipelines import supported_pipelines; "
            "print(supported_pipelines()); "
            "print(sorted(m for m in sys.modules if m.startswith('sakura.platform.models.pipelines.')))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True).stdout
    names, loaded = (eval(line) for line in out.strip().splitlines())  # noqa: S307 (our own print)
    assert names == sorted(PIPELINE_KINDS) and "Flux2KleinKVPipeline" in names
    prefix = "sakura.platform.models.pipelines."
    assert not {prefix + m for m in ("kinds", "kontext", "sd3", "per_step", "settings")} & set(loaded), loaded


def test_every_row_names_a_loader_that_exists():
    import importlib

    for kind in PIPELINE_KINDS.values():
        module, _, name = kind.loader.partition(":")
        assert callable(getattr(importlib.import_module(module), name)), kind.class_name


def test_a_registered_class_is_loaded_through_its_named_loader(tmp_path, monkeypatch):
    monkeypatch.setitem(PIPELINE_KINDS, "ToyPipeline", PIPELINE_KINDS.get("ToyPipeline"))  # restored after
    register_pipeline(PipelineKind("ToyPipeline", phone=(), cloud=(), loader="json:dumps"))
    (tmp_path / INDEX).write_text(json.dumps({"_class_name": "ToyPipeline"}))
    with pytest.raises(TypeError):  # json.dumps was called with (folder, components, dtype)
        load_pipeline(tmp_path)
    (tmp_path / INDEX).write_text(json.dumps({"_class_name": "NoSuchPipeline"}))
    with pytest.raises(PipelineError, match="unsupported pipeline 'NoSuchPipeline'"):
        load_pipeline(tmp_path)


def test_the_model_registry_names_its_builders_and_imports_none():
    """Named models are one table too: a pipeline-built model's builder is a ``module:function``
    imported when the model is built, not when the registry is read."""
    code = ("import sys; from sakura.platform.models import named_models; "
            "from sakura.platform.models.registry import model_catalogue; "
            "names = sorted(named_models()); model_catalogue(); "
            "print(names); print(sorted(m for m in sys.modules if m.startswith('sakura.platform.models.pipelines.')))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True).stdout
    names, loaded = (eval(line) for line in out.strip().splitlines())  # noqa: S307 (our own print)
    assert "klein-4b-shape" in names
    prefix = "sakura.platform.models.pipelines."
    assert not {prefix + m for m in ("klein", "klein_shapes", "kinds", "kontext", "sd3")} & set(loaded), loaded
