"""The phone attends to version 2 shards in factored form where that counts fewer FLOPs; the
result equals rebuilding K/V and attending, within float tolerance."""

from __future__ import annotations

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from sakura.platform.codec import decode_shard, default_levels, encode_shards
from sakura.platform.images import fit_image, load_image
from sakura.platform.kv import FactoredPair, KVShard, LowRank, ShardKey, TemplateKV
from sakura.platform.models import EditRequest, Schedule, Template, load_model
from sakura.platform.models import _factored as factored
from sakura.platform.models._factored import ShardFactors
from sakura.platform.models.factored_cost import AttentionShape, factored_is_cheaper


def _low_rank(tokens: int, heads: int, head_dim: int, rank: int, rng: np.random.Generator) -> LowRank:
    width = heads * head_dim
    return LowRank(rng.standard_normal((tokens, rank)).astype(np.float32),
                   rng.standard_normal((rank, width)).astype(np.float32) / 4,
                   rng.standard_normal(width).astype(np.float32))


@pytest.mark.parametrize("fused", [True, False], ids=["fused-kernel", "softmax"])
@pytest.mark.parametrize("k_rank,v_rank", [(3, 2), (2, 5), (5, 0), (8, 8)])
def test_factored_attention_equals_rebuild_then_attend(k_rank, v_rank, fused, monkeypatch):
    monkeypatch.setattr(factored, "FUSED_LSE", fused and factored.FUSED_LSE)
    rng = np.random.default_rng(0)
    heads, tokens, head_dim, queries, request = 3, 40, 8, 12, 9
    k, v = (_low_rank(tokens, heads, head_dim, rank, rng) for rank in (k_rank, v_rank))
    pair = FactoredPair(k, v, heads, np.dtype(np.float32))
    query, key, value = (torch.randn(2, heads, n, head_dim, generator=torch.Generator().manual_seed(i))
                         for i, n in enumerate((queries, request, request)))
    monkeypatch.setattr(factored, "factored_is_cheaper", lambda *a: True)
    template = factored.template_tensors(pair, key, queries, uses=1)
    assert isinstance(template, ShardFactors)
    got = factored.attend(query, key, value, template)
    rebuilt = pair.dense()
    k_all = torch.cat([key, torch.from_numpy(rebuilt.k)[None].expand(2, -1, -1, -1)], dim=2)
    v_all = torch.cat([value, torch.from_numpy(rebuilt.v)[None].expand(2, -1, -1, -1)], dim=2)
    torch.testing.assert_close(got, F.scaled_dot_product_attention(query, k_all, v_all), rtol=1e-5, atol=1e-5)


def test_the_cheaper_form_is_chosen_by_counted_flops():
    many_queries = AttentionShape(batch=1, heads=4, queries=256, tokens=256, head_dim=32, uses=8)
    assert factored_is_cheaper(many_queries, k_rank=12, v_rank=4)
    assert not factored_is_cheaper(many_queries, k_rank=40, v_rank=40)  # more rank than a head has dims
    once = AttentionShape(batch=1, heads=4, queries=4, tokens=4096, head_dim=32, uses=1)
    assert factored_is_cheaper(once, k_rank=40, v_rank=40)  # no rebuild of 4096 tokens for 4 queries


def test_a_shard_without_a_stored_basis_is_attended_to_rebuilt():
    rng = np.random.default_rng(1)
    k = _low_rank(16, 2, 4, 3, rng)
    identity = LowRank(rng.standard_normal((16, 8)).astype(np.float32), None, np.zeros(8, np.float32))
    template = factored.template_tensors(FactoredPair(k, identity, 2, np.dtype(np.float32)), torch.zeros(1), 64, 8)
    assert isinstance(template, tuple) and template[0].shape == (1, 2, 16, 4)


class _FactoredSource:
    """Template KV whose shards arrive as the phone decodes version 2 payloads: factored."""

    def __init__(self, kv: TemplateKV, shards: dict[ShardKey, KVShard]) -> None:
        self.model_fingerprint, self._kv, self._shards = kv.model_fingerprint, kv, shards

    @property
    def keys(self) -> list[ShardKey]:
        return self._kv.keys

    @property
    def template_tokens(self) -> int:
        return self._kv.template_tokens

    def __getitem__(self, key: ShardKey) -> KVShard:
        return self._shards[key]


def test_a_reference_edit_replayed_on_factors_equals_one_on_rebuilt_kv(monkeypatch):
    adapter = load_model("reference")
    res = adapter.resolution
    template = Template(fit_image(load_image("skimage:coffee"), res), "warm tones", "style_transfer")
    request = EditRequest(fit_image(load_image("skimage:camera"), res), seed=4)
    schedule = Schedule(steps=2)
    kv = adapter.capture(template, EditRequest(fit_image(load_image("skimage:chelsea"), res), seed=1), schedule).kv
    payloads = encode_shards([kv[k] for k in kv.keys], default_levels()["compact"])
    chosen = []
    real = factored.template_tensors
    monkeypatch.setattr("sakura.platform.models._attention.template_tensors",
                        lambda *a: chosen.append(real(*a)) or chosen[-1])
    on_factors = adapter.replay(_FactoredSource(kv, {k: decode_shard(p, factored=True) for k, p in
                                                     zip(kv.keys, payloads)}), template.prompt, request, schedule)
    assert any(isinstance(t, ShardFactors) for t in chosen), "no shard was attended to factored"
    rebuilt = TemplateKV(kv.model_fingerprint, {k: decode_shard(p) for k, p in zip(kv.keys, payloads)})
    on_rebuilt = adapter.replay(rebuilt, template.prompt, request, schedule)
    torch.testing.assert_close(on_factors, on_rebuilt, rtol=1e-4, atol=1e-4)
