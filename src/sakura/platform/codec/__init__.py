"""The token-importance-aware KV codec shared by the cloud (encoder) and the phone (decoder)."""

from sakura.platform.codec.format import FORMAT_VERSION, MAGIC, ShardHeader, max_payload_bytes, peek_header
from sakura.platform.codec.levels import (
    DEFAULT_LEVELS,
    LevelSpec,
    PrecisionClass,
    default_levels,
    parse_levels,
)
from sakura.platform.codec.shard import decode_shard, encode_shard

__all__ = [
    "DEFAULT_LEVELS",
    "FORMAT_VERSION",
    "MAGIC",
    "LevelSpec",
    "PrecisionClass",
    "ShardHeader",
    "decode_shard",
    "default_levels",
    "encode_shard",
    "max_payload_bytes",
    "parse_levels",
    "peek_header",
]
