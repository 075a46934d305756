"""Constant attention masks (capture/attention_masks.py): an all-allow mask is dropped, a causal
one becomes is_causal=True, and every other mask stays, with eager's results either way."""
import pytest
import torch
import torch.nn.functional as F

import solder
from solder.capture.attention_masks import _classify, simplify_attention_masks

B, H, L, E = 2, 2, 7, 8   # 7 tokens: a mask row that is not 16-byte aligned, as ViT's 197
# (every tensor the functions make names q's device: Dynamo does not apply the default device
# the suite sets on the GPU to torch.arange & co.)


def _qkv(seed=0, s=L):
    # drawn on the CPU, then on the default device (the GPU when the suite runs there)
    g = torch.Generator(device="cpu").manual_seed(seed)
    q, k, v = (torch.randn(B, H, n, E, generator=g, device="cpu") for n in (L, s, s))
    device = torch.empty(0).device
    return q.to(device), k.to(device), v.to(device)


def bidirectional(q, k, v):
    # transformers' encoder mask, traced: q_idx >= 0 for every pair, expanded
    i = torch.arange(q.shape[2], device=q.device)[None, None, :, None]
    mask = (i >= 0).expand(q.shape[0], 1, q.shape[2], k.shape[2])
    return F.scaled_dot_product_attention(q, k, v, attn_mask=mask)


def causal(q, k, v):
    qi = torch.arange(q.shape[2], device=q.device)[:, None]
    ki = torch.arange(k.shape[2], device=q.device)[None, :]
    pad = q.new_ones(q.shape[0], k.shape[2], dtype=torch.bool)   # sizes only: no padding
    mask = (ki <= qi)[None, None] & pad[:, None, None, :]
    return F.scaled_dot_product_attention(q, k, v, attn_mask=mask)


def causal_float(q, k, v):
    n = q.shape[2]
    mask = torch.zeros(n, n, device=q.device).masked_fill(
        torch.ones(n, n, dtype=torch.bool, device=q.device).triu(1), float("-inf"))
    return F.scaled_dot_product_attention(q, k, v, mask)


def causal_by_methods(q, k, v):
    # operators called as methods, as some transformers versions write them
    qi = torch.arange(q.shape[2], device=q.device)[:, None]
    ki = torch.arange(k.shape[2], device=q.device)[None, :]
    same_doc = torch.zeros(k.shape[2], dtype=torch.long, device=q.device)
    mask = ki.__le__(qi).__and__(same_doc[:, None].__eq__(same_doc[None, :]))
    return F.scaled_dot_product_attention(q, k, v, attn_mask=mask)


def padded(q, k, v):
    # the last key is masked out: a real mask, kept
    allow = torch.arange(k.shape[2], device=q.device) < k.shape[2] - 1
    return F.scaled_dot_product_attention(q, k, v, attn_mask=allow[None, None, None, :])


def from_values(q, k, v):
    # depends on the input's values: never folded
    return F.scaled_dot_product_attention(q, k, v, attn_mask=q[..., :1] > -10)


def additive_bias(q, k, v):
    n = q.shape[2]
    bias = torch.arange(n, dtype=torch.float32, device=q.device)[None, :] * 0.1
    return F.scaled_dot_product_attention(q, k, v, attn_mask=bias)


def written_in_place(q, k, v):
    # all True when made, causal after tril_: Dynamo hands SDPA the tensor, not the write
    m = torch.ones(q.shape[2], k.shape[2], dtype=torch.bool, device=q.device)
    m.tril_()
    return F.scaled_dot_product_attention(q, k, v, attn_mask=m)


def set_through_a_view(q, k, v):
    m = torch.ones(q.shape[2], k.shape[2], dtype=torch.bool, device=q.device)
    m.view(-1)[3] = False
    return F.scaled_dot_product_attention(q, k, v, attn_mask=m)


def set_by_index(q, k, v):
    m = torch.ones(q.shape[2], k.shape[2], dtype=torch.bool, device=q.device)
    m[:, -1] = False
    return F.scaled_dot_product_attention(q, k, v, attn_mask=m)


