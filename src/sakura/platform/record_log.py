"""A log of create-only records: how every mutable object of a library moves, on any store whose
create-only write is atomic, whether or not its compare-and-swap is (SeaweedFS's ``If-Match`` is
not: ``docs/architecture.md``, "What the library needs from a store").

A log is the objects ``<prefix><seq>.json``, ``seq`` zero-padded to :data:`SEQ_DIGITS` digits;
its value is the newest record. A move reads the newest record (number ``seq``), decides from
it, and writes record ``seq + 1`` create-only (:meth:`RecordLog.move`): of two movers that read
the same record exactly one writes the next, and the other reads again and decides again. So no
move is lost and the records are one total order. Nothing but pruning ever deletes a record.

Users: aliases (:mod:`~sakura.platform.alias_log`), a version's claim and gc's retirement mark
(:mod:`~sakura.platform.version_state`). Each was one document moved by compare-and-swap before;
that document (``legacy``) is still read while the log has no record, and the first move writes
record 1 from it.

Pruning: once a record is written, records more than ``keep`` behind it are deleted (``keep``
None: never, as for a claim, whose record 1 reserves its version number and which moves a few
times in its life). A reader that listed a record just deleted lists again. A mover that read a
record, stalled while more than ``keep`` others moved, and then wrote a number that pruning had
freed would leave a record below newer ones that never saw it (a "ghost": its move would be
lost). So after writing, a mover lists the log (the listing pruning needs anyway): a record
numbered more than ``keep`` ahead of its own was either there before it (a ghost) or written
since (``keep`` moves after ours, while we listed); either way the mover deletes its record and
moves again from the newest, so a move it reports is one the log's order holds. A log that is
never pruned frees no number, so it needs no such listing.
"""

from __future__ import annotations

import contextlib
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass

from sakura.platform.store import AlreadyExists, NotFound, ObjectStore

__all__ = ["KEEP", "SEQ_DIGITS", "Head", "RecordLog", "parse_record"]

SEQ_DIGITS = 12
#: Records kept behind the newest (enough for readers mid-list and for an alias's undo to look back).
KEEP = 8
_RECORD = re.compile(rf"([0-9]{{{SEQ_DIGITS}}})\.json", re.ASCII)


def parse_record(name: str) -> int | None:
    """The number of a record's file name (``000000000007.json`` -> 7), or None."""
    m = _RECORD.fullmatch(name)
    return int(m.group(1)) if m is not None else None


@dataclass(frozen=True)
class Head:
    """A log's newest record: its number (0 when the log has none: the legacy document, or
    nothing) and its bytes (None: nothing at all)."""

    seq: int
    data: bytes | None


class RecordLog:
    """The log under ``prefix`` (ending in ``/``) in ``store``; ``legacy``: the key of the single
    document it replaces."""

    def __init__(self, store: ObjectStore, prefix: str, *, legacy: str | None = None, keep: int | None = KEEP) -> None:
        if not prefix.endswith("/") or (keep is not None and keep < 1):
            raise ValueError(f"invalid record log {prefix!r} (keep={keep})")
        self.store, self.prefix, self.legacy, self.keep = store, prefix, legacy, keep

    @staticmethod
    def key_of(prefix: str, seq: int) -> str:
        """The key of record ``seq`` of the log under ``prefix``."""
        return f"{prefix}{seq:0{SEQ_DIGITS}d}.json"

    def key(self, seq: int) -> str:
        return self.key_of(self.prefix, seq)

    def seqs(self) -> list[int]:
        """The record numbers, ascending; none where the store has no root to list (a missing
        bucket reads as an empty log, as a missing document did: the caller's outage check says why)."""
        try:
            names = [obj.key[len(self.prefix):] for obj in self.store.list(self.prefix)]
        except NotFound:
            return []
        return sorted(seq for seq in map(parse_record, names) if seq is not None)

    def head(self) -> Head:
        """The newest record; the legacy document (number 0) when there is none."""
        while True:
            seqs = self.seqs()
            if not seqs:
                return Head(0, self._legacy())
            try:
                return Head(seqs[-1], self.store.get(self.key(seqs[-1])))
            except NotFound:  # pruned since the listing: list again
                continue

    def older(self, below: int) -> Iterator[Head]:
        """The records numbered below ``below``, newest first (pruned ones are gone), then the
        legacy document (number 0), older than every record, if there is one."""
        for seq in reversed([s for s in self.seqs() if s < below]):
            with contextlib.suppress(NotFound):
                yield Head(seq, self.store.get(self.key(seq)))
        data = self._legacy() if below > 0 else None
        if data is not None:
            yield Head(0, data)

    def append(self, after: Head, data: bytes) -> int | None:
        """Write the record after ``after`` (the newest one read); its number, or None if another
        mover wrote that number first (read again and decide again). Prunes old records."""
        seq = after.seq + 1
        key = self.key(seq)
        try:
            self.store.put_if_absent(key, data)
        except AlreadyExists:
            return None
        if self.keep is None:
            return seq
        seqs = self.seqs()
        if seqs and seqs[-1] > seq + self.keep:
            self.store.delete(key)  # a ghost, or long overtaken: move again from the newest
            return None
        for old in seqs:
            if old >= seq - self.keep:
                break
            with contextlib.suppress(NotFound):
                self.store.delete(self.key(old))
        return seq

    def move(self, decide: Callable[[Head], bytes | None]) -> tuple[Head, bool]:
        """Read the newest record, ``decide`` the next one's bytes from it (None: leave the log as
        it is), write it create-only, and on losing the race read and decide again. The newest
        record afterwards, and whether this call wrote it."""
        while True:
            head = self.head()
            data = decide(head)
            if data is None:
                return head, False
            seq = self.append(head, data)
            if seq is not None:
                return Head(seq, data), True

    def _legacy(self) -> bytes | None:
        if self.legacy is None:
            return None
        try:
            return self.store.get(self.legacy)
        except NotFound:
            return None
