"""What happened during one edit: per shard its level, bytes and stage times, and every stall.

All times are seconds since the edit began (``EdgeSession.edit`` was called). The live pipeline
records it as the edit runs, and :class:`Progress` events tell an app about it while it does
(``EdgeSession.edit(on_progress=...)``); the end-to-end simulator
(:mod:`sakura.evaluation.simulator`) fills the same record for its edits.

A shard is the template KV of one attention layer (at one denoising step, for models whose
template KV depends on the step), fetched at one of the template's *levels* (e.g. ``"full"``,
``"compact"``: the same KV, compressed more or less) or computed on the phone (``"compute"``).
Shards are numbered in the order the model reads them.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Literal

__all__ = ["Progress", "ProgressKind", "ShardTiming", "Stall", "Timeline"]

ProgressKind = Literal["fetched", "decoded", "computed", "failed"]
"""What happened to a shard, as a :class:`Progress` event says."""


@dataclass
class ShardTiming:
    """One shard's record: where its KV came from, at what level and cost, and when each stage
    of the pipeline had it. A time is ``None`` where the stage never happened (a computed shard
    has no download; a cached one has no request)."""

    index: int
    """Its position in the order the model reads the shards (``EditResult.levels[index]``)."""
    shard: str = ""
    """Which KV it is: ``"s<step>/l<layer>"``, ``s*`` for a model whose template KV holds for
    every step, e.g. ``"s*/l3"`` (empty in simulated edits)."""
    level: str = ""
    """The level its KV came at (``"compute"``: the phone computed it; ``""``: not yet known)."""
    bytes: int = 0
    """Bytes fetched over the network for it, abandoned attempts included (0 from the cache)."""
    source: str = "network"
    """``"network"``, ``"cache"`` (kept on the phone from an earlier edit) or ``"computed"``."""
    chosen_at: float | None = None
    """When the fetch stage chose its level and asked for it."""
    requested_at: float | None = None
    """When its first download attempt was sent."""
    first_byte_at: float | None = None
    """When the first byte of the attempt that completed arrived."""
    arrived_at: float | None = None
    """When its bytes were all in and verified (from the network or the cache)."""
    decode_started_at: float | None = None
    """When the decoder started on it."""
    decoded_at: float | None = None
    """When its KV was ready for the model (decoded, or computed)."""
    needed_at: float | None = None
    """When the model asked for it (it stalled from here until ``consumed_at`` if it was not ready)."""
    consumed_at: float | None = None
    """When the model had it."""
    attempts: int = 0
    """Download attempts (a retry after a dropped connection is another)."""
    abandoned: list[str] = field(default_factory=list)
    """The levels whose downloads were abandoned for a smaller level, running late."""
    taken_back: bool = False
    """Left to the phone first, then fetched after all: the link proved faster than planned."""
    failed: str = ""
    """Why its download failed or was never sent (the link or the server let the edit down), if
    it did: the phone computed it instead (``source == "computed"``)."""

    @property
    def computed(self) -> bool:
        """The phone computed this shard's KV instead of fetching it."""
        return self.source == "computed"


@dataclass(frozen=True)
class Stall:
    """The model waited from ``start`` to ``end`` for shard ``shard`` (its KV was not ready)."""

    shard: int
    """The shard's index."""
    start: float
    """When the model asked for it."""
    end: float
    """When it had it (or gave up on the download and computed it)."""

    @property
    def seconds(self) -> float:
        """How long the model waited."""
        return self.end - self.start


