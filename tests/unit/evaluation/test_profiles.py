"""Device profiles derive their throughput from their anchors; every number cites a source."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from sakura.evaluation.profiles import (
    DEFAULT_ANALYTIC_PROFILE,
    PROFILES,
    THIS_MACHINE_FIT_SECONDS,
    calibration_fit_flops,
    device_profile,
    sd15_unet_flops,
)


def test_the_profiles_and_their_sources():
    assert set(PROFILES) == {"flagship-npu", "flagship-gpu", "midrange", "this-machine"}
    assert DEFAULT_ANALYTIC_PROFILE in PROFILES
    for name, p in PROFILES.items():
        assert p.name == name and p.anchor.seconds > 0 and p.cpu_factor > 0
        assert p.sources and p.description and p.anchor.call
    assert PROFILES["this-machine"].cpu_factor == 1.0
    assert PROFILES["flagship-npu"].cpu_factor < PROFILES["flagship-gpu"].cpu_factor < PROFILES["midrange"].cpu_factor


def test_unknown_profile_is_a_value_error():
    with pytest.raises(ValueError, match="unknown device profile"):
        device_profile("flagship-2025")


def test_npu_profiles_derive_from_one_sd15_unet_call():
    flops = sd15_unet_flops()
    assert 7.9e11 < flops < 8.2e11  # 803 GFLOP: batch 1, 64x64 latents, 77 tokens
    npu, mid = device_profile("flagship-npu"), device_profile("midrange")
    assert npu.flops_per_s == pytest.approx(flops / 0.044887)
    assert mid.flops_per_s == pytest.approx(flops / 0.170697)


def test_this_machine_derives_from_its_calibration_and_scales_the_others():
    here = device_profile("this-machine")
    assert here.flops_per_s == pytest.approx(calibration_fit_flops() / THIS_MACHINE_FIT_SECONDS)
    assert here.compute_factor == 1.0
    npu = device_profile("flagship-npu")
    assert npu.compute_factor == pytest.approx(here.flops_per_s / npu.flops_per_s) and npu.compute_factor < 1


#: The calibration run the ``this-machine`` constant was taken from, kept when later runs replace
#: ``bench/out/calibration.json`` (the constant is not refitted at each rerun: see ``profiles``).
CALIBRATION_SOURCE = Path(__file__).resolve().parents[3] / "bench" / "out" / "history" / "calibration.json@5e2327d"


def test_this_machine_constant_is_the_fit_of_its_kept_calibration_run():
    fitted = json.loads(CALIBRATION_SOURCE.read_text())["this_machine_flops_per_s"]
    assert calibration_fit_flops() / THIS_MACHINE_FIT_SECONDS == pytest.approx(fitted, rel=1e-4)


@pytest.mark.slow
def test_flagship_gpu_derives_from_the_klein_edit():
    from sakura.evaluation.architectures import edit_flops

    e = edit_flops("klein-4b", reference=512, output=512, steps=4)
    step = e.outside_per_step + sum(e.cached) + sum(e.reference)
    flops = e.text_encode + e.vae_encode_reference + 4 * step + e.vae_decode
    assert device_profile("flagship-gpu").flops_per_s == pytest.approx(flops / 67.0)
    assert 0.5e12 < flops / 67.0 < 3e12


def test_importing_profiles_counts_nothing():
    code = "import sys, sakura.evaluation.profiles; assert 'diffusers' not in sys.modules, 'diffusers imported'"
    subprocess.run([sys.executable, "-c", code], check=True)


def test_a_measured_edit_scales_compute_and_decode_separately():
    from sakura.evaluation.geometry import EditGeometry

    g = EditGeometry(template="t", model="m", steps=2, template_tokens=4, request_tokens=4, levels=["full"],
                     cachegen_levels=[], sizes={"full": [10]}, decode_s={"full": [1.0]}, weights=[1.0],
                     startup_s=1.0, gaps_s=[2.0], ondevice_s={1: 4.0}, replay_s={1: 3.0})
    npu = device_profile("flagship-npu")
    phone = g.scaled(npu.compute_factor, decode_factor=npu.cpu_factor)
    assert phone.compute_s == pytest.approx(3.0 * npu.compute_factor)
    assert phone.decode_s["full"] == [pytest.approx(npu.cpu_factor)]
    assert phone.ondevice_s[1] == pytest.approx(4.0 * npu.compute_factor)
    assert g.scaled(2.0).decode_s["full"] == [2.0]  # one number scales both, as before
