"""Calibration of the FLOP compute model on this machine: predicted vs measured per-block time.

Analytic workloads predict a block's compute as its FLOPs (:func:`~sakura.evaluation.flops.count_flops`)
over one effective throughput per device. Checked here on the real diffusers blocks (FLUX.2 double
and single, FLUX.1 double and single, SD3.5's ``JointTransformerBlock`` with and without dual
attention), each in a whole transformer with seeded random weights, fp32, at several sizes.

The throughput is *effective*, defined like the phones' (:mod:`sakura.evaluation.profiles`):
counted FLOPs over measured seconds of real diffusion-transformer work (norms, rotary embeddings,
activations and memory traffic included, as they are in a published per-call time), not a GEMM
peak. It is fitted on :data:`FIT_CASE` only (FLOPs of its blocks / their seconds) and then
predicts every :data:`CHECK_CASES` block, none of which it saw.

Each block is timed by :class:`~sakura.evaluation.block_costs.BlockTimer` hooks,
the fastest of the repeats, the cases taking turns so that another process's burst does not hit
every repeat of one case. Two settings: one thread on the process's CPU clock (the core-seconds
the block took: what the test checks, since it does not move when other processes share the
cores), and torch's default threads on the wall clock (what measured workloads ran at: it gives
the ``this-machine`` profile's throughput, and needs a quiet machine). FLOPs are counted on a
meta-device twin of the same configuration: on CPU tensors torch's counter does not register the
CPU attention kernel (``_scaled_dot_product_flash_attention_for_cpu``) and counts no attention;
on meta, attention runs the math path and is counted as its two batched products.

Sizes: widths 256-1536 and 512-1536 tokens in :data:`CHECK_CASES`, phone-scale blocks (klein 4B's
and FLUX.1's 3072 wide) in :data:`LARGE_CASES`, for the bench only. The narrowest blocks are
predicted worst: their element-wise work is a larger share.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import torch

from sakura.evaluation.flops import count_flops

HEAD_DIM = {"flux2": 128, "flux1": 128, "sd3": 64}
_EMBED = 64  # latent channels and text/pooled widths fed to the embedders (outside the timed blocks)


@dataclass(frozen=True)
class BlockCase:
    """One transformer: ``heads`` x the family's head width, and its token counts (reference tokens
    join the image stream, as FLUX.1 Kontext and the klein capture pass put them)."""

    family: str
    heads: int
    image_tokens: int
    text_tokens: int
    reference_tokens: int = 0

    @property
    def width(self) -> int:
        return self.heads * HEAD_DIM[self.family]

    @property
    def tokens(self) -> int:
        return self.image_tokens + self.reference_tokens + self.text_tokens

    @property
    def name(self) -> str:
        ref = f"+{self.reference_tokens}ref" if self.reference_tokens else ""
        return f"{self.family} {self.width}w {self.image_tokens}img{ref}+{self.text_tokens}txt"


#: The one case the throughput is fitted on (FLUX.2 at 768 wide, 1,280 tokens).
FIT_CASE = BlockCase("flux2", 6, 768, 256, 256)
#: Cases predicted from that throughput: three sizes of each family, none the fitted one.
CHECK_CASES: tuple[BlockCase, ...] = (
    BlockCase("flux2", 2, 1024, 256),
    BlockCase("flux2", 4, 512, 256, 512),
    BlockCase("flux2", 8, 512, 128),
    BlockCase("flux1", 2, 512, 128),
    BlockCase("flux1", 4, 1024, 512),
    BlockCase("flux1", 8, 512, 256, 256),
    BlockCase("sd3", 8, 1024, 154, 256),
    BlockCase("sd3", 12, 512, 154),
    BlockCase("sd3", 24, 384, 128),
)
#: Phone-scale widths (the bench only): klein 4B's and FLUX.1's 3072, SD3.5 medium's 1536 with
#: its 333 text tokens (77 CLIP + 256 T5) at 512x512.
LARGE_CASES: tuple[BlockCase, ...] = (
    BlockCase("flux2", 24, 512, 256),
    BlockCase("flux1", 24, 256, 128, 256),
    BlockCase("sd3", 24, 1024, 333),
)


@dataclass(frozen=True)
class BlockTime:
    """One block of one case: its counted FLOPs and its fastest measured seconds."""

    case: BlockCase
    kind: str
    flops: float
    seconds: float

    def predicted_s(self, flops_per_s: float) -> float:
        return self.flops / flops_per_s

    def error(self, flops_per_s: float) -> float:
        """(predicted - measured) / measured."""
        return self.predicted_s(flops_per_s) / self.seconds - 1.0


@dataclass
class _Built:
    model: torch.nn.Module
    inputs: dict[str, Any]
    blocks: dict[str, str]  # kind -> the block's path in the model


def _ids(tokens: int, axes: int) -> torch.Tensor:
    """Rotary position ids of ``tokens`` image tokens in 32-wide rows."""
    ids = torch.zeros(tokens, axes)
    ids[:, 1], ids[:, 2] = torch.arange(tokens) // 32, torch.arange(tokens) % 32
    return ids


def _text(case: BlockCase) -> torch.Tensor:
    return torch.randn(1, case.text_tokens, _EMBED)


def _flux2(case: BlockCase) -> _Built:
    from diffusers.models import Flux2Transformer2DModel  # typed as the class (the top-level name is not)

    image = case.image_tokens + case.reference_tokens
    model = Flux2Transformer2DModel(patch_size=1, in_channels=_EMBED, num_layers=1, num_single_layers=1,
                                    attention_head_dim=HEAD_DIM["flux2"], num_attention_heads=case.heads,
                                    joint_attention_dim=_EMBED, guidance_embeds=False)
    inputs = dict(hidden_states=torch.randn(1, image, _EMBED), encoder_hidden_states=_text(case),
                  timestep=torch.tensor([0.5]), img_ids=_ids(image, 4), txt_ids=torch.zeros(case.text_tokens, 4))
    return _Built(model, inputs, {"double": "transformer_blocks.0", "single": "single_transformer_blocks.0"})


def _flux1(case: BlockCase) -> _Built:
    from diffusers.models import FluxTransformer2DModel

    image = case.image_tokens + case.reference_tokens
    model = FluxTransformer2DModel(patch_size=1, in_channels=_EMBED, num_layers=1, num_single_layers=1,
                                   attention_head_dim=HEAD_DIM["flux1"], num_attention_heads=case.heads,
                                   joint_attention_dim=_EMBED, pooled_projection_dim=_EMBED, guidance_embeds=True)
    inputs = dict(hidden_states=torch.randn(1, image, _EMBED), encoder_hidden_states=_text(case),
                  pooled_projections=torch.randn(1, _EMBED), timestep=torch.tensor([0.5]),
                  guidance=torch.tensor([2.5]), img_ids=_ids(image, 3), txt_ids=torch.zeros(case.text_tokens, 3))
    return _Built(model, inputs, {"double": "transformer_blocks.0", "single": "single_transformer_blocks.0"})


def _sd3(case: BlockCase) -> _Built:
    """SD3.5 medium's block kinds: a dual-attention block (its first 13 layers) and a plain one;
    the last block (context pre-only) is not timed. Image and reference tokens form 32-wide rows."""
    from diffusers.models import SD3Transformer2DModel

    rows = (case.image_tokens + case.reference_tokens) // 32
    model = SD3Transformer2DModel(sample_size=64, patch_size=2, in_channels=16, num_layers=3,
                                  attention_head_dim=HEAD_DIM["sd3"], num_attention_heads=case.heads,
                                  joint_attention_dim=_EMBED, caption_projection_dim=case.width,
                                  pooled_projection_dim=_EMBED, out_channels=16, pos_embed_max_size=max(rows, 32),
                                  dual_attention_layers=(0,), qk_norm="rms_norm")
    inputs = dict(hidden_states=torch.randn(1, 16, 2 * rows, 64), encoder_hidden_states=_text(case),
                  pooled_projections=torch.randn(1, _EMBED), timestep=torch.tensor([500.0]))
    return _Built(model, inputs, {"dual": "transformer_blocks.0", "joint": "transformer_blocks.1"})


_BUILDERS: dict[str, Callable[[BlockCase], _Built]] = {"flux2": _flux2, "flux1": _flux1, "sd3": _sd3}


def build(case: BlockCase, *, device: str = "cpu", seed: int = 0) -> _Built:
    """The case's transformer (eval mode) and inputs on ``device``, its weights seeded (on CPU)."""
    from diffusers.models.modeling_utils import no_init_weights

    with torch.random.fork_rng(devices=[]), torch.device(device), no_init_weights():
        torch.manual_seed(seed)
        built = _BUILDERS[case.family](case)
    if device != "meta":
        _seed_in_place(built.model, seed)
    built.model.eval()
    return built


