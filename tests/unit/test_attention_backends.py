"""``attention_backends``: which fused attention kernel SDPA records when a graph is captured."""
import pytest
import torch
import torch.nn.functional as F

import solder
from solder.capture.attention_backends import parse


def test_names_are_checked():
    assert parse("") == [] and parse(" Flash, cudnn ") == ["flash", "cudnn"]
    with pytest.raises(ValueError, match="unknown backend.*'fa3'"):
        parse("flash,fa3")


def _sdpa(q, k, v):
    return F.scaled_dot_product_attention(q, k, v, is_causal=True) * 2


def test_the_captured_graph_calls_the_chosen_kernel():
    # PyTorch's own choice records an attention op (torch 2.13 its fused CPU kernel); restricted
    # to math, the captured graph holds the math decomposition instead, with eager's values
    q, k, v = (torch.randn(1, 2, 8, 4) for _ in range(3))
    own = solder.explain(_sdpa, q, k, v)
    assert "aten._scaled_dot_product" in own.graphs[0].fx_graph, own.graphs[0].fx_graph
    math = solder.explain(_sdpa, q, k, v, options={"attention_backends": "math"})
    assert "aten._scaled_dot_product" not in math.graphs[0].fx_graph, math.graphs[0].fx_graph
    out = torch.compile(_sdpa, backend="solder", options={"attention_backends": "math"})(q, k, v)
    torch.testing.assert_close(out, _sdpa(q, k, v), rtol=1e-5, atol=1e-5)


def test_a_bad_setting_names_the_option():
    q = torch.randn(1, 1, 4, 4)
    with pytest.raises(Exception, match="attention_backends"):
        torch.compile(_sdpa, backend="solder", options={"attention_backends": "fast"})(q, q, q)
