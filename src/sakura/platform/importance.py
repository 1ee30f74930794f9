"""Token importance: which template tokens deserve more bits.

The score of a (head, token) row of a shard is the mean attention probability that request
queries put on that template token in that head, averaged over calibration requests (the
``attention_mass`` a capture records). Scores stay per head: a token that one head relies on
is often ignored by the others, and per-head ranking measured better than a head-averaged one
(``bench/codec.py``). Without calibration data the fallback is the key's L2 norm, a proxy for
how large the logits a token can produce are.

Scores are saved with the template (``to_bytes``/``from_bytes``, an ``.npz`` without pickles)
so a library can be re-encoded at new levels without a new capture.
"""

from __future__ import annotations

import io
import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any, Literal

import numpy as np

from sakura.platform.errors import SakuraError
from sakura.platform.kv import ShardKey, TemplateKV

_KEY = re.compile(r"^s([0-9]{1,9}|\*)_l([0-9]{1,9})$", re.ASCII)


class ImportanceError(SakuraError, ValueError):
    code = "invalid_importance"


@dataclass
class ImportanceScores:
    source: Literal["attention", "key_norm"]
    scores: dict[ShardKey, np.ndarray] = field(default_factory=dict)

    def __getitem__(self, key: ShardKey) -> np.ndarray:
        return self.scores[key]

    def get(self, key: ShardKey) -> np.ndarray | None:
        return self.scores.get(key)

    def to_bytes(self) -> bytes:
        buf = io.BytesIO()
        arrays: dict[str, Any] = {_name(k): v.astype(np.float32) for k, v in self.scores.items()}
        np.savez_compressed(buf, __source__=np.array(self.source), **arrays)
        return buf.getvalue()

    @classmethod
    def from_bytes(cls, data: bytes) -> ImportanceScores:
        try:
            with np.load(io.BytesIO(data), allow_pickle=False) as npz:
                source = str(npz["__source__"])
                scores = {_parse(name): npz[name].astype(np.float32) for name in npz.files if name != "__source__"}
        except ImportanceError:
            raise
        except Exception as exc:
            raise ImportanceError(f"unreadable importance scores: {exc}") from None
        if source not in ("attention", "key_norm") or any(s.ndim != 2 for s in scores.values()):
            raise ImportanceError("importance scores have an unknown source or shape")
        return cls(source, scores)  # type: ignore[arg-type]


def from_attention(masses: Iterable[dict[ShardKey, np.ndarray]]) -> ImportanceScores:
    """Average per-(head, token) attention mass over calibration requests."""
    masses = list(masses)
    if not masses:
        raise ImportanceError("no calibration attention data")
    keys = set(masses[0])
    if any(set(m) != keys for m in masses):
        raise ImportanceError("calibration captures cover different shards")
    return ImportanceScores("attention", {k: np.mean([m[k] for m in masses], axis=0).astype(np.float32) for k in keys})


def from_key_norms(kv: TemplateKV) -> ImportanceScores:
    """The fallback without calibration data."""
    return ImportanceScores("key_norm", {k: key_norm_scores(kv[k].k) for k in kv})


def key_norm_scores(k: np.ndarray) -> np.ndarray:
    return np.linalg.norm(k.astype(np.float32), axis=-1)


def _name(key: ShardKey) -> str:
    return f"s{'*' if key.step is None else key.step}_l{key.layer}"


def _parse(name: str) -> ShardKey:
    m = _KEY.match(name)
    if m is None:
        raise ImportanceError(f"bad shard name {name!r} in importance scores")
    return ShardKey(None if m.group(1) == "*" else int(m.group(1)), int(m.group(2)))
