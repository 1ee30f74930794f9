"""Test helpers shared by unit and integration tests (and the serve benchmark)."""

from __future__ import annotations

import importlib
import sys
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from types import ModuleType

from sakura.jobs.builder import BuildJob, BuildSettings, TemplateBuilder, content_hash
from sakura.platform.codec import default_levels
from sakura.platform.library import TemplateLibrary
from sakura.platform.spec import parse_spec
from sakura.platform.store import open_store

#: A subprocess preamble that makes ``transformers`` look not installed (diffusers imports it
#: whenever it is, so only this shows what a phone, which never installs it, can run).
WITHOUT_TRANSFORMERS = """
import importlib.util, sys
_find_spec = importlib.util.find_spec
importlib.util.find_spec = lambda name, *a: None if name.split(".")[0] == "transformers" else _find_spec(name, *a)
class Absent:
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] == "transformers":
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)
sys.meta_path.insert(0, Absent())
"""


def make_builder(model: str = "tiny-sd3", steps: int = 1) -> TemplateBuilder:
    return TemplateBuilder(
        BuildSettings(model=model, levels=tuple(default_levels().values()), steps=steps, calibration=1)
    )


def publish(library: TemplateLibrary, builder: TemplateBuilder, store_uri: str, template_id: str, image: str) -> int:
    """Build one template in-process (no Ray) and publish it as the next version."""
    spec = parse_spec({"templates": [{"id": template_id, "task": "try_on", "image": image, "prompt": "p"}]},
                      source="test", base_dir=Path("."))
    entry = spec.templates[0]
    builder = TemplateBuilder(replace(builder.settings, store=store_uri), adapter=builder.adapter)
    digest = content_hash(entry, spec.base_dir, builder.adapter.fingerprint, builder.settings)
    version = library.claim_version(template_id, digest)
    library.publish(builder.build(BuildJob(entry, ".", version, digest)).manifest)
    return version


def make_library(
    uri: str, images: list[str], *, template_id: str = "tpl", model: str = "tiny-sd3", steps: int = 1
) -> TemplateLibrary:
    """A library with one version of ``template_id`` per image."""
    library = TemplateLibrary(open_store(uri))
    builder = make_builder(model, steps)
    for image in images:
        publish(library, builder, uri, template_id, image)
    return library


def exact_edit(model, template_image: str, photo: str, *, seed: int = 0, steps: int = 4):
    """The edit of ``photo`` with the exact KV of a template built by :func:`publish` (task
    try_on, prompt "p"), computed on the spot: no codec, no network."""
    from sakura.platform.images import fit_image, load_image
    from sakura.platform.models import EditRequest, Schedule
    from sakura.platform.template_image import template_for

    res = model.resolution
    template = template_for(model, fit_image(load_image(template_image), res), "p", "try_on")[0]
    schedule = Schedule(steps=steps)
    kv = model.capture(template, EditRequest(fit_image(load_image("skimage:camera"), res)), schedule).kv
    return model.edit_image(kv, "p", EditRequest(fit_image(load_image(photo), res), seed=seed), schedule)


DASHBOARD = Path(__file__).resolve().parents[1] / "infra" / "grafana" / "sakura-serve.json"
_PROMQL_WORDS = {"by", "without", "on", "ignoring", "group_left", "group_right", "and", "or", "unless", "bool",
                 "offset"}


def dashboard_queries(path: Path = DASHBOARD) -> list[str]:
    """Every PromQL expression of a Grafana dashboard: its panels' targets and its query variables."""
    import json

    dashboard = json.loads(path.read_text())
    exprs = [t["expr"] for panel in dashboard["panels"] for t in panel.get("targets", [])]
    for variable in dashboard.get("templating", {}).get("list", []):
        if variable.get("type") == "query":
            query = variable["query"]
            exprs.append(query["query"] if isinstance(query, dict) else query)
    return exprs


def promql_metric_names(expr: str) -> set[str]:
    """The metric names an expression reads: identifiers left once strings, label matchers,
    ranges and grouping lists are removed, other than functions (followed by ``(``) and keywords."""
    import re

    expr = re.sub(r'"(?:[^"\\]|\\.)*"', "", expr)
    expr = re.sub(r"\{[^}]*\}|\[[^\]]*\]", " ", expr)
    expr = re.sub(r"\b(by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)", " ", expr)
    expr = re.sub(r"\blabel_values\s*\(\s*([a-zA-Z_:][\w:]*)[^)]*\)", r" \1 ", expr)
    names = re.findall(r"(?<![\w.$:])([a-zA-Z_:][\w:]*)(?![\w:])(?!\s*\()", expr)
    return {n for n in names if n not in _PROMQL_WORDS}


def bench_module(name: str) -> Iterator[ModuleType]:
    """A module of ``bench/`` (imported as the benches import each other), forgotten afterwards: a
    fixture's body (``yield from bench_module(name)``)."""
    bench = str(Path(__file__).resolve().parents[1] / "bench")
    sys.path.insert(0, bench)
    try:
        yield importlib.import_module(name)
    finally:
        sys.path.remove(bench)
        sys.modules.pop(name, None)
