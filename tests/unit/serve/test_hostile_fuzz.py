"""The service's request surfaces fuzzed (issue 36, items 5.2, 5.6 and 5.7): what the hand-picked
cases of ``test_hostile_requests``, ``test_admin_tokens`` and ``test_metric_labels`` check, over
generated input. A preamble flag is absent or given once as 0 or 1, else a 400; an admin token
or API key that is not the configured one, in any spelling, is a typed 401/403/431 that writes
nothing; and no method, path, query or header a client sends adds a metric series or a label
value outside the fixed set. The cases differ from run to run (``tests/hypothesis_seed.py``)."""

from __future__ import annotations

import itertools
import urllib.parse

import pytest
from fastapi.testclient import TestClient
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from sakura.platform import http_api
from sakura.serve.api import create_api
from sakura.serve.config import ServeConfig
from sakura.serve.metrics import TIERS, UNMATCHED_ROUTE
from tests.hypothesis_seed import name_the_seed, per_run_seed

ADMIN = "adm1n-T0KEN-4f9c2e"
KEY = "reader-K3Y-77ab10"
FUZZ = settings(max_examples=120, deadline=None, database=None,
                suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
#: Header text a client may send (latin-1, no line breaks or NUL: those never reach a route).
HEADER_TEXT = st.text(st.characters(min_codepoint=0x20, max_codepoint=0xFF, exclude_characters="\x7f"), max_size=60)
FLAGS = ("source", "context", "images", "hashes")


@pytest.fixture(scope="module")
def client(built_library):
    return TestClient(create_api(ServeConfig(store=f"file://{built_library}")), raise_server_exceptions=False)


@pytest.fixture(scope="module")
def guarded(tmp_path_factory, built_library):
    """A private copy of the library, behind an admin token and an API key."""
    import shutil

    root = shutil.copytree(built_library, tmp_path_factory.mktemp("guarded") / "lib")
    return TestClient(create_api(ServeConfig(store=f"file://{root}", admin_token=ADMIN, api_keys=(KEY,),
                                             alias_ttl_s=0)), raise_server_exceptions=False)


@per_run_seed
@FUZZ
@given(query=st.lists(st.tuples(st.sampled_from(FLAGS), st.one_of(st.sampled_from(["0", "1"]), HEADER_TEXT)),
                      max_size=4))
def test_a_preamble_flag_is_absent_or_given_once_as_0_or_1_else_a_400(client, query):
    name_the_seed()
    r = client.get(http_api.preamble_path("tpl", 1, source=False) + "?" + urllib.parse.urlencode(query))
    names = [name for name, _ in query]
    valid = len(set(names)) == len(names) and all(value in ("0", "1") for _, value in query)
    assert r.status_code == (200 if valid else 400), (query, r.text)
    if not valid:
        assert r.json()["code"] == "invalid_request" and len(r.text) < 300


_ALIASES = itertools.count()


def _bearer(authorization: str) -> str | None:
    return authorization[7:].strip() if authorization.lower().startswith("bearer ") else None


@per_run_seed
@FUZZ
@given(scheme=st.sampled_from(["Bearer ", "bearer ", "BEARER  ", "Basic ", "", "Bearer"]),
       token=st.one_of(HEADER_TEXT, st.sampled_from([ADMIN, KEY, f" {ADMIN} ", ADMIN[:-1], ADMIN + "x",
                                                     ADMIN.upper()])),
       key=st.one_of(st.none(), HEADER_TEXT, st.sampled_from([KEY, ADMIN, KEY[:-1], ""])))
def test_any_credential_other_than_the_configured_one_is_refused_and_writes_nothing(guarded, scheme, token, key):
    name_the_seed()
    authorization = scheme + token
    headers = {"Authorization": authorization.encode("latin-1")}
    if key is not None:
        headers["X-API-Key"] = key.encode("latin-1")
    alias = f"fuzzed-{next(_ALIASES)}"  # each example its own: an earlier one may have written its alias
    put = guarded.put(f"/v1/templates/tpl/aliases/{alias}", json={"version": 1}, headers=headers)
    bearer = _bearer(authorization)
    expected = 200 if bearer == ADMIN else 401 if bearer is None else 403
    assert put.status_code == expected, (authorization, put.text)
    if expected != 200:
        assert put.json()["code"] == ("missing_token" if expected == 401 else "bad_token")
        assert guarded.get(http_api.manifest_path("tpl", alias), headers={"X-API-Key": KEY}).status_code == 404
    given = key or bearer
    read = guarded.get(http_api.CATALOGUE, headers=headers)
    assert read.status_code == (200 if given == KEY else 401 if given is None else 403), (key, authorization, read.text)
    if read.status_code != 200:
        assert read.json()["code"] == ("missing_api_key" if given is None else "bad_api_key")


ROUTES = {"/healthz", http_api.CATALOGUE, http_api.VERSIONS, http_api.MANIFEST, http_api.PREAMBLE, http_api.HASHES,
          http_api.SHARD, http_api.CONTEXT, http_api.SOURCE, http_api.ALIAS, UNMATCHED_ROUTE}
SEGMENT = st.text(st.characters(min_codepoint=0x21, max_codepoint=0x2FF, exclude_characters="/?#%"), min_size=1,
                  max_size=30)


@per_run_seed
@FUZZ
@given(method=st.sampled_from(["GET", "PUT", "POST", "DELETE", "HEAD", "PATCH", "X-SCAN", "get"]),
       segments=st.lists(SEGMENT, min_size=0, max_size=8), query=st.lists(st.tuples(SEGMENT, SEGMENT), max_size=3),
       header=HEADER_TEXT)
def test_no_request_adds_a_label_value_outside_the_fixed_set(client, method, segments, query, header):
    name_the_seed()
    path = "/" + "/".join(urllib.parse.quote(s, safe="") for s in segments)
    client.request(method, path + "?" + urllib.parse.urlencode(query), headers={"X-Anything": header.encode("latin-1")})
    client.request(method, "/v1/templates/" + "/".join(urllib.parse.quote(s, safe="") for s in segments))
    for _, labels in client.app.state.metrics.recorder.totals:
        tags = dict(labels)
        assert set(tags) <= {"route", "status", "tier", "kind"}
        assert tags.get("route", UNMATCHED_ROUTE) in ROUTES
        assert tags.get("status", "200").isascii() and 100 <= int(tags.get("status", "200")) < 600
        assert tags.get("tier", "memory") in TIERS and tags.get("kind", "missing") in ("missing", "unavailable")
    assert len(client.app.state.metrics.recorder.totals) < 100
