"""Adapter for diffusers' ``SD3Transformer2DModel`` family (SD3, SD3.5).

SD3 orders the joint sequence ``[image, text]``, adds absolute 2-D position embeddings in its
patch embedding, and its stock processor ignores attention masks. Template tokens are appended
to the image stream right after the patch embedding (a forward hook on ``pos_embed`` embeds the
template latent with the same positions as the request: spatially aligned), and dropped again
before unpatchifying (a hook on ``proj_out``). The key sequence is therefore
``[request image, template, text]``; replay inserts cached keys at the same place. SD3.5's
second, image-only attention (``attn2``) is handled the same way and counts as its own layer.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch

from sakura.platform.models._attention import template_attention
from sakura.platform.models._diffusers import DiffusersAdapter, LatentCodec
from sakura.platform.models.base import to_unit_image


class SD3TemplateProcessor:
    """A per-instance replacement for ``JointAttnProcessor2_0`` that knows about the template span."""

    def __init__(self, adapter: SD3Adapter, layer: int) -> None:
        self._adapter = adapter
        self.layer = layer

    def __call__(
        self,
        attn: Any,
        hidden_states: torch.Tensor,
        encoder_hidden_states: torch.Tensor | None = None,
        attention_mask: torch.Tensor | None = None,
    ) -> Any:
        batch, image_len = hidden_states.shape[:2]

        def heads(t: torch.Tensor) -> torch.Tensor:
            return t.view(batch, -1, attn.heads, t.shape[-1] // attn.heads).transpose(1, 2)

        query, key, value = (
            heads(attn.to_q(hidden_states)), heads(attn.to_k(hidden_states)), heads(attn.to_v(hidden_states))
        )
        if attn.norm_q is not None:
            query = attn.norm_q(query)
        if attn.norm_k is not None:
            key = attn.norm_k(key)
        if encoder_hidden_states is not None:
            eq, ek, ev = (heads(p(encoder_hidden_states)) for p in (attn.add_q_proj, attn.add_k_proj, attn.add_v_proj))
            if attn.norm_added_q is not None:
                eq = attn.norm_added_q(eq)
            if attn.norm_added_k is not None:
                ek = attn.norm_added_k(ek)
            query, key, value = (torch.cat(pair, dim=2) for pair in ((query, eq), (key, ek), (value, ev)))

        state = self._adapter._current_state()
        tpl_start = image_len
        if state is not None and state.has_template_in_sequence:
            tpl_start -= state.template_tokens
        out = template_attention(query, key, value, tpl_start=tpl_start, layer=self.layer, state=state)
        out = out.transpose(1, 2).reshape(batch, -1, attn.heads * query.shape[-1]).to(query.dtype)

        context = None
        if encoder_hidden_states is not None:
            out, context = out[:, :image_len], out[:, image_len:]
            if not attn.context_pre_only:
                context = attn.to_add_out(context)
        out = attn.to_out[1](attn.to_out[0](out))
        return out if encoder_hidden_states is None else (out, context)


class SD3Adapter(DiffusersAdapter):
    family = "sd3"

    def __init__(self, model: torch.nn.Module, *, name: str, resolution: int, pack: int, text_tokens: int,
                 codec: LatentCodec | None = None) -> None:
        # SD3 patchifies by itself: the codec maps pixels to the model's latent grid.
        super().__init__(model, name=name, resolution=resolution, pack=pack, text_tokens=text_tokens, codec=codec)
        self.model.pos_embed.register_forward_hook(self._append_template_tokens)
        self.model.proj_out.register_forward_hook(self._drop_template_tokens)

    def _attention_modules(self) -> list[Any]:
        modules = []
        for block in self.model.transformer_blocks:
            modules.append(block.attn)
            if getattr(block, "attn2", None) is not None:
                modules.append(block.attn2)
        return modules

    def _install_processors(self) -> None:
        for layer, attn in enumerate(self._attention_modules()):
            attn.set_processor(SD3TemplateProcessor(self, layer))

    def _image_tokens(self) -> int:
        return (self.codec.grid // self.model.config.patch_size) ** 2

    # Template tokens ride along the image stream between these two hooks.
    def _append_template_tokens(self, module: torch.nn.Module, args: tuple, output: torch.Tensor) -> torch.Tensor:
        state = self._current_state()
        if state is None or state.template_latent is None:
            return output
        return torch.cat([output, module.forward(state.template_latent)], dim=1)

    def _drop_template_tokens(self, module: torch.nn.Module, args: tuple, output: torch.Tensor) -> torch.Tensor:
        state = self._current_state()
        if state is None or state.template_latent is None:
            return output
        return output[:, : output.shape[1] - state.template_tokens]

    def _template_token_count(self, template_latent: torch.Tensor) -> int:
        p = self.model.config.patch_size
        return (template_latent.shape[-2] // p) * (template_latent.shape[-1] // p)

    def _image_latent(self, image: np.ndarray, *, template: bool) -> torch.Tensor:
        cells = self.codec.encode(to_unit_image(image))
        return cells.permute(2, 0, 1).unsqueeze(0).to(self._dtype)

    def _velocity(self, x: torch.Tensor, sigma: float, cond: Any, template: torch.Tensor | None) -> torch.Tensor:
        text, pooled = cond
        return self._call(x, text, pooled, sigma)

    def _template_forward(self, template: torch.Tensor, sigma: float, cond: Any) -> None:
        """The template latent alone as the image stream at noise level ``sigma`` (the hooks append
        nothing: the run state holds no template latent): under the capture mask its tokens attend
        only to themselves, so one zero text token stands in for the prompt (whose pooled
        embedding still modulates them, with the timestep)."""
        text, pooled = cond
        self._call(template, torch.zeros_like(text[:, :1]), pooled, sigma)

    def _call(self, x: torch.Tensor, text: torch.Tensor, pooled: torch.Tensor, sigma: float) -> torch.Tensor:
        return self.model(
            hidden_states=x,
            encoder_hidden_states=text,
            pooled_projections=pooled,
            timestep=torch.full((1,), sigma * 1000.0, dtype=self._dtype),
            return_dict=False,
        )[0]

    def _template_latent_shape(self) -> tuple[int, ...]:
        return (int(self.model.config.in_channels), self.codec.grid, self.codec.grid)

    def latent_to_image(self, latent: torch.Tensor) -> np.ndarray:
        return self.codec.decode(latent[0].permute(1, 2, 0))
