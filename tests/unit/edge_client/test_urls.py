"""Which URLs the client talks to: http(s) only, an app-controlled redirect policy, loops caught."""

from __future__ import annotations

import pytest

from sakura.edge_client import UrlPolicy
from sakura.edge_client.errors import ConfigError, RedirectError


@pytest.mark.parametrize("url", ["127.0.0.1:8000", "ftp://host/", "file:///etc/passwd", "http://", "http://host:99999",
                                 "http://host:port", "http://user:secret@host/", "javascript:alert(1)"])
def test_a_server_url_must_be_plain_http_or_https(url):
    with pytest.raises(ConfigError):
        UrlPolicy().server(url)


def test_https_only_applies_to_the_server_and_to_every_redirect():
    policy = UrlPolicy(https_only=True)
    assert policy.server("https://cdn.example/base/") == "https://cdn.example/base"
    with pytest.raises(ConfigError):
        policy.server("http://cdn.example")
    with pytest.raises(RedirectError, match="scheme"):
        policy.follow("https://a.example/x", "http://b.example/y", {"https://a.example/x"})


@pytest.mark.parametrize("location", ["ftp://b.example/y", "gopher://b.example/", "http://b.example:70000/",
                                      "http://u:p@b.example/", "data:text/plain,hi", ""])
def test_redirects_go_only_to_http_or_https(location):
    with pytest.raises(RedirectError):
        UrlPolicy().follow("http://a.example/x", location, {"http://a.example/x"})


def test_relative_redirects_resolve_and_hosts_can_be_allow_listed():
    policy = UrlPolicy(redirect_hosts=frozenset({"Bucket.example"}))
    assert policy.follow("http://bucket.example/a/b", "../c?sig=1", set()) == "http://bucket.example/c?sig=1"
    with pytest.raises(RedirectError, match="evil.example"):
        policy.follow("http://bucket.example/a", "http://evil.example/a", set())
    with pytest.raises(RedirectError):
        UrlPolicy(redirect_hosts=frozenset()).follow("http://a.example/", "/b", set())


def test_a_redirect_loop_says_so():
    policy, visited = UrlPolicy(max_redirects=3), {"http://a.example/0"}
    with pytest.raises(RedirectError, match="redirect loop"):
        policy.follow("http://a.example/1", "/0", visited)
    hops = {"http://a.example/0"}
    for i in range(1, 4):
        policy.follow("http://a.example/", f"/{i}", hops)
    with pytest.raises(RedirectError, match="redirect loop: more than 3"):
        policy.follow("http://a.example/", "/4", hops)


def test_a_presigned_query_stays_out_of_error_messages():
    with pytest.raises(RedirectError) as err:
        UrlPolicy().follow("http://a.example/", "ftp://b.example/k?X-Amz-Signature=secret", set())
    assert "secret" not in str(err.value)
