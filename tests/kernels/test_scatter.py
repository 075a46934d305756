"""View-scatters, index-scatters, gathers and in-place writes through views: values, mutated
inputs, gradients, and the kernel count of each op's typical use."""
import pytest
import torch
import torch.fx as fx
from torch.fx.experimental.proxy_tensor import make_fx

import solder
from solder.capture.passes import prepare_graph
from solder.config import Config
from solder.pipeline import CompileContext, compile_graph

from .helpers import assert_same, check, clone_args



def T(data, **kw):
    # on the tests' device explicitly: inside a compiled function Dynamo does not apply
    # torch.set_default_device to tensors built from python data
    return torch.tensor(data, device=torch.get_default_device(), **kw)


def r(*shape, dtype=torch.float32):
    return torch.randn(*shape).to(dtype)


def kernels_of(report):
    return [len(g.kernels) for g in report.graphs]


def example(a, b):
    return torch.as_strided_scatter(a * 8 + 10, b * 2 - 4, size=(a.numel() // 2,), stride=(2,))


def test_issue_example_is_one_kernel():
    report = check(example, r(8), r(4), kernels=1)
    assert not report.fallbacks and not report.externs
    src = report.source()
    assert "tl.where" in src and src.count("tl.store") == 1


def _put_split(a, b, i, j):
    a = a + 1
    a[i, :, j] = b  # advanced indices apart: their dim goes first
    return a


# -- forward: kernel counts of each op's typical use (inference graphs) -----------------------
# region scatters are one pass over the base, fused with producers and consumers; data-dependent
# places need the base copied first, then a store kernel (fused with values and indices)
FORWARD = {
    "as_strided_scatter": (lambda a, b: torch.as_strided_scatter(a.exp(), b + 1, (2, 2), (3, 1), 1) * 2,
                           [r(4, 3), r(2, 2)], 1),
    "slice_scatter": (lambda a, b: torch.slice_scatter(a * 2, b.exp(), 1, 1, 5, 2).sum(1),
                      [r(4, 6), r(4, 2)], 1),
    "slice_scatter_neg": (lambda a, b: torch.slice_scatter(a, b, 0, -3, None), [r(5, 2), r(3, 2)], 1),
    "select_scatter": (lambda a, b: torch.select_scatter(a, b * 3, 1, -2), [r(4, 6), r(4)], 1),
    "diagonal_scatter": (lambda a, b: torch.diagonal_scatter(a, b, 1), [r(4, 6), r(4)], 1),
    "diagonal_scatter_neg": (lambda a, b: torch.diagonal_scatter(a, b, -1, 1, 0), [r(4, 6), r(4)], 1),
    "nested": (lambda a, b: torch.slice_scatter(a, torch.select_scatter(a[:, 1:3], b, 1, 0), 1, 1, 3),
               [r(4, 6), r(4)], 1),
    "index_put": (lambda a, b, i: torch.index_put(a, (i,), b.abs()), [r(4, 6), r(3, 6), T([0, 2, 3])], 2),
    "index_put_acc": (lambda a, b, i: torch.index_put(a, (i,), b, accumulate=True),
                      [r(4, 6), r(3, 6), T([0, 2, 2])], 2),
    "index_put_2idx": (lambda a, b, i, j: torch.index_put(a, (i, j), b),
                       [r(4, 6), r(3), T([0, 2, 3]), T([1, 1, -1])], 2),
    "index_put_split": (lambda a, b, i, j: _put_split(a, b, i, j),
                        [r(3, 2, 4), r(5, 2), T([0, 2, 1, 1, 0]), T([3, 3, 0, 0, 1])], 2),
    "index_put_bcast": (lambda a, b, i: torch.index_put(a, (i,), b), [r(4, 6), r(6), T([0, 2])], 2),
    "index_put_bool": (lambda a, b, m: torch.index_put(a, (m,), b), [r(4, 6), r(6), T([1, 0, 1, 0]).bool()], 1),
    "index_put_bool_acc": (lambda a, b, m: torch.index_put(a, (m,), b, True),
                           [r(4, 6), r(1, 6), T([1, 0, 1, 1]).bool()], 1),
    "scatter": (lambda a, b, i: torch.scatter(a, 1, i, b), [r(4, 6), r(4, 2), T([[0, 1], [2, 3], [5, 4], [0, 3]])], 2),
    "scatter_value": (lambda a, i: torch.scatter(a, 0, i, 1.5), [r(4, 6), T([[0, 1], [2, 3]])], 2),
    "scatter_add": (lambda a, b, i: torch.scatter_add(a, 0, i, b * 2), [r(4, 6), r(2, 2), T([[0, 1], [0, 1]])], 2),
    "scatter_reduce_sum": (lambda a, b, i: torch.scatter_reduce(a, 0, i, b, "sum", include_self=False),
                           [r(4, 6), r(2, 2), T([[0, 1], [0, 1]])], 3),
    "scatter_reduce_mean": (lambda a, b, i: torch.scatter_reduce(a, 0, i, b, "mean"),
                            [r(4, 6), r(2, 2), T([[0, 1], [0, 1]])], 3),
    # amax/amin: copy, atomic update, then NaN stored where a source is NaN and the input's
    # NaN kept (eager propagates NaN; an atomic max keeps a number): two more kernels
    "scatter_reduce_amax": (lambda a, b, i: torch.scatter_reduce(a, 0, i, b, "amax"),
                            [r(4, 6), r(3, 2), T([[0, 1], [0, 1], [3, 1]])], 4),
    "scatter_reduce_amin": (lambda a, b, i: torch.scatter_reduce(a, 0, i, b, "amin", include_self=False),
                            [r(4, 6), r(2, 2), T([[0, 1], [0, 1]])], 4),
    "index_copy": (lambda a, b, i: a.index_copy(0, i, b), [r(4, 6), r(2, 6), T([1, 3])], 2),
    "index_add": (lambda a, b, i: a.index_add(0, i, b, alpha=2), [r(4, 6), r(3, 6), T([0, 2, 2])], 2),
    "masked_scatter": (lambda a, b, m: a.masked_scatter(m, b), [r(4, 6), r(24), torch.rand(4, 6) > 0.5], 2),
    "gather": (lambda a, i: torch.gather(a * 2, 1, i) + 1, [r(4, 6), T([[0, 1], [2, 3], [1, 1], [0, 5]])], 1),
    "index_select": (lambda a, i: torch.index_select(a.exp(), 0, i), [r(4, 6), T([0, 2, 2])], 1),
}


@pytest.mark.parametrize("name", list(FORWARD))
def test_forward(name):
    fn, args, kernels = FORWARD[name]
    report = check(fn, *args, kernels=kernels)
    assert not report.fallbacks, report


def test_masked_scatter_counts_with_a_library_cumsum():
    report = check(lambda a, b, m: a.masked_scatter(m, b), r(4, 6), r(24), torch.rand(4, 6) > 0.5)
    assert [e.op for e in report.externs] == ["aten.cumsum"]


def test_index_put_bool_full_values():
    m = T([True, False, True, False])
    check(lambda a, b: torch.index_put(a, (m,), b), r(4, 6), r(2, 6), kernels=2)

    def f(a, b):
        a = a * 1
        a[:, m] += b
        return a
    check(f, r(3, 4, 2), r(3, 2, 2))


def test_setitem_with_a_mask():
    def f(a, b, m):
        a = a * 1
        a[m] = b
        return a
    check(f, r(4, 6), r(6), T([True, False, True, False]), kernels=1)


def test_a_mask_on_the_cpu_indexes_a_tensor_on_another_device():
    # eager takes a CPU boolean index for a CUDA tensor; the rewrite must move it along
    def f(a, m, b):
        return torch.index_put(a * 2, (m,), b)
    check(f, r(4, 3), torch.tensor([True, False, True, False], device="cpu"), r(3))
    from solder.capture.before_autograd import index_put
    a = torch.zeros(4, 3, device="meta")   # another device, without a GPU
    out = index_put(a, (torch.tensor([True, False, True, False]),), torch.ones(3, device="meta"))
    assert out.device.type == "meta" and out.shape == (4, 3)


def test_overlapping_as_strided_scatter_is_a_copy_and_a_store():
    # two view elements share each place but 0 and 5: eager's copy_ leaves one of them
    a, b = r(6), r(2, 3)
    report = solder.explain(lambda a, b: torch.as_strided_scatter(a + 1, b, (2, 3), (1, 1)), a, b)
    assert report.kernel_count == 2 and not report.fallbacks
    out = torch.compile(lambda a, b: torch.as_strided_scatter(a + 1, b, (2, 3), (1, 1)),
                        backend="solder")(a, b)
    assert out[0] == b[0, 0] and out[3] == b[1, 2] and out[4] == a[4] + 1 and out[5] == a[5] + 1
    for pos, cands in {1: (b[0, 1], b[1, 0]), 2: (b[0, 2], b[1, 1])}.items():
        assert any(out[pos] == c for c in cands)


# -- in-place writes through views of graph inputs: one kernel, only the region written --------
def _set_column(x, y):
    x[:, 1] = y


def _copy_diagonal(x, y):
    x.diagonal().copy_(y * 2)


def _mul_as_strided(x):
    x.as_strided((2, 2), (3, 1), 1).mul_(2)


def _nested(x, y):
    x[1][:, 2] = y


def _index_put_(x, y, i):
    x.index_put_((i,), y, accumulate=True)


def _index_put_reading_x(x, y, i):
    z = x[0] * 3
    x.index_put_((i,), y)
    return z


def _scatter_(x, y, i):
    x.scatter_(0, i, y)


def _two_writes(x, y):
    x[0] = y
    x[:, 0] = -1.0


@pytest.mark.parametrize("fn,args,kernels,stores", [
    (_set_column, [r(4, 6), r(4)], 1, 4),
    (_copy_diagonal, [r(4, 6), r(4)], 1, 4),
    (_mul_as_strided, [r(4, 6)], 1, 4),
    (_nested, [r(3, 4, 5), r(4)], 1, 4),
    (_index_put_, [r(4, 6), r(3, 6), T([0, 2, 2])], 1, None),  # atomics straight into x
    (_index_put_reading_x, [r(4, 6), r(3, 6), T([0, 2, 3])], 4, None),  # x's old value is used
    (_scatter_, [r(4, 6), r(2, 6), T([[0] * 6, [1] * 6])], 1, None),
    (_two_writes, [r(4, 6), r(6)], 1, None),
])
def test_inplace_through_views(fn, args, kernels, stores):
    report = check(fn, *args, kernels=kernels)
    if stores is not None:  # only the region is written: the kernel runs over the region
        assert f", {stores})" in report.graphs[0].wrapper.split("K['k0']")[1]


def test_inplace_reading_other_elements_of_the_target():
    def f(x):
        x[:, 0] = x[:, 1] * 2
    check(f, r(4, 6))


# -- functional graphs stay functional ---------------------------------------------------------
def test_issue_reproducer_forward_and_backward():
    x = torch.rand((1,), requires_grad=True)
    y = torch.rand((1,), requires_grad=True)
    f = lambda a, b: torch.as_strided_scatter(a, b, size=(1,), stride=(1,))
    out = torch.compile(f, backend="solder")(x, y)
    assert_same(out, y.detach())
    out.backward(torch.ones(1))
    assert x.grad.tolist() == [0.0] and y.grad.tolist() == [1.0]


def _run_fx(gm, args):
    """Solder on a graph that is not functional (make_fx without functionalization)."""
    prepare_graph(gm)
    ctx = CompileContext(Config())
    compiled = compile_graph(gm, list(args), "inference", ctx)
    return compiled(list(args)), ctx


def test_copy_into_a_view_of_a_buffer_in_memory_is_kept():
    def f(a, w, b):
        out = a @ w  # a library call: the value is in memory
        col = out[:, 0]
        out[1:3].copy_(b)
        return out + 1, col * 2
    a, w, b = r(4, 3), r(3, 3), r(2, 3)
    gm = make_fx(f, tracing_mode="fake")(a, w, b)
    out, ctx = _run_fx(gm, [a, w, b])
    assert_same(list(out), list(f(a, w, b)))
    assert not ctx.graphs[0].fallbacks


def test_copy_into_a_view_of_a_fresh_buffer_is_kept():
    def f(a, b):
        out = a * 2
        out[1:3].copy_(b)
        view = out[:, 1]
        out.diagonal().copy_(b[0])
        return out + 1, view * 1
    a, b = r(4, 3), r(2, 3)
    gm = make_fx(f, tracing_mode="fake")(a, b)
    assert any(n.target == torch.ops.aten.copy_.default for n in gm.graph.nodes)
    out, ctx = _run_fx(gm, [a, b])
    assert_same(list(out), list(f(a, b)))
    assert not ctx.graphs[0].fallbacks


@pytest.mark.parametrize("values_shape,accumulate", [((6,), False), ((1, 6), True),
                                                     ((2, 6), False), ((2, 6), True)])
def test_index_put_with_a_mask_in_an_aten_graph(values_shape, accumulate):
    # (capture rewrites torch-level boolean index_put; AOT graphs may still hold the aten op)
    m = T([True, False, False, True])
    f = lambda a, b, m: (torch.ops.aten.index_put.default(a * 2, [m], b, accumulate),)
    a, b = r(4, 6), r(*values_shape)
    gm = make_fx(f, tracing_mode="fake")(a, b, m)
    out, ctx = _run_fx(gm, [a, b, m])
    assert_same(list(out), list(f(a, b, m)))
    assert not ctx.graphs[0].fallbacks


# -- gradients: right, and the backward graphs fuse ------------------------------------------
def _ref_as_strided_scatter(a, b, size, stride, offset=None):
    out = a.clone()
    out.as_strided(size, stride, offset).copy_(b)
    return out


def check_against(fn, ref, *args):
    """Solder's values and gradients against a differentiable reference run eagerly."""
    sargs, rargs = clone_args(args), clone_args(args)
    out = torch.compile(fn, backend="solder")(*sargs)
    exp = ref(*rargs)
    assert_same(out, exp)
    grad = torch.randn_like(exp)
    out.backward(grad)
    exp.backward(grad)
    for s, e in zip(sargs, rargs):
        if isinstance(s, torch.Tensor) and s.requires_grad:
            assert_same(s.grad, e.grad)


def g(*shape):
    return torch.randn(*shape, requires_grad=True)


@pytest.mark.parametrize("shape,size,stride,offset", [
    ((8,), (4,), (2,), None), ((4, 3), (2, 2), (3, 1), 1), ((4, 6), (3, 2), (1, 7), 2),
])
def test_as_strided_scatter_gradient_is_the_math(shape, size, stride, offset):
    check_against(lambda a, b: torch.as_strided_scatter(a * 8 + 10, b * 2 - 4, size, stride, offset),
                  lambda a, b: _ref_as_strided_scatter(a * 8 + 10, b * 2 - 4, size, stride, offset),
                  g(*shape), g(*size))


def test_as_strided_scatter_backward_fuses():
    # forward one kernel; backward one kernel per gradient (they differ in size)
    report = solder.explain(example, g(8), g(4))
    assert kernels_of(report) == [1, 2] and not report.fallbacks


def test_as_strided_scatter_gradient_example():
    x = torch.arange(4., requires_grad=True)
    y = torch.zeros(2, requires_grad=True)
    f = torch.compile(lambda x, y: torch.as_strided_scatter(x, y, (2,), (2,)), backend="solder")
    f(x, y).backward(T([1., 2, 3, 4]))
    assert x.grad.tolist() == [0, 2, 0, 4] and y.grad.tolist() == [1, 3]


def test_as_strided_scatter_of_a_written_view_input_at_an_offset():
    # the input is a view at storage offset 2 that the graph also writes: AOTAutograd traces
    # it through a clone at offset 0, where the view's absolute offset must still count from
    # the input's first element (it counted from the clone's: the zero landed two places on)
    def fn(a, b):
        out = torch.as_strided_scatter(a, b * 1.0, (2,), (2,), a.storage_offset() + 3) * 1.0
        a.zero_()
        return out

    def ref(a, b):
        out = a.clone()
        out.as_strided((2,), (2,), 3).copy_(b * 1.0)
        a.zero_()
        return out * 1.0

    base, b = g(12), g(2)
    sbase, sb = base.detach().clone().requires_grad_(), b.detach().clone().requires_grad_()
    out = torch.compile(fn, backend="solder")(sbase.clone()[2:10], sb)
    exp = ref(base.clone()[2:10], b)
    assert_same(out, exp)
    up = torch.randn_like(exp)
    out.backward(up)
    exp.backward(up)
    assert_same(sbase.grad, base.grad)
    assert_same(sb.grad, b.grad)


def _writes_through_views(a, y):
    x = a * 2
    x[:, 1] = y
    x.diagonal().mul_(3)
    x.as_strided((2, 2), (6, 2), 1).add_(1)
    return x


GRAD = {
    # name: fn, args, kernel counts (forward, backward)
    # the gradient of src is a view of the incoming gradient: no kernel
    "slice_scatter": (lambda a, b: torch.slice_scatter(a, b, 1, 1, 5, 2), [g(4, 6), g(4, 2)], [1, 1]),
    "select_scatter": (lambda a, b: torch.select_scatter(a, b, 1, 2), [g(4, 6), g(4)], [1, 1]),
    "diagonal_scatter": (lambda a, b: torch.diagonal_scatter(a * 2, b, 1), [g(4, 6), g(4)], [1, 1]),
    "index_put": (lambda a, b, i: torch.index_put(a, (i,), b), [g(4, 6), g(3, 6), T([0, 2, 3])], [2, 2]),
    "index_put_acc": (lambda a, b, i: torch.index_put(a, (i,), b, True), [g(4, 6), g(3, 6), T([0, 2, 2])], [2, 1]),
    "index_put_bool": (lambda a, b, m: torch.index_put(a, (m,), b), [g(4, 6), g(6), T([1, 0, 1, 0]).bool()], [1, 2]),
    "index_put_bool_full": (lambda a, b, m: torch.index_put(a, (m,), b), [g(4, 6), g(2, 6), T([1, 0, 1, 0]).bool()],
                            [2, 3]),
    "inplace_views": (_writes_through_views, [g(4, 6), g(4)], [1, 2]),
    "scatter": (lambda a, b, i: torch.scatter(a, 0, i, b), [g(4, 6), g(2, 2), T([[0, 1], [2, 3]])], [2, 2]),
    "scatter_add": (lambda a, b, i: torch.scatter_add(a, 0, i, b), [g(4, 6), g(2, 2), T([[0, 1], [0, 1]])], [2, 1]),
    "scatter_reduce_mean": (lambda a, b, i: torch.scatter_reduce(a, 0, i, b, "mean"),
                            [g(4, 6), g(2, 2), T([[0, 1], [0, 1]])], [3, 4]),
    "scatter_reduce_amax": (lambda a, b, i: torch.scatter_reduce(a, 0, i, b, "amax"),
                            [g(4, 6), g(2, 2), T([[0, 1], [2, 1]])], [5, 4]),
    "index_copy": (lambda a, b, i: a.index_copy(0, i, b), [g(4, 6), g(2, 6), T([1, 3])], [2, 2]),
    "index_add": (lambda a, b, i: a.index_add(0, i, b, alpha=2), [g(4, 6), g(3, 6), T([0, 2, 2])], [2, 1]),
    "masked_scatter": (lambda a, b, m: a.masked_scatter(m, b), [g(4, 6), g(24), torch.rand(4, 6) > 0.5], [2, 2]),
    "gather": (lambda a, i: torch.gather(a * 2, 1, i), [g(4, 6), T([[0, 1], [2, 3], [1, 1], [0, 0]])], [1, 3]),
    "index_select": (lambda a, i: torch.index_select(a * 2, 0, i), [g(4, 6), T([0, 2, 2])], [1, 3]),
}


@pytest.mark.parametrize("name", list(GRAD))
def test_gradients(name):
    fn, args, kernels = GRAD[name]
    report = check(fn, *args, grad=True)
    assert kernels_of(report) == kernels, report
    assert not report.fallbacks, report


# -- dtypes and layouts ------------------------------------------------------------------------
def _layouts(x):
    """contiguous, transposed, channels_last, sliced (offset), expanded versions of a 4-d x."""
    yield "contiguous", x
    yield "transposed", x.transpose(1, 3).contiguous().transpose(1, 3)
    yield "channels_last", x.contiguous(memory_format=torch.channels_last)
    yield "sliced", torch.randn(3, 3, 4, 5).to(x.dtype)[1:, :, 1:, 1:]
    yield "expanded", x[:, :1].expand(2, 3, 3, 4)


LAYOUT_OPS = {
    "slice_scatter": lambda a, b: torch.slice_scatter(a, b[:, :, :, :2] * 2, 3, 1, 4, 2),
    "select_scatter": lambda a, b: torch.select_scatter(a, b[:, 0] + 1, 1, 2),
    "diagonal_scatter": lambda a, b: torch.diagonal_scatter(a, b[:, :, 0, :3], 0, 2, 3),
    "as_strided_scatter": lambda a, b: torch.as_strided_scatter(a, b[0, 0, :2, :2], (2, 2), (5, 2), 3),
    "index_put_acc": lambda a, b: torch.index_put(a, (T([0, 1, 0]),), b[:1].expand(3, -1, -1, -1), True),
    "scatter_add": lambda a, b: torch.scatter_add(a, 3, T([0, 2, 2, 1, 0]).view(1, 1, 1, 5)[..., :4].expand(2, 3, 3, 4), b),
    "gather": lambda a, b: torch.gather(a, 2, T([2, 0, 1]).view(1, 1, 3, 1).expand(2, 3, 3, 4)) + b,
}


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float16, torch.int64])
@pytest.mark.parametrize("op", list(LAYOUT_OPS))
def test_dtypes_and_layouts(op, dtype):
    fn = LAYOUT_OPS[op]
    x = (torch.randn(2, 3, 3, 4) * 5).to(dtype)
    b = (torch.randn(2, 3, 3, 4) * 5).to(dtype)
    for _, a in _layouts(x):
        assert a.shape == x.shape
        report = check(fn, a, b)
        assert not report.fallbacks, report


