"""EdgeSession end to end against the real shard API (uvicorn): exact output, cache, privacy,
errors and cancellation."""

from __future__ import annotations

import re
import threading

import numpy as np
import pytest

from sakura.edge_client import EdgeSession
from sakura.edge_client._objects import MADE_SOURCE
from sakura.edge_client.errors import EdgeError, EditCancelled, ServerError
from sakura.emulation import TraceLink
from sakura.emulation.traces import BandwidthTrace
from sakura.evaluation import psnr_db
from sakura.platform.errors import ModelError
from sakura.platform.images import load_image
from sakura.platform.layout import InvalidName
from tests.helpers import exact_edit
from tests.unit.conftest import TEMPLATES

PHOTO = "skimage:coffee"


def exact_output(model, template_id: str, photo: str, seed: int = 0) -> np.ndarray:
    return exact_edit(model, TEMPLATES[template_id], photo, seed=seed)


def test_every_shard_at_full_reproduces_the_exact_kv_output(api, reference_model):
    with EdgeSession(api.url, models=lambda _: reference_model) as session:
        result = session.edit(load_image(PHOTO), "portrait", policy="fixed-full", seed=3)
    assert result.levels == ["full"] * 6 and result.version == 1
    np.testing.assert_array_equal(result.image, exact_output(reference_model, "portrait", PHOTO, seed=3))
    t = result.timeline
    assert all(s.requested_at <= s.first_byte_at <= s.arrived_at <= s.decoded_at <= s.consumed_at for s in t.shards)
    assert result.bytes == sum(s.bytes for s in t.shards) > 0 and result.latency_s >= t.compute_end - 1e-6


def test_the_image_is_the_models_resolution_in_float32_rgb_in_0_1_whatever_the_photo(api, reference_model):
    """What EditResult.image documents: a 400x600 uint8 photo edits to (R, R, 3) float32 in [0, 1]."""
    photo = load_image(PHOTO)
    assert photo.shape[:2] != (reference_model.resolution,) * 2 and photo.dtype == np.uint8
    with EdgeSession(api.url, models=lambda _: reference_model) as session:
        image = session.edit(photo, "portrait", policy="fixed-full").image
    assert image.shape == (reference_model.resolution, reference_model.resolution, 3) == (32, 32, 3)
    assert image.dtype == np.float32 and 0.0 <= image.min() <= image.max() <= 1.0


def test_compact_edit_differs_but_stays_close(api, reference_model):
    with EdgeSession(api.url, models=lambda _: reference_model) as session:
        compact = session.edit(load_image(PHOTO), "portrait", policy="fixed-compact")
        full_payloads = sum(s.levels["full"].length for s in session.manifest("portrait").shards)
    exact = exact_output(reference_model, "portrait", PHOTO)
    assert not np.array_equal(compact.image, exact) and psnr_db(exact, compact.image) > 25
    assert compact.levels == ["compact"] * 6 and compact.bytes < 0.15 * full_payloads


def test_second_edit_with_the_same_template_makes_no_shard_request(proxy, reference_model, tmp_path):
    with EdgeSession(proxy.url, cache_dir=tmp_path, models=lambda _: reference_model) as session:
        first = session.edit(load_image(PHOTO), "portrait", version=1, policy="fixed-full")
        before, total = len(proxy.shard_requests()), len(proxy.requests)
        second = session.edit(load_image("skimage:astronaut"), "portrait", version=1, policy="mpc")
    assert before == 6 and len(proxy.shard_requests()) == before
    assert len(proxy.requests) == total  # numeric manifests come from the cache too
    assert second.bytes == 0 and {s.source for s in second.timeline.shards} == {"cache"}
    assert second.levels == first.levels


