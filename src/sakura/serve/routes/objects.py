"""A version's immutable bytes: shards (by index and level) and its context and source objects.
Strong ETag (the sha256), ``If-None-Match`` -> 304, ``Range`` -> 206/416, or a 307 to the object
store in redirect mode."""

from __future__ import annotations

from fastapi import APIRouter, Request, Response
from fastapi.responses import RedirectResponse
from starlette.concurrency import run_in_threadpool

from sakura.platform import http_api
from sakura.platform.layout import parse_number, validate_level
from sakura.platform.manifest import Manifest
from sakura.serve.config import ServeConfig
from sakura.serve.errors import ApiError
from sakura.serve.ranges import RangeNotSatisfiable, parse_range
from sakura.serve.reader import ShardRef
from sakura.serve.routes.common import cache_control, config_of, etag_matches, reader_of, require_reader_auth

MAX_SHARD_INDEX = 1_000_000
router = APIRouter()


@router.get(http_api.SHARD)
async def shard(template_id: str, version: str, shard: str, level: str, request: Request) -> Response:
    require_reader_auth(request)
    reader = reader_of(request)
    index = _shard_index(shard)
    if level != http_api.SMALLEST_LEVEL:
        validate_level(level)
    number, is_alias = await run_in_threadpool(reader.resolve, template_id, version)
    manifest = await run_in_threadpool(reader.manifest, template_id, number)
    if index >= len(manifest.shards):
        raise ApiError(404, "unknown_shard", f"{template_id} v{number} has {len(manifest.shards)} shards")
    if level == http_api.SMALLEST_LEVEL:
        level = next(lv.name for lv in manifest.levels if lv.name in manifest.shards[index].levels)
    if level not in manifest.shards[index].levels:
        raise ApiError(404, "unknown_level", f"{template_id} v{number} has no level {level!r}")
    response = await _object(request, manifest, reader.locate(manifest, index, level), f"#{index} {level}", is_alias)
    response.headers[http_api.SHARD_LEVEL] = level
    return response


@router.get(http_api.CONTEXT)
async def context(template_id: str, version: str, name: str, request: Request) -> Response:
    return await _named_object("context", template_id, version, name, request)


@router.get(http_api.SOURCE)
async def source(template_id: str, version: str, name: str, request: Request) -> Response:
    return await _named_object("source", template_id, version, name, request)


async def _named_object(kind: str, template_id: str, version: str, name: str, request: Request) -> Response:
    """A context or source object the version's manifest lists under ``kind`` (the template's
    images are source objects)."""
    require_reader_auth(request)
    reader = reader_of(request)
    number, is_alias = await run_in_threadpool(reader.resolve, template_id, version)
    manifest = await run_in_threadpool(reader.manifest, template_id, number)
    listed = manifest.bundle(context=True, source=True, images=True)
    entry = next((e for k, e in listed if k == kind and e.name == name), None)
    if entry is None:
        raise ApiError(404, f"unknown_{kind}", f"{template_id} v{number} has no {kind} object {name[:64]!r}")
    return await _object(request, manifest, reader.locate_object(entry), f"{kind} {name}", is_alias)


async def _object(request: Request, manifest: Manifest, ref: ShardRef, what: str, is_alias: bool) -> Response:
    """Immutable bytes (a shard's payload, a context or source object): ETag, 304, redirect mode, Range."""
    config = config_of(request)
    etag = f'"{ref.location.sha256}"'
    headers = {"ETag": etag, "Cache-Control": cache_control(is_alias), "Accept-Ranges": "bytes",
               "X-Sakura-Version": str(manifest.version)}
    if etag_matches(request, etag):
        return Response(status_code=304, headers=headers)
    if config.mode == "redirect":
        return _redirect(ref, headers, config)
    data = (await run_in_threadpool(reader_of(request).read, manifest, ref, what)).data
    requested = request.headers.get("range")
    if requested and (not request.headers.get("if-range") or request.headers.get("if-range") == etag):
        try:
            span = parse_range(requested, len(data))
        except RangeNotSatisfiable:
            raise ApiError(416, "range_not_satisfiable", f"range {requested!r} is outside {len(data)} bytes",
                           {"Content-Range": f"bytes */{len(data)}"}) from None
        if span is not None:
            start, end = span
            headers["Content-Range"] = f"bytes {start}-{end - 1}/{len(data)}"
            return Response(data[start:end], status_code=206, media_type="application/octet-stream", headers=headers)
    return Response(data, media_type="application/octet-stream", headers=headers)


def _redirect(ref: ShardRef, headers: dict[str, str], config: ServeConfig) -> Response:
    """307 to the object holding the bytes; the client reads them with a Range."""
    if config.cdn_base_url:
        url = f"{config.cdn_base_url.rstrip('/')}/{ref.key}"
    elif hasattr(ref.store, "presigned_url"):
        url = ref.store.presigned_url(ref.key, config.presign_ttl_s)
    else:
        raise ApiError(501, "redirect_unavailable", "redirect mode needs an S3 store or a CDN base URL")
    loc = ref.location
    where = f"bytes={loc.offset}-{loc.offset + loc.length - 1}"
    headers = {**headers, "X-Sakura-Range": where, "Cache-Control": "no-store"}
    return RedirectResponse(url, status_code=307, headers=headers)


def _shard_index(text: str) -> int:
    index = parse_number(text, max_digits=7)
    if index is None or index > MAX_SHARD_INDEX:
        raise ApiError(400, "invalid_shard", f"shard must be an integer in [0, {MAX_SHARD_INDEX}]")
    return index
