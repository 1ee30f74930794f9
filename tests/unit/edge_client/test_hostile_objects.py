"""Context and source objects from a malicious server (issue 36, item 5.1).

The manifest checks (``test_source_validation.py``, the ``context-unknown`` scenario of
``test_hostile_server.py``) bound what an entry may claim; here the server's bytes match the
sha256 and length it lists and are still not what the entry says: a zstd frame that inflates far
past the entry's shape, another dtype, fewer rows, NaNs, a JPEG of another size. Each edit ends in
a typed error, asks for the object once (a verified object is not fetched again), decodes no more
than the entry's shape plus one byte, and writes nothing outside its cache folder.
"""

from __future__ import annotations

import functools
import hashlib
import json
import re

import numpy as np
import pytest
import zstandard

from sakura.edge_client import EditResult
from sakura.edge_client.errors import InvalidManifest, InvalidObject, InvalidPhoto, WrongModel
from sakura.edge_client.policy import FixedPolicy
from sakura.platform.template_image import publish_image
from tests.hostile_server import HostileServer, is_manifest, send, send_json
from tests.unit.edge_client.test_hostile_server import attack

CELLS = "template_cells"  # the reference model's source object: float32 (256, 12)
SHAPE = (256, 12)
PREAMBLE = "/v1/templates/portrait/versions/latest/preamble?images=1&hashes=0"


@functools.cache
def inflating() -> bytes:
    """A zstd frame of 100 MiB of zeros: 3 kB on the wire, within the length any (256, 12) float32
    object may have, so the manifest check cannot see it."""
    frames = zstandard.ZstdCompressor(level=19, write_content_size=True).compressobj(size=100 << 20)
    return b"".join([*(frames.compress(bytes(1 << 20)) for _ in range(100)), frames.flush()])


def _zstd(array: np.ndarray) -> bytes:
    return zstandard.ZstdCompressor(level=3, write_content_size=True).compress(array.tobytes())


PAYLOADS = {  # scenario -> (payload, the entry's changed fields)
    "inflating": (inflating, {}),
    "half-precision": (lambda: _zstd(np.ones(SHAPE, np.float16)), {"dtype": "float16"}),
    "fewer-rows": (lambda: _zstd(np.ones((128, 12), np.float32)), {"shape": [128, 12]}),
    "nan": (lambda: _zstd(np.full(SHAPE, np.nan, np.float32)), {}),
    "float-bytes-as-half": (lambda: _zstd(np.ones(SHAPE, np.float32)), {"dtype": "float16"}),
}


def _source_scenario(payload, change: dict):
    """The manifest lists no image (so the phone computes from the source objects) and lists
    ``payload`` as the template's cells, with its true length and sha256; the object route
    answers it."""
    def scenario(s, h, path):
        data = payload()
        if is_manifest(path):
            manifest = s.manifest()
            manifest["images"] = []
            entry = manifest["source"][0]
            entry.update(change, length=len(data), sha256=hashlib.sha256(data).hexdigest())
            send_json(h, manifest)
        elif path.endswith("/source/" + CELLS):
            send(h, 200, data)
        else:
            return False
        return True
    return scenario


def _image_scenario(s, h, path):
    """The template image is a genuine JPEG of another size than the manifest lists."""
    jpeg = publish_image(np.zeros((64, 64, 3), np.float32))[0]
    if is_manifest(path):
        manifest = s.manifest()
        manifest["images"][0].update(length=len(jpeg), sha256=hashlib.sha256(jpeg).hexdigest())
        send_json(h, manifest)
    elif "/source/" in path:
        send(h, 200, jpeg)
    else:
        return False
    return True


def _huge_number(s, h, path):
    """A manifest with a number of 5,000 digits (past what Python's int() converts)."""
    if not is_manifest(path):
        return False
    body = json.dumps(s.manifest()).encode().replace(b'"kv_bytes_fp16": ', b'"kv_bytes_fp16": ' + b"9" * 5000 + b", "
                                                                                                       b'"x": ', 1)
    send(h, 200, body, {"Content-Type": "application/json"} | (
        {"X-Sakura-Manifest-Length": str(len(body)), "X-Sakura-Bundled": "0"} if "/preamble" in path else {}))
    return True


SCENARIOS = {name: _source_scenario(*spec) for name, spec in PAYLOADS.items()}
SCENARIOS |= {
    "image-size": _image_scenario,
    "int-dtype": _source_scenario(lambda: b"x" * 100, {"dtype": "int32"}),
    "float64": _source_scenario(lambda: b"x" * 100, {"dtype": "float64"}),
    "huge-number": _huge_number,
}


@pytest.fixture(scope="module")
def hostile(api):
    with HostileServer(api.url, SCENARIOS) as server:
        yield server


def computing() -> FixedPolicy:
    """A policy that computes every block: the phone needs the template's source."""
    policy = FixedPolicy("compact")
    policy.computes = True  # type: ignore[attr-defined]
    return policy


@pytest.mark.parametrize("scenario, error, match", [
    ("inflating", InvalidObject, r"decodes to 12289 bytes, its shape \(256, 12\) needs 12288"),  # read no further
    ("float-bytes-as-half", InvalidObject, "decodes to 6145 bytes"),
    ("nan", InvalidObject, "non-finite"),
])
def test_an_object_that_does_not_decode_to_its_entry_is_a_typed_error_and_fetched_once(
    hostile, reference_model, tmp_path, scenario, error, match
):
    outcome, tries = attack(hostile, scenario, reference_model, tmp_path, policy=computing())
    assert isinstance(outcome, error) and re.search(match, str(outcome)), outcome
    assert tries == 1  # no path asked for twice: a verified object is never fetched again
    assert len([r for r in hostile.requests(scenario) if "/source/" in r.path]) == 1
    assert not [r for r in hostile.requests(scenario) if "/shards/" in r.path]  # refused before the edit starts


@pytest.mark.parametrize("scenario, error, match", [
    ("half-precision", WrongModel, r"is float16 \(256, 12\); the model takes float32"),
    ("fewer-rows", WrongModel, r"is float32 \(128, 12\); the model takes float32 \(256, 12\)"),
    ("image-size", InvalidPhoto, "64x64 RGB JPEG; the manifest says 32x32"),
])
def test_an_object_the_model_cannot_take_is_never_computed_from(hostile, reference_model, tmp_path, scenario, error,
                                                                  match):
    """Decoded, and refused by the model on the compute stage: the edit fails typed, or (when the
    fetch stage was first) ends with every block fetched and none computed from the object."""
    outcome, tries = attack(hostile, scenario, reference_model, tmp_path, policy=computing())
    if isinstance(outcome, EditResult):
        assert outcome.computed == [] and len(outcome.levels) == 6, outcome
    else:
        assert isinstance(outcome, error) and re.search(match, str(outcome)), outcome
    assert tries == 1  # no path asked for twice: a verified object is never fetched again
    assert len([r for r in hostile.requests(scenario) if "/source/" in r.path]) == 1


@pytest.mark.parametrize("scenario, match", [
    ("int-dtype", "source.0.dtype"),
    ("float64", "source.0.dtype"),
    ("huge-number", "not JSON"),
])
def test_an_entry_or_number_the_schema_refuses_is_refused_before_any_object(hostile, reference_model, tmp_path,
                                                                           scenario, match):
    outcome, tries = attack(hostile, scenario, reference_model, tmp_path, policy=computing())
    assert isinstance(outcome, InvalidManifest) and match in str(outcome), outcome
    assert [r.path for r in hostile.requests(scenario)] == [PREAMBLE]
