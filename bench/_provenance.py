"""What a bench JSON records about how it was made: the commit, whether the tree was clean, the
date, the command, and a digest of the source it measured (so a figure can be traced to code)."""

from __future__ import annotations

import datetime as dt
import hashlib
import importlib.util
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def provenance(*modules: str) -> dict:
    """Provenance of a run measuring ``modules`` (dotted names; a package counts with every module in it)."""
    return {
        "commit": _git("rev-parse", "HEAD"),
        "dirty": bool(_git("status", "--porcelain", "--untracked-files=no")),
        "date": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        "command": " ".join(["python", *(_relative(a) for a in sys.argv)]),
        "modules": list(modules),
        "code_digest": code_digest(modules),
    }


#: What a part of a bench JSON (one map, one workload) records of the run that wrote it.
RUN_KEYS = ("commit", "dirty", "date", "command", "code_digest")


def run_stamp(*modules: str) -> dict:
    """The short provenance one part of a file carries, so ``--update`` can rerun some parts."""
    return _short(provenance(*modules))


def kept_parts(parts: list[dict], earlier: dict) -> None:
    """Parts kept from an earlier file by ``--update``: each keeps its own stamp, or takes the
    earlier file's (written before parts carried their own)."""
    stamp = _short(earlier.get("provenance", {}))
    for part in parts:
        part.setdefault("provenance", stamp)


def _short(full: dict) -> dict:
    return {k: v for k, v in full.items() if k in RUN_KEYS}


def code_digest(modules: tuple[str, ...] | list[str]) -> str:
    """sha256 over the source files of ``modules``, in path order, each with its path."""
    h = hashlib.sha256()
    for path in sorted({p for m in modules for p in _sources(m)}):
        h.update(str(path.relative_to(ROOT)).encode() + b"\0" + path.read_bytes())
    return h.hexdigest()


def _sources(module: str) -> list[Path]:
    spec = importlib.util.find_spec(module)
    if spec is None or spec.origin is None:
        raise ValueError(f"no module {module!r}")
    origin = Path(spec.origin)
    return sorted(origin.parent.rglob("*.py")) if origin.name == "__init__.py" else [origin]


def _git(*args: str) -> str:
    try:
        return subprocess.run(["git", *args], cwd=ROOT, capture_output=True, text=True, check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return ""


def _relative(arg: str) -> str:
    path = Path(arg)
    return str(path.resolve().relative_to(ROOT)) if path.is_absolute() and path.resolve().is_relative_to(ROOT) else arg
