"""Real architectures as their FLOPs and KV bytes, for the analytic workloads.

An :class:`Architecture` names the diffusers transformer and VAE classes and configs, and the
transformers text encoders, of a published model; :func:`edit_flops` builds each on the meta
device and counts one forward of every part (:func:`~sakura.evaluation.flops.count_flops`) at an
edit's token counts. Every number of a config is in :data:`SOURCES`.

Per transformer block it reports two figures:

* ``cached``: one denoising step of the user's tokens (image + text) with the template's
  reference K/V present: the block's forward on those tokens, plus the attention of their queries
  over the reference keys (``4 x queries x reference x width`` FLOPs: ``QK^T`` and ``AV``);
* ``reference``: what the reference tokens add to one stock step (the block's forward with them
  minus ``cached``): computing that block's reference KV on the phone.

The stock KV-cached pipeline (klein) pays ``reference`` once; a pipeline without a reference KV
cache (Kontext as it ships) pays it at every step.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from functools import lru_cache
from typing import TYPE_CHECKING, Any, TypeVar

import torch

from sakura.evaluation.flops import count_flops
from sakura.platform.models.pipelines.klein_shapes import KLEIN_4B, KLEIN_9B, KleinShape
from sakura.platform.models.pipelines.klein_shapes import SOURCES as KLEIN_SOURCES

# diffusers classes come from ``diffusers.models``: type checkers read its top-level names as the
# placeholders it defines for when torch is missing.
if TYPE_CHECKING:
    from diffusers.models import AutoencoderKL, AutoencoderKLFlux2

_Module = TypeVar("_Module", bound=torch.nn.Module)

SOURCES: dict[str, str] = {
    **{f"klein: {k}": v for k, v in KLEIN_SOURCES.items()},
    "kontext transformer": "FLUX.1 [dev] / Kontext [dev] FluxTransformer2DModel: 19 double + 38 single blocks, "
                           "24 heads x 128, in_channels 64, joint_attention_dim 4096, pooled_projection_dim 768, "
                           "axes_dims_rope (16, 56, 56), guidance_embeds (black-forest-labs/FLUX.1-Kontext-dev "
                           "transformer/config.json; the same numbers in Open-Sora's flux config: depth 19, "
                           "depth_single_blocks 38, hidden 3072, context_in_dim 4096, vec_in_dim 768)",
    "flux1 vae": "FLUX.1 / SD3 AutoencoderKL: 16 latent channels, block_out_channels (128, 256, 512, 512), "
                 "2 layers per block, no quant convs (FLUX.1 ae: ch 128, ch_mult (1, 2, 4, 4), z_channels 16)",
    "sd35m transformer": "stabilityai/stable-diffusion-3.5-medium SD3Transformer2DModel: 24 layers, 24 heads x 64, "
                         "patch 2, in/out 16, joint_attention_dim 4096, caption_projection_dim 1536, "
                         "pooled_projection_dim 2048, pos_embed_max_size 384, qk_norm rms_norm, dual attention "
                         "in layers 0-12 (Hugging Face's SD3.5 announcement; its transformer/config.json)",
    "t5-xxl": "google/t5-v1_1-xxl encoder (FLUX.1 and SD3's text_encoder_2/3): d_model 4096, d_ff 10240, "
              "24 layers, 64 heads of 64, gated-gelu; 512 tokens for FLUX.1, 256 for SD3",
    "clip-l": "openai/clip-vit-large-patch14 text model: 768 wide, 12 layers, 12 heads, MLP 3072, 77 tokens",
    "clip-g": "laion CLIP-ViT-bigG-14 text model (SD3's text_encoder_2): 1280 wide, 32 layers, 20 heads, "
              "MLP 5120, 77 tokens",
    "sd3 text tokens": "SD3 joins CLIP's 77 tokens and T5's 256 (max_sequence_length=256): 333",
}

_FLUX1 = dict(patch_size=1, in_channels=64, num_layers=19, num_single_layers=38, attention_head_dim=128,
              num_attention_heads=24, joint_attention_dim=4096, pooled_projection_dim=768, guidance_embeds=True,
              axes_dims_rope=(16, 56, 56))
_FLUX1_VAE = dict(in_channels=3, out_channels=3, latent_channels=16, block_out_channels=(128, 256, 512, 512),
                  layers_per_block=2, down_block_types=("DownEncoderBlock2D",) * 4,
                  up_block_types=("UpDecoderBlock2D",) * 4, use_quant_conv=False, use_post_quant_conv=False)
_SD35M = dict(sample_size=128, patch_size=2, in_channels=16, num_layers=24, attention_head_dim=64,
              num_attention_heads=24, joint_attention_dim=4096, caption_projection_dim=1536,
              pooled_projection_dim=2048, out_channels=16, pos_embed_max_size=384,
              dual_attention_layers=tuple(range(13)), qk_norm="rms_norm")
_T5_XXL = dict(d_model=4096, d_ff=10240, num_layers=24, num_heads=64, d_kv=64, feed_forward_proj="gated-gelu",
               vocab_size=32128)
_CLIP_L = dict(hidden_size=768, num_hidden_layers=12, num_attention_heads=12, intermediate_size=3072,
               projection_dim=768)
_CLIP_G = dict(hidden_size=1280, num_hidden_layers=32, num_attention_heads=20, intermediate_size=5120,
               projection_dim=1280)


@dataclass(frozen=True)
class TextEncoder:
    kind: str  # "qwen3" | "t5" | "clip"
    config: Mapping[str, Any]
    tokens: int


@dataclass(frozen=True)
class Architecture:
    name: str
    family: str  # "flux2-klein" | "flux1" | "sd3"
    kv_cached: bool  # the stock pipeline computes the reference tokens once (else at every step)
    transformer: Mapping[str, Any]
    vae: Mapping[str, Any]
    text_encoders: tuple[TextEncoder, ...]
    text_tokens: int  # the transformer's text sequence
    latent_channels: int
    pixels_per_token: int = 16
    #: Whether SAKURA's phone can compute this architecture's template KV itself, as its pipeline's
    #: adapter can (``computes_template``: klein's, and Kontext's and SD3's a pass per step). The
    #: simulated hybrid computes blocks only where the live client can.
    phone_computes_template: bool = False
    blocks_of: Callable[[Mapping[str, Any]], list[str]] = field(default=lambda cfg: [], compare=False)

    @property
    def heads(self) -> int:
        return int(self.transformer["num_attention_heads"])

    @property
    def width(self) -> int:
        return self.heads * int(self.transformer["attention_head_dim"])

    @property
    def prompt_width(self) -> int:
        return int(self.transformer["joint_attention_dim"])

    def tokens(self, resolution: int) -> int:
        return (resolution // self.pixels_per_token) ** 2


def _flux_blocks(cfg: Mapping[str, Any]) -> list[str]:
    return ([f"transformer_blocks.{i}" for i in range(cfg["num_layers"])]
            + [f"single_transformer_blocks.{i}" for i in range(cfg["num_single_layers"])])


def _sd3_blocks(cfg: Mapping[str, Any]) -> list[str]:
    return [f"transformer_blocks.{i}" for i in range(cfg["num_layers"])]


def klein_architecture(shape: KleinShape, name: str | None = None, blocks: int | None = None) -> Architecture:
    """A FLUX.2 [klein] shape as an architecture (``blocks``: only that many, as :meth:`KleinShape.split`)."""
    return Architecture(name=name or shape.name, family="flux2-klein", kv_cached=True, phone_computes_template=True,
                        transformer=shape.transformer_config(blocks),
                        vae=dict(shape.vae), latent_channels=int(shape.vae["latent_channels"]),
                        text_encoders=(TextEncoder("qwen3", dict(shape.text_encoder), shape.max_sequence_length),),
                        text_tokens=shape.max_sequence_length, blocks_of=_flux_blocks)


ARCHITECTURES: dict[str, Architecture] = {a.name: a for a in (
    klein_architecture(KLEIN_4B, "klein-4b"),
    klein_architecture(KLEIN_9B, "klein-9b"),
    Architecture(name="kontext", family="flux1", kv_cached=False, phone_computes_template=True,
                 transformer=_FLUX1, vae=_FLUX1_VAE,
                 latent_channels=16, text_encoders=(TextEncoder("t5", _T5_XXL, 512), TextEncoder("clip", _CLIP_L, 77)),
                 text_tokens=512, blocks_of=_flux_blocks),
    Architecture(name="sd35-medium", family="sd3", kv_cached=False, phone_computes_template=True,
                 transformer=_SD35M, vae=_FLUX1_VAE,
                 latent_channels=16, text_encoders=(TextEncoder("clip", _CLIP_L, 77), TextEncoder("clip", _CLIP_G, 77),
                                                    TextEncoder("t5", _T5_XXL, 256)),
                 text_tokens=333, blocks_of=_sd3_blocks),
)}


@dataclass(frozen=True)
class EditFlops:
    """FLOPs of one edit's parts (a ``reference``-pixel template image, an ``output``-pixel result)."""

    arch: str
    kv_cached: bool
    steps: int
    reference_tokens: int
    image_tokens: int
    text_tokens: int
    text_encode: float
    vae_encode_reference: float
    vae_encode_photo: float
    vae_decode: float
    outside_per_step: float  # embedders, modulation, final layer: per step, outside the blocks
    cached: tuple[float, ...]  # per block, one step
    reference: tuple[float, ...]  # per block, one step's reference tokens
    kv_bytes_per_block: int  # fp16 K + V of the reference tokens
    prompt_embed_bytes: int  # fp16
    reference_latent_bytes: int  # fp16

    @property
    def blocks(self) -> int:
        return len(self.cached)

    @property
    def replay_step(self) -> float:
        return self.outside_per_step + sum(self.cached)


