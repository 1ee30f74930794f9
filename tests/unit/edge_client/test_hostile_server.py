"""The edge client against a malicious shard server (issue 12, items 1-5, 25-27).

One :class:`~tests.hostile_server.HostileServer` serves the genuine reference library with one
attack per scenario. Every edit must end in a typed error (or a correct image) within a few
multiples of ``timeout_s``, write nothing outside its cache folder, and (checked in a child
process) never grow past twice the memory of a normal edit.
"""

from __future__ import annotations

import functools
import json
import subprocess
import sys
from collections import Counter
from pathlib import Path

import numpy as np
import pytest

from sakura.edge_client import EdgeSession, EditResult, RetryPolicy
from sakura.edge_client._http.urls import UrlPolicy
from sakura.edge_client.errors import ConfigError, EdgeError, RedirectError, ServerError, ShardCorrupt, TransportError
from sakura.edge_client.policy import FixedPolicy
from sakura.platform import http_api
from sakura.platform.errors import CodecError, SakuraError, UnknownModel
from sakura.platform.images import load_image
from sakura.platform.manifest import ManifestError
from tests.hostile_server import (
    HostileServer,
    drip,
    endless,
    is_manifest,
    is_shard,
    on_manifest,
    rename_level,
    send,
    send_json,
    when,
    with_payload,
)
from tests.unit.edge_client.test_session import PHOTO, exact_output

TIMEOUT_S = 0.5  # the client's timeout against a server that drips: a few of them bound the edit
#: The client's timeout otherwise: a hang guard, never reached. At TIMEOUT_S, a busy machine that
#: answered a request late had the client ask again, and "asked once" failed on its speed (issue 36).
HANG_GUARD_S = 60.0
FAST_RETRY = RetryPolicy(attempts=3, backoff_s=0.01, max_backoff_s=0.05)
ESCAPE = "compact/../../../../escaped"  # from <cache>/portrait/1/0.<level>: lands beside the cache folder


@functools.cache
def bomb_payload() -> bytes:
    """A quantised payload with a valid checksum declaring 4 x 8192 x 1024 fp32 K and V: a few kB
    on the wire, over half a gigabyte once decoded. Built section by section (as the format's
    writer would) so that crafting it never holds more than one section."""
    import hashlib
    import struct

    import zstandard

    from sakura.platform.codec import format as wire

    header = wire.ShardHeader(np.dtype(np.float32), wire.KIND_QUANTIZED, False, 4, 8192, 1024, 3.0, "compact", (4.0,))
    out = [wire.HEADER.pack(wire.MAGIC, wire.FORMAT_VERSION, wire.DTYPE_CODES[header.dtype], header.kind, 0, 1, 7, 0,
                            4, 8192, 1024, 3.0), b"compact", struct.pack("<f", 4.0), struct.pack("<B", 6)]
    compressor = zstandard.ZstdCompressor(level=3, write_content_size=True)
    for tag, size in header.section_sizes():
        frame = compressor.compress(bytes(size))
        out += [wire.SECTION.pack(tag, size, len(frame)), frame]
    body = b"".join(out)
    return body + hashlib.sha256(body).digest()


# -- scenarios: (server, handler, path) -> True when answered (builders: tests.hostile_server) --
def _set(manifest: dict, **fields) -> dict:
    return {**manifest, **fields}


def _lengths(manifest: dict, length: int) -> dict:
    for shard in manifest["shards"]:
        for loc in shard["levels"].values():
            loc["length"] = length
    return manifest


def _shapes(manifest: dict, shape: list[int]) -> dict:
    for shard in manifest["shards"]:
        shard["shape"] = shape
    return manifest


def _model_name(manifest: dict, name: str) -> dict:
    manifest["model"]["name"] = name
    return manifest


def huge_length(s, h, path):
    if is_manifest(path):
        send_json(h, _lengths(s.manifest(), 10**12))
    else:
        endless(h, s.stopping, declared=10**12)
    return True


