"""What one edit costs on a device, measured for real: the inputs of the end-to-end simulator.

From a built template version (its manifest and encoded shards) and the model it was built for,
measured on this machine (compute as the fastest of a few runs: the uncontended cost, which a
device profile then scales): each shard's bytes and decode time at every SAKURA level and every
CacheGen level, the compute the model does before it needs each shard (and after the last),
and the time a phone without cached KV would need (computing the template tokens itself at
every step), for several template-to-request token ratios.
"""

from __future__ import annotations

import hashlib
import time
from collections.abc import Iterable
from dataclasses import asdict, dataclass, field, replace

import numpy as np

from sakura.evaluation.cachegen import CACHEGEN_LEVELS
from sakura.platform.codec import decode_shard, peek_header
from sakura.platform.codec.format_v2 import LowRankHeader
from sakura.platform.kv import KVPair, ShardKey, TemplateKV
from sakura.platform.manifest import DIGEST_BYTES, Manifest, PhoneManifest, PhoneShard
from sakura.platform.models import EditRequest, ModelAdapter, Schedule, Template
from sakura.platform.template_image import publish_image

TOKEN_RATIOS = (1, 2, 4)


@dataclass(frozen=True)
class ManifestWire:
    """A phone manifest's bytes on the wire, as a header and an entry per shard, measured apart
    (:func:`manifest_wire`) so a model with more blocks or steps is charged its own manifest, not
    this one's header per shard: as fetching phones get it, and without its shards' sha256s (a
    phone that may compute every block: ``?hashes=0``; the hashes follow in their own object)."""

    header: float
    per_shard: float
    unhashed_header: float
    unhashed_per_shard: float

    def bytes(self, shards: int, *, hashed: bool = True) -> int:
        if hashed:
            return round(self.header + self.per_shard * shards)
        return round(self.unhashed_header + self.unhashed_per_shard * shards)


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
    ondevice_s: dict[int, float] = field(default_factory=dict)  # per token ratio: the stock on-device edit
    replay_s: dict[int, float] = field(default_factory=dict)  # compute-only edit time per ratio
    manifest: ManifestWire = field(default_factory=lambda: ManifestWire(0.0, 0.0, 0.0, 0.0))
    raw_bytes: list[int] = field(default_factory=list)  # each shard's K + V at 2 bytes a value
    kv_itemsize: int = 2  # bytes per value of the model's KV (what the lossless level stores)
    # What the on-device baselines compute and every system fetches before its KV (see ``ondevice_compute_s``).
    kv_cached: bool = False  # the stock pipeline computes the reference tokens once (else at every step)
    text_encode_s: float = 0.0  # the template's prompt through the text encoder(s)
    reference_encode_s: float = 0.0  # the template's image through the VAE
    reference_pass_s: float = 0.0  # the reference tokens through every block, one step
    #: Computing each shard's KV on the phone; empty where the live client cannot (the model's adapter
    #: does not compute template KV), so the simulated hybrid fetches, as the live one does.
    shard_compute_s: list[float] = field(default_factory=list)
    source_bytes: int = 0  # the template's image and prompt: what the stock pipeline downloads
    context_bytes: int = 0  # SAKURA's context objects (prompt embeddings), fetched with the manifest
    prepared_bytes: int = 0  # prompt embeddings + reference latents: what on-device-prepared downloads
    #: The template's published JPEG: SAKURA's hybrid fetches it and makes the source (the reference
    #: latents) from it on the phone in ``reference_encode_s``; 0: it fetches the source objects.
    image_bytes: int = 0
    #: Per transform level (wire format v2): seconds decoding each shard to its factors, before any
    #: rebuild (``decode_s`` includes the rebuild), and K's and V's mean rank as a share of
    #: min(tokens, width), an identity basis counting as 1: what analytic workloads count FLOPs from.
    factor_decode_s: dict[str, list[float]] = field(default_factory=dict)
    rank_shares: dict[str, tuple[float, float]] = field(default_factory=dict)

    @property
    def shards(self) -> int:
        return len(self.weights)

    @property
    def manifest_bytes(self) -> int:
        """The manifest as a fetching phone gets it (every shard's sha256 in it)."""
        return self.manifest.bytes(self.shards)

    @property
    def unhashed_manifest_bytes(self) -> int:
        """The manifest without its shards' sha256s: what a phone that may compute asks for."""
        return self.manifest.bytes(self.shards, hashed=False)

    @property
    def shard_hashes_bytes(self) -> int:
        """The shard hashes object such a phone fetches before its first shard."""
        return self.shards * len(self.levels) * DIGEST_BYTES

    @property
    def shards_per_step(self) -> int:
        """Shards computed in one pass of the reference tokens (every shard for KV-cached models)."""
        return self.shards if self.kv_cached else max(1, self.shards // self.steps)

    def ondevice_compute_s(self, system: str) -> float:
        """Compute seconds of an on-device baseline: ``on-device`` (the stock pipeline: text encoder,
        VAE of the reference, the reference pass once if KV-cached else at every step, the edit),
        ``on-device-uncached`` (the reference pass at every step) or ``on-device-prepared`` (prompt
        embeddings and reference latents downloaded; the reference KV computed once)."""
        passes = 1 if self.kv_cached else self.steps
        encode = self.text_encode_s + self.reference_encode_s
        if system == "on-device":
            return encode + passes * self.reference_pass_s + self.compute_s
        if system == "on-device-uncached":
            return encode + self.steps * self.reference_pass_s + self.compute_s
        if system == "on-device-prepared":
            return passes * self.reference_pass_s + self.compute_s
        raise ValueError(f"unknown on-device system {system!r}")

    def template_compute_s(self, computed: Iterable[int]) -> float:
        """The phone's time computing the template KV of the shards ``computed``: per pass of the
        reference tokens (a step, or the only one of a KV-cached model), every block up to the
        highest computed one."""
        per, total = self.shards_per_step, 0.0
        highest: dict[int, int] = {}  # pass -> its highest computed shard
        for i in computed:
            highest[i // per] = max(highest.get(i // per, -1), i)
        for step, top in highest.items():
            total += sum(self.shard_compute_s[step * per:top + 1])
        return total

    @property
    def compute_s(self) -> float:
        return self.startup_s + sum(self.gaps_s)

    def scaled(self, compute_factor: float, *, decode_factor: float | None = None) -> EditGeometry:
        """The same edit on a device ``compute_factor`` times slower at computing and ``decode_factor``
        times slower at decoding (by default ``compute_factor`` too)."""
        f = compute_factor
        df = f if decode_factor is None else decode_factor
        return replace(self, startup_s=self.startup_s * f, gaps_s=[g * f for g in self.gaps_s],
                       decode_s={k: [d * df for d in v] for k, v in self.decode_s.items()},
                       factor_decode_s={k: [d * df for d in v] for k, v in self.factor_decode_s.items()},
                       ondevice_s={r: t * f for r, t in self.ondevice_s.items()},
                       replay_s={r: t * f for r, t in self.replay_s.items()},
                       text_encode_s=self.text_encode_s * f, reference_encode_s=self.reference_encode_s * f,
                       reference_pass_s=self.reference_pass_s * f,
                       shard_compute_s=[c * f for c in self.shard_compute_s])

    def at_ratio(self, ratio: int) -> EditGeometry:
        """The edit with ``ratio`` times as many template tokens: bytes and decode scale with them;
        compute is the measured replay at that ratio, spread like the measured one."""
        stretch = self.replay_s[ratio] / self.replay_s[1]
        return replace(self, template_tokens=self.template_tokens * ratio,
                       sizes={k: [s * ratio for s in v] for k, v in self.sizes.items()},
                       decode_s={k: [d * ratio for d in v] for k, v in self.decode_s.items()},
                       factor_decode_s={k: [d * ratio for d in v] for k, v in self.factor_decode_s.items()},
                       startup_s=self.startup_s * stretch, gaps_s=[g * stretch for g in self.gaps_s])

    def to_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_dict(cls, raw: dict) -> EditGeometry:
        """The inverse of :meth:`to_dict` after a JSON round trip (whose keys are strings and
        whose tuples are lists)."""
        data = dict(raw)
        data["manifest"] = ManifestWire(**data["manifest"]) if "manifest" in data else ManifestWire(0.0, 0.0, 0.0, 0.0)
        for name in ("ondevice_s", "replay_s"):
            data[name] = {int(ratio): float(t) for ratio, t in data.get(name, {}).items()}
        data["rank_shares"] = {lv: (float(k), float(v)) for lv, (k, v) in data.get("rank_shares", {}).items()}
        return cls(**data)


class _TimedKV:
    """Template KV that notes when the model asks for each shard."""

    def __init__(self, kv: TemplateKV) -> None:
        self.kv, self.model_fingerprint = kv, kv.model_fingerprint
        self.asked: list[float] = []  # when the model asked for each shard (perf_counter)

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
    ratios: tuple[int, ...] = TOKEN_RATIOS,
) -> tuple[EditGeometry, dict[str, TemplateKV]]:
    """Measure one template version; also returns the decoded KV at every level (for fidelity).
    ``ratios``: the template-to-request token ratios to time the edit at (1 always)."""
    ratios = tuple(sorted({1, *ratios}))
    levels = [lvl.name for lvl in manifest.levels]
    keys = [s.key for s in manifest.shards]
    decoded: dict[str, TemplateKV] = {}
    sizes: dict[str, list[int]] = {}
    decode_s: dict[str, list[float]] = {}
    factors = FactorMeasure()
    for level in levels:
        pairs, times = [], []
        for data in payloads[level]:
            start = time.perf_counter()
            pairs.append(decode_shard(data))
            times.append(time.perf_counter() - start)
            factors.measure(level, data)
        decoded[level] = TemplateKV(manifest.model.fingerprint, dict(zip(keys, pairs)))
        sizes[level], decode_s[level] = [len(p) for p in payloads[level]], times
    exact = decoded[levels[-1]]  # the lossless level
    for codec in CACHEGEN_LEVELS:
        trips = [codec.roundtrip(exact[k], k, np.ones(1), manifest.model.layers) for k in keys]
        decoded[codec.name] = TemplateKV(exact.model_fingerprint, {k: t.pair for k, t in zip(keys, trips)})
        sizes[codec.name], decode_s[codec.name] = [t.nbytes for t in trips], [t.decode_s for t in trips]
    schedule = Schedule(manifest.schedule.steps, manifest.schedule.strength)
    startup, gaps = _compute_profile(adapter, exact, manifest.prompt, request, schedule, repeats)
    tiled = {r: _tiled(exact, r) for r in ratios}
    replay = {r: _fastest(lambda kv=tiled[r]: adapter.replay(kv, manifest.prompt, request, schedule), repeats)
              for r in ratios}
    full = _fastest(lambda: adapter.full(template, request, schedule), repeats)
    template_compute = max(0.0, full - replay[1])  # what ``full`` spends on the template tokens
    one_pass = template_compute if adapter.full_caches_template else template_compute / schedule.steps
    kv_cached = not adapter.step_dependent
    passes = 1 if kv_cached else schedule.steps  # the stock pipeline's passes of the template tokens
    per_step = len(keys) if kv_cached else max(1, len(keys) // schedule.steps)
    geometry = EditGeometry(
        template=manifest.template_id, model=manifest.model.name, steps=schedule.steps,
        template_tokens=manifest.tokens.template, request_tokens=manifest.tokens.image + manifest.tokens.text,
        levels=levels, cachegen_levels=[c.name for c in CACHEGEN_LEVELS], sizes=sizes, decode_s=decode_s,
        weights=[s.weight for s in manifest.shards], startup_s=startup, gaps_s=gaps,
        ondevice_s={r: replay[r] + r * passes * one_pass for r in ratios}, replay_s=replay,
        manifest=manifest_wire(manifest.for_phone()),
        raw_bytes=[2 * (exact[k].k.size + exact[k].v.size) for k in keys],
        kv_itemsize=exact[keys[0]].k.dtype.itemsize,
        kv_cached=kv_cached, reference_pass_s=one_pass,
        shard_compute_s=[one_pass / per_step] * len(keys) if adapter.computes_template else [],
        source_bytes=template_source_bytes(template), context_bytes=sum(c.length for c in manifest.context),
        image_bytes=sum(i.length for i in manifest.images),
        factor_decode_s=factors.seconds, rank_shares=factors.rank_shares(),
        prepared_bytes=sum(c.length for c in [*manifest.context, *manifest.source]) if manifest.source
        else sum(c.length for c in manifest.context) + template_source_bytes(template))
    return geometry, decoded


class FactorMeasure:
    """Version 2 shards decoded to their factors, timed, and their ranks noted."""

    def __init__(self) -> None:
        self.seconds: dict[str, list[float]] = {}
        self._shares: dict[str, list[tuple[float, float]]] = {}

    def measure(self, level: str, data: bytes) -> None:
        header = peek_header(data)
        if not isinstance(header, LowRankHeader):
            return
        start = time.perf_counter()
        decode_shard(data, factored=True)
        self.seconds.setdefault(level, []).append(time.perf_counter() - start)
        top = min(header.tokens, header.width)
        k, v = (t.rank / top if t.basis else 1.0 for t in header.tensors)
        self._shares.setdefault(level, []).append((k, v))

    def rank_shares(self) -> dict[str, tuple[float, float]]:
        return {level: (float(np.mean([k for k, _ in s])), float(np.mean([v for _, v in s])))
                for level, s in self._shares.items()}


def manifest_wire(manifest: PhoneManifest, extra: int = 256) -> ManifestWire:
    """``manifest``'s wire bytes split into a header and a per-shard entry: measured by listing
    ``extra`` more shards like its own, each with sha256s of its own (which, like real ones, do not
    compress), with and without those sha256s."""
    n = len(manifest.shards)

    def like(shard: PhoneShard, index: int) -> PhoneShard:
        return shard.model_copy(update={"index": index, "levels": {
            name: payload.model_copy(update={"sha256": hashlib.sha256(f"{index}/{name}".encode()).hexdigest()})
            for name, payload in shard.levels.items()}})

    longer = manifest.model_copy(update={"shards": [*manifest.shards, *(like(manifest.shards[i % n], n + i)
                                                                         for i in range(extra))]})
    sizes = [len(view.to_wire()) for view in (manifest, longer, manifest.without_hashes(), longer.without_hashes())]
    per_shard, unhashed_per_shard = (sizes[1] - sizes[0]) / extra, (sizes[3] - sizes[2]) / extra
    return ManifestWire(sizes[0] - n * per_shard, per_shard, sizes[2] - n * unhashed_per_shard, unhashed_per_shard)


def template_source_bytes(template: Template) -> int:
    """What the stock pipeline downloads: the template's image as the JPEG the cloud publishes
    (:mod:`sakura.platform.template_image`, quality 90: an estimate of how an app ships one) and its prompt."""
    return len(publish_image(template.image)[0]) + len(template.prompt.encode())


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
