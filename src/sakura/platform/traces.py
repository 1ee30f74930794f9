"""Real bandwidth traces (``../shared/traces``) as step functions, for link emulation and the
end-to-end simulator.

Formats (see the traces README): two-column ``time_s throughput_Mbps`` text files (Norway
HSDPA, FCC, Lumos 4G/5G), and Mahimahi packet-delivery files (one millisecond timestamp per
1500-byte packet, turned into 1-s windows). A value holds from its time until the next one;
the last holds for one median spacing; a trace wraps around when a transfer runs past its end.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from sakura.platform.errors import SakuraError

MAHIMAHI_PACKET_BITS = 1500 * 8


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


def load_trace(path: str | Path, family: str | None = None) -> BandwidthTrace:
    path = Path(path)
    family = family or path.parent.name
    try:
        text = path.read_text()
    except (OSError, UnicodeDecodeError) as exc:
        raise TraceError(f"cannot read trace {path}: {exc}") from None
    rows = [line.split() for line in text.splitlines() if line.strip()]
    if not rows:
        raise TraceError(f"trace {path} is empty")
    if all(len(r) == 1 for r in rows):
        return _mahimahi(path.name, family, rows)
    if all(len(r) >= 2 for r in rows):
        return _two_column(path.name, family, rows)
    raise TraceError(f"trace {path}: mixed line formats")


def load_traces(root: str | Path) -> dict[str, list[BandwidthTrace]]:
    """Every trace under ``root``, by family (subfolder); README files are skipped."""
    root = Path(root)
    families: dict[str, list[BandwidthTrace]] = {}
    for folder in sorted(p for p in root.iterdir() if p.is_dir()):
        traces = [load_trace(f, folder.name) for f in sorted(folder.iterdir()) if f.is_file() and not f.name.startswith(".")]
        if traces:
            families[folder.name] = traces
    if not families:
        raise TraceError(f"no traces under {root}")
    return families


def _two_column(name: str, family: str, rows: list[list[str]]) -> BandwidthTrace:
    try:
        t = np.array([float(r[0]) for r in rows])
        bw = np.array([float(r[1]) for r in rows])
    except ValueError:
        raise TraceError(f"trace {name}: non-numeric values") from None
    if np.any(np.diff(t) <= 0) or np.any(bw < 0) or not np.isfinite(bw).all():
        raise TraceError(f"trace {name}: times must increase and throughputs be finite and >= 0")
    t = t - t[0]
    spacing = float(np.median(np.diff(t))) if len(t) > 1 else 1.0
    return BandwidthTrace(name, family, t, bw, float(t[-1] + spacing))


def _mahimahi(name: str, family: str, rows: list[list[str]]) -> BandwidthTrace:
    try:
        ms = np.array([int(r[0]) for r in rows])
    except ValueError:
        raise TraceError(f"trace {name}: non-integer timestamps") from None
    if np.any(np.diff(ms) < 0) or ms[0] < 0:
        raise TraceError(f"trace {name}: timestamps must not decrease")
    windows = np.maximum(ms - 1, 0) // 1000  # ms 1..1000 form the first second, 0 counts there too
    seconds = int(np.ceil(ms[-1] / 1000))
    counts = np.bincount(windows, minlength=seconds)[:seconds]
    return BandwidthTrace(name, family, np.arange(seconds, dtype=float), counts * MAHIMAHI_PACKET_BITS / 1e6, float(seconds))
