"""The HTTP API (``docs/architecture.md``, "The wire format") as a FastAPI app (served by Ray
Serve; testable without it): the service's state, its error responses and its routes
(:mod:`sakura.serve.routes`, one module a concern).

Numeric versions and their shards are immutable: strong ETag (the sha256), ``Cache-Control:
public, max-age=31536000, immutable``, ``If-None-Match`` -> 304 and ``Range`` -> 206/416, so a
CDN can sit in front. Alias responses are ``no-cache``. Errors are JSON with a stable ``code``
and a message the service composed: a store's, library's or manifest's own message can name
internal paths, URIs and keys, so it is logged (logger ``sakura.serve``), never sent.
"""

from __future__ import annotations

import logging

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException as StarletteHTTPException

from sakura.platform.errors import InvalidTemplateId, SakuraError
from sakura.platform.layout import InvalidName
from sakura.platform.levelfile import ShardIntegrityError
from sakura.platform.library import LibraryError
from sakura.platform.manifest import ManifestError
from sakura.platform.store import NotFound, StoreError, TransientStoreError
from sakura.serve.access import AccessMiddleware
from sakura.serve.config import ServeConfig
from sakura.serve.errors import ApiError, error_response
from sakura.serve.metrics import ServeMetrics
from sakura.serve.reader import ShardReader
from sakura.serve.routes import ROUTERS

log = logging.getLogger("sakura.serve")


def create_api(config: ServeConfig, metrics: ServeMetrics | None = None) -> FastAPI:
    """The API over ``config``'s library; ``metrics`` default to in-memory ones (a Serve replica
    passes Ray's, see :mod:`sakura.serve.metrics`)."""
    metrics = metrics or ServeMetrics()
    reader = ShardReader(config, metrics)
    api = FastAPI(title="SAKURA shard service", version="1", docs_url=None, redoc_url=None)
    api.state.metrics = metrics
    _install_error_handlers(api, config)
    api.add_middleware(AccessMiddleware, metrics=metrics)

    api.state.reader, api.state.config = reader, config
    for router in ROUTERS:
        api.include_router(router)
    return api


#: Errors raised below the service: (kind, status, code, public message; None: the error's own
#: message, for validators whose messages echo only the request). Retry-After on every 503.
_ERRORS: list[tuple[type[BaseException], int, str, str | None]] = [
    (InvalidTemplateId, 400, "invalid_template_id", None),
    (InvalidName, 400, "invalid_request", None),
    (LibraryError, 404, "not_found", "not found"),
    (NotFound, 503, "store_fault", "the template store is missing data it should hold; retry later"),
    (ShardIntegrityError, 502, "shard_corrupt", "the stored bytes of this shard do not match its checksum"),
    (ManifestError, 502, "invalid_manifest", "a document in the template store is corrupt"),
    (TransientStoreError, 503, "store_unavailable", "the template store is unavailable; retry later"),
    (StoreError, 502, "store_error", "the template store failed"),
]


def _install_error_handlers(api: FastAPI, config: ServeConfig) -> None:
    retry = {"Retry-After": str(config.retry_after_s)}

    @api.exception_handler(ApiError)
    async def api_error(_: Request, exc: ApiError) -> JSONResponse:
        return error_response(exc.status, exc.code, exc.message, {**exc.headers, **(retry if exc.retry else {})})

    @api.exception_handler(SakuraError)
    async def sakura_error(request: Request, exc: SakuraError) -> JSONResponse:
        status, code, message = next(((s, c, m) for kind, s, c, m in _ERRORS if isinstance(exc, kind)),
                                     (500, exc.code, "internal error"))
        log.log(logging.ERROR if status >= 500 else logging.INFO, "%s %s -> %s %s: %s: %s", request.method,
                request.url.path, status, code, type(exc).__name__, exc)
        return error_response(status, code, str(exc) if message is None else message, retry if status == 503 else {})

    @api.exception_handler(RequestValidationError)
    async def invalid(_: Request, exc: RequestValidationError) -> JSONResponse:
        return error_response(400, "invalid_request", "malformed request")

    @api.exception_handler(StarletteHTTPException)
    async def http_error(_: Request, exc: StarletteHTTPException) -> JSONResponse:
        return error_response(exc.status_code, "not_found" if exc.status_code == 404 else "http_error", str(exc.detail))

    @api.exception_handler(Exception)
    async def unexpected(_: Request, exc: Exception) -> JSONResponse:
        logging.getLogger("sakura.serve").exception("unexpected error")
        return error_response(500, "internal", "internal error")
