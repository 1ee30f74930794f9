"""The preamble's framing from a malicious server (issue 36, item 5.2): the manifest's length in
``X-Sakura-Manifest-Length``, the ``X-Sakura-Bundled`` flag and the objects that follow the
manifest are the server's word, read against the project's number grammar
(:func:`sakura.platform.layout.parse_number`) and the manifest's own lengths. A header in any other
spelling (a superscript digit that ``str.isdigit`` accepts and ``int`` refuses, a sign, a fraction,
a leading zero) is a typed :class:`InvalidManifest` from the one preamble request, before any
object or shard, and nothing is written outside the cache folder (``attack`` checks).
"""

from __future__ import annotations

import hashlib

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from sakura.edge_client import EditResult
from sakura.edge_client._session import MAX_MANIFEST_BYTES, _manifest_length, _split_objects
from sakura.edge_client.errors import InvalidManifest
from sakura.platform.layout import parse_number
from sakura.platform.library import TemplateLibrary
from sakura.platform.manifest import ManifestError, PhoneManifest
from sakura.platform.store import open_store
from tests.hostile_server import HostileServer, send, when
from tests.hypothesis_seed import name_the_seed, per_run_seed
from tests.unit.edge_client.test_hostile_server import attack

PREAMBLE = "/v1/templates/portrait/versions/latest/preamble"
#: What ``http.client`` hands the phone for a header: its bytes read as latin-1 (any of them, or
#: mostly digits, with the superscripts ``str.isdigit`` also accepts, signs, points and spaces).
HEADERS = st.one_of(
    st.none(),
    st.text(st.characters(max_codepoint=0xFF, exclude_characters="\r\n"), max_size=12),
    st.text(st.sampled_from("0123456789" * 3 + "\u00b2\u00b3\u00b9 +-._e"), min_size=1, max_size=11),
    st.integers(-10, 10**10).map(str),
)


@per_run_seed
@settings(max_examples=400, deadline=None, database=None)
@given(header=HEADERS, body=st.integers(0, 2 * MAX_MANIFEST_BYTES))
def test_the_manifest_length_is_canonical_ascii_within_the_body_or_a_manifest_error(header, body):
    name_the_seed()
    try:
        length = _manifest_length(header, body)
    except ManifestError as exc:
        assert len(str(exc)) < 200  # what it echoes is bounded
        return
    assert header is not None and parse_number(header, max_digits=9) == length
    assert 0 < length <= min(body, MAX_MANIFEST_BYTES)


@pytest.mark.parametrize("header", ["\u00b2", "\u00b9\u00b2", "\u0661", "+5", "-5", " 5", "5 ", "05", "5.0", "5e2",
                                    "0x10", "1_0", "0", "", "9" * 10])
def test_an_out_of_grammar_manifest_length_is_a_manifest_error(header):
    with pytest.raises(ManifestError, match="X-Sakura-Manifest-Length|claims"):
        _manifest_length(header, 1000)


@pytest.fixture(scope="module")
def manifest(ref_library) -> PhoneManifest:
    return TemplateLibrary(open_store(ref_library)).manifest("portrait", 1).for_phone()


@per_run_seed
@settings(max_examples=100, deadline=None, database=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(extra=st.integers(-(1 << 16), 1 << 16))
def test_bundled_objects_must_add_up_to_the_manifests_lengths_exactly(manifest, extra):
    name_the_seed()
    listed = sum(e.length for _, e in manifest.bundle(context=True, source=True, images=True))
    rest = bytes(max(0, listed + extra))
    if len(rest) != listed:
        with pytest.raises(ManifestError, match="bytes of objects"):
            _split_objects(manifest, rest, True, True, True)
        return
    objects = _split_objects(manifest, rest, True, True, True)
    assert sum(map(len, objects.values())) == listed
    assert all(k.partition("/")[0] in ("context", "source") for k in objects)


# -- against the phone -----------------------------------------------------------------------------
def _genuine(s: HostileServer, path: str) -> tuple[int, dict[str, str], bytes]:
    status, headers, body = s.genuine(path)
    return status, {k.lower(): v for k, v in headers.items()}, body


def _preamble_headers(headers: dict[str, str]):
    """The genuine preamble, its headers replaced by ``headers`` (sent as latin-1, as http.server does)."""
    def act(s, h, path):
        status, genuine, body = _genuine(s, path)
        send(h, status, body, genuine | {k.lower(): v for k, v in headers.items()})
    return when(lambda path: "/preamble" in path, act)


LENGTHS = {"superscript": "\u00b2", "superscripts": "\u00b9\u00b2", "signed": "+12", "fraction": "12.0",
           "leading-zero": "012", "hex": "0x1f", "zero": "0", "empty": "", "ten-digits": "1" * 10}
SCENARIOS = {f"length-{name}": _preamble_headers({"X-Sakura-Manifest-Length": value})
             for name, value in LENGTHS.items()}
SCENARIOS["bundled-padded"] = _preamble_headers({"X-Sakura-Bundled": "01"})


def _objects_short(s, h, path):
    """A preamble whose bundled objects are one byte short, with headers that are all genuine."""
    if "/preamble" not in path:
        return False
    status, headers, body = _genuine(s, path)
    send(h, status, body[:-1], headers)
    return True


def _manifest_cut(s, h, path):
    """A preamble whose manifest length stops inside the manifest's zstd frame."""
    if "/preamble" not in path:
        return False
    status, headers, body = _genuine(s, path)
    length = int(headers["x-sakura-manifest-length"])
    send(h, status, body, headers | {"x-sakura-manifest-length": str(length - 7)})
    return True


SCENARIOS |= {"objects-short": _objects_short, "manifest-cut": _manifest_cut}


@pytest.fixture(scope="module")
def hostile(api):
    with HostileServer(api.url, SCENARIOS) as server:
        yield server


@pytest.mark.parametrize("scenario", [*(f"length-{n}" for n in LENGTHS), "objects-short", "manifest-cut"])
def test_a_preamble_framed_out_of_grammar_is_refused_from_its_one_request(hostile, reference_model, tmp_path,
                                                                          scenario):
    outcome, tries = attack(hostile, scenario, reference_model, tmp_path, policy="hybrid")
    assert isinstance(outcome, InvalidManifest), outcome
    assert tries == 1 and all(r.path.startswith(PREAMBLE) for r in hostile.requests(scenario))
    assert not list(tmp_path.rglob("object-*"))  # no object from a refused preamble is kept


def test_a_bundled_flag_other_than_1_means_nothing_was_bundled(hostile, reference_model, tmp_path):
    """The objects after the manifest (here all there, and genuine) are then not read: the phone
    asks for each one by name, checks it against its sha256, and the edit is the genuine one."""
    scenario = "bundled-padded"
    outcome, tries = attack(hostile, scenario, reference_model, tmp_path, policy="hybrid")
    assert isinstance(outcome, EditResult), outcome
    assert tries == 1
    fetched = [r.path for r in hostile.requests(scenario) if "/source/" in r.path]
    assert fetched, "the objects the preamble carried were used without being asked for"
    manifest = hostile.manifest()
    listed = {e["sha256"] for kind in ("context", "source", "images") for e in manifest[kind]}
    listed.add(manifest["shard_hashes"]["sha256"])
    kept = [hashlib.sha256(p.read_bytes()).hexdigest() for p in tmp_path.rglob("object-*.zst")
            if not p.name.startswith("object-made_")]  # the source the phone made itself
    assert kept and set(kept) <= listed  # only verified objects are kept
