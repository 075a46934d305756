"""Pooling reads its window in place: values and indices as eager (NaN included), fused with
its producer, any memory format, gradients."""
import pytest
import torch
import torch.nn.functional as F

import solder

from .helpers import check


def _input(channels_last=False):
    torch.manual_seed(0)
    x = torch.randn(2, 3, 9, 10)
    x[0, 1, 2, 3] = float("nan")      # propagates, and its position is the index
    x[1, 2, 4, 4] = float("-inf")
    return x.contiguous(memory_format=torch.channels_last) if channels_last else x


@pytest.mark.parametrize("args", [(3, 2, 1), (2, 2, 0), (3, 1, 1), ((3, 2), (2, 1), (1, 0)),
                                  (2, 3, 1)])
def test_values_and_indices_match_eager(args):
    check(lambda x: F.max_pool2d_with_indices(x * 2, *args), _input(), kernels=1)


def test_ceil_mode_channels_last_and_fused_producer_is_one_kernel():
    report = check(lambda x: F.max_pool2d(x.relu() * 3, 3, 2, 1, ceil_mode=True) + 1,
                   _input(channels_last=True), kernels=1)
    assert not report.fallbacks
    assert "aten.max_pool2d_with_indices" in report.graphs[0].kernels[0].ops


def test_all_minus_inf_window_points_at_its_first_position():
    x = torch.full((1, 1, 4, 4), float("-inf"))
    check(lambda x: F.max_pool2d_with_indices(x, 2, 2, 1), x)


def test_gradient():
    x = torch.randn(2, 3, 8, 8, requires_grad=True)
    check(lambda x: F.max_pool2d(x.sin(), 3, 2, 1), x, grad=True)


@pytest.mark.parametrize("args", [(3, 1, 1, 2), (2, 2, 1, 3), ((3, 2), 1, (1, 0), (2, 3))])
def test_dilation_is_generated_code(args):
    report = check(lambda x: F.max_pool2d_with_indices(x * 2, *args), _input(), kernels=1)
    assert not report.fallbacks
    # an all -inf window with a negative corner points where ATen's kernels step it, by the
    # dilation, into the input
    x = torch.full((1, 1, 7, 7), float("-inf"))
    check(lambda x: F.max_pool2d_with_indices(x, 3, 1, 1, dilation=3), x)


@pytest.mark.parametrize("kwargs", [dict(kernel_size=2), dict(kernel_size=3, stride=2, padding=1),
                                    dict(kernel_size=(2, 3, 2), stride=1, dilation=(1, 2, 1)),
                                    dict(kernel_size=3, stride=2, padding=1, ceil_mode=True)])
def test_max_pool3d_values_indices_and_gradient(kwargs):
    torch.manual_seed(0)
    x = torch.randn(2, 2, 5, 6, 7)
    x[0, 1, 2, 3, 4] = float("nan")
    report = check(lambda t: F.max_pool3d(t * 2, return_indices=True, **kwargs), x, kernels=1)
    assert not report.fallbacks
    report = check(lambda t: F.max_pool3d(t.sin(), **kwargs) * 3, x[1:].clone().requires_grad_(),
                   grad=True)
    assert not report.fallbacks


@pytest.mark.parametrize("args", [
    dict(kernel_size=3, stride=2, padding=1),
    dict(kernel_size=3, stride=2, padding=1, count_include_pad=False),
    dict(kernel_size=3, stride=2, padding=1, ceil_mode=True),
    dict(kernel_size=3, stride=2, padding=1, ceil_mode=True, count_include_pad=False),
    dict(kernel_size=(2, 3), stride=(1, 2), padding=(1, 0), divisor_override=5),
    dict(kernel_size=2),
])
def test_avg_pool2d_matches_eager(args):
    x = torch.randn(2, 3, 9, 10)
    check(lambda x: F.avg_pool2d(x.relu(), **args) * 2, x, kernels=1)


def test_avg_pool2d_half_precision_channels_last_and_gradient():
    x = torch.randn(2, 3, 8, 8).to(torch.bfloat16).contiguous(memory_format=torch.channels_last)
    check(lambda x: F.avg_pool2d(x, 3, 1, 1), x, kernels=1)
    check(lambda x: F.avg_pool2d(x.sin(), 2), torch.randn(2, 3, 8, 8, requires_grad=True),
          grad=True)


