"""The deployment files are valid: Serve's own schema accepts them and their import paths resolve."""

from __future__ import annotations

import importlib
from pathlib import Path

import yaml

INFRA = Path(__file__).resolve().parents[3] / "infra"


def _check_serve_config(config: dict) -> None:
    from ray.serve.schema import ServeDeploySchema

    schema = ServeDeploySchema.model_validate(config) if hasattr(ServeDeploySchema, "model_validate") else ServeDeploySchema.parse_obj(config)
    for app in schema.applications:
        module, attr = app.import_path.split(":")
        builder = getattr(importlib.import_module(module), attr)
        assert callable(builder)
        from sakura.serve.config import ServeConfig

        ServeConfig(**{**app.args, "disk_cache_dir": None})  # every arg is a known setting


def test_serve_config_file():
    _check_serve_config(yaml.safe_load((INFRA / "serve-config.yaml").read_text()))


def test_rayservice_embeds_a_valid_serve_config():
    doc = yaml.safe_load((INFRA / "kuberay" / "rayservice.yaml").read_text())
    assert doc["kind"] == "RayService"
    _check_serve_config(yaml.safe_load(doc["spec"]["serveConfigV2"]))


def test_rayjob_runs_the_build_module():
    doc = yaml.safe_load((INFRA / "kuberay" / "rayjob-build.yaml").read_text())
    assert doc["kind"] == "RayJob" and "python -m sakura.jobs.build" in doc["spec"]["entrypoint"]
    from sakura.jobs.build import parse_args

    argv = doc["spec"]["entrypoint"].split()[3:]
    args = parse_args(argv)
    assert args.store.startswith("s3://") and args.num_gpus == 1
