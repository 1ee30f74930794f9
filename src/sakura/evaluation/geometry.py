"""What one edit costs on a device, measured for real: the inputs of the end-to-end simulator.

From a built template version (its manifest and encoded shards) and the model it was built for,
measured on this machine (compute as the fastest of a few runs: the uncontended cost, which a
device profile then scales): each shard's bytes and decode time at every SAKURA level and every
CacheGen level, the compute the model does before it needs each shard (and after the last),
and the time a phone without cached KV would need (computing the template tokens itself at
every step), for several template-to-request token ratios.
"""

from __future__ import annotations

import time
from dataclasses import asdict, dataclass, field, replace

import numpy as np

from sakura.evaluation.cachegen import CACHEGEN_LEVELS
from sakura.platform.codec import decode_shard
from sakura.platform.kv import KVPair, ShardKey, TemplateKV
from sakura.platform.manifest import Manifest
from sakura.platform.models import EditRequest, ModelAdapter, Schedule, Template

TOKEN_RATIOS = (1, 2, 4)


@dataclass
class EditGeometry:
    template: str
    model: str
    steps: int
    template_tokens: int
    request_tokens: int
    levels: list[str]  # SAKURA's, smallest first
    cachegen_levels: list[str]  # smallest first
    sizes: dict[str, list[int]]  # bytes per shard, every level of both codecs
    decode_s: dict[str, list[float]]
    weights: list[float]
    startup_s: float  # compute before shard 0 is needed
    gaps_s: list[float]  # compute after consuming shard i (the last: until the image is done)
    ondevice_s: dict[int, float] = field(default_factory=dict)  # per token ratio
    replay_s: dict[int, float] = field(default_factory=dict)  # compute-only edit time per ratio
    manifest_bytes: int = 0

    @property
    def shards(self) -> int:
        return len(self.weights)

    @property
    def compute_s(self) -> float:
        return self.startup_s + sum(self.gaps_s)

    def scaled(self, compute_factor: float) -> "EditGeometry":
        """The same edit on a device ``compute_factor`` times slower (decoding included)."""
        f = compute_factor
        return replace(self, startup_s=self.startup_s * f, gaps_s=[g * f for g in self.gaps_s],
                       decode_s={k: [d * f for d in v] for k, v in self.decode_s.items()},
                       ondevice_s={r: t * f for r, t in self.ondevice_s.items()},
                       replay_s={r: t * f for r, t in self.replay_s.items()})

    def at_ratio(self, ratio: int) -> "EditGeometry":
        """The edit with ``ratio`` times as many template tokens: bytes and decode scale with them;
        compute is the measured replay at that ratio, spread like the measured one."""
        stretch = self.replay_s[ratio] / self.replay_s[1]
        return replace(self, template_tokens=self.template_tokens * ratio,
                       sizes={k: [s * ratio for s in v] for k, v in self.sizes.items()},
                       decode_s={k: [d * ratio for d in v] for k, v in self.decode_s.items()},
                       startup_s=self.startup_s * stretch, gaps_s=[g * stretch for g in self.gaps_s])

    def to_dict(self) -> dict:
        return asdict(self)


class _TimedKV:
    """Template KV that notes when the model asks for each shard."""

    def __init__(self, kv: TemplateKV) -> None:
        self.kv, self.model_fingerprint, self.asked = kv, kv.model_fingerprint, []

    @property
    def keys(self) -> list[ShardKey]:
        return self.kv.keys

    @property
    def template_tokens(self) -> int:
        return self.kv.template_tokens

    def __getitem__(self, key: ShardKey) -> KVPair:
        self.asked.append(time.perf_counter())
        return self.kv[key]


def measure_geometry(
    adapter: ModelAdapter,
    manifest: Manifest,
    payloads: dict[str, list[bytes]],
    template: Template,
    request: EditRequest,
    *,
    repeats: int = 5,
) -> tuple[EditGeometry, dict[str, TemplateKV]]:
    """Measure one template version; also returns the decoded KV at every level (for fidelity)."""
    levels = [lvl.name for lvl in manifest.levels]
    keys = [s.key for s in manifest.shards]
    decoded: dict[str, TemplateKV] = {}
    sizes: dict[str, list[int]] = {}
    decode_s: dict[str, list[float]] = {}
    for level in levels:
        pairs, times = [], []
        for data in payloads[level]:
            start = time.perf_counter()
            pairs.append(decode_shard(data))
            times.append(time.perf_counter() - start)
        decoded[level] = TemplateKV(manifest.model.fingerprint, dict(zip(keys, pairs)))
        sizes[level], decode_s[level] = [len(p) for p in payloads[level]], times
    exact = decoded[levels[-1]]  # the lossless level
    for codec in CACHEGEN_LEVELS:
        trips = [codec.roundtrip(exact[k], k, np.ones(1), manifest.model.layers) for k in keys]
        decoded[codec.name] = TemplateKV(exact.model_fingerprint, {k: t.pair for k, t in zip(keys, trips)})
        sizes[codec.name], decode_s[codec.name] = [t.nbytes for t in trips], [t.decode_s for t in trips]
    schedule = Schedule(manifest.schedule.steps, manifest.schedule.strength)
    startup, gaps = _compute_profile(adapter, exact, manifest.prompt, request, schedule, repeats)
    tiled = {r: _tiled(exact, r) for r in TOKEN_RATIOS}
    replay = {r: _fastest(lambda: adapter.replay(tiled[r], manifest.prompt, request, schedule), repeats)
              for r in TOKEN_RATIOS}
    full = _fastest(lambda: adapter.full(template, request, schedule), repeats)
    template_compute = max(0.0, full - replay[1])  # computing the template tokens at every step
    geometry = EditGeometry(
        template=manifest.template_id, model=manifest.model.name, steps=schedule.steps,
        template_tokens=manifest.tokens.template, request_tokens=manifest.tokens.image + manifest.tokens.text,
        levels=levels, cachegen_levels=[c.name for c in CACHEGEN_LEVELS], sizes=sizes, decode_s=decode_s,
        weights=[s.weight for s in manifest.shards], startup_s=startup, gaps_s=gaps,
        ondevice_s={r: replay[r] + r * template_compute for r in TOKEN_RATIOS}, replay_s=replay,
        manifest_bytes=len(manifest.to_bytes()))
    return geometry, decoded


def _compute_profile(adapter, kv, prompt, request, schedule, repeats) -> tuple[float, list[float]]:
    runs = []
    for _ in range(repeats + 1):
        timed = _TimedKV(kv)
        start = time.perf_counter()
        adapter.replay(timed, prompt, request, schedule)
        end = time.perf_counter()
        marks = [start, *timed.asked, end]
        runs.append([b - a for a, b in zip(marks, marks[1:])])
    per_gap = [min(r[i] for r in runs[1:]) for i in range(len(runs[0]))]  # first run warms up
    return per_gap[0], per_gap[1:]


def _tiled(kv: TemplateKV, ratio: int) -> TemplateKV:
    if ratio == 1:
        return kv
    return TemplateKV(kv.model_fingerprint, {k: KVPair(np.tile(p.k, (1, ratio, 1)), np.tile(p.v, (1, ratio, 1)))
                                             for k, p in kv.shards.items()})


def _fastest(fn, repeats: int) -> float:
    fn()  # warm up
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return min(times)
