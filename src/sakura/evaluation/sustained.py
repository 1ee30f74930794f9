"""Sustained sessions: back-to-back edits on one phone, which heats up and throttles
(:mod:`~sakura.evaluation.thermal`), over one trace, with the radio's tail shared between edits
(:func:`~sakura.evaluation.energy.session_energy`).

Each edit uses a template the phone does not hold (none of its KV, manifest or objects): the case
where fetching has the most to carry. An edit starts ``every_s`` after the previous one started,
or when it ends if it takes longer. The phone's speed for an edit is the thermal model's at the
edit's start (an edit of seconds inside minutes of heating: held for the edit); compute and
decode slow down alike, and the model's power falls with its speed.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from sakura.edge_client.timeline import Timeline
from sakura.emulation.traces import BandwidthTrace
from sakura.evaluation.energy import EditEnergy, PhonePower, RadioModel, compute_s, decode_s, session_energy
from sakura.evaluation.geometry import EditGeometry
from sakura.evaluation.simulator import EditSimulator
from sakura.evaluation.thermal import ThermalModel


@dataclass(frozen=True)
class SessionEdit:
    start_s: float  # since the session began
    speed: float  # the SoC's fraction of its peak speed for this edit
    edit: Timeline
    energy: EditEnergy

    @property
    def latency_s(self) -> float:
        return self.edit.latency_s


def sustained_session(geometry: EditGeometry, trace: BandwidthTrace, start: float, system: str, *,
                      edits: int, every_s: float, rtt_s: float, thermal: ThermalModel, radio: RadioModel,
                      phone: PhonePower) -> list[SessionEdit]:
    """``edits`` edits of ``system``, the session starting ``start`` seconds into ``trace``."""
    heat, at, timed = 0.0, 0.0, []
    for _ in range(edits):
        speed = thermal.speed(heat)
        sim = EditSimulator(geometry.scaled(1.0 / speed), trace, start + at, rtt_s=rtt_s)
        edit = sim.run(system)
        timed.append((at, speed, edit))
        following = max(at + every_s, at + edit.latency_s)
        busy = compute_s(edit) + decode_s(edit)
        heat = thermal.after(heat, busy, following - at - busy)  # it cools while it waits, too
        at = following
    energies = session_energy([(t, e) for t, _, e in timed], radio, phone,
                              compute_w=[phone.compute_w * speed for _, speed, _ in timed])
    return [SessionEdit(t, speed, edit, energy) for (t, speed, edit), energy in zip(timed, energies)]


def session_summary(sessions: Sequence[Sequence[SessionEdit]]) -> dict:
    """Per edit index, the median over ``sessions`` of latency, joules and speed; and the session's
    first and last edits side by side."""
    count = min(len(s) for s in sessions)
    per_edit = [{
        "latency_median_s": float(np.median([s[k].latency_s for s in sessions])),
        "joules_median": float(np.median([s[k].energy.total_j for s in sessions])),
        "speed_median": float(np.median([s[k].speed for s in sessions])),
    } for k in range(count)]
    return {"sessions": len(sessions), "per_edit": per_edit, "first": per_edit[0], "last": per_edit[-1],
            "session_s_median": float(np.median([s[-1].start_s + s[-1].latency_s for s in sessions])),
            "joules_total_median": float(np.median([sum(e.energy.total_j for e in s) for s in sessions]))}
