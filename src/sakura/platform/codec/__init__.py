"""The KV codec shared by the cloud (encoder) and the phone (decoder): importance-ranked precision
classes (wire format v1) and a low-rank transform stage (wire format v2)."""

from sakura.platform.codec.distortion import QueryProbe, surrogate_probe
from sakura.platform.codec.format import (
    FORMAT_VERSION,
    FORMAT_VERSIONS,
    MAGIC,
    ShardHeader,
    max_payload_bytes,
    peek_header,
)
from sakura.platform.codec.levels import (
    DEFAULT_LEVELS,
    V1_LEVELS,
    LevelSpec,
    PrecisionClass,
    TransformSpec,
    default_levels,
    parse_levels,
    v1_levels,
)
from sakura.platform.codec.shard import decode_shard, encode_levels, encode_shard, encode_shards

__all__ = [
    "DEFAULT_LEVELS",
    "FORMAT_VERSION",
    "FORMAT_VERSIONS",
    "MAGIC",
    "V1_LEVELS",
    "LevelSpec",
    "PrecisionClass",
    "QueryProbe",
    "ShardHeader",
    "TransformSpec",
    "decode_shard",
    "default_levels",
    "encode_levels",
    "encode_shard",
    "encode_shards",
    "max_payload_bytes",
    "parse_levels",
    "peek_header",
    "surrogate_probe",
    "v1_levels",
]
