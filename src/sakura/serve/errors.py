"""The service's own errors: answered as they are, because the service composed their messages.

A store's, the library's or a manifest's message can name internal paths, URIs and object keys,
so those are logged (logger ``sakura.serve``) and answered with a fixed message instead
(:mod:`sakura.serve.api`). Messages here are built from the request only.
"""

from __future__ import annotations

from starlette.responses import JSONResponse

from sakura.platform.errors import SakuraError


class ApiError(SakuraError):
    """An HTTP error with a stable ``code``; ``retry`` adds ``Retry-After`` (the configured delay)."""

    def __init__(self, status: int, code: str, message: str, headers: dict[str, str] | None = None,
                 *, retry: bool = False) -> None:
        super().__init__(message)
        self.status, self.code, self.message = status, code, message
        self.headers, self.retry = dict(headers or {}), retry


def not_found(message: str) -> ApiError:
    return ApiError(404, "not_found", message)


def store_outage() -> ApiError:
    """The store (or its root: a directory, a bucket) cannot be read now."""
    return ApiError(503, "store_unavailable", "the template store is unavailable; retry later", retry=True)


def store_fault() -> ApiError:
    """An object the manifest lists is missing from the store: the operator must restore it."""
    return ApiError(503, "store_fault", "the template store is missing data it should hold; retry later", retry=True)


def error_response(status: int, code: str, message: str, headers: dict[str, str] | None = None) -> JSONResponse:
    """The one shape of every error the service answers: ``{"code", "message"}``, never cached."""
    return JSONResponse({"code": code, "message": message}, status_code=status,
                        headers={"Cache-Control": "no-store", **(headers or {})})
