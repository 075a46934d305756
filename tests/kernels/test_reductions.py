"""Reductions over any dims, norms and their backwards; fusion of prologues and epilogues."""
import pytest
import torch
import torch.nn.functional as F

from .helpers import assert_same, check

DIMS = [None, 0, 1, -1, (0, 2), (1, 2)]


@pytest.mark.parametrize("dims", DIMS)
@pytest.mark.parametrize("keepdim", [False, True])
def test_sum_mean_amax(dims, keepdim):
    x = torch.randn(4, 6, 5)
    if dims is None:
        check(lambda t: (t.sum(), t.mean(), t.amax(), t.amin()), x, kernels=1)
        return
    check(lambda t: (t.sum(dims, keepdim=keepdim), t.mean(dims, keepdim=keepdim),
                     t.amax(dims, keepdim=keepdim), t.amin(dims, keepdim=keepdim)), x, kernels=1)


def test_prod_any_all_integer_sum():
    x = torch.rand(5, 7) + 0.5
    check(lambda t: (t.prod(1), (t > 1).any(0), (t > 0.6).all(1), (t > 1).sum(1), t.prod()), x)


def test_argmax_argmin_max_dim_with_ties_and_nan():
    x = torch.tensor([[1.0, 3.0, 3.0, 0.0], [2.0, float("nan"), 1.0, 5.0], [0.0, 0.0, 0.0, 0.0]])
    check(lambda t: (t.argmax(1), t.argmin(1), t.max(1), t.min(0), t.argmax()), x)


def test_var_std_logsumexp():
    x = torch.randn(6, 9)
    check(lambda t: (t.var(1), t.std(0, keepdim=True), t.var(1, correction=0),
                     torch.logsumexp(t, 1)), x, rtol=1e-4, atol=1e-5)


def test_softmax_is_one_kernel():
    check(lambda x: torch.softmax(x, -1), torch.randn(16, 64), kernels=1)


def test_softmax_bf16_computed_in_fp32():
    check(lambda x: x.softmax(-1, dtype=torch.float32).to(torch.bfloat16),
          torch.randn(8, 40, dtype=torch.bfloat16), kernels=1)


def test_layer_norm_is_one_kernel():
    check(lambda x, w, b: F.layer_norm(x, (48,), w, b), torch.randn(10, 48), torch.randn(48),
          torch.randn(48), kernels=1, rtol=1e-4, atol=1e-4)


def test_rms_norm_with_residual_is_one_kernel():
    def f(x, r, w):
        h = x + r
        y = h * torch.rsqrt(h.float().pow(2).mean(-1, keepdim=True) + 1e-6).to(h.dtype) * w
        return y, h
    bf = torch.bfloat16
    check(f, torch.randn(8, 32, dtype=bf), torch.randn(8, 32, dtype=bf), torch.randn(32, dtype=bf),
          kernels=1)


def test_rms_norm_op():
    check(lambda x, w: F.rms_norm(x, (24,), w, eps=1e-5), torch.randn(6, 24), torch.randn(24),
          kernels=1, rtol=1e-4, atol=1e-4)


def test_looped_reduction_when_row_is_long():
    # rows longer than persistent_reduction_max run as a loop over the row, in stages
    def f(x):
        return torch.softmax(x, -1), x.sum(-1)
    import solder
    x = torch.randn(4, 300)
    ref = f(x)
    out = torch.compile(f, backend="solder", options={"persistent_reduction_max": 64})(x)
    torch.testing.assert_close(out, ref, rtol=1e-5, atol=1e-5)
    report = solder.explain(f, x, options={"persistent_reduction_max": 64})
    assert report.kernel_count == 1
    assert "for roffset in range" in report.source()


@pytest.mark.parametrize("persistent_max", [4096, 64])
def test_the_same_reduction_twice_in_a_kernel_reduces_once(persistent_max):
    # a separate mean and a sum of the same row reduce once (one tl.sum of x); var_mean's
    # sums of the row shifted by its first element (capture/decompositions.py: _moments) and
    # of its squared deviations are two more
    import solder

    def f(x):
        var, mean = torch.var_mean(x, -1)
        return var, mean, x.mean(-1), x.sum(-1) * 2
    x = torch.randn(6, 300)
    opts = {"persistent_reduction_max": persistent_max}
    torch.testing.assert_close(torch.compile(f, backend="solder", options=opts)(x), f(x),
                               rtol=1e-5, atol=1e-5)
    report = solder.explain(f, x, options=opts)
    assert report.kernel_count == 1
    src = report.source()
    if "if RELOAD:" in src:  # count in one of the two forms (test_reload_rows.py)
        src = src[:src.index("if RELOAD:")] + src[src.index("else:  # keep"):]
    reduces = src.count("tl.sum(") if persistent_max > 300 else src.count("= tl.full([XBLOCK, RBLOCK]")
    assert reduces == 3, src


@pytest.mark.parametrize("fn", [
    lambda x, w, b: F.layer_norm(x, (32,), w, b),
    lambda x, w, b: torch.log_softmax(x * w + b, -1),
    lambda x, w, b: F.rms_norm(x, (32,), w) + b,
])
def test_norm_backwards(fn):
    check(fn, torch.randn(6, 32, requires_grad=True), torch.randn(32, requires_grad=True),
          torch.randn(32, requires_grad=True), grad=True, rtol=1e-4, atol=1e-4)


