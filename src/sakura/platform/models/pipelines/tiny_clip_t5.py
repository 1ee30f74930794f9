"""Tiny ``FluxKontextPipeline`` and ``StableDiffusion3Pipeline`` folders built offline (see
:mod:`.tiny`): CLIP and T5 text encoders of a few thousand parameters, their tokenizers made in
memory from the words of a handful of prompts (CLIP's byte-level BPE, T5's unigram), a two-level
VAE, seeded weights: every export is the same pipeline. Cloud side only: it needs ``transformers``.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import torch

from sakura.platform.models.pipelines.settings import SETTINGS

#: Words the tiny byte-level BPE has merges for (any text still encodes, byte by byte).
CORPUS = ["put this face on the person in the photo", "dress the person in this garment",
           "paint the photo in the style of this image", "a brick wall texture", "a cup of coffee"]
#: Tokens each CLIP tokenizer pads to (its ``model_max_length``) and T5 prompt tokens.
CLIP_TOKENS, T5_TOKENS = 16, 16
_WIDTH = 32  # text encoders' and transformers' widths


def _corpus() -> list[str]:
    return CORPUS


def _words() -> list[str]:
    return sorted({word for line in _corpus() for word in line.split()})


def _clip_tokenizer() -> Any:
    """CLIP's byte-level BPE (``</w>`` marks a word's end) with merges made from each prompt word,
    left to right. Made, not trained: the ``tokenizers`` trainer breaks ties between equally
    frequent pairs differently from one process to the next, and an export must be reproducible."""
    from tokenizers.pre_tokenizers import ByteLevel
    from transformers import CLIPTokenizer

    alphabet = sorted(ByteLevel.alphabet())
    vocab = {token: i for i, token in enumerate(["<|startoftext|>", "<|endoftext|>", *alphabet,
                                                 *(char + "</w>" for char in alphabet)])}
    merges = add_merges(vocab, ([*word[:-1], word[-1] + "</w>"] for word in _words()))
    # transformers annotates ``merges`` as strings; its BPE takes the (left, right) pairs too.
    return CLIPTokenizer(vocab=vocab, merges=merges, model_max_length=CLIP_TOKENS)  # type: ignore[arg-type]


def add_merges(vocab: dict[str, int], words: Iterable[list[str]]) -> list[tuple[str, str]]:
    """BPE merges that build each word (a list of symbols) left to right, adding every merged
    symbol to ``vocab``: how the tiny tokenizers are made instead of trained."""
    merges: list[tuple[str, str]] = []
    for parts in words:
        while len(parts) > 1:
            merged = parts[0] + parts[1]
            if merged not in vocab:
                vocab[merged] = len(vocab)
                merges.append((parts[0], parts[1]))
            parts = [merged, *parts[2:]]
    return merges


def _t5_tokenizer() -> Any:
    """T5's own normaliser and pre-tokeniser around a unigram vocabulary made from the prompts:
    ``<pad>``, ``</s>``, ``<unk>`` first (T5's ids), then each word, then single characters."""
    from transformers import T5Tokenizer

    words = _words()
    chars = sorted({char for word in words for char in word})
    vocab = [("<pad>", 0.0), ("</s>", 0.0), ("<unk>", 0.0), ("\u2581", -2.0)]
    vocab += [("\u2581" + word, -1.0) for word in words] + [(char, -5.0) for char in chars]
    return T5Tokenizer(vocab=vocab, extra_ids=0)


def _clip(tokenizer: Any, *, projection: bool, hidden: int) -> Any:
    from transformers import CLIPTextConfig, CLIPTextModel, CLIPTextModelWithProjection

    config = CLIPTextConfig(vocab_size=len(tokenizer), hidden_size=hidden, intermediate_size=2 * hidden,
                            num_hidden_layers=2, num_attention_heads=2, max_position_embeddings=CLIP_TOKENS,
                            projection_dim=hidden, bos_token_id=tokenizer.bos_token_id,
                            eos_token_id=tokenizer.eos_token_id, pad_token_id=tokenizer.pad_token_id)
    return (CLIPTextModelWithProjection if projection else CLIPTextModel)(config).eval()


def _t5(tokenizer: Any) -> Any:
    from transformers import T5Config, T5EncoderModel

    # T5Config's __init__ takes keywords besides its dataclass fields (decoder_start_token_id); its type does not.
    config = T5Config(  # type: ignore[call-arg]
        vocab_size=len(tokenizer), d_model=_WIDTH, d_kv=16, d_ff=2 * _WIDTH, num_layers=2, num_heads=2,
        relative_attention_num_buckets=8, relative_attention_max_distance=16,
        feed_forward_proj="gated-gelu", pad_token_id=0, eos_token_id=1, decoder_start_token_id=0,
    )
    return T5EncoderModel(config).eval()


def _vae(shift_factor: float, scaling_factor: float) -> Any:
    from diffusers import AutoencoderKL

    return AutoencoderKL(block_out_channels=(8, 16), down_block_types=("DownEncoderBlock2D",) * 2,
                         up_block_types=("UpDecoderBlock2D",) * 2, layers_per_block=1, latent_channels=4,
                         norm_num_groups=4, sample_size=64, shift_factor=shift_factor, scaling_factor=scaling_factor,
                         use_quant_conv=False, use_post_quant_conv=False)


def _seeded_transformer(model: torch.nn.Module, seed: int) -> torch.nn.Module:
    from sakura.platform.models.seeding import seed_weights

    seed_weights(model, seed, gain=2.0)  # random DiTs at the default scale barely look at the reference
    return model


def _save(pipe: Any, out: Path, settings: dict[str, Any]) -> Path:
    pipe.save_pretrained(out)
    (out / SETTINGS).write_text(json.dumps(settings, indent=1))
    return out


def tiny_kontext(out: Path, seed: int = 0) -> Path:
    """A FLUX.1 Kontext pipeline: 2 double + 2 single blocks of 2 heads x 16, a CLIP text model
    (pooled) and a T5 encoder of 2 layers each, a two-level VAE; 64x64 images, 256 reference tokens."""
    from diffusers import FlowMatchEulerDiscreteScheduler, FluxKontextPipeline
    from diffusers.models.transformers.transformer_flux import FluxTransformer2DModel

    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        clip_tok, t5_tok = _clip_tokenizer(), _t5_tokenizer()
        clip, t5 = _clip(clip_tok, projection=False, hidden=_WIDTH), _t5(t5_tok)
        vae = _vae(shift_factor=0.1159, scaling_factor=0.3611)
        transformer = _seeded_transformer(FluxTransformer2DModel(
            patch_size=1, in_channels=16, num_layers=2, num_single_layers=2, attention_head_dim=16,
            num_attention_heads=2, joint_attention_dim=_WIDTH, pooled_projection_dim=_WIDTH, guidance_embeds=True,
            axes_dims_rope=(4, 6, 6)), seed)
    scheduler = FlowMatchEulerDiscreteScheduler(use_dynamic_shifting=True, base_shift=0.5, max_shift=1.15,
                                                base_image_seq_len=256, max_image_seq_len=4096, shift=3.0)
    pipe = FluxKontextPipeline(scheduler=scheduler, vae=vae, text_encoder=clip, tokenizer=clip_tok, text_encoder_2=t5,
                               tokenizer_2=t5_tok, transformer=transformer)
    return _save(pipe, out, {"resolution": 64, "max_sequence_length": T5_TOKENS, "guidance_scale": 2.5})


def tiny_sd3_pipeline(out: Path, seed: int = 0) -> Path:
    """An SD3 pipeline: 2 joint blocks of 2 heads x 16, two CLIP text models with projection
    (16 wide each, side by side the T5's 32) and a T5 encoder, a two-level VAE; 64x64 images,
    256 image tokens."""
    from diffusers import FlowMatchEulerDiscreteScheduler, StableDiffusion3Pipeline
    from diffusers.models.transformers.transformer_sd3 import SD3Transformer2DModel

    half = _WIDTH // 2
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        clip_tok, clip_tok_2, t5_tok = _clip_tokenizer(), _clip_tokenizer(), _t5_tokenizer()
        clip, clip_2 = _clip(clip_tok, projection=True, hidden=half), _clip(clip_tok_2, projection=True, hidden=half)
        t5, vae = _t5(t5_tok), _vae(shift_factor=0.0609, scaling_factor=1.5305)
        transformer = _seeded_transformer(SD3Transformer2DModel(
            sample_size=32, patch_size=2, in_channels=4, num_layers=2, attention_head_dim=16, num_attention_heads=2,
            joint_attention_dim=_WIDTH, caption_projection_dim=_WIDTH, pooled_projection_dim=_WIDTH, out_channels=4,
            pos_embed_max_size=16), seed)
    pipe = StableDiffusion3Pipeline(transformer=transformer, scheduler=FlowMatchEulerDiscreteScheduler(shift=3.0),
                                    vae=vae, text_encoder=clip, tokenizer=clip_tok, text_encoder_2=clip_2,
                                    tokenizer_2=clip_tok_2, text_encoder_3=t5, tokenizer_3=t5_tok)
    return _save(pipe, out, {"resolution": 64, "max_sequence_length": T5_TOKENS, "clip_max_length": CLIP_TOKENS})