def bomb(s, h, path):
    if is_manifest(path):
        manifest = s.manifest()
        for level in ("compact", "medium", "full"):
            with_payload(manifest, 0, level, bomb_payload())
        send_json(h, manifest)
    elif "/shards/0/" in path:
        send(h, 200, bomb_payload())
    else:
        return False
    return True


def redirect_to(location: str, span: bool = True):
    """Shards answer 307 to ``location`` (formatted with the server's url and the path)."""
    def act(s, h, path):
        _, _, body = s.genuine(path)
        headers = {"Location": location.format(url=s.url, path=path)}
        if span:
            headers["X-Sakura-Range"] = f"bytes=0-{len(body) - 1}"
        send(h, 307, b"", headers)
    return when(is_shard, act)


def redirect_target(answer):
    """Shards redirect to ``<scenario>/target/<path>``; the target answers with ``answer``."""
    def scenario(s, h, path):
        if path.startswith("/target/"):
            original = path.removeprefix("/target")
            _, _, body = s.genuine(original)
            answer(h, body)
            return True
        return redirect_to("{url}/" + h.path.lstrip("/").split("/", 1)[0] + "/target{path}")(s, h, path)
    return scenario


def _honest_range(h, body: bytes) -> None:
    start, end = (int(x) for x in h.headers["Range"].removeprefix("bytes=").split("-"))
    send(h, 206, body[start : end + 1], {"Content-Range": f"bytes {start}-{end}/{len(body)}"})


def _wrong_range(h, body: bytes) -> None:
    send(h, 206, body, {"Content-Range": f"bytes 1-{len(body)}/{len(body) + 1}"})


def _loop_back(s, h, path):
    """Shards 307 to ``/hop<path>``, which 307s back to the shard."""
    other = "/loop-shard" + path.removeprefix("/hop") if path.startswith("/hop") else "/loop-shard/hop" + path
    send(h, 307, b"", {"Location": other})


def reorder(manifest: dict) -> dict:
    manifest["shards"] = manifest["shards"][::-1]
    for i, shard in enumerate(manifest["shards"]):
        shard["index"] = i
    return manifest


SCENARIOS = {
    "genuine": lambda s, h, path: False,
    "traversal": on_manifest(lambda m: rename_level(m, "compact", ESCAPE)),
    "huge-length": huge_length,
    "endless-shard": when(is_shard, lambda s, h, path: endless(h, s.stopping)),
    "drip-manifest": when(is_manifest, lambda s, h, path: drip(h, s.stopping, 0.2)),
    "drip-shard": when(is_shard, lambda s, h, path: drip(h, s.stopping, 0.2)),
    "big-shape": on_manifest(lambda m: _shapes(m, [4096, 8192, 1024])),
    "bomb": bomb,
    "zero-shards": on_manifest(lambda m: _set(m, shards=[])),
    "resolution": on_manifest(lambda m: _set(m, resolution=8192)),
    "steps": on_manifest(lambda m: _set(m, schedule={**m["schedule"], "steps": 1000})),
    "reordered": on_manifest(reorder),
    "model-path": on_manifest(lambda m: _model_name(m, "/etc")),
    "huge-manifest": when(is_manifest, lambda s, h, path: endless(h, s.stopping)),
    "nested-manifest": when(is_manifest, lambda s, h, path: send(h, 200, b"[" * 200_000 + b"]" * 200_000)),
    "redirect-ftp": redirect_to("ftp://127.0.0.1/x"),
    "redirect-bad-port": redirect_to("http://127.0.0.1:99999/x"),
    "redirect-elsewhere": redirect_to("http://localhost:9/x"),
    "loop-manifest": when(is_manifest, lambda s, h, path: send(h, 307, b"", {"Location": h.path})),
    "loop-shard": when(is_shard, _loop_back),
    "redirect-honest": redirect_target(_honest_range),
    "redirect-200": redirect_target(lambda h, body: send(h, 200, body)),
    "redirect-wrong-range": redirect_target(_wrong_range),
}


@pytest.fixture(scope="module")
def hostile(api):
    with HostileServer(api.url, SCENARIOS) as server:
        yield server


