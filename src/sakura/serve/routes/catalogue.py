"""Liveness and the catalogue: which templates there are, and each one's versions and aliases."""

from __future__ import annotations

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse

from sakura.platform import http_api
from sakura.platform.layout import parse_number
from sakura.serve.errors import ApiError
from sakura.serve.routes.common import NO_CACHE, query_param, reader_of, require_reader_auth

router = APIRouter()


@router.get("/healthz")
def healthz() -> dict:
    return {"status": "ok"}


@router.get(http_api.CATALOGUE)
def catalogue(request: Request) -> JSONResponse:
    require_reader_auth(request)
    after, limit = _page(request)
    templates, last = reader_of(request).catalogue(after, limit)
    page = {"templates": templates, "next_cursor": None if last is None else http_api.encode_cursor(last)}
    return JSONResponse(page, headers={"Cache-Control": NO_CACHE})


@router.get(http_api.VERSIONS)
def versions(template_id: str, request: Request) -> JSONResponse:
    require_reader_auth(request)
    return JSONResponse(reader_of(request).versions(template_id), headers={"Cache-Control": NO_CACHE})


def _page(request: Request) -> tuple[str | None, int]:
    """The catalogue page a request asks for: (the id it starts after, its size)."""
    limit_text, cursor = query_param(request, "limit"), query_param(request, "cursor", "invalid_cursor")
    limit = parse_number(str(http_api.CATALOGUE_LIMIT) if limit_text is None else limit_text, max_digits=4)
    if limit is None or not 1 <= limit <= http_api.MAX_CATALOGUE_LIMIT:
        raise ApiError(400, "invalid_request", f"limit must be 1..{http_api.MAX_CATALOGUE_LIMIT}")
    if cursor is None:
        return None, limit
    try:
        return http_api.decode_cursor(cursor), limit
    except ValueError:
        raise ApiError(400, "invalid_cursor", "the cursor is not one this service gave out") from None