@dataclass
class Timeline:
    """The record of one edit (``EditResult.timeline``): where the time went, shard by shard.

    ``summary()`` gives the headline numbers, ``to_dict()`` all of it, as JSON-ready dicts.
    """

    policy: str
    """The level policy that chose the levels (live), or the simulated system."""
    shards: list[ShardTiming]
    """One record per shard, in the order the model reads them."""
    stalls: list[Stall] = field(default_factory=list)
    """Every wait of the model for a shard, in order."""
    manifest_s: float = 0.0
    """When the pipeline started: manifest, model and context objects ready."""
    preamble_s: float = 0.0
    """When the preamble response (the manifest and the objects bundled with it) had arrived."""
    preamble_bytes: int = 0
    """Its bytes and those of the other objects the edit fetched besides shards (prompt
    embeddings, shard hashes), where known (the simulator; 0 live)."""
    model_load_s: float = 0.0
    """Of ``manifest_s``, the seconds spent loading the on-device model (0 once it is loaded)."""
    compute_start: float = 0.0
    """When the model started its passes (and the shards began to stream)."""
    compute_end: float = 0.0
    """When the finished image was ready: the edit's latency."""
    precompute_s: float = 0.0
    """Seconds the phone computed before ``compute_start``: template KV (CacheGen's text
    fallback) or the prompt's embeddings through its own text encoder; what it computes between
    ``compute_start`` and ``compute_end`` is not in it."""

    @property
    def latency_s(self) -> float:
        """From the start of the edit to the finished image."""
        return self.compute_end

    @property
    def stall_s(self) -> float:
        """Seconds the model waited for shards, in all."""
        return sum((s.seconds for s in self.stalls), 0.0)

    @property
    def network_bytes(self) -> int:
        """Bytes of shards fetched over the network (``EditResult.bytes``)."""
        return sum(s.bytes for s in self.shards)

    @property
    def levels(self) -> list[str]:
        """Per shard, the level its KV came at, or ``"compute"`` (``EditResult.levels``)."""
        return [s.level for s in self.shards]

    def link_gaps(self, first_read_bytes: int = 0) -> list[float]:
        """Per fetched shard (not one the phone computed instead), in the order their bytes began:
        how long the link sat idle before its first byte, since the last byte of every response
        before it (the preamble's included). ``first_read_bytes``: what must cross the link before
        a response's first byte can be read (a packet); the time those take at the response's own
        rate is the link busy, not idle, and is left out."""
        latest, gaps = self.preamble_s, []
        fetched = [(s.first_byte_at, s.arrived_at, s.bytes) for s in self.shards if not s.computed]
        timed = [(f, a, n) for f, a, n in fetched if f is not None and a is not None]
        for first_byte_at, arrived_at, nbytes in sorted(timed, key=lambda times: times[0]):
            per_byte = (arrived_at - first_byte_at) / nbytes if nbytes else 0.0
            gaps.append(max(0.0, first_byte_at - latest - first_read_bytes * per_byte))
            latest = max(latest, arrived_at)
        return gaps

    def summary(self) -> dict:
        """The headline numbers: latency, its parts, stalls, bytes, and how many shards came at each level."""
        counts: dict[str, int] = {}
        for s in self.shards:
            counts[s.level] = counts.get(s.level, 0) + 1
        return {
            "policy": self.policy,
            "latency_s": round(self.compute_end, 4),
            "manifest_s": round(self.manifest_s, 4),
            "model_load_s": round(self.model_load_s, 4),
            "precompute_s": round(self.precompute_s, 4),
            "stall_s": round(self.stall_s, 4),
            "stalls": len(self.stalls),
            "network_bytes": self.network_bytes,
            "cached_shards": sum(s.source == "cache" for s in self.shards),
            "abandoned": sum(len(s.abandoned) for s in self.shards),
            "taken_back": sum(s.taken_back for s in self.shards),
            "levels": counts,
        }

    def to_dict(self) -> dict:
        """:meth:`summary` with every shard's record and every stall."""
        return {**self.summary(), "shards": [asdict(s) for s in self.shards],
                "stall_list": [asdict(s) for s in self.stalls],
                "compute_start": self.compute_start, "compute_end": self.compute_end}


@dataclass(frozen=True)
class Progress:
    """One step of one shard through the edit, told to ``EdgeSession.edit(on_progress=...)``
    as it happens (the same facts :class:`ShardTiming` records).

    Every shard is ``"fetched"`` and then ``"decoded"``, or ``"computed"``; the model can use a
    shard once it is decoded or computed, so ``shards`` of those make a whole edit. A shard whose
    download failed (``ShardTiming.failed``) is ``"failed"`` first, then ``"computed"``. A download
    the phone gave up on for computing the shard may still end, so a computed shard can also be
    fetched and decoded, in any order: count each ``shard`` once.
    """

    kind: ProgressKind
    """``"fetched"``: its bytes are in and verified (from the network or the cache);
    ``"decoded"``: its KV is ready for the model; ``"computed"``: the phone computed its KV;
    ``"failed"``: its download failed or was not sent, and the phone will compute it."""
    shard: int
    """The shard's index, in the order the model reads them (``ShardTiming.index``)."""
    shards: int
    """How many shards the edit has."""
    level: str
    """The level fetched or decoded, or ``"compute"``."""
    source: str
    """``"network"``, ``"cache"`` or ``"computed"`` (``ShardTiming.source``)."""
    bytes: int
    """Bytes fetched over the network for this shard so far (``ShardTiming.bytes``)."""
    at: float
    """Seconds since the edit began."""
