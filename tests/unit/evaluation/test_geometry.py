"""Measured edit geometry and plan fidelity on a real built template."""

from __future__ import annotations

import json
import os

import pytest

from sakura.evaluation import IDENTICAL_DB, TOKEN_RATIOS
from sakura.evaluation.geometry import EditGeometry


def test_geometry_matches_the_manifest_and_is_plausible(measured):
    case, g, _ = measured
    assert g.shards == len(case.manifest.shards) == len(g.gaps_s)
    for level in case.manifest.levels:
        assert g.sizes[level.name] == [s.levels[level.name].length for s in case.manifest.shards]
    assert sum(g.sizes["compact"]) < sum(g.sizes["medium"]) < sum(g.sizes["full"])
    assert set(g.cachegen_levels) <= set(g.sizes) and all(d > 0 for d in g.decode_s["full"])
    # full - replay is the template's cost: milliseconds for this model, so two noisy timings on a
    # shared machine can tie; the on-device edit never costs less than the replay.
    assert g.compute_s > 0 and g.ondevice_s[1] >= g.replay_s[1] and g.reference_pass_s >= 0
    assert g.ondevice_compute_s("on-device-uncached") >= g.ondevice_compute_s("on-device")
    # more template tokens cost the stock edit more (the replay's own timings at each ratio are noisy
    # on a shared machine, so the template's share is what is compared)
    template_cost = [g.ondevice_s[r] - g.replay_s[r] for r in TOKEN_RATIOS]
    assert template_cost == sorted(template_cost)


def test_scaling_to_a_device_and_to_more_template_tokens(measured):
    _, g, _ = measured
    slow = g.scaled(2.0)
    assert slow.compute_s == pytest.approx(2 * g.compute_s) and slow.ondevice_s[4] == pytest.approx(2 * g.ondevice_s[4])
    assert slow.sizes == g.sizes
    wide = g.at_ratio(4)
    assert sum(wide.sizes["compact"]) == 4 * sum(g.sizes["compact"]) and wide.template_tokens == 4 * g.template_tokens
    assert wide.compute_s == pytest.approx(g.compute_s * g.replay_s[4] / g.replay_s[1])


def test_fidelity_of_plans(measured):
    _, g, fidelity = measured
    n = g.shards
    assert fidelity.psnr(("full",) * n) == IDENTICAL_DB and fidelity.psnr(()) == IDENTICAL_DB
    compact, medium = fidelity.psnr(("compact",) * n), fidelity.psnr(("medium",) * n)
    assert 20 < compact < medium < IDENTICAL_DB
    mixed = fidelity.psnr(("compact",) + ("full",) * (n - 1))
    assert compact < mixed
    assert fidelity.psnr(("cachegen-low",) * n) < fidelity.psnr(("cachegen-fine",) * n)


def test_a_manifests_shard_entries_are_measured_apart_from_its_header(measured):
    """A model with a hundred times the shards is charged a hundred times the shard entries, not a
    hundred times this manifest (its header is most of a six-shard manifest's bytes)."""
    case, g, _ = measured
    phone = case.manifest.for_phone()
    wire = g.manifest
    assert g.manifest_bytes == len(phone.to_wire())
    assert g.unhashed_manifest_bytes == len(phone.without_hashes().to_wire())
    assert 32 * len(phone.levels) <= wire.per_shard - wire.unhashed_per_shard  # a sha256 does not compress
    assert wire.per_shard < g.manifest_bytes / g.shards
    many = 24 * g.shards
    fresh = lambda s: {name: p.model_copy(update={"sha256": os.urandom(32).hex()})  # noqa: E731
                       for name, p in s.levels.items()}
    shards = [s.model_copy(update={"index": i, "levels": fresh(s)})
              for i, s in enumerate(phone.shards[j % g.shards] for j in range(many))]
    real = phone.model_copy(update={"shards": shards})
    assert wire.bytes(many) == pytest.approx(len(real.to_wire()), rel=0.1)
    assert wire.bytes(many, hashed=False) == pytest.approx(len(real.without_hashes().to_wire()), rel=0.1)
    assert g.shard_hashes_bytes == len(phone.shard_digests())


def test_a_geometry_survives_a_json_round_trip(measured):
    """What ``pinned_geometry`` keeps: every field back as it was measured, the per-ratio times'
    integer keys and the manifest's wire sizes included."""
    _, g, _ = measured
    assert EditGeometry.from_dict(json.loads(json.dumps(g.to_dict()))) == g
