"""Device profiles: how fast a phone computes a diffusion model, and how fast its CPU decodes KV.

A profile's ``flops_per_s`` is an *effective* dense throughput: the FLOPs of one published call
(counted by :func:`sakura.evaluation.flops.count_flops` on a meta-device model built from the
model's real config) over its published seconds. Analytic workloads divide a part's FLOPs by it.
The anchors and the FLOPs assumed for each:

* ``flagship-npu`` (the default for analytic workloads): Stable Diffusion 1.5's UNet, w8a16, on
  the Snapdragon 8 Elite Gen 5's Hexagon NPU, 44.887 ms per call (Qualcomm AI Hub); one call at
  batch 1, 64x64 latents, 77 text tokens is 803.3 GFLOP (:func:`sd15_unet_flops`): 17.9 TFLOP/s.
* ``flagship-gpu``: a community GGML port of FLUX.2 [klein] 4B on the Snapdragon 8 Elite's
  Adreno 830, ~67 s for a 4-step 512x512 edit with one 512x512 reference; the edit is 78.5 TFLOP
  (:func:`klein_edit_flops`, from ``edit_flops("klein-4b", reference=512, output=512, steps=4)``,
  the reference tokens computed at every step): 1.17 TFLOP/s.
* ``midrange``: the same UNet on the Snapdragon 7 Gen 4's NPU, 170.697 ms (Qualcomm AI Hub):
  803.3 GFLOP, 4.7 TFLOP/s.
* ``this-machine``: two FLUX.2 blocks timed here at torch's default threads, 49.3 GFLOP in
  0.265 s (:mod:`sakura.evaluation.calibration`, the run kept as
  ``bench/out/history/calibration.json@5e2327d``): 0.186 TFLOP/s.

One throughput per device is an estimate: a VAE's convolutions, a text encoder and a transformer
block run at different efficiencies, an int8-weight NPU operation is cheaper than an fp16 one, and
sustained runs throttle. ``cpu_factor`` is separate: what this machine's KV decode times are
multiplied by on the phone's CPU (the codec runs there; <1: faster), a ratio of Geekbench 6
multi-core scores. Measured workloads scale their compute by ``compute_factor`` (this machine's
throughput over the profile's) and their decoding by ``cpu_factor``.
Every number's source is in the profile's ``sources``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from functools import lru_cache

#: Geekbench 6 multi-core of this machine (2 vCPUs of an AMD EPYC): an estimate, no Geekbench run
#: was possible here. It was set for Zen 3 cores; lscpu reports CPU family 26 (Zen 5), which
#: would score higher and make every phone's ``cpu_factor`` larger.
THIS_MACHINE_GB6 = 2300.0
#: Wall seconds of this machine's two fitted blocks (``calibration.FIT_CASE``, the fastest of 5 each)
#: at torch's default threads (2), measured by ``python bench/calibrate_compute.py --json
#: bench/out/calibration.json --repeats 5`` (load average 0.3 at its start): 186.4 GFLOP/s. That run
#: is kept as ``bench/out/history/calibration.json@5e2327d``. A rerun of the bench does not refit it:
#: every live-scaled figure is measured against this constant, and reruns on this shared host
#: differ by noise (``docs/evaluation.md`` quotes the latest against it).
THIS_MACHINE_FIT_SECONDS = 0.26457
#: The profile analytic workloads use unless told otherwise.
DEFAULT_ANALYTIC_PROFILE = "flagship-npu"

_AI_HUB = ("Qualcomm AI Hub Models, qai_hub_models/models/stable_diffusion_v1_5/perf.yaml "
           "(github.com/quic/ai-hub-models, commit 052dc1f): the w8a16 unet as a QNN context binary on the NPU, "
           "{ms} ms per call on '{device}' (also 44.887 ms on the Snapdragon 8 Elite Gen 5 QRD, 62.141 ms on the "
           "Galaxy S25 / 8 Elite, 76.67 ms on the Galaxy S24 / 8 Gen 3, 170.697 ms on the Snapdragon 7 Gen 4 QRD); "
           "its input (model.py, UnetQuantizable.get_input_spec): latent (1, 4, 64, 64), text_emb (1, 77, 768). "
           "FLOPs: 803.3 G per call, count_flops on diffusers' UNet2DConditionModel built on meta from SD 1.5's "
           "unet/config.json (SD15_UNET_CONFIG; 859.5 M parameters, as the checkpoint). w8a16 means int8 weights "
           "and int16 activations: its FLOP is a cheaper operation than an fp16 one. ")


@dataclass(frozen=True)
class Anchor:
    """One timed call: what it was, its seconds, and its FLOPs (counted when first asked)."""

    call: str
    seconds: float
    flops: Callable[[], float]


@dataclass(frozen=True)
class DeviceProfile:
    name: str
    anchor: Anchor
    cpu_factor: float  # this machine's KV decode seconds x this = the phone CPU's (<1: faster)
    sources: str
    description: str

    @property
    def flops_per_s(self) -> float:
        """Effective dense throughput: the anchor's FLOPs over its seconds."""
        return self.anchor.flops() / self.anchor.seconds

    @property
    def compute_factor(self) -> float:
        """This machine's compute seconds x this = the device's (<1: faster): the throughputs' ratio."""
        return PROFILES["this-machine"].flops_per_s / self.flops_per_s


#: Stable Diffusion 1.5's UNet (runwayml/stable-diffusion-v1-5, unet/config.json).
SD15_UNET_CONFIG: dict = dict(
    sample_size=64, in_channels=4, out_channels=4, layers_per_block=2, block_out_channels=(320, 640, 1280, 1280),
    cross_attention_dim=768, attention_head_dim=8,
    down_block_types=("CrossAttnDownBlock2D",) * 3 + ("DownBlock2D",),
    up_block_types=("UpBlock2D",) + ("CrossAttnUpBlock2D",) * 3)


