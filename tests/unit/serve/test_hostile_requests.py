"""What the service accepts from a client on the newer routes (issue 36, item 5.2 and 5.3): the
preamble's query string, the hashes and object routes' template ids, versions and names, the
catalogue's cursor, and request targets of any length. Each gets a typed 4xx from one request,
names nothing internal, and leaves the service serving."""

from __future__ import annotations

import pytest
from fastapi.testclient import TestClient

from sakura.platform import http_api
from sakura.serve.access import MAX_TARGET_BYTES
from sakura.serve.api import create_api
from sakura.serve.config import ServeConfig
from sakura.serve.metrics import UNMATCHED_ROUTE

PREAMBLE = http_api.preamble_path("tpl", 1, source=False)


@pytest.fixture
def client(built_library):
    return TestClient(create_api(ServeConfig(store=f"file://{built_library}")))


def test_each_preamble_flag_is_absent_or_given_once_as_0_or_1(client):
    plain = client.get(PREAMBLE)
    assert plain.status_code == 200
    for flags in ("?context=1&hashes=1", "?source=0&images=0"):  # the defaults, spelled out
        assert client.get(PREAMBLE + flags).content == plain.content
    unhashed = client.get(PREAMBLE + "?hashes=0")
    assert unhashed.status_code == 200 and unhashed.content != plain.content


@pytest.mark.parametrize("query", [
    "source=-1", "source=2", "source=01", "source=+1", "source=1.0", "source=1_0", "source=true", "source=",
    "source", "context=0x1", "hashes=%D9%A1", "images=%C2%B9", "images=" + "1" * 5000,
    "source=1&source=1", "hashes=0&hashes=1", "context=1&context=0",
], ids=lambda q: q[:24])
def test_a_preamble_flag_in_any_other_spelling_or_given_twice_is_a_400(client, query):
    r = client.get(f"{PREAMBLE}?{query}")
    assert r.status_code == 400 and r.json()["code"] == "invalid_request", r.text
    assert r.json()["message"].endswith("must be given at most once, as 0 or 1")


def test_parameters_the_service_does_not_know_change_nothing(client):
    plain = client.get(PREAMBLE).content
    assert client.get(PREAMBLE + "?later=1&" + "&".join(f"x{i}=y" for i in range(300))).content == plain
    for path in (http_api.manifest_path("tpl", 1), http_api.hashes_path("tpl", 1)):
        assert client.get(path + "?source=1&junk=%00").content == client.get(path).content


@pytest.mark.parametrize("target", [
    PREAMBLE + "?x=" + "a" * MAX_TARGET_BYTES,
    PREAMBLE + "?" + "&".join(["source=1"] * 2000),
    "/v1/templates/" + "a" * MAX_TARGET_BYTES + "/versions",
    http_api.context_path("tpl", 1, "x" * MAX_TARGET_BYTES),
])
def test_a_request_target_past_the_cap_is_a_414_before_any_route_reads_it(client, target, monkeypatch):
    from sakura.serve.reader import ShardReader

    read: list[str] = []
    monkeypatch.setattr(ShardReader, "resolve", lambda *args: read.append("resolve"))  # a route would call it
    r = client.get(target)
    assert r.status_code == 414 and r.json()["code"] == "uri_too_long"
    assert read == [] and len(r.content) < 200
    metrics = client.app.state.metrics
    assert metrics.value("sakura_requests", route=UNMATCHED_ROUTE, status="414") == 1


_VERSIONED = [http_api.PREAMBLE, http_api.HASHES, http_api.CONTEXT, http_api.SOURCE]


@pytest.mark.parametrize("route", _VERSIONED, ids=["preamble", "hashes", "context", "source"])
@pytest.mark.parametrize("template_id, version, status, code", [
    ("NOPE!", "1", 400, "invalid_template_id"),
    ("..%2e", "1", 400, "invalid_template_id"),
    ("..%2F..%2Fetc", "1", 404, "not_found"),  # an encoded slash is no path segment: no route
    ("%2e%2e", "1", 400, "invalid_template_id"),
    ("ghost", "1", 404, "not_found"),
    ("ghost", "latest", 404, "unknown_template"),
    ("tpl", "01", 400, "invalid_request"),
    ("tpl", "-1", 400, "invalid_request"),
    ("tpl", "%D9%A1", 400, "invalid_request"),
    ("tpl", "99999999999999999999", 400, "invalid_request"),
    ("tpl", "Bad%20Alias", 400, "invalid_request"),
    ("tpl", "..", 404, "not_found"),
    ("tpl", "9", 404, "not_found"),
    ("tpl", "no_such_alias", 404, "not_found"),
])
def test_bad_template_ids_and_versions_are_typed_4xx_on_every_versioned_route(client, route, template_id, version,
                                                                              status, code):
    r = client.get(route.format(template_id=template_id, version=version, name="prompt_embeds"))
    assert (r.status_code, r.json()["code"]) == (status, code), r.text
    assert "file://" not in r.text and "templates/" not in r.json()["message"]  # no store URI or key


