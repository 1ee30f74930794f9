"""Adapter for diffusers' ``FluxTransformer2DModel`` family.

Flux orders the joint sequence ``[text, image]`` and rotates queries and keys with position ids.
Template tokens are appended to the image stream with their own ids (first axis 1, as FLUX
Kontext marks reference images; the other axes aligned with the request's grid), so the key
sequence is ``[text, request image, template]`` and the template span is always last. Keys are
recorded after RMS norm and rotary embedding; replay appends them untouched.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch

from sakura.platform.models._attention import apply_rope, template_attention
from sakura.platform.models._diffusers import DiffusersAdapter
from sakura.platform.models.base import to_unit_image


class FluxTemplateProcessor:
    """A per-instance replacement for ``FluxAttnProcessor`` that knows about the template span."""

    def __init__(self, adapter: FluxAdapter, layer: int) -> None:
        self._adapter = adapter
        self.layer = layer

    def __call__(
        self,
        attn: Any,
        hidden_states: torch.Tensor,
        encoder_hidden_states: torch.Tensor | None = None,
        attention_mask: torch.Tensor | None = None,
        image_rotary_emb: tuple[torch.Tensor, torch.Tensor] | None = None,
    ) -> Any:
        query, key, value = (
            proj(hidden_states).unflatten(-1, (-1, attn.head_dim)) for proj in (attn.to_q, attn.to_k, attn.to_v)
        )
        query, key = attn.norm_q(query), attn.norm_k(key)
        joint = encoder_hidden_states is not None and attn.added_kv_proj_dim is not None
        if joint:
            eq, ek, ev = (
                proj(encoder_hidden_states).unflatten(-1, (-1, attn.head_dim))
                for proj in (attn.add_q_proj, attn.add_k_proj, attn.add_v_proj)
            )
            query = torch.cat([attn.norm_added_q(eq), query], dim=1)
            key = torch.cat([attn.norm_added_k(ek), key], dim=1)
            value = torch.cat([ev, value], dim=1)
        if image_rotary_emb is not None:
            query = apply_rope(query, image_rotary_emb, sequence_dim=1)
            key = apply_rope(key, image_rotary_emb, sequence_dim=1)

        state = self._adapter._current_state()
        seq = key.shape[1]
        tpl_start = seq - state.template_tokens if state is not None and state.has_template_in_sequence else seq
        out = template_attention(
            query.transpose(1, 2), key.transpose(1, 2), value.transpose(1, 2),
            tpl_start=tpl_start, layer=self.layer, state=state,
        )
        out = out.transpose(1, 2).flatten(2, 3).to(query.dtype)
        if not joint:
            return out
        assert encoder_hidden_states is not None  # joint
        text_len = encoder_hidden_states.shape[1]
        context, image = out[:, :text_len], out[:, text_len:]
        return attn.to_out[1](attn.to_out[0](image.contiguous())), attn.to_add_out(context.contiguous())


class FluxAdapter(DiffusersAdapter):
    family = "flux"
    #: The embedded guidance of guidance-distilled checkpoints (``guidance_embeds``).
    guidance_scale: float = 3.5

    def _attention_modules(self) -> list[Any]:
        blocks = list(self.model.transformer_blocks) + list(self.model.single_transformer_blocks)
        return [block.attn for block in blocks]

    def _install_processors(self) -> None:
        for layer, attn in enumerate(self._attention_modules()):
            attn.set_processor(FluxTemplateProcessor(self, layer))

    def _image_tokens(self) -> int:
        return self.codec.grid**2

    def _image_latent(self, image: np.ndarray, *, template: bool) -> torch.Tensor:
        cells = self.codec.encode(to_unit_image(image))
        return cells.reshape(1, -1, cells.shape[-1]).to(self._dtype)

    def _ids(self, template: bool) -> torch.Tensor:
        g = self.codec.grid
        ids = torch.zeros(g, g, 3)
        ids[..., 0] = 1.0 if template else 0.0
        ids[..., 1] = torch.arange(g)[:, None]
        ids[..., 2] = torch.arange(g)[None, :]
        return ids.reshape(-1, 3)

    def _velocity(self, x: torch.Tensor, sigma: float, cond: Any, template: torch.Tensor | None) -> torch.Tensor:
        text, pooled = cond
        tokens, ids = x, self._ids(template=False)
        if template is not None:
            tokens = torch.cat([x, template], dim=1)
            ids = torch.cat([ids, self._ids(template=True)], dim=0)
        return self._call(tokens, ids, text, pooled, sigma)[:, : x.shape[1]]

    def _template_forward(self, template: torch.Tensor, sigma: float, cond: Any) -> None:
        """The template tokens alone through the model at noise level ``sigma``: under the capture
        mask they attend only to themselves, so one zero text token stands in for the prompt (whose
        pooled embedding still modulates them, with the timestep)."""
        text, pooled = cond
        self._call(template, self._ids(template=True), torch.zeros_like(text[:, :1]), pooled, sigma)

    def _call(self, tokens: torch.Tensor, ids: torch.Tensor, text: torch.Tensor, pooled: torch.Tensor,
              sigma: float) -> torch.Tensor:
        guidance = None
        if self.model.config.guidance_embeds:
            guidance = torch.full((1,), self.guidance_scale, dtype=self._dtype)
        return self.model(
            hidden_states=tokens,
            encoder_hidden_states=text,
            pooled_projections=pooled,
            timestep=torch.full((1,), sigma, dtype=self._dtype),
            img_ids=ids.to(self._dtype),
            txt_ids=torch.zeros(text.shape[1], 3, dtype=self._dtype),
            guidance=guidance,
            return_dict=False,
        )[0]

    def _template_latent_shape(self) -> tuple[int, ...]:
        return (self.codec.grid**2, int(self.model.config.in_channels))

    def latent_to_image(self, latent: torch.Tensor) -> np.ndarray:
        g = self.codec.grid
        return self.codec.decode(latent.reshape(g, g, -1))
