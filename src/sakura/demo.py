"""``sakura demo``: the mission live, in a few minutes, on the embedded default.

1. Checks that replaying cached template KV is exact on every model family.
2. Starts a local Ray, builds the three example templates for the reference model into a local
   library (the build job), and serves it with Ray Serve on 127.0.0.1.
3. Paces the phone and the link as a real workload (``--workload`` on ``--profile``): an
   emulation (:mod:`sakura.emulation.pacing`). The reference model's KV is tiny and computed in
   milliseconds here, so on its own the phone would never gain by fetching. Instead each block of
   template KV the phone computes takes ``--block-s`` seconds, the edit's own compute between
   blocks takes the real workload's share of that, and each real trace plays slower by the same
   factor at its rates times ``k``, so that a byte of the reference model's KV takes as long to
   arrive as the bytes of the real workload's KV it stands for.
4. Over each bundled real trace (3G, 4G, 5G; ``--traces``), edits a photo with an example
   template twice from the trace's middle, each from a fresh session: SAKURA (``hybrid``: per
   block, fetch it at a level or compute it) and the phone alone (``on-device``: the same client
   computing every block). Prints each block's source, the bytes, stalls and latencies, and
   writes per trace the images, both edits' timelines and the link's rate with each block's source.
5. Prints per trace SAKURA's latency over the phone alone's.
6. Shuts Serve and Ray down and checks that no process is left behind.
"""

from __future__ import annotations

import argparse
import inspect
import math
import os
import statistics
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from sakura._argparse import command_parser
from sakura.emulation.pacing import WorkloadPacing
from sakura.emulation.traces import BandwidthTrace, load_trace
from sakura.examples import TEMPLATES, trace_path
from sakura.platform.verify import verify_model

if TYPE_CHECKING:
    from sakura.edge_client import EditResult

#: The bundled real traces, by the network they were recorded on (sources: examples/traces/README.md).
TRACES = {"3G": ("norway_tram_21", "norway-hsdpa, on a tram"),
          "4G": ("4g_trace_driving_50174_dr", "lumos-4g, driving"),
          "5G": ("5g_trace_48_walking", "lumos-5g mmWave, walking")}
#: What the phone's pacing stands for: the paper's regime (a 1024-px template, a 512-px edit).
WORKLOAD, PROFILE = "klein-4b-ref1024", "flagship-npu"
#: Demo seconds per block of template KV the phone computes: above what this machine takes
#: (about 10 ms a block idle, up to 0.1 s with both cores busy).
BLOCK_S = 0.25
#: How much two single edits may differ by timing noise alone on a shared machine (an estimate).
NOISE = 0.05
#: A real phone's round trip to the server, before the emulation's slowing.
RTT_MS = 40.0
#: Seconds of this machine's own compute past the pacing worth saying (a busy machine).
OVERRUN_S = 0.05


def main(argv: list[str] | None = None) -> int:
    parser = command_parser("sakura demo", __doc__)
    parser.add_argument("--spec", type=Path, default=TEMPLATES, help="template spec file (YAML) to build and edit with")
    parser.add_argument("--out", type=Path, default=Path("demo-out"),
                        help="output directory: the library, edited images and timeline plots")
    parser.add_argument("--traces", default=",".join(TRACES),
                        help=f"comma-separated networks whose bundled trace shapes the link, of {', '.join(TRACES)}")
    parser.add_argument("--block-s", type=float, default=BLOCK_S,
                        help="demo seconds the phone takes per block of template KV it computes (T)")
    parser.add_argument("--rtt-ms", type=float, default=RTT_MS,
                        help="the real round trip to the server, in milliseconds (the emulation slows it too)")
    args = parser.parse_args(argv)
    labels = [label.strip().upper() for label in args.traces.split(",") if label.strip()]
    unknown = [label for label in labels if label not in TRACES]
    if unknown or not labels:
        parser.error(f"--traces: unknown {', '.join(unknown) or 'none given'}; known: {', '.join(TRACES)}")
    if not (math.isfinite(args.block_s) and args.block_s > 0) or not (math.isfinite(args.rtt_ms) and args.rtt_ms >= 0):
        parser.error("--block-s must be positive and --rtt-ms at least 0")
    started = time.time()
    args.out.mkdir(parents=True, exist_ok=True)

    print("== 1. exact replay of cached template KV", flush=True)
    for name in ("tiny-flux", "tiny-sd3", "reference"):
        r = verify_model(name, steps=4, repeats=1)
        print(f"   {name:10s} {r.shards:3d} shards  rel_l2 {r.rel_l2_diff:.1e}  exact {r.exact}")

    import ray

    from sakura._ray import join_or_start

    library = f"file://{(args.out / 'library').resolve()}"
    join_or_start(None, num_cpus=2, logging_level="ERROR")
    try:
        print(f"== 2. build the example templates into {library} (Ray job), serve them (Ray Serve)", flush=True)
        from sakura.jobs import build

        if build.main(["--spec", str(args.spec), "--model", "reference", "--store", library,
                       "--workers", "2", "--create"]) != 0:
            return 1
        from sakura.serve.local import run_app

        url = run_app(library)
        print(f"   serving on {url}")
        _edits(url, library, labels, args)
    finally:
        ray.shutdown()  # our own local Ray: Serve stops with it (its graceful shutdown waits ~30 s)
    left = _leftover_processes()
    print(f"== 6. Serve and Ray stopped; processes left behind: {left or 'none'}")
    print(f"   done in {time.time() - started:.0f} s")
    return 0 if not left else 1