def attack(hostile, scenario, model, tmp_path, *, policy="fixed-compact", on_progress=None, timeout_s=HANG_GUARD_S,
           **kwargs):
    """One edit against ``scenario``: (the edit's result or its error, the most requests any one
    path got). Time is bounded by counts, not by this machine's clock: a request has at most
    ``timeout_s`` between bytes (``TIMEOUT_S`` where the server drips) and a path at most
    ``FAST_RETRY.attempts`` tries."""
    cache = tmp_path / "cache"
    kwargs.setdefault("models", lambda _: model)
    try:
        with EdgeSession(
            hostile.url_for(scenario), cache_dir=cache, timeout_s=timeout_s, retry=FAST_RETRY, **kwargs
        ) as session:
            outcome = session.edit(load_image(PHOTO), "portrait", policy=policy, on_progress=on_progress)
    except SakuraError as exc:
        outcome = exc
    outside = [p for p in tmp_path.rglob("*") if p != cache and cache not in p.parents]
    assert outside == [], f"files outside the cache folder: {outside}"
    tries = Counter(r.path for r in hostile.requests(scenario))
    return outcome, max(tries.values(), default=0)


@pytest.mark.parametrize("policy", ["mpc", "fixed-compact"])
def test_a_level_name_that_climbs_out_of_the_cache_is_refused(hostile, reference_model, tmp_path, policy):
    outcome, _ = attack(hostile, "traversal", reference_model, tmp_path, policy=policy)
    assert isinstance(outcome, ManifestError) and "name" in str(outcome)
    # no shard may be requested by a name the manifest gave: only the first shard a fresh session asks
    # for with the preamble, by our own alias for its smallest level
    first = "/v1/templates/portrait/versions/latest/shards/0/~smallest"
    assert all(is_manifest(r.path) or r.path == first for r in hostile.requests("traversal"))


@pytest.mark.parametrize("scenario,error", [
    ("huge-length", ManifestError),
    ("big-shape", ManifestError),
    ("zero-shards", ManifestError),
    ("resolution", ManifestError),
    ("steps", ManifestError),
    ("reordered", ManifestError),
    ("nested-manifest", ManifestError),
])
def test_numbers_the_model_cannot_take_are_refused_before_any_shard(
    hostile, reference_model, tmp_path, scenario, error
):
    outcome, tries = attack(hostile, scenario, reference_model, tmp_path)
    assert isinstance(outcome, error) and isinstance(outcome, EdgeError), outcome
    assert {r.path for r in hostile.requests(scenario)} == {"/v1/templates/portrait/versions/latest/preamble"}
    assert tries == 1  # refused, not retried


def test_a_model_name_from_the_network_never_becomes_a_path(hostile, reference_model, tmp_path):
    from sakura.platform.models import load_named_model

    outcome, _ = attack(hostile, "model-path", reference_model, tmp_path, models=load_named_model)
    assert isinstance(outcome, UnknownModel) and isinstance(outcome, EdgeError)


@pytest.mark.parametrize("scenario,error,match", [
    ("endless-shard", TransportError, "exceeds the expected"),
    ("huge-manifest", ServerError, "exceeds"),
])
def test_an_endless_body_is_read_no_further_than_the_client_allows(
    hostile, reference_model, tmp_path, scenario, error, match
):
    outcome, tries = attack(hostile, scenario, reference_model, tmp_path)
    assert isinstance(outcome, error) and match in str(outcome), outcome
    assert tries <= FAST_RETRY.attempts


@pytest.mark.parametrize("scenario", ["drip-manifest", "drip-shard"])
def test_a_server_dripping_bytes_fails_within_a_few_timeouts(hostile, reference_model, tmp_path, scenario):
    outcome, tries = attack(hostile, scenario, reference_model, tmp_path, timeout_s=TIMEOUT_S)
    # one download found too slow, or (several dripping at once) the edit's download deadline
    assert isinstance(outcome, TransportError) and ("too slow" in str(outcome) or "deadline" in str(outcome)), outcome
    assert tries <= FAST_RETRY.attempts


