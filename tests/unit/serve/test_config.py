"""Service settings from the environment (pydantic-settings): every field, byte units, secrets
from files, and a clear error naming the variable."""

from __future__ import annotations

import pytest

from sakura.serve.config import ConfigError, ServeConfig


def test_every_field_comes_from_its_variable_and_args_override_them(monkeypatch):
    monkeypatch.setenv("SAKURA_ALIAS_TTL_S", "7.5")
    monkeypatch.setenv("SAKURA_MODE", "redirect")
    monkeypatch.setenv("SAKURA_API_KEYS", "k1, k2\nk3")
    config = ServeConfig.from_env(mode="proxy")
    assert config.alias_ttl_s == 7.5 and config.mode == "proxy" and config.api_keys == ("k1", "k2", "k3")
    assert ServeConfig(**config.model_dump()) == config  # what a replica rebuilds from the dump


@pytest.mark.parametrize("text, value", [("512MiB", 512 << 20), ("2GB", 2 * 10**9), ("1048576", 1 << 20)])
def test_byte_sizes_take_units(monkeypatch, text, value):
    monkeypatch.setenv("SAKURA_MEMORY_CACHE_BYTES", text)
    assert ServeConfig.from_env().memory_cache_bytes == value


def test_secrets_come_from_the_file_a_variable_names(monkeypatch, tmp_path):
    (tmp_path / "token").write_text("s3cret\n")
    monkeypatch.setenv("SAKURA_ADMIN_TOKEN_FILE", str(tmp_path / "token"))
    assert ServeConfig.from_env().admin_token == "s3cret"
    monkeypatch.setenv("SAKURA_ADMIN_TOKEN_FILE", str(tmp_path / "missing"))
    with pytest.raises(ConfigError, match="SAKURA_ADMIN_TOKEN_FILE"):
        ServeConfig.from_env()


@pytest.mark.parametrize("name, value", [("SAKURA_MEMORY_CACHE_BYTES", "lots"), ("SAKURA_ALIAS_TTL_S", "-1"),
                                         ("SAKURA_MODE", "teleport")])
def test_a_bad_value_names_its_variable(monkeypatch, name, value):
    monkeypatch.setenv(name, value)
    with pytest.raises(ConfigError, match=name):
        ServeConfig.from_env()