def workload_pacing(workload: str, profile: str, *, model_kv_bytes: int, block_s: float) -> WorkloadPacing:
    """The pacing that makes a small model (``model_kv_bytes`` of fp16 KV per block, one shard a
    block) stand for the analytic ``workload`` (a name of :data:`~sakura.evaluation.workloads.WORKLOADS`,
    its template KV computed once an edit) on the device ``profile``. Per block, from counted FLOPs
    over the profile's throughput: the fp16 KV bytes, the seconds of template KV and of the edit's
    own compute, and the edit's compute before the first block's KV is needed (the photo's VAE
    encoding, the first step's embedders) and after the last's (the other steps, the VAE decoding)
    over the blocks."""
    from sakura.evaluation.architectures import edit_flops
    from sakura.evaluation.profiles import device_profile
    from sakura.evaluation.workloads import Analytic, workload_spec

    spec = workload_spec(workload)
    if not isinstance(spec, Analytic):
        raise ValueError(f"workload {workload!r} is measured on this machine; the pacing needs a real architecture's")
    f = edit_flops(spec.arch, reference=spec.reference, output=spec.output, steps=spec.steps)
    if not f.kv_cached:
        raise ValueError(f"workload {workload!r} computes its template KV at every step; the pacing needs it once")
    per_s = device_profile(profile).flops_per_s
    return WorkloadPacing(workload, profile, model_kv_bytes=model_kv_bytes, workload_kv_bytes=f.kv_bytes_per_block,
                          workload_block_s=statistics.fmean(f.reference) / per_s,
                          workload_interval_s=statistics.fmean(f.cached) / per_s, block_s=block_s,
                          workload_startup_s=(f.vae_encode_photo + f.outside_per_step) / per_s / f.blocks,
                          workload_tail_s=((f.steps - 1) * f.replay_step + f.vae_decode) / per_s / f.blocks)


def fp16_kv_bytes_per_block(adapter) -> int:
    """K and V of one block's template tokens at 2 bytes a value."""
    heads, tokens, head_dim = adapter.kv_geometry(1).shape
    return 2 * heads * tokens * head_dim * 2


@dataclass(frozen=True)
class Guards:
    """The phone's network guards (``EdgeSession``'s ``min_rate_bytes_per_s`` and ``timeout_s``) as the
    emulation scales them: a real rate is ``rate_scale`` times slower, a real second ``time_scale`` longer."""

    min_rate_bytes_per_s: float
    timeout_s: float

    @classmethod
    def scaled(cls, pacing: WorkloadPacing) -> Guards:
        from sakura.edge_client import EdgeSession

        defaults = inspect.signature(EdgeSession).parameters
        return cls(defaults["min_rate_bytes_per_s"].default * pacing.rate_scale,
                   defaults["timeout_s"].default * pacing.time_scale)