def test_reduction_over_noncontiguous_input():
    x = torch.randn(6, 8).t()
    check(lambda t: (t.sum(1), t.amax(1)), x, kernels=1)
    check(lambda t: (t.sum(1), t.amax(0)), x, kernels=2)  # two tilings


def test_cross_entropy_forward_backward():
    check(lambda x, t: F.cross_entropy(x, t), torch.randn(8, 30, requires_grad=True),
          torch.randint(0, 30, (8,)), grad=True, rtol=1e-4, atol=1e-5)


def test_cross_entropy_backward_is_one_kernel():
    # nll_loss's backward scatters -1 into zeros at the targets: a one-hot predicate, fused
    # with the softmax gradient into a single pass over the logits
    import solder
    x = torch.randn(8, 30, requires_grad=True)
    # (the index check of the scattered targets is a kernel of its own: test_index_checks.py)
    report = solder.explain(lambda a, t: F.cross_entropy(a, t), x, torch.randint(0, 30, (8,)),
                            options={"check_indices": False})
    backward = [g for g in report.graphs if g.kind == "backward"]
    assert len(backward) == 1 and len(backward[0].kernels) == 1, str(report)
    assert not report.fallbacks


def test_scatter_one_index_per_line_matches_eager():
    base, idx, src = torch.randn(6, 9), torch.randint(0, 9, (6, 1)), torch.randn(6, 1)
    check(lambda b, i, s: (b * 2).scatter(1, i, s) + 1, base, idx, src, kernels=1)
    check(lambda b, i: torch.zeros_like(b).scatter(1, i, -1.0), base, idx, kernels=1)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.int64, torch.bool])
def test_cumsum_and_cumprod_are_fused_reductions(dtype):
    x = (torch.randn(3, 5, 7) * 2).to(dtype) if dtype != torch.bool else torch.randn(3, 5, 7) > 0

    def fn(x):
        return (torch.cumsum(x, 1), torch.cumsum(x, -1) * 2,
                torch.cumprod(x.to(torch.float32) * 0.5 + 1, 0))
    tol = {}
    if dtype == torch.bfloat16:
        # Solder adds in float32 and rounds once: held to the float32 prefix sums rounded once.
        # Eager on CUDA adds in bfloat16, rounding at every step (ATen's scan with
        # std::plus<BFloat16>): held to that within one half-ulp per step of the row (7).
        torch._dynamo.reset()
        exact = [r.to(o.dtype) for r, o in zip(fn(x.float()), fn(x))]
        assert_same(torch.compile(fn, backend="solder")(x.clone()), exact)
        bound = 7 * 2.0 ** -9 * max(float(r.float().abs().max()) for r in exact[:2])
        tol = dict(atol=bound, rtol=0)
    report = check(fn, x, **tol)
    assert not report.fallbacks, report.fallbacks


def test_cumsum_positions_from_a_mask_is_one_kernel_and_gradients_match():
    mask = torch.tensor([[0, 0, 1, 1, 1], [1, 1, 1, 1, 0]])
    check(lambda m: (m.cumsum(-1) - 1).clamp(min=0) * m, mask, kernels=1)
    check(lambda x: torch.cumsum(x.sin(), 0), torch.randn(6, 4, requires_grad=True), grad=True)


def test_long_prefix_falls_back_with_a_reason():
    report = check(lambda x: torch.cumsum(x, 0), torch.randn(4096))
    assert [f.op for f in report.fallbacks] == ["aten.cumsum"]
    assert "scan" in report.fallbacks[0].reason


def test_reductions_over_an_empty_dimension_give_eager_identities():
    x = torch.randn(3, 0, 4)
    report = check(lambda x: (x.sum(1), x.prod(1, keepdim=True), (x > 0).any(1), (x > 0).all(1),
                              x.sum(), x.mean(1)), x)
    assert not report.fallbacks, report.fallbacks
    report = check(lambda x: x.amax(1), torch.randn(3, 2, 4))
    assert not report.fallbacks


def test_a_deep_residual_stream_is_stored_not_recomputed_from_every_layer():
    # h = h + norm(h) @ w twelve times, a matmul (a library call) in each layer: the kernels
    # around them must read a bounded number of buffers (recomputing h from every earlier
    # layer's output grows with depth)
    import re

    def net(x, ws):
        h = x
        for w in ws:
            h = h + F.layer_norm(h, (h.shape[-1],)) @ w
        return F.layer_norm(h, (h.shape[-1],))
    x, ws = torch.randn(4, 16), [torch.randn(16, 16) * 0.1 for _ in range(12)]
    report = check(net, x, ws)
    reads = [len(re.search(r"# pointers: (.*)", k.source).group(1).split(", "))
             for k in report.graphs[0].kernels]
    assert max(reads) <= 7, reads


def test_an_arg_reduction_index_is_int64_inside_the_kernel():
    # an argmax fused into a layer norm's kernel, squared, then a min over it: the index was
    # int32 in the kernel (the arange's type), and the int64 min's identity overflowed it
    # (seed 187929)
    def fn(a0, a1):
        v0 = a1.max(0).indices
        v2 = torch.nn.functional.layer_norm(a0, (2,), a1.to(a0.dtype), a0, eps=1e-5)
        v3 = torch.scatter(v0.expand(2), 0, torch.tensor([1], device=a0.device), v0.expand(1))
        return v2, torch.aminmax(torch.square(v3))[0]
    a0, a1 = torch.tensor([0.5, -1.25]), torch.tensor([3, 7])
    for got, want in zip(torch.compile(fn, backend="solder")(a0, a1), fn(a0, a1)):
        torch.testing.assert_close(got, want)
