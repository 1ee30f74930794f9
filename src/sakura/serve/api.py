"""The HTTP API of DESIGN.md as a FastAPI app (served by Ray Serve; testable without it).

Numeric versions and their shards are immutable: strong ETag (the sha256), ``Cache-Control:
public, max-age=31536000, immutable``, ``If-None-Match`` -> 304 and ``Range`` -> 206/416, so a
CDN can sit in front. Alias responses are ``no-cache``. Errors are JSON with a stable ``code``
and a message the service composed: a store's, library's or manifest's own message can name
internal paths, URIs and keys, so it is logged (logger ``sakura.serve``), never sent.
"""

from __future__ import annotations

import hashlib
import hmac
import logging

from fastapi import FastAPI, Request, Response
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, RedirectResponse
from starlette.concurrency import run_in_threadpool
from starlette.exceptions import HTTPException as StarletteHTTPException

from sakura.platform import http_api
from sakura.platform.errors import InvalidTemplateId, SakuraError
from sakura.platform.layout import InvalidName, parse_number, validate_level
from sakura.platform.levelfile import ShardIntegrityError
from sakura.platform.library import LibraryError
from sakura.platform.manifest import ManifestError
from sakura.platform.store import NotFound, StoreError, TransientStoreError
from sakura.serve.access import AccessMiddleware
from sakura.serve.body import parse_alias_body, read_capped
from sakura.serve.config import ServeConfig
from sakura.serve.errors import ApiError, error_response
from sakura.serve.metrics import ServeMetrics
from sakura.serve.ranges import RangeNotSatisfiable, parse_range
from sakura.serve.reader import ShardReader, ShardRef

IMMUTABLE = "public, max-age=31536000, immutable"
NO_CACHE = "no-cache"
MAX_SHARD_INDEX = 1_000_000
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

    def require_reader_auth(request: Request) -> None:
        if config.api_keys:
            key = request.headers.get("x-api-key") or _bearer(request)
            if key is None:
                raise ApiError(401, "missing_api_key", "an API key is required", {"WWW-Authenticate": "Bearer"})
            if not any(hmac.compare_digest(key.encode(), k.encode()) for k in config.api_keys):
                raise ApiError(403, "bad_api_key", "the API key is not valid")

    @api.get("/healthz")
    def healthz() -> dict:
        return {"status": "ok"}

    @api.get(http_api.CATALOGUE)
    def catalogue(request: Request) -> JSONResponse:
        require_reader_auth(request)
        after, limit = _page(request)
        templates, last = reader.catalogue(after, limit)
        page = {"templates": templates, "next_cursor": None if last is None else http_api.encode_cursor(last)}
        return JSONResponse(page, headers={"Cache-Control": NO_CACHE})

    @api.get(http_api.VERSIONS)
    def versions(template_id: str, request: Request) -> JSONResponse:
        require_reader_auth(request)
        return JSONResponse(reader.versions(template_id), headers={"Cache-Control": NO_CACHE})

    @api.get(http_api.MANIFEST)
    def manifest(template_id: str, version: str, request: Request) -> Response:
        require_reader_auth(request)
        number, is_alias = reader.resolve(template_id, version)
        phone = reader.phone_manifest(template_id, number)[1]
        zstd = _accepts_zstd(request)
        body = phone.zstd if zstd else phone.json
        etag = f'"{hashlib.sha256(body).hexdigest()}"'
        headers = {"ETag": etag, "Cache-Control": NO_CACHE if is_alias else IMMUTABLE, "X-Sakura-Version": str(number),
                   "Vary": "Accept-Encoding", **({"Content-Encoding": "zstd"} if zstd else {})}
        if _etag_matches(request, etag):
            return Response(status_code=304, headers=headers)
        return Response(body, media_type="application/json", headers=headers)

    @api.get(http_api.PREAMBLE)
    async def preamble(template_id: str, version: str, request: Request, source: int = 0,
                       context: int = 1, images: int = 0, hashes: int = 1) -> Response:
        """The manifest (without its shards' sha256s with ``hashes=0``) and, when they fit
        ``MAX_BUNDLED_BYTES``, its context (unless ``context=0``) and source (``source=1``) objects
        and its images (``images=1``)."""
        require_reader_auth(request)
        number, is_alias = await run_in_threadpool(reader.resolve, template_id, version)
        manifest, phone = await run_in_threadpool(reader.phone_manifest, template_id, number)
        head = phone.zstd if hashes else phone.unhashed
        entries = [entry for _, entry in manifest.bundle(context=bool(context), source=bool(source),
                                                          images=bool(images))]
        bundled = sum(e.length for e in entries) <= http_api.MAX_BUNDLED_BYTES
        parts = [head]
        for entry in entries if bundled else []:
            ref = reader.locate_object(entry)
            parts.append((await run_in_threadpool(reader.read, manifest, ref, entry.name)).data)
        headers = {"Cache-Control": NO_CACHE if is_alias else IMMUTABLE, "X-Sakura-Version": str(number),
                   http_api.PREAMBLE_MANIFEST_LENGTH: str(len(head)), http_api.PREAMBLE_BUNDLED: str(int(bundled))}
        return Response(b"".join(parts), media_type="application/octet-stream", headers=headers)

    @api.get(http_api.HASHES)
    async def shard_hashes(template_id: str, version: str, request: Request) -> Response:
        """Every shard's sha256 at every level (``PhoneManifest.shard_hashes``)."""
        require_reader_auth(request)
        number, is_alias = await run_in_threadpool(reader.resolve, template_id, version)
        body = (await run_in_threadpool(reader.phone_manifest, template_id, number))[1].hashes
        etag = f'"{hashlib.sha256(body).hexdigest()}"'
        headers = {"ETag": etag, "Cache-Control": NO_CACHE if is_alias else IMMUTABLE, "X-Sakura-Version": str(number)}
        if _etag_matches(request, etag):
            return Response(status_code=304, headers=headers)
        return Response(body, media_type="application/octet-stream", headers=headers)

    @api.get(http_api.SHARD)
    async def shard(template_id: str, version: str, shard: str, level: str, request: Request) -> Response:
        require_reader_auth(request)
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
        response = await _object(request, reader, manifest, reader.locate(manifest, index, level), f"#{index} {level}",
                                 is_alias, config)
        response.headers[http_api.SHARD_LEVEL] = level
        return response

    async def named_object(kind: str, template_id: str, version: str, name: str, request: Request) -> Response:
        """A context or source object the version's manifest lists under ``kind`` (the template's
        images are source objects)."""
        require_reader_auth(request)
        number, is_alias = await run_in_threadpool(reader.resolve, template_id, version)
        manifest = await run_in_threadpool(reader.manifest, template_id, number)
        listed = manifest.bundle(context=True, source=True, images=True)
        entry = next((e for k, e in listed if k == kind and e.name == name), None)
        if entry is None:
            raise ApiError(404, f"unknown_{kind}", f"{template_id} v{number} has no {kind} object {name[:64]!r}")
        return await _object(request, reader, manifest, reader.locate_object(entry), f"{kind} {name}", is_alias, config)

    @api.get(http_api.CONTEXT)
    async def context(template_id: str, version: str, name: str, request: Request) -> Response:
        return await named_object("context", template_id, version, name, request)

    @api.get(http_api.SOURCE)
    async def source(template_id: str, version: str, name: str, request: Request) -> Response:
        return await named_object("source", template_id, version, name, request)

    @api.put(http_api.ALIAS)
    async def put_alias(template_id: str, alias: str, request: Request) -> JSONResponse:
        _require_admin(request, config)
        body = parse_alias_body(await read_capped(request))
        await run_in_threadpool(reader.set_alias, template_id, alias, body.version, force=body.force,
                                allow_model_change=body.allow_model_change)
        return JSONResponse({"id": template_id, "alias": alias, "version": body.version},
                            headers={"Cache-Control": NO_CACHE})

    return api


