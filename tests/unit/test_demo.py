"""The demo's parts that need no server: its traces ship with the package, its options are
checked, its pacing stands for the named workload, and its verdict reads the ratio."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest

from sakura import demo
from sakura.emulation.traces import load_trace
from sakura.examples import trace_path

SHARED = Path(__file__).resolve().parents[3] / "shared" / "traces"


def test_every_demo_trace_ships_with_the_package_and_loads():
    for label, (name, _) in demo.TRACES.items():
        trace = load_trace(trace_path(name))
        assert trace.duration > 100 and trace.mean_mbps > 0, label


@pytest.mark.skipif(not SHARED.is_dir(), reason="../shared/traces is not beside this checkout")
def test_the_bundled_5g_trace_is_a_byte_for_byte_copy_typical_of_its_family():
    name = demo.TRACES["5G"][0]
    bundled, source = trace_path(name).read_bytes(), (SHARED / "lumos-5g" / name).read_bytes()
    assert hashlib.sha256(bundled).digest() == hashlib.sha256(source).digest()
    assert load_trace(trace_path(name)).mean_mbps == pytest.approx(473, rel=0.02)  # the family's pooled mean


def test_the_pacing_stands_for_klein_4b_on_the_flagship_npu():
    from sakura.evaluation import device_profile, edit_flops

    f = edit_flops("klein-4b", reference=1024, output=512, steps=4)
    per_s = device_profile("flagship-npu").flops_per_s
    pacing = demo.workload_pacing("klein-4b-ref1024", "flagship-npu", model_kv_bytes=131_072, block_s=0.25)
    assert pacing.workload_kv_bytes == f.kv_bytes_per_block == 2 * 4096 * 3072 * 2
    assert pacing.workload_block_s == pytest.approx(f.reference[0] / per_s)
    assert pacing.rate_scale == pytest.approx(131_072 / f.kv_bytes_per_block * (f.reference[0] / per_s) / 0.25)
    assert pacing.interval_s == pytest.approx(0.25 * f.cached[0] / f.reference[0])
    assert pacing.workload_tail_s * f.blocks == pytest.approx((3 * f.replay_step + f.vae_decode) / per_s)
    with pytest.raises(ValueError, match="measured"):
        demo.workload_pacing("reference", "flagship-npu", model_kv_bytes=131_072, block_s=0.25)


def test_the_reference_models_kv_is_counted_at_two_bytes_a_value():
    from sakura.platform.models import load_model

    assert demo.fp16_kv_bytes_per_block(load_model("reference")) == 2 * 4 * 256 * 32 * 2


@pytest.mark.parametrize("ratio, verdict", [(0.8, "SAKURA faster"), (0.97, "no difference"), (1.04, "no difference"),
                                            (1.2, "SAKURA slower")])
def test_the_verdict_reads_the_ratio_with_a_noise_band(ratio, verdict):
    class Edit:
        def __init__(self, latency_s: float) -> None:
            self.latency_s = latency_s

    row = demo.TraceRow("5G", None, "t", Edit(ratio), Edit(1.0), {})  # type: ignore[arg-type]
    assert row.verdict.startswith(verdict)


@pytest.mark.parametrize("argv", [["--traces", "6G"], ["--traces", ","], ["--block-s", "0"], ["--rtt-ms", "-1"]])
def test_bad_options_are_refused_before_anything_starts(argv):
    with pytest.raises(SystemExit):
        demo.main(argv)
