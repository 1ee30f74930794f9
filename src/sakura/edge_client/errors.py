"""Typed errors of the edge client. Each carries the stable ``code`` of :class:`SakuraError`."""

from __future__ import annotations

from sakura.platform.errors import SakuraError


class EdgeError(SakuraError):
    code = "edge_error"


class TransportError(EdgeError, ConnectionError):
    """The server could not be reached, or kept failing, within the retry budget."""

    code = "transport_error"


class ServerError(EdgeError):
    """The server answered with an error that retrying will not fix (4xx), or with nonsense."""

    code = "server_error"

    def __init__(self, status: int, server_code: str, message: str) -> None:
        super().__init__(f"HTTP {status} {server_code}: {message}")
        self.status, self.server_code = status, server_code


class ShardCorrupt(EdgeError, ValueError):
    """A shard's bytes kept failing their sha256 or length check: never used, refetched until this."""

    code = "shard_corrupt"


class CachePathError(EdgeError, ValueError):
    """A cache path would not resolve to itself inside the cache folder (a link planted in it)."""

    code = "cache_path_refused"


class RedirectError(EdgeError):
    """A redirect the client refuses to follow (scheme, host, loop) or whose target misbehaved."""

    code = "bad_redirect"


class ConfigError(EdgeError, ValueError):
    """The app configured the client wrongly (a server URL that is not http(s), a bad limit)."""

    code = "invalid_config"


class EditCancelled(EdgeError):
    code = "edit_cancelled"


class PolicyError(EdgeError, ValueError):
    code = "invalid_policy"
