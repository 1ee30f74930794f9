"""The template KV the phone computes itself: the model's reference passes, one block at a time.

Block ``b``'s KV needs the reference hidden states out of blocks ``0..b-1`` of its pass: the pass
has reached the *frontier*, and computing shard ``b`` runs it through every block up to ``b``
(the KV of blocks passed on the way, fetched already, is dropped). A step-independent model's
template KV is one pass; a per-step model's is one pass per step, each independent of the others,
so computing the first shard of a later step starts that step's pass from its first block (the
rest of the pass before is never run). Each block is timed and taught to the
:class:`~sakura.edge_client._compute_model.ComputeModel`, which the planner reads.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator

from sakura.edge_client._compute_model import ComputeModel
from sakura.edge_client.errors import EditCancelled
from sakura.edge_client.planning import with_preparation
from sakura.platform.errors import ModelError
from sakura.platform.kv import KVPair, ShardKey, pass_shards


class TemplateComputer:
    """``start(step)`` makes the adapter's ``iter_template_kv`` generator of the pass whose shards
    carry ``step`` (None: a step-independent model's one pass), when its first block is asked for:
    the first may prepare the source (from the template's image), on the compute stage, while the
    link fetches. ``keys``: the shards in the order the model reads them (their steps say the
    passes: :func:`~sakura.platform.kv.pass_shards`)."""

    def __init__(self, start: Callable[[int | None], Iterator[tuple[ShardKey, KVPair]]], keys: list[ShardKey],
                 compute_model: ComputeModel, model: str, pace: Callable[[float], None] | None = None,
                 prepare_s: float = 0.0, cancel: threading.Event | None = None) -> None:
        """``pace``: the device hook told each block's seconds (an emulated slower phone sleeps
        there). ``prepare_s``: the predicted seconds the first ``start`` takes (the planner adds
        them to the first block computed until it has run). ``cancel``: the edit's, looked at
        before each block."""
        self._start, self._keys, self._pace, self._prepare_s = start, keys, pace, prepare_s
        self._cancel = cancel
        self._pass_shards = pass_shards(keys)
        if not keys or len(keys) % self._pass_shards:
            raise ModelError(f"{len(keys)} template shards do not make passes of {self._pass_shards}")
        self._blocks: Iterator[tuple[ShardKey, KVPair]] | None = None
        self._pass: int | None = None  # the first shard of the pass the generator runs (None: none started)
        self.compute_model, self.model = compute_model, model
        self.frontier = 0

    def pass_frontier(self, index: int) -> int:
        """The first shard computing shard ``index`` would compute: the frontier, or the first
        shard of ``index``'s pass where that pass has not started."""
        return max(self.frontier, self._pass_start(index))

    def _pass_start(self, index: int) -> int:
        return index - index % self._pass_shards

    def block_costs(self, known: tuple[float, ...], *, shared: bool = False) -> tuple[float, ...]:
        """Each block's predicted seconds from the compute model's ``known``, with the preparation
        still to come added to the first block of each pass the phone may still start (``shared``:
        the planner's share of it, :func:`~sakura.edge_client.planning.with_preparation`)."""
        return with_preparation(known, 0.0 if self._pass is not None else self._prepare_s, self._pass_shards,
                                shared=shared)

    def reaches(self, index: int) -> bool:
        """Whether shard ``index`` is the next block of its pass (every shard of the pass before it was computed)."""
        return index == self.pass_frontier(index)

    def begun(self, index: int) -> bool:
        """Whether the pass of shard ``index`` has begun here (a block of it was computed)."""
        return self._pass == self._pass_start(index)

    def climb(self, index: int) -> None:
        """Run shard ``index``'s pass one block on from its frontier, below ``index`` (a block whose
        KV was fetched: it is dropped, its output carries the pass)."""
        self.compute(self.pass_frontier(index))

    def cost_s(self, index: int, costs: tuple[float, ...]) -> float:
        """Predicted seconds to compute shard ``index``: every block of its pass from the frontier
        up to it (``costs``: :meth:`block_costs`)."""
        return sum(costs[self.pass_frontier(index):index + 1])

    def rest_s(self, index: int, costs: tuple[float, ...]) -> float:
        """Predicted seconds to run shard ``index``'s pass from its frontier to its end (``costs``:
        :meth:`block_costs`)."""
        return sum(costs[self.pass_frontier(index):self._pass_start(index) + self._pass_shards])

    def compute(self, index: int) -> KVPair:
        """Shard ``index``'s KV, computed here (its pass runs on from the frontier to it)."""
        if index < self.frontier:
            raise ModelError(f"template KV is computed bottom-up: block {index} asked with {self.frontier} passed")
        first = self._pass_start(index)
        if self._pass != first:
            self.close()
            self._blocks, self._pass = self._start(self._keys[first].step), first
            self.frontier = max(self.frontier, first)
        assert self._blocks is not None
        while True:
            if self._cancel is not None and self._cancel.is_set():
                raise EditCancelled("the edit was cancelled")
            started = time.perf_counter()
            key, pair = next(self._blocks)
            block = self.frontier
            if key != self._keys[block]:
                raise ModelError(f"the model computed template shard {key}, "
                                 f"the manifest's shard {block} is {self._keys[block]}")
            if self._pace is not None:
                self._pace(time.perf_counter() - started)
            self.compute_model.observe_template(self.model, block, time.perf_counter() - started)
            self.frontier += 1
            if block == index:
                return pair

    def close(self) -> None:
        close = getattr(self._blocks, "close", None) if self._blocks is not None else None
        if close is not None:
            close()
        self._blocks = None
