"""The deployment files are valid: Serve's own schema accepts them and their import paths resolve."""

from __future__ import annotations

import importlib
from pathlib import Path

import yaml

INFRA = Path(__file__).resolve().parents[3] / "infra"


def _check_serve_config(config: dict) -> None:
    from ray.serve.schema import ServeDeploySchema

    if hasattr(ServeDeploySchema, "model_validate"):
        schema = ServeDeploySchema.model_validate(config)
    else:
        schema = ServeDeploySchema.parse_obj(config)
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


def test_rayjob_runs_the_build_module_on_a_mounted_spec_with_gpu_images():
    docs = list(yaml.safe_load_all((INFRA / "kuberay" / "rayjob-build.yaml").read_text()))
    config_map = next(d for d in docs if d["kind"] == "ConfigMap")
    job = next(d for d in docs if d["kind"] == "RayJob")
    assert "python -m sakura.jobs.build" in job["spec"]["entrypoint"]
    from sakura.jobs.build import parse_args
    from sakura.platform.spec import parse_spec

    args = parse_args(job["spec"]["entrypoint"].split()[3:])
    assert args.store.startswith("s3://") and args.num_gpus == 1
    spec = parse_spec(yaml.safe_load(config_map["data"][args.spec.name]), source="configmap", base_dir=Path("."))
    assert spec.templates
    cluster = job["spec"]["rayClusterSpec"]
    assert cluster["headGroupSpec"]["rayStartParams"]["num-cpus"] == "0"
    for pod in _pods(cluster):
        container = pod["containers"][0]
        mounts = {m["name"]: m["mountPath"] for m in container["volumeMounts"]}
        volumes = {v["name"]: v for v in pod["volumes"]}
        spec_map = config_map["metadata"]["name"]
        assert any(
            str(args.spec.parent) == path and volumes[name]["configMap"]["name"] == spec_map
            for name, path in mounts.items()
        ), "every node reads the spec (build actors load its images)"
        gpus = container["resources"]["limits"].get("nvidia.com/gpu")
        assert container["image"].endswith("-gpu") == bool(gpus), container["image"]


def test_rayservice_mounts_the_admin_token_wherever_the_app_may_be_built():
    doc = yaml.safe_load((INFRA / "kuberay" / "rayservice.yaml").read_text())
    serve = yaml.safe_load(doc["spec"]["serveConfigV2"])
    token_file = Path(serve["applications"][0]["runtime_env"]["env_vars"]["SAKURA_ADMIN_TOKEN_FILE"])
    cluster = doc["spec"]["rayClusterConfig"]
    assert cluster["headGroupSpec"]["rayStartParams"]["num-cpus"] == "0"
    for pod in _pods(cluster):
        mounts = [m["mountPath"] for m in pod["containers"][0]["volumeMounts"]]
        assert str(token_file.parent) in mounts


def test_the_image_installs_the_package_with_the_project_pins_and_bakes_no_spec():
    dockerfile = (INFRA / "Dockerfile").read_text()
    install = next(line for line in dockerfile.splitlines() if "pip install" in line)
    assert "-c constraints.txt" in install and " -e " not in install and "'.[cluster]'" in install
    assert "examples" not in dockerfile and "spec" not in install


def _pods(cluster: dict) -> list[dict]:
    return [cluster["headGroupSpec"]["template"]["spec"]] + [g["template"]["spec"] for g in cluster["workerGroupSpecs"]]
