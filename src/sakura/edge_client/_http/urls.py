"""Which URLs the edge client talks to: the server's, and where a redirect may send it.

An app hands the client a server URL, and a server (or a CDN, a captive portal, a compromised
origin) hands it redirects. The client only ever speaks http or https, never follows a redirect
to another scheme, follows at most ``max_redirects`` hops, and never sends credentials past the
first hop (the transport's job). An app can narrow this further for production: ``https_only``
(the server URL and every redirect target) and ``redirect_hosts`` (an allow-list of hosts a
redirect may go to, e.g. the CDN's and the bucket's).
"""

from __future__ import annotations

from dataclasses import dataclass
from urllib.parse import urljoin, urlsplit

from sakura.edge_client.errors import ConfigError, RedirectError

SCHEMES = ("http", "https")
#: (scheme, host, port): what a kept-alive connection is keyed by.
Origin = tuple[str, str, int]


@dataclass(frozen=True)
class UrlPolicy:
    https_only: bool = False
    #: Hosts a redirect may lead to (lower case); None allows any host, an empty set none at all.
    redirect_hosts: frozenset[str] | None = None
    max_redirects: int = 5

    def __post_init__(self) -> None:
        if self.redirect_hosts is not None:
            object.__setattr__(self, "redirect_hosts", frozenset(h.lower() for h in self.redirect_hosts))

    def server(self, url: str) -> str:
        """The server's base URL, checked; a bad one is a :class:`ConfigError` (the app's mistake)."""
        try:
            origin(url, self.schemes)
        except ValueError as exc:
            raise ConfigError(f"server URL must be {'|'.join(self.schemes)}://host[:port][/prefix], "
                              f"got {url!r}: {exc}") from None
        return url.rstrip("/")

    def follow(self, current: str, location: str | None, visited: set[str]) -> str:
        """The absolute URL a redirect from ``current`` leads to, or a :class:`RedirectError`."""
        if not location:
            raise RedirectError(f"redirect from {_safe(current)} without a Location")
        target = urljoin(current, location.strip())
        try:
            _, host, _ = origin(target, self.schemes)
        except ValueError as exc:
            raise RedirectError(f"refused redirect to {_safe(target)}: {exc}") from None
        if self.redirect_hosts is not None and host not in self.redirect_hosts:
            raise RedirectError(f"refused redirect to host {host!r}: not in the allowed redirect hosts")
        if target in visited or len(visited) > self.max_redirects:
            raise RedirectError(f"redirect loop: {len(visited)} redirects, back to {_safe(target)}"
                                if target in visited else f"redirect loop: more than {self.max_redirects} redirects")
        visited.add(target)
        return target

    @property
    def schemes(self) -> tuple[str, ...]:
        return ("https",) if self.https_only else SCHEMES


def origin(url: str, schemes: tuple[str, ...] = SCHEMES) -> Origin:
    """(scheme, host, port) of an absolute http(s) URL; ValueError for anything else."""
    parts = urlsplit(url)
    if parts.scheme not in schemes:
        raise ValueError(f"scheme {parts.scheme or '(none)'!r} is not one of {list(schemes)}")
    if not parts.hostname:
        raise ValueError("no host")
    if parts.username is not None or parts.password is not None:
        raise ValueError("credentials in the URL")
    port = parts.port  # raises ValueError for a port that is not a number in [0, 65535]
    return parts.scheme, parts.hostname, port or (443 if parts.scheme == "https" else 80)


def request_target(url: str) -> str:
    parts = urlsplit(url)
    return (parts.path or "/") + (f"?{parts.query}" if parts.query else "")


def _safe(url: str) -> str:
    """A URL for an error message: no query (a presigned URL's signature stays out of logs)."""
    return url.split("?", 1)[0][:200]