def _seed_in_place(model: torch.nn.Module, seed: int) -> None:
    """Matrices ``U(-1/sqrt(fan_in), 1/sqrt(fan_in))`` (torch's default scale), biases small, norm
    scales 1, filled in place (a CPU kernel's time does not depend on the values, only that they
    are finite normal numbers; in place, building the largest case takes a second, not ten)."""
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, param in sorted(model.named_parameters()):
            if param.ndim >= 2:
                bound = param[0].numel() ** -0.5
                param.uniform_(-bound, bound, generator=g)
            elif name.endswith("bias"):
                param.uniform_(-0.02, 0.02, generator=g)
            else:
                param.fill_(1.0)


def block_flops(case: BlockCase) -> dict[str, float]:
    """FLOPs of each timed block of ``case``, counted on a meta-device twin (attention included)."""
    twin = build(case, device="meta")
    counted = count_flops(lambda: twin.model(**twin.inputs))
    return {kind: counted.under(path) for kind, path in twin.blocks.items()}


@contextlib.contextmanager
def fixed_threads(threads: int) -> Iterator[None]:
    """torch's intra-op threads and every BLAS/OpenMP pool at ``threads``, restored after."""
    from threadpoolctl import threadpool_limits

    before = torch.get_num_threads()
    torch.set_num_threads(threads)
    try:
        with threadpool_limits(limits=threads):
            yield
    finally:
        torch.set_num_threads(before)


