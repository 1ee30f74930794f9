"""Level files: one Parquet file per level per version, one row group per shard.

Columns ``index, step, layer, sha256, payload``, written without compression, dictionary or
statistics, so each shard's payload is the last ``length`` bytes of its ``payload`` column
chunk. The manifest records that byte range: a reader fetches one shard with one ranged read
and checks its sha256, without parsing Parquet; any Parquet reader still opens the file.
"""

from __future__ import annotations

import hashlib
import io
from dataclasses import dataclass

from sakura.platform.errors import SakuraError
from sakura.platform.integrity import matches
from sakura.platform.kv import ShardKey
from sakura.platform.manifest import ShardLocation
from sakura.platform.store import ObjectStore


class ShardIntegrityError(SakuraError, ValueError):
    """Bytes read for a shard do not match the manifest's sha256."""

    code = "shard_corrupt"


@dataclass(frozen=True)
class ShardRow:
    index: int
    key: ShardKey
    payload: bytes


def _schema():
    import pyarrow as pa

    return pa.schema([
        pa.field("index", pa.int32(), nullable=False),
        pa.field("step", pa.int32()),
        pa.field("layer", pa.int32(), nullable=False),
        pa.field("sha256", pa.string(), nullable=False),
        pa.field("payload", pa.binary(), nullable=False),
    ])


def build_level_file(rows: list[ShardRow]) -> tuple[bytes, list[ShardLocation]]:
    """Serialise rows into a Parquet file and locate every payload inside it."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    schema = _schema()
    buf = io.BytesIO()
    with pq.ParquetWriter(buf, schema, compression="NONE", use_dictionary=False, write_statistics=False,
                          data_page_size=1 << 30, write_page_index=False) as writer:
        for row in rows:
            writer.write_table(pa.table({
                "index": [row.index], "step": [row.key.step], "layer": [row.key.layer],
                "sha256": [hashlib.sha256(row.payload).hexdigest()], "payload": [row.payload],
            }, schema=schema))
    data = buf.getvalue()
    metadata = pq.ParquetFile(io.BytesIO(data)).metadata
    locations = []
    for i, row in enumerate(rows):
        group = metadata.row_group(i)
        payload_chunk = group.column(group.num_columns - 1)
        start = group.column(0).data_page_offset
        end = payload_chunk.data_page_offset + payload_chunk.total_compressed_size
        offset = end - len(row.payload)
        if data[offset:end] != row.payload:  # a pyarrow change in page layout would land here
            raise SakuraError("internal error: payload is not at the end of its column chunk")
        locations.append(ShardLocation(row_group=i, row_group_offset=start, row_group_length=end - start,
                                       offset=offset, length=len(row.payload),
                                       sha256=hashlib.sha256(row.payload).hexdigest()))
    return data, locations


def read_shard_payload(store: ObjectStore, key: str, location: ShardLocation) -> bytes:
    """One ranged read of a shard's payload, checked against its sha256."""
    data = store.get(key, (location.offset, location.offset + location.length))
    verify_payload(data, location)
    return data


def verify_payload(data: bytes, location: ShardLocation) -> None:
    if not matches(data, location.sha256, location.length):
        raise ShardIntegrityError("shard bytes do not match the manifest's sha256")
