"""The attention arithmetic shared by every model family's template-aware processor.

A processor projects queries, keys and values as its family does, then calls
:func:`template_attention` with the position of the template span in the key sequence. This
module decides what the span means in the current run:

* ``CAPTURE``: template tokens are in the sequence. Template queries attend only to template
  keys (that is what makes template KV independent of the request); request queries attend to
  everything. The template K/V and the attention mass request queries put on template tokens
  can be recorded.
* ``UNMASKED``: template tokens are in the sequence and everybody attends to everybody, as a
  naive in-context model would. Used to show that without the mask replay is not exact.
* ``REPLAY``: there are no template tokens in the sequence; cached template K/V (already
  normalised and rotated) are inserted at the span's position.

The run state lives in a ``ContextVar`` owned by one adapter instance, so two model instances in
two threads (or one instance in two threads) never see each other's state.
"""

from __future__ import annotations

import contextvars
import enum
from dataclasses import dataclass, field

import numpy as np
import torch
import torch.nn.functional as F

from sakura.platform.codec.distortion import MAX_QUERIES, QueryProbe
from sakura.platform.errors import ModelError
from sakura.platform.kv import KVPair, KVSource, ShardKey
from sakura.platform.models._factored import ShardFactors, TemplateTensors, template_tensors
from sakura.platform.models._factored import attend as attend_factored

_MASS_HEAD_CHUNK = 4


class Mode(enum.Enum):
    CAPTURE = "capture"
    UNMASKED = "unmasked"
    REPLAY = "replay"


@dataclass(frozen=True)
class AttentionProbe:
    query: torch.Tensor
    key: torch.Tensor
    value: torch.Tensor
    tpl_start: int

    def attend(self, k_tpl: torch.Tensor, v_tpl: torch.Tensor) -> torch.Tensor:
        """Attention output of these queries with the given template K/V (heads, tokens, dim)."""
        batch = self.key.shape[0]
        key = _insert(self.key, k_tpl.unsqueeze(0).expand(batch, -1, -1, -1), self.tpl_start)
        value = _insert(self.value, v_tpl.unsqueeze(0).expand(batch, -1, -1, -1), self.tpl_start)
        return F.scaled_dot_product_attention(self.query, key, value)


def query_probe(probe: AttentionProbe, max_queries: int = MAX_QUERIES) -> QueryProbe:
    """What the codec measures a shard's attention-output error with (:mod:`sakura.platform.codec.distortion`):
    up to ``max_queries`` of the probe's queries, evenly spread, and their attention over the request's
    own keys reduced to its log-sum-exp and output."""
    query = probe.query[0].float()
    picked = torch.from_numpy(np.unique(np.linspace(0, query.shape[1] - 1, min(query.shape[1], max_queries))
                                        .round().astype(np.int64)))
    q = query[:, picked]
    logits = q @ probe.key[0].float().transpose(-1, -2) * q.shape[-1] ** -0.5
    lse = torch.logsumexp(logits, dim=-1)
    out = torch.softmax(logits, dim=-1) @ probe.value[0].float()
    return QueryProbe(q.numpy().copy(), lse.numpy().copy(), out.numpy().copy())


@dataclass
class RunState:
    """What the attention processors need to know about the denoising call in progress."""

    mode: Mode
    template_tokens: int
    step: int | None = None
    record_kv: dict[ShardKey, KVPair] | None = None
    record_mass: dict[ShardKey, np.ndarray] | None = None
    replay_kv: KVSource | None = None
    #: Model-native latent of the template, for families that inject template tokens in a hook.
    template_latent: torch.Tensor | None = None
    #: When set in REPLAY mode, receives each shard's queries and request keys/values (for
    #: measuring attention-output error of compressed KV offline).
    probe: dict[ShardKey, AttentionProbe] | None = None
    #: How many steps' masses were summed into ``record_mass`` per shard (step-independent KV).
    mass_counts: dict[ShardKey, int] = field(default_factory=dict)
    #: How many times replay attends to each shard: every step where template KV is step-independent.
    uses_per_shard: int = 1
    _replay_cache: dict[ShardKey, TemplateTensors] = field(default_factory=dict)

    @property
    def has_template_in_sequence(self) -> bool:
        return self.mode is not Mode.REPLAY

    def cached_kv(self, key: ShardKey, like: torch.Tensor, queries: int) -> TemplateTensors:
        """Shard ``key``'s template K and V as (1, heads, tokens, head_dim) tensors, or as factors where
        the shard came factored and attending in that form counts fewer FLOPs (:mod:`._factored`)."""
        pair = self._replay_cache.get(key)
        if pair is None:
            assert self.replay_kv is not None
            pair = template_tensors(self.replay_kv[key], like, queries, self.uses_per_shard)
            self._replay_cache[key] = pair
        return pair


def new_state_var(name: str) -> contextvars.ContextVar[RunState | None]:
    return contextvars.ContextVar(f"sakura_run_state_{name}", default=None)


