"""FLUX.2 [klein] at its real shapes, with seeded random weights and no download.

A :class:`KleinShape` holds a checkpoint's configs: the transformer's (every block), the VAE's,
and the text encoder's (counted, never built: the text encoder runs in the cloud, and a shape
model stands in random prompt embeddings of the right shape for it). :func:`build_adapter`
builds a :class:`KleinShapeAdapter` (a :class:`KleinAdapter`) from one, optionally with only
the first ``blocks`` blocks: 4B random parameters take 16 GB in fp32, so benchmarks time a few
blocks and extrapolate (``bench/capture.py --model klein-4b-shape --blocks N``).

Where each number comes from is in :data:`SOURCES`.
"""

from __future__ import annotations

import hashlib
import importlib.util
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch

from sakura.platform.errors import ModelError
from sakura.platform.models.pipelines.klein import KleinAdapter

#: Where the configs' numbers come from.
SOURCES: dict[str, str] = {
    "blocks_and_width": "issue 13 (4B: 5 double + 20 single blocks, 24 heads x 128; 9B: 8 + 24, 32 x 128), "
                        "matching InvokeAI's FLUX.2 klein presets (invokeai/backend/flux2/util.py, Klein4B/Klein9B)",
    "in_channels, mlp_ratio, axes_dims_rope, rope_theta, timestep_guidance_channels, patch_size, eps":
        "diffusers 0.42 Flux2Transformer2DModel defaults (128, 3.0, (32, 32, 32, 32), 2000, 256, 1, 1e-6); "
        "InvokeAI's klein presets give the same values",
    "guidance_embeds": "False: the distilled klein models take no guidance (InvokeAI presets; diffusers' "
                       "Flux2KleinKVPipeline passes guidance=None)",
    "joint_attention_dim": "3 x the text encoder's hidden size: Flux2KleinKVPipeline stacks the hidden states "
                           "of text_encoder_out_layers=(9, 18, 27); 3 x 2560 = 7680 (4B), 3 x 4096 = 12288 (9B), "
                           "as in InvokeAI's presets",
    "vae": "diffusers 0.42 AutoencoderKLFlux2 defaults (block_out_channels (128, 256, 512, 512), 32 latent "
           "channels, 2 layers per block), the config ollama's FLUX.2 klein VAE reads (x/imagegen/models/flux2/vae.go)",
    "text_encoder_4b": "Qwen/Qwen3-4B: hidden 2560, 36 layers, 32 query / 8 KV heads of 128, MLP 9728, vocab "
                       "151936, tied embeddings (Qwen3-4B model card: 4.0B parameters; NVIDIA's klein 4B card: "
                       "Qwen3ForCausalLM ~4B)",
    "text_encoder_9b": "Qwen/Qwen3-8B: hidden 4096, 36 layers, 32 / 8 heads of 128, MLP 12288, vocab 151936, "
                       "untied embeddings (Qwen3-8B card: 8.2B); that the 9B uses Qwen3-8B: iris.c's AGENT.md, "
                       "the klein 9B int8 card (text encoder Qwen3-8B-FP8), and 12288 = 3 x 4096",
    "scheduler": "estimate: FLUX.1's dynamic-shift FlowMatchEuler config; the klein pipeline overrides mu "
                 "with compute_empirical_mu, and the scheduler has no parameters",
    "max_sequence_length": "512: Flux2KleinKVPipeline pads every prompt to max_sequence_length=512",
}

_FLUX2 = dict(patch_size=1, in_channels=128, mlp_ratio=3.0, axes_dims_rope=(32, 32, 32, 32), rope_theta=2000,
              timestep_guidance_channels=256, eps=1e-6, guidance_embeds=False, attention_head_dim=128)
_QWEN3 = dict(num_hidden_layers=36, num_attention_heads=32, num_key_value_heads=8, head_dim=128, vocab_size=151936)
_SCHEDULER = dict(use_dynamic_shifting=True, base_shift=0.5, max_shift=1.15, base_image_seq_len=256,
                  max_image_seq_len=4096, shift=3.0)


