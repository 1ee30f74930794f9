"""A version's manifest as phones read it, the preamble (the manifest and the objects bundled
with it, in one response) and the shard hashes object."""

from __future__ import annotations

import hashlib

from fastapi import APIRouter, Request, Response
from starlette.concurrency import run_in_threadpool

from sakura.platform import http_api
from sakura.serve.errors import ApiError
from sakura.serve.routes.common import cache_control, etag_matches, query_param, reader_of, require_reader_auth

router = APIRouter()


@router.get(http_api.MANIFEST)
def manifest(template_id: str, version: str, request: Request) -> Response:
    require_reader_auth(request)
    reader = reader_of(request)
    number, is_alias = reader.resolve(template_id, version)
    phone = reader.phone_manifest(template_id, number)[1]
    zstd = _accepts_zstd(request)
    body = phone.zstd if zstd else phone.json
    etag = f'"{hashlib.sha256(body).hexdigest()}"'
    headers = {"ETag": etag, "Cache-Control": cache_control(is_alias), "X-Sakura-Version": str(number),
               "Vary": "Accept-Encoding", **({"Content-Encoding": "zstd"} if zstd else {})}
    if etag_matches(request, etag):
        return Response(status_code=304, headers=headers)
    return Response(body, media_type="application/json", headers=headers)


@router.get(http_api.PREAMBLE)
async def preamble(template_id: str, version: str, request: Request) -> Response:
    """The manifest (without its shards' sha256s with ``hashes=0``) and, when they fit
    ``MAX_BUNDLED_BYTES``, its context (unless ``context=0``) and source (``source=1``) objects
    and its images (``images=1``)."""
    require_reader_auth(request)
    source, context = _flag(request, "source", False), _flag(request, "context", True)
    images, hashes = _flag(request, "images", False), _flag(request, "hashes", True)
    reader = reader_of(request)
    number, is_alias = await run_in_threadpool(reader.resolve, template_id, version)
    manifest, phone = await run_in_threadpool(reader.phone_manifest, template_id, number)
    head = phone.zstd if hashes else phone.unhashed
    entries = [entry for _, entry in manifest.bundle(context=context, source=source, images=images)]
    bundled = sum(e.length for e in entries) <= http_api.MAX_BUNDLED_BYTES
    parts = [head]
    for entry in entries if bundled else []:
        ref = reader.locate_object(entry)
        parts.append((await run_in_threadpool(reader.read, manifest, ref, entry.name)).data)
    headers = {"Cache-Control": cache_control(is_alias), "X-Sakura-Version": str(number),
               http_api.PREAMBLE_MANIFEST_LENGTH: str(len(head)), http_api.PREAMBLE_BUNDLED: str(int(bundled))}
    return Response(b"".join(parts), media_type="application/octet-stream", headers=headers)


@router.get(http_api.HASHES)
async def shard_hashes(template_id: str, version: str, request: Request) -> Response:
    """Every shard's sha256 at every level (``PhoneManifest.shard_hashes``)."""
    require_reader_auth(request)
    reader = reader_of(request)
    number, is_alias = await run_in_threadpool(reader.resolve, template_id, version)
    body = (await run_in_threadpool(reader.phone_manifest, template_id, number))[1].hashes
    etag = f'"{hashlib.sha256(body).hexdigest()}"'
    headers = {"ETag": etag, "Cache-Control": cache_control(is_alias), "X-Sakura-Version": str(number)}
    if etag_matches(request, etag):
        return Response(status_code=304, headers=headers)
    return Response(body, media_type="application/octet-stream", headers=headers)


def _flag(request: Request, name: str, default: bool) -> bool:
    """A preamble flag: absent (its default) or given once, as ``0`` or ``1`` (what phones send: one
    spelling per answer, so a cache in front keeps one copy). Parameters the service does not know
    are ignored, as a later phone's may be."""
    value = query_param(request, name, form=", as 0 or 1")
    if value is None:
        return default
    if value not in ("0", "1"):
        raise ApiError(400, "invalid_request", f"{name} must be given at most once, as 0 or 1")
    return value == "1"


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
