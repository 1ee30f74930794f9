"""Named workloads: analytic geometry against the measured capture of the same architecture, the
analytic edit's timeline, and the codec rates it borrows from measured KV."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from sakura.evaluation.architectures import edit_flops, klein_architecture
from sakura.evaluation.geometry import ManifestWire
from sakura.evaluation.profiles import device_profile
from sakura.evaluation.workloads import WORKLOADS, Analytic, CodecRates, Measured, analytic_geometry, workload_spec
from sakura.platform.models.pipelines.klein_shapes import KLEIN_4B, KLEIN_CHECK

CAPTURE = Path(__file__).resolve().parents[3] / "bench" / "out" / "capture-klein-4b-shape.json"
#: The compute model's tolerance (issue 14: predicted vs measured per-block time within 25%).
TOLERANCE = 0.25


def _measured_blocks(part: dict) -> dict[str, tuple[float, int]]:
    """kind -> (fastest replay wall seconds of one built block, its K + V bytes at fp16)."""
    m = part["measurement"]
    return {kind: (min(m["seconds"]["wall"]["replay"][kind]), m["kv_bytes_fp16"][kind][0])
            for kind in ("double", "single")}


def _cases() -> list[tuple[str, object, int, dict]]:
    data = json.loads(CAPTURE.read_text())
    cases = [(f"klein-4b@{res}", klein_architecture(KLEIN_4B), int(res), data["resolutions"][res]["measurement"])
             for res in data["resolutions"]]
    check = data["check"]["part"]
    cases.append((f"klein-check@{check['resolution']}", klein_architecture(KLEIN_CHECK), check["resolution"],
                   check["measurement"]))
    return cases


@pytest.mark.parametrize("name, arch, resolution, measurement", _cases(), ids=[c[0] for c in _cases()])
def test_analytic_klein_blocks_equal_the_measured_capture(name, arch, resolution, measurement):
    """``bench/capture.py`` measured one double and one single block of each size on this CPU, as
    the stock pipeline's cached step (``bench/out/capture-klein-4b-shape.json``): the analytic KV
    bytes equal the captured ones exactly, and its compute (counted FLOPs over this machine's
    throughput, fitted on other blocks: ``calibration.FIT_CASE``) is within the tolerance."""
    flops = edit_flops(arch, reference=resolution, output=resolution, steps=1)
    per_s = device_profile("this-machine").flops_per_s
    doubles = arch.transformer["num_layers"]
    for kind, (seconds, kv_bytes) in _measured_blocks({"measurement": measurement}).items():
        block = 0 if kind == "double" else doubles
        assert flops.kv_bytes_per_block == kv_bytes, (name, kind)
        predicted = flops.cached[block] / per_s
        assert abs(predicted - seconds) / seconds <= TOLERANCE, (name, kind, predicted, seconds)


def _geometry(spec: Analytic, profile: str = "flagship-npu"):
    levels, cachegen = ["compact", "medium", "full"], ["cachegen-low", "cachegen-coarse", "cachegen-fine"]
    rates = CodecRates("test", {lv: 1 / (i + 2) for i, lv in enumerate(levels + cachegen)},
                       {lv: 1e-9 for lv in levels + cachegen}, ManifestWire(1500.0, 150.0, 1400.0, 40.0), "full")
    return analytic_geometry(spec, device_profile(profile), rates, levels, cachegen), rates


def test_a_kv_cached_edit_needs_each_block_once_and_the_stock_pipeline_adds_the_reference_pass():
    spec = WORKLOADS["klein-4b-ref512"]
    g, rates = _geometry(spec)
    f = edit_flops("klein-4b", reference=512, output=512, steps=4)
    per_s = device_profile("flagship-npu").flops_per_s
    assert g.shards == 25 and g.kv_cached and sum(g.raw_bytes) == 25 * 2 * 1024 * 3072 * 2
    assert g.sizes["medium"] == [round(g.raw_bytes[0] * rates.size_ratio["medium"])] * 25
    edit = f.vae_encode_photo + 4 * f.replay_step + f.vae_decode
    assert g.compute_s * per_s == pytest.approx(edit, rel=1e-9)
    assert g.gaps_s[:-1] == pytest.approx([c / per_s for c in f.cached[:-1]])  # block b needs shard b at step 0
    stock = (f.text_encode + f.vae_encode_reference + sum(f.reference)) / per_s
    assert g.ondevice_compute_s("on-device") - g.compute_s == pytest.approx(stock)
    assert g.ondevice_compute_s("on-device-uncached") - g.ondevice_compute_s("on-device") == pytest.approx(
        3 * sum(f.reference) / per_s)
    assert g.ondevice_compute_s("on-device-prepared") == pytest.approx(g.compute_s + sum(f.reference) / per_s)
    assert g.context_bytes == 512 * 7680 * 2 and g.prepared_bytes == g.context_bytes + 1024 * 128 * 2


def test_a_per_step_edit_needs_every_block_at_every_step():
    g, _ = _geometry(workload_spec("analytic:sd35-medium@512/512/2"))
    assert not g.kv_cached and g.shards == 2 * 24 and g.shards_per_step == 24
    assert g.ondevice_compute_s("on-device") == pytest.approx(g.ondevice_compute_s("on-device-uncached"))
    f, per_s = edit_flops("sd35-medium", reference=512, output=512, steps=2), device_profile("flagship-npu").flops_per_s
    assert g.gaps_s[22] == pytest.approx(f.cached[22] / per_s)
    # the step's last block, then the next step's embedders
    assert g.gaps_s[23] == pytest.approx((f.cached[23] + f.outside_per_step) / per_s)
    assert g.gaps_s[-1] == pytest.approx((f.cached[23] + f.vae_decode) / per_s)
    assert len(g.shard_compute_s) == g.shards


def test_codec_rates_come_from_measured_geometry(measured):
    _, g, _ = measured
    rates = CodecRates.from_geometries([g])
    assert rates.size_ratio["compact"] == pytest.approx(sum(g.sizes["compact"]) / sum(g.raw_bytes))
    # the lossless level is over the KV in its own dtype (the reference model's is fp32)
    assert g.kv_itemsize == 4
    assert rates.size_ratio["full"] == pytest.approx(sum(g.sizes["full"]) / sum(g.raw_bytes) / 2)
    assert rates.size_ratio["compact"] < rates.size_ratio["medium"] < rates.size_ratio["full"]


def test_workload_names_parse_and_unknown_ones_are_refused():
    assert workload_spec("reference") == Measured("reference")
    assert workload_spec("measured:bench-flux") == Measured("bench-flux")
    assert workload_spec("analytic:klein-9b@1024/512/4") == WORKLOADS["klein-9b-ref1024"]
    for bad in ("klein-4b", "analytic:klein-4b", "analytic:klein-4b@512/x/4", "nonsense:"):
        with pytest.raises(ValueError):
            workload_spec(bad)
    with pytest.raises(ValueError, match="unknown architecture"):
        edit_flops("gpt-5", reference=512, output=512, steps=4)