def _edits(url: str, library: str, labels: list[str], args: argparse.Namespace) -> None:
    import torch

    from sakura.evaluation.workload import example_spec, load_cases
    from sakura.platform.models import load_model

    # The phone's compute is paced: this machine's need only stay under the pacing. One thread does,
    # steadily; two, on a machine with other work, now and then take ten times as long (each waits
    # for the other at every operation).
    torch.set_num_threads(1)
    adapter = load_model("reference")
    spec = example_spec(args.spec)
    cases = {c.manifest.template_id: c for c in load_cases(library, spec, adapter.resolution)}
    pacing = workload_pacing(WORKLOAD, PROFILE, model_kv_bytes=fp16_kv_bytes_per_block(adapter), block_s=args.block_s)
    rtt_s = args.rtt_ms / 1000 * pacing.time_scale
    _explain(pacing, adapter.info().layers, args.rtt_ms, rtt_s)
    print(f"== 4. per trace, live: SAKURA (policy hybrid) and the phone alone (policy on-device), each a fresh "
          f"session\n   over the same link from the trace's middle -> {args.out}/", flush=True)
    rows = []
    for k, label in enumerate(labels):
        entry = spec.templates[list(TRACES).index(label) % len(spec.templates)]
        real = load_trace(trace_path(TRACES[label][0]))
        rows.append(_trace_edits(url, adapter, pacing, label, real, entry, cases[entry.id], rtt_s, args.out,
                                 first=k == 0))
    _table(rows, pacing)


def _explain(pacing: WorkloadPacing, blocks: int, rtt_ms: float, rtt_s: float) -> None:
    w, ms = pacing.workload, 1e3
    print(f"== 3. the phone and the link paced as {w} on {pacing.profile}: an emulation\n"
          f"   the reference model: {pacing.model_kv_bytes / 1e3:.0f} kB of fp16 KV a block, a block computed in "
          f"milliseconds here\n"
          f"   {w} on {pacing.profile}: {pacing.workload_kv_bytes / 1e6:.1f} MB of fp16 KV a block, its template KV "
          f"computed in {pacing.workload_block_s * ms:.1f} ms a block;\n"
          f"       the edit's own compute {pacing.workload_interval_s * ms:.1f} ms a block, and "
          f"{pacing.workload_startup_s * ms:.1f} + {pacing.workload_tail_s * ms:.1f} ms a block before the first "
          f"block and after the last\n"
          f"   the phone: T = {pacing.block_s:.3f} s per block of template KV it computes, "
          f"{pacing.interval_s:.3f} s of the edit's own compute between blocks,\n"
          f"       {pacing.startup_s(blocks):.2f} s before the first and {pacing.tail_s(blocks):.2f} s after the last "
          f"({blocks} blocks): {pacing.time_scale:.2f} demo seconds a real second\n"
          f"   the link: each real trace played {pacing.time_scale:.2f}x slower at its rates x k = "
          f"{pacing.rate_scale:.3g} (k = {pacing.model_kv_bytes} B / {pacing.workload_kv_bytes} B\n"
          f"       x {pacing.workload_block_s * ms:.1f} ms / {pacing.block_s * ms:.0f} ms): a byte of the reference "
          f"model's KV takes as long as {pacing.bytes_scale:.0f} bytes of {w}'s\n"
          f"       on the real link; the round trip, {rtt_ms:.0f} ms, is {rtt_s * ms:.0f} ms; the phone's network "
          f"guards are scaled alike\n"
          f"   not emulated: every byte on the link is scaled as KV is, the manifest's too; the reference model's KV "
          f"compresses as\n"
          f"       the trained reference model's (the evaluation's optimistic bracket); {w}'s prompt and\n"
          f"       template-image encoding (the phone alone's work, not SAKURA's when it fetches) are left out",
          flush=True)


@dataclass
class TraceRow:
    label: str
    trace: BandwidthTrace  # the real trace
    template: str
    sakura: EditResult  # policy hybrid
    alone: EditResult  # policy on-device
    overrun_s: dict[str, float]  # per policy: this machine's compute past the pacing

    @property
    def ratio(self) -> float:
        return self.sakura.latency_s / self.alone.latency_s

    @property
    def verdict(self) -> str:
        if self.ratio < 1 - NOISE:
            return "SAKURA faster"
        if self.ratio > 1 + NOISE:
            return "SAKURA slower"
        return f"no difference (within {NOISE:.0%})"


