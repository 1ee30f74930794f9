"""Where a level's error goes: which coding each unit (one tensor of one shard) takes so that the
units' summed distortion stays within a budget at the fewest bytes.

``marginal``: greedy by marginal return. Every unit starts at its cheapest coding; the unit whose
next coding removes the most distortion per extra byte moves, until the budget holds. On each
unit's lower convex hull of (bytes, distortion) this is the Lagrangian optimum up to the last
move. ``uniform``: every unit at the same rung of its step ladder (the same step relative to its
own scale), the coarsest that meets the budget: what a codec without allocation does.
"""

from __future__ import annotations

import heapq
from collections.abc import Sequence
from dataclasses import dataclass


@dataclass(frozen=True)
class Option:
    """One way to code a unit: its bytes, its distortion, and the ladder rung it came from."""

    nbytes: int
    distortion: float
    rung: int


def hull(options: Sequence[Option]) -> list[int]:
    """Indexes of ``options`` on their lower convex hull, from fewest bytes to least distortion."""
    order = sorted(range(len(options)), key=lambda i: (options[i].nbytes, options[i].distortion))
    out: list[int] = []
    for i in order:
        if out and options[i].distortion >= options[out[-1]].distortion:
            continue  # costs more and removes nothing
        while len(out) >= 2 and _turns_up(options[out[-2]], options[out[-1]], options[i]):
            out.pop()
        out.append(i)
    return out


def _turns_up(a: Option, b: Option, c: Option) -> bool:
    """Whether ``b`` lies on or above the segment from ``a`` to ``c`` (``b`` is then off the hull)."""
    rise, run = c.distortion - a.distortion, c.nbytes - a.nbytes
    return (b.distortion - a.distortion) * run >= rise * (b.nbytes - a.nbytes)


def marginal(units: Sequence[Sequence[Option]], budget: float) -> list[int]:
    """The option each unit takes: greedy by distortion removed per byte, until ``budget``."""
    hulls = [hull(options) for options in units]
    at = [0] * len(units)
    total = sum(units[u][h[0]].distortion for u, h in enumerate(hulls))
    heap = [(-_gain(units[u], h, 0), u) for u, h in enumerate(hulls) if len(h) > 1]
    heapq.heapify(heap)
    while total > budget and heap:
        _, u = heapq.heappop(heap)
        h, i = hulls[u], at[u]
        total += units[u][h[i + 1]].distortion - units[u][h[i]].distortion
        at[u] = i + 1
        if i + 2 < len(h):
            heapq.heappush(heap, (-_gain(units[u], h, i + 1), u))
    return [h[i] for h, i in zip(hulls, at)]


def _gain(options: Sequence[Option], h: list[int], i: int) -> float:
    a, b = options[h[i]], options[h[i + 1]]
    return (a.distortion - b.distortion) / max(1, b.nbytes - a.nbytes)


def uniform(units: Sequence[Sequence[Option]], budget: float) -> list[int]:
    """The option each unit takes: the smallest at one common rung, the coarsest rung within ``budget``
    (the finest of all where none is)."""
    rungs = sorted({o.rung for options in units for o in options})
    choice: list[int] = []
    for rung in rungs:
        choice = [_at_rung(options, rung) for options in units]
        if sum(units[u][i].distortion for u, i in enumerate(choice)) <= budget:
            break
    return choice


def _at_rung(options: Sequence[Option], rung: int) -> int:
    """The smallest option of the finest rung up to ``rung`` that this unit has."""
    have = max((o.rung for o in options if o.rung <= rung), default=min(o.rung for o in options))
    return min((i for i, o in enumerate(options) if o.rung == have), key=lambda i: options[i].nbytes)
