"""Typed errors of the edge client: every error it raises is an :class:`EdgeError`, with the
stable ``code`` of :class:`SakuraError`.

What the shared core raises on the phone's behalf (a manifest that does not parse, a shard that
does not decode, a bad template id) reaches the app as the edge counterpart of that error, which
is both an :class:`EdgeError` and the core's type (``except ManifestError`` still catches it).
"""

from __future__ import annotations

import functools
import re
import warnings
from collections.abc import Callable
from typing import ParamSpec, TypeVar

from sakura.platform.context import ContextError
from sakura.platform.errors import (
    CodecError,
    ImageError,
    InvalidTemplateId,
    ModelError,
    SakuraError,
    UnknownModel,
    shown,
)
from sakura.platform.layout import InvalidName
from sakura.platform.manifest import ManifestError


class EdgeError(SakuraError):
    code = "edge_error"


class TransportError(EdgeError, ConnectionError):
    """The server could not be reached, or kept failing, within the retry budget."""

    code = "transport_error"


#: The grammar a server's error code must match to become :attr:`ServerError.code` (it comes
#: from the network: an app may log it, compare it or show it).
SERVER_CODE = re.compile(r"[a-z][a-z0-9_]{0,63}")


class ServerError(EdgeError):
    """The server answered with an error that retrying will not fix (4xx), or with nonsense.

    ``code`` is the server's own code for the error (e.g. ``"not_found"``), so an app can tell
    errors apart; it comes from the network, so it is taken only when it matches
    ``[a-z][a-z0-9_]{0,63}``, and a code outside that grammar leaves the class's
    ``"server_error"``. The client names what it found itself: ``"http_error"`` (an error status
    whose body names no code), ``"bad_json"``, ``"too_large"`` and ``"redirect_failed"``.
    ``status`` is the HTTP status.
    """

    code = "server_error"

    def __init__(self, status: int, server_code: str, message: str) -> None:
        accepted = SERVER_CODE.fullmatch(server_code) is not None
        super().__init__(f"HTTP {status} {server_code if accepted else shown(server_code)}: {message}")
        self.status = status
        if accepted:
            self.code = server_code

    @property
    def server_code(self) -> str:
        """Deprecated: read :attr:`code`, which now holds the server's code (this was where it was
        while ``code`` was always ``"server_error"``)."""
        warnings.warn("ServerError.server_code is deprecated; read ServerError.code", DeprecationWarning,
                      stacklevel=2)
        return self.code


class ShardCorrupt(EdgeError, CodecError):
    """A shard's bytes kept failing their sha256 or length check (never used, refetched until
    this), or passed it and still do not decode."""

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


class InvalidManifest(EdgeError, ManifestError):
    """A manifest or preamble from the server is malformed, for another template, or one this
    device's model cannot take."""

    code = "invalid_manifest"


class InvalidObject(EdgeError, ContextError):
    """A context or source object that passed its sha256 does not decode to what its entry says."""

    code = "invalid_object"


class WrongModel(EdgeError, ModelError):
    """The template was built for another model than the one this device has (or the model failed)."""

    code = "model_error"


class UnknownDeviceModel(EdgeError, UnknownModel):
    """The manifest names a model this device cannot load."""

    code = "unknown_model"


class InvalidRequest(EdgeError, InvalidName, InvalidTemplateId):
    """The app asked for a template id or version that is not one (see the project's grammars)."""

    code = "invalid_request"


class InvalidPhoto(EdgeError, ImageError):
    """The photo the app passed is not an image the model can take."""

    code = "invalid_image"


#: The edge counterpart of each core error the phone path can raise, most specific first.
_COUNTERPARTS: tuple[tuple[type[SakuraError], type[EdgeError]], ...] = (
    (ManifestError, InvalidManifest), (ContextError, InvalidObject), (CodecError, ShardCorrupt),
    (UnknownModel, UnknownDeviceModel), (ModelError, WrongModel), (InvalidName, InvalidRequest),
    (InvalidTemplateId, InvalidRequest), (ImageError, InvalidPhoto),
)

P = ParamSpec("P")
R = TypeVar("R")


def as_edge_error(exc: SakuraError) -> EdgeError:
    """``exc`` as the edge error an app sees (itself if it is one already)."""
    if isinstance(exc, EdgeError):
        return exc
    kind = next((edge for core, edge in _COUNTERPARTS if isinstance(exc, core)), None)
    if kind is not None:
        return kind(str(exc))
    error = EdgeError(str(exc))
    error.code = exc.code
    return error


def raises_edge_errors(method: Callable[P, R]) -> Callable[P, R]:
    """Decorate a public method so that every :class:`SakuraError` leaves it as an :class:`EdgeError`."""

    @functools.wraps(method)
    def wrapper(*args: P.args, **kwargs: P.kwargs) -> R:
        try:
            return method(*args, **kwargs)
        except EdgeError:
            raise
        except SakuraError as exc:
            raise as_edge_error(exc) from exc

    return wrapper
