"""What a bench JSON records about how it was made: the commit, whether the tree was clean, the
date, the command, and a digest of the source it measured (so a figure can be traced to code);
and whether that code has changed since (:func:`changed_since`), which the docs' generated tables
say under every figure measured on older code."""

from __future__ import annotations

import ast
import datetime as dt
import hashlib
import importlib.util
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def provenance(*modules: str) -> dict:
    """Provenance of a run measuring ``modules`` (dotted names; a package counts with every module in it)."""
    return {
        "commit": _git("rev-parse", "HEAD"),
        "dirty": dirty(),
        "date": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        "command": " ".join(["python", *(_relative(a) for a in sys.argv)]),
        "modules": list(modules),
        "code_digest": code_digest(modules),
        "module_digests": module_digests(modules),
    }


def dirty() -> bool:
    """Whether the tree has uncommitted changes to tracked files: code a run's commit does not hold
    (other benches' outputs being rewritten beside it, ``bench/out``, do not count)."""
    return bool(_git("status", "--porcelain", "--untracked-files=no", "--", ".", ":(exclude)bench/out"))


#: What a part of a bench JSON (one map, one workload) records of the run that wrote it.
RUN_KEYS = ("commit", "dirty", "date", "command", "code_digest", "module_digests")


def run_stamp(*modules: str) -> dict:
    """The short provenance one part of a file carries, so ``--update`` can rerun some parts."""
    return _short(provenance(*modules))


def kept_parts(parts: list[dict], earlier: dict) -> None:
    """Parts kept from an earlier file by ``--update``: each keeps its own stamp, or takes the
    earlier file's (written before parts carried their own)."""
    stamp = _short(earlier.get("provenance", {}))
    for part in parts:
        part.setdefault("provenance", stamp)


def run_stamps(data: dict) -> list[dict]:
    """The stamp of each part of a bench JSON (regime maps, e2e workloads), else the file's."""
    parts = [entry for profiles in data.get("maps", {}).values() for entry in profiles.values()]
    parts += [w for w in data.get("workloads", {}).values() if isinstance(w, dict)]
    stamped = [part["provenance"] for part in parts if "provenance" in part]
    return stamped or [data.get("provenance", {})]


def _short(full: dict) -> dict:
    return {k: v for k, v in full.items() if k in RUN_KEYS}


def code_digest(modules: tuple[str, ...] | list[str]) -> str:
    """sha256 over the source files of ``modules``, in path order, each with its path."""
    h = hashlib.sha256()
    for path in sorted({p for m in modules for p in _sources(m)}):
        h.update(str(path.relative_to(ROOT)).encode() + b"\0" + path.read_bytes())
    return h.hexdigest()


def module_digests(modules: list[str] | tuple[str, ...]) -> dict[str, str]:
    """Per module, sha256 over its code without comments, docstrings or layout: what
    :func:`changed_since` compares, so a reworded docstring does not make a figure stale."""
    return {m: _code_digest({str(p.relative_to(ROOT)): p.read_text() for p in _sources(m)}) for m in modules}


def changed_since(stamp: dict, modules: list[str] | tuple[str, ...]) -> list[str]:
    """Of ``modules``, those whose code differs from what the run ``stamp`` (a provenance or a
    part's stamp) measured: none where its source digest still matches; else those whose code
    digest differs from the one it recorded; all of them where it recorded none."""
    if not modules or stamp.get("code_digest") == code_digest(modules):
        return []
    recorded, now = stamp.get("module_digests", {}), module_digests(modules)
    return [m for m in modules if recorded.get(m) != now[m]]


def backfill(stamp: dict, modules: list[str]) -> None:
    """Add ``module_digests`` to a stamp written before runs recorded them, from its commit's code
    (git), where that is provably the code it measured: its source digest equals the commit's."""
    commit = stamp.get("commit")
    if "module_digests" in stamp or not commit or not modules:
        return
    then = {m: _files_at(m, commit) for m in modules}
    if stamp.get("code_digest") == _source_digest({p: t for files in then.values() for p, t in files.items()}):
        stamp["module_digests"] = {m: _code_digest(files) for m, files in then.items()}


def _files_at(module: str, commit: str) -> dict[str, str]:
    """The source files of ``module`` at ``commit``: path -> text."""
    top = _sources(module)
    single = len(top) == 1 and top[0].name != "__init__.py"
    prefix = str((top[0] if single else top[0].parent).relative_to(ROOT))
    paths = [p for p in _git("ls-tree", "-r", "--name-only", commit, "--", prefix).splitlines() if p.endswith(".py")]
    return {p: _git("show", f"{commit}:{p}", strip=False) for p in paths}


def _source_digest(files: dict[str, str]) -> str:
    """:func:`code_digest` of these files (path -> text)."""
    return _digest(files, lambda text: text)


def _code_digest(files: dict[str, str]) -> str:
    return _digest(files, _without_docstrings)


def _digest(files: dict[str, str], content: Callable[[str], str]) -> str:
    h = hashlib.sha256()
    for path in sorted(files, key=Path):
        h.update(path.encode() + b"\0" + content(files[path]).encode())
    return h.hexdigest()


def _without_docstrings(text: str) -> str:
    """``ast.dump`` of the parsed source with every docstring removed: its code, nothing else."""
    tree = ast.parse(text)
    for node in ast.walk(tree):
        body = getattr(node, "body", None)
        if isinstance(body, list) and body and isinstance(body[0], ast.Expr) \
                and isinstance(body[0].value, ast.Constant) and isinstance(body[0].value.value, str):
            node.body = body[1:] or [ast.Pass()]  # type: ignore[attr-defined]
    return ast.dump(tree)


def _sources(module: str) -> list[Path]:
    spec = importlib.util.find_spec(module)
    if spec is None or spec.origin is None:
        raise ValueError(f"no module {module!r}")
    origin = Path(spec.origin)
    return sorted(origin.parent.rglob("*.py")) if origin.name == "__init__.py" else [origin]


def _git(*args: str, strip: bool = True) -> str:
    try:
        out = subprocess.run(["git", *args], cwd=ROOT, capture_output=True, text=True, check=True).stdout
    except (OSError, subprocess.CalledProcessError):
        return ""
    return out.strip() if strip else out


def _relative(arg: str) -> str:
    path = Path(arg)
    return str(path.resolve().relative_to(ROOT)) if path.is_absolute() and path.resolve().is_relative_to(ROOT) else arg


def _backfill_files(paths: list[Path]) -> None:
    """``python bench/_provenance.py bench/out/*.json``: :func:`backfill` every run stamp of each
    file (the file's provenance and its parts'), rewriting the file where one gained digests."""
    import json

    for path in paths:
        data = json.loads(path.read_text())
        full = data.get("provenance")
        if not full:
            continue
        stamps = [full, *(st for st in run_stamps(data) if st is not full)]
        before = sum("module_digests" in st for st in stamps)
        for stamp in stamps:
            backfill(stamp, full.get("modules", []))
        if sum("module_digests" in st for st in stamps) > before:
            text = path.read_text()  # written again as it was: its indent and final newline kept
            second = text.split("\n", 2)[1]
            indent = len(second) - len(second.lstrip(" ")) or None
            path.write_text(json.dumps(data, indent=indent) + ("\n" if text.endswith("\n") else ""))
            print(f"{path}: {sum('module_digests' in st for st in stamps)} of {len(stamps)} runs")


if __name__ == "__main__":
    _backfill_files([Path(a) for a in sys.argv[1:]])
