"""The Ray Serve application: ``sakura.serve.app:app`` (configured from the environment), or
``sakura.serve.app:build_app`` with ``args`` from a Serve config file.

Each replica builds its own FastAPI app (and so its own caches and metrics) when it starts.
"""

from __future__ import annotations

from typing import Any

from ray import serve

from sakura.serve.api import create_api
from sakura.serve.config import ServeConfig

DEPLOYMENT_NAME = "sakura"


def build_app(args: dict[str, Any] | None = None, *, num_replicas: int | str = 1) -> serve.Application:
    """An application for ``serve.run`` / ``serve deploy`` (``args`` override the environment)."""
    config = ServeConfig.from_env(**(args or {})).model_dump()

    def build_api():  # a zero-argument builder: Serve runs it on each replica
        return create_api(ServeConfig(**config))

    ingress = serve.ingress(build_api)
    deployment = serve.deployment(name=DEPLOYMENT_NAME, num_replicas=num_replicas, max_ongoing_requests=64)(
        ingress(type("ShardService", (), {}))
    )
    return deployment.bind()


def __getattr__(name: str):  # `sakura.serve.app:app`, built on first access from the environment
    if name == "app":
        return build_app()
    raise AttributeError(name)
