"""The phone's object cache under attack (issue 36, item 5.4): the names it is given for context,
source and made objects, the object and manifest files it finds (links planted for them), and the
arrays the phone made itself (``object-made_*.zst``: an ``.npz`` behind a sha256 of its own, which
anyone who can write the folder can forge). A bad name is a typed error and creates nothing; a
planted file is a miss or a typed error; a forged ``.npz`` never allocates more than its own bytes
(a header declaring terabytes, a deflated member inflating a thousandfold) and never unpickles.
"""

from __future__ import annotations

import hashlib
import io
import itertools
import re
import struct
import tracemalloc
import warnings
import zipfile

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from sakura.edge_client import EdgeSession
from sakura.edge_client import _cache_files as files
from sakura.edge_client._cache import ShardCache
from sakura.edge_client._objects import MADE_SOURCE
from sakura.edge_client._validation import made_fits
from sakura.edge_client.errors import CachePathError
from sakura.platform.context import CONTEXT_NAME_PATTERN
from sakura.platform.images import load_image
from sakura.platform.layout import InvalidName
from tests.hypothesis_seed import name_the_seed, per_run_seed
from tests.unit.edge_client.test_cache_paths import files_outside
from tests.unit.edge_client.test_session import PHOTO, exact_output

FUZZ = settings(max_examples=150, deadline=None, database=None,
                suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])


def sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


@pytest.fixture
def cache(tmp_path):
    cache = ShardCache(tmp_path / "cache", 1 << 30)
    yield cache
    cache.close()


# -- object names ---------------------------------------------------------------------------------
NAMES = st.one_of(
    st.text(max_size=40),
    st.text(st.sampled_from("abz_09-./\\\x00A~%"), max_size=40),
    st.sampled_from(["../x", "..", ".", "/etc/passwd", "x/../../y", "a\x00b", "made_source/..", "manifest.json",
                     "prompt_embeds.zst", "x" * 33, "\u0430bc", "abc\n", "ABC"]),
)


_FOLDERS = itertools.count()


@per_run_seed
@FUZZ
@given(name=NAMES)
def test_an_object_name_is_one_of_the_grammar_or_a_typed_error_that_creates_nothing(tmp_path, name):
    name_the_seed()
    root = tmp_path / str(next(_FOLDERS))
    cache = ShardCache(root / "cache", 1 << 20)
    valid = re.fullmatch(CONTEXT_NAME_PATTERN, name) is not None
    calls = [lambda: cache.write_object("tpl", 1, name, b"bytes"), lambda: cache.read_object("tpl", 1, name, sha(b"b")),
             lambda: cache.has_object("tpl", 1, name), lambda: cache.read_made("tpl", 1, name),
             lambda: cache.write_made("tpl", 1, name, {"a": np.zeros(2, np.float32)})]
    try:
        for call in calls:
            if valid:
                call()
            else:
                with pytest.raises(InvalidName):
                    call()
    finally:
        cache.close()
    written = {p.name for p in (root / "cache").rglob("*") if p.is_file() and p.name != ".lock"}
    assert written == ({f"object-{name}.zst"} if valid else set())
    assert files_outside(root, root / "cache") == []


@pytest.mark.parametrize("name", ["object-prompt_embeds.zst", "manifest.json", "object-made_source.zst"])
def test_a_link_planted_for_an_object_or_a_manifest_is_refused_and_never_followed(tmp_path, name):
    secret = tmp_path / "secret"
    secret.write_bytes(hashlib.sha256(b"x").digest() + b"x")  # what a made object of b"x" would be
    root = tmp_path / "cache"
    (root / "tpl" / "1").mkdir(parents=True)
    (root / "tpl" / "1" / name).symlink_to(secret)
    cache = ShardCache(root, 1 << 20)
    assert cache.used_bytes == 0  # a link is never counted
    reads = {"object-prompt_embeds.zst": lambda: cache.read_object("tpl", 1, "prompt_embeds", sha(b"x")),
             "manifest.json": lambda: cache.read_manifest("tpl", 1),
             "object-made_source.zst": lambda: cache.read_made("tpl", 1, MADE_SOURCE)}
    writes = {"object-prompt_embeds.zst": lambda: cache.write_object("tpl", 1, "prompt_embeds", b"y"),
              "manifest.json": lambda: cache.write_manifest("tpl", 1, b"{}"),
              "object-made_source.zst": lambda: cache.write_made("tpl", 1, MADE_SOURCE, {"a": np.ones(1)})}
    for call in (reads[name], writes[name]):
        with pytest.raises(CachePathError):
            call()
    assert secret.read_bytes() == hashlib.sha256(b"x").digest() + b"x"
    assert (root / "tpl" / "1" / name).is_symlink()  # not deleted either: it is not the cache's
    cache.close()