def _trace_edits(url: str, adapter, pacing: WorkloadPacing, label: str, real: BandwidthTrace, entry, case,
                 rtt_s: float, out: Path, *, first: bool) -> TraceRow:
    from sakura.edge_client import EdgeSession
    from sakura.evaluation.plots import bandwidth, gantt, image_grid

    link_trace = pacing.trace(real)
    offset = link_trace.duration / 2
    near = [real.rate_at(real.duration / 2 + i) for i in range(10)]  # the real trace's next 10 s
    print(f"\n   {label}: {TRACES[label][1]} ({real.name}), from {real.duration / 2:.0f} s: "
          f"{min(near):.2f}-{max(near):.2f} Mbit/s over the next 10 s (mean of the trace "
          f"{real.mean_mbps:.2f}),\n"
          f"       emulated at {min(near) * pacing.rate_scale * 1e3:.3g}-{max(near) * pacing.rate_scale * 1e3:.3g} "
          f"kbit/s; template {entry.id} ({entry.task.value})", flush=True)
    # The exact KV (every block at the lossless level, over the loopback): the PSNR's reference. Before
    # the first pair, an edit computing every block too: torch's first-call costs land in neither edit.
    with EdgeSession(url, models=lambda _: adapter) as session:
        exact = session.edit(case.request.image, entry.id, policy="fixed-full", seed=case.request.seed)
    if first:
        with EdgeSession(url, models=lambda _: adapter) as session:
            session.edit(case.request.image, entry.id, policy="on-device", seed=case.request.seed)
    results = {policy: _live_edit(url, adapter, pacing, link_trace, offset, rtt_s, case, entry.id, policy)
               for policy in ("hybrid", "on-device")}
    row = TraceRow(label, real, entry.id, results["hybrid"][0], results["on-device"][0],
                   {policy: overrun for policy, (_, overrun) in results.items()})
    for name, policy in (("SAKURA", "hybrid"), ("phone alone", "on-device")):
        _print_edit(name, results[policy][0], pacing, row.overrun_s[policy])
    print(f"       SAKURA / phone alone = {row.ratio:.2f}: {row.verdict}", flush=True)

    emulation = (f"emulation: phone paced as {pacing.workload} on {pacing.profile} (T = {pacing.block_s:g} s a block), "
                 f"link = the trace x {pacing.rate_scale:.3g}, {pacing.time_scale:.2f}x slower")
    psnr = {name: _psnr(exact.image, r.image) for name, r in (("sakura", row.sakura), ("alone", row.alone))}
    fetched = sum(1 for level in row.sakura.levels if level != "compute")
    image_grid(out / f"edits-{label.lower()}.png",
               [[case.request.image, case.template.image, row.sakura.image, row.alone.image,
                 exact.image]],
               columns=["the user's photo", "the template",
                        f"SAKURA ({fetched} of {len(row.sakura.levels)} blocks fetched)\n"
                        f"PSNR vs exact KV:\n{psnr['sakura']}",
                        f"the phone alone\nPSNR vs exact KV:\n{psnr['alone']}",
                        "with the exact KV\n(fetched lossless)"],
               title=f"{label} ({real.name}): {entry.id} ({entry.task.value}): {entry.prompt}\n{emulation}")
    gantt(out / f"timeline-{label.lower()}.png",
          {"SAKURA (hybrid, live)": row.sakura.timeline,
           "the phone alone (on-device, live)": row.alone.timeline},
          f"{label}: {real.name} from {real.duration / 2:.0f} s, template {entry.id}\n{emulation}")
    bandwidth(out / f"bandwidth-{label.lower()}.png", link_trace, offset, row.sakura.timeline,
              f"{label}, SAKURA's edit (live; {emulation})")
    return row


def _psnr(exact, image) -> str:
    from sakura.platform.images import psnr_db

    db = psnr_db(exact, image)
    return "identical (bit for bit)" if math.isinf(db) else f"{db:.1f} dB"


