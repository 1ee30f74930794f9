"""A phone told what each block of its template pass costs (the live hybrid tests: this machine's
speed must not decide which blocks the phone computes)."""

from __future__ import annotations

from collections.abc import Sequence

from sakura.edge_client._compute_model import ComputeModel

#: What a block costs a phone told that computing is dear. The compute stage gives up on a
#: download whose bytes have not started by the time the model needs it once it would sooner
#: compute (its mean rate is a byte over the time since the round trip), so this is far more than
#: a shard's first byte could be late on these links, however busy this machine is (at an hour, a
#: first byte 0.7 s late would have the phone compute block 0).
DEAR_S = 1e6


class ToldCosts(ComputeModel):
    """The phone's timing model with what each block of the template pass costs told, not timed
    (this machine's speed must not decide): the source is made at no cost and the first block is
    due at once; the rest (compute between shards, decodes) it learns as ever."""

    def __init__(self, blocks: Sequence[float]) -> None:
        super().__init__()
        self.blocks = tuple(blocks)

    def template_s(self, model: str, shards: int) -> tuple[float, ...]:
        return self.blocks

    def prepare_s(self, model: str, what: str) -> float | None:
        return 0.0

    def startup(self, model: str) -> float:
        return 0.0
