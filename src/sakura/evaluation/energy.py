"""Joules of an edit: power attached to every state of its :class:`~sakura.edge_client.timeline.Timeline`.

The states and what each costs (watts above a switched-off phone):

* **radio** (:class:`RadioModel`): a promotion out of idle before the first transfer; while a
  request or response is in flight, ``active_w`` plus ``per_mbps_w`` per Mbit/s delivered (so
  ``per_mbps_w`` times the megabits, whatever the rate); between transfers and after the last, the
  tail states (the radio stays connected until its inactivity timers run out); a gap longer than
  the whole tail demotes the radio, and the next transfer pays a promotion again;
* **compute**: the phone's model running (NPU or GPU), between ``compute_start`` and
  ``compute_end`` less the stalls, plus template KV computed before it (``precompute_s``);
* **decode**: the CPU decoding a fetched shard (``decode_started_at`` to ``decoded_at``);
* **base**: the phone on, screen lit, while the user waits for the image (the edit's latency).

An edit is charged its whole radio tail, even the part after the image is shown: the radio stays
up for it. In a session (:func:`session_energy`) a tail is cut short by the next edit's first
transfer, which then pays no promotion. The promotion's delay is not added to the latency (the
simulator does not model it; every system that uses the network would pay it alike).

Every constant names its source; "estimate" where none was found.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, replace

from sakura.edge_client.timeline import Timeline

_ARO_LTE = ("AT&T ARO's LTE profile (github.com/attdevsupport/ARO, ARODataAnalyzer/src/lte.conf, commit 86c3078): "
            "the power model of Huang et al., 'A Close Examination of Performance and Power Characteristics of 4G "
            "LTE Networks', MobiSys 2012, as that group's tool ships it: T_PROMOTION=0.26 s, P_PROMOTION=1.21 W, "
            "P_TAIL=1.06 W over INACTIVITY_TIMER 0.1 s + T_SHORT_DRX 0.02 s + T_LONG_DRX 10 s, LTE_BETA=1.2 W, "
            "LTE_ALPHA_DOWN=51.97 mW/Mbps")
_ARO_3G = ("AT&T ARO's 3G profile of the Samsung i997 (github.com/attdevsupport/ARO, ARODataAnalyzer/src/i997.conf, "
           "commit e003885): IDLE->DCH promotion 2.0 s (average) at 0.65 W, DCH 1.30 W, DCH->FACH timer 4 s, "
           "FACH 0.30 W, FACH->IDLE timer 10 s; no throughput term")
_ARO_WIFI = ("AT&T ARO's WiFi profile (github.com/attdevsupport/ARO, ARODataAnalyzer/src/WiFi.conf, commit 0ddc244): "
             "POWER_WIFI_ACTIVE=0.403 W, WIFI_TAIL_TIME=0.25 s; no promotion, no throughput term")
_5G = ("Narayanan et al., 'A Variegated Look at 5G in the Wild', SIGCOMM 2021, artifact github.com/SIGCOMM21-5G/"
       "artifact: transfer power P = 2.062 mW/Mbps x T + 3352 mW (Web-Browsing/scripts/web_utils.py, commit cd54606; "
       "Mbps there is 2^20 bit/s, taken as 10^6 here), inactivity timer ~10.2 s on Verizon NSA (RRC-Probe/"
       "Verizon-NSA.txt: answered over 5G after 10.1 s idle, over LTE after 10.2 s). Estimates: the tail's power, "
       "the 5G line's intercept x LTE's P_TAIL/LTE_BETA (1.06/1.2); the promotion, LTE's 0.26 s + 0.2 s for the "
       "NR leg (RRC-Probe: idle round trips 150-250 ms above connected ones) at the tail's power")


@dataclass(frozen=True)
class RadioModel:
    """A cellular or WiFi radio: its promotion, its power while transferring, and its tail states."""

    name: str
    promotion_s: float
    promotion_w: float
    active_w: float  # while a transfer is in flight, at no throughput (the model's beta)
    per_mbps_w: float  # per Mbit/s delivered (alpha_d)
    tail: tuple[tuple[float, float], ...]  # (seconds, watts) of each state after the last transfer, in order
    source: str

    @property
    def tail_s(self) -> float:
        return sum(seconds for seconds, _ in self.tail)

    def tail_j(self, seconds: float) -> float:
        """The tail's energy over its first ``seconds``."""
        joules, left = 0.0, seconds
        for span, watts in self.tail:
            joules += watts * min(span, max(0.0, left))
            left -= span
        return joules

    def gap_j(self, seconds: float) -> float:
        """Between two transfers ``seconds`` apart: the tail, or the whole tail and a new promotion."""
        if seconds <= self.tail_s:
            return self.tail_j(seconds)
        return self.tail_j(self.tail_s) + self.promotion_j

    @property
    def promotion_j(self) -> float:
        return self.promotion_s * self.promotion_w


