"""Service configuration, from the environment (``serve deploy`` and KubeRay pass it that way)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field


class ServeConfig(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    store: str = "file://./sakura-data"
    mode: Literal["proxy", "redirect"] = "proxy"
    #: In redirect mode, send clients here instead of to presigned S3 URLs (a CDN in front of the store).
    cdn_base_url: str | None = None
    presign_ttl_s: int = Field(default=300, ge=10, le=7 * 24 * 3600)
    memory_cache_bytes: int = Field(default=256 << 20, ge=0)
    disk_cache_dir: str | None = None
    disk_cache_bytes: int = Field(default=2 << 30, ge=0)
    manifest_cache_entries: int = Field(default=1024, ge=1)
    alias_ttl_s: float = Field(default=2.0, ge=0.0)
    retry_after_s: int = Field(default=2, ge=1)
    admin_token: str | None = None
    api_keys: tuple[str, ...] = ()

    @classmethod
    def from_env(cls, **overrides: object) -> "ServeConfig":
        env = os.environ
        values: dict[str, object] = {
            "store": env.get("SAKURA_STORE", cls.model_fields["store"].default),
            "mode": env.get("SAKURA_MODE", "proxy"),
            "cdn_base_url": env.get("SAKURA_CDN_BASE_URL") or None,
            "disk_cache_dir": env.get("SAKURA_DISK_CACHE_DIR") or None,
            "admin_token": _secret("SAKURA_ADMIN_TOKEN"),
            "api_keys": tuple(k for k in (_secret("SAKURA_API_KEYS") or "").replace("\n", ",").split(",") if k.strip()),
        }
        for name, key in (("memory_cache_bytes", "SAKURA_MEMORY_CACHE_BYTES"), ("disk_cache_bytes", "SAKURA_DISK_CACHE_BYTES")):
            if env.get(key):
                values[name] = int(env[key])
        values.update(overrides)
        return cls(**values)


def _secret(name: str) -> str | None:
    """A secret from ``NAME`` or from the file ``NAME_FILE`` names (e.g. a mounted Kubernetes secret)."""
    if os.environ.get(name):
        return os.environ[name].strip()
    path = os.environ.get(f"{name}_FILE")
    return Path(path).read_text().strip() if path else None