@dataclass(frozen=True)
class KleinShape:
    name: str
    transformer: Mapping[str, Any]  # Flux2Transformer2DModel config, every block
    vae: Mapping[str, Any]  # AutoencoderKLFlux2 config
    text_encoder: Mapping[str, Any]  # Qwen3Config of the cloud's text encoder (counted, never built)
    text_encoder_name: str
    resolution: int = 512
    max_sequence_length: int = 512
    scheduler: Mapping[str, Any] = field(default_factory=lambda: dict(_SCHEDULER))

    @property
    def double_blocks(self) -> int:
        return int(self.transformer["num_layers"])

    @property
    def single_blocks(self) -> int:
        return int(self.transformer["num_single_layers"])

    @property
    def blocks(self) -> int:
        return self.double_blocks + self.single_blocks

    @property
    def heads(self) -> int:
        return int(self.transformer["num_attention_heads"])

    @property
    def head_dim(self) -> int:
        return int(self.transformer["attention_head_dim"])

    @property
    def pixels_per_token(self) -> int:
        """The VAE's downsampling (2 per level after the first) times FLUX.2's 2x2 patchify."""
        return 2 ** (len(self.vae["block_out_channels"]) - 1) * 2

    def tokens(self, resolution: int) -> int:
        """Reference (and image) tokens of a square ``resolution`` image: ``(resolution / 16)^2``."""
        if resolution % self.pixels_per_token:
            raise ModelError(f"{self.name}: resolution {resolution} is not a multiple of {self.pixels_per_token}")
        return (resolution // self.pixels_per_token) ** 2

    def kv_bytes_per_block(self, resolution: int, bytes_per_value: int = 2) -> int:
        """One block's reference K and V: ``2 x tokens x heads x head_dim x bytes`` (fp16: 2 bytes)."""
        return 2 * self.tokens(resolution) * self.heads * self.head_dim * bytes_per_value

    def split(self, blocks: int | None) -> tuple[int, int]:
        """The double and single blocks a ``blocks``-block build keeps: the whole model for None,
        else at least one of each kind (for n >= 2), doubles in the full model's proportion."""
        if blocks is None:
            return self.double_blocks, self.single_blocks
        if not 1 <= blocks <= self.blocks:
            raise ModelError(f"{self.name}: blocks must be in [1, {self.blocks}], got {blocks}")
        if blocks == 1:
            return 1, 0
        double = min(max(1, round(blocks * self.double_blocks / self.blocks)), self.double_blocks, blocks - 1)
        return double, blocks - double

    def transformer_config(self, blocks: int | None = None) -> dict[str, Any]:
        double, single = self.split(blocks)
        return {**self.transformer, "num_layers": double, "num_single_layers": single}


def _klein(name: str, double: int, single: int, heads: int, encoder_hidden: int, encoder_mlp: int,
           tied: bool, encoder_name: str) -> KleinShape:
    return KleinShape(
        name=name,
        transformer={**_FLUX2, "num_layers": double, "num_single_layers": single, "num_attention_heads": heads,
                     "joint_attention_dim": 3 * encoder_hidden},
        vae=dict(block_out_channels=(128, 256, 512, 512), latent_channels=32, layers_per_block=2, norm_num_groups=32),
        text_encoder={**_QWEN3, "hidden_size": encoder_hidden, "intermediate_size": encoder_mlp,
                      "tie_word_embeddings": tied},
        text_encoder_name=encoder_name,
    )


KLEIN_4B = _klein("klein-4b-shape", 5, 20, 24, 2560, 9728, True, "Qwen3-4B")
KLEIN_9B = _klein("klein-9b-shape", 8, 24, 32, 4096, 12288, False, "Qwen3-8B")
#: klein 4B's block structure, head_dim and token counts at a sixth of its width, with a small VAE:
#: small enough to run whole here, to check the per-block extrapolation against.
KLEIN_CHECK = KleinShape(
    name="klein-check-shape",
    transformer={**KLEIN_4B.transformer, "num_attention_heads": 4},
    vae=dict(block_out_channels=(8, 16, 32, 32), latent_channels=32, layers_per_block=1, norm_num_groups=8),
    text_encoder=KLEIN_4B.text_encoder,
    text_encoder_name="Qwen3-4B",
)
SHAPES: dict[str, KleinShape] = {s.name: s for s in (KLEIN_4B, KLEIN_9B, KLEIN_CHECK)}


def _random_embeds(prompt: str, length: int, width: int) -> np.ndarray:
    seed = int.from_bytes(hashlib.sha256(prompt.encode()).digest()[:8], "little")
    return np.random.default_rng(seed).standard_normal((length, width), dtype=np.float32)


class KleinShapeAdapter(KleinAdapter):
    """A klein adapter on random weights with no text encoder: a prompt's embeddings are seeded
    random values of the shape the real text encoder gives (``max_sequence_length`` x
    ``joint_attention_dim``), so capture, replay and the stock pipeline all run."""

    def __init__(self, *, shape: KleinShape, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.shape = shape

    def _encode_prompt(self, prompt: str) -> np.ndarray:
        return _random_embeds(prompt, self.max_sequence_length, self.model.config.joint_attention_dim)


def build_adapter(shape: KleinShape, *, blocks: int | None = None, dtype: torch.dtype = torch.float32,
                  seed: int = 0, init_gain: float = 1.0, resolution: int | None = None) -> KleinShapeAdapter:
    """``shape`` with seeded random weights; ``blocks`` keeps only that many blocks (:meth:`KleinShape.split`)."""
    from diffusers import FlowMatchEulerDiscreteScheduler
    from diffusers.models.autoencoders.autoencoder_kl_flux2 import AutoencoderKLFlux2
    from diffusers.models.transformers.transformer_flux2 import Flux2Transformer2DModel

    from sakura.platform.models.seeding import seed_weights

    transformer = Flux2Transformer2DModel(**shape.transformer_config(blocks))
    seed_weights(transformer, seed, gain=init_gain)
    vae = AutoencoderKLFlux2(**shape.vae, sample_size=resolution or shape.resolution).eval()
    seed_weights(vae, seed + 1)
    transformer = (transformer if dtype == torch.float32 else transformer.to(dtype)).eval()
    scheduler = FlowMatchEulerDiscreteScheduler(**shape.scheduler)
    # The stock pipeline without its text encoder (what prepares reference latents and runs the
    # unmodified __call__ on given prompt embeddings); its module needs transformers, which a
    # phone does not have: there the adapter replays only, like a pipeline folder loaded for it.
    pipe = None
    if importlib.util.find_spec("transformers") is not None:
        from diffusers import Flux2KleinKVPipeline

        pipe = Flux2KleinKVPipeline(scheduler=scheduler, vae=vae, text_encoder=None, tokenizer=None,
                                    transformer=transformer)
    name = shape.name if blocks is None else f"{shape.name}[blocks={blocks}]"
    return KleinShapeAdapter(shape=shape, transformer=transformer, vae=vae, scheduler=scheduler, pipe=pipe, name=name,
                             resolution=resolution or shape.resolution, max_sequence_length=shape.max_sequence_length)


def named_builder(shape: KleinShape) -> Callable[[Any, torch.dtype], KleinShapeAdapter]:
    """The registry's ``NamedModel.build`` for a shape: the whole model, at the spec's seed and resolution."""

    def build(spec: Any, dtype: torch.dtype) -> KleinShapeAdapter:
        return build_adapter(shape, dtype=dtype, seed=spec.seed, init_gain=spec.init_gain, resolution=spec.resolution)

    return build


#: The registry's builder for ``klein-4b-shape`` (named there as ``"module:function"``).
build_klein_4b = named_builder(KLEIN_4B)


def parameter_counts(shape: KleinShape) -> dict[str, int]:
    """Parameters of the transformer (every block), the VAE and the text encoder, counted on the
    meta device (nothing is allocated). Cloud side: it imports ``transformers``."""
    from diffusers.models.autoencoders.autoencoder_kl_flux2 import AutoencoderKLFlux2
    from diffusers.models.transformers.transformer_flux2 import Flux2Transformer2DModel
    from transformers import Qwen3Config, Qwen3ForCausalLM

    def count(make: Callable[[], torch.nn.Module]) -> int:
        with torch.device("meta"):
            return sum(p.numel() for p in make().parameters())

    return {"transformer": count(lambda: Flux2Transformer2DModel(**shape.transformer)),
            "vae": count(lambda: AutoencoderKLFlux2(**shape.vae)),
            "text_encoder": count(lambda: Qwen3ForCausalLM(Qwen3Config(**shape.text_encoder)))}
