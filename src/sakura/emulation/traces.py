"""Real bandwidth traces (``../shared/traces``) as step functions, for link emulation and the
end-to-end simulator.

Formats (see the traces README): two-column ``time_s throughput_Mbps`` text files (Norway
HSDPA, FCC, Lumos 4G/5G); Mahimahi packet-delivery files (one millisecond timestamp per
1500-byte packet, turned into 1-s windows); and CSV files (first line holds a comma) whose
header names a column of ``CSV_THROUGHPUT``, such as the G-NetTrack logs of the 5G dataset of
Raca et al., MMSys 2020 (``DL_bitrate``, kbit/s, a row per second). Mbit/s means 10^6 bit/s.

CSV times come from ``Timestamp`` (``2019.12.16_09.27.54``; rows one second apart without it).
Rows sharing a second (the logger can write one twice) are averaged; a clock going back is an
error. A missing throughput (``-`` or empty) holds the previous value: these logs record a
second in which nothing arrived as 0, so ``-`` is a missing reading, and a 0 would invent an
outage. Rows before the first reading are dropped.

A value holds from its time until the next one (across gaps too); the last holds for one median
spacing; a trace wraps around when a transfer runs past its end.

``load_traces(root)``: a family is a first-level folder of ``root``, holding every file beneath
it at any depth (``root/raca-5g/Download/Driving/a.csv`` is trace ``Download/Driving/a.csv`` of
family ``raca-5g``). README files (``README*``, ``*.md``) and names starting with a dot are
skipped; any other file must parse, or ``TraceError`` names it. A family folder without traces
and a file directly under ``root`` are refused too, so no family silently vanishes.
"""

from __future__ import annotations

import csv
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

import numpy as np

from sakura.platform.errors import SakuraError

MAHIMAHI_PACKET_BITS = 1500 * 8
CSV_THROUGHPUT = {"DL_bitrate": 1e-3}  # known CSV throughput column -> factor to Mbit/s
CSV_TIME, CSV_TIME_FORMAT = "Timestamp", "%Y.%m.%d_%H.%M.%S"
CSV_MISSING = {"", "-"}


class TraceError(SakuraError, ValueError):
    code = "invalid_trace"


@dataclass(frozen=True)
class BandwidthTrace:
    name: str
    family: str
    starts: np.ndarray  # segment start times, seconds, starts[0] == 0
    mbps: np.ndarray  # throughput of each segment, Mbit/s
    duration: float  # end of the last segment
    _cum_bytes: np.ndarray = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        ends = np.append(self.starts[1:], self.duration)
        seg_bytes = (ends - self.starts) * self.mbps * 1e6 / 8
        object.__setattr__(self, "_cum_bytes", np.concatenate([[0.0], np.cumsum(seg_bytes)]))

    @classmethod
    def constant(cls, mbps: float, duration: float = 3600.0) -> BandwidthTrace:
        """A link of constant capacity: the axis of a regime map, or a test fixture; never a
        stand-in for a real trace in a bandwidth experiment."""
        return cls(f"constant-{mbps:g}Mbps", "constant", np.array([0.0]), np.array([float(mbps)]), duration)

    @property
    def period_bytes(self) -> float:
        return float(self._cum_bytes[-1])

    @property
    def mean_mbps(self) -> float:
        return self.period_bytes * 8 / 1e6 / self.duration

    def rate_at(self, t: float) -> float:
        """Throughput (Mbit/s) at time ``t`` (wrapping around)."""
        i = int(np.searchsorted(self.starts, t % self.duration, side="right")) - 1
        return float(self.mbps[max(i, 0)])

    def bytes_until(self, t: float) -> float:
        """Bytes deliverable from time 0 to ``t``."""
        periods, r = divmod(t, self.duration)
        i = max(int(np.searchsorted(self.starts, r, side="right")) - 1, 0)
        inside = self._cum_bytes[i] + (r - self.starts[i]) * self.mbps[i] * 1e6 / 8
        return periods * self.period_bytes + float(inside)

    def bytes_between(self, t0: float, t1: float) -> float:
        return self.bytes_until(t1) - self.bytes_until(t0)

    def transfer_time(self, start: float, nbytes: float) -> float:
        """Seconds to deliver ``nbytes`` starting at ``start`` (zero-rate gaps included)."""
        if nbytes <= 0:
            return 0.0
        if self.period_bytes <= 0:
            raise TraceError(f"trace {self.name} never delivers a byte")
        target = self.bytes_until(start) + nbytes
        periods, rest = divmod(target, self.period_bytes)
        if rest == 0 and periods > 0:  # exactly k periods: done at the end of the k-th, not the next's start
            periods, rest = periods - 1, self.period_bytes
        # The segment in which the cumulative count first reaches ``rest`` (it delivers bytes, so
        # its rate is positive): the earliest instant the last byte can arrive.
        i = min(max(int(np.searchsorted(self._cum_bytes, rest, side="left")) - 1, 0), len(self.mbps) - 1)
        offset = (rest - self._cum_bytes[i]) / (self.mbps[i] * 1e6 / 8) if self.mbps[i] > 0 else 0.0
        return periods * self.duration + float(self.starts[i]) + float(offset) - start