@lru_cache(maxsize=1)
def sd15_unet_flops() -> float:
    """One SD 1.5 UNet call as Qualcomm AI Hub times it: batch 1, 64x64 latents, 77 text tokens."""
    import torch
    from diffusers.models import UNet2DConditionModel  # typed as the class (the top-level name is not)

    from sakura.evaluation.flops import count_flops

    with torch.device("meta"):
        unet = UNet2DConditionModel(**SD15_UNET_CONFIG).eval()
        latent, timestep, text = torch.zeros(1, 4, 64, 64), torch.ones(1), torch.zeros(1, 77, 768)
    return count_flops(lambda: unet(latent, timestep, text)).total


@lru_cache(maxsize=1)
def klein_edit_flops() -> float:
    """A 4-step 512x512 klein 4B edit with one 512x512 reference, without a reference KV cache:
    text encode, the reference's VAE encode, four steps of every block over all tokens, VAE decode."""
    from sakura.evaluation.architectures import edit_flops

    e = edit_flops("klein-4b", reference=512, output=512, steps=4)
    step = e.outside_per_step + sum(e.cached) + sum(e.reference)
    return e.text_encode + e.vae_encode_reference + e.steps * step + e.vae_decode


@lru_cache(maxsize=1)
def calibration_fit_flops() -> float:
    """FLOPs of the calibration's fitted blocks (``calibration.FIT_CASE``), counted on meta."""
    from sakura.evaluation.calibration import FIT_CASE, block_flops

    return sum(block_flops(FIT_CASE).values())


PROFILES: dict[str, DeviceProfile] = {p.name: p for p in (
    DeviceProfile(
        "flagship-npu", Anchor("SD 1.5 UNet, 512x512, w8a16, Hexagon NPU", 0.044887, sd15_unet_flops),
        cpu_factor=THIS_MACHINE_GB6 / 12383,
        sources=_AI_HUB.format(ms="44.887", device="Snapdragon 8 Elite Gen 5 QRD")
        + "CPU: Geekbench 6 multi-core 12,383 on Qualcomm's Snapdragon 8 Elite Gen 5 reference phone "
          "(Notebookcheck's run, as reported by smarti.news, 2025; Qualcomm's own 12,329 and Geekerwan's 12,546 "
          "bracket it); this machine 2,300 (estimate).",
        description="2025-26 flagship (Snapdragon 8 Elite Gen 5) running the model on its NPU"),
    DeviceProfile(
        "flagship-gpu", Anchor("FLUX.2 klein 4B edit, 512x512, one reference, 4 steps, GGML on Adreno 830", 67.0,
                               klein_edit_flops),
        cpu_factor=THIS_MACHINE_GB6 / 9932,
        sources="Issue 14: a community GGML port of FLUX.2 [klein] 4B on a Snapdragon 8 Elite phone's Adreno 830 "
                "takes ~67 s for a 512x512 edit with one reference and ~38 s for a 4-step 512x512 text-to-image "
                "(text encode + 4 steps + VAE decode); the original post is not among the pages stored here, so these "
                "are the issue's figures. FLOPs: 78.5 T per edit from architectures.edit_flops('klein-4b', "
                "reference=512, output=512, steps=4): Qwen3-4B text encode of 512 tokens 3.88 T, the reference's "
                "VAE encode 1.12 T, 4 steps of 17.74 T (1,024 image + 1,024 reference + 512 text tokens; assumed: "
                "the port has no reference KV cache, so the reference tokens are computed every step), VAE decode "
                "2.52 T. Cross-check: the text-to-image anchor gives 47.1 T / 38 s = 1.24 TFLOP/s, within 6% of the "
                "edit's 1.17; with a reference KV cache the edit would be 57.2 T (0.85 TFLOP/s), which it contradicts. "
                "CPU: Snapdragon 8 Elite, Geekbench 6 multi-core 9,932 (Geekbench 6.4 results as reported by "
                "shiftdelete.net, 2025); this machine 2,300 (estimate).",
        description="2025 flagship (Snapdragon 8 Elite) running a GGML port on its GPU"),
    DeviceProfile(
        "midrange", Anchor("SD 1.5 UNet, 512x512, w8a16, Hexagon NPU", 0.170697, sd15_unet_flops),
        cpu_factor=THIS_MACHINE_GB6 / 4145,
        sources=_AI_HUB.format(ms="170.697", device="Snapdragon 7 Gen 4 QRD")
        + "CPU: Geekbench multi-core 4,145 for the Honor 400 (Snapdragon 7 Gen 4) listing reported by "
          "mondoandroid.com (2025-05-16; the article does not name the Geekbench version: 6 assumed for a 2025 "
          "listing); this machine 2,300 (estimate).",
        description="2025 mid-range phone (Snapdragon 7 Gen 4) running the model on its NPU"),
    DeviceProfile(
        "this-machine", Anchor("calibration.FIT_CASE's two FLUX.2 blocks, fp32, torch's default threads",
                               THIS_MACHINE_FIT_SECONDS, calibration_fit_flops),
        cpu_factor=1.0,
        sources="Measured here: python bench/calibrate_compute.py --json bench/out/calibration.json (the fitted "
                "case's counted FLOPs over its blocks' fastest wall seconds at torch's default threads; the same "
                "throughput predicts the other calibrated blocks, see that file).",
        description="the 2-vCPU AMD EPYC VM the figures were measured on"),
)}


def device_profile(name: str) -> DeviceProfile:
    try:
        return PROFILES[name]
    except KeyError:
        raise ValueError(f"unknown device profile {name!r}; known: {sorted(PROFILES)}") from None
