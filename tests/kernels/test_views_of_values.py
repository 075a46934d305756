"""Views of values that are not in memory whose eager layout is not plain: a functional
``copy`` into a view keeps the view's strides (gaps between rows) and storage offset, and a view
of it must address those, not a dense copy's. In a training graph this is how AOTAutograd
writes the gradient of an in-place op on a view (``x[..., 1:].mT.mul_(c)``)."""
import pytest
import torch

from .helpers import check

aten = torch.ops.aten


def _copy_into_view_then_view(c):
    p = aten.permute(aten.slice(c, 1, 1), [1, 0])          # strides (1, 4), offset 1
    m = aten.mul(aten.clone(p, memory_format=torch.contiguous_format), -0.25)
    c1 = aten.copy(p, m)                                     # eager keeps p's layout
    return aten.permute(c1, [1, 0]) + 0


def _copy_into_view_then_slice_scatter(c):
    p = aten.permute(aten.slice(c, 1, 1), [1, 0])
    c1 = aten.copy(p, aten.clone(p, memory_format=torch.contiguous_format) * 3)
    return aten.slice_scatter(c, aten.permute(c1, [1, 0]), 1, 1)


def _copy_into_strided_view(c):
    p = c[::2, 1::2]                                         # gaps in both dims, offset 1
    c1 = aten.copy(p, torch.ones_like(p).cumsum(0))
    return c1.t()[1:] * 2, c1.reshape(-1)


@pytest.mark.parametrize("fn", [_copy_into_view_then_view, _copy_into_view_then_slice_scatter,
                                _copy_into_strided_view])
def test_views_of_a_copy_into_a_view(fn):
    check(fn, torch.arange(20.0).view(4, 5))


@pytest.mark.parametrize("op", ["mul_", "div_", "pow_"])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float16])
def test_in_place_op_on_a_transposed_slice_of_an_input(op, dtype):
    def fn(a):
        getattr(a[..., 1:].mT, op)(-0.25 if op != "pow_" else 2.0)
        return (a,)
    x = (torch.randn(5, 4).abs() + 0.1).to(dtype).requires_grad_()
    check(lambda x: fn(x.clone()), x, grad=True)


def test_in_place_write_through_an_offset_view_of_a_view_input():
    base = torch.arange(23, dtype=torch.int32)
    a = base[3:23].view(1, 5, 4)

    def fn(a0):
        v0 = a0.contiguous()       # a0 itself: writes through it write the input
        v1 = a0.contiguous()
        v2 = torch.nn.functional.pad(v1, (1, -1, 2, 2))
        v0[:1, 2, None] = 3
        v0[::3, :, :1, None] = torch.full((1, 5, 1, 1), 3, dtype=v0.dtype, device=v0.device)
        v3 = v1.index_put((torch.tensor([0], device=a0.device),),
                          torch.arange(20, device=a0.device).view(1, 5, 4).to(v0.dtype), True)
        return v2.abs(), v3
    ref_base = base.clone()
    ref = fn(ref_base[3:23].view(1, 5, 4))
    out = torch.compile(fn, backend="solder")(a)
    for o, r in zip(out, ref):
        assert torch.equal(o, r)
    assert torch.equal(base, ref_base)


def _copy_into_rows_with_a_step(b):
    p = b[:, ::3]                       # strides (10, 3): neither divides the other
    c1 = aten.copy(p, torch.arange(8.0, device=b.device).view(2, 4))
    return c1.t() * 1, c1[:, 1:3] + 0, c1.reshape(-1) * 2


def test_views_of_a_copy_into_a_view_whose_strides_do_not_nest():
    check(_copy_into_rows_with_a_step, torch.zeros(2, 10))


def _write_through_an_input_with_blocks_of_rows(a0):
    # a0 = b[:, 1::3] of a (2, 10, 2) b: strides (20, 6, 1), where 6 does not divide 20
    a0[..., -1][1:] += torch.full((1, 3), -1.5, dtype=a0.dtype, device=a0.device)
    return (torch.rot90(a0, 1, (0, 2)) * 1,)


def test_views_of_an_updated_input_whose_strides_do_not_nest():
    def run(f):
        b = torch.arange(40.0).view(2, 10, 2)
        out = f(b[:, 1::3])
        return out, b
    (ref,), base_ref = run(_write_through_an_input_with_blocks_of_rows)
    (out,), base = run(torch.compile(_write_through_an_input_with_blocks_of_rows,
                                     backend="solder"))
    assert torch.equal(out, ref) and torch.equal(base, base_ref)
