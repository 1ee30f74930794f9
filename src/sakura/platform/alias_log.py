"""An alias as a log of create-only records (:mod:`sakura.platform.record_log`).

An alias's value is the newest of its records, ``templates/<id>/aliases/<alias>/<seq>.json``:
``{"version": N}``, or :data:`REMOVED` (the alias was taken away: an undo of the move that
created it). A move reads the newest record (number ``seq``), decides from it, and writes record
``seq + 1`` create-only: of two movers that read the same record, exactly one writes the next,
and the other reads again and decides again. So no move is lost and the records are one total
order, whether or not the store's compare-and-swap is atomic. No record is ever taken back: an
undo is a move too (:meth:`sakura.platform.library.TemplateLibrary.settle_alias`).

Before this log an alias was one document moved by compare-and-swap,
``templates/<id>/aliases/<alias>.json``; it is still read where an alias has no records (a
library written before), and the first move writes record 1 from it. Records more than
:data:`KEEP` behind the newest are deleted.
"""

from __future__ import annotations

from collections.abc import Iterator

from sakura.platform import layout
from sakura.platform.manifest import AliasDoc, ManifestError
from sakura.platform.record_log import KEEP, SEQ_DIGITS, Head, RecordLog, parse_record
from sakura.platform.store import NotFound, ObjectStore
from sakura.platform.version_state import DELETING, mark_state, reinstate

__all__ = ["KEEP", "REMOVED", "SEQ_DIGITS", "AliasHead", "append", "head", "heads", "log", "older", "record_key",
           "settle"]

#: A record that says the alias does not exist (read as no alias; an old reader sees an unreadable one).
REMOVED = b'{"removed": true}'
#: An alias's newest record: its number (0 for a document from before the log, or no alias) and
#: its bytes (None: no alias, or a :data:`REMOVED` record).
AliasHead = Head


def log(store: ObjectStore, template_id: str, alias: str) -> RecordLog:
    return RecordLog(store, layout.alias_prefix(template_id, alias), legacy=layout.alias_key(template_id, alias))


def log_prefix(template_id: str, alias: str) -> str:
    return layout.alias_prefix(template_id, alias)


def record_key(template_id: str, alias: str, seq: int) -> str:
    return RecordLog.key_of(layout.alias_prefix(template_id, alias), seq)


def head(store: ObjectStore, template_id: str, alias: str) -> AliasHead:
    """The alias's newest record; the document from before the log when it has none."""
    return _visible(log(store, template_id, alias).head())


def older(store: ObjectStore, template_id: str, alias: str, below: int) -> Iterator[AliasHead]:
    """The alias's records numbered below ``below``, newest first, then its document from before the log."""
    return (_visible(h) for h in log(store, template_id, alias).older(below))


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
        elif layout.ALIAS_PATTERN.fullmatch(name) and (seq := parse_record(record)) is not None:
            newest[name] = max(newest.get(name, 0), seq)
    out = {}
    for name, seq in sorted(newest.items()):
        try:
            data: bytes | None = store.get(record_key(template_id, name, seq) if seq else
                                           layout.alias_key(template_id, name))
        except NotFound:  # moved on meanwhile: read it alone
            data = head(store, template_id, name).data
        if data is not None and data != REMOVED:
            out[name] = data
    return out


def append(store: ObjectStore, template_id: str, alias: str, after: AliasHead, version: int | None, *,
           held: bool = False) -> int | None:
    """Write the record after ``after`` (the newest one read), pointing at ``version`` (None: the
    alias is removed; ``held``: builds leave it, :class:`~sakura.platform.manifest.AliasDoc`); its
    number, or None if another mover wrote that record first (read again and decide again)."""
    data = REMOVED if version is None else AliasDoc(version=version, held=held).to_bytes()
    return log(store, template_id, alias).append(after, data)


def settle(store: ObjectStore, template_id: str, alias: str) -> None:
    """Undo moves onto versions gc is deleting: while the alias's newest record names a version
    whose mark says ``deleting``, write a record that puts the alias back on the newest earlier
    value naming a version not being deleted (removed if none is left), and confirm that value
    the same way (a ``retired`` version is reinstated). A mover that finds its version being
    deleted calls this, and so does gc, for a mover killed before it could."""
    aliases = log(store, template_id, alias)
    while True:
        found = _visible(aliases.head())
        target = _version(found.data)
        if target is None or reinstate(store, template_id, target) != DELETING:
            return
        aliases.append(found, _fallback(store, template_id, alias, found.seq))  # lost the race: look again


def _fallback(store: ObjectStore, template_id: str, alias: str, below: int) -> bytes:
    """The newest record before ``below`` that names no version gc is deleting (or says removed)."""
    for found in older(store, template_id, alias, below):
        if found.data is None:
            return REMOVED
        version = _version(found.data)
        if version is not None and mark_state(store, template_id, version) != DELETING:
            return found.data
    return REMOVED


def _version(data: bytes | None) -> int | None:
    if data is None:
        return None
    try:
        return AliasDoc.from_bytes(data).version
    except ManifestError:
        return None


def _visible(found: Head) -> Head:
    return Head(found.seq, None) if found.data == REMOVED else found