# -- made arrays: an .npz whose sha256 anyone with the folder can forge ----------------------------
def _npy(shape: tuple[int, ...], dtype: str = "<f4", body: bytes = b"", version: tuple[int, int] = (1, 0)) -> bytes:
    header = io.BytesIO()
    if version == (1, 0):
        np.lib.format.write_array_header_1_0(header, {"descr": dtype, "fortran_order": False, "shape": shape})
    else:
        np.lib.format.write_array_header_2_0(header, {"descr": dtype, "fortran_order": False, "shape": shape})
    return header.getvalue() + body


def _npz(members: dict[str, bytes], compression: int = zipfile.ZIP_STORED, *, twice: bool = False) -> bytes:
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", compression=compression) as archive, warnings.catch_warnings():
        warnings.simplefilter("ignore")  # zipfile warns of a name written twice
        for name, data in [*members.items()] * (2 if twice else 1):
            archive.writestr(name, data)
    return out.getvalue()


def _encrypted(data: bytes) -> bytes:
    """``data`` with every member's encryption flag set (local header and central directory)."""
    out = bytearray(data)
    for signature, flags_at in ((b"PK\x03\x04", 6), (b"PK\x01\x02", 8)):
        for match in re.finditer(re.escape(signature), data):
            at = match.start() + flags_at
            out[at:at + 2] = struct.pack("<H", struct.unpack("<H", out[at:at + 2])[0] | 1)
    return bytes(out)


def _needs_version(data: bytes, version: int) -> bytes:
    """``data`` with every central-directory entry declaring it needs zip ``version`` to extract
    (zipfile refuses above 6.3 with NotImplementedError, not BadZipFile)."""
    out = bytearray(data)
    for match in re.finditer(re.escape(b"PK\x01\x02"), data):
        out[match.start() + 6:match.start() + 8] = struct.pack("<H", version)
    return bytes(out)


@pytest.fixture(scope="module")
def bomb() -> bytes:
    """A deflated member of 256 MiB of zeros declaring exactly that: about 256 kB on disk."""
    return _npz({"template_cells.npy": _npy((1 << 26,), body=bytes(1 << 28))}, zipfile.ZIP_DEFLATED)


FORGED = {
    "terabytes-declared": lambda: _npz({"template_cells.npy": _npy((1 << 20, 1 << 20))}),
    "more-declared-than-held": lambda: _npz({"template_cells.npy": _npy((256, 12), body=bytes(100))}),
    "less-declared-than-held": lambda: _npz({"template_cells.npy": _npy((2,), body=bytes(100))}),
    "overflowing-shape": lambda: _npz({"a.npy": _npy((1 << 62, 1 << 62, 4))}),
    "negative-shape": lambda: _npz({"a.npy": _npy((-1, 4), body=bytes(16))}),
    "pickled-objects": lambda: _npz({"a.npy": _npy((1,), "|O", b"\x80\x04N.")}),
    "structured": lambda: _npz({"a.npy": _npy((1,), [("x", "<f4")], bytes(4))}),
    "strings": lambda: _npz({"a.npy": _npy((1,), "<U4", bytes(16))}),
    "no-npy-suffix": lambda: _npz({"template_cells": _npy((1,), body=bytes(4))}),
    "raw-bytes-member": lambda: _npz({"template_cells.npy": b"not an array"}),
    "npy-version-3": lambda: _npz({"a.npy": _npy((1,), body=bytes(4)).replace(b"NUMPY\x01", b"NUMPY\x03", 1)}),
    "same-name-twice": lambda: _npz({"a.npy": _npy((1,), body=bytes(4))}, twice=True),
    "encrypted": lambda: _encrypted(_npz({"a.npy": _npy((1,), body=bytes(4))})),
    "zip-version-6.4": lambda: _needs_version(_npz({"a.npy": _npy((1,), body=bytes(4))}), 64),
    "not-a-zip": lambda: b"PK\x03\x04" + bytes(100),
    "cut-short": lambda: _npz({"a.npy": _npy((64,), body=bytes(256))})[:200],
    "empty": lambda: b"",
}


