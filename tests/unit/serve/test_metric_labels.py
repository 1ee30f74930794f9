"""Metric labels stay a fixed set whatever clients send (issue 36, item 5.7): a value a client
chooses (a template id, a version, a level, an object name, a path, a query, a method) never
becomes a label value, so a scan of made-up names cannot grow the series a replica exports."""

from __future__ import annotations

import pytest
from fastapi.testclient import TestClient

from sakura.platform import http_api
from sakura.serve.api import create_api
from sakura.serve.config import ServeConfig
from sakura.serve.metrics import TIERS, UNMATCHED_ROUTE


@pytest.fixture
def client(built_library):
    return TestClient(create_api(ServeConfig(store=f"file://{built_library}", admin_token="t")),
                      raise_server_exceptions=False)


def _scan(client: TestClient, start: int, count: int) -> None:
    """``count`` requests of each kind, every one with values no earlier request used."""
    for i in range(start, start + count):
        for path in (
            f"/v1/templates/made-up-{i}/versions/latest/manifest",
            f"/v1/templates/Made-Up-{i}!/versions",
            f"/v1/templates/tpl/versions/{i + 10}/preamble?later{i}=1",
            f"/v1/templates/tpl/versions/alias-{i}/hashes",
            f"/v1/templates/tpl/versions/1/shards/{i}/level{i}",
            f"/v1/templates/tpl/versions/1/context/name_{i}",
            f"/v1/templates/tpl/versions/1/source/{'x' * i}",
            f"/random/{i}/path",
            f"{http_api.CATALOGUE}?cursor=forged{i}",
        ):
            client.get(path)
        client.request(f"VERB{i}", f"/v1/templates/made-up-{i}/versions")
        client.put(f"/v1/templates/made-up-{i}/aliases/a{i}", json={"version": i + 1})


def _series(client: TestClient) -> set[tuple[str, tuple[tuple[str, str], ...]]]:
    return set(client.app.state.metrics.recorder.totals)


def test_a_scan_of_made_up_names_adds_no_series(client):
    _scan(client, 0, 5)
    first = _series(client)
    _scan(client, 5, 20)  # 220 more requests, each naming things no request named before
    assert _series(client) == first
    routes = {"/healthz", http_api.CATALOGUE, http_api.VERSIONS, http_api.MANIFEST, http_api.PREAMBLE, http_api.HASHES,
              http_api.SHARD, http_api.CONTEXT, http_api.SOURCE, http_api.ALIAS, UNMATCHED_ROUTE}
    for _, labels in first:
        tags = dict(labels)
        assert set(tags) <= {"route", "status", "tier", "kind"}
        assert tags.get("route", UNMATCHED_ROUTE) in routes
        assert tags.get("status", "200").isdigit() and 100 <= int(tags.get("status", "200")) < 600
        assert tags.get("tier", "memory") in TIERS
    assert len(first) < 60  # a handful of routes times a handful of statuses
