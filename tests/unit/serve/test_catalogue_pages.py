"""GET /v1/templates in pages: a cursor walks the whole catalogue once, in a fixed order, and a
page never lists the whole store."""

from __future__ import annotations

import pytest
from fastapi.testclient import TestClient

from sakura.platform import http_api, layout
from sakura.platform.library import TemplateLibrary
from sakura.platform.manifest import AliasDoc
from sakura.platform.store import open_store
from sakura.platform.store.local import LocalStore
from sakura.serve.api import create_api
from sakura.serve.config import ServeConfig

PUBLISHED = [f"tpl-{i:02d}" for i in range(23)] + ["tpl-a", "tpl-a.b", "tpl-a0"]


@pytest.fixture(scope="module")
def root(tmp_path_factory):
    """A catalogue of aliases only (all a page reads), one unpublished template, one stray folder."""
    root = tmp_path_factory.mktemp("catalogue")
    store = open_store(f"file://{root}")
    for i, template in enumerate(PUBLISHED):
        store.put(layout.alias_key(template, "latest"), AliasDoc(version=i + 1).to_bytes())
    store.put(layout.template_prefix("tpl-unpublished") + "versions/1/claim.json", b"{}")
    store.put("templates/Not-An-Id/aliases/latest.json", AliasDoc(version=1).to_bytes())
    store.put("templates/tpl-m" + "x" * 123 + "/junk", b"")  # the longest folder name a key may have
    return root


@pytest.fixture
def client(root):
    return TestClient(create_api(ServeConfig(store=f"file://{root}")))


def walk(client: TestClient, limit: int) -> list[list[str]]:
    pages, cursor = [], None
    while True:
        params = {"limit": limit} | ({"cursor": cursor} if cursor else {})
        body = client.get(http_api.CATALOGUE, params=params).json()
        pages.append([t["id"] for t in body["templates"]])
        cursor = body["next_cursor"]
        if cursor is None:
            return pages


@pytest.mark.parametrize("limit", [1, 7, 10, 26, 1000])
def test_a_cursor_walks_every_published_template_once_in_folder_order(client, limit):
    pages = walk(client, limit)
    ids = [t for page in pages for t in page]
    assert ids == sorted(PUBLISHED, key=lambda t: t + "/")
    assert all(len(page) <= limit for page in pages)
    folders = len(PUBLISHED) + 3  # the unpublished template and the stray folders take places too
    assert len(pages) == -(-folders // limit)


def test_each_entry_carries_its_aliases(client):
    first = client.get(http_api.CATALOGUE, params={"limit": 3}).json()["templates"][0]  # after the stray
    assert first == {"id": "tpl-00", "aliases": {"latest": 1}}


@pytest.mark.parametrize("params, code", [
    ({"limit": "0"}, "invalid_request"),
    ({"limit": "1001"}, "invalid_request"),
    ({"limit": "-1"}, "invalid_request"),
    ({"limit": "ten"}, "invalid_request"),
    ({"limit": "1" * 40}, "invalid_request"),
    ({"cursor": "not base64!"}, "invalid_cursor"),
    ({"cursor": http_api.encode_cursor("tpl-a") + "A"}, "invalid_cursor"),
    ({"cursor": "Li4vZXRj"}, "invalid_cursor"),  # "../etc"
    ({"cursor": "x" * 500}, "invalid_cursor"),
])
def test_bad_page_parameters_are_400(client, params, code):
    r = client.get(http_api.CATALOGUE, params=params)
    assert r.status_code == 400 and r.json()["code"] == code


def test_a_page_lists_folders_not_the_store(root, client, monkeypatch):
    listed: list[str] = []
    original = LocalStore.list

    def recording(self, prefix=""):
        listed.append(prefix)
        return original(self, prefix)

    monkeypatch.setattr(LocalStore, "list", recording)
    assert len(walk(client, 10)) == 3  # 29 folders
    assert listed and all(p.startswith("templates/") and p.endswith("/aliases/") for p in listed)
    ids, last = TemplateLibrary(open_store(f"file://{root}")).template_page("tpl-a", 2)
    assert ids == ["tpl-a0"] and last == "tpl-m" + "x" * 123  # a folder that is no id takes a place