def architecture(name: str) -> Architecture:
    try:
        return ARCHITECTURES[name]
    except KeyError:
        raise ValueError(f"unknown architecture {name!r}; known: {sorted(ARCHITECTURES)}") from None


def edit_flops(arch: str | Architecture, *, reference: int, output: int, steps: int) -> EditFlops:
    """The FLOPs of one edit of ``arch`` (a name of :data:`ARCHITECTURES`, counted once per process)."""
    if isinstance(arch, str):
        return _named_edit_flops(arch, reference, output, steps)
    return _edit_flops(arch, reference, output, steps)


@lru_cache(maxsize=32)
def _named_edit_flops(arch: str, reference: int, output: int, steps: int) -> EditFlops:
    return _edit_flops(architecture(arch), reference, output, steps)


def _edit_flops(a: Architecture, reference: int, output: int, steps: int) -> EditFlops:
    R, T, L = a.tokens(reference), a.tokens(output), a.text_tokens
    plain = _transformer_step(a, output, None)
    stock = _transformer_step(a, output, reference)
    names = a.blocks_of(a.transformer)
    extra = 4.0 * (T + L) * R * a.width  # the user's queries over the reference keys
    cached = tuple(plain.under(n) + extra for n in names)
    ref = tuple(stock.under(n) - c for n, c in zip(names, cached))
    outside = plain.total - sum(plain.under(n) for n in names)
    return EditFlops(
        arch=a.name, kv_cached=a.kv_cached, steps=steps, reference_tokens=R, image_tokens=T, text_tokens=L,
        text_encode=sum(_text_encoder(t.kind, tuple(sorted(t.config.items())), t.tokens) for t in a.text_encoders),
        vae_encode_reference=_vae(a, reference, encode=True), vae_encode_photo=_vae(a, output, encode=True),
        vae_decode=_vae(a, output, encode=False), outside_per_step=outside, cached=cached, reference=ref,
        kv_bytes_per_block=2 * R * a.width * 2, prompt_embed_bytes=L * a.prompt_width * 2,
        reference_latent_bytes=R * a.latent_channels * (a.pixels_per_token // 8) ** 2 * 2)


def _meta(build: Callable[[], _Module]) -> _Module:
    with torch.device("meta"):
        return build().eval()


def _transformer_step(a: Architecture, output: int, reference: int | None):
    """One stock step's FLOPs: the output's tokens, plus the reference's when given."""
    T, L = a.tokens(output), a.text_tokens
    R = a.tokens(reference) if reference else 0
    m = torch.device("meta")
    text = torch.zeros(1, L, a.prompt_width, device=m)
    if a.family == "sd3":
        from diffusers.models import SD3Transformer2DModel

        model = _meta(lambda: SD3Transformer2DModel(**a.transformer))
        side = output // 8  # the VAE's 8x; the reference sits beside the image in one latent
        extra_w = (reference // 8) ** 2 // side if reference else 0
        latent = torch.zeros(1, a.latent_channels, side, side + extra_w, device=m)
        pooled = torch.zeros(1, a.transformer["pooled_projection_dim"], device=m)
        return count_flops(lambda: model(hidden_states=latent, encoder_hidden_states=text, pooled_projections=pooled,
                                         timestep=torch.ones(1, device=m), return_dict=False))
    n = T + R
    img_ids, txt_ids = torch.zeros(1, n, 4 if a.family == "flux2-klein" else 3, device=m), None
    if a.family == "flux2-klein":
        from diffusers.models import Flux2Transformer2DModel

        model = _meta(lambda: Flux2Transformer2DModel(**a.transformer))
        txt_ids = torch.zeros(1, L, 4, device=m)
        hidden = torch.zeros(1, n, a.transformer["in_channels"], device=m)
        return count_flops(lambda: model(hidden_states=hidden, img_ids=img_ids, encoder_hidden_states=text,
                                         txt_ids=txt_ids, timestep=torch.ones(1, device=m), guidance=None,
                                         return_dict=False))
    from diffusers.models import FluxTransformer2DModel

    model = _meta(lambda: FluxTransformer2DModel(**a.transformer))
    hidden = torch.zeros(1, n, a.transformer["in_channels"], device=m)
    pooled = torch.zeros(1, a.transformer["pooled_projection_dim"], device=m)
    return count_flops(lambda: model(hidden_states=hidden, img_ids=img_ids[0], encoder_hidden_states=text,
                                     txt_ids=torch.zeros(L, 3, device=m), pooled_projections=pooled,
                                     timestep=torch.ones(1, device=m), guidance=torch.ones(1, device=m),
                                     return_dict=False))


@lru_cache(maxsize=16)
def _text_encoder(kind: str, config: tuple[tuple[str, Any], ...], tokens: int) -> float:
    import transformers

    cfg = dict(config)
    model: torch.nn.Module
    if kind == "qwen3":
        model = _meta(lambda: transformers.Qwen3Model(transformers.Qwen3Config(**cfg)))
    elif kind == "t5":
        model = _meta(lambda: transformers.T5EncoderModel(transformers.T5Config(**cfg)))
    else:
        model = _meta(lambda: transformers.CLIPTextModelWithProjection(transformers.CLIPTextConfig(**cfg)))
    ids = torch.zeros(1, tokens, dtype=torch.long, device="meta")
    return count_flops(lambda: model(input_ids=ids)).total


def _vae(a: Architecture, resolution: int, *, encode: bool) -> float:
    vae: AutoencoderKL | AutoencoderKLFlux2
    if a.family == "flux2-klein":
        from diffusers.models import AutoencoderKLFlux2

        vae = _meta(lambda: AutoencoderKLFlux2(**a.vae))
    else:
        from diffusers.models import AutoencoderKL

        vae = _meta(lambda: AutoencoderKL(**a.vae))
    if encode:
        pixels = torch.zeros(1, 3, resolution, resolution, device="meta")
        return count_flops(lambda: vae.encode(pixels)).total
    latent = torch.zeros(1, a.latent_channels, resolution // 8, resolution // 8, device="meta")
    return count_flops(lambda: vae.decode(latent)).total
