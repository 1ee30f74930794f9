"""The HTTP transport against the real shard API: keep-alive, integrity, link pacing."""

from __future__ import annotations

import hashlib

import numpy as np
import pytest

from sakura.edge_client import RetryPolicy
from sakura.edge_client._http.transport import HttpTransport
from sakura.edge_client.errors import RedirectError, ServerError, ShardCorrupt
from sakura.emulation import TraceLink
from sakura.emulation.traces import BandwidthTrace
from sakura.platform.manifest import PhoneManifest
from tests.virtual_clock import VirtualClock


def shard(transport: HttpTransport, index: int, level: str = "medium"):
    manifest = PhoneManifest.from_wire(transport.get("/v1/templates/portrait/versions/1/manifest").body)
    loc = manifest.shards[index].levels[level]
    path = f"/v1/templates/portrait/versions/1/shards/{index}/{level}"
    return path, loc


def test_requests_share_one_kept_alive_connection(proxy):
    transport = HttpTransport(proxy.url)
    for i in range(4):
        path, loc = shard(transport, i)
        got = transport.download(path, sha256=loc.sha256, length=loc.length)
        assert hashlib.sha256(got.data).hexdigest() == loc.sha256 and got.attempts == 1
    transport.close()
    assert len(proxy.requests) == 8 and len({r.client_port for r in proxy.requests}) == 1


def test_a_length_or_hash_that_disagrees_with_the_manifest_is_never_returned(proxy):
    transport = HttpTransport(proxy.url, retry=RetryPolicy(attempts=2, backoff_s=0.01))
    path, loc = shard(transport, 0)
    with pytest.raises(ShardCorrupt):
        transport.download(path, sha256="0" * 64, length=loc.length)
    with pytest.raises(ShardCorrupt):
        transport.download(path, sha256=loc.sha256, length=loc.length + 1)


def test_malformed_server_url_and_error_bodies():
    with pytest.raises(ValueError):
        HttpTransport("ftp://example")
    with pytest.raises(ValueError):
        HttpTransport("not a url")


def test_the_servers_error_code_is_the_errors_code(proxy):
    transport = HttpTransport(proxy.url)
    with pytest.raises(ServerError) as err:
        transport.get("/v1/templates/Bad!/versions/1/manifest")
    assert err.value.status == 400 and err.value.code == "invalid_template_id"
    with pytest.deprecated_call():
        assert err.value.server_code == "invalid_template_id"  # the old name still reads it


@pytest.mark.parametrize("body, code", [
    (b'{"code": "not_found", "message": "no such template"}', "not_found"),
    (b'{"message": "no code"}', "http_error"),
    (b"<html>busy</html>", "http_error"),
    (b'{"code": "Not-Found"}', "server_error"),
    (b'{"code": "a' + b"b" * 64 + b'"}', "server_error"),  # 65 characters: not cut to a valid 64
    (b'{"code": "bad\\nline"}', "server_error"),
    (b'{"code": ["not_found"]}', "server_error"),
    (b'{"code": 404}', "server_error"),
], ids=["valid", "none", "not-json", "outside-grammar", "too-long", "control", "a-list", "a-number"])
def test_a_servers_code_outside_the_grammar_leaves_server_error(body, code):
    from sakura.edge_client._http.responses import server_error

    error = server_error(404, body)
    assert error.status == 404 and error.code == code


@pytest.mark.parametrize("body", [
    b"not json", b"\xff\xfe", b"[" * 100_000 + b"]" * 100_000, b'{"n": ' + b"9" * 5000 + b"}", b"[1]",
], ids=["not-json", "not-utf8", "nested", "huge-number", "not-an-object"])
def test_an_answer_that_is_no_json_object_is_a_server_error(body):
    from sakura.edge_client._http.transport import Reply

    with pytest.raises(ServerError, match="bad_json"):
        Reply(200, {}, body).json()


def test_trace_link_paces_a_download_exactly_as_the_trace_delivers_it(proxy):
    """On a virtual clock: the download's waits add up to one round trip plus its bytes at the
    trace's rate (never faster, and no time lost between chunks)."""
    rate_mbps, clock = 4.0, VirtualClock()
    trace = BandwidthTrace("flat", "test", np.array([0.0]), np.array([rate_mbps]), 60.0)
    link = TraceLink(trace, rtt_s=0.02, clock=clock.now, wait=clock.wait)
    transport = HttpTransport(proxy.url, link=link)
    path, loc = shard(transport, 0, "full")
    start = clock.now()
    transport.download(path, sha256=loc.sha256, length=loc.length)
    assert clock.now() - start == pytest.approx(0.02 + loc.length * 8 / (rate_mbps * 1e6))
    assert len(clock.waits) > 2  # paced chunk by chunk, not as one lump


@pytest.mark.parametrize("span", [
    "bytes=\u0660-99", "bytes=0-\u0669\u0669", "bytes=0-\uff19\uff19", "bytes= 0-99", "bytes=+0-99", "bytes=0-9_9",
    "bytes=00-99", "bytes=0-99-", "bytes=-1-98", "bytes=0-" + "9" * 16, "bytes=0-\u00b2",
], ids=["arabic-indic-start", "arabic-indic-end", "fullwidth", "space", "plus", "underscore", "leading-zero",
        "three-parts", "negative", "too-long", "superscript"])
def test_an_x_sakura_range_is_canonical_ascii_decimal_or_a_redirect_error(span):
    """What int() takes besides ASCII digits (other scripts' digits, a sign, a space, "_") is refused."""
    from sakura.edge_client._http.responses import sakura_range

    class Redirect:
        def getheader(self, name, default=None):
            return span if name == "X-Sakura-Range" else default

    with pytest.raises(RedirectError, match="malformed X-Sakura-Range"):
        sakura_range(Redirect(), 100)


def test_a_canonical_x_sakura_range_is_the_payloads_span():
    from sakura.edge_client._http.responses import sakura_range

    class Redirect:
        def getheader(self, name, default=None):
            return "bytes=1000-1099" if name == "X-Sakura-Range" else default

    assert sakura_range(Redirect(), 100) == (1000, 1099)
    with pytest.raises(RedirectError, match="does not cover"):
        sakura_range(Redirect(), 101)