@pytest.mark.parametrize("args", [
    dict(kernel_size=3, stride=2, padding=1),
    dict(kernel_size=3, stride=2, padding=1, ceil_mode=True, count_include_pad=False),
    dict(kernel_size=(2, 3), stride=(1, 2), padding=(1, 0), divisor_override=5),
    dict(kernel_size=2, stride=3),
])
def test_avg_pool2d_gradient_lowered(args):
    x = torch.randn(2, 3, 9, 10, requires_grad=True)
    report = check(lambda x: F.avg_pool2d(x * 2, **args), x, grad=True)
    assert not report.fallbacks, report.fallbacks


@pytest.mark.parametrize("out", [1, 3, (2, 5), 9])
def test_adaptive_avg_pool2d_gradient_lowered(out):
    x = torch.randn(2, 3, 7, 6, requires_grad=True)
    report = check(lambda x: F.adaptive_avg_pool2d(x * 2, out), x, grad=True)
    assert not report.fallbacks, report.fallbacks


@pytest.mark.parametrize("out", [(1, 2), 3])
def test_adaptive_avg_pool2d_of_a_channels_last_input_is_channels_last(out):
    # eager's result takes its input's memory format; the gathered windows' mean of PyTorch's
    # decomposition is contiguous (fuzz seed 271025)
    x = torch.randn(2, 3, 4, 6).contiguous(memory_format=torch.channels_last)
    fn = lambda x: F.adaptive_avg_pool2d(x * 2, out)   # noqa: E731
    check(fn, x)
    assert torch.compile(fn, backend="solder")(x).stride() == fn(x).stride()


@pytest.mark.parametrize("out", [1, (2, 3)])
def test_adaptive_max_pool_global_or_evenly_divided_is_generated_code(out):
    # global max pooling and windows that divide the input evenly are max pools (PyTorch's
    # decomposition): values, indices and the gradient as eager, no ATen call
    x = torch.randn(2, 3, 4, 6, requires_grad=True)
    report = check(lambda t: F.adaptive_max_pool2d(t, out, return_indices=True), x.detach())
    assert not report.fallbacks, report
    report = check(lambda t: F.adaptive_max_pool2d(t, out) * 2, x, grad=True)
    assert not report.fallbacks, report


def test_adaptive_max_pool_backward_with_overlapping_windows_is_a_scatter_add():
    # windows that overlap (4 rows into 3): the forward scans them in generated code, the
    # backward adds each output's gradient at its index, as eager accumulates it
    x = torch.randn(2, 3, 4, 6, requires_grad=True)
    report = check(lambda t: F.adaptive_max_pool2d(t, (3, 4)) * 2, x, grad=True)
    assert not report.fallbacks, report


@pytest.mark.parametrize("kwargs", [
    dict(kernel_size=2),
    dict(kernel_size=(3, 2, 2), stride=(2, 1, 2), padding=(1, 0, 1)),
    dict(kernel_size=3, stride=2, padding=1, ceil_mode=True, count_include_pad=False),
    dict(kernel_size=(2, 3, 2), divisor_override=5),
])
def test_avg_pool3d_and_its_gradient(kwargs):
    x = torch.randn(2, 3, 5, 6, 7, requires_grad=True)
    check(lambda t: F.avg_pool3d(t, **kwargs), x, grad=True)
    r = solder.explain(lambda t: F.avg_pool3d(t, **kwargs), x.detach())
    assert not r.fallbacks, [(str(f.op), f.reason) for f in r.fallbacks]


@pytest.mark.parametrize("in_size, out_size", [((4, 6, 8), (2, 3, 4)), ((5, 7, 6), (3, 4, 5)),
                                               ((3, 4, 5), (5, 6, 7)), ((6, 6, 6), 1)])
