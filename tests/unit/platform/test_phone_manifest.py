"""The phone-facing manifest: pinned by golden bytes, free of server internals, tolerant of what a
later server adds and refusing only a schema with another major version.

Write a new golden when the phone schema's version changes (a minor version only adds fields, and
every earlier golden of the same major version must still be read):
``python -m tests.unit.platform.test_phone_manifest --write``.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
import zstandard

from sakura.platform import layout
from sakura.platform.manifest import (
    DIGEST_BYTES,
    MAX_MANIFEST_BYTES,
    PHONE_SCHEMA_VERSION,
    ContextEntry,
    ImageEntry,
    LevelEntry,
    Manifest,
    ManifestError,
    PhoneManifest,
)
from tests.unit.platform.library_helpers import synthetic_manifest

GOLDEN = Path(__file__).resolve().parents[2] / "golden" / f"manifest-v{PHONE_SCHEMA_VERSION}.json"
#: The goldens of earlier minor versions: what older servers send.
EARLIER = [Path(__file__).resolve().parents[2] / "golden" / f"manifest-v{v}.json" for v in ("1.0", "1.1", "1.2")]


def stored_manifest() -> Manifest:
    """A fixed stored manifest with every server internal set: a level in another tier, object keys,
    row groups, an importance key."""
    base = synthetic_manifest("tpl", 3)
    level = base.levels[0].model_copy(update={"format": 2})
    tiered = LevelEntry(name="full", store="s3://cold-tier/lib?endpoint=http://127.0.0.1:9", key="k/full.parquet",
                        bytes=level.bytes, spec={"bits": 16})
    shard = base.shards[0]
    context = ContextEntry(name="prompt_embeds", key=layout.level_key("tpl", 3, "ctx"), shape=(4, 8), dtype="float16",
                           length=40, sha256="a" * 64, encoding="lowrank")
    image = ImageEntry(name="template_image", key=layout.image_key("tpl", 3, "template_image"), format="jpeg",
                       width=64, height=64, length=2000, sha256="b" * 64)
    return base.model_copy(update={
        "levels": [level, tiered], "importance_key": "templates/tpl/versions/3/importance.npz", "context": [context],
        "images": [image],
        "shards": [shard.model_copy(update={"levels": {**shard.levels, "full": shard.levels["compact"]}})]})


def test_the_golden_pins_the_phone_view_byte_for_byte():
    golden = GOLDEN.read_bytes()
    assert stored_manifest().for_phone().to_json() == golden
    assert PhoneManifest.from_wire(golden).to_json() == golden


def test_the_phone_view_carries_no_store_uri_key_row_group_or_importance_key():
    doc = json.loads(GOLDEN.read_bytes())
    assert set(doc["levels"][1]) == {"name", "bytes", "spec", "format"}
    assert set(doc["shards"][0]["levels"]["full"]) == {"length", "sha256"}
    assert set(doc["context"][0]) == {"name", "shape", "dtype", "length", "sha256", "encoding"}
    assert set(doc["images"][0]) == {"name", "format", "width", "height", "length", "sha256"}
    assert "importance_key" not in doc and "created_at" not in doc
    assert not any(s in GOLDEN.read_text() for s in ("s3://", "file://", "parquet", "versions/"))


def test_an_earlier_minor_version_is_read_and_what_it_lacks_is_empty():
    v10, v11, v12 = (PhoneManifest.from_wire(path.read_bytes()) for path in EARLIER)
    assert v10.schema_version == "1.0" and v10.images == [] and v10.context_object("prompt_embeds")
    assert v11.schema_version == "1.1" and v11.images and v11.shard_hashes is None and v11.hashed
    assert v12.schema_version == "1.2" and v12.shard_hashes is not None
    assert v10.shards == v11.shards == v12.shards == stored_manifest().for_phone().shards
    assert all(level.format == 1 for v in (v10, v11, v12) for level in v.levels)  # before 1.3: format v1
    assert all(c.encoding == "zstd" for v in (v10, v11, v12) for c in v.context)  # and zstd objects


def test_a_level_in_a_format_this_phone_cannot_decode_is_left_out():
    doc = json.loads(GOLDEN.read_bytes())
    assert [level["format"] for level in doc["levels"]] == [2, 1]
    assert PhoneManifest.from_wire(GOLDEN.read_bytes()).readable_levels() == ["compact", "full"]
    doc["levels"][0]["format"] = 3  # a later server's format
    assert PhoneManifest.from_wire(json.dumps(doc).encode()).readable_levels() == ["full"]


def test_a_manifest_without_its_shard_hashes_gets_them_back_from_the_hashes_object():
    full = stored_manifest().for_phone()
    light = PhoneManifest.from_wire(full.without_hashes().to_wire())
    assert not light.hashed and "sha256" not in json.dumps(json.loads(light.to_json())["shards"])
    digests = full.shard_digests()
    assert len(digests) == full.shard_hashes.length == len(full.shards) * len(full.levels) * DIGEST_BYTES
    assert light.with_hashes(digests) == full
    for bad in (digests[:-1], bytes(len(digests)), digests + b"\0"):
        with pytest.raises(ManifestError, match="does not match"):
            light.with_hashes(bad)


@pytest.mark.parametrize("damage", ["no ref", "short ref", "some hashed"])
def test_a_manifest_is_refused_when_its_shards_lack_hashes_it_cannot_get(damage):
    doc = json.loads(stored_manifest().for_phone().without_hashes().to_json())
    if damage == "no ref":
        del doc["shard_hashes"]
    elif damage == "short ref":
        doc["shard_hashes"]["length"] -= DIGEST_BYTES
    else:
        doc["shards"][0]["levels"]["full"]["sha256"] = "a" * 64
    with pytest.raises(ManifestError, match="shard_hashes|sha256"):
        PhoneManifest.from_wire(json.dumps(doc).encode())


def test_an_image_is_a_source_object_and_shares_their_names():
    phone = stored_manifest().for_phone()
    assert phone.source_object("template_image").format == "jpeg"
    doc = json.loads(phone.to_json())
    doc["images"][0]["name"] = "prompt_embeds"
    with pytest.raises(ManifestError, match="listed twice"):
        PhoneManifest.from_wire(json.dumps(doc).encode())
    doc["images"][0].update(name="template_image", format="png")
    with pytest.raises(ManifestError, match="format"):
        PhoneManifest.from_wire(json.dumps(doc).encode())


def test_the_wire_is_a_zstd_frame_of_the_json_and_both_are_read():
    phone = stored_manifest().for_phone()
    wire = phone.to_wire()
    assert zstandard.ZstdDecompressor().decompress(wire) == phone.to_json() and len(wire) < len(phone.to_json())
    assert PhoneManifest.from_wire(wire) == PhoneManifest.from_wire(phone.to_json()) == phone


def test_a_later_minor_version_with_unknown_fields_is_read_and_they_are_ignored():
    doc = json.loads(GOLDEN.read_bytes())
    doc.update(schema_version="1.7", signature="ed25519:00", cdn={"hosts": ["a"]})
    doc["shards"][0]["levels"]["full"]["etag"] = "w/1"
    doc["levels"][0]["tier"] = "hot"
    doc["model"]["npu"] = {"w8a16": True}
    read = PhoneManifest.from_wire(json.dumps(doc).encode())
    assert read.schema_version == "1.7"
    assert read.shard(0).levels["full"].sha256 == stored_manifest().shard(0).levels["full"].sha256
    assert "signature" not in read.to_json().decode()


@pytest.mark.parametrize("version,accepted", [("1.0", True), ("1", True), (1, True), ("1.12", True), ("2.0", False),
                                              (2, False), ("0.9", False), ("1.x", False), (None, False), (1.5, False)])
def test_only_major_version_one_is_accepted(version, accepted):
    doc = json.loads(GOLDEN.read_bytes())
    doc["schema_version"] = version
    if accepted:
        assert PhoneManifest.from_wire(json.dumps(doc).encode()).template_id == "tpl"
    else:
        with pytest.raises(ManifestError, match="schema_version"):
            PhoneManifest.from_wire(json.dumps(doc).encode())


def test_a_higher_major_version_asks_for_an_update():
    doc = {**json.loads(GOLDEN.read_bytes()), "schema_version": "2.0"}
    with pytest.raises(ManifestError, match="update"):
        PhoneManifest.from_wire(json.dumps(doc).encode())


def test_a_zstd_bomb_is_refused_before_it_is_decoded_whole():
    bomb = zstandard.ZstdCompressor(level=3).compress(b" " * (MAX_MANIFEST_BYTES + 1))
    assert len(bomb) < 10_000
    with pytest.raises(ManifestError, match="too large"):
        PhoneManifest.from_wire(bomb)
    with pytest.raises(ManifestError, match="zstd"):
        PhoneManifest.from_wire(stored_manifest().for_phone().to_wire()[:-3])


def test_the_stored_view_stays_strict():
    doc = json.loads(stored_manifest().to_bytes())
    doc["shards"][0]["levels"]["full"]["etag"] = "w/1"
    with pytest.raises(ManifestError, match="etag"):
        Manifest.from_bytes(json.dumps(doc).encode())


if __name__ == "__main__" and "--write" in sys.argv:
    GOLDEN.write_bytes(stored_manifest().for_phone().to_json())
    print(f"wrote {GOLDEN}")