CASES = {"bidirectional": (bidirectional, "all-allow"), "causal": (causal, "causal"),
         "causal_float": (causal_float, "causal"),
         "causal_by_methods": (causal_by_methods, "causal"), "padded": (padded, None),
         "from_values": (from_values, None),
         "written_in_place": (written_in_place, None),
         "set_through_a_view": (set_through_a_view, None), "set_by_index": (set_by_index, None), "additive_bias": (additive_bias, None)}


@pytest.mark.parametrize("name", sorted(CASES))
def test_constant_masks_are_dropped_or_made_causal_and_others_kept(name):
    fn, expected = CASES[name]
    q, k, v = _qkv()
    report = solder.explain(fn, q, k, v)
    if expected is None:
        assert report.rewrites == []
        assert len(report.notes) == 1 and "kept" in report.notes[0], report.notes
    else:
        assert len(report.rewrites) == 1 and expected in report.rewrites[0], report.rewrites
        assert "test_attention_masks.py:" in report.rewrites[0]
        # the graph AOTAutograd traced builds no mask any more (boolean, or float [L, L])
        fx_text = "\n".join(g.fx_graph for g in report.graphs)
        assert "b8[" not in fx_text and f"f32[{L}, {L}]" not in fx_text, fx_text
    out = torch.compile(fn, backend="solder")(q, k, v)
    torch.testing.assert_close(out, _reference(fn, q, k, v), rtol=1e-4, atol=2e-5)


def _reference(fn, *args):
    # eager on the math path: torch 2.11's memory-efficient kernel rejects the [B, H, L, 1] mask
    # of from_values expanded over the keys ("(*bias): last dimension must be contiguous", seen
    # on the H200), which Solder's compiled call stores in aligned rows and runs
    from torch.nn.attention import SDPBackend, sdpa_kernel
    with sdpa_kernel([SDPBackend.MATH]):
        return fn(*args)


def test_the_option_turns_it_off():
    q, k, v = _qkv()
    report = solder.explain(causal, q, k, v, options={"simplify_attention_masks": False})
    assert report.rewrites == []


def test_symbolic_sizes_keep_the_mask():
    # at another length the mask could differ: with dynamic shapes nothing is folded
    q, k, v = _qkv()
    report = solder.explain(bidirectional, q, k, v, dynamic=True)
    assert report.rewrites == []


def test_the_pass_leaves_a_graph_without_sdpa_alone():
    gm = torch.fx.symbolic_trace(lambda x: (torch.arange(4) >= 0) & (x > 0))
    before = gm.code
    assert simplify_attention_masks(gm) == [] and gm.code == before


def test_a_causal_mask_for_fewer_queries_than_keys_is_top_left_aligned():
    # SDPA's is_causal is ones(L, S).tril(): with L < S a bottom-right mask is not it
    q, k, v = _qkv(s=L + 3)

    def bottom_right(q, k, v):
        qi = torch.arange(q.shape[2], device=q.device)[:, None] + (k.shape[2] - q.shape[2])
        ki = torch.arange(k.shape[2], device=q.device)[None, :]
        return F.scaled_dot_product_attention(q, k, v, attn_mask=ki <= qi)
    report = solder.explain(bottom_right, q, k, v)
    assert report.rewrites == []
    report = solder.explain(causal, q, k, v)
    assert len(report.rewrites) == 1 and "causal" in report.rewrites[0]
    out = torch.compile(causal, backend="solder")(q, k, v)
    torch.testing.assert_close(out, causal(q, k, v), rtol=1e-4, atol=2e-5)


def test_a_mask_that_would_widen_the_output_is_not_classified():
    # an all-True mask with a batch dim q lacks: dropping it would change the broadcast shape
    q, k = torch.zeros(H, L, E), torch.zeros(H, L, E)
    assert _classify(torch.ones(3, 1, L, L, dtype=torch.bool), q, k) is None
    assert _classify(torch.ones(1, L, L, dtype=torch.bool), q, k) == "none"
    assert _classify(torch.ones(L, L, dtype=torch.bool).tril(), q, k) == "causal"
    assert _classify(torch.ones(L, L, dtype=torch.int64), q, k) is None   # not a mask dtype


