"""Per-block capture and replay compute and KV bytes of a klein model, and their extrapolation
from a few built blocks to the whole model (``bench/capture.py --model klein-4b-shape``).

Every block's forward is timed by hooks (CPU kernels run synchronously, so the time between a
block's pre- and post-hook is its compute), on two clocks: wall seconds, and the process's CPU
seconds (all threads: core-seconds, which leave out time other processes held the cores). What the
transformer spends outside its blocks (embedders, modulation, the final layer) is its whole
forward minus its blocks. The whole model then costs that plus ``double x`` a double block's
time ``+ single x`` a single block's time. Each figure is the fastest of the repeats.
"""

from __future__ import annotations

import time
from collections import defaultdict
from dataclasses import dataclass
from functools import partial
from typing import Any

import torch

from sakura.platform.errors import ModelError
from sakura.platform.images import fit_image, load_image
from sakura.platform.models.base import EditRequest, Schedule, Template

PHASES = ("capture", "replay")
KINDS = ("double", "single")
CLOCKS = ("wall", "cpu")
#: One step: capture is the ``extract`` pass, replay one ``cached`` step.
ONE_STEP = Schedule(steps=1)


@dataclass(frozen=True)
class Measurement:
    """One model at one resolution. ``seconds[clock][phase][kind]``: each built block's forward;
    ``transformer_s[clock][phase]``: the whole transformer forward."""

    resolution: int
    reference_tokens: int
    text_tokens: int
    built: dict[str, int]
    seconds: dict[str, dict[str, dict[str, list[float]]]]
    transformer_s: dict[str, dict[str, float]]
    vae_encode_s: dict[str, float]  # clock -> one VAE encode (of the photo or the reference image)
    kv_bytes_fp16: dict[str, list[int]]  # kind -> each built block's K + V at 2 bytes a value


class BlockTimer:
    """Forward hooks that time every call of the given modules, by the current ``phase``."""

    def __init__(self, modules: dict[str, list[torch.nn.Module]]) -> None:
        self.phase = ""
        self.calls: dict[tuple[str, str, int], list[tuple[float, float]]] = defaultdict(list)
        self._started: dict[tuple[str, int], tuple[float, float]] = {}
        self._handles = []
        for kind, group in modules.items():
            for index, module in enumerate(group):
                self._handles.append(module.register_forward_pre_hook(partial(self._start, (kind, index))))
                self._handles.append(module.register_forward_hook(partial(self._stop, (kind, index))))

    def _start(self, key: tuple[str, int], module: Any, args: Any) -> None:
        self._started[key] = (time.perf_counter(), time.process_time())

    def _stop(self, key: tuple[str, int], module: Any, args: Any, output: Any) -> None:
        wall, cpu = self._started.pop(key)
        self.calls[(self.phase, *key)].append((time.perf_counter() - wall, time.process_time() - cpu))

    def fastest(self, clock: str, phase: str, kind: str, index: int = 0) -> float:
        calls = self.calls.get((phase, kind, index))
        if not calls:
            raise ModelError(f"{kind} {index} never ran during {phase}")
        return min(call[CLOCKS.index(clock)] for call in calls)

    def remove(self) -> None:
        for handle in self._handles:
            handle.remove()


def bench_edit(resolution: int) -> tuple[Template, EditRequest]:
    """The template and photo ``sakura models verify`` edits, at ``resolution``."""
    from sakura.platform.verify import CHECK_REQUEST, VERIFY_TEMPLATE

    image, prompt, task = VERIFY_TEMPLATE
    template = Template(fit_image(load_image(image), resolution), prompt, task)
    return template, EditRequest(fit_image(load_image(CHECK_REQUEST[0]), resolution), seed=CHECK_REQUEST[1])


def measure(adapter: Any, *, repeats: int = 1) -> Measurement:
    """Time one-step capture and replay of a klein adapter, block by block, ``repeats`` times each."""
    model = adapter.model
    double, single = list(model.transformer_blocks), list(model.single_transformer_blocks)
    timer = BlockTimer({"double": double, "single": single, "transformer": [model], "vae": [adapter.vae.encoder]})
    template, request = bench_edit(adapter.resolution)
    try:
        timer.phase = "capture"
        for _ in range(max(1, repeats)):
            captured = adapter.capture(template, request, ONE_STEP)
        context = adapter.template_context(template)
        timer.phase = "replay"
        for _ in range(max(1, repeats)):
            adapter.replay(captured.kv, template.prompt, request, ONE_STEP, context=context)
    finally:
        timer.remove()
    counts = {"double": len(double), "single": len(single)}
    seconds = {clock: {phase: {kind: [timer.fastest(clock, phase, kind, i) for i in range(counts[kind])]
                               for kind in KINDS} for phase in PHASES} for clock in CLOCKS}
    kv = [captured.kv[key] for key in captured.kv.keys]
    kv_bytes = {"double": [2 * (p.k.size + p.v.size) for p in kv[:len(double)]],
                "single": [2 * (p.k.size + p.v.size) for p in kv[len(double):]]}
    return Measurement(
        resolution=adapter.resolution, reference_tokens=captured.kv.template_tokens,
        text_tokens=adapter.max_sequence_length, built=counts, seconds=seconds,
        transformer_s={clock: {phase: timer.fastest(clock, phase, "transformer") for phase in PHASES}
                       for clock in CLOCKS},
        vae_encode_s={clock: min(timer.fastest(clock, phase, "vae") for phase in PHASES) for clock in CLOCKS},
        kv_bytes_fp16=kv_bytes,
    )


def _mean(values: list[float] | list[int]) -> float:
    return sum(values) / len(values) if values else 0.0


def per_block(m: Measurement, clock: str = "wall") -> dict[str, dict[str, float]]:
    """Mean seconds of a double and of a single block per phase, and the rest of the transformer."""
    out: dict[str, dict[str, float]] = {}
    for phase in PHASES:
        blocks = m.seconds[clock][phase]
        out[phase] = {"double_s": _mean(blocks["double"]), "single_s": _mean(blocks["single"]),
                      "other_s": m.transformer_s[clock][phase] - sum(blocks["double"]) - sum(blocks["single"])}
    out["kv_bytes_fp16"] = {"double": _mean(m.kv_bytes_fp16["double"]), "single": _mean(m.kv_bytes_fp16["single"])}
    return out


def extrapolate(m: Measurement, double: int, single: int, clock: str = "wall") -> dict[str, float]:
    """The whole transformer's capture and replay-step seconds and KV bytes with ``double`` +
    ``single`` blocks, from the built ones (on a whole build, exactly what was measured)."""
    for kind, wanted in (("double", double), ("single", single)):
        if wanted and not m.built[kind]:
            raise ModelError(f"no {kind} block was built: cannot extrapolate to {wanted}")
    costs = per_block(m, clock)
    out = {f"{phase}_s": costs[phase]["other_s"] + double * costs[phase]["double_s"] + single * costs[phase]["single_s"]
           for phase in PHASES}
    out["kv_bytes_fp16"] = double * costs["kv_bytes_fp16"]["double"] + single * costs["kv_bytes_fp16"]["single"]
    return out