def load_trace(path: str | Path, family: str | None = None, name: str | None = None) -> BandwidthTrace:
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8-sig")
    except (OSError, UnicodeDecodeError) as exc:
        raise TraceError(f"cannot read trace {path}: {exc}") from None
    lines = [line for line in text.splitlines() if line.strip()]
    if not lines:
        raise TraceError(f"trace {path} is empty")
    family, name = family or path.parent.name, name or path.name
    if "," in lines[0]:
        return _steps(path, name, family, *_csv(path, lines))
    rows = [line.split() for line in lines]
    if all(len(r) == 1 for r in rows):
        return _mahimahi(path, name, family, rows)
    if all(len(r) >= 2 for r in rows):
        return _steps(path, name, family, *_two_column(path, rows))
    raise TraceError(f"trace {path}: mixed line formats")


def load_traces(root: str | Path) -> dict[str, list[BandwidthTrace]]:
    """Every trace under ``root``, by family (first-level folder); see the module docstring."""
    root = Path(root)
    if not root.is_dir():
        raise TraceError(f"trace root {root} is not a folder")
    families: dict[str, list[BandwidthTrace]] = {}
    for entry in sorted(p for p in root.iterdir() if not _skipped(Path(p.name))):
        if not entry.is_dir():
            raise TraceError(f"trace {entry} is not inside a family folder of {root}")
        files = sorted(f for f in entry.rglob("*") if f.is_file() and not _skipped(f.relative_to(entry)))
        if not files:
            raise TraceError(f"family folder {entry} holds no traces")
        families[entry.name] = [load_trace(f, entry.name, f.relative_to(entry).as_posix()) for f in files]
    if not families:
        raise TraceError(f"no traces under {root}")
    return families


def _skipped(rel: Path) -> bool:
    name = rel.name.lower()
    return name.startswith("readme") or name.endswith(".md") or any(p.startswith(".") for p in rel.parts)


def _two_column(path: Path, rows: list[list[str]]) -> tuple[np.ndarray, np.ndarray]:
    try:
        return np.array([float(r[0]) for r in rows]), np.array([float(r[1]) for r in rows])
    except ValueError:
        raise TraceError(f"trace {path}: non-numeric values") from None


def _csv(path: Path, lines: list[str]) -> tuple[np.ndarray, np.ndarray]:
    header, *rows = [[cell.strip() for cell in row] for row in csv.reader(lines)]
    column = next((c for c in CSV_THROUGHPUT if c in header), None)
    if column is None:
        raise TraceError(f"trace {path}: CSV header names no known throughput column ({', '.join(CSV_THROUGHPUT)})")
    col, clock = header.index(column), header.index(CSV_TIME) if CSV_TIME in header else None
    times: list[float] = []
    values: list[float] = []
    for i, row in enumerate(rows, start=1):
        if len(row) != len(header):
            raise TraceError(f"trace {path}, row {i}: {len(row)} fields, the header has {len(header)}")
        if row[col] in CSV_MISSING and not values:
            continue  # no reading yet: the trace starts at the first one
        try:
            value = values[-1] if row[col] in CSV_MISSING else float(row[col]) * CSV_THROUGHPUT[column]
        except ValueError:
            raise TraceError(f"trace {path}, row {i}: non-numeric {column} {row[col]!r}") from None
        times.append(float(i) if clock is None else _row_epoch(row[clock], path, i))
        values.append(value)
    if not values:
        raise TraceError(f"trace {path}: no {column} values")
    t, v = np.array(times), np.array(values)
    if np.any(np.diff(t) < 0):
        raise TraceError(f"trace {path}: {CSV_TIME} goes back")
    seconds, group = np.unique(t, return_inverse=True)
    return seconds, np.bincount(group, weights=v) / np.bincount(group)


def _row_epoch(stamp: str, path: Path, i: int) -> float:
    try:
        return _epoch(stamp)
    except ValueError:
        raise TraceError(f"trace {path}, row {i}: bad {CSV_TIME} {stamp!r}") from None


def _epoch(stamp: str) -> float:
    return datetime.strptime(stamp, CSV_TIME_FORMAT).replace(tzinfo=UTC).timestamp()


def _steps(path: Path, name: str, family: str, t: np.ndarray, bw: np.ndarray) -> BandwidthTrace:
    if not np.isfinite(t).all() or np.any(np.diff(t) <= 0) or np.any(bw < 0) or not np.isfinite(bw).all():
        raise TraceError(f"trace {path}: times must increase and throughputs be finite and >= 0")
    t = t - t[0]
    spacing = float(np.median(np.diff(t))) if len(t) > 1 else 1.0
    return BandwidthTrace(name, family, t, bw, float(t[-1] + spacing))


def _mahimahi(path: Path, name: str, family: str, rows: list[list[str]]) -> BandwidthTrace:
    try:
        ms = np.array([int(r[0]) for r in rows])
    except ValueError:
        raise TraceError(f"trace {path}: non-integer timestamps") from None
    if np.any(np.diff(ms) < 0) or ms[0] < 0:
        raise TraceError(f"trace {path}: timestamps must not decrease")
    windows = np.maximum(ms - 1, 0) // 1000  # ms 1..1000 form the first second, 0 counts there too
    seconds = int(np.ceil(ms[-1] / 1000))
    counts = np.bincount(windows, minlength=seconds)[:seconds]
    mbps = counts * MAHIMAHI_PACKET_BITS / 1e6
    return BandwidthTrace(name, family, np.arange(seconds, dtype=float), mbps, float(seconds))