_5G_TAIL_W = 3.352 * 1.06 / 1.2  # estimate (see _5G)

RADIOS: dict[str, RadioModel] = {
    "lte": RadioModel("lte", 0.26, 1.21, 1.2, 0.05197, ((10.12, 1.06),), _ARO_LTE),
    "5g-nsa": RadioModel("5g-nsa", 0.46, _5G_TAIL_W, 3.352, 0.002062, ((10.2, _5G_TAIL_W),), _5G),
    "3g": RadioModel("3g", 2.0, 0.65, 1.30, 0.0, ((4.0, 1.30), (10.0, 0.30)), _ARO_3G),
    "wifi": RadioModel("wifi", 0.0, 0.0, 0.403, 0.0, ((0.25, 0.403),), _ARO_WIFI),
}

#: The radio each trace family of ``../shared/traces`` was recorded on.
FAMILY_RADIO = {"lumos-5g": "5g-nsa", "lumos-4g": "lte", "mahimahi-cellular": "lte", "norway-hsdpa": "3g",
                "fcc-broadband": "wifi"}


def radio_for(family: str) -> RadioModel:
    """The radio of a trace family (LTE for a family this table does not know)."""
    return RADIOS[FAMILY_RADIO.get(family, "lte")]


@dataclass(frozen=True)
class PhonePower:
    """Watts above the phone's floor: its model computing, its CPU decoding, its screen on."""

    name: str
    compute_w: float
    decode_w: float
    base_w: float
    sources: str


PHONES: dict[str, PhonePower] = {
    "flagship": PhonePower(
        "flagship", compute_w=7.5, decode_w=2.845, base_w=0.58,
        sources="compute: Snapdragon 8 Gen 2 SoC power in 3DMark Wild Life Extreme, 7.5 W (Golden Reviewer's "
                "measurement as reported by mixzhare.com; a GPU load standing in for diffusion inference, for which "
                "no phone measurement was found; an NPU likely draws less: an upper estimate); decode: two big cores "
                "busy, 2845 mW of system active power (AnandTech's Kirin 960 review, 'System Active Power: CPU Load'; "
                "a 2016 SoC, an estimate for today's); base: POWER_SCREEN_ON=0.58 W (AT&T ARO, lte.conf)"),
}


@dataclass(frozen=True)
class EditEnergy:
    radio_j: float
    compute_j: float
    decode_j: float
    base_j: float

    @property
    def total_j(self) -> float:
        return self.radio_j + self.compute_j + self.decode_j + self.base_j

    def as_dict(self) -> dict[str, float]:
        return {"total_j": self.total_j, "radio_j": self.radio_j, "compute_j": self.compute_j,
                "decode_j": self.decode_j, "base_j": self.base_j}