def test_inplace_through_view_of_a_sliced_and_transposed_input():
    base = r(6, 7)
    check(_set_column, base[1:5, 1:].t(), r(6))
    check(_copy_diagonal, base[1:, 2:], r(5))


# -- dynamic shapes ----------------------------------------------------------------------------
@pytest.mark.parametrize("fn,args", [
    (example, [r(8), r(4)]),
    (lambda a, b: torch.slice_scatter(a, b, 1, 1, None, 2), [r(4, 7), r(4, 3)]),
    (lambda a, b: torch.select_scatter(a, b, 0, 1), [r(3, 5), r(5)]),
    (lambda a, b, i: torch.index_put(a, (i,), b, accumulate=True), [r(5, 3), r(4, 3), T([0, 4, 4, 1])]),
    (lambda a, b, i: torch.scatter_add(a, 0, i, b), [r(5, 3), r(2, 3), T([[0, 1, 4], [4, 4, 0]])]),
])
def test_dynamic_shapes(fn, args):
    report = check(fn, *args, dynamic=True, kernels=1 if fn is example else None)
    assert not report.fallbacks, report
    grown = [torch.cat([a, a]) if a.dtype.is_floating_point else a for a in args]
    if fn is example:
        assert_same(torch.compile(fn, backend="solder", dynamic=True)(*grown), fn(*grown))


