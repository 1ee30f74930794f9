"""Alias PUT (issue 12, items 8 and 9): a capped, streamed body that must be a flat object
``{"version": N}`` with an optional boolean ``"force"``; force repairs an unreadable alias."""

from __future__ import annotations

import asyncio
import json

import pytest
from fastapi.testclient import TestClient

from sakura.serve.api import create_api
from sakura.serve.config import ServeConfig

ADMIN = "admin-token"
AUTH = {"Authorization": f"Bearer {ADMIN}"}
URL = "/v1/templates/tpl/aliases/stable"


@pytest.fixture
def api(library_dir):
    return create_api(ServeConfig(store=f"file://{library_dir}", admin_token=ADMIN, alias_ttl_s=0))


@pytest.fixture
def client(api):
    return TestClient(api)


def put_streamed(api, chunks: int, chunk: bytes, headers: list[tuple[bytes, bytes]] = ()) -> tuple[int, dict, int]:
    """PUT a body of ``chunks`` x ``chunk`` straight through ASGI; (status, answer, chunks the app read)."""
    sent, out = 0, []

    async def receive() -> dict:
        nonlocal sent
        if sent >= chunks:
            return {"type": "http.disconnect"}
        sent += 1
        return {"type": "http.request", "body": chunk, "more_body": sent < chunks}

    async def send(message: dict) -> None:
        out.append(message)

    scope = {"type": "http", "asgi": {"version": "3.0"}, "http_version": "1.1", "method": "PUT", "scheme": "http",
             "path": URL, "raw_path": URL.encode(), "query_string": b"", "root_path": "",
             "client": ("127.0.0.1", 1), "server": ("test", 80),
             "headers": [(b"host", b"test"), (b"authorization", f"Bearer {ADMIN}".encode()), *headers]}
    asyncio.run(api(scope, receive, send))
    body = b"".join(m.get("body", b"") for m in out if m["type"] == "http.response.body")
    return out[0]["status"], json.loads(body), sent


def test_a_large_body_is_refused_with_413(client):
    r = client.put(URL, content=b" " * 1_000_000 + b'{"version": 1}', headers=AUTH)
    assert r.status_code == 413 and r.json()["code"] == "body_too_large"
    assert client.put(URL, json={"version": 1}, headers=AUTH).status_code == 200


def test_a_declared_large_body_is_refused_before_any_byte_is_read(api):
    status, answer, read = put_streamed(api, 150_000, b" " * 1024, [(b"content-length", str(150 << 20).encode())])
    assert (status, answer["code"], read) == (413, "body_too_large", 0)


def test_a_chunked_body_is_read_only_up_to_the_cap(api):
    status, answer, read = put_streamed(api, 150_000, b" " * 1024)  # ~150 MB offered, no Content-Length
    assert (status, answer["code"]) == (413, "body_too_large")
    assert read <= 16  # a few kB read, the rest never


@pytest.mark.parametrize("body", [
    b'{"version": 1, "x": ' + b"[" * 1500 + b"]" * 1500 + b"}",  # nesting within the size cap
    b'{"version": {"version": 1}}',
    b'[{"version": 1}]',
    b'{"version": 1, "other": 2}',
    b'{"version": 1, "version": 2}',
    b'{"version": true}',
    b'{"version": "1"}',
    b'{"version": 1.0}',
    b'{"version": 0}',
    b'{"version": 10000000000000000000000}',
    b'{"version": 1, "force": "yes"}',
    b'{"force": true}',
    b"\xff\xfe{}",
    b"",
])
def test_anything_but_a_flat_version_object_is_a_400(client, body):
    r = client.put(URL, content=body, headers=AUTH)
    assert r.status_code == 400 and r.json()["code"] == "invalid_body", r.text


def test_the_token_is_checked_before_the_body_is_read(api):
    client = TestClient(api)
    r = client.put(URL, content=b"x" * 1_000_000, headers={"Authorization": "Bearer wrong"})
    assert r.status_code == 403


def test_force_overwrites_an_unreadable_alias(client, library_dir):
    max((library_dir / "templates/tpl/aliases/latest").glob("*.json")).write_bytes(b'{"vers')  # truncated
    url = "/v1/templates/tpl/aliases/latest"
    refused = client.put(url, json={"version": 1}, headers=AUTH)
    assert refused.status_code == 409 and refused.json()["code"] == "alias_unreadable"
    assert "force" in refused.json()["message"] and "file:" not in refused.text
    ok = client.put(url, json={"version": 1, "force": True}, headers=AUTH)
    assert ok.status_code == 200 and ok.json() == {"id": "tpl", "alias": "latest", "version": 1}
    assert client.get("/v1/templates/tpl/versions/latest/manifest").json()["version"] == 1
    assert client.put(url, json={"version": 2, "force": False}, headers=AUTH).status_code == 200
    assert client.put(url, json={"version": 9, "force": True}, headers=AUTH).status_code == 404


def test_an_alias_cannot_move_onto_a_version_gc_is_deleting(client, library_dir):
    from sakura.platform.layout import retired_key
    from sakura.platform.version_state import DELETING, Retirement

    (library_dir / retired_key("tpl", 1)).write_bytes(Retirement(DELETING, 0.0).to_bytes())
    r = client.put(URL, json={"version": 1}, headers=AUTH)
    assert r.status_code == 409 and r.json()["code"] == "version_retired"
    assert client.get("/v1/templates/tpl/versions/stable/manifest").status_code == 404
