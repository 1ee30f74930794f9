"""The template KV the phone computes itself: the model's reference pass, one block at a time.

Block ``b``'s KV needs the reference hidden states out of blocks ``0..b-1``: the pass has reached
the *frontier*, and computing shard ``b`` runs it through every block up to ``b`` (the KV of
blocks passed on the way, fetched already, is dropped). Each block is timed and taught to the
:class:`~sakura.edge_client._compute_model.ComputeModel`, which the planner reads.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator

from sakura.edge_client._compute_model import ComputeModel
from sakura.platform.errors import ModelError
from sakura.platform.kv import KVPair, ShardKey


class TemplateComputer:
    """``blocks`` is the adapter's ``iter_template_kv`` generator for this template."""

    def __init__(self, blocks: Iterator[tuple[ShardKey, KVPair]], keys: list[ShardKey], compute_model: ComputeModel,
                 model: str, pace: Callable[[float], None] | None = None) -> None:
        """``pace``: the device hook told each block's seconds (an emulated slower phone sleeps there)."""
        self._blocks, self._keys, self._pace = blocks, keys, pace
        self.compute_model, self.model = compute_model, model
        self.frontier = 0

    def reaches(self, index: int) -> bool:
        """Whether shard ``index`` is the next block of the pass (every shard before it was computed)."""
        return index == self.frontier

    def cost_s(self, index: int, known: tuple[float, ...]) -> float:
        """Predicted seconds to compute shard ``index``: every block from the frontier up to it."""
        return sum(known[self.frontier:index + 1])

    def compute(self, index: int) -> KVPair:
        """Shard ``index``'s KV, computed here (the pass runs on from the frontier to it)."""
        if index < self.frontier:
            raise ModelError(f"template KV is computed bottom-up: block {index} asked with {self.frontier} passed")
        while True:
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
        close = getattr(self._blocks, "close", None)
        if close is not None:
            close()
