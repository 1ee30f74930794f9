"""The phone's bandwidth estimator on the simulated clock.

The simulator computes a download to its last byte when it is asked for; the phone learns of it
only when it ends. A :class:`~sakura.edge_client.estimator.BandwidthEstimator` fed at once
planned the next requests with a throughput the phone had not measured yet: SD3.5 on the
flagship GPU, a 5G drive out of a second at 1.5 MB/s, planned a pass on five downloads at
12.5 MB/s that were to end after the choice, and fetched it; the phone, still 23 times wrong about
its last two, would have computed it. :class:`TimedEstimator` keeps each observation until the
time it is asked at has reached the observation's own: every estimate is the one the phone would
hold then, in whatever order the simulation computes its downloads.
"""

from __future__ import annotations

from bisect import bisect_right
from typing import NamedTuple

from sakura.edge_client.estimator import BandwidthEstimator, Estimate

__all__ = ["TimedEstimator"]


class _Observation(NamedTuple):
    at: float  # when the phone learns it: the response's end
    order: int  # the order observed (those at one time apply in it)
    nbytes: int  # 0: a round trip of ``seconds``
    seconds: float


class TimedEstimator:
    """``known``'s estimator, told of each later observation from its ``at`` on.

    What it knows after the first ``k`` observations (by time) is kept, so an estimate at any
    time costs a bisection once those are built; an observation that ends before others already
    built drops those, to be rebuilt when asked."""

    def __init__(self, known: BandwidthEstimator) -> None:
        self._observations: list[_Observation] = []
        self._states: list[BandwidthEstimator] = [known]  # after the first k observations

    def observe(self, nbytes: int, seconds: float, *, at: float) -> None:
        """A response of ``nbytes`` that took ``seconds`` (first byte to last) and ends ``at``."""
        if nbytes > 0:
            self._add(_Observation(at, len(self._observations), nbytes, seconds))

    def observe_rtt(self, seconds: float, *, at: float) -> None:
        """A request's time to its first byte, learnt ``at`` (the live fetcher: when it ends)."""
        self._add(_Observation(at, len(self._observations), 0, seconds))

    def estimate(self, now: float) -> Estimate | None:
        return self._known(now).estimate(now)

    def rtt_s(self, now: float) -> float:
        """The smoothed round trip the phone holds at ``now``."""
        return self._known(now).rtt_s

    def _add(self, observation: _Observation) -> None:
        at = bisect_right(self._observations, observation)
        self._observations.insert(at, observation)
        del self._states[at + 1:]

    def _known(self, now: float) -> BandwidthEstimator:
        k = bisect_right(self._observations, now, key=lambda o: o.at)
        while len(self._states) <= k:
            state = self._states[-1].copy()
            _apply(state, self._observations[len(self._states) - 1])
            self._states.append(state)
        return self._states[k]


def _apply(estimator: BandwidthEstimator, observation: _Observation) -> None:
    if observation.nbytes:
        estimator.observe(observation.nbytes, observation.seconds, at=observation.at)
    else:
        estimator.observe_rtt(observation.seconds)