def test_adaptive_avg_pool3d_and_its_gradient(in_size, out_size):
    x = torch.randn(2, 3, *in_size, requires_grad=True)
    fn = lambda t: F.adaptive_avg_pool3d(t, out_size)   # noqa: E731
    check(fn, x, grad=True)
    r = solder.explain(lambda t: fn(t).sum(), x)
    found = [(str(f.op), f.reason) for f in r.fallbacks]
    if x.is_cuda and out_size != 1 and any(m > n for n, m in zip(in_size, out_size)):
        # upsampling's backward: ATen on CUDA, named (lower/pooling.py: a Triton miscompile)
        assert len(found) == 1 and "Triton miscompile" in found[0][1], found
    else:
        assert not found, found


@pytest.mark.parametrize("fn, in_size, out_size", [
    (F.adaptive_max_pool2d, (5, 7), (3, 4)), (F.adaptive_max_pool2d, (4, 4), (3, 5)),
    (F.adaptive_max_pool1d, (9,), (4,)),
    (F.adaptive_max_pool3d, (4, 5, 6), (3, 2, 4)), (F.adaptive_max_pool3d, (4, 4, 4), 2)])
def test_adaptive_max_pool_with_uneven_windows(fn, in_size, out_size):
    x = torch.randn(2, 3, *in_size)
    x[0, 0].view(-1)[3] = float("nan")     # NaN wins its windows, with its index
    check(lambda t: fn(t, out_size, return_indices=True), x)
    xg = torch.randn(2, 3, *in_size, requires_grad=True)
    check(lambda t: fn(t, out_size), xg, grad=True)
    r = solder.explain(lambda t: fn(t, out_size).sum(), xg)
    assert not r.fallbacks, [(str(f.op), f.reason) for f in r.fallbacks]


def test_a_pool_stored_for_a_convolution_is_read_not_computed_again():
    # ResNet's stem: the pooled value is stored for the next convolution, and the residual add
    # reads that buffer; computing the pool again (nine window reads, each with the norm and
    # the ReLU) cost the native target 0.1 ms a call of ResNet-18's 2.3 ms
    w = torch.randn(3, 3, 3, 3)

    def fn(x):
        p = F.max_pool2d(torch.relu(x * 2 + 1), 3, 2, 1)
        return F.conv2d(p, w, padding=1) + p
    report = check(fn, _input(), kernels=2)
    pooled = [k for k in report.graphs[0].kernels if "aten.max_pool2d_with_indices" in k.ops]
    assert len(pooled) == 1, [k.ops for k in report.graphs[0].kernels]


def _saved_by(fn, *args):
    saved = []

    def pack(t):
        saved.append((tuple(t.shape), t.dtype))
        return t
    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        out = fn(*args)
    return out, saved


@pytest.mark.parametrize("args, kwargs", [
    ((3, 2, 1), {}), ((2, 2, 0), {}), (((3, 2), (2, 1), (1, 0)), {}),
    ((3, 2, 1), {"dilation": 2}), ((3, 2, 1), {"ceil_mode": True}), ((2, 3, 1), {})])
def test_the_backward_reads_window_offsets_of_a_byte_not_int64_indices(args, kwargs):
    # capture/pool_offsets.py: autograd keeps a max pool's indices from the forward to the
    # backward; a byte per output (the position within the window) is kept instead, the
    # indices recomputed from it in the backward, and the gradient is eager's
    def fn(x):
        return F.max_pool2d(x.relu() * 2, *args, **kwargs) * 3

    x = _input(channels_last=bool(kwargs.get("ceil_mode"))).requires_grad_()
    out, saved = _saved_by(torch.compile(fn, backend="solder"), x)
    assert (tuple(out.shape), torch.int8) in saved, saved
    assert not any(dtype == torch.int64 for _, dtype in saved), saved
    g = torch.randn_like(out)
    out.backward(g)
    got, x.grad = x.grad, None
    fn(x).backward(g)
    torch.testing.assert_close(got, x.grad)


def test_indices_the_program_reads_are_kept_as_they_are():
    # returned (return_indices=True): the forward's own output, int64 as eager's
    def fn(x):
        y, i = F.max_pool2d(x * 2, 3, 2, 1, return_indices=True)
        return y * 3, i

    x = _input().requires_grad_()
    check(fn, x, grad=True)