async def _object(request: Request, reader: ShardReader, manifest, ref: ShardRef, what: str, is_alias: bool,
                  config: ServeConfig) -> Response:
    """Immutable bytes (a shard's payload, a context or source object): ETag, 304, redirect mode, Range."""
    etag = f'"{ref.location.sha256}"'
    headers = {"ETag": etag, "Cache-Control": NO_CACHE if is_alias else IMMUTABLE, "Accept-Ranges": "bytes",
               "X-Sakura-Version": str(manifest.version)}
    if _etag_matches(request, etag):
        return Response(status_code=304, headers=headers)
    if config.mode == "redirect":
        return _redirect(ref, headers, config)
    data = (await run_in_threadpool(reader.read, manifest, ref, what)).data
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


def _etag_matches(request: Request, etag: str) -> bool:
    header = request.headers.get("if-none-match")
    if not header:
        return False
    return header.strip() == "*" or etag in [t.strip().removeprefix("W/") for t in header.split(",")]


def _accepts_zstd(request: Request) -> bool:
    """``Accept-Encoding`` names zstd with a non-zero weight (RFC 9110 section 12.5.3)."""
    for item in request.headers.get("accept-encoding", "").split(","):
        coding, _, params = item.strip().partition(";")
        if coding.strip().lower() == "zstd":
            weight = params.replace(" ", "").lower()
            try:
                return not weight or (weight.startswith("q=") and float(weight[2:]) > 0)
            except ValueError:
                return False
    return False


def _bearer(request: Request) -> str | None:
    auth = request.headers.get("authorization", "")
    return auth[7:].strip() if auth.lower().startswith("bearer ") else None


def _require_admin(request: Request, config: ServeConfig) -> None:
    if not config.admin_token:
        raise ApiError(403, "admin_disabled", "alias updates are disabled: no admin token is configured")
    token = _bearer(request)
    if token is None:
        raise ApiError(401, "missing_token", "an admin bearer token is required", {"WWW-Authenticate": "Bearer"})
    if not hmac.compare_digest(token.encode(), config.admin_token.encode()):
        raise ApiError(403, "bad_token", "the admin token is not valid")


def _page(request: Request) -> tuple[str | None, int]:
    """The catalogue page a request asks for: (the id it starts after, its size)."""
    query = request.query_params
    limit = parse_number(query.get("limit", str(http_api.CATALOGUE_LIMIT)), max_digits=4)
    if limit is None or not 1 <= limit <= http_api.MAX_CATALOGUE_LIMIT:
        raise ApiError(400, "invalid_request", f"limit must be 1..{http_api.MAX_CATALOGUE_LIMIT}")
    cursor = query.get("cursor")
    if cursor is None:
        return None, limit
    try:
        return http_api.decode_cursor(cursor), limit
    except ValueError:
        raise ApiError(400, "invalid_cursor", "the cursor is not one this service gave out") from None


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
