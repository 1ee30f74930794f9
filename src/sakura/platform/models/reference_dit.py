"""A small in-context editing DiT built for template-KV caching (the ``reference`` model).

Request tokens carry the noisy output and the user's image, channel-concatenated per patch.
Template tokens carry the template image plus a task embedding. Template tokens attend only to
themselves and are modulated with the embedding of t = 0, so their keys and values depend on
neither the request nor the step: one KV shard per layer. Template and request tokens share
2-D rotary positions, so a token can find its spatially aligned counterpart (the prototype
measured this to matter more than model size).

Built from diffusers blocks: ``Timesteps``/``TimestepEmbedding``, ``FluxPosEmbed`` with
``apply_rotary_emb`` for 2-D RoPE, and ``FeedForward``.
"""

from __future__ import annotations

from collections.abc import Generator, Iterable
from typing import cast

import torch
from diffusers.configuration_utils import ConfigMixin, register_to_config
from diffusers.models.attention import FeedForward
from diffusers.models.embeddings import TimestepEmbedding, Timesteps
from diffusers.models.modeling_utils import ModelMixin
from diffusers.models.transformers.transformer_flux import FluxPosEmbed
from torch import nn

from sakura.platform.models._attention import Mode, RunState, apply_rope, template_attention

Rope = tuple[torch.Tensor, torch.Tensor]


