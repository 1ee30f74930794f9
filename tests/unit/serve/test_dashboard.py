"""The Grafana dashboard in infra/ queries only metrics the service exports (the names Ray's
endpoint shows for Serve's own metrics are checked on a real cluster, in the integration tests)."""

from __future__ import annotations

import pytest

from sakura.serve.metrics import METRICS, RAY_PREFIX, exported_names
from tests.helpers import dashboard_queries, promql_metric_names


@pytest.mark.parametrize("expr, names", [
    ('sum by (route, status) (rate(ray_a_total{application=~"$app", x="a{b}"}[$__rate_interval]))', {"ray_a_total"}),
    ("histogram_quantile(0.99, sum by (le) (rate(ray_b_bucket[5m])))", {"ray_b_bucket"}),
    ("sum(rate(a[1m])) / ignoring (tier) group_left sum(rate(b[1m])) and on (x) c", {"a", "b", "c"}),
    ("label_values(ray_c_total, application)", {"ray_c_total"}),
])
def test_metric_names_are_read_from_promql(expr, names):
    assert promql_metric_names(expr) == names


def test_every_dashboard_query_names_a_metric_the_service_or_ray_serve_exports():
    exprs = dashboard_queries()
    assert len(exprs) >= 10
    for expr in exprs:
        names = promql_metric_names(expr)
        assert names, expr
        ours = {n for n in names if n.startswith(RAY_PREFIX + "sakura_")}
        assert ours <= exported_names(), (expr, ours - exported_names())
        assert all(n.startswith((RAY_PREFIX + "sakura_", RAY_PREFIX + "serve_")) for n in names), expr


def test_the_dashboard_shows_every_metric_the_service_exports():
    read = set().union(*map(promql_metric_names, dashboard_queries()))
    for metric in METRICS:
        assert any(n.startswith(RAY_PREFIX + metric.name) for n in read), metric.name