def test_an_exported_program_gets_the_same_rewrite(tmp_path, caplog):
    # solder.aot: torch.export keeps aten.scaled_dot_product_attention until the decompositions;
    # the causal mask (built from ATen ops there) becomes is_causal=True before them
    import logging

    import solder.aot as aot

    class Attention(torch.nn.Module):
        def forward(self, q, k, v):
            return causal(q, k, v)
    q, k, v = _qkv()
    path = tmp_path / "attn.solder"
    with caplog.at_level(logging.INFO, logger="solder.aot"):
        aot.compile(Attention(), (q, k, v), str(path))
    assert any("causal: is_causal=True" in r.getMessage() for r in caplog.records)
    torch.testing.assert_close(aot.load(str(path))(q, k, v), causal(q, k, v),
                               rtol=1e-4, atol=2e-5)


def test_aten_ops_are_folded_only_when_pure():
    from solder.capture.attention_masks import _aten_kind
    aten = torch.ops.aten
    assert _aten_kind(aten.arange.default) == "pure"
    assert _aten_kind(aten.new_ones.default) == "sizes"
    for op in (aten.rand.default, aten.bernoulli.p, aten.empty.memory_format,
               aten.new_empty.default, aten.uniform_.default, aten.add_.Tensor):
        assert _aten_kind(op) is None, op


def test_a_kept_mask_says_why():
    q, k, v = _qkv()
    note, = solder.explain(from_values, q, k, v).notes
    assert "depends on the values of" in note and "placeholder" in note, note
    note, = solder.explain(padded, q, k, v).notes
    assert "neither all-allow nor causal" in note, note
    assert "note: attention mask" in str(solder.explain(padded, q, k, v))


def test_size_limit_counts_memory_not_expanded_elements():
    from solder.capture.attention_masks import MAX_BYTES, _too_large
    # a [1, 1, 1, S] row expanded to [B, 1, L, S] holds S elements, however many it shows
    assert not _too_large(torch.ones(1, 1, 1, 4096, dtype=torch.bool, device="meta")
                          .expand(64, 1, 16384, 4096))
    assert _too_large(torch.empty(MAX_BYTES + 1, dtype=torch.bool, device="meta"))


def test_writes_into_a_mask_are_found_in_aten_graphs_too():
    # torch.export keeps in-place ATen ops until its decompositions
    from solder.capture.attention_masks import _writes_into
    g = torch.fx.Graph()
    m = g.placeholder("m")
    other = g.placeholder("other")
    tril_ = g.call_function(torch.ops.aten.tril_.default, (m,))
    copy_ = g.call_function(torch.ops.aten.copy_.default, (other, m))
    assert _writes_into(tril_, m)
    assert not _writes_into(copy_, m) and _writes_into(copy_, other)   # copy_ reads m


def test_layers_sharing_one_mask_have_it_looked_at_once(monkeypatch):
    # a model's layers all take the one mask it built: it is classified once, and every layer's
    # call is rewritten
    import solder.capture.attention_masks as masks
    calls = []
    real = masks._classify
    monkeypatch.setattr(masks, "_classify", lambda *a: calls.append(1) or real(*a))

    def three_layers(q, k, v):
        qi = torch.arange(q.shape[2], device=q.device)[:, None]
        ki = torch.arange(k.shape[2], device=q.device)[None, :]
        mask = (ki <= qi)[None, None]
        for _ in range(3):
            q = F.scaled_dot_product_attention(q, k, v, attn_mask=mask)
        return q
    q, k, v = _qkv()
    report = solder.explain(three_layers, q, k, v)
    assert len(report.rewrites) == 3 and all("causal" in r for r in report.rewrites)
    assert calls == [1]
    out = torch.compile(three_layers, backend="solder")(q, k, v)
    torch.testing.assert_close(out, _reference(three_layers, q, k, v), rtol=1e-4, atol=2e-5)
