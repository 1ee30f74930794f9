from __future__ import annotations

import numpy as np
import pytest

from sakura.platform import InvalidTemplateId, KVPair, ModelError, ShardKey, TemplateKV, validate_template_id


@pytest.mark.parametrize("good", ["a", "face-swap", "t0.v2_x", "9" * 64, "x" + "-" * 63])
def test_valid_template_ids(good):
    assert validate_template_id(good) == good


@pytest.mark.parametrize(
    "bad", ["", "-a", ".hidden", "A", "a/b", "../etc", "a b", "x" * 65, "é", "a\n", None, 3, b"ab"]
)
def test_invalid_template_ids(bad):
    with pytest.raises(InvalidTemplateId, match="invalid template id"):
        validate_template_id(bad)


def test_shard_keys_sort_step_none_first_and_validate():
    keys = [ShardKey(1, 0), ShardKey(None, 3), ShardKey(0, 2), ShardKey(0, 1)]
    assert sorted(keys) == [ShardKey(None, 3), ShardKey(0, 1), ShardKey(0, 2), ShardKey(1, 0)]
    assert str(ShardKey(None, 3)) == "s*/l3" and str(ShardKey(2, 0)) == "s2/l0"
    for step, layer in [(-1, 0), (0, -1), (0.5, 0), (0, "1")]:
        with pytest.raises(ValueError):
            ShardKey(step, layer)


def test_template_kv_reports_shape_and_bytes():
    pair = KVPair(np.zeros((2, 5, 4), np.float32), np.ones((2, 5, 4), np.float32))
    kv = TemplateKV("fp", {ShardKey(0, 1): pair, ShardKey(0, 0): pair, ShardKey(1, 0): pair})
    assert kv.keys == [ShardKey(0, 0), ShardKey(0, 1), ShardKey(1, 0)]
    assert kv.steps == [0, 1] and kv.layers == [0, 1] and kv.template_tokens == 5
    assert kv.nbytes == 3 * 2 * 2 * 5 * 4 * 4
    assert kv.nbytes_fp16 == kv.nbytes // 2
    with pytest.raises(ModelError):
        kv[ShardKey(5, 5)]


def test_kv_pair_rejects_mismatched_arrays():
    with pytest.raises(ModelError):
        KVPair(np.zeros((2, 5, 4)), np.zeros((2, 4, 4)))
    with pytest.raises(ModelError):
        KVPair(np.zeros((2, 5, 4), np.float32), np.zeros((2, 5, 4), np.float16))


@pytest.mark.parametrize("text,number", [("0", 0), ("7", 7), ("1000000", 1000000)])
def test_numbers_from_urls_are_canonical_ascii_decimal(text, number):
    from sakura.platform.layout import parse_number

    assert parse_number(text) == number


@pytest.mark.parametrize(
    "text", ["", "01", "+1", "-1", " 1", "1 ", "1\n", "\u00b2", "\u0661", "\uff11", "1_0", "12345678901"]
)
def test_anything_else_is_not_a_number(text):
    from sakura.platform.layout import parse_number

    assert parse_number(text) is None


@pytest.mark.parametrize("ref", ["\u00b2", "\u0661", "01", "1a", "0", 0, True, "Latest", "-1"])
def test_version_refs_are_ascii_numbers_or_aliases(ref):
    from sakura.platform.layout import InvalidName, version_ref

    with pytest.raises(InvalidName):
        version_ref(ref)
    assert version_ref("12") == 12 and version_ref(3) == 3 and version_ref("latest") is None
