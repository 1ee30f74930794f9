"""The two mutable objects of a version, both moved only by compare-and-swap.

``claim.json`` (building -> publishing -> published, or building -> abandoned) reserves the
number and says how far publishing got; ``retired.json`` (retired <-> reinstated, retired ->
deleting, which is final) is gc's mark. :mod:`sakura.platform.library` explains the protocols.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field

from sakura.platform import layout
from sakura.platform.errors import SakuraError
from sakura.platform.manifest import ManifestError
from sakura.platform.store import AlreadyExists, NotFound, ObjectStore, PreconditionFailed

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


def read_claim(store: ObjectStore, template_id: str, version: int) -> Claim | None:
    try:
        return Claim.from_bytes(version, store.get(layout.claim_key(template_id, version)))
    except (NotFound, ManifestError):
        return None


def move_claim(store: ObjectStore, template_id: str, version: int, change: Callable[[Claim], Claim | None]) -> Claim:
    """Apply ``change`` to the claim by compare-and-swap (None: leave it); the claim after."""
    key = layout.claim_key(template_id, version)
    while True:
        try:
            data, etag = store.get_with_etag(key)
        except NotFound:
            raise ClaimAbandoned(f"{template_id} v{version} has no claim") from None
        claim = Claim.from_bytes(version, data)
        new = change(claim)
        if new is None:
            return claim
        try:
            store.put_if_match(key, new.to_bytes(), etag)
            return new
        except PreconditionFailed:
            continue


def read_mark(store: ObjectStore, template_id: str, version: int) -> tuple[Retirement | None, str | None]:
    """The retirement mark and its ETag, or (None, None). Raises ManifestError if unreadable."""
    try:
        data, etag = store.get_with_etag(layout.retired_key(template_id, version))
    except NotFound:
        return None, None
    return Retirement.from_bytes(data), etag


def mark_state(store: ObjectStore, template_id: str, version: int) -> str | None:
    try:
        mark, _ = read_mark(store, template_id, version)
    except ManifestError:
        return DELETING  # an unreadable mark: assume the worst
    return mark.state if mark else None


def retire(store: ObjectStore, template_id: str, version: int) -> None:
    """Mark a version retired now, unless it is marked already (a reinstated mark restarts)."""
    key = layout.retired_key(template_id, version)
    try:
        store.put_if_absent(key, Retirement(RETIRED, time.time()).to_bytes())
        return
    except AlreadyExists:
        pass
    try:
        mark, etag = read_mark(store, template_id, version)
        if mark is not None and etag is not None and mark.state == REINSTATED:
            store.put_if_match(key, Retirement(RETIRED, time.time()).to_bytes(), etag)
    except (ManifestError, PreconditionFailed):
        return  # unreadable, or changed meanwhile: the next run decides


def reinstate(store: ObjectStore, template_id: str, version: int) -> str | None:
    """Swap a ``retired`` mark to ``reinstated``; the mark's state afterwards."""
    while True:
        try:
            mark, etag = read_mark(store, template_id, version)
        except ManifestError:
            return DELETING
        if mark is None or etag is None or mark.state != RETIRED:
            return mark.state if mark else None
        try:
            reinstated = Retirement(REINSTATED, time.time()).to_bytes()
            store.put_if_match(layout.retired_key(template_id, version), reinstated, etag)
            return REINSTATED
        except PreconditionFailed:
            continue
