"""The service's metrics on a real Ray cluster: two replicas, scraped from Ray's own endpoint."""

from __future__ import annotations

import re
import shutil
import time
from collections import defaultdict

import httpx
import pytest

from sakura.platform import http_api
from sakura.platform.layout import manifest_key
from sakura.platform.manifest import Manifest
from sakura.serve.metrics import UNMATCHED_ROUTE
from tests.helpers import dashboard_queries, make_library, promql_metric_names
from tests.integration.conftest import serve_apps

APP = "metrics-test"
#: Counters of the events the test causes once each: it waits until every one has been exported.
EVENTS = ("ray_sakura_store_errors_total", "ray_sakura_corrupt_shards_total", "ray_sakura_shard_tier_hits_total")
REQUESTS = 40
SERIES = re.compile(r"^([a-zA-Z_:][\w:]*)\{(.*)\} (\S+)$")
LABEL = re.compile(r'(\w+)="((?:[^"\\]|\\.)*)"')


@pytest.fixture(scope="module")
def library_dir(tmp_path_factory):
    root = tmp_path_factory.mktemp("metrics-lib")
    make_library(f"file://{root}", ["skimage:brick"], steps=2)
    return root


def scrape(port: int) -> str:
    return httpx.get(f"http://127.0.0.1:{port}/metrics", timeout=10).text


def series(text: str, name: str) -> list[tuple[dict[str, str], float]]:
    """This module's application's series of ``name``: (labels, value)."""
    found = []
    for line in text.splitlines():
        match = SERIES.match(line)
        if match and match.group(1) == name:
            labels = dict(LABEL.findall(match.group(2)))
            if labels.get("application", "").startswith(APP):
                found.append((labels, float(match.group(3))))
    return found


def exported(text: str) -> set[str]:
    """Every series name on the endpoint, any application's."""
    return {m.group(1) for m in map(SERIES.match, text.splitlines()) if m}


def total(text: str, name: str, **tags: str) -> float:
    return sum(v for labels, v in series(text, name) if tags.items() <= labels.items())


def break_one_shard_and_lose_one_level(root) -> None:
    """Flip a byte of shard 1's compact level (a corrupt read) and delete the medium level file
    (the store lost it while the version is still published)."""
    stored = Manifest.from_bytes((root / manifest_key("tpl", 1)).read_bytes())
    path = root / stored.level("compact").key
    data = bytearray(path.read_bytes())
    data[stored.shard(1).levels["compact"].offset + 5] ^= 0xFF
    path.write_bytes(bytes(data))
    (root / stored.level("medium").key).unlink()


def test_counters_sum_over_replicas_grow_monotonically_and_every_dashboard_metric_exists(
        ray_cluster, library_dir, tmp_path):
    root = tmp_path / "lib"
    shutil.copytree(library_dir, root)
    break_one_shard_and_lose_one_level(root)
    manifest = "/v1/templates/tpl/versions/1/manifest"
    with serve_apps({"/": {"store": f"file://{root}", "disk_cache_dir": str(tmp_path / "disk")}},
                    num_replicas=2, name=APP) as base, httpx.Client(base_url=base, timeout=30) as client:
        for _ in range(REQUESTS):
            assert client.get(manifest).status_code == 200
        for path in ("/nope", "/metrics"):
            assert client.get(path).status_code == 404
        compact = "/v1/templates/tpl/versions/1/shards/0/compact"
        shard = client.get(compact)
        assert shard.status_code == 200
        cached = client.get(compact, headers={"If-None-Match": shard.headers["etag"]})
        assert cached.status_code == 304  # no body: a byte counter that refuses 0 must not fail it
        assert client.get("/v1/templates/tpl/versions/1/shards/1/compact").json()["code"] == "shard_corrupt"
        assert client.get("/v1/templates/tpl/versions/1/shards/0/medium").status_code >= 500

        readings, text = [], ""
        dashboard_names = set().union(*map(promql_metric_names, dashboard_queries()))
        deadline = time.time() + 60
        while time.time() < deadline:
            text = scrape(ray_cluster.metrics_port)
            readings.append(total(text, "ray_sakura_requests_total", route=http_api.MANIFEST))
            arrived = [total(text, name) for name in EVENTS]  # each process reports on its own clock
            unmatched = total(text, "ray_sakura_requests_total", route=UNMATCHED_ROUTE)  # both replicas' may lag
            if readings[-1] >= REQUESTS and all(arrived) and unmatched >= 2 and dashboard_names <= exported(text):
                break
            time.sleep(0.5)

    assert readings == sorted(readings) and readings[-1] == REQUESTS, readings
    replicas = {labels["replica"] for labels, _ in series(text, "ray_sakura_requests_total")}
    assert len(replicas) == 2, "both replicas answered and each exports its own series"
    assert "_created" not in text
    routes = defaultdict(float)
    for labels, value in series(text, "ray_sakura_requests_total"):
        routes[labels["route"]] += value
    assert routes[UNMATCHED_ROUTE] == 2
    assert set(routes) <= {"/healthz", http_api.MANIFEST, http_api.SHARD, UNMATCHED_ROUTE}
    assert total(text, "ray_sakura_corrupt_shards_total") == 1
    assert total(text, "ray_sakura_store_errors_total", kind="missing") >= 1
    assert total(text, "ray_sakura_shard_tier_hits_total", tier="store") == 1
    for expr in dashboard_queries():
        assert promql_metric_names(expr) <= exported(text), expr
