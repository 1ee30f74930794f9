"""Trace loading against the real traces and the statistics their README publishes."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest

from sakura.emulation.traces import BandwidthTrace, TraceError, load_trace, load_traces

TRACES = Path(__file__).resolve().parents[4] / "shared" / "traces"
needs_traces = pytest.mark.skipif(not TRACES.is_dir(), reason="../shared/traces is not beside this checkout")


@needs_traces
def test_every_family_loads_with_the_published_statistics():
    families = load_traces(TRACES)
    assert set(families) == {"norway-hsdpa", "fcc-broadband", "mahimahi-cellular", "lumos-4g", "lumos-5g"}
    published = {
        "norway-hsdpa": 1.32,
        "fcc-broadband": 1.25,
        "mahimahi-cellular": 4.20,
        "lumos-4g": 37.01,
        "lumos-5g": 473,
    }
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
        with pytest.raises(TraceError, match=re.escape(str(tmp_path / name))):
            load_trace(tmp_path / name)
    dead = BandwidthTrace("dead", "x", np.array([0.0]), np.array([0.0]), 1.0)
    with pytest.raises(TraceError):
        dead.transfer_time(0, 10)


# The header of the G-NetTrack logs in the 5G dataset of Raca et al. (MMSys 2020); the rows below
# are made up for these tests, laid out like the logger's.
RACA_HEADER = ("Timestamp,Longitude,Latitude,Speed,Operatorname,CellID,NetworkMode,RSRP,RSRQ,SNR,CQI,RSSI,"
               "DL_bitrate,UL_bitrate,State,PINGAVG,PINGMIN,PINGMAX,PINGSTDEV,PINGLOSS,CELLHEX,NODEHEX,LACHEX,"
               "RAWCELLID,NRxRSRP,NRxRSRQ")


def _raca(path: Path, rows: list[tuple[str, str]]) -> Path:
    """``rows``: (time of day ``HH.MM.SS``, DL_bitrate in kbit/s or ``-``)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    lines = [RACA_HEADER] + [f"2019.12.16_{hms},-8.4736,51.8969,23,A,12,5G,-93,-11,7.0,11,-68,{dl},52,D,"
                             f"-,-,-,-,-,C,A2,1F4,3210,-95,-11" for hms, dl in rows]
    path.write_text("\n".join(lines) + "\n")
    return path


def test_csv_family_in_nested_folders_is_a_mbps_step_function(tmp_path):
    fam = tmp_path / "raca-5g"
    _raca(fam / "Download" / "Driving" / "B_2019.12.16_09.27.54.csv",
          [("09.27.54", "12000"), ("09.27.55", "25500"), ("09.27.56", "0"), ("09.27.57", "8000")])
    _raca(fam / "Static" / "A_2019.12.16_10.00.00.csv", [("10.00.00", "1500"), ("10.00.01", "3000")])
    (fam / "README.md").write_text("made-up rows for a test\n")
    (fam / "Static" / ".DS_Store").write_bytes(b"\x00\x01")
    (tmp_path / "README.md").write_text("root readme\n")
    families = load_traces(tmp_path)
    assert list(families) == ["raca-5g"]
    drive, static = families["raca-5g"]
    assert (drive.name, drive.family) == ("Download/Driving/B_2019.12.16_09.27.54.csv", "raca-5g")
    assert static.name == "Static/A_2019.12.16_10.00.00.csv"
    assert drive.starts.tolist() == [0.0, 1.0, 2.0, 3.0] and drive.duration == 4.0
    assert drive.mbps.tolist() == pytest.approx([12.0, 25.5, 0.0, 8.0])  # kbit/s -> Mbit/s
    assert drive.rate_at(1.5) == pytest.approx(25.5) and drive.rate_at(2.9) == 0.0
    assert drive.period_bytes == pytest.approx((12 + 25.5 + 8) * 1e6 / 8)


def test_csv_missing_values_hold_and_timestamps_place_rows(tmp_path):
    trace = load_trace(_raca(tmp_path / "x.csv", [
        ("09.00.00", "-"),  # before the first reading: dropped
        ("09.00.01", "10000"), ("09.00.02", "-"), ("09.00.03", ""),  # missing: hold 10 Mbit/s
        ("09.00.05", "20000"), ("09.00.05", "30000"),  # a pause in the log, then one second twice
        ("09.00.06", "0")]))
    assert trace.starts.tolist() == [0.0, 1.0, 2.0, 4.0, 5.0] and trace.duration == 6.0
    assert trace.mbps.tolist() == pytest.approx([10.0, 10.0, 10.0, 25.0, 0.0])
    assert trace.rate_at(3.5) == pytest.approx(10.0)


def test_csv_without_a_timestamp_column_is_one_row_per_second(tmp_path):
    (tmp_path / "t.csv").write_text("CellID,DL_bitrate\n7,4000\n7,-\n7,2000\n")
    trace = load_trace(tmp_path / "t.csv")
    assert trace.starts.tolist() == [0.0, 1.0, 2.0] and trace.mbps.tolist() == pytest.approx([4.0, 4.0, 2.0])


@pytest.mark.parametrize("name, body", [
    ("capture.pcap", b"\xd4\xc3\xb2\xa1\x02\x00\x04\x00"),
    ("notes.txt", b"bandwidth log\nstarted at 09:27\n"),
    ("empty.csv", b""),
    ("no-throughput.csv", b"Timestamp,RSRP,UL_bitrate\n2019.12.16_09.27.54,-93,52\n"),
    ("header-only.csv", (RACA_HEADER + "\n").encode()),
    ("words.csv", b"Timestamp,DL_bitrate\n2019.12.16_09.27.54,fast\n"),
    ("bad-time.csv", b"Timestamp,DL_bitrate\n16/12/2019 09:27,100\n"),
    ("backwards.csv", b"Timestamp,DL_bitrate\n2019.12.16_09.27.54,1\n2019.12.16_09.27.53,1\n"),
    ("ragged.csv", b"Timestamp,DL_bitrate\n2019.12.16_09.27.54,1,2\n"),
])
def test_an_unparseable_file_in_a_family_is_refused_by_name(tmp_path, name, body):
    _raca(tmp_path / "raca-5g" / "Driving" / "good.csv", [("09.27.54", "12000")])
    bad = tmp_path / "raca-5g" / "Driving" / "deeper" / name
    bad.parent.mkdir()
    bad.write_bytes(body)
    with pytest.raises(TraceError, match=re.escape(str(bad))):
        load_traces(tmp_path)


def test_no_family_vanishes_silently(tmp_path):
    _raca(tmp_path / "raca-5g" / "Static" / "a.csv", [("09.27.54", "12000")])
    (tmp_path / "lumos-5g" / ".hidden").mkdir(parents=True)
    with pytest.raises(TraceError, match=re.escape(str(tmp_path / "lumos-5g"))):
        load_traces(tmp_path)
    (tmp_path / "lumos-5g" / "trace_1").write_text("1.0\t170.0\n2.0\t304.0\n")
    assert sorted(load_traces(tmp_path)) == ["lumos-5g", "raca-5g"]
    (tmp_path / "stray_trace").write_text("0 1\n1 2\n")
    with pytest.raises(TraceError, match=re.escape(str(tmp_path / "stray_trace"))):
        load_traces(tmp_path)
