"""The dependency rule of docs/architecture.md: edge_client never imports ray, boto3, serve or
jobs (nor the evaluation and emulation built on it); platform never ray; no two source files
import each other. And the phone library stays light: importing it loads none of the cloud
side's heavy packages."""

from __future__ import annotations

import ast
import json
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
    assert public == {"device", "errors", "estimator", "fetch_loop", "late_download", "link", "planning", "policy",
                      "timeline"}, public




# -- The edge extra: the phone path imports only what `pip install sakura-kv[edge]` brings ----------

#: Run in a subprocess with every installed distribution outside the edge extra's closure made
#: not found, as on a phone that never installed it (importlib.util.find_spec answers None, an
#: import raises ModuleNotFoundError), so libraries that import an optional package only when it
#: is present (diffusers: scipy, transformers) behave as they would there. It imports the phone's
#: packages, runs ``sakura edit`` for real, loads the phone's model adapters, and reports every
#: top-level module it loaded.
_EDGE_ONLY = """
import importlib, json, pkgutil, sys
args = json.loads(sys.argv[1])
hidden = frozenset(args["hidden"])


class NotInstalled:
    def __init__(self, finder):
        self.finder = finder

    def find_spec(self, name, path=None, target=None):
        if name.partition(".")[0] in hidden:
            return None
        return self.finder.find_spec(name, path, target)

    def __getattr__(self, attr):
        return getattr(self.finder, attr)


at_start = set(sys.modules)
sys.meta_path[:] = [NotInstalled(finder) for finder in sys.meta_path]
import sakura
for package in ("sakura.edge_client", "sakura.platform", "sakura.emulation"):
    for mod in pkgutil.walk_packages(importlib.import_module(package).__path__, package + "."):
        importlib.import_module(mod.name)
import sakura.edit
from sakura.cli import main
from sakura.platform.errors import ImageError
from sakura.platform.images import load_image
from sakura.platform.models import load_model, load_named_model

code = main(args["edit"])
adapters = [type(load_named_model(name)).__name__ for name in args["named"]]
adapters += [type(load_model(folder, phone=True)).__name__ for folder in args["folders"]]
try:
    load_image("skimage:astronaut")
    sample = None
except ImageError as exc:
    sample = str(exc)
modules = {name: getattr(mod, "__file__", None) for name, mod in list(sys.modules.items())
           if "." not in name and name not in at_start}
print(json.dumps({"edit": code, "adapters": adapters, "sample": sample, "modules": modules}))
"""


def _canonical(name: str) -> str:
    from packaging.utils import canonicalize_name

    return canonicalize_name(name)


def edge_closure() -> set[str]:
    """sakura-kv and every distribution ``pip install sakura-kv[edge]`` brings, transitively, read
    from the installed metadata (markers evaluated here, extras followed); canonical names."""
    from importlib import metadata

    from packaging.requirements import Requirement

    done: dict[str, set[str]] = {}
    todo = [("sakura-kv", {"edge"})]
    while todo:
        name, extras = todo.pop()
        key = _canonical(name)
        if key in done and extras <= done[key]:
            continue
        done.setdefault(key, set()).update(extras)
        try:
            requirements = metadata.requires(name) or []
        except metadata.PackageNotFoundError:  # its marker keeps it off this platform
            continue
        for line in requirements:
            req = Requirement(line)
            if req.marker is None or any(req.marker.evaluate({"extra": extra}) for extra in extras | {""}):
                todo.append((req.name, set(req.extras)))
    return set(done)


def _not_in(closure: set[str]) -> set[str]:
    """Top-level import names that only distributions outside ``closure`` install."""
    from importlib import metadata

    return {name for name, dists in metadata.packages_distributions().items()
            if name not in sys.stdlib_module_names and not {_canonical(d) for d in dists} & closure}


def _outside(modules: dict[str, str | None], closure: set[str]) -> dict[str, str]:
    """Of the top-level ``modules`` (name: file), those neither the standard library's nor from a
    distribution in ``closure``, with their owners; a module with no file (made at run time) is no one's."""
    import sysconfig
    from importlib import metadata

    owners = metadata.packages_distributions()
    stdlib = Path(sysconfig.get_paths()["stdlib"]).resolve()
    outside = {}
    for name, file in modules.items():
        dists = {_canonical(d) for d in owners.get(name, ())}
        if name in sys.stdlib_module_names or name in sys.builtin_module_names or dists & closure:
            continue
        if dists:
            outside[name] = ", ".join(sorted(dists))
        elif file is not None:
            path = Path(file).resolve()
            if not path.is_relative_to(stdlib) or "site-packages" in path.parts:
                outside[name] = f"no distribution owns {file}"
    return outside