@pytest.mark.parametrize("template_id, version", [("T" * 4000, "1"), ("tpl", "A" * 4000), ("tpl", "9" * 4000),
                                                   ("tpl", "a" * 4000)])
def test_a_long_bad_name_is_echoed_cut_short(client, template_id, version):
    """The message goes back to the client and into the logs: a name of kilobytes is shown cut."""
    r = client.get(http_api.PREAMBLE.format(template_id=template_id, version=version))
    assert r.status_code in (400, 404), r.text
    assert len(r.json()["message"]) < 200 and "characters)" in r.json()["message"]


@pytest.mark.parametrize("kind", ["context", "source"])
@pytest.mark.parametrize("name, status", [
    ("..%2F..%2Fmanifest.json", 404), ("%00", 404), ("x" * 4000, 404), ("manifest", 404), ("template_image%00", 404),
])
def test_an_object_name_is_looked_up_in_the_manifest_never_used_as_a_key(client, built_library, kind, name, status):
    r = client.get(f"/v1/templates/tpl/versions/1/{kind}/{name}")
    assert r.status_code == status and r.json()["code"] in (f"unknown_{kind}", "not_found")
    assert len(r.json()["message"]) < 120  # the name is echoed no longer than 64 characters


@pytest.mark.parametrize("cursor", [
    "é", "\u0661", "\U0001f600", "YQ\u200b", "\x00", "%00",
    http_api.encode_cursor(".."), http_api.encode_cursor("."), http_api.encode_cursor("a\x00b"),
    http_api.encode_cursor("a\nb"), http_api.encode_cursor("é"), http_api.encode_cursor("x" * 129),
], ids=["latin", "arabic-digit", "emoji", "zero-width", "nul", "percent", "dotdot", "dot", "nul-inside",
        "newline-inside", "non-ascii-inside", "too-long-inside"])
def test_a_forged_or_non_ascii_cursor_is_a_400(client, cursor):
    r = client.get(http_api.CATALOGUE, params={"cursor": cursor})
    assert r.status_code == 400 and r.json()["code"] == "invalid_cursor", r.text


@pytest.mark.parametrize("query, code", [
    ("limit=1&limit=2", "invalid_request"),
    ("limit=5&limit=5", "invalid_request"),
    (f"cursor={http_api.encode_cursor('tpl')}&cursor={http_api.encode_cursor('a')}", "invalid_cursor"),
])
def test_a_page_parameter_given_twice_is_a_400(client, query, code):
    r = client.get(f"{http_api.CATALOGUE}?{query}")
    assert r.status_code == 400 and r.json()["code"] == code, r.text
    assert client.get(http_api.CATALOGUE).status_code == 200


@pytest.mark.parametrize("path, logged", [
    ("/v1/templates/tpl%0A127.0.0.1%20GET%20/v1/templates%20200/versions",
     r"/v1/templates/tpl\n127.0.0.1\x20GET\x20/v1/templates\x20200/versions"),
    ("/v1/templates/a%0Db%1B%5B2Kc%E2%80%A8d/versions", r"/v1/templates/a\rb\x1b[2Kc\u2028d/versions"),
    ("/v1/templates/a%5Cnb/versions", r"/v1/templates/a\\nb/versions"),  # a typed "\n" is not a line break's
], ids=["forged-line", "carriage-return-escape-separator", "typed-backslash"])
def test_what_a_client_puts_in_a_path_never_forges_a_line_or_field_of_the_access_log(client, caplog, path, logged):
    with caplog.at_level("INFO", logger="ray.serve.sakura.access"):
        status = client.get(path).status_code
    (record,) = [r for r in caplog.records if r.name == "ray.serve.sakura.access"]
    line = record.getMessage()
    assert line.isprintable() and line.split(" ")[:3] == ["GET", logged, str(status)]
    assert record.http_path == logged
