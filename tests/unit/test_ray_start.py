"""How the ``sakura`` commands start Ray (``sakura._ray``), with ``ray.init`` replaced: no cluster runs."""

from __future__ import annotations

import os

import pytest
import ray

from sakura import _ray


@pytest.fixture
def inits(monkeypatch):
    calls: list[dict] = []
    monkeypatch.setattr(ray, "init", lambda **kw: calls.append(kw))
    for name in _ray.LOCAL_ENV:
        monkeypatch.setenv(name, "")  # so that monkeypatch restores what was there, set by the code or not
        monkeypatch.delenv(name)
    return calls


def test_a_local_cluster_gives_serves_proxy_time_to_start_and_a_joined_one_keeps_its_own(inits, monkeypatch):
    assert _ray.join_or_start("ray://head:10001") is False
    assert all(name not in os.environ for name in _ray.LOCAL_ENV)
    assert _ray.join_or_start(None) is True
    assert inits[-1]["address"] == "local"
    assert os.environ["RAY_SERVE_PROXY_READY_CHECK_TIMEOUT_S"] == "30"
    monkeypatch.setenv("RAY_SERVE_PROXY_READY_CHECK_TIMEOUT_S", "7")
    _ray.join_or_start(None)
    assert os.environ["RAY_SERVE_PROXY_READY_CHECK_TIMEOUT_S"] == "7"  # an operator's value is kept
