"""The fetch stage's work for one shard: the cache first, then the network, switching to a
smaller level when the policy abandons a download that will clearly be late."""

from __future__ import annotations

import threading
from collections.abc import Callable

from sakura.edge_client._cache import ShardCache
from sakura.edge_client._first_shard import FirstShard, FirstShardBytes
from sakura.edge_client._http.deadlines import CancelFlag
from sakura.edge_client._http.transport import Abandon, HttpTransport
from sakura.edge_client._link_meter import DownloadRate, LinkMeter
from sakura.edge_client._shard_hashes import ShardHashes
from sakura.edge_client.planning import ABANDON_CHECK_S, ABANDON_MIN_S
from sakura.edge_client.timeline import ShardTiming
from sakura.platform import http_api
from sakura.platform.manifest import PhoneManifest

#: (level being fetched, bytes received, their measured rate in bytes/s) -> a smaller level, or None.
AbandonCheck = Callable[[str, int, float], "str | None"]


class _SwitchLevel(Abandon):
    def __init__(self, level: str, received: int, measured: int, elapsed_s: float) -> None:
        super().__init__(level)
        self.level, self.received, self.measured, self.elapsed_s = level, received, measured, elapsed_s


class ShardFetcher:
    def __init__(
        self,
        transport: HttpTransport,
        manifest: PhoneManifest,
        meter: LinkMeter,
        cache: ShardCache | None,
        clock: Callable[[], float],
        first: FirstShard | None = None,
        hashes: ShardHashes | None = None,
    ) -> None:
        """``meter``: the session's link measurement; ``clock``: the edit's, which the timeline
        records; ``first``: shard 0, asked for with the preamble (used if it is what the manifest
        lists); ``hashes``: where the shards' sha256s come from (by default the manifest)."""
        self.transport, self.manifest, self.meter, self.estimator = transport, manifest, meter, meter.estimator
        self.hashes = hashes or ShardHashes(manifest)
        self.cache, self.clock = cache, clock
        self.first = first
        self.rank = {level.name: i for i, level in enumerate(manifest.levels)}
        self._to_edit = meter.offset_to(clock)  # the meter's (the transport's) times -> the edit clock
        self.budget = transport.edit_budget()  # the edit's network deadline
        self._active = 0  # downloads in flight
        self._lengths: dict[int, int] = {}  # per shard being downloaded, its length
        self._received: dict[int, int] = {}  # per shard, bytes of the download in progress
        self._asked: dict[int, float] = {}  # per shard being downloaded, when it was asked for (edit clock)
        self._lock = threading.Lock()

    @property
    def first_level(self) -> str | None:
        """The level shard 0 is in flight at, asked for with the preamble (None if it was not)."""
        return self.first.smallest_level(self.manifest) if self.first is not None else None

    def received(self, index: int) -> int:
        """Bytes of shard ``index``'s current download received so far."""
        with self._lock:
            return self._received.get(index, 0)

    def remaining(self, index: int) -> int | None:
        """Bytes still to come of shard ``index``'s download in progress (None: none is)."""
        with self._lock:
            length = self._lengths.get(index)
            return None if length is None else max(0, length - self._received.get(index, 0))

    def in_flight(self) -> list[tuple[float, int, int]]:
        """The downloads in flight in the order asked, first bytes in or not: when each was asked
        for (edit clock), its bytes received and its length (what the planner reads:
        ``planning.in_flight``). Shard 0 asked for with the preamble is not among them."""
        with self._lock:
            return [(self._asked[i], self._received.get(i, 0), length) for i, length in self._lengths.items()]

    def bytes_to_come(self) -> int:
        """Bytes still to come of the downloads in flight."""
        return sum(length - received for _, received, length in self.in_flight())

    def cached_levels(self, index: int) -> list[str]:
        if self.cache is None:
            return []
        return self.cache.levels(self.manifest.template_id, self.manifest.version, index)

    def path(self, index: int, level: str) -> str:
        return http_api.shard_path(self.manifest.template_id, self.manifest.version, index, level)

    def fetch(
        self, index: int, level: str, timing: ShardTiming, abandon: AbandonCheck, cancel: CancelFlag,
        near_done: threading.Event | None = None,
    ) -> tuple[str, bytes]:
        """The chosen (or switched-to) level and its verified bytes. ``near_done`` is set once the
        rest of the response should take less than a round trip (time to request the next shard)."""
        near_done = near_done or threading.Event()
        if index == 0 and self.first is not None:
            first, self.first = self.first, None
            with self._lock:
                self._active += 1  # a download in flight: no other one times the round trip meanwhile
            try:
                got = first.take(self.manifest, self.hashes, cancel) if level == first.smallest_level(self.manifest) \
                    else None
            finally:
                with self._lock:
                    self._active -= 1
            first.close()
            if got is not None:
                return level, self._from_first(first.requested_at, got, timing)
        while True:
            data = self._from_cache(index, level)
            if data is not None:
                timing.source, timing.arrived_at = "cache", self.clock()
                return level, data
            try:
                return level, self._download(index, level, timing, abandon, cancel, near_done)
            except _SwitchLevel as switch:
                timing.abandoned.append(level)
                timing.bytes += switch.received
                self.meter.abandoned(switch.measured, switch.elapsed_s)
                level = switch.level

    def _from_first(self, requested_at: float, got: FirstShardBytes, timing: ShardTiming) -> bytes:
        """Shard 0 as it came with the preamble: timed, measured and cached like a download (the
        link carried the next shard's first bytes too meanwhile)."""
        timing.requested_at = requested_at + self._to_edit
        timing.first_byte_at, timing.arrived_at = got.first_byte_at + self._to_edit, got.arrived_at + self._to_edit
        timing.bytes += len(got.data)
        timing.attempts += 1
        self.meter.response(len(got.data), first_byte_at=got.first_byte_at, arrived_at=got.arrived_at, counted=False)
        self.meter.add(len(got.data))
        if self.cache is not None:
            m = self.manifest
            self.cache.write(m.template_id, m.version, 0, got.level, got.data, rank=self.rank)
        return got.data

    def _from_cache(self, index: int, level: str) -> bytes | None:
        if self.cache is None or level not in self.cached_levels(index):
            return None
        sha, length = self.hashes.sha256(index, level), self.manifest.shards[index].levels[level].length
        return self.cache.read(self.manifest.template_id, self.manifest.version, index, level, sha, length)

    def _near_end_in(self, nbytes: int, bytes_per_s: float, rtt_s: float) -> float:
        """Seconds from now to a round trip before the last byte of a response of ``nbytes`` asked
        for now: its bytes follow, on the one link, what is still to come of the downloads in flight
        (the planner's view too: ``PlanContext.in_flight``)."""
        return max(rtt_s, self.bytes_to_come() / bytes_per_s) + nbytes / bytes_per_s - rtt_s

    def _download(
        self, index: int, level: str, timing: ShardTiming, abandon: AbandonCheck, cancel: CancelFlag,
        near_done: threading.Event,
    ) -> bytes:
        location, sha256 = self.manifest.shards[index].levels[level], self.hashes.sha256(index, level)
        rtt, estimate = self.estimator.rtt_s, self.estimator.estimate()
        # The next request should leave one round trip before this response ends: at the estimated
        # rate, behind the responses requested before it (progress below corrects it with the real
        # rate). Earlier, its bytes would meet a queue still filling with this one's and lose
        # packets (measured on a tbf link: 10-30 ms late each). Without an estimate (a fresh
        # session) it leaves when the first byte arrives: one response of lead, no idle round trip.
        timer = threading.Timer(self._near_end_in(location.length, estimate.point_bytes_per_s, rtt)
                                if estimate else float("inf"), near_done.set)
        timer.daemon = True
        if estimate is not None:
            timer.start()
        asked = self.clock()
        with self._lock:
            self._lengths[index], self._received[index], self._asked[index] = location.length, 0, asked
        if timing.requested_at is None:
            timing.requested_at = asked
        own = DownloadRate(self.meter)
        last_check = [float("-inf")]  # elapsed at the last abandonment check

        def progress(received: int, _total: int) -> None:
            with self._lock:
                self._received[index] = received
            if not own.update(received):
                if estimate is None:  # no rate to time it by: the next request leaves at the first byte
                    near_done.set()
                return
            if own.rate > 0 and (location.length - received) / own.rate <= rtt:
                near_done.set()
            if own.elapsed >= ABANDON_MIN_S and own.elapsed - last_check[0] >= ABANDON_CHECK_S:
                last_check[0] = own.elapsed
                smaller = abandon(level, received, own.rate)
                if smaller is not None and smaller != level:
                    raise _SwitchLevel(smaller, received, own.measured, own.elapsed)

        with self._lock:
            self._active += 1
            alone = self._active == 1  # nothing else queued on the link: the first byte times the round trip
        try:
            got = self.transport.download(self.path(index, level), sha256=sha256, length=location.length,
                                          progress=progress, cancel=cancel, budget=self.budget, ride=True)
        finally:
            timer.cancel()
            with self._lock:
                self._active -= 1
                self._lengths.pop(index, None)
                self._asked.pop(index, None)
        timing.first_byte_at = timing.first_byte_at or got.first_byte_at + self._to_edit
        timing.bytes += location.length
        timing.attempts += got.attempts
        if got.attempts == 1 and alone:
            self.meter.round_trip(got.first_byte_at - got.requested_at)
        self.meter.response(location.length, first_byte_at=got.first_byte_at, arrived_at=got.arrived_at,
                            requested_at=got.requested_at)
        if self.cache is not None:
            m = self.manifest
            self.cache.write(m.template_id, m.version, index, level, got.data, rank=self.rank)
        timing.arrived_at = self.clock()
        return got.data