# -- what falls back, and why -----------------------------------------------------------------
def test_data_dependent_shape_falls_back_with_its_reason():
    f = lambda x, m: x[m] * 2
    x = r(4, 6)
    with torch._dynamo.config.patch(capture_dynamic_output_shape_ops=True):
        report = check(f, x, x > 0)
    assert [fb.op for fb in report.fallbacks] == ["aten.index.Tensor"]
    assert "data-dependent" in report.fallbacks[0].reason


@pytest.mark.parametrize("fn,args,why", [
    (lambda a, b, i: torch.scatter_reduce(a, 0, i, b, "prod"), [r(4, 6), r(2, 2), T([[0, 1], [0, 1]])],
     "atomic multiply"),
    (lambda a, b, i: torch.index_put(a, (i,), b, True), [torch.ones(4, 6, dtype=torch.int8),
                                                        torch.ones(2, 6, dtype=torch.int8), T([1, 1])],
     "atomic_add"),
])
def test_unsupported_forms_fall_back(fn, args, why):
    report = check(fn, *args)
    assert len(report.fallbacks) == 1 and why in report.fallbacks[0].reason


def test_writes_of_nothing():
    check(lambda a, b: torch.as_strided_scatter(a + 1, b, (0, 2), (1, 1)), r(5), r(0, 2), kernels=1)
    check(lambda a, b: torch.slice_scatter(a + 1, b, 0, 2, 2), r(5), r(0), kernels=1)
    check(lambda a, b, i: torch.index_put(a + 1, (i,), b), r(5), r(0), T([], dtype=torch.long),
          kernels=1)