def _run_edge_only(hidden: set[str], edit: list[str], named: list[str], folders: list[str]) -> dict:
    args = {"hidden": sorted(hidden), "edit": edit, "named": named, "folders": folders}
    proc = subprocess.run([sys.executable, "-c", _EDGE_ONLY, json.dumps(args)], capture_output=True, text=True,
                          timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    report = json.loads(proc.stdout.strip().splitlines()[-1])
    assert report["edit"] == 0, proc.stderr[-3000:]
    return report


@pytest.fixture(scope="module")
def phone_pipelines(tmp_path_factory) -> list[str]:
    from sakura.platform.models.pipelines.tiny import export

    root = tmp_path_factory.mktemp("phone-pipelines")
    return [str(export(name, root / name)) for name in ("tiny-klein", "tiny-kontext", "tiny-sd3-pipeline")]


def test_the_edge_closure_follows_the_installed_metadata():
    closure = edge_closure()
    assert {"sakura-kv", "torch", "diffusers", "pillow", "zstandard", "numpy", "pydantic"} <= closure
    assert not closure & {"scikit-image", "imageio", "scipy", "transformers", "ray", "boto3", "pyarrow"}, closure


def test_the_installed_metadata_is_this_checkouts_pyproject():
    """A stale editable install would check the phone against an old edge extra."""
    import tomllib
    from importlib import metadata

    pyproject = SRC.parents[1] / "pyproject.toml"
    declared = tomllib.loads(pyproject.read_text())["project"]["optional-dependencies"]["edge"]
    installed = [r.split(";")[0].strip() for r in metadata.requires("sakura-kv") or () if 'extra == "edge"' in r]
    assert sorted(installed) == sorted(declared), "pip install -e . again: the metadata predates pyproject.toml"


def test_the_phone_path_imports_only_the_edge_extra(api, phone_pipelines, tmp_path):
    from sakura.platform.images import load_image, save_image

    photo, out = tmp_path / "photo.png", tmp_path / "edited.png"
    save_image(load_image("skimage:coffee").transpose(1, 0, 2), photo)  # not square: cropped and resized
    edit = ["edit", "--server", api.url, "--template", "portrait", "--image", str(photo), "--out", str(out),
            "--cache-dir", str(tmp_path / "cache")]
    closure = edge_closure()
    hidden = _not_in(closure)
    assert {"skimage", "imageio", "scipy", "transformers"} <= hidden  # what a dev install has beyond the extra
    report = _run_edge_only(hidden, edit, ["tiny-sd3", "tiny-flux"], phone_pipelines)
    assert load_image(str(out)).shape == (32, 32, 3)
    assert len(report["adapters"]) == 2 + len(phone_pipelines)
    assert {"sakura", "torch", "diffusers", "PIL", "zstandard"} <= set(report["modules"])  # the report sees imports
    assert not _outside(report["modules"], closure), _outside(report["modules"], closure)
    sample = report["sample"] or ""
    assert "bundled sample images need scikit-image" in sample and "cluster extra" in sample and "\n" not in sample


def _module_file(name: str, src: Path) -> Path | None:
    """The source file of module ``name`` (``sakura.a.b``) under ``src`` (the ``sakura`` folder)."""
    if not name.startswith("sakura"):
        return None
    base = src.parent.joinpath(*name.split("."))
    for path in (base.with_suffix(".py"), base / "__init__.py"):
        if path.is_file():
            return path
    return None


def _imported_files(path: Path, src: Path) -> set[Path]:
    """Our source files ``path`` imports, anywhere in it (inside functions and under
    ``TYPE_CHECKING`` too): ``from a.b import c`` names ``a/b/c.py`` if that is a module, else ``a/b``."""
    package = ".".join(path.relative_to(src.parent).with_suffix("").parts)
    if path.name == "__init__.py":
        package = package.rsplit(".", 1)[0] + ".__init__"
    found: set[Path] = set()
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                base = ".".join(package.split(".")[:-node.level] + ([base] if base else []))
            names = [f"{base}.{a.name}" if _module_file(f"{base}.{a.name}", src) else base for a in node.names]
        else:
            continue
        found |= {f for f in (_module_file(n, src) for n in names) if f is not None and f != path}
    return found


def _circle(src: Path) -> list[Path] | None:
    """A cycle in the import graph of the files under ``src``, or None."""
    graph = {path: _imported_files(path, src) for path in src.rglob("*.py")}
    state: dict[Path, int] = {}  # 1: on the current path, 2: done

    def visit(path: Path, trail: list[Path]) -> list[Path] | None:
        state[path] = 1
        for nxt in sorted(graph.get(path, ())):
            if state.get(nxt) == 1:
                return [*trail[trail.index(nxt):], nxt]
            if nxt not in state and (cycle := visit(nxt, [*trail, nxt])):
                return cycle
        state[path] = 2
        return None

    for start in sorted(graph):
        if start not in state and (cycle := visit(start, [start])):
            return cycle
    return None


def test_no_two_source_files_import_each_other_nor_any_longer_circle():
    """docs/architecture.md, "The dependency rule": the import graph of src/ has no cycle."""
    assert sum(len(_imported_files(p, SRC)) for p in SRC.rglob("*.py")) > 100  # the scan sees the imports
    cycle = _circle(SRC)
    assert cycle is None, "import circle: " + " -> ".join(str(p.relative_to(SRC)) for p in cycle or [])


def test_the_circle_check_finds_a_circle(tmp_path):
    """The check above can fail: two files that import each other are a circle, even when one
    import is inside a function and the other under ``TYPE_CHECKING``."""
    pkg = tmp_path / "sakura" / "toy"
    pkg.mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "a.py").write_text("def f():\n    from sakura.toy.b import g\n")
    (pkg / "b.py").write_text("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from sakura.toy import a\n")
    cycle = _circle(tmp_path / "sakura")
    assert cycle is not None and {p.name for p in cycle} == {"a.py", "b.py"}
