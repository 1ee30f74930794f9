"""The Ray Serve application: ``sakura.serve.app:app`` (configured from the environment), or
``sakura.serve.app:build_app`` with ``args`` from a Serve config file.

Each replica builds its own FastAPI app (and so its own caches) when it starts; its metrics go
through Ray's (:mod:`sakura.serve.metrics`).
"""

from __future__ import annotations

from typing import Any

from ray import serve
from ray.serve.schema import LoggingConfig

from sakura.platform.store import store_environment
from sakura.serve.api import create_api
from sakura.serve.config import ServeConfig
from sakura.serve.metrics import RayRecorder, ServeMetrics

DEPLOYMENT_NAME = "sakura"
#: Replica logs as JSON lines; the service writes its own access line per request (its fields:
#: ``sakura.serve.access.ACCESS_FIELDS``), so Serve's plain one is off. The Serve configs in infra/ say the same.
LOGGING = LoggingConfig(encoding="JSON", enable_access_log=False)


def build_app(args: dict[str, Any] | None = None, *, num_replicas: int | str = 1,
              actor_options: dict[str, Any] | None = None) -> serve.Application:
    """An application for ``serve.run`` / ``serve deploy`` (``args`` override the environment;
    ``actor_options``: Ray's options for each replica, e.g. the resources that place it)."""
    config = ServeConfig.from_env(**(args or {})).model_dump()
    env = store_environment(config["store"])  # replicas on other nodes see only their node's environment

    def build_api():  # a zero-argument builder: Serve runs it on each replica
        return create_api(ServeConfig(**config), ServeMetrics(RayRecorder()))

    ingress = serve.ingress(build_api)
    replica_options = {**(actor_options or {}), **({"runtime_env": {"env_vars": env}} if env else {})}
    options: dict[str, Any] = {"ray_actor_options": replica_options} if replica_options else {}
    deployment = serve.deployment(name=DEPLOYMENT_NAME, num_replicas=num_replicas, max_ongoing_requests=64,
                                  logging_config=LOGGING, **options)(
        ingress(type("ShardService", (), {}))
    )
    return deployment.bind()


def __getattr__(name: str):  # `sakura.serve.app:app`, built on first access from the environment
    if name == "app":
        return build_app()
    raise AttributeError(name)
