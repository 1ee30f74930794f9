"""The two mutable objects of a version, both logs of create-only records
(:mod:`sakura.platform.record_log`): a move reads the newest record, decides, and writes the next
number create-only, so of two movers that read the same record exactly one moves.

The claim, ``claim/<seq>.json`` (building -> publishing -> published, or building -> abandoned),
says how far publishing got; its record 1, written create-only by the build that takes the
number, is never deleted, so no number is handed out twice. gc's retirement mark,
``retired/<seq>.json`` (retired <-> reinstated, retired -> deleting, which is final). Where a
version has no records, its ``claim.json`` / ``retired.json`` from before the logs (when they
moved by compare-and-swap) is read, and the first move writes record 1 from it.
:mod:`sakura.platform.library` explains the protocols.
"""

from __future__ import annotations

import contextlib
import json
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field

from sakura.platform import layout
from sakura.platform.errors import SakuraError
from sakura.platform.manifest import ManifestError
from sakura.platform.record_log import Head, RecordLog
from sakura.platform.store import AlreadyExists, ObjectStore

__all__ = ["ABANDONED", "BUILDING", "CLAIM_ORDER", "DELETING", "PUBLISHED", "PUBLISHING", "REINSTATED", "RETIRED",
           "Claim", "ClaimAbandoned", "Retirement", "begin_deleting", "claim_log", "mark_log", "mark_state",
           "move_claim", "read_claim", "read_mark", "reinstate", "retire", "take_claim", "write_once"]

BUILDING, PUBLISHING, PUBLISHED, ABANDONED = "building", "publishing", "published", "abandoned"
RETIRED, REINSTATED, DELETING = "retired", "reinstated", "deleting"
CLAIM_ORDER = (BUILDING, PUBLISHING, PUBLISHED)


class ClaimAbandoned(SakuraError, RuntimeError):
    """Orphan cleanup gave up on this build's version (its lease expired): it cannot publish."""

    code = "claim_abandoned"


@dataclass(frozen=True)
class Claim:
    version: int
    content_hash: str
    created_at: float
    state: str = BUILDING
    renewed_at: float = 0.0
    #: level -> store URI, for levels written outside the library's root (so cleanup finds them)
    tiers: dict[str, str] = field(default_factory=dict)

    @property
    def age_s(self) -> float:
        """Seconds since the lease was last taken or renewed."""
        return time.time() - max(self.created_at, self.renewed_at)

    def to_bytes(self) -> bytes:
        return json.dumps({k: v for k, v in asdict(self).items() if k != "version"}, sort_keys=True).encode()

    @classmethod
    def from_bytes(cls, version: int, data: bytes) -> Claim:
        try:
            raw = json.loads(data)
            return cls(version, str(raw.get("content_hash", "")), float(raw.get("created_at", 0)),
                       str(raw.get("state", BUILDING)), float(raw.get("renewed_at", 0)),
                       {str(k): str(v) for k, v in dict(raw.get("tiers") or {}).items()})
        except (ValueError, TypeError, AttributeError) as exc:
            raise ManifestError(f"invalid claim of version {version}: {exc}") from None
        except RecursionError:  # json.loads recurses per level of nesting
            raise ManifestError(f"invalid claim of version {version}: nested too deeply") from None


@dataclass(frozen=True)
class Retirement:
    state: str
    at: float
    #: (level, store URI or None for the root) of each level file, recorded when deletion starts
    levels: tuple[tuple[str, str | None], ...] = ()

    def to_bytes(self) -> bytes:
        return json.dumps({"state": self.state, "at": self.at, "levels": [list(lv) for lv in self.levels]}).encode()

    @classmethod
    def from_bytes(cls, data: bytes) -> Retirement:
        try:
            raw = json.loads(data)
            mark = cls(str(raw["state"]), float(raw["at"]),
                       tuple((str(name), None if uri is None else str(uri)) for name, uri in raw.get("levels", [])))
        except (ValueError, TypeError, KeyError, AttributeError) as exc:
            raise ManifestError(f"invalid retirement mark: {exc}") from None
        except RecursionError:
            raise ManifestError("invalid retirement mark: nested too deeply") from None
        if mark.state not in (RETIRED, REINSTATED, DELETING):
            raise ManifestError(f"invalid retirement mark state {mark.state!r}")
        return mark