def test_a_decode_bomb_is_refused_on_its_header(hostile, reference_model, tmp_path):
    outcome, _ = attack(hostile, "bomb", reference_model, tmp_path)
    assert isinstance(outcome, CodecError) and "shape" in str(outcome)


@pytest.mark.parametrize("scenario,match", [
    ("redirect-ftp", "scheme"),
    ("redirect-bad-port", "port"),
    ("loop-manifest", "redirect loop"),
    ("loop-shard", "redirect loop"),
    ("redirect-200", "ignored the range"),
    ("redirect-wrong-range", "redirect target sent"),
])
def test_bad_redirects_are_typed_errors_and_fail_fast(hostile, reference_model, tmp_path, scenario, match):
    outcome, tries = attack(hostile, scenario, reference_model, tmp_path)
    assert isinstance(outcome, RedirectError) and match in str(outcome).lower(), outcome
    assert tries == 1  # a bad redirect is not retried
    if scenario in ("redirect-200", "redirect-wrong-range"):
        assert len([r for r in hostile.requests(scenario) if r.path.startswith("/target/")]) == 1  # no retries


def test_redirect_policy_the_app_controls(hostile, reference_model, tmp_path):
    only_here = UrlPolicy(redirect_hosts=frozenset({"127.0.0.1"}))
    outcome, _ = attack(hostile, "redirect-elsewhere", reference_model, tmp_path, urls=only_here)
    assert isinstance(outcome, RedirectError) and "localhost" in str(outcome)
    outcome, _ = attack(
        hostile, "redirect-honest", reference_model, tmp_path / "b", urls=only_here, policy="fixed-full"
    )
    np.testing.assert_array_equal(outcome.image, exact_output(reference_model, "portrait", PHOTO))
    with pytest.raises(ConfigError):
        EdgeSession(hostile.url_for("genuine"), urls=UrlPolicy(https_only=True))
    with pytest.raises(ConfigError):
        EdgeSession("127.0.0.1:8000")


def test_credentials_never_follow_a_redirect(hostile, reference_model, tmp_path):
    outcome, _ = attack(hostile, "redirect-honest", reference_model, tmp_path, api_key="secret", policy="fixed-full")
    np.testing.assert_array_equal(outcome.image, exact_output(reference_model, "portrait", PHOTO))
    seen = hostile.requests("redirect-honest")
    assert any("X-Api-Key" in r.headers for r in seen if not r.path.startswith("/target/"))
    targets = [r for r in seen if r.path.startswith("/target/")]
    assert targets and all("X-Api-Key" not in r.headers and "Authorization" not in r.headers for r in targets)


_CHILD = """
import json, resource, sys
from sakura.edge_client import EdgeSession, EditResult, RetryPolicy
from sakura.platform.errors import SakuraError
from sakura.platform.images import load_image
from sakura.platform.models import load_model
model, image, out = load_model("reference"), load_image("skimage:coffee"), {}
for url in sys.argv[1:]:
    try:
        with EdgeSession(
            url, models=lambda _: model, timeout_s=0.5, retry=RetryPolicy(attempts=2, backoff_s=0.01)
        ) as s:
            s.edit(image, "portrait", policy="fixed-full")
        out[url] = "ok"
    except SakuraError as exc:
        out[url] = type(exc).__name__
print(json.dumps({"results": out, "maxrss_kb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss}))
"""


