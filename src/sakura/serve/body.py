"""Admin request bodies: read with a hard byte cap, accepted only as one flat JSON object.

The cap is checked against ``Content-Length`` before anything is read, then again while the
body streams in (a chunked body has no length), so a replica never holds more than the cap.
A flat object has exactly one ``{`` and no ``[``: checking that first keeps the JSON parser's
recursion at one level whatever the body holds.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

from starlette.requests import Request

from sakura.platform.layout import MAX_VERSION, InvalidName, parse_number, validate_version
from sakura.serve.errors import ApiError

MAX_BODY_BYTES = 4096
ALIAS_BODY = ('expected a JSON object {"version": N}, with optional booleans "force" (overwrite an unreadable '
              'alias) and "allow_model_change" (move it onto a version built for another model)')
_ALIAS_FLAGS = ("force", "allow_model_change")


@dataclass(frozen=True)
class AliasRequest:
    version: int
    force: bool = False
    allow_model_change: bool = False


async def read_capped(request: Request, cap: int = MAX_BODY_BYTES) -> bytes:
    """The request body, or a 413 as soon as it is known to exceed ``cap`` bytes."""
    declared = request.headers.get("content-length")
    if declared is not None:
        size = parse_number(declared.strip(), max_digits=20)
        if size is None:
            raise ApiError(400, "invalid_body", "Content-Length is not a number")
        if size > cap:
            raise _too_large(cap)
    chunks, size = [], 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > cap:
            raise _too_large(cap)
        chunks.append(chunk)
    return b"".join(chunks)


def parse_alias_body(data: bytes) -> AliasRequest:
    """An :class:`AliasRequest` from ``{"version": N}`` with the optional boolean flags."""
    try:
        text = data.decode("utf-8")
        if text.count("{") != 1 or "[" in text:
            raise ValueError("not a flat object")
        doc = json.loads(text, object_pairs_hook=_unique)
    except ValueError:
        raise ApiError(400, "invalid_body", ALIAS_BODY) from None
    if not isinstance(doc, dict) or "version" not in doc or not set(doc) <= {"version", *_ALIAS_FLAGS}:
        raise ApiError(400, "invalid_body", ALIAS_BODY)
    for flag in _ALIAS_FLAGS:
        if not isinstance(doc.get(flag, False), bool):
            raise ApiError(400, "invalid_body", f'"{flag}" must be true or false')
    try:
        return AliasRequest(validate_version(doc["version"]), doc.get("force", False),
                            doc.get("allow_model_change", False))
    except InvalidName:
        raise ApiError(400, "invalid_body", f'"version" must be an integer in [1, {MAX_VERSION}]') from None


def _unique(pairs: list[tuple[str, object]]) -> dict[str, object]:
    doc = dict(pairs)
    if len(doc) != len(pairs):
        raise ValueError("duplicate key")
    return doc


def _too_large(cap: int) -> ApiError:
    return ApiError(413, "body_too_large", f"the request body exceeds {cap} bytes")
