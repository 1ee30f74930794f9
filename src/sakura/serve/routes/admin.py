"""The admin's writes: point an alias at a version (bearer token required)."""

from __future__ import annotations

import hmac

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse
from starlette.concurrency import run_in_threadpool

from sakura.platform import http_api
from sakura.serve.body import parse_alias_body, read_capped
from sakura.serve.config import ServeConfig
from sakura.serve.errors import ApiError
from sakura.serve.routes.common import NO_CACHE, bearer, config_of, reader_of

router = APIRouter()


@router.put(http_api.ALIAS)
async def put_alias(template_id: str, alias: str, request: Request) -> JSONResponse:
    _require_admin(request, config_of(request))
    body = parse_alias_body(await read_capped(request))
    await run_in_threadpool(reader_of(request).set_alias, template_id, alias, body.version, force=body.force,
                            allow_model_change=body.allow_model_change)
    return JSONResponse({"id": template_id, "alias": alias, "version": body.version},
                        headers={"Cache-Control": NO_CACHE})


def _require_admin(request: Request, config: ServeConfig) -> None:
    if not config.admin_token:
        raise ApiError(403, "admin_disabled", "alias updates are disabled: no admin token is configured")
    token = bearer(request)
    if token is None:
        raise ApiError(401, "missing_token", "an admin bearer token is required", {"WWW-Authenticate": "Bearer"})
    if not hmac.compare_digest(token.encode(), config.admin_token.encode()):
        raise ApiError(403, "bad_token", "the admin token is not valid")
