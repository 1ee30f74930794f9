"""The catalogue cursor under attack (issue 36, item 5.3). A cursor is the client's word: any text
is either the base64 of one key segment the service could have handed out (and round-trips), or
a 400 ``invalid_cursor``, never a 500, a path or a listing of the store. And the service must be
able to take back every cursor it hands out: a folder that no key can name (another tool's: a
space, a non-ASCII letter, 200 characters) is skipped, not made a cursor the next page refuses.
"""

from __future__ import annotations

import base64
import itertools

import pytest
from fastapi.testclient import TestClient
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from sakura.platform import http_api, layout
from sakura.platform.manifest import AliasDoc
from sakura.platform.store import open_store
from sakura.platform.store.base import check_key
from sakura.platform.store.local import LocalStore
from sakura.serve.api import create_api
from sakura.serve.config import ServeConfig
from tests.hypothesis_seed import name_the_seed, per_run_seed

FUZZ = settings(max_examples=300, deadline=None, database=None,
                suppress_health_check=[HealthCheck.function_scoped_fixture])
SEGMENTS = st.from_regex(r"[A-Za-z0-9][A-Za-z0-9._=-]{0,127}", fullmatch=True)
CURSORS = st.one_of(
    st.text(max_size=200),
    st.text(st.sampled_from("ABCabc019-_=+/.%\x00 "), max_size=200),
    SEGMENTS.map(http_api.encode_cursor).map(lambda c: c + "="),
    st.binary(max_size=140).map(lambda b: base64.urlsafe_b64encode(b).decode().rstrip("=")),
    st.text(max_size=140).map(lambda t: base64.urlsafe_b64encode(t.encode()).decode().rstrip("=")),
)


@per_run_seed
@FUZZ
@given(cursor=CURSORS)
def test_a_cursor_decodes_to_one_key_segment_that_round_trips_or_is_a_value_error(cursor):
    name_the_seed()
    try:
        after = http_api.decode_cursor(cursor)
    except ValueError:
        return
    assert "/" not in after and check_key(after) == after and len(after) <= 128
    assert http_api.encode_cursor(after) == cursor  # one spelling per folder: no cursor aliases another


@per_run_seed
@FUZZ
@given(folder=SEGMENTS)
def test_every_folder_a_key_can_name_is_a_cursor_the_service_takes_back(folder):
    name_the_seed()
    assert http_api.decode_cursor(http_api.encode_cursor(folder)) == folder


# -- the service ----------------------------------------------------------------------------------
PUBLISHED = ["tpl-a", "tpl-a.b", "tpl-m", "tpl-z"]
#: Folders another tool made under templates/ that no key can name (each at a place in the order).
STRAYS = ["tpl-a b", "tpl-a\u00e9", "tpl-m" + "x" * 200, "tpl-m~", "tpl-n\tx", "tpl-y!", "zz z"]


@pytest.fixture(scope="module")
def root(tmp_path_factory):
    root = tmp_path_factory.mktemp("strays")
    store = open_store(f"file://{root}")
    for i, template in enumerate(PUBLISHED):
        store.put(layout.alias_key(template, "latest"), AliasDoc(version=i + 1).to_bytes())
    for stray in STRAYS:
        (root / "templates" / stray).mkdir()
        (root / "templates" / stray / "junk").write_bytes(b"")
    return root


@pytest.fixture
def client(root):
    return TestClient(create_api(ServeConfig(store=f"file://{root}")), raise_server_exceptions=False)


@pytest.mark.parametrize("limit", [1, 2, 3, 1000])
def test_folders_no_key_can_name_never_end_a_walk_or_become_a_cursor(client, monkeypatch, limit):
    listings: list[str] = []
    real = LocalStore.list_folders

    def counted(self, prefix, *, after="", limit=1000):
        listings.append(after)
        return real(self, prefix, after=after, limit=limit)

    monkeypatch.setattr(LocalStore, "list_folders", counted)
    ids, cursor, pages = [], None, 0
    while True:
        r = client.get(http_api.CATALOGUE, params={"limit": limit} | ({"cursor": cursor} if cursor else {}))
        assert r.status_code == 200, r.text  # every cursor handed out is taken back
        ids += [t["id"] for t in r.json()["templates"]]
        pages += 1
        cursor = r.json()["next_cursor"]
        if cursor is None:
            break
        assert check_key(http_api.decode_cursor(cursor))
    assert ids == sorted(PUBLISHED, key=lambda t: t + "/")
    assert pages == -(-len(PUBLISHED) // limit)  # the strays take no place on a page
    # a listing more for a stray at most, and a stray is seen by two pages at most (as the one
    # after the page's last id, and again by the next page): never a listing of the whole store
    assert len(listings) <= pages + 2 * len(STRAYS)


@per_run_seed
@settings(max_examples=60, deadline=None, database=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(cursor=CURSORS, limit=st.one_of(st.integers(-5, 1005).map(str), st.text(max_size=6)))
def test_any_cursor_and_limit_are_a_page_or_a_typed_400(client, cursor, limit):
    name_the_seed()
    r = client.get(http_api.CATALOGUE, params={"cursor": cursor, "limit": limit})
    assert r.status_code in (200, 400), r.text
    if r.status_code == 400:
        assert r.json()["code"] in ("invalid_cursor", "invalid_request") and len(r.text) < 300
    else:
        assert {t["id"] for t in r.json()["templates"]} <= set(PUBLISHED)


def test_a_folder_listing_pages_past_folders_no_key_can_name(root):
    store = open_store(f"file://{root}")
    for limit in (1, 2, 5):
        pages = list(itertools.islice(_walk(store, limit), 20))
        assert [n for page in pages for n in page] == sorted(PUBLISHED, key=lambda t: t + "/")


def _walk(store, limit):
    after = ""
    while page := store.key_folders("templates/", after=after, limit=limit):
        yield page
        after = page[-1]
