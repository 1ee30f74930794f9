"""Trace loading against the real traces and the statistics their README publishes."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from sakura.platform.traces import BandwidthTrace, TraceError, load_trace, load_traces

TRACES = Path(__file__).resolve().parents[4] / "shared" / "traces"
needs_traces = pytest.mark.skipif(not TRACES.is_dir(), reason="../shared/traces is not beside this checkout")


@needs_traces
def test_every_family_loads_with_the_published_statistics():
    families = load_traces(TRACES)
    assert set(families) == {"norway-hsdpa", "fcc-broadband", "mahimahi-cellular", "lumos-4g", "lumos-5g"}
    published = {"norway-hsdpa": 1.32, "fcc-broadband": 1.25, "mahimahi-cellular": 4.20, "lumos-4g": 37.01, "lumos-5g": 473}
    for family, traces in families.items():
        pooled = sum(t.period_bytes for t in traces) * 8 / 1e6 / sum(t.duration for t in traces)
        assert pooled == pytest.approx(published[family], rel=0.02), family


@needs_traces
@pytest.mark.parametrize("name, duration, mean", [("norway-hsdpa/norway_bus_18", 210, 2.09),
                                                  ("norway-hsdpa/norway_tram_38", 123, 0.76)])
def test_single_files_match_the_readme(name, duration, mean):
    trace = load_trace(TRACES / name)
    assert trace.duration == pytest.approx(duration, abs=1.0)
    assert trace.mean_mbps == pytest.approx(mean, abs=0.01)


def _toy() -> BandwidthTrace:
    return BandwidthTrace("toy", "test", np.array([0.0, 1.0, 2.0]), np.array([8.0, 0.0, 16.0]), 3.0)


def test_transfer_time_integrates_the_step_function_and_wraps():
    t = _toy()  # 1 MB/s for 1 s, nothing for 1 s, 2 MB/s for 1 s: 3 MB per 3 s period
    assert t.period_bytes == 3e6 and t.rate_at(1.5) == 0.0 and t.rate_at(3.5) == 8.0
    assert t.transfer_time(0.0, 0.5e6) == pytest.approx(0.5)
    assert t.transfer_time(0.5, 1e6) == pytest.approx(1.75)  # 0.5 MB, waits out the gap, 0.5 MB
    assert t.transfer_time(2.5, 2e6) == pytest.approx(1.5)  # wraps into the next period
    assert t.transfer_time(0.0, 7e6) == pytest.approx(7.0)
    assert t.transfer_time(0.0, 3e6) == pytest.approx(3.0)
    gap_at_end = BandwidthTrace("g", "test", np.array([0.0, 1.0]), np.array([8.0, 0.0]), 2.0)
    assert gap_at_end.transfer_time(0.0, 1e6) == pytest.approx(1.0)  # not 2.0: the gap comes after
    for start in (0.0, 0.3, 1.2, 2.9, 4.1):
        for n in (1.0, 5e5, 2.5e6, 9e6):
            assert t.bytes_between(start, start + t.transfer_time(start, n)) == pytest.approx(n)


def test_malformed_traces_are_typed_errors(tmp_path):
    cases = {"empty": "", "mixed": "1 2\n3\n", "decreasing": "0 1\n2 1\n1 1\n", "negative": "0 -1\n1 2\n",
             "words": "a b\n", "mm-back": "5\n3\n"}
    for name, body in cases.items():
        (tmp_path / name).write_text(body)
        with pytest.raises(TraceError):
            load_trace(tmp_path / name)
    dead = BandwidthTrace("dead", "x", np.array([0.0]), np.array([0.0]), 1.0)
    with pytest.raises(TraceError):
        dead.transfer_time(0, 10)