def test_a_second_edit_starts_warm_its_manifest_and_source_from_the_cache(proxy, reference_model, tmp_path):
    """The phone keeps the objects a template's edits need (computing its KV takes the template's
    image) and the source it made from the image, so a second edit of the version sends no
    request at all when the phone computes every block; a kept object that no longer verifies is
    fetched again."""
    with EdgeSession(proxy.url, cache_dir=tmp_path, models=lambda _: reference_model) as session:
        session.edit(load_image(PHOTO), "portrait", version=1, policy="on-device")
        manifest = session.manifest("portrait", 1)
        image = manifest.images[0]
        assert all(session.cache.read_object("portrait", 1, e.name, e.sha256) is not None
                   for e in [*manifest.context, image])
        assert not any(session.cache.has_object("portrait", 1, e.name) for e in manifest.source)  # not needed
        made = session.cache.read_made("portrait", 1, MADE_SOURCE)
        assert made is not None and set(made) == set(reference_model.source_limits())
        start = len(proxy.requests)
        session.edit(load_image("skimage:astronaut"), "portrait", version=1, policy="on-device")
        assert proxy.requests[start:] == []
        for name in (image.name, MADE_SOURCE):  # the made source no longer verifies: it is made again
            damaged = tmp_path / "portrait" / "1" / f"object-{name}.zst"
            damaged.write_bytes(b"\0" * damaged.stat().st_size)
        session.edit(load_image("skimage:astronaut"), "portrait", version=1, policy="on-device")
        refetched = [r.path for r in proxy.requests[start:]]
        assert session.cache.read_object("portrait", 1, image.name, image.sha256)
        assert session.cache.read_made("portrait", 1, MADE_SOURCE) is not None
    assert refetched == [f"/v1/templates/portrait/versions/1/source/{image.name}"]


def test_a_computing_phone_fetches_the_shard_hashes_once_and_only_to_fetch_a_shard(proxy, reference_model, tmp_path):
    """The phone alone asks for the manifest without its shards' sha256s (no shard needs one); a
    later edit that fetches shards gets them in one request first, and keeps them with the shards."""
    def requested(edit) -> list[str]:
        start = len(proxy.requests)
        edit()
        return [r.path.rpartition("/versions/1/")[2] for r in proxy.requests[start:]]

    with EdgeSession(proxy.url, cache_dir=tmp_path, models=lambda _: reference_model) as session:
        edit = lambda policy: lambda: session.edit(load_image(PHOTO), "portrait", version=1, policy=policy)  # noqa: E731
        assert requested(edit("on-device")) == ["preamble?images=1&hashes=0"]
        assert not session.manifest("portrait", 1).hashed  # kept as it came
        fetching = requested(edit("fixed-compact"))
        assert fetching[0] == "hashes" and sorted(fetching[1:]) == [f"shards/{i}/compact" for i in range(6)]
        assert requested(edit("fixed-compact")) == []  # shards and their hashes kept


def test_the_cache_stays_within_budget_and_evicts_the_least_recently_used_template(proxy, reference_model, tmp_path):
    with EdgeSession(
        proxy.url, cache_dir=tmp_path, cache_budget_bytes=1_000_000, models=lambda _: reference_model
    ) as s:
        s.edit(load_image(PHOTO), "portrait", version=1, policy="fixed-full")  # ~1.57 MB: partly kept
        assert 0 < s.cache.used_bytes <= 1_000_000
        assert s.cache.levels("portrait", 1, 0) == ["full"]
        s.edit(load_image(PHOTO), "scenery", version=1, policy="fixed-full")  # cannot fit whole either
        assert s.cache.used_bytes <= 1_000_000
        assert s.cache.levels("portrait", 1, 0) == []  # evicted for the template in use
        partial = sum(bool(s.cache.levels("scenery", 1, i)) for i in range(6))
        assert 0 < partial < 6  # a partial template is kept
        requests = len(proxy.shard_requests())
        s.edit(load_image(PHOTO), "scenery", version=1, policy="fixed-full")
        assert len(proxy.shard_requests()) - requests == 6 - partial


