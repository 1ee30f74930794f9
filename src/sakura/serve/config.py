"""Service configuration: every field from a ``SAKURA_<FIELD>`` environment variable (``serve
deploy`` and KubeRay pass it that way), overridden by a Serve config's ``args``.

Byte sizes take units (``SAKURA_MEMORY_CACHE_BYTES=512MiB``, ``2GB``, or plain bytes). The admin
token and the API keys (comma- or newline-separated) may instead come from a file that
``SAKURA_ADMIN_TOKEN_FILE`` / ``SAKURA_API_KEYS_FILE`` names (a mounted Kubernetes secret).
A value that does not parse is a :class:`ConfigError` naming the variable.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import ByteSize, Field, ValidationError, field_validator, model_validator
from pydantic_settings import BaseSettings, NoDecode, SettingsConfigDict

from sakura.platform.errors import SakuraError

ENV_PREFIX = "SAKURA_"
#: Fields that may be read from the file ``SAKURA_<FIELD>_FILE`` names.
SECRETS = ("admin_token", "api_keys")


class ConfigError(SakuraError, ValueError):
    code = "invalid_config"


class ServeConfig(BaseSettings):
    model_config = SettingsConfigDict(env_prefix=ENV_PREFIX, extra="forbid", frozen=True)

    store: str = "file://./sakura-data"
    mode: Literal["proxy", "redirect"] = "proxy"
    #: In redirect mode, send clients here instead of to presigned S3 URLs (a CDN in front of the store).
    cdn_base_url: str | None = None
    presign_ttl_s: int = Field(default=300, ge=10, le=7 * 24 * 3600)
    memory_cache_bytes: ByteSize = Field(default=ByteSize(256 << 20), ge=0)
    disk_cache_dir: str | None = None
    disk_cache_bytes: ByteSize = Field(default=ByteSize(2 << 30), ge=0)
    manifest_cache_entries: int = Field(default=1024, ge=1)
    alias_ttl_s: float = Field(default=2.0, ge=0.0)
    retry_after_s: int = Field(default=2, ge=1)
    #: Secrets: never in the settings' repr (a log line or a traceback that shows them).
    admin_token: str | None = Field(default=None, repr=False)
    api_keys: Annotated[tuple[str, ...], NoDecode] = Field(default=(), repr=False)

    @classmethod
    def from_env(cls, **overrides: Any) -> ServeConfig:
        """The environment's settings with ``overrides`` on top; a bad value is a :class:`ConfigError`."""
        try:
            return cls(**overrides)
        except ValidationError as exc:
            raise ConfigError("invalid service settings: " + "; ".join(_describe(e) for e in exc.errors())) from None

    @model_validator(mode="before")
    @classmethod
    def _secrets_from_files(cls, values: Any) -> Any:
        if not isinstance(values, dict):
            return values
        for field in SECRETS:
            path = os.environ.get(f"{ENV_PREFIX}{field.upper()}_FILE")
            if not values.get(field) and path:
                try:
                    values[field] = Path(path).read_text()
                except OSError as exc:
                    raise ValueError(f"{ENV_PREFIX}{field.upper()}_FILE names a file "
                                     f"that cannot be read: {exc}") from None
        return values

    @field_validator("admin_token", "cdn_base_url", "disk_cache_dir", mode="before")
    @classmethod
    def _blank_is_unset(cls, value: Any) -> Any:
        return (value.strip() or None) if isinstance(value, str) else value

    @field_validator("api_keys", mode="before")
    @classmethod
    def _split_keys(cls, value: Any) -> Any:
        if isinstance(value, str):
            return tuple(key.strip() for key in value.replace("\n", ",").split(",") if key.strip())
        return value


def _describe(error: Any) -> str:
    field = ".".join(map(str, error["loc"]))
    where = f"{field} ({ENV_PREFIX}{field.upper()})" if field else "settings"
    return f"{where}: {error['msg']}"
