"""The example templates and bandwidth traces SAKURA ships: the defaults of ``sakura demo`` and of
the evaluation, and the specs the docs build (``examples/`` in a checkout links here)."""

from __future__ import annotations

from importlib.resources import files
from pathlib import Path

__all__ = ["TEMPLATES", "PIPELINE_TEMPLATES", "example_path", "trace_path"]


def example_path(name: str) -> Path:
    """A file shipped in this package (installed as a folder, as setuptools installs it)."""
    return Path(str(files(__name__) / name))


def trace_path(name: str) -> Path:
    """A bundled copy of a real trace of ``../shared/traces`` (sources in ``traces/README.md``)."""
    return example_path("traces") / name


#: One template per editing task on images scikit-image ships, for the reference model.
TEMPLATES = example_path("templates.yaml")
#: Templates for real diffusers pipelines (FLUX.2 [klein] and the like).
PIPELINE_TEMPLATES = example_path("pipeline-templates.yaml")