def test_requests_carry_only_template_version_shard_and_level(proxy, reference_model, tmp_path):
    """Privacy: nothing of the photo leaves the device, whatever the photo."""
    sequences, hybrid = [], []
    for photo in ("skimage:coffee", "skimage:rocket"):
        start = len(proxy.requests)
        with EdgeSession(proxy.url, models=lambda _: reference_model) as session:
            session.edit(load_image(photo), "portrait", policy="fixed-medium", seed=7)
            source = session.source(session.manifest("portrait", 1))  # what the phone computes KV from
            assert set(source) == set(reference_model.source_limits())
        sequences.append(proxy.requests[start:])
        own_encoder = photo == "skimage:rocket"  # its preamble leaves the context out
        with EdgeSession(proxy.url, models=lambda _: reference_model, encode_prompts=own_encoder) as session:
            start = len(proxy.requests)
            session.edit(load_image(photo), "portrait", policy="hybrid", seed=7)  # its preamble asks for the source
            hybrid.extend(proxy.requests[start:])  # which shards it fetches depends on timing, not on the photo
    allowed = re.compile(r"^/v1/templates/[a-z0-9][a-z0-9._-]*/versions/[a-z0-9._-]+/"
                         r"(manifest|hashes|preamble(\?(source=1&?)?(context=0&?)?(images=1&?)?(hashes=0)?)?"
                         r"|shards/\d+/[a-z][a-z0-9_-]*|(context|source)/[a-z][a-z0-9_]*)$")
    preambles = [r.path.rpartition("/")[2] for r in hybrid if "/preamble" in r.path]
    assert preambles == ["preamble?images=1&hashes=0", "preamble?context=0&images=1&hashes=0"]
    for recorded in [*sequences, hybrid]:
        assert any("/source/" in r.path or "images=1" in r.path for r in recorded)
        for r in recorded:
            assert r.method == "GET" and r.body == b"" and allowed.match(r.path), r
            allowed_headers = {"host", "user-agent", "accept-encoding", "range", "if-range"}
            assert {k.lower() for k in r.headers} <= allowed_headers, r.headers
    # Identical for two different photos (sorted: requests in flight together may arrive in either order).
    strip = lambda rs: sorted((r.path, sorted(r.headers.items())) for r in rs)  # noqa: E731
    assert strip(sequences[0]) == strip(sequences[1])


def test_unknown_template_and_bad_versions_are_typed_errors(api, reference_model):
    with EdgeSession(api.url, models=lambda _: reference_model) as session:
        with pytest.raises(ServerError) as err:
            session.edit(load_image(PHOTO), "no-such-template")
        assert err.value.status == 404 and err.value.code == "unknown_template"  # the server's code
        for bad in ("../x", "0", -1, True):
            with pytest.raises(InvalidName) as err:
                session.edit(load_image(PHOTO), "portrait", version=bad)
            assert isinstance(err.value, EdgeError) and err.value.code == "invalid_request"


def test_a_template_for_another_model_is_refused(api):
    from sakura.platform.models import load_model

    other = load_model("tiny-flux")
    with EdgeSession(api.url, models=lambda _: other) as session:
        with pytest.raises(ModelError, match="built for model") as err:
            session.edit(load_image(PHOTO), "portrait")
        assert isinstance(err.value, EdgeError)


def test_cancel_stops_a_slow_edit_and_leaves_no_thread(api, reference_model):
    """At 50 kbit/s the edit's ~1.5 MB would take minutes: cancelled half a second in, it raises
    instead of finishing, and its threads end (waited for, not timed)."""
    trickle = BandwidthTrace("trickle", "test", np.array([0.0]), np.array([0.05]), 600.0)
    cancel = threading.Event()
    threading.Timer(0.5, cancel.set).start()
    with EdgeSession(api.url, link=TraceLink(trickle, rtt_s=0.0), models=lambda _: reference_model) as session:
        with pytest.raises(EditCancelled):
            session.edit(load_image(PHOTO), "portrait", policy="fixed-full", cancel=cancel)
    for thread in [t for t in threading.enumerate() if t.name.startswith("sakura-")]:
        thread.join(timeout=60)  # a hang guard, not a bound
    assert not [t for t in threading.enumerate() if t.name.startswith("sakura-")]