def _child(*urls: str) -> dict:
    done = subprocess.run([sys.executable, "-c", _CHILD, *urls], capture_output=True, text=True, timeout=300,
                          cwd=Path(__file__).resolve().parents[3])
    assert done.returncode == 0, done.stderr[-2000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_no_attack_grows_the_client_past_twice_a_normal_edit(hostile):
    normal = _child(hostile.url_for("genuine"))
    assert list(normal["results"].values()) == ["ok"]
    scenarios = ["huge-length", "endless-shard", "huge-manifest", "bomb", "big-shape", "nested-manifest"]
    attacked = _child(*(hostile.url_for(s) for s in scenarios))
    assert "ok" not in attacked["results"].values(), attacked
    assert attacked["maxrss_kb"] < 2 * normal["maxrss_kb"], (attacked, normal)


def _context(manifest: dict, name: str, shape: list[int], length: int = 100) -> dict:
    manifest["context"] = [{"name": name, "key": "templates/portrait/versions/1/context-x.zst", "shape": shape,
                            "dtype": "float32", "length": length, "sha256": "0" * 64}]
    return manifest


SCENARIOS.update({
    "context-unknown": on_manifest(lambda m: _context(m, "prompt_embeds", [4, 4])),
})


def test_context_objects_the_model_does_not_take_are_refused_before_any_request(hostile, reference_model, tmp_path,
                                                                               monkeypatch):
    outcome, _ = attack(hostile, "context-unknown", reference_model, tmp_path)
    assert isinstance(outcome, ManifestError) and "not one the model takes" in str(outcome)
    monkeypatch.setattr(reference_model, "context_limits", lambda: {"prompt_embeds": (2, 4)}, raising=False)
    outcome, _ = attack(hostile, "context-unknown", reference_model, tmp_path / "b")
    assert isinstance(outcome, ManifestError) and "at most (2, 4)" in str(outcome)
    assert {r.path for r in hostile.requests("context-unknown")} == {"/v1/templates/portrait/versions/latest/preamble"}


# -- the preamble: the manifest and its objects in one response ----------------------------------
def _preamble_with(patch_headers=None, patch_body=None):
    """The genuine preamble with its headers and body changed."""
    def act(s, h, path):
        status, headers, body = s.genuine(path)
        headers = {**headers, **(patch_headers or {})}
        send(h, status, patch_body(body) if patch_body else body, headers)
    return when(lambda path: "/preamble" in path, act)


def _flip_last_byte(body: bytes) -> bytes:
    return body[:-1] + bytes([body[-1] ^ 1])


SCENARIOS.update({
    "preamble-length": _preamble_with({"X-Sakura-Manifest-Length": "999999999"}),
    "preamble-short": _preamble_with(patch_body=lambda body: body[:-1]),
    "preamble-damaged": _preamble_with(patch_body=_flip_last_byte),
    "preamble-genuine": lambda s, h, path: False,
})


def test_a_hybrid_edit_gets_manifest_and_source_in_one_round_trip(hostile, reference_model, tmp_path):
    result, _ = attack(hostile, "preamble-genuine", reference_model, tmp_path, policy="hybrid")
    assert isinstance(result, EditResult), result
    paths = [r.path for r in hostile.requests("preamble-genuine")]
    assert paths[0] == "/v1/templates/portrait/versions/latest/preamble?images=1&hashes=0"  # the JPEG, not the cells
    assert not any("/source/" in p or "/context/" in p or p.endswith("/manifest") for p in paths), paths


@pytest.mark.parametrize("scenario", ["preamble-length", "preamble-short"])
def test_a_preamble_whose_lengths_do_not_add_up_is_refused_before_any_shard(hostile, reference_model, tmp_path,
                                                                            scenario):
    outcome, _ = attack(hostile, scenario, reference_model, tmp_path, policy="hybrid")
    assert isinstance(outcome, ManifestError) and "preamble" in str(outcome), outcome
    assert all("/preamble" in r.path for r in hostile.requests(scenario))


def test_a_damaged_bundled_object_is_fetched_again_and_verified(hostile, reference_model, tmp_path):
    result, _ = attack(hostile, "preamble-damaged", reference_model, tmp_path, policy="hybrid")
    assert isinstance(result, EditResult), result
    assert any("/source/" in r.path for r in hostile.requests("preamble-damaged"))


def _damaged_hashes(s, h, path):
    status, headers, body = s.genuine(path)
    send(h, status, _flip_last_byte(body), headers)


SCENARIOS["hashes-damaged"] = when(lambda path: path.endswith("/hashes"), _damaged_hashes)


def test_a_damaged_shard_hashes_object_is_never_used_and_no_shard_is_asked_for(hostile, reference_model, tmp_path):
    """Asked as a computing phone asks, then fetching every shard: the phone computes every block
    instead, or the edit fails typed (whichever stage sees the failure first)."""
    policy = FixedPolicy("compact")
    policy.computes = True  # type: ignore[attr-defined]
    outcome, _ = attack(hostile, "hashes-damaged", reference_model, tmp_path, policy=policy)
    computed = isinstance(outcome, EditResult) and outcome.computed == list(range(6)) and outcome.bytes == 0
    assert computed or isinstance(outcome, ShardCorrupt), outcome
    paths = [r.path for r in hostile.requests("hashes-damaged")]
    assert paths[0].endswith("preamble?images=1&hashes=0") and any(p.endswith("/hashes") for p in paths)
    assert not any("/shards/" in p for p in paths), paths
    assert not list((tmp_path / "cache").rglob("*shard_hashes*"))


# -- the first shard, asked for with the preamble --------------------------------------------------
def _first_answered_with(level: str):
    """The speculative first-shard request answered with shard 0 at ``level``, labelled the smallest."""
    def act(s, h, path):
        status, headers, body = s.genuine(path.replace(http_api.SMALLEST_LEVEL, level))
        send(h, status, body, {**headers, "X-Sakura-Version": "1", http_api.SHARD_LEVEL: "compact"})
    return when(lambda path: path.endswith("/shards/0/" + http_api.SMALLEST_LEVEL), act)


SCENARIOS.update({
    "first-genuine": lambda s, h, path: False,
    "first-wrong": _first_answered_with("medium"),
})


def test_a_fresh_session_asks_for_its_first_shard_with_the_preamble(hostile, reference_model, tmp_path):
    result, _ = attack(hostile, "first-genuine", reference_model, tmp_path, policy="mpc")
    assert isinstance(result, EditResult) and result.levels[0] == "compact", result
    paths = [r.path for r in hostile.requests("first-genuine")]
    assert set(paths[:2]) == {"/v1/templates/portrait/versions/latest/preamble",
                              "/v1/templates/portrait/versions/latest/shards/0/" + http_api.SMALLEST_LEVEL}
    assert not any(p.endswith("/shards/0/compact") for p in paths)  # not asked for twice


def test_a_first_shard_that_is_not_what_the_manifest_lists_is_fetched_again(hostile, reference_model, tmp_path):
    result, _ = attack(hostile, "first-wrong", reference_model, tmp_path, policy="mpc")
    assert isinstance(result, EditResult) and result.levels[0] == "compact", result
    assert any(r.path.endswith("/shards/0/compact") for r in hostile.requests("first-wrong"))  # the real one


# -- a newer server: the phone-facing manifest grows ------------------------------------------------
def _newer(manifest: dict, schema: str) -> dict:
    """What a later server may send: a newer schema with fields today's client has never heard of."""
    manifest = {**manifest, "schema_version": schema, "signed_by": "ed25519:abc", "regions": ["eu"]}
    manifest["levels"] = [{**level, "codec_hint": {"simd": True}} for level in manifest["levels"]]
    manifest["shards"] = [{**s, "priority": 3, "levels": {k: {**v, "etag": "x"} for k, v in s["levels"].items()}}
                          for s in manifest["shards"]]
    manifest["model"] = {**manifest["model"], "quantised": "w8a16"}
    return manifest


SCENARIOS.update({
    "newer-minor": on_manifest(lambda m: _newer(m, "1.1")),
    "newer-major": on_manifest(lambda m: _newer(m, "2.0")),
})


def test_a_minor_schema_with_unknown_fields_still_edits_and_a_major_one_asks_for_an_update(hostile, reference_model,
                                                                                           tmp_path):
    result, _ = attack(hostile, "newer-minor", reference_model, tmp_path / "minor", policy="fixed-full")
    assert isinstance(result, EditResult), result
    np.testing.assert_array_equal(result.image, exact_output(reference_model, "portrait", PHOTO))
    refused, _ = attack(hostile, "newer-major", reference_model, tmp_path / "major", policy="fixed-full")
    assert isinstance(refused, ManifestError) and "update" in str(refused), refused
    assert all(is_manifest(r.path) or "/shards/0/" in r.path for r in hostile.requests("newer-major"))

