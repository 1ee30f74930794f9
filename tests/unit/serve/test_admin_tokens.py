"""The admin token and the API keys (issue 36, item 5.6): a missing, wrong, malformed or oversized
token is a typed 401/403/431 that changes nothing; the comparison that decides is
``hmac.compare_digest``; no token, right or wrong, is echoed in an answer, a log line or the
service's settings."""

from __future__ import annotations

import hmac
import logging

import pytest
from fastapi.testclient import TestClient

from sakura.platform import http_api
from sakura.serve.access import MAX_HEADER_BYTES
from sakura.serve.api import create_api
from sakura.serve.config import ConfigError, ServeConfig

ADMIN = "adm1n-T0KEN-4f9c2e"
KEY = "reader-K3Y-77ab10"
URL = "/v1/templates/tpl/aliases/stable"
READ = {"X-API-Key": KEY}


@pytest.fixture
def client(library_dir):
    return TestClient(create_api(ServeConfig(store=f"file://{library_dir}", admin_token=ADMIN, api_keys=(KEY,),
                                             alias_ttl_s=0)))


def _stable(client: TestClient) -> int:
    return client.get(http_api.manifest_path("tpl", "stable"), headers=READ).status_code


@pytest.mark.parametrize("authorization, status, code", [
    (None, 401, "missing_token"),
    ("Basic " + ADMIN, 401, "missing_token"),
    (ADMIN, 401, "missing_token"),
    ("Bearer" + ADMIN, 401, "missing_token"),
    ("Bearer wrong", 403, "bad_token"),
    ("Bearer " + ADMIN[:-1], 403, "bad_token"),
    ("Bearer " + ADMIN + "x", 403, "bad_token"),
    ("Bearer " + ADMIN.upper(), 403, "bad_token"),
    ("Bearer " + KEY, 403, "bad_token"),  # a reader's key is no admin token
    (b"Bearer " + ADMIN.encode() + b"\xe9\xff", 403, "bad_token"),  # not ASCII: compared as bytes, no 500
    ("Bearer " + "x" * (MAX_HEADER_BYTES - 1000), 403, "bad_token"),
    ("Bearer " + "x" * MAX_HEADER_BYTES, 431, "headers_too_large"),
], ids=["none", "basic", "bare", "no-space", "wrong", "prefix", "longer", "case", "reader-key", "non-ascii",
        "large", "over-the-cap"])
def test_a_missing_wrong_or_oversized_admin_token_changes_nothing(client, authorization, status, code):
    headers = {} if authorization is None else {"Authorization": authorization}
    r = client.put(URL, json={"version": 1}, headers=headers)
    assert (r.status_code, r.json()["code"]) == (status, code), r.text
    assert _stable(client) == 404  # no alias was written
    assert client.put(URL, json={"version": 1}, headers={"Authorization": f"bearer  {ADMIN} "}).status_code == 200


def test_the_comparison_that_decides_is_hmac_compare_digest(client, monkeypatch):
    seen: list[tuple[bytes, bytes]] = []

    def accept_all(a: bytes, b: bytes) -> bool:
        seen.append((a, b))
        return True

    monkeypatch.setattr(hmac, "compare_digest", accept_all)
    # with compare_digest saying yes, wrong credentials pass: no other comparison decides
    assert client.put(URL, json={"version": 1}, headers={"Authorization": "Bearer wrong"}).status_code == 200
    assert client.get(http_api.CATALOGUE, headers={"X-API-Key": "nope"}).status_code == 200
    assert (b"wrong", ADMIN.encode()) in seen and (b"nope", KEY.encode()) in seen
    assert all(isinstance(a, bytes) and isinstance(b, bytes) for a, b in seen)


def test_no_token_or_key_is_echoed_in_an_answer_or_a_log_line(client, caplog):
    wrong_admin, wrong_key = "guess-0f1e2d3c4b5a", "guess-key-998877"
    with caplog.at_level(logging.DEBUG):
        answers = [
            client.put(URL, json={"version": 1}, headers={"Authorization": f"Bearer {wrong_admin}"}),
            client.put(URL, json={"version": 99}, headers={"Authorization": f"Bearer {ADMIN}"}),  # 404 after auth
            client.put(URL, content=b"{", headers={"Authorization": f"Bearer {ADMIN}"}),  # 400 after auth
            client.get(http_api.CATALOGUE, headers={"X-API-Key": wrong_key}),
            client.get(http_api.CATALOGUE, headers={"Authorization": f"Bearer {wrong_key}"}),
            client.get(http_api.manifest_path("ghost", "latest"), headers=READ),
        ]
    assert [r.status_code for r in answers] == [403, 404, 400, 403, 403, 404]
    logged = "\n".join(f"{r.getMessage()} {r.__dict__}" for r in caplog.records)
    assert caplog.records  # the access lines were captured
    for secret in (ADMIN, KEY, wrong_admin, wrong_key):
        for r in answers:
            assert secret not in r.text and secret not in str(r.headers)
        assert secret not in logged


def test_the_settings_never_show_their_secrets(monkeypatch):
    config = ServeConfig(store="file:///nowhere", admin_token=ADMIN, api_keys=(KEY,))
    for shown in (repr(config), str(config)):
        assert ADMIN not in shown and KEY not in shown
    assert config.admin_token == ADMIN and config.api_keys == (KEY,)  # still there to check against
    with pytest.raises(ConfigError) as bad:
        ServeConfig.from_env(store="file:///nowhere", admin_token=ADMIN, api_keys=(KEY,), retry_after_s=0)
    assert ADMIN not in str(bad.value) and KEY not in str(bad.value)
    monkeypatch.setenv("SAKURA_ADMIN_TOKEN", ADMIN)
    with pytest.raises(ConfigError) as bad:
        ServeConfig.from_env(store="file:///nowhere", mode="sideways")
    assert ADMIN not in str(bad.value)
