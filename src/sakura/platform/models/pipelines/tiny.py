"""Tiny pipeline folders built offline from configs with seeded weights (tests, ``sakura models
export``): the real classes at a few hundred thousand parameters, so anyone can try ``--model DIR``
without a download. Cloud side only: it needs ``transformers`` and ``tokenizers``.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import torch

from sakura.platform.models.pipelines.settings import SETTINGS
from sakura.platform.models.pipelines.tiny_clip_t5 import CORPUS, add_merges, tiny_kontext, tiny_sd3_pipeline

_CHAT = ("{% for m in messages %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}<|im_end|>\n{% endfor %}"
         "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}")


def _qwen_tokenizer():
    """Qwen's byte-level BPE with merges made from each corpus word (with and without its leading
    space), left to right. Made, not trained: the ``tokenizers`` trainer breaks ties between
    equally frequent pairs differently from one process to the next, and an export must be
    reproducible."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers
    from transformers import Qwen2TokenizerFast

    special = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
    vocab = {token: i for i, token in enumerate([*special, *sorted(pre_tokenizers.ByteLevel.alphabet())])}
    words = sorted({word for line in CORPUS for word in line.split()})
    # U+0120: ByteLevel's space
    merges = add_merges(vocab, (parts for word in words for parts in (list(word), ["\u0120", *word])))
    bpe = Tokenizer(models.BPE(vocab=vocab, merges=merges, unk_token=None))
    bpe.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    bpe.decoder = decoders.ByteLevel()
    bpe.add_special_tokens(special)
    return Qwen2TokenizerFast(tokenizer_object=bpe, eos_token="<|im_end|>", pad_token="<|endoftext|>",
                              chat_template=_CHAT)


def tiny_klein(out: Path, seed: int = 0) -> Path:
    """A FLUX.2 [klein] KV pipeline: 2 double + 2 single blocks of 2 heads x 16, a 3-layer Qwen3
    text encoder, a two-level VAE; 64x64 images, 256 reference tokens."""
    from diffusers.models.autoencoders.autoencoder_kl_flux2 import AutoencoderKLFlux2
    from diffusers.models.transformers.transformer_flux2 import Flux2Transformer2DModel
    from diffusers.pipelines.flux2.pipeline_flux2_klein_kv import Flux2KleinKVPipeline
    from diffusers.schedulers.scheduling_flow_match_euler_discrete import FlowMatchEulerDiscreteScheduler
    from transformers import Qwen3Config, Qwen3ForCausalLM

    torch.manual_seed(seed)
    tokenizer = _qwen_tokenizer()
    encoder = Qwen3ForCausalLM(Qwen3Config(vocab_size=len(tokenizer), hidden_size=32, intermediate_size=64,
                                           num_hidden_layers=3, num_attention_heads=2, num_key_value_heads=1,
                                           head_dim=16, max_position_embeddings=128)).eval()
    layers = (1, 2, 3)
    transformer = Flux2Transformer2DModel(patch_size=1, in_channels=16, num_layers=2, num_single_layers=2,
                                          attention_head_dim=16, num_attention_heads=2,
                                          joint_attention_dim=len(layers) * 32, timestep_guidance_channels=32,
                                          axes_dims_rope=(4, 4, 4, 4), guidance_embeds=False)
    vae = AutoencoderKLFlux2(block_out_channels=(8, 16), down_block_types=("DownEncoderBlock2D",) * 2,
                             up_block_types=("UpDecoderBlock2D",) * 2, layers_per_block=1, latent_channels=4,
                             norm_num_groups=4, sample_size=64)
    scheduler = FlowMatchEulerDiscreteScheduler(use_dynamic_shifting=True, base_shift=0.5, max_shift=1.15,
                                                base_image_seq_len=256, max_image_seq_len=4096, shift=3.0)
    pipe = Flux2KleinKVPipeline(scheduler=scheduler, vae=vae, text_encoder=encoder, tokenizer=tokenizer,
                                transformer=transformer)
    pipe.save_pretrained(out)
    settings = {"resolution": 64, "max_sequence_length": 32, "text_encoder_out_layers": list(layers)}
    (out / SETTINGS).write_text(json.dumps(settings, indent=1))
    return out


TINY_PIPELINES: dict[str, Callable[[Path], Path]] = {"tiny-klein": tiny_klein, "tiny-kontext": tiny_kontext,
                                                     "tiny-sd3-pipeline": tiny_sd3_pipeline}


def export(name: str, out: str | Path) -> Path:
    """Write the tiny pipeline ``name`` into the folder ``out`` (created; must be empty or new)."""
    from sakura.platform.models.pipelines.folder import PipelineError

    if name not in TINY_PIPELINES:
        raise PipelineError(f"no tiny pipeline {name!r}; choose one of {sorted(TINY_PIPELINES)}")
    out = Path(out).expanduser()
    if out.exists() and any(out.iterdir()):
        raise PipelineError(f"{out}: not empty; export into a new folder")
    out.mkdir(parents=True, exist_ok=True)
    return TINY_PIPELINES[name](out)
