"""A server whose manifest lists levels in wire formats the phone cannot read (a later server's):
such a level is never fetched, and with none left the edit asks for an update. The scenarios run
on the hostile server of ``test_hostile_server.py``."""

from __future__ import annotations

import pytest

from sakura.edge_client import EditResult
from sakura.edge_client.errors import ConfigError
from tests.hostile_server import HostileServer, on_manifest
from tests.unit.edge_client.test_hostile_server import attack


def _later_format(manifest: dict, *levels: str) -> dict:
    for entry in manifest["levels"]:
        if entry["name"] in levels:
            entry["format"] = 3  # a wire format a later server writes, which this phone cannot read
    return manifest


SCENARIOS = {
    "later-format": on_manifest(lambda m: _later_format(m, "compact")),
    "no-format-it-reads": on_manifest(lambda m: _later_format(m, *(lv["name"] for lv in m["levels"]))),
}


@pytest.fixture(scope="module")
def hostile(api):
    with HostileServer(api.url, SCENARIOS) as server:
        yield server


def test_a_level_in_a_format_the_phone_cannot_decode_is_never_fetched(hostile, reference_model, tmp_path):
    result, _ = attack(hostile, "later-format", reference_model, tmp_path, policy="mpc")
    assert isinstance(result, EditResult) and "compact" not in result.levels, result
    assert not [r.path for r in hostile.requests("later-format") if r.path.endswith("/compact")]
    refused, _ = attack(hostile, "no-format-it-reads", reference_model, tmp_path / "none", policy="mpc")
    assert isinstance(refused, ConfigError) and "update it" in str(refused), refused
