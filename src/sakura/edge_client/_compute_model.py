"""A self-calibrating model of on-device time: how long the model computes between shards, and
how long decoding a shard takes. Deadlines for the level policy come from here.

It learns from every edit (and live, during one): each measured gap between consuming shard
``i`` and asking for shard ``i + 1`` updates an exponentially weighted average per model and
shard position; each decode updates a per-level seconds-per-byte average; each block of template
KV the phone computes itself updates that block's average, and each preparation it does itself
(a prompt encoded, the template's source made from its image) that preparation's. Before any measurement it predicts
zero compute between shards (every shard is due at once), which makes policies pick small
levels. Until the phone has computed a block of template KV, it takes one for the median compute
between two shards (an estimate: one block of the reference tokens costs about what one block of
the request tokens does when their counts match, as on the models here); with nothing measured at
all, nothing (the planner fetches, and the phone learns at the first block it would wait for).
"""

from __future__ import annotations

import threading
from collections import defaultdict

from sakura.edge_client.errors import ConfigError

#: What the phone may prepare itself (:meth:`ComputeModel.observe_prepare`).
PROMPT, SOURCE = "prompt", "source"


class ComputeModel:
    def __init__(self, alpha: float = 0.5) -> None:
        if not 0 < alpha <= 1:
            raise ConfigError("alpha must be in (0, 1]")
        self.alpha = alpha
        self._startup: dict[str, float] = {}
        self._gaps: dict[str, dict[int, float]] = defaultdict(dict)
        self._decode: dict[str, float] = {}
        self._template: dict[str, dict[int, float]] = defaultdict(dict)
        self._prepare: dict[tuple[str, str], float] = {}
        self._lock = threading.Lock()

    def _blend(self, old: float | None, new: float) -> float:
        return new if old is None else self.alpha * new + (1 - self.alpha) * old

    # -- learning ------------------------------------------------------------------------
    def observe_startup(self, model: str, seconds: float) -> None:
        with self._lock:
            self._startup[model] = self._blend(self._startup.get(model), max(0.0, seconds))

    def observe_gap(self, model: str, index: int, seconds: float) -> None:
        """Compute time between consuming shard ``index`` and needing the next one (or finishing)."""
        with self._lock:
            gaps = self._gaps[model]
            gaps[index] = self._blend(gaps.get(index), max(0.0, seconds))

    def observe_decode(self, level: str, nbytes: int, seconds: float) -> None:
        if nbytes > 0:
            with self._lock:
                self._decode[level] = self._blend(self._decode.get(level), max(0.0, seconds) / nbytes)

    def observe_template(self, model: str, index: int, seconds: float) -> None:
        """The phone computed shard ``index``'s template KV itself in ``seconds``."""
        with self._lock:
            blocks = self._template[model]
            blocks[index] = self._blend(blocks.get(index), max(0.0, seconds))

    def observe_prepare(self, model: str, what: str, seconds: float) -> None:
        """The phone prepared ``what`` for an edit itself in ``seconds`` (:data:`PROMPT`: encoded a
        template's prompt with its own text encoder; :data:`SOURCE`: made the template's source
        from its image with its own image codec)."""
        with self._lock:
            self._prepare[model, what] = self._blend(self._prepare.get((model, what)), max(0.0, seconds))

    # -- predicting ----------------------------------------------------------------------
    def prepare_s(self, model: str, what: str) -> float | None:
        """Predicted seconds to prepare ``what`` on the phone; None until it has done so."""
        with self._lock:
            return self._prepare.get((model, what))

    def template_s(self, model: str, shards: int) -> tuple[float, ...]:
        """Predicted seconds to compute each shard's template KV (a block never computed: the mean
        of those that were, else the median gap; see the module docstring); empty when unknown."""
        with self._lock:
            known = self._template.get(model)
            if known:
                mean = sum(known.values()) / len(known)
                return tuple(known.get(i, mean) for i in range(shards))
            gaps = sorted(self._gaps[model].values())
            return (gaps[len(gaps) // 2],) * shards if gaps else ()

    def startup(self, model: str) -> float:
        with self._lock:
            return self._startup.get(model, 0.0)

    def gaps(self, model: str, shards: int) -> tuple[float, ...]:
        with self._lock:
            return tuple(self._gaps[model].get(i, 0.0) for i in range(shards))

    def decode_s(self, level: str, nbytes: int) -> float:
        with self._lock:
            return self._decode.get(level, 0.0) * nbytes

    def calibrated(self, model: str) -> bool:
        with self._lock:
            return bool(self._gaps.get(model))