def write_once(store: ObjectStore, key: str, data: bytes) -> None:
    """Create-only write that also succeeds if the object already holds exactly ``data`` (a
    retry whose first reply was lost); anything else there raises :class:`AlreadyExists`."""
    try:
        store.put_if_absent(key, data)
    except AlreadyExists:
        if store.get(key) != data:
            raise


def claim_log(store: ObjectStore, template_id: str, version: int) -> RecordLog:
    """The claim's log: never pruned (its record 1 keeps the number taken; a claim moves a few times,
    and once per lease renewal)."""
    return RecordLog(store, layout.claim_prefix(template_id, version), legacy=layout.claim_key(template_id, version),
                     keep=None)


def mark_log(store: ObjectStore, template_id: str, version: int) -> RecordLog:
    return RecordLog(store, layout.retired_prefix(template_id, version),
                     legacy=layout.retired_key(template_id, version))


def take_claim(store: ObjectStore, template_id: str, claim: Claim) -> bool:
    """Write the claim's record 1 create-only: False if the number is taken."""
    return claim_log(store, template_id, claim.version).append(Head(0, None), claim.to_bytes()) is not None


def read_claim(store: ObjectStore, template_id: str, version: int) -> Claim | None:
    data = claim_log(store, template_id, version).head().data
    try:
        return None if data is None else Claim.from_bytes(version, data)
    except ManifestError:
        return None


def move_claim(store: ObjectStore, template_id: str, version: int, change: Callable[[Claim], Claim | None]) -> Claim:
    """Apply ``change`` to the claim (None: leave it); the claim after. Raises
    :class:`ClaimAbandoned` if the version has no claim, ManifestError if it is unreadable."""
    def decide(head: Head) -> bytes | None:
        if head.data is None:
            raise ClaimAbandoned(f"{template_id} v{version} has no claim")
        new = change(Claim.from_bytes(version, head.data))
        return None if new is None else new.to_bytes()

    head, _ = claim_log(store, template_id, version).move(decide)
    assert head.data is not None
    return Claim.from_bytes(version, head.data)


def read_mark(store: ObjectStore, template_id: str, version: int) -> Retirement | None:
    """The retirement mark, or None. Raises ManifestError if unreadable."""
    data = mark_log(store, template_id, version).head().data
    return None if data is None else Retirement.from_bytes(data)


def mark_state(store: ObjectStore, template_id: str, version: int) -> str | None:
    try:
        mark = read_mark(store, template_id, version)
    except ManifestError:
        return DELETING  # an unreadable mark: assume the worst
    return mark.state if mark else None


def retire(store: ObjectStore, template_id: str, version: int) -> None:
    """Mark a version retired now, unless it is marked already (a reinstated mark restarts)."""
    def decide(head: Head) -> bytes | None:
        if head.data is None or Retirement.from_bytes(head.data).state == REINSTATED:
            return Retirement(RETIRED, time.time()).to_bytes()
        return None

    with contextlib.suppress(ManifestError):  # unreadable: left as it is, and never deleted
        mark_log(store, template_id, version).move(decide)


def reinstate(store: ObjectStore, template_id: str, version: int) -> str | None:
    """Move a ``retired`` mark to ``reinstated``; the mark's state afterwards (an unreadable mark
    reads as ``deleting``)."""
    def decide(head: Head) -> bytes | None:
        if head.data is None or Retirement.from_bytes(head.data).state != RETIRED:
            return None
        return Retirement(REINSTATED, time.time()).to_bytes()

    try:
        head, _ = mark_log(store, template_id, version).move(decide)
        return None if head.data is None else Retirement.from_bytes(head.data).state
    except ManifestError:
        return DELETING


def begin_deleting(store: ObjectStore, template_id: str, version: int, grace_s: float,
                   levels: Callable[[], tuple[tuple[str, str | None], ...] | None]) -> Retirement | None:
    """Move a mark that has said ``retired`` for ``grace_s`` to ``deleting`` (final), recording
    ``levels()`` (None: the version cannot be read, leave it). The ``deleting`` mark if the
    version is being deleted now, else None."""
    def decide(head: Head) -> bytes | None:
        mark = None if head.data is None else Retirement.from_bytes(head.data)
        if mark is None or mark.state != RETIRED or time.time() - mark.at < grace_s:
            return None
        found = levels()
        return None if found is None else Retirement(DELETING, time.time(), found).to_bytes()

    try:
        head, _ = mark_log(store, template_id, version).move(decide)
        mark = None if head.data is None else Retirement.from_bytes(head.data)
    except ManifestError:
        return None
    return mark if mark is not None and mark.state == DELETING else None
