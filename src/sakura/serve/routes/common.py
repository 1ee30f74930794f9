"""What the routes share: the service's state, the reader's API-key check, cache headers and
conditional requests."""

from __future__ import annotations

import hmac

from fastapi import Request

from sakura.serve.config import ServeConfig
from sakura.serve.errors import ApiError
from sakura.serve.reader import ShardReader

__all__ = ["IMMUTABLE", "NO_CACHE", "bearer", "cache_control", "config_of", "etag_matches", "reader_of",
           "require_reader_auth"]

IMMUTABLE = "public, max-age=31536000, immutable"
NO_CACHE = "no-cache"


def reader_of(request: Request) -> ShardReader:
    return request.app.state.reader


def config_of(request: Request) -> ServeConfig:
    return request.app.state.config


def cache_control(is_alias: bool) -> str:
    """Numeric versions never change; what an alias names may."""
    return NO_CACHE if is_alias else IMMUTABLE


def require_reader_auth(request: Request) -> None:
    keys = config_of(request).api_keys
    if keys:
        key = request.headers.get("x-api-key") or bearer(request)
        if key is None:
            raise ApiError(401, "missing_api_key", "an API key is required", {"WWW-Authenticate": "Bearer"})
        if not any(hmac.compare_digest(key.encode(), k.encode()) for k in keys):
            raise ApiError(403, "bad_api_key", "the API key is not valid")


def bearer(request: Request) -> str | None:
    auth = request.headers.get("authorization", "")
    return auth[7:].strip() if auth.lower().startswith("bearer ") else None


def etag_matches(request: Request, etag: str) -> bool:
    header = request.headers.get("if-none-match")
    if not header:
        return False
    return header.strip() == "*" or etag in [t.strip().removeprefix("W/") for t in header.split(",")]


def query_param(request: Request, name: str, code: str = "invalid_request", form: str = "") -> str | None:
    """A query parameter the service reads: absent (None) or given once; a repeat is a 400 ``code``
    (which of the values would count is left to no cache or proxy in between). ``form``: what
    the message adds about the value's spelling."""
    values = request.query_params.getlist(name)
    if len(values) > 1:
        raise ApiError(400, code, f"{name} must be given at most once{form}")
    return values[0] if values else None

