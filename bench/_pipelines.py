"""Tiny pipeline folders by name for the benches: ``--model tiny-klein`` exports the folder first
(``sakura models export``), so a bench's command is all it takes to rerun it."""

from __future__ import annotations

import atexit
import shutil
import tempfile
from pathlib import Path

from sakura.platform.models.pipelines.tiny import TINY_PIPELINES, export


def loadable(name: str) -> str:
    """``name`` as ``load_model`` takes it: a tiny pipeline's name becomes a folder it is exported to
    (removed when the process ends); anything else is returned as it is."""
    if name not in TINY_PIPELINES:
        return name
    workdir = Path(tempfile.mkdtemp(prefix="sakura-bench-pipeline-"))
    atexit.register(shutil.rmtree, workdir, ignore_errors=True)
    return str(export(name, workdir / name))
