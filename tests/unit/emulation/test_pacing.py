"""A small model paced as a real workload: the link's scale factor k, the scaled trace, and the
paced phone of one edit."""

from __future__ import annotations

import math

import numpy as np
import pytest

from sakura.emulation import slow_device
from sakura.emulation.pacing import WorkloadPacing, rate_scale, scale_trace
from sakura.emulation.slow_device import PacedEditDevice
from sakura.emulation.traces import BandwidthTrace

#: The demo's numbers: the reference model's fp16 KV a block, klein-4b-ref1024's, and the seconds
#: flagship-npu takes per block of its template KV.
REF_KV, KLEIN_KV, KLEIN_BLOCK_S = 131_072, 50_331_648, 0.0720


def _pacing(block_s: float = 0.25, **kw: float) -> WorkloadPacing:
    kw = {"workload_interval_s": 0.027, **kw}
    return WorkloadPacing("klein-4b-ref1024", "flagship-npu", model_kv_bytes=REF_KV, workload_kv_bytes=KLEIN_KV,
                          workload_block_s=KLEIN_BLOCK_S, block_s=block_s, **kw)


def test_the_scale_factor_is_the_bytes_ratio_times_the_compute_ratio():
    k = rate_scale(model_kv_bytes=REF_KV, workload_kv_bytes=KLEIN_KV, workload_block_s=KLEIN_BLOCK_S, block_s=0.25)
    assert k == pytest.approx((REF_KV / KLEIN_KV) * (KLEIN_BLOCK_S / 0.25))
    assert k == pytest.approx(7.5e-4, rel=1e-3)
    # a slower paced phone (larger T) needs a slower link; a smaller model's KV a slower link too
    assert rate_scale(model_kv_bytes=REF_KV, workload_kv_bytes=KLEIN_KV, workload_block_s=KLEIN_BLOCK_S,
                      block_s=0.5) == pytest.approx(k / 2)
    assert rate_scale(model_kv_bytes=REF_KV / 2, workload_kv_bytes=KLEIN_KV, workload_block_s=KLEIN_BLOCK_S,
                      block_s=0.25) == pytest.approx(k / 2)


@pytest.mark.parametrize("name", ["model_kv_bytes", "workload_kv_bytes", "workload_block_s", "block_s"])
@pytest.mark.parametrize("bad", [0.0, -1.0, math.nan, math.inf])
def test_the_scale_factor_refuses_a_non_positive_or_non_finite_input(name, bad):
    inputs = {"model_kv_bytes": REF_KV, "workload_kv_bytes": KLEIN_KV, "workload_block_s": KLEIN_BLOCK_S,
              "block_s": 0.25}
    with pytest.raises(ValueError, match=name):
        rate_scale(**{**inputs, name: bad})


def test_a_scaled_trace_carries_rate_times_the_bits_over_time_times_the_span():
    real = BandwidthTrace("step", "test", np.array([0.0, 10.0, 25.0]), np.array([400.0, 0.0, 120.0]), 40.0)
    scaled = scale_trace(real, rate=1e-3, time=3.0)
    assert scaled.duration == 120.0 and scaled.family == "test" and "step" in scaled.name
    assert scaled.rate_at(3.0 * 12.0) == 0.0 and scaled.rate_at(3.0 * 30.0) == pytest.approx(0.12)
    for a, b in [(0.0, 10.0), (5.0, 31.0), (38.0, 55.0)]:  # the last wraps around
        assert scaled.bytes_between(3 * a, 3 * b) == pytest.approx(real.bytes_between(a, b) * 1e-3 * 3.0)
    assert scaled.mean_mbps == pytest.approx(real.mean_mbps * 1e-3)
    assert real.mbps[0] == 400.0  # the real trace is left as it was


@pytest.mark.parametrize("rate, time", [(0.0, 1.0), (-1.0, 1.0), (1.0, 0.0), (math.nan, 1.0), (1.0, math.inf)])
def test_a_trace_scale_must_be_positive_and_finite(rate, time):
    real = BandwidthTrace.constant(10.0)
    with pytest.raises(ValueError):
        scale_trace(real, rate=rate, time=time)


def test_a_byte_of_the_small_model_takes_as_long_as_its_share_of_the_real_workload():
    """On the paced link, the small model's bytes take time_scale times as long as the real
    workload's bytes they stand for take on the real link: the compute-to-bytes ratio holds."""
    pacing = _pacing()
    real = BandwidthTrace("step", "test", np.array([0.0, 2.0]), np.array([300.0, 40.0]), 60.0)
    link = pacing.trace(real)
    for start, nbytes in [(0.0, 2_500), (1.5, 30_000), (2.5, 131_072)]:
        emulated = link.transfer_time(start * pacing.time_scale, nbytes)
        assert emulated == pytest.approx(pacing.time_scale * real.transfer_time(start, nbytes * pacing.bytes_scale))
    assert pacing.time_scale == pytest.approx(0.25 / KLEIN_BLOCK_S)
    assert pacing.bytes_scale == pytest.approx(KLEIN_KV / REF_KV)


def test_the_paced_phone_keeps_the_workloads_proportions():
    pacing = _pacing(workload_startup_s=0.002, workload_tail_s=0.09)
    assert pacing.interval_s / pacing.block_s == pytest.approx(0.027 / KLEIN_BLOCK_S)
    assert pacing.startup_s(6) == pytest.approx(0.002 * 6 * pacing.time_scale)
    assert pacing.tail_s(6) == pytest.approx(0.09 * 6 * pacing.time_scale)
    device = pacing.device(6)
    assert (device.template_s, device.interval_s, device.shards) == (0.25, pytest.approx(pacing.interval_s), 6)
    assert (device.startup_s, device.tail_s) == (pytest.approx(pacing.startup_s(6)), pytest.approx(pacing.tail_s(6)))


@pytest.mark.parametrize("field", ["workload_interval_s", "workload_startup_s", "workload_tail_s"])
def test_a_pacing_refuses_negative_compute(field):
    with pytest.raises(ValueError, match=field):
        _pacing(**{field: -0.1})


def test_a_pacing_refuses_a_non_positive_block_time():
    with pytest.raises(ValueError, match="block_s"):
        _pacing(block_s=0.0)


def test_the_edit_device_paces_the_start_each_gap_and_the_tail_and_counts_overruns(monkeypatch):
    slept: list[float] = []
    monkeypatch.setattr(slow_device.time, "sleep", slept.append)
    device = PacedEditDevice(0.1, 0.25, shards=3, startup_s=0.05, tail_s=1.0)
    device.after_compute(0.01)  # before shard 0
    device.after_template(0.05)  # shard 0 computed here
    device.after_compute(0.02)  # before shard 1
    device.after_compute(0.3)  # before shard 2: this machine was slower than the pacing
    device.after_compute(0.5)  # after the last: the rest of the edit
    assert slept == pytest.approx([0.04, 0.2, 0.08, 0.5])
    assert device.overrun_s == pytest.approx(0.2)
    device.after_template(0.4)
    assert device.overrun_s == pytest.approx(0.35)


def test_an_edit_device_needs_a_shard():
    with pytest.raises(ValueError):
        PacedEditDevice(0.1, 0.25, shards=0, startup_s=0.0, tail_s=0.0)
