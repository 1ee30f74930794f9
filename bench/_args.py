"""What every bench's command line shares: the ``sakura`` commands' help layout (the module
docstring as written, each option's default shown) and ``--json``, where its figures go."""

from __future__ import annotations

import argparse
from pathlib import Path

from sakura._argparse import HelpFormatter

__all__ = ["bench_parser"]


def bench_parser(description: str | None, *, json_default: Path | None = None) -> argparse.ArgumentParser:
    """A bench's parser with ``--json`` (a path; ``json_default`` when the bench always writes)."""
    p = argparse.ArgumentParser(description=description, formatter_class=HelpFormatter)
    p.add_argument("--json", type=Path, default=json_default, help="write the figures, with their provenance, here")
    return p
