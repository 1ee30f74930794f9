"""Named workloads: what one edit costs, as an :class:`~sakura.evaluation.geometry.EditGeometry`.

Two sources:

* ``measured:<model>``: the example templates built for a model this machine runs (``reference``,
  ``bench-flux``), their shards and compute measured here (:func:`measure_geometry`), scaled to a
  device profile;
* ``analytic:<arch>``: a real architecture (:mod:`~sakura.evaluation.architectures`) at a reference
  and output resolution and a step count: per-block KV bytes from its shapes, bytes per level and
  decode speed from :class:`CodecRates` measured on a real model's KV, compute as counted FLOPs over
  the device profile's throughput.

The names of :data:`WORKLOADS` are what benches take (``bench/e2e.py --workload NAME``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, fields, replace
from functools import lru_cache

import numpy as np

from sakura.evaluation.architectures import EditFlops, architecture, edit_flops
from sakura.evaluation.fidelity import FidelityTable
from sakura.evaluation.geometry import TOKEN_RATIOS, EditGeometry, ManifestWire, measure_geometry
from sakura.evaluation.profiles import DeviceProfile
from sakura.platform.codec import LevelSpec
from sakura.platform.models.factored_cost import AttentionShape, phone_flops

#: A stock template image and prompt as the stock pipeline would download them (see ``source_bytes``).
STOCK_IMAGE, STOCK_PROMPT = "skimage:astronaut", "a portrait in the style of the template"


@dataclass(frozen=True)
class Measured:
    model: str

    @property
    def source(self) -> str:
        return f"measured:{self.model}"


@dataclass(frozen=True)
class Analytic:
    arch: str
    reference: int  # reference image side, pixels
    output: int  # output image side, pixels
    steps: int

    @property
    def source(self) -> str:
        return f"analytic:{self.arch}@{self.reference}/{self.output}/{self.steps}"


WORKLOADS: dict[str, Measured | Analytic] = {
    "reference": Measured("reference"),
    "bench-flux": Measured("bench-flux"),
    # FLUX.2 [klein] distilled: 4 steps, its pipeline's default.
    "klein-4b-ref512": Analytic("klein-4b", 512, 512, 4),
    "klein-4b-ref1024": Analytic("klein-4b", 1024, 512, 4),  # the paper regime
    "klein-9b-ref1024": Analytic("klein-9b", 1024, 512, 4),
    # Not distilled: FluxKontextPipeline's and StableDiffusion3Pipeline's default 28 steps.
    "kontext-ref512": Analytic("kontext", 512, 512, 28),
    "sd35m-ref512": Analytic("sd35-medium", 512, 512, 28),
}


def workload_spec(name: str) -> Measured | Analytic:
    """A name of :data:`WORKLOADS`, or ``measured:<model>`` / ``analytic:<arch>@<ref>/<out>/<steps>``."""
    if name in WORKLOADS:
        return WORKLOADS[name]
    kind, _, rest = name.partition(":")
    if kind == "measured" and rest:
        return Measured(rest)
    if kind == "analytic" and "@" in rest:
        arch, _, sizes = rest.partition("@")
        try:
            reference, output, steps = (int(x) for x in sizes.split("/"))
        except ValueError:
            raise ValueError(f"workload {name!r}: expected analytic:<arch>@<reference>/<output>/<steps>") from None
        return Analytic(arch, reference, output, steps)
    raise ValueError(f"unknown workload {name!r}; known: {', '.join(WORKLOADS)}, measured:<model>, "
                     "analytic:<arch>@<reference>/<output>/<steps>")


@dataclass
class MeasuredWorkload:
    """The example templates built for ``model``, measured on this machine (unscaled)."""

    model: str
    geometries: list[EditGeometry]
    fidelity: list[FidelityTable]
    floors: list[str] = field(default_factory=list)  # per template: CacheGen's matched floor


def measure_workload(model: str, library: str, *, steps: int | None = None, repeats: int = 5,
                     ratios: tuple[int, ...] = TOKEN_RATIOS, levels: tuple[LevelSpec, ...] | None = None,
                     ) -> MeasuredWorkload:
    """Build the example templates for ``model`` into ``library`` (those it lacks; at ``levels``,
    by default the build's), then measure each edit's geometry and the fidelity of its level plans."""
    from sakura.evaluation.workload import build_examples, example_spec, load_cases
    from sakura.platform.models import Schedule, load_model

    spec = example_spec()
    build_examples(library, spec, model=model, steps=steps, levels=levels)
    adapter = load_model(model)
    out = MeasuredWorkload(model, [], [])
    for case in load_cases(library, spec, adapter.resolution):
        g, decoded = measure_geometry(adapter, case.manifest, case.payloads, case.template, case.request,
                                      repeats=repeats, ratios=ratios)
        schedule = Schedule(case.manifest.schedule.steps, case.manifest.schedule.strength)
        fidelity = FidelityTable(adapter, decoded, g.levels[-1], case.manifest.prompt, case.request, schedule)
        out.geometries.append(g)
        out.fidelity.append(fidelity)
        out.floors.append(matched_floor(g, fidelity))
    return out


def workload_geometries(spec: Measured | Analytic, profile: DeviceProfile, reference: MeasuredWorkload,
                        rates: CodecRates | None = None) -> list[EditGeometry]:
    """The edits of ``spec`` on ``profile``: an analytic workload's one edit (bytes per level and
    decode cost from ``rates``, by default ``reference``'s measured KV), or ``reference``'s measured
    edits scaled to the profile (``reference`` then being ``spec``'s model's)."""
    if isinstance(spec, Analytic):
        g0 = reference.geometries[0]
        rates = rates or CodecRates.from_geometries(reference.geometries)
        return [analytic_geometry(spec, profile, rates, g0.levels, g0.cachegen_levels)]
    return [g.scaled(profile.compute_factor, decode_factor=profile.cpu_factor) for g in reference.geometries]


def matched_floor(g: EditGeometry, fidelity: FidelityTable) -> str:
    """The coarsest CacheGen configuration at least as faithful as SAKURA's smallest level."""
    target = fidelity.psnr((g.levels[0],) * g.shards)
    for level in g.cachegen_levels:
        if fidelity.psnr((level,) * g.shards) >= target:
            return level
    return g.cachegen_levels[-1]


@dataclass(frozen=True)
class CodecRates:
    """What the codecs do to real KV, measured on ``model``'s templates: each level's bytes over the
    KV at 2 bytes a value (the lossless ``full`` level: over the KV in its own dtype, so it carries to
    an fp16 model), decode seconds per such byte on this machine (a transform level: to its factors),
    each transform level's ranks (K's and V's, as a share of min(tokens, width): the phone's rebuild
    or factored attention is counted in FLOPs from them), the manifest's bytes on the wire: a
    header, and each shard's entry; and per model family (:attr:`Architecture.family`) the context
    objects' bytes over their values at 2 bytes each (a family not named: 1.0, shipped uncoded)."""

    model: str
    size_ratio: dict[str, float]
    decode_s_per_byte: dict[str, float]
    manifest: ManifestWire
    lossless: str  # SAKURA's lossless level
    rank_shares: dict[str, tuple[float, float]] = field(default_factory=dict)
    context_ratio: dict[str, float] = field(default_factory=dict)

    @classmethod
    def from_geometries(cls, geometries: Sequence[EditGeometry]) -> CodecRates:
        g0 = geometries[0]
        raw = sum(sum(g.raw_bytes) for g in geometries)
        size = {lv: sum(sum(g.sizes[lv]) for g in geometries) / raw for lv in g0.sizes}
        size[g0.levels[-1]] /= g0.kv_itemsize / 2
        decode = {lv: sum(sum(g.factor_decode_s.get(lv, g.decode_s[lv])) for g in geometries) / raw
                  for lv in g0.decode_s}
        manifest = ManifestWire(*(sum(getattr(g.manifest, f.name) for g in geometries) / len(geometries)
                                  for f in fields(ManifestWire)))
        ranks = {lv: (float(np.mean([g.rank_shares[lv][0] for g in geometries])),
                      float(np.mean([g.rank_shares[lv][1] for g in geometries]))) for lv in g0.rank_shares}
        return cls(g0.model, size, decode, manifest, g0.levels[-1], ranks)

    def with_codec_bench(self, report: dict, methods: Mapping[str, str] | None = None,
                         decode_from: dict | None = None) -> CodecRates:
        """These rates with bytes, decode cost and ranks of every level a codec bench report
        (``bench/codec.py --json``) measured on its model instead; the manifest's stay. A level is the
        report's method of its name, or the one ``methods`` maps it to (e.g. ``compact-v1``). The
        decode cost comes from ``decode_from`` where given (see :func:`largest_shards`)."""
        itemsize, names = report["kv_itemsize"], dict(methods or {})
        size, ranks = dict(self.size_ratio), {}
        for level in size:
            m = report["methods"][names.get(level, level)]
            size[level] = 1.0 / m["ratio_vs_fp16"] / (itemsize / 2 if level == self.lossless else 1.0)
            if "k_rank_share" in m:
                ranks[level] = (m["k_rank_share"], m["v_rank_share"])
        rates = replace(self, model=report["model"], size_ratio=size, rank_shares=ranks)
        return rates.with_decode_from(decode_from or report, methods)

    def with_context_bench(self, report: dict, *, own_family: bool) -> CodecRates:
        """These rates with context objects coded as ``report`` (``bench/context_objects.py --json``)
        measured them: each family as its own tiny pipeline (:data:`CONTEXT_PIPELINES`;
        ``own_family``, the optimistic bracket), or every family as the least compressible pipeline."""
        measured = {m["model"]: context_ratio(m) for m in report["models"]}
        worst = max(measured.values(), default=1.0)
        ratios = {family: measured[model] if own_family else worst for family, model in CONTEXT_PIPELINES.items()
                  if model in measured}
        return replace(self, context_ratio=ratios)

    def with_decode_from(self, report: dict, methods: Mapping[str, str] | None = None) -> CodecRates:
        """These rates with each level's decode seconds per byte as ``report`` measured them."""
        names = dict(methods or {})
        decode = dict(self.decode_s_per_byte)
        for level in decode:
            m = report["methods"][names.get(level, level)]
            decode[level] = 1.0 / (m.get("factor_decode_mb_s", m["decode_mb_s"]) * 1e6)
        return replace(self, decode_s_per_byte=decode)


#: Per architecture family, the tiny pipeline with its text encoders (their kinds, sequence length
#: and padding as the family's pipeline runs them; seeded random weights) whose context objects
#: ``bench/context_objects.py`` measures.
CONTEXT_PIPELINES: dict[str, str] = {"flux2-klein": "tiny-klein", "flux1": "tiny-kontext", "sd3": "tiny-sd3-pipeline"}


def context_ratio(measured: dict) -> float:
    """A pipeline's context objects as the build ships them over their values in their own dtype:
    a coded object at its bytes within parity, any other at its raw size (no credit for zstd)."""
    shipped = raw = 0
    for entry in measured["objects"].values():
        size = int(np.prod(entry["shape"])) * np.dtype(entry["dtype"]).itemsize
        coded = entry["coded_within_parity_bytes"]
        shipped += min(coded, size) if coded is not None else size
        raw += size
    return shipped / raw if raw else 1.0


def least_compressible(reports: Sequence[dict], levels: Sequence[str]) -> dict:
    """The codec bench report whose model's ``levels`` are largest (the geometric mean of their
    ratios vs fp16 lowest): the conservative bracket analytic workloads take their rates from."""
    def mean_ratio(report: dict) -> float:
        return float(np.exp(np.mean([np.log(report["methods"][lv]["ratio_vs_fp16"]) for lv in levels])))


    usable = [r for r in reports if all(lv in r["methods"] for lv in levels) and "kv_itemsize" in r]
    if not usable:
        raise ValueError(f"no codec bench report measures the levels {list(levels)}")
    return min(usable, key=mean_ratio)


def largest_shards(reports: Sequence[dict], levels: Sequence[str]) -> dict:
    """The codec bench report measured on the largest shards (tokens x width of its rank spectrum):
    where analytic workloads take their decode cost per byte from, in either bracket. A decoder's
    throughput on a 32 kB shard is its per-shard fixed cost, which a real model's shard (tens of MB)
    amortises; bytes per level stay a property of the KV (:func:`least_compressible`)."""
    usable = [r for r in reports if all(lv in r["methods"] for lv in levels) and r.get("rank_spectrum")]
    if not usable:
        raise ValueError(f"no codec bench report with a rank spectrum measures the levels {list(levels)}")
    return max(usable, key=lambda r: r["rank_spectrum"]["tokens"] * r["rank_spectrum"]["width"])


def analytic_geometry(spec: Analytic, profile: DeviceProfile, rates: CodecRates, levels: Sequence[str],
                      cachegen_levels: Sequence[str], *, phone_computes: bool | None = None) -> EditGeometry:
    """One edit of ``spec`` on ``profile``: shards are the reference KV of each block (and each step
    for a per-step architecture), consumed in the order the transformer runs them. The phone may
    compute template blocks where ``phone_computes`` says (by default, where its architecture's
    client can: :attr:`~sakura.evaluation.architectures.Architecture.phone_computes_template`)."""
    f = edit_flops(spec.arch, reference=spec.reference, output=spec.output, steps=spec.steps)
    per_step = 1 if f.kv_cached else spec.steps
    n = f.blocks * per_step
    sec = 1.0 / profile.flops_per_s
    startup, gaps = _timeline(f, spec.steps, sec)
    all_levels = [*levels, *cachegen_levels]
    computes = architecture(spec.arch).phone_computes_template if phone_computes is None else phone_computes
    raw = f.kv_bytes_per_block
    source = stock_source_bytes(spec.reference)
    context = round(f.prompt_embed_bytes * rates.context_ratio.get(architecture(spec.arch).family, 1.0))
    phone_s = _phone_factor_seconds(spec, f, rates, sec)
    geometry = EditGeometry(
        template=spec.source, model=spec.arch, steps=spec.steps, template_tokens=f.reference_tokens,
        request_tokens=f.image_tokens + f.text_tokens, levels=list(levels), cachegen_levels=list(cachegen_levels),
        sizes={lv: [round(raw * rates.size_ratio[lv])] * n for lv in all_levels},
        decode_s={lv: [raw * rates.decode_s_per_byte[lv] * profile.cpu_factor + phone_s.get(lv, 0.0)] * n
                  for lv in all_levels},
        weights=[1.0] * n, startup_s=startup, gaps_s=gaps,
        manifest=rates.manifest, raw_bytes=[raw] * n, kv_itemsize=2,
        kv_cached=f.kv_cached, text_encode_s=f.text_encode * sec, reference_encode_s=f.vae_encode_reference * sec,
        reference_pass_s=sum(f.reference) * sec,
        shard_compute_s=[r * sec for r in f.reference] * per_step if computes else [],
        source_bytes=source, context_bytes=context, prepared_bytes=context + f.reference_latent_bytes,
        image_bytes=source - len(STOCK_PROMPT.encode()))
    geometry.ondevice_s[1] = geometry.ondevice_compute_s("on-device")
    geometry.replay_s[1] = geometry.compute_s
    return geometry


def _phone_factor_seconds(spec: Analytic, f: EditFlops, rates: CodecRates, sec: float) -> dict[str, float]:
    """Per transform level, what one shard's factors cost the phone beyond K/V as they are: the
    rebuild, or attending to the factors at every use where that counts fewer FLOPs (the live
    replay's choice), at the measured ranks' share of this architecture's min(tokens, width)."""
    arch = architecture(spec.arch)
    shape = AttentionShape(batch=1, heads=arch.heads, queries=f.image_tokens + f.text_tokens,
                           tokens=f.reference_tokens, head_dim=arch.width // arch.heads,
                           uses=spec.steps if f.kv_cached else 1)
    top = min(shape.tokens, shape.width)
    return {lv: phone_flops(shape, round(k * top), round(v * top)) * sec for lv, (k, v) in rates.rank_shares.items()}


def _timeline(f: EditFlops, steps: int, sec: float) -> tuple[float, list[float]]:
    """Compute before the first shard is needed, and after consuming each: a KV-cached model needs
    block b's KV when block b first runs (step 0); a per-step model at every step."""
    startup = (f.vae_encode_photo + f.outside_per_step) * sec
    block = [c * sec for c in f.cached]
    if f.kv_cached:
        gaps = block[:-1] + [block[-1] + (steps - 1) * f.replay_step * sec + f.vae_decode * sec]
        return startup, gaps
    gaps = []
    for _ in range(steps):
        gaps += block[:-1] + [block[-1] + f.outside_per_step * sec]
    gaps[-1] += (f.vae_decode - f.outside_per_step) * sec
    return startup, gaps


@lru_cache(maxsize=8)
def stock_source_bytes(resolution: int) -> int:
    """A stock template (a photograph at ``resolution``, JPEG quality 90, and a prompt) as downloaded."""
    from sakura.evaluation.geometry import template_source_bytes
    from sakura.platform.images import fit_image, load_image
    from sakura.platform.models import Template

    return template_source_bytes(Template(fit_image(load_image(STOCK_IMAGE), resolution), STOCK_PROMPT))
