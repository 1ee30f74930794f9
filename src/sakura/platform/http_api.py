"""The HTTP API's paths (docs/architecture.md, "The wire format"; API v1), spelled once: the server's routes are these
templates, the edge client formats them."""

from __future__ import annotations

import base64

from sakura.platform.store.base import InvalidKey, check_key

CATALOGUE = "/v1/templates"
VERSIONS = CATALOGUE + "/{template_id}/versions"
MANIFEST = VERSIONS + "/{version}/manifest"
SHARD = VERSIONS + "/{version}/shards/{shard}/{level}"
CONTEXT = VERSIONS + "/{version}/context/{name}"
SOURCE = VERSIONS + "/{version}/source/{name}"
PREAMBLE = VERSIONS + "/{version}/preamble"
HASHES = VERSIONS + "/{version}/hashes"
ALIAS = CATALOGUE + "/{template_id}/aliases/{alias}"

#: A manifest response is the phone-facing manifest (:class:`~sakura.platform.manifest.PhoneManifest`):
#: JSON, or its zstd frame (``Content-Encoding: zstd``) when the request accepts zstd.
#: A preamble response is the manifest's zstd frame (``PREAMBLE_MANIFEST_LENGTH`` bytes) followed by
#: its context objects (unless ``?context=0``: a phone that encodes the prompt itself) and, when asked
#: (``?source=1``), its source objects, and (``?images=1``) the template's images (a phone whose own
#: image codec makes the source from them), each in manifest order: what a phone needs before its first
#: shard, in one round trip. The images are source objects: ``SOURCE`` serves them by name. The server
#: bundles the objects only while they total at most ``MAX_BUNDLED_BYTES`` (else the phone fetches them one by one).
#: With ``?hashes=0`` the manifest comes without its shards' sha256s (a phone that may compute every
#: block itself); ``HASHES`` serves them (``PhoneManifest.shard_hashes``) to it once it fetches a shard.
PREAMBLE_MANIFEST_LENGTH = "X-Sakura-Manifest-Length"
PREAMBLE_BUNDLED = "X-Sakura-Bundled"
MAX_BUNDLED_BYTES = 16 << 20
#: In a shard path, the shard's smallest level, whatever its name (``SHARD_LEVEL`` says which it
#: was): a phone asks for its first shard this way together with the preamble, before it knows the
#: level names, so no round trip of idle link separates the two responses.
SMALLEST_LEVEL = "~smallest"
SHARD_LEVEL = "X-Sakura-Level"


#: ``GET CATALOGUE?limit=N&cursor=C`` answers ``{"templates": [...], "next_cursor": C' | null}``:
#: at most ``limit`` (1..``MAX_CATALOGUE_LIMIT``, default ``CATALOGUE_LIMIT``) templates, in a fixed
#: order; pass ``next_cursor`` back for the next page. A page may hold fewer than ``limit`` (only
#: published templates are listed) and still have a next one: the end is ``next_cursor: null``.
CATALOGUE_LIMIT = 100
MAX_CATALOGUE_LIMIT = 1000
_MAX_CURSOR = 172  # base64 of the longest key segment (128 characters)


def encode_cursor(after: str) -> str:
    """The opaque cursor of a page that starts after the store folder ``after``."""
    return base64.urlsafe_b64encode(after.encode()).decode().rstrip("=")


def decode_cursor(cursor: str) -> str:
    """The store folder a cursor continues after; ValueError if it is not one of ours."""
    if len(cursor) > _MAX_CURSOR:
        raise ValueError("cursor too long")
    try:
        after = base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4)).decode()
    except (ValueError, UnicodeDecodeError):
        raise ValueError("malformed cursor") from None
    if "/" in after or encode_cursor(after) != cursor:
        raise ValueError("malformed cursor")
    try:
        return check_key(after)  # one segment of an object key, never a path
    except InvalidKey:
        raise ValueError("malformed cursor") from None


def manifest_path(template_id: str, version: int | str) -> str:
    return MANIFEST.format(template_id=template_id, version=version)


def shard_path(template_id: str, version: int, shard: int, level: str) -> str:
    return SHARD.format(template_id=template_id, version=version, shard=shard, level=level)


def context_path(template_id: str, version: int, name: str) -> str:
    return CONTEXT.format(template_id=template_id, version=version, name=name)


def source_path(template_id: str, version: int, name: str) -> str:
    return SOURCE.format(template_id=template_id, version=version, name=name)


def hashes_path(template_id: str, version: int) -> str:
    return HASHES.format(template_id=template_id, version=version)


def preamble_path(template_id: str, version: int | str, *, source: bool, context: bool = True,
                  images: bool = False, hashes: bool = True) -> str:
    query = [*(["source=1"] if source else []), *([] if context else ["context=0"]), *(["images=1"] if images else []),
             *([] if hashes else ["hashes=0"])]
    return PREAMBLE.format(template_id=template_id, version=version) + ("?" + "&".join(query) if query else "")