@pytest.mark.parametrize("reduce", [None, "sum", "amax", "mean"])
def test_zero_dim_scatter(reduce):
    i = T(0)
    if reduce is None:
        f = lambda a, b, i: torch.scatter(a + 1, 0, i, b)
    else:
        f = lambda a, b, i: torch.scatter_reduce(a + 1, 0, i, b, reduce, include_self=False)
    report = check(f, torch.randn(()), torch.randn(()), i)
    assert not report.fallbacks


def test_zero_dim_gathers_and_their_gradients():
    check(lambda a, i: torch.gather(a * 2, 0, i), torch.randn(()), T([0]), kernels=1)
    check(lambda a, i: torch.index_select(a * 2, 0, i), torch.randn(()), T([0]), kernels=1)
    report = check(lambda a, b: torch.scatter_add(a, 0, T(0), b),
                   torch.randn((), requires_grad=True), torch.randn((), requires_grad=True), grad=True)
    assert not report.fallbacks


def test_a_gather_whose_index_is_gathered_from_a_scatter_reads_computed_values():
    # the index of the outer gather is itself loaded from the scatter's result: that inner
    # read (inside the load's index binding) must resolve to the fused scatter too; it was left
    # a read of a buffer the kernel never stored (an unbound name in the wrapper)
    def f(a):
        v = torch.scatter(a, 0, torch.tensor([0], device=a.device), 3)
        g = torch.gather(v, -1, torch.tensor([0], device=a.device))
        return g[g.unfold(-1, 1, 2).remainder(1)]
    check(f, T([-6], dtype=torch.int32))
    check(lambda a, i: (a * 2)[torch.gather(a * 3, 0, i).long() % 4],
          T([1, 2, 3, 5]), T([3, 0, 2]))