def _print_edit(name: str, result: EditResult, pacing: WorkloadPacing, overrun_s: float) -> None:
    """One edit: each block's source, then its latency, manifest, stalls and bytes, and how far
    this machine's own compute ran past the pacing."""
    blocks = []
    for s in result.timeline.shards:
        if s.computed:
            blocks.append(f"{s.index}:computed" + (f" ({s.bytes / 1e3:.1f} kB fetched, unused)" if s.bytes else ""))
        else:
            blocks.append(f"{s.index}:{s.level} {s.bytes / 1e3:.1f} kB")
    tl = result.timeline
    print(f"       {name:12s} blocks  {'  '.join(blocks)}\n"
          f"       {'':12s} {result.latency_s:.2f} s (manifest {tl.preamble_s:.2f} s), stalled {tl.stall_s:.2f} s, "
          f"fetched {result.bytes / 1e3:.1f} kB of KV (as {result.bytes * pacing.bytes_scale / 1e6:.1f} MB of "
          f"{pacing.workload}'s)", flush=True)
    if overrun_s > OVERRUN_S:
        print(f"       {'':12s} this machine was slower than the pacing: its own compute ran {overrun_s:.2f} s past it",
              flush=True)


def _table(rows: list[TraceRow], pacing: WorkloadPacing) -> None:
    header = ("trace", "trace mean", "SAKURA", "phone alone", "SAKURA / phone alone", "SAKURA fetched")
    cells = []
    for row in rows:
        fetched = [s for s in row.sakura.timeline.shards if not s.computed]
        cells.append((row.label, f"{row.trace.mean_mbps:.2f} Mbit/s", f"{row.sakura.latency_s:.2f} s",
                      f"{row.alone.latency_s:.2f} s", f"{row.ratio:.2f} {row.verdict}",
                      f"{len(fetched)} of {len(row.sakura.levels)} blocks, "
                      f"{row.sakura.bytes / 1e3:.1f} kB"))
    widths = [max(len(r[i]) for r in [header, *cells]) for i in range(len(header))]
    print(f"\n== 5. SAKURA against the phone alone, live, one edit each (an emulation of {pacing.workload} on "
          f"{pacing.profile}):")
    for r in [header, *cells]:
        print("   " + "  ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip())
    print(f"   trace: the network of the bundled real trace (examples/traces/README.md) the link followed\n"
          f"   trace mean: its mean rate on the real network; the emulated link carried it x {pacing.rate_scale:.3g}, "
          f"{pacing.time_scale:.2f}x slower\n"
          f"   SAKURA: the latency of the edit with policy hybrid (per block: fetch its KV at a level, or compute it)\n"
          f"   phone alone: the latency of the edit with policy on-device (the same client computing every block)\n"
          f"   SAKURA / phone alone: below 1, SAKURA was faster; within {NOISE:.0%} of 1, no difference beyond "
          f"this shared machine's\n"
          f"       timing noise (an estimate; one edit each: benchmarks time repeated edits)\n"
          f"   SAKURA fetched: the blocks of template KV SAKURA fetched rather than computed, and their bytes")
    busy = [row.label for row in rows if max(row.overrun_s.values()) > OVERRUN_S]
    if busy:
        print(f"   On {', '.join(busy)} this machine's own compute ran past the pacing (it was busy): those edits took "
              f"longer than\n   the emulated phone would, by what the lines above say, and their ratio is the "
              f"noisier for it.")


def _live_edit(url: str, adapter, pacing: WorkloadPacing, trace: BandwidthTrace, offset: float, rtt_s: float, case,
               template: str, policy: str) -> tuple[EditResult, float]:
    """One edit by a fresh session (nothing of the template on the phone) over ``trace`` from
    ``offset``, on a phone paced by ``pacing``; with the seconds this machine's compute ran past
    the pacing."""
    from sakura.edge_client import EdgeSession
    from sakura.emulation import TraceLink

    guards = Guards.scaled(pacing)
    link = TraceLink(trace, rtt_s=rtt_s, offset_s=offset)
    device = pacing.device(len(case.manifest.shards))
    with EdgeSession(url, link=link, models=lambda _: adapter, device=device,
                     min_rate_bytes_per_s=guards.min_rate_bytes_per_s, timeout_s=guards.timeout_s) as session:
        link.start()
        return session.edit(case.request.image, template, policy=policy, seed=case.request.seed), device.overrun_s


def _leftover_processes() -> list[str]:
    """Children of this process still alive shortly after shutdown (Ray workers, Serve proxies)."""
    import psutil

    deadline = time.time() + 15
    while True:
        children = [p for p in psutil.Process(os.getpid()).children(recursive=True) if p.is_running()
                    and p.status() != psutil.STATUS_ZOMBIE]
        if not children or time.time() > deadline:
            return [f"{p.pid}:{p.name()}" for p in children]
        time.sleep(0.5)


if __name__ == "__main__":
    raise SystemExit(main())