class ReferenceBlock(nn.Module):
    def __init__(self, dim: int, heads: int, layer: int) -> None:
        super().__init__()
        self.heads, self.layer = heads, layer
        self.modulation = nn.Linear(dim, 6 * dim)
        self.norm1 = nn.LayerNorm(dim, elementwise_affine=False, eps=1e-6)
        self.qkv = nn.Linear(dim, 3 * dim)
        self.norm_q = nn.RMSNorm(dim // heads, eps=1e-6)
        self.norm_k = nn.RMSNorm(dim // heads, eps=1e-6)
        self.proj = nn.Linear(dim, dim)
        self.norm2 = nn.LayerNorm(dim, elementwise_affine=False, eps=1e-6)
        self.ff = FeedForward(dim, dim_out=dim, activation_fn="gelu-approximate")

    def forward(
        self, segments: list[torch.Tensor], embs: list[torch.Tensor], rope: Rope, state: RunState | None
    ) -> list[torch.Tensor]:
        """``segments`` is ``[request]`` or ``[request, template]``; each has its own modulation."""
        mods, qkvs = self.project(segments, embs, rope)
        q, k, v = (torch.cat([t[i] for t in qkvs], dim=2) for i in range(3))
        out = template_attention(q, k, v, tpl_start=segments[0].shape[1], layer=self.layer, state=state)
        return self.finish(segments, mods, out)

    def project(self, segments: list[torch.Tensor], embs: list[torch.Tensor], rope: Rope) -> tuple[list, list]:
        """The first half of the block: each segment's modulation and its (q, k, v), which hold
        the block's K/V (the template-only pass stops here after its last block)."""
        mods = [self.modulation(nn.functional.silu(e)).unsqueeze(1).chunk(6, dim=-1) for e in embs]
        qkvs = [self._qkv(self.norm1(h) * (1 + m[1]) + m[0], rope) for h, m in zip(segments, mods)]
        return mods, qkvs

    def finish(self, segments: list[torch.Tensor], mods: list, out: torch.Tensor) -> list[torch.Tensor]:
        """The second half: the attention output ``out`` (batch, heads, tokens, head_dim), over
        the segments in order, through the projection and the feed-forward."""
        out = out.transpose(1, 2).flatten(2)
        results, start = [], 0
        for h, m in zip(segments, mods):
            part = out[:, start : start + h.shape[1]]
            start += h.shape[1]
            h = h + m[2] * self.proj(part)
            h = h + m[5] * self.ff(self.norm2(h) * (1 + m[4]) + m[3])
            results.append(h)
        return results

    def _qkv(self, x: torch.Tensor, rope: Rope) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        b, n, _ = x.shape
        q, k, v = self.qkv(x).view(b, n, 3, self.heads, -1).permute(2, 0, 3, 1, 4)
        q = apply_rope(self.norm_q(q), rope, sequence_dim=2)
        k = apply_rope(self.norm_k(k), rope, sequence_dim=2)
        return q, k, v


# diffusers' two bases disagree on the type of ``config_name`` (ModelMixin: str, ConfigMixin: None).
class ReferenceEditDiT(ModelMixin, ConfigMixin):  # type: ignore[misc]
    @register_to_config
    def __init__(
        self,
        resolution: int = 32,
        patch_size: int = 2,
        hidden: int = 128,
        depth: int = 6,
        heads: int = 4,
        tasks: int = 4,
        rope_theta: float = 100.0,
    ) -> None:
        super().__init__()
        cell = 3 * patch_size * patch_size
        self.grid = resolution // patch_size
        self.request_embed = nn.Linear(2 * cell, hidden)
        self.template_embed = nn.Linear(cell, hidden)
        self.task_embed = nn.Embedding(tasks, hidden)
        self.time_proj = Timesteps(256, flip_sin_to_cos=True, downscale_freq_shift=0)
        self.time_embed = TimestepEmbedding(256, hidden)
        head_dim = hidden // heads
        self.pos_embed = FluxPosEmbed(theta=int(rope_theta), axes_dim=[head_dim // 2, head_dim // 2])
        self.blocks = nn.ModuleList(ReferenceBlock(hidden, heads, i) for i in range(depth))
        self.norm_out = nn.LayerNorm(hidden, elementwise_affine=False, eps=1e-6)
        self.out_modulation = nn.Linear(hidden, 2 * hidden)
        self.proj_out = nn.Linear(hidden, cell)
        self._zero_init()

    def _zero_init(self) -> None:
        """adaLN-Zero: every block starts as the identity and the output as zero."""
        for module in [*(b.modulation for b in self._blocks()), self.out_modulation, self.proj_out]:
            nn.init.zeros_(module.weight)
            nn.init.zeros_(module.bias)

    def forward(
        self,
        noisy: torch.Tensor,
        user: torch.Tensor,
        t: torch.Tensor,
        template: torch.Tensor | None = None,
        task: torch.Tensor | None = None,
        state: RunState | None = None,
    ) -> torch.Tensor:
        """Flow velocity for ``noisy`` (B, N, cell) given the ``user`` image tokens (B, N, cell).

        ``template`` (B, N, cell) with ``task`` (B,) puts template tokens in the sequence (masked
        to themselves); without them, ``state`` must be a REPLAY state holding cached template KV.
        """
        if template is not None and state is None:
            state = RunState(mode=Mode.CAPTURE, template_tokens=template.shape[1])
        h = self.request_embed(torch.cat([noisy, user], dim=-1))
        emb = self._time(t)
        segments, embs = [h], [emb]
        if template is not None:
            assert task is not None
            tpl, tpl_emb = self._embed_template(template, task)
            segments.append(tpl)
            embs.append(tpl_emb)
        rope = self._rope(h.device)  # one grid: template tokens sit at their request twins' positions
        for block in self.blocks:
            segments = block(segments, embs, rope, state)
        shift, scale = self.out_modulation(nn.functional.silu(emb)).unsqueeze(1).chunk(2, dim=-1)
        return self.proj_out(self.norm_out(segments[0]) * (1 + scale) + shift)

    def template_blocks(
        self, template: torch.Tensor, task: torch.Tensor
    ) -> Generator[tuple[torch.Tensor, torch.Tensor], None, None]:
        """The template tokens alone through the blocks, bottom-up: yields each block's template
        (K, V), (batch, heads, tokens, head_dim), as the blocks of :meth:`forward` compute them
        (template tokens attend only to themselves there, so nothing else is needed). A block's
        second half runs only when the next block's K/V is asked for."""
        h, emb = self._embed_template(template, task)
        rope = self._rope(h.device)
        for block in self._blocks():
            mods, [(q, k, v)] = block.project([h], [emb], rope)
            yield k, v
            [h] = block.finish([h], mods, template_attention(q, k, v, tpl_start=0, layer=block.layer, state=None))

    def _blocks(self) -> Iterable[ReferenceBlock]:
        """``blocks``, typed (a ``ModuleList`` yields plain modules)."""
        return cast("Iterable[ReferenceBlock]", self.blocks)

    def _embed_template(self, template: torch.Tensor, task: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Template tokens and their modulation embedding: t = 0 plus the task's embedding."""
        task_emb = self.task_embed(task)
        tokens = self.template_embed(template) + task_emb.unsqueeze(1)
        return tokens, self._time(torch.zeros(task.shape, dtype=torch.float32, device=task.device)) + task_emb

    def _time(self, t: torch.Tensor) -> torch.Tensor:
        return self.time_embed(self.time_proj(t * 1000.0).to(self.proj_out.weight.dtype))

    def _rope(self, device: torch.device) -> Rope:
        g = self.grid
        ids = torch.stack(torch.meshgrid(torch.arange(g), torch.arange(g), indexing="ij"), dim=-1).reshape(-1, 2)
        return self.pos_embed(ids.to(device))