def measure(cases: tuple[BlockCase, ...] | list[BlockCase], *, repeats: int = 5,
            threads: int | None = None, clock: str = "wall") -> list[BlockTime]:
    """Every block of every case: counted FLOPs and the fastest of ``repeats`` timed forwards (after
    one warm-up), the cases taking turns. ``threads`` defaults to torch's current count; ``clock``
    is ``wall`` or ``cpu`` (the process's CPU seconds, all threads: core-seconds)."""
    from sakura.evaluation.block_costs import BlockTimer

    flops = [block_flops(case) for case in cases]
    built = [build(case) for case in cases]
    timers = [BlockTimer({kind: [b.model.get_submodule(path)] for kind, path in b.blocks.items()}) for b in built]
    try:
        with fixed_threads(threads or torch.get_num_threads()), torch.no_grad():
            for round_ in range(repeats + 1):
                for b, timer in zip(built, timers):
                    timer.phase = "timed" if round_ else "warmup"
                    b.model(**b.inputs)
    finally:
        for timer in timers:
            timer.remove()
    return [BlockTime(case, kind, f[kind], timer.fastest(clock, "timed", kind))
            for case, f, b, timer in zip(cases, flops, built, timers) for kind in b.blocks]


def fit_flops_per_s(times: list[BlockTime]) -> float:
    """The effective throughput of ``times``: their FLOPs over their seconds."""
    return sum(t.flops for t in times) / sum(t.seconds for t in times)


def this_machine_flops_per_s(*, repeats: int = 5, threads: int | None = None) -> float:
    """This machine's effective throughput for diffusion-transformer blocks, fitted on :data:`FIT_CASE`."""
    return fit_flops_per_s(measure([FIT_CASE], repeats=repeats, threads=threads))
