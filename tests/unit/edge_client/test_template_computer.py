"""The phone's template passes: one for a step-independent model, one per step for a per-step
model. Computing a shard runs its pass from the frontier (or from the pass's first block where it
has not started); a later step's pass starts fresh and the rest of the one before never runs."""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np
import pytest

from sakura.edge_client._compute_model import ComputeModel
from sakura.edge_client._template_kv import TemplateComputer
from sakura.platform.errors import ModelError
from sakura.platform.kv import KVPair, ShardKey, pass_shards

STEPS, LAYERS = 3, 4
KEYS = [ShardKey(s, layer) for s in range(STEPS) for layer in range(LAYERS)]


class Passes:
    """The adapter's passes, recorded: which step each started for and which blocks ran."""

    def __init__(self) -> None:
        self.started: list[int | None] = []
        self.ran: list[ShardKey] = []
        self.closed = 0

    def start(self, step: int | None) -> Iterator[tuple[ShardKey, KVPair]]:
        self.started.append(step)
        try:
            for key in (k for k in KEYS if k.step == step):
                self.ran.append(key)
                yield key, KVPair(np.full((1, 2, 2), key.layer, np.float32), np.zeros((1, 2, 2), np.float32))
        finally:
            self.closed += 1


def _computer(passes: Passes, prepare_s: float = 0.0) -> TemplateComputer:
    return TemplateComputer(passes.start, KEYS, ComputeModel(), "m", prepare_s=prepare_s)


def test_pass_shards_are_every_shard_of_one_pass_or_a_steps():
    assert pass_shards(KEYS) == LAYERS
    assert pass_shards([ShardKey(None, i) for i in range(5)]) == 5 and pass_shards([]) == 0


def test_a_later_steps_pass_starts_at_its_first_block_and_the_one_before_stops():
    passes = Passes()
    computer = _computer(passes)
    assert computer.compute(1).k[0, 0, 0] == 1  # step 0's pass through blocks 0 and 1
    assert computer.frontier == 2 and passes.started == [0]
    assert computer.pass_frontier(6) == 4 and computer.reaches(4) and not computer.reaches(6)
    known = tuple(float(i) for i in range(len(KEYS)))
    assert computer.cost_s(6, known) == 4 + 5 + 6  # step 1's blocks 0..2, none of step 0's rest
    assert computer.cost_s(3, known) == 2 + 3
    assert computer.rest_s(6, known) == 4 + 5 + 6 + 7 and computer.rest_s(3, known) == 2 + 3
    computer.compute(5)
    assert passes.started == [0, 1] and passes.closed == 1  # step 0's blocks 2 and 3 never ran
    assert passes.ran == [*KEYS[0:2], *KEYS[4:6]] and computer.frontier == 6
    with pytest.raises(ModelError, match="bottom-up"):
        computer.compute(3)
    computer.close()
    assert passes.closed == 2


def test_the_preparation_counts_on_the_first_block_of_each_pass_until_one_starts():
    """All of it where the compute stage judges starting a pass; the planner, weighing one pass at
    a time, charges pass k of P its 1/(P - k) share (the source serves that pass and those after)."""
    passes = Passes()
    computer = _computer(passes, prepare_s=10.0)
    known = (1.0,) * len(KEYS)
    costs = computer.block_costs(known)
    assert [i for i, s in enumerate(costs) if s > 1.0] == [0, 4, 8]
    assert computer.cost_s(5, costs) == 12.0
    shares = computer.block_costs(known, shared=True)  # the planner's: 3 passes share it
    assert [round(shares[i] - 1.0, 6) for i in (0, 4, 8)] == [round(10 / 3, 6), 5.0, 10.0]
    assert [i for i, s in enumerate(shares) if s > 1.0] == [0, 4, 8]
    computer.compute(4)
    assert computer.block_costs(known) == known  # prepared once, for every pass
    assert computer.block_costs(known, shared=True) == known


def test_keys_that_do_not_make_whole_passes_are_refused():
    with pytest.raises(ModelError, match="passes"):
        TemplateComputer(Passes().start, KEYS[:-1], ComputeModel(), "m")  # step 2 lacks its top block