# --- CPU tensors inside a GPU graph --------------------------------------------------------------

def _fill_column(x):
    x = x * 2
    x[:, 0] = -1.0        # on a GPU tensor ATen makes the value a 0-d CPU tensor
    return x


@pytest.mark.gpu
def test_cpu_scalar_in_a_gpu_graph_is_a_constant_of_the_kernel():
    report = check(_fill_column, r(4, 6), kernels=1)
    assert not report.fallbacks, report.fallbacks


@pytest.mark.gpu
def test_cpu_index_tensor_in_a_gpu_graph_runs_that_op_in_aten():
    idx = torch.tensor([0, 2], device="cpu")   # eager indexes a GPU tensor with it
    report = check(lambda a, b, i: torch.index_put(a * 2, (i,), b).sin(), r(4, 6), r(2, 6), idx)
    assert [f.op for f in report.fallbacks] == ["aten.index_put"], report.fallbacks
    assert "CPU tensor" in report.fallbacks[0].reason
    assert report.kernel_count >= 1      # the rest of the graph still compiles


def test_put_and_take_are_scatters_and_gathers_in_generated_kernels():
    # put indexes self as one flat row-major array (negative indices from the end), with or
    # without accumulation, also into a transposed self; take's gradient is a put
    x = torch.randn(4, 6)
    idx = torch.tensor([0, -1, 7, 7, 23, -24])
    src = torch.randn(6)
    for accumulate in (False, True):
        ids = idx if accumulate else torch.tensor([0, -1, 7, 9, 23, -20])
        report = check(lambda a, i, s: (a * 2).put(i, s, accumulate=accumulate), x, ids, src)
        assert not report.fallbacks, report
        report = check(lambda a, i, s: a.t().put(i, s, accumulate=accumulate) + 1, x, ids, src)
        assert not report.fallbacks, report
    w = torch.randn(4, 6, requires_grad=True)
    report = check(lambda a, i: torch.take(a, i) * 3, w, idx, grad=True)
    assert not report.fallbacks, report


