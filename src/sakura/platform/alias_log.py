"""An alias as a log of create-only records: the one conditional write every S3 server gets right.

An alias's value is the newest of its records, ``templates/<id>/aliases/<alias>/<seq>.json``
(``{"version": N}``, ``seq`` zero-padded to :data:`SEQ_DIGITS` digits). A move reads the newest
record (number ``seq``), decides from it, and writes record ``seq + 1`` create-only: of two
movers that read the same record, exactly one writes the next, and the other reads again and
decides again. So no move is lost and the records are one total order, on any store whose
create-only write is atomic, whether or not its compare-and-swap is (SeaweedFS's ``If-Match``
is not: ``docs/architecture.md``, "What the library needs from a store").

Before this log an alias was one document moved by compare-and-swap,
``templates/<id>/aliases/<alias>.json``; it is still read where an alias has no records (a
library written before), and the first move writes record 1 from it.

Old records are deleted once :data:`KEEP` newer ones exist: a reader that listed a record just
deleted lists again. A move writes one past the newest it read; the only record ever taken back
is the newest, by the mover that wrote it (an undo), so a number is written again only after
its first record was withdrawn.
"""

from __future__ import annotations

import contextlib
import re
from dataclasses import dataclass

from sakura.platform import layout
from sakura.platform.manifest import AliasDoc
from sakura.platform.store import AlreadyExists, NotFound, ObjectStore

__all__ = ["KEEP", "SEQ_DIGITS", "AliasHead", "append", "head", "heads", "retract"]

SEQ_DIGITS = 12
#: Records kept behind the newest (an estimate: enough for an undo and for readers mid-list).
KEEP = 8
_RECORD = re.compile(rf"([0-9]{{{SEQ_DIGITS}}})\.json", re.ASCII)


@dataclass(frozen=True)
class AliasHead:
    """An alias's newest record: its number (0 when the alias has none: a document from before
    the log, or no alias) and its bytes (None: no alias at all)."""

    seq: int
    data: bytes | None


def log_prefix(template_id: str, alias: str) -> str:
    return layout.template_prefix(template_id) + f"aliases/{layout.validate_alias(alias)}/"


def record_key(template_id: str, alias: str, seq: int) -> str:
    return log_prefix(template_id, alias) + f"{seq:0{SEQ_DIGITS}d}.json"


def head(store: ObjectStore, template_id: str, alias: str) -> AliasHead:
    """The alias's newest record; the document from before the log when it has none."""
    while True:
        seqs = _seqs(store, log_prefix(template_id, alias))
        if not seqs:
            try:
                return AliasHead(0, store.get(layout.alias_key(template_id, alias)))
            except NotFound:
                return AliasHead(0, None)
        try:
            return AliasHead(seqs[-1], store.get(record_key(template_id, alias, seqs[-1])))
        except NotFound:  # pruned or taken back since the listing: list again
            continue


def heads(store: ObjectStore, template_id: str) -> dict[str, bytes]:
    """Every alias of ``template_id`` and its newest record's bytes (one listing, one read per alias)."""
    prefix = layout.template_prefix(template_id) + "aliases/"
    newest: dict[str, int] = {}
    for obj in store.list(prefix):
        name, sep, record = obj.key[len(prefix):].partition("/")
        if not sep:  # a document from before the log
            name = name.removesuffix(".json")
            if layout.ALIAS_PATTERN.fullmatch(name):
                newest.setdefault(name, 0)
        elif layout.ALIAS_PATTERN.fullmatch(name) and (m := _RECORD.fullmatch(record)) is not None:
            newest[name] = max(newest.get(name, 0), int(m.group(1)))
    out = {}
    for name, seq in sorted(newest.items()):
        try:
            key = record_key(template_id, name, seq) if seq else layout.alias_key(template_id, name)
            out[name] = store.get(key)
        except NotFound:  # moved on meanwhile: read it alone
            found = head(store, template_id, name)
            if found.data is not None:
                out[name] = found.data
    return out


def append(store: ObjectStore, template_id: str, alias: str, after: AliasHead, version: int) -> int | None:
    """Write the record after ``after`` (the newest one read), pointing at ``version``; its
    number, or None if another mover wrote that record first (read again and decide again).
    Records more than :data:`KEEP` behind it are deleted."""
    seq = after.seq + 1
    try:
        store.put_if_absent(record_key(template_id, alias, seq), AliasDoc(version=version).to_bytes())
    except AlreadyExists:
        return None
    for old in _seqs(store, log_prefix(template_id, alias)):
        if old >= seq - KEEP:
            break
        with contextlib.suppress(NotFound):
            store.delete(record_key(template_id, alias, old))
    return seq


def retract(store: ObjectStore, template_id: str, alias: str, seq: int) -> bool:
    """Take back record ``seq`` (an undo by the mover that wrote it) if it is still the newest:
    the alias is then what it was before. False if another move came after it."""
    if _seqs(store, log_prefix(template_id, alias))[-1:] != [seq]:
        return False
    store.delete(record_key(template_id, alias, seq))
    return True


def _seqs(store: ObjectStore, prefix: str) -> list[int]:
    """The record numbers under ``prefix``; none where the store has no root to list (a missing
    bucket reads as no alias, as a missing alias document did: the caller's outage check says why)."""
    try:
        keys = [obj.key for obj in store.list(prefix)]
    except NotFound:
        return []
    found = (_RECORD.fullmatch(key[len(prefix):]) for key in keys)
    return sorted(int(m.group(1)) for m in found if m is not None)
