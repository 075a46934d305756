"""A FakeTensor whose strides overlap where eager's result does not (torch 2.11's
select_scatter of an expanded gradient kept its zero stride: fuzz seed 500530, a wrong gradient
on the GPU only). A result in memory of its own never overlaps itself, and its views are taken
from the value's own layout."""
import pytest
import torch
from torch.fx.experimental.proxy_tensor import make_fx

from solder.capture.passes import prepare_graph
from solder.config import Config
from solder.pipeline import CompileContext, compile_graph

aten = torch.ops.aten


def _backward_of_select_scatter_sum(t):
    # the backward graph of select_scatter(a.reshape(-1), 0.5, -1, -3).sum(0, keepdim=True)
    e = aten.expand.default(t, [4])
    zero = aten.full.default([], 0, dtype=torch.float32, device=t.device)
    s = aten.select_scatter.default(e, zero, -1, -3)
    return (aten.view.default(s, [2, 2]),)


def _with_strides(gm, strides):
    for n in gm.graph.nodes:
        if n.name in strides:
            v = n.meta["val"]
            with v.fake_mode:
                n.meta["val"] = torch.empty_strided(v.shape, strides[n.name], dtype=v.dtype,
                                                    device=v.device)
    return gm


@pytest.mark.parametrize("view_stride", [(2, 1), (0, 0)])
def test_a_scatter_whose_fake_strides_overlap_is_computed_dense(view_stride):
    t = torch.tensor([3.0], device=torch.get_default_device())
    gm = make_fx(_backward_of_select_scatter_sum, tracing_mode="fake")(t)
    # torch 2.11's FakeTensor on CUDA; the view's from it, or as eager's (both seen in kind)
    _with_strides(gm, {"select_scatter": (0,), "view": view_stride})
    prepare_graph(gm)
    compiled = compile_graph(gm, [t], "inference", CompileContext(Config()))
    (got,) = compiled([t])
    assert got.tolist() == [[3.0, 0.0], [3.0, 3.0]]
    assert got.stride() == (2, 1)


def test_fresh_strides_keep_gaps_and_drop_overlap():
    from solder.ir.nodes import fresh_strides
    assert fresh_strides((4,), (0,)) == (1,)
    assert fresh_strides((2, 3), (1, 0)) == (3, 1)
    assert fresh_strides((2, 3), (6, 2)) == (6, 2)      # gaps: kept
    assert fresh_strides((1, 3), (0, 1)) == (0, 1)      # size-1 dims carry any stride
    assert fresh_strides((0, 3), (0, 0)) == (0, 0)      # no elements


def test_empty_strided_keeps_the_callers_overlapping_strides():
    fn = torch.compile(lambda x: torch.empty_strided((4, 3), (0, 1), device=x.device).fill_(2) + x,
                       backend="solder")
    x = torch.ones(3, device=torch.get_default_device())
    assert fn(x).tolist() == [[3.0] * 3] * 4


def test_a_library_result_whose_fake_strides_overlap_is_kept_dense():
    # an op Solder does not lower runs in ATen: the wrapper copies its result into the layout
    # the graph was compiled for, which must not overlap (a copy into a zero stride keeps one
    # element of each run)
    def f(x):
        h = aten.histc.default(x, 4, 0, 4)
        return (aten.view.default(h, [2, 2]),)
    x = torch.tensor([0.5, 1.5, 1.5, 3.5], device=torch.get_default_device())
    gm = make_fx(f, tracing_mode="fake")(x)
    _with_strides(gm, {"histc": (0,), "view": (0, 0)})
    prepare_graph(gm)
    ctx = CompileContext(Config())
    (got,) = compile_graph(gm, [x], "inference", ctx)([x])
    assert got.tolist() == [[1.0, 2.0], [0.0, 1.0]]