def template_attention(
    query: torch.Tensor,
    key: torch.Tensor,
    value: torch.Tensor,
    *,
    tpl_start: int,
    layer: int,
    state: RunState | None,
) -> torch.Tensor:
    """Attention over ``(batch, heads, seq, head_dim)`` tensors with the template span at ``tpl_start``.

    In CAPTURE and UNMASKED modes the span ``[tpl_start, tpl_start + state.template_tokens)`` of
    queries and keys is the template; in REPLAY mode the sequence has no template tokens and the
    cached ones are inserted at ``tpl_start``. Returns the output in the query sequence's order.
    """
    if state is None or (state.mode is not Mode.REPLAY and state.template_tokens == 0):
        return F.scaled_dot_product_attention(query, key, value)
    shard = ShardKey(step=state.step, layer=layer)
    if state.mode is Mode.REPLAY:
        if state.probe is not None:
            state.probe[shard] = AttentionProbe(query.clone(), key.clone(), value.clone(), tpl_start)
        template = state.cached_kv(shard, like=key, queries=query.shape[2])
        if isinstance(template, ShardFactors):
            return attend_factored(query, key, value, template)
        k_tpl, v_tpl = template
        batch = key.shape[0]
        key = _insert(key, k_tpl.expand(batch, -1, -1, -1), tpl_start)
        value = _insert(value, v_tpl.expand(batch, -1, -1, -1), tpl_start)
        return F.scaled_dot_product_attention(query, key, value)
    tpl = slice(tpl_start, tpl_start + state.template_tokens)
    if tpl.stop > key.shape[2]:
        raise ModelError(f"template span {tpl} exceeds the sequence length {key.shape[2]}")
    if state.record_kv is not None and shard not in state.record_kv:
        if key.shape[0] != 1:
            raise ModelError("capture runs with batch size 1")
        state.record_kv[shard] = KVPair(k=_to_numpy(key[0, :, tpl]), v=_to_numpy(value[0, :, tpl]))
    if state.mode is Mode.UNMASKED:
        return F.scaled_dot_product_attention(query, key, value)
    return _capture_attention(query, key, value, tpl, shard, state)


def _capture_attention(
    query: torch.Tensor,
    key: torch.Tensor,
    value: torch.Tensor,
    tpl: slice,
    shard: ShardKey,
    state: RunState,
) -> torch.Tensor:
    k_tpl, v_tpl = key[:, :, tpl], value[:, :, tpl]
    # Request queries see every key, template included: the same call replay makes.
    q_req = torch.cat([query[:, :, : tpl.start], query[:, :, tpl.stop :]], dim=2)
    out_req = F.scaled_dot_product_attention(q_req, key, value)
    # Template queries see only template keys, so template KV never depends on the request.
    out_tpl = F.scaled_dot_product_attention(query[:, :, tpl], k_tpl, v_tpl)
    if state.record_mass is not None:
        mass = _template_mass(q_req, key, tpl)
        if shard in state.record_mass:
            mass = mass + state.record_mass[shard]
            state.mass_counts[shard] = state.mass_counts.get(shard, 1) + 1
        state.record_mass[shard] = mass
    return torch.cat([out_req[:, :, : tpl.start], out_tpl, out_req[:, :, tpl.start :]], dim=2)


def _template_mass(q_req: torch.Tensor, key: torch.Tensor, tpl: slice) -> np.ndarray:
    """Mean attention probability that request queries put on each template key, per head."""
    scale = q_req.shape[-1] ** -0.5
    chunks = []
    for h in range(0, q_req.shape[1], _MASS_HEAD_CHUNK):
        logits = torch.matmul(
            q_req[0, h : h + _MASS_HEAD_CHUNK].float(), key[0, h : h + _MASS_HEAD_CHUNK].float().transpose(-1, -2)
        )
        probs = torch.softmax(logits * scale, dim=-1)
        chunks.append(probs[:, :, tpl].mean(dim=1))
    return torch.cat(chunks, dim=0).cpu().numpy().astype(np.float32)


def apply_rope(x: torch.Tensor, rope: tuple[torch.Tensor, torch.Tensor], *, sequence_dim: int) -> torch.Tensor:
    """diffusers' ``apply_rotary_emb`` (real form): ``rope`` is (cos, sin); the result is ``x`` rotated."""
    from diffusers.models.embeddings import apply_rotary_emb

    # Its annotations say a 1-tuple in and a pair out; it takes (cos, sin) and returns one tensor.
    return apply_rotary_emb(x, rope, sequence_dim=sequence_dim)  # type: ignore[arg-type,return-value]


def _insert(seq: torch.Tensor, span: torch.Tensor, at: int) -> torch.Tensor:
    return torch.cat([seq[:, :, :at], span, seq[:, :, at:]], dim=2)


def _to_numpy(t: torch.Tensor) -> np.ndarray:
    t = t.detach().cpu().contiguous()
    if t.dtype == torch.bfloat16:  # numpy has no bfloat16; float32 holds it exactly
        t = t.float()
    return t.numpy().copy()
