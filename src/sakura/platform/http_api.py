"""The HTTP API's paths (DESIGN.md, API v1), spelled once: the server's routes are these
templates, the edge client formats them."""

from __future__ import annotations

CATALOGUE = "/v1/templates"
VERSIONS = CATALOGUE + "/{template_id}/versions"
MANIFEST = VERSIONS + "/{version}/manifest"
SHARD = VERSIONS + "/{version}/shards/{shard}/{level}"
CONTEXT = VERSIONS + "/{version}/context/{name}"
SOURCE = VERSIONS + "/{version}/source/{name}"
ALIAS = CATALOGUE + "/{template_id}/aliases/{alias}"


def manifest_path(template_id: str, version: int | str) -> str:
    return MANIFEST.format(template_id=template_id, version=version)


def shard_path(template_id: str, version: int, shard: int, level: str) -> str:
    return SHARD.format(template_id=template_id, version=version, shard=shard, level=level)


def context_path(template_id: str, version: int, name: str) -> str:
    return CONTEXT.format(template_id=template_id, version=version, name=name)


def source_path(template_id: str, version: int, name: str) -> str:
    return SOURCE.format(template_id=template_id, version=version, name=name)
