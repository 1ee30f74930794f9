"""Output fidelity of a level plan: PSNR of the edit made with those shards against the edit
made with the exact template KV (same photo, same seed), computed by really replaying."""

from __future__ import annotations

import numpy as np

from sakura.edge_client.planning import COMPUTE
from sakura.platform.images import IDENTICAL_DB, psnr_db
from sakura.platform.kv import TemplateKV
from sakura.platform.models import EditRequest, ModelAdapter, Schedule

__all__ = ["IDENTICAL_DB", "FidelityTable", "psnr_db"]


class FidelityTable:
    def __init__(self, adapter: ModelAdapter, decoded: dict[str, TemplateKV], exact_level: str, prompt: str,
                 request: EditRequest, schedule: Schedule) -> None:
        self.adapter, self.decoded, self.prompt = adapter, decoded, prompt
        self.request, self.schedule, self.exact_level = request, schedule, exact_level
        self.keys = decoded[exact_level].keys
        self.fingerprint = decoded[exact_level].model_fingerprint
        self.exact = self._image(tuple([exact_level] * len(self.keys)))
        self._psnr: dict[tuple[str, ...], float] = {}

    def _image(self, plan: tuple[str, ...]) -> np.ndarray:
        # A shard the phone computed is the exact KV (bit for bit the lossless level's).
        levels = [self.exact_level if level == COMPUTE else level for level in plan]
        kv = TemplateKV(self.fingerprint, {k: self.decoded[level][k] for k, level in zip(self.keys, levels)})
        return self.adapter.edit_image(kv, self.prompt, self.request, self.schedule)

    def psnr(self, plan: tuple[str, ...]) -> float:
        if not plan:
            return IDENTICAL_DB  # nothing fetched: computed on the device, exactly
        if plan not in self._psnr:
            self._psnr[plan] = min(IDENTICAL_DB, psnr_db(self.exact, self._image(plan)))
        return self._psnr[plan]