@pytest.mark.parametrize("reduce", ["amax", "amin", "mean"])
def test_index_reduce_is_a_scatter_reduce_in_generated_kernels(reduce):
    x, src = torch.randn(5, 4), torch.randn(5, 7)
    idx = torch.tensor([0, 3, 3, 1, 0, 3, 2])
    for include_self in (True, False):
        report = check(lambda a, i, s: a.index_reduce(1, i, s, reduce, include_self=include_self),
                       x, idx, src)
        assert not report.fallbacks, report
    report = check(lambda a, i, s: a.index_reduce(0, i, s, reduce), torch.tensor(2.0),
                   torch.tensor(0), torch.tensor(5.0))       # 0-d
    assert not report.fallbacks, report


def test_a_row_level_load_under_an_element_level_condition_reads_no_padding_lane():
    # fuzz seed 230727: the backward of normalize over an empty narrow, summed with a softmax's
    # backward in one row kernel, loaded the norm (a row-level address) under the
    # slice_scatter's condition `rindex >= 3` alone; the padding lane rindex = 3 of a row of 3
    # read an empty buffer there (a segfault in the interpreter, a bad read on a GPU)
    def fn(a0, a1):
        v1 = torch.nn.functional.normalize(a0.narrow(0, 3, 0), dim=-1)
        return (v1 + -0.25).t(), a1.softmax(0)

    grads = []
    for f in (fn, torch.compile(fn, backend="solder")):
        a0, a1 = (torch.tensor(v, requires_grad=True) for v in
                  ([0.3, -1.2, 0.5], [0.1, 2.0, -0.7]))
        loss = sum((o * (k + 2)).sum() for k, o in enumerate(f(a0, a1)))
        grads.append(torch.autograd.grad(loss, [a0, a1]))
    for g, r in zip(*grads):
        torch.testing.assert_close(g, r)


@pytest.mark.parametrize("reduce", ["amax", "amin"])
def test_an_in_place_scatter_reduce_max_into_an_input_keeps_its_nans(reduce):
    # the scatter wrote into the input itself (its old value read by nothing else), and then
    # read the input's old NaNs: a schedule cycle (OpInfo scatter_reduce.amax, in place)
    x = r(10, 5)
    x[3, 1] = float("nan")
    idx = torch.tensor([[3, 1, 0, 9, 3], [3, 1, 2, 2, 0]], device=x.device)
    src = r(2, 5)

    def f(x, idx, src):
        return x.scatter_reduce_(0, idx, src, reduce, include_self=True)
    a, b = x.clone(), x.clone()
    want = f(a, idx, src)
    got = torch.compile(f, backend="solder")(b, idx, src)
    assert torch.allclose(got, want, equal_nan=True)
    assert torch.allclose(b, a, equal_nan=True) and bool(b[3, 1].isnan())
