"""The template KV the phone computes itself: the model's reference pass, one block at a time.

Block ``b``'s KV needs the reference hidden states out of blocks ``0..b-1``: the pass has reached
the *frontier*, and computing shard ``b`` runs it through every block up to ``b`` (the KV of
blocks passed on the way, fetched already, is dropped). Each block is timed and taught to the
:class:`~sakura.edge_client._compute_model.ComputeModel`, which the planner reads.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator

from sakura.edge_client._compute_model import ComputeModel
from sakura.edge_client.errors import EditCancelled
from sakura.platform.errors import ModelError
from sakura.platform.kv import KVPair, ShardKey


class TemplateComputer:
    """``start`` makes the adapter's ``iter_template_kv`` generator for this template, when the
    first block is asked for: it may prepare the source first (from the template's image), on the
    compute stage, while the link fetches."""

    def __init__(self, start: Callable[[], Iterator[tuple[ShardKey, KVPair]]], keys: list[ShardKey],
                 compute_model: ComputeModel, model: str, pace: Callable[[float], None] | None = None,
                 prepare_s: float = 0.0, cancel: threading.Event | None = None) -> None:
        """``pace``: the device hook told each block's seconds (an emulated slower phone sleeps
        there). ``prepare_s``: the predicted seconds ``start`` takes (the planner adds them to the
        first block until it has run). ``cancel``: the edit's, looked at before each block."""
        self._start, self._keys, self._pace, self._prepare_s = start, keys, pace, prepare_s
        self._cancel = cancel
        self._blocks: Iterator[tuple[ShardKey, KVPair]] | None = None
        self.compute_model, self.model = compute_model, model
        self.frontier = 0

    def block_costs(self, known: tuple[float, ...]) -> tuple[float, ...]:
        """Each block's predicted seconds from the compute model's ``known``, with the preparation
        still to come added to the frontier's."""
        if not known or self._blocks is not None or not self._prepare_s:
            return known
        return (*known[:self.frontier], known[self.frontier] + self._prepare_s, *known[self.frontier + 1:])

    def reaches(self, index: int) -> bool:
        """Whether shard ``index`` is the next block of the pass (every shard before it was computed)."""
        return index == self.frontier

    def cost_s(self, index: int, known: tuple[float, ...]) -> float:
        """Predicted seconds to compute shard ``index``: every block from the frontier up to it."""
        return sum(self.block_costs(known)[self.frontier:index + 1])

    def compute(self, index: int) -> KVPair:
        """Shard ``index``'s KV, computed here (the pass runs on from the frontier to it)."""
        if index < self.frontier:
            raise ModelError(f"template KV is computed bottom-up: block {index} asked with {self.frontier} passed")
        if self._blocks is None:
            self._blocks = self._start()
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