def _plant(cache: ShardCache, data: bytes) -> None:
    """``data`` as the made source of tpl v1, behind its own sha256, as :meth:`write_made` frames it."""
    assert cache.write_object("tpl", 1, MADE_SOURCE, hashlib.sha256(data).digest() + data)


def _peak_bytes(call) -> tuple[object, int]:
    tracemalloc.start()
    try:
        out = call()
        return out, tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


@pytest.mark.parametrize("forged", FORGED, ids=list(FORGED))
def test_a_forged_made_object_is_a_miss_that_allocates_no_more_than_its_bytes(cache, forged):
    data = FORGED[forged]()
    _plant(cache, data)
    made, peak = _peak_bytes(lambda: cache.read_made("tpl", 1, MADE_SOURCE))
    assert made is None
    assert peak < 4 * len(data) + (1 << 20)


def test_a_deflated_made_object_is_refused_before_it_inflates(cache, bomb):
    _plant(cache, bomb)
    made, peak = _peak_bytes(lambda: cache.read_made("tpl", 1, MADE_SOURCE))
    assert made is None and len(bomb) < 1 << 20
    assert peak < 4 * len(bomb) + (1 << 20)  # 256 MiB had it been inflated


@per_run_seed
@FUZZ
@given(data=st.data())
def test_a_damaged_npz_unpacks_to_its_arrays_or_to_none_never_larger_than_itself(data):
    name_the_seed()
    blob = bytearray(files.pack_arrays({"template_cells": np.arange(24, dtype=np.float32).reshape(2, 12),
                                        "ids": np.arange(3, dtype=np.int64)}))
    for _ in range(data.draw(st.integers(1, 4))):
        at = data.draw(st.integers(0, len(blob) - 1))
        action = data.draw(st.sampled_from(["flip", "cut", "set"]))
        if action == "flip":
            blob[at] ^= 1 << data.draw(st.integers(0, 7))
        elif action == "cut":
            del blob[at:]
            if not blob:
                break
        else:
            blob[at] = data.draw(st.integers(0, 255))
    arrays = files.unpack_arrays(bytes(blob))
    if arrays is not None:
        assert all(isinstance(a, np.ndarray) and a.dtype.kind in "biufc" for a in arrays.values())
        assert sum(a.nbytes for a in arrays.values()) <= len(blob)


def test_a_genuine_made_object_still_unpacks(cache):
    made = {"template_cells": np.arange(24, dtype=np.float32).reshape(2, 12), "ids": np.ones((3, 4))}
    assert cache.write_made("tpl", 1, MADE_SOURCE, made)
    back = cache.read_made("tpl", 1, MADE_SOURCE)
    assert back is not None and all(np.array_equal(back[k], made[k]) and back[k].dtype == made[k].dtype for k in made)
    fortran = np.asfortranarray(np.arange(6, dtype=np.float32).reshape(2, 3))
    assert cache.write_made("tpl", 1, MADE_SOURCE, {"f": fortran})
    assert np.array_equal(cache.read_made("tpl", 1, MADE_SOURCE)["f"], fortran)


def test_a_forged_made_source_of_another_shape_is_a_miss_made_again(proxy, reference_model, tmp_path):
    """Arrays of the right name and a wrong shape, behind a sha256 that matches (tampering, or an
    app update that changed what the model makes): a cache miss, never an error of the edit; the
    phone makes the source again from the template's image and keeps that instead."""
    cache_dir = tmp_path / "cache"
    planted = ShardCache(cache_dir, 1 << 30)
    assert planted.write_made("portrait", 1, MADE_SOURCE, {"template_cells": np.zeros((1, 1), np.float32)})
    planted.close()
    with EdgeSession(proxy.url, cache_dir=cache_dir, models=lambda _: reference_model) as session:
        result = session.edit(load_image(PHOTO), "portrait", version=1, policy="on-device", seed=1)
    np.testing.assert_array_equal(result.image, exact_output(reference_model, "portrait", PHOTO, seed=1))
    kept = ShardCache(cache_dir, 1 << 30)
    remade = kept.read_made("portrait", 1, MADE_SOURCE)
    kept.close()
    assert remade is not None and made_fits(remade, reference_model.source_limits())
    assert files_outside(tmp_path, cache_dir) == []
