"""``sakura models verify``: prove that replaying cached template KV equals computing it.

Captures a template's KV with one calibration request, replays it for a *different* request
(other image, other noise), and compares the result with the full computation of that request
(template tokens included). This is also the check an integrator runs on their own checkpoint.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass
from typing import Any, Protocol, runtime_checkable

import numpy as np
import torch

from sakura.platform.images import IDENTICAL_DB, fit_image, load_image, psnr_db
from sakura.platform.models import EditRequest, ModelAdapter, Schedule, Template, load_model

#: ``exact`` means the replayed output is within this relative L2 distance of the full one.
EXACT_REL_L2 = 1e-5
#: ``pipeline_parity`` means SAKURA's edited image is within this of the stock pipeline's (fp32).
PARITY_MAX_ABS = 1e-5

VERIFY_TEMPLATE = ("skimage:brick", "a brick wall texture", "try_on")
CALIBRATION_REQUEST = ("skimage:astronaut", 1)
CHECK_REQUEST = ("skimage:coffee", 2)


@dataclass(frozen=True)
class VerifyReport:
    model: str
    fingerprint: str
    steps: int
    layers: int
    shards: int
    template_tokens: int
    request_tokens: int
    kv_bytes_fp16: int
    max_abs_diff: float
    rel_l2_diff: float
    capture_s: float
    full_s: float
    replay_s: float
    exact: bool
    #: For diffusers pipeline folders: the class, and SAKURA's image (replayed KV) vs the stock
    #: pipeline's on the same edit.
    pipeline: str | None = None
    pipeline_parity: bool | None = None
    pipeline_max_abs_diff: float | None = None
    #: For pipelines whose stock reference tokens attend to the user's (Kontext, SD3): PSNR of the
    #: masked pipeline's image (what SAKURA equals) against the unmodified one's.
    stock_psnr_db: float | None = None

    def to_dict(self) -> dict[str, object]:
        return asdict(self)


@runtime_checkable
class StockPipeline(Protocol):
    """An adapter that can also run its pipeline's unmodified ``__call__`` on an edit."""

    pipeline_class: str

    def stock_image(self, template: Template, request: EditRequest, schedule: Schedule,
                    context: Mapping[str, np.ndarray]) -> np.ndarray: ...


@runtime_checkable
class MaskedStockPipeline(StockPipeline, Protocol):
    """A pipeline SAKURA runs with masked reference tokens: ``stock_image`` is its own call under
    that masking, ``unmodified_stock_image`` the call as it ships."""

    def unmodified_stock_image(self, template: Template, request: EditRequest, schedule: Schedule,
                               context: Mapping[str, np.ndarray]) -> np.ndarray: ...


def verify_model(name_or_path: str, *, steps: int = 4, repeats: int = 3,
                 say: Callable[[str], None] = lambda _: None) -> VerifyReport:
    """:func:`verify_adapter` on a model by name or folder; ``say`` hears each stage as it starts."""
    say(f"loading {name_or_path}")
    return verify_adapter(load_model(name_or_path), steps=steps, repeats=repeats, say=say)


def verify_adapter(adapter: ModelAdapter, *, steps: int = 4, repeats: int = 3,
                   say: Callable[[str], None] = lambda _: None) -> VerifyReport:
    schedule = Schedule(steps=steps)
    res = adapter.resolution
    template = Template(fit_image(load_image(VERIFY_TEMPLATE[0]), res), VERIFY_TEMPLATE[1], VERIFY_TEMPLATE[2])
    calibration = EditRequest(fit_image(load_image(CALIBRATION_REQUEST[0]), res), seed=CALIBRATION_REQUEST[1])
    request = EditRequest(fit_image(load_image(CHECK_REQUEST[0]), res), seed=CHECK_REQUEST[1])

    say(f"capturing the template KV ({steps} steps)")
    start = time.perf_counter()
    captured = adapter.capture(template, calibration, schedule)
    context = adapter.template_context(template)
    capture_s = time.perf_counter() - start
    say(f"editing without cache, {repeats}x")
    full_s, full = _median_time(lambda: adapter.full(template, request, schedule), repeats)
    say(f"editing from the cached KV, {repeats}x")
    replay_s, replayed = _median_time(
        lambda: adapter.replay(captured.kv, template.prompt, request, schedule, context=context), repeats)

    diff = (replayed.float() - full.float())
    rel = float(diff.norm() / full.float().norm().clamp_min(1e-30))
    info = adapter.info()
    return VerifyReport(
        model=adapter.name,
        fingerprint=adapter.fingerprint,
        steps=steps,
        layers=info.layers,
        shards=len(captured.kv),
        template_tokens=captured.kv.template_tokens,
        request_tokens=info.image_tokens + info.text_tokens,
        kv_bytes_fp16=captured.kv.nbytes_fp16,
        max_abs_diff=float(diff.abs().max()),
        rel_l2_diff=rel,
        capture_s=capture_s,
        full_s=full_s,
        replay_s=replay_s,
        exact=rel <= EXACT_REL_L2,
        **_parity(adapter, template, request, schedule, context, replayed),
    )


def _parity(adapter: ModelAdapter, template: Template, request: EditRequest, schedule: Schedule,
            context: Mapping[str, np.ndarray], replayed: torch.Tensor) -> dict[str, Any]:
    """SAKURA's edited image against the stock pipeline's, for pipeline adapters."""
    if not isinstance(adapter, StockPipeline):
        return {}
    stock = adapter.stock_image(template, request, schedule, context)
    diff = float(np.abs(adapter.latent_to_image(replayed) - stock).max())
    report = {"pipeline": adapter.pipeline_class, "pipeline_parity": diff <= PARITY_MAX_ABS,
              "pipeline_max_abs_diff": diff}
    if isinstance(adapter, MaskedStockPipeline):
        unmodified = adapter.unmodified_stock_image(template, request, schedule, context)
        report["stock_psnr_db"] = min(IDENTICAL_DB, psnr_db(stock, unmodified))
    return report


def _median_time(fn: Callable[[], torch.Tensor], repeats: int) -> tuple[float, torch.Tensor]:
    times, result = [], None
    for _ in range(max(1, repeats)):
        start = time.perf_counter()
        result = fn()
        times.append(time.perf_counter() - start)
    assert result is not None
    return statistics.median(times), result
