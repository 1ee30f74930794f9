"""What happened during one edit: per shard its level, bytes and stage times, and every stall.

All times are seconds since the edit began. The live pipeline records it as the edit runs; the
end-to-end simulator (:mod:`sakura.evaluation.simulator`) fills the same record for its edits.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field


@dataclass
class ShardTiming:
    index: int
    shard: str = ""  # the ShardKey, e.g. "s*/l3" (empty in simulated edits)
    level: str = ""
    bytes: int = 0  # bytes fetched over the network for it (abandoned attempts included)
    source: str = "network"  # or "cache", or "computed": the phone computed its KV instead
    chosen_at: float | None = None
    requested_at: float | None = None  # of the first attempt
    first_byte_at: float | None = None  # of the attempt that completed
    arrived_at: float | None = None
    decode_started_at: float | None = None
    decoded_at: float | None = None
    needed_at: float | None = None  # when the compute stage asked for it
    consumed_at: float | None = None
    attempts: int = 0
    abandoned: list[str] = field(default_factory=list)
    #: Left to the phone first, then fetched after all: the link proved faster than planned.
    taken_back: bool = False

    @property
    def computed(self) -> bool:
        """The phone computed this shard's KV instead of fetching it."""
        return self.source == "computed"


@dataclass(frozen=True)
class Stall:
    """The compute stage waited from ``start`` to ``end`` for shard ``shard``."""

    shard: int
    start: float
    end: float

    @property
    def seconds(self) -> float:
        return self.end - self.start


@dataclass
class Timeline:
    policy: str  # the level policy (live), or the simulated system
    shards: list[ShardTiming]
    stalls: list[Stall] = field(default_factory=list)
    manifest_s: float = 0.0  # when the pipeline started: manifest, model and context objects ready
    preamble_s: float = 0.0  # when the preamble response (manifest and objects) had arrived
    #: Its bytes and those of the other objects the edit fetched besides shards (prompt embeddings,
    #: shard hashes), where known (the simulator; 0 live).
    preamble_bytes: int = 0
    model_load_s: float = 0.0  # of manifest_s, spent loading the on-device model (0 once loaded)
    compute_start: float = 0.0
    compute_end: float = 0.0
    #: Seconds the phone computed before ``compute_start``: template KV (CacheGen's text fallback) or
    #: the prompt's embeddings through its own text encoder; what it computes between
    #: ``compute_start`` and ``compute_end`` is not in it.
    precompute_s: float = 0.0

    @property
    def latency_s(self) -> float:
        """From the start of the edit to the finished image."""
        return self.compute_end

    @property
    def stall_s(self) -> float:
        return sum((s.seconds for s in self.stalls), 0.0)

    @property
    def network_bytes(self) -> int:
        return sum(s.bytes for s in self.shards)

    @property
    def levels(self) -> list[str]:
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
        return {**self.summary(), "shards": [asdict(s) for s in self.shards],
                "stall_list": [asdict(s) for s in self.stalls],
                "compute_start": self.compute_start, "compute_end": self.compute_end}
