"""DESIGN.md's dependency rule: edge_client never imports ray, boto3, serve or jobs (nor the
evaluation and emulation built on it); platform never ray. And the phone library stays light:
importing it loads none of the cloud side's heavy packages."""

from __future__ import annotations

import ast
import pkgutil
import subprocess
import sys
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[2] / "src" / "sakura"

FORBIDDEN = {
    "edge_client": ("ray", "boto3", "botocore", "sakura.serve", "sakura.jobs", "sakura.evaluation", "sakura.emulation",
                    "transformers"),
    "platform": ("ray",),
    "evaluation": ("ray", "boto3", "botocore", "sakura.serve"),
}

_BLOCKER = """
import importlib, pkgutil, sys
blocked = {blocked!r}
class Block:
    def find_spec(self, name, path=None, target=None):
        if any(name == b or name.startswith(b + ".") for b in blocked):
            raise ImportError("blocked import: " + name)
sys.meta_path.insert(0, Block())
import sakura.{package} as pkg
for mod in pkgutil.walk_packages(pkg.__path__, "sakura.{package}."):
    importlib.import_module(mod.name)
print("imported", pkg.__name__)
"""


@pytest.mark.parametrize("package", sorted(FORBIDDEN))
def test_package_imports_with_forbidden_modules_blocked(package):
    code = _BLOCKER.format(blocked=FORBIDDEN[package], package=package)
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    assert f"imported sakura.{package}" in proc.stdout


def test_blocker_really_blocks():
    """The subprocess check can fail: importing a blocked module does raise."""
    code = _BLOCKER.format(blocked=("sakura.platform.kv",), package="platform")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert proc.returncode != 0 and "blocked import: sakura.platform.kv" in proc.stderr


@pytest.mark.parametrize("package", sorted(FORBIDDEN))
def test_no_forbidden_import_anywhere_in_the_source(package):
    """Catches imports inside functions too, which a plain import would not execute."""
    offenders = []
    for path in (SRC / package).rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
            names = []
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                names = [node.module]
            for name in names:
                if any(name == f or name.startswith(f + ".") for f in FORBIDDEN[package]):
                    offenders.append(f"{path.relative_to(SRC)}:{node.lineno} imports {name}")
    assert not offenders, offenders


#: What an app that links the phone library must never pay for at import (the issue's list, and
#: the text encoders' library the phone runs without).
HEAVY = ("ray", "boto3", "botocore", "pyarrow", "matplotlib", "fastapi", "starlette", "transformers")


def test_importing_the_phone_library_loads_no_heavy_package():
    proc = subprocess.run([sys.executable, "-X", "importtime", "-c", "import sakura.edge_client"],
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    loaded = {line.split("|")[2].strip().split(".")[0] for line in proc.stderr.splitlines()[1:] if line.count("|") == 2}
    assert "sakura" in loaded and "numpy" in loaded  # the parse reads what was imported
    assert not loaded & set(HEAVY), sorted(loaded & set(HEAVY))


def test_the_phone_library_has_a_small_public_face():
    import sakura.edge_client as edge

    assert len(edge.__all__) <= 15 and all(hasattr(edge, name) for name in edge.__all__)
    public = {m.name for m in pkgutil.iter_modules(edge.__path__) if not m.name.startswith("_")}
    assert public == {"device", "errors", "estimator", "link", "planning", "policy", "timeline"}, public