def transfers(edit: Timeline) -> list[tuple[float, float]]:
    """When the radio carried the edit's requests and responses: the preamble, then each fetch
    from its request to its last byte (a download abandoned for the phone's compute, to when the
    model asked for it), merged where they overlap."""
    spans = [(0.0, edit.preamble_s)] if edit.preamble_s > 0 else []
    for s in edit.shards:
        if s.requested_at is None:
            continue
        end = s.needed_at if s.computed and s.needed_at is not None else s.arrived_at
        if end is not None:
            spans.append((s.requested_at, max(s.requested_at, end)))
    merged: list[tuple[float, float]] = []
    for start, end in sorted(spans):
        if merged and start <= merged[-1][1]:
            merged[-1] = (merged[-1][0], max(merged[-1][1], end))
        else:
            merged.append((start, end))
    return merged


def compute_s(edit: Timeline) -> float:
    """Seconds the phone's model computed (the template KV it computed included)."""
    return max(0.0, edit.compute_end - edit.compute_start - edit.stall_s) + edit.precompute_s


def decode_s(edit: Timeline) -> float:
    return sum(s.decoded_at - s.decode_started_at for s in edit.shards
               if not s.computed and s.decode_started_at is not None and s.decoded_at is not None)


def radio_j(spans: Sequence[tuple[float, float]], megabits: float, radio: RadioModel, *,
            idle_before: bool = True, next_transfer_in_s: float = math.inf) -> float:
    """The radio's joules for transfers ``spans`` carrying ``megabits``: a promotion if the radio was
    ``idle_before``, the transfers, the gaps between them, and the tail after the last, cut at
    ``next_transfer_in_s`` (the next transfer, past this tail or not: counted from the last one's end)."""
    if not spans:
        return 0.0
    joules = radio.promotion_j if idle_before else 0.0
    joules += radio.active_w * sum(end - start for start, end in spans) + radio.per_mbps_w * megabits
    joules += sum(radio.gap_j(b[0] - a[1]) for a, b in zip(spans, spans[1:]))
    return joules + radio.tail_j(min(radio.tail_s, next_transfer_in_s))


def edit_energy(edit: Timeline, radio: RadioModel, phone: PhonePower, *, idle_before: bool = True,
                next_transfer_in_s: float = math.inf) -> EditEnergy:
    """One edit's joules by state (see the module docstring)."""
    megabits = (edit.network_bytes + edit.preamble_bytes) * 8 / 1e6
    return EditEnergy(
        radio_j=radio_j(transfers(edit), megabits, radio, idle_before=idle_before,
                        next_transfer_in_s=next_transfer_in_s),
        compute_j=phone.compute_w * compute_s(edit),
        decode_j=phone.decode_w * decode_s(edit),
        base_j=phone.base_w * edit.latency_s,
    )


def session_energy(edits: Sequence[tuple[float, Timeline]], radio: RadioModel, phone: PhonePower, *,
                   compute_w: Sequence[float] | None = None) -> list[EditEnergy]:
    """Joules of each edit of a session, ``(start, edit)`` in time order (starts in seconds, each
    edit after the previous one's end): an edit whose first transfer comes within the tail of the
    last one before it pays no promotion, and that tail ends where it begins. ``compute_w``: per
    edit, the model's power if not ``phone.compute_w`` (a throttled phone)."""
    spans = [[(start + a, start + b) for a, b in transfers(edit)] for start, edit in edits]
    with_radio = [k for k, s in enumerate(spans) if s]
    out = []
    for k, (_, edit) in enumerate(edits):
        power = phone if compute_w is None else replace(phone, compute_w=compute_w[k])
        if k not in with_radio:
            out.append(edit_energy(edit, radio, power))
            continue
        at = with_radio.index(k)
        before = spans[with_radio[at - 1]][-1][1] if at > 0 else -math.inf
        after = spans[with_radio[at + 1]][0][0] if at + 1 < len(with_radio) else math.inf
        idle = spans[k][0][0] - before > radio.tail_s
        out.append(edit_energy(edit, radio, power, idle_before=idle, next_transfer_in_s=after - spans[k][-1][1]))
    return out
