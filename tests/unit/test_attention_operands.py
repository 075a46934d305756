"""CUDA attention kernels read every operand with a unit last stride and the bias in 16-byte
aligned rows (solder/lower/extern.py). A bias that reaches them as a folded view, an expand of a
[.., L, 1] mask or a slice of eager's padding, is stored again in such a layout; one that is
already fit is passed as it is. Checked on the lowered graph: the ops have no CPU kernel."""
import sympy
import torch
from torch.fx.experimental.proxy_tensor import make_fx

from solder import config
from solder.ir.nodes import ExternBuffer
from solder.codegen.target import triton_target
from solder.lower.graph import GraphLowering

aten = torch.ops.aten
B, H, L, S, E = 2, 2, 7, 7, 8


def _bias_arg(fn, *args):
    gm = make_fx(fn, tracing_mode="fake")(*args)
    graph = GraphLowering(gm, "inference", config.resolve(None), "g", triton_target()).run()
    (call,) = [b for b in graph.buffers if isinstance(b, ExternBuffer)
               and b.op is aten._scaled_dot_product_efficient_attention.default]
    bias = call.args[3]
    return [int(n) for n in bias.size], [int(s) for s in bias.stride], sympy.sympify(bias.offset)


def _qkv():
    return torch.randn(B, H, L, E), torch.randn(B, H, S, E), torch.randn(B, H, S, E)


def test_a_mask_expanded_over_keys_is_stored_with_unit_last_stride():
    # a [1, 1, L, 1] mask expanded to [B, H, L, S]: stride 0 along the keys as a view
    def f(q, k, v, m):
        bias = torch.where(m, 0.0, float("-inf")).expand(B, H, L, S)
        return (aten._scaled_dot_product_efficient_attention(q, k, v, bias, False)[0],)
    size, stride, offset = _bias_arg(f, *_qkv(), torch.randn(1, 1, L, 1) > 0)
    assert size == [B, H, L, S]
    assert stride[-1] == 1 and stride[2] % 16 == 0 and offset == 0
    assert stride[:2] == [0, 0]   # batch and heads stay broadcast: stored once


def test_eager_padding_sliced_away_is_kept_aligned():
    # what SDPA records on CUDA for an unaligned mask: pad to 16, slice back
    def f(q, k, v, m):
        bias = torch.where(m, 0.0, float("-inf")).expand(B, H, L, S)
        bias = aten.constant_pad_nd(bias, [0, 16 - S % 16])[..., :S]
        return (aten._scaled_dot_product_efficient_attention(q, k, v, bias, False)[0],)
    size, stride, _ = _bias_arg(f, *_qkv(), torch.randn(B, H, L, 1) > 0)
    assert size == [B, H, L, S] and stride[-1] == 1
    assert all(s % 16 == 0 for s in stride[:-1]), stride


def test_a_fit_bias_input_is_passed_as_it_is():
    def f(q, k, v, bias):
        return (aten._scaled_dot_product_efficient_attention(q, k, v, bias, False)[0],)
    size, stride, _ = _bias_arg(f, *_qkv(), torch.randn(B, H, L, 16)[..., :S])
    assert size == [B, H, L, S] and stride == [H * L * 16, L * 16, 16, 1]
