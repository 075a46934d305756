"""Regressions found by the OpInfo conformance suite (python -m solder conformance)."""
import pytest
import torch
import torch.nn.functional as F

import solder

from .helpers import check


def _fallback_ops(report):
    return {str(f.op): f.reason for f in report.fallbacks}


# -- reductions over one element per row ----------------------------------------------------

def test_mean_of_one_element_fuses_with_its_producer():
    # binary_cross_entropy of a 1-element input: a pointwise producer and a reduction of
    # length 1 in one kernel used to read a reduction result the kernel never computed
    x, y = torch.rand(1) * 0.8 + 0.1, torch.rand(1)
    check(lambda a, b: F.binary_cross_entropy(a, b), x, y)
    check(lambda a, b: F.binary_cross_entropy(a, b), x.requires_grad_(), y, grad=True)


def test_arg_reductions_over_a_size_one_dim_give_index_zero():
    x = torch.tensor([[2.0], [-1.0], [5.0]])  # the values must not leak out as indices
    check(lambda t: (t.argmax(1), t.argmin(1, keepdim=True), t.max(1), t.min(1)), x)


def test_reductions_over_size_one_dims():
    x = torch.randn(3, 1, 1)
    check(lambda t: ((t * 2).sum((1, 2)), t.prod(1), t.amax(2), (t > 0).any(1),
                     (t > 0).all(2), t.mean(1, keepdim=True), t.var(1, correction=0)), x)


def test_quantile_of_a_scalar():
    check(lambda t: torch.quantile(t, 0.5), torch.tensor(1.5))


# -- complex values and conjugate views -----------------------------------------------------

def test_conj_view_is_not_a_plain_layout():
    # ifft of a real input is the conjugate (a _conj view with the conj bit) of an r2c fft:
    # lowering _conj as a layout dropped the bit and returned the unconjugated values
    x = torch.randn(3, 6, 4)
    check(lambda t: torch.fft.ifft(t, n=8, dim=1, norm="ortho"), x)
    report = solder.explain(lambda t: torch.fft.ifft(t, dim=1), x)
    assert "aten._conj" in _fallback_ops(report)


def test_ops_on_complex_values_fall_back_with_a_reason():
    # the padding/slicing around a complex fft reached code generation and failed there
    x = torch.randn(2, 5, 6)
    fn = lambda t: torch.fft.fft2(t, s=(3, 8), dim=(1, 2), norm="ortho")  # noqa: E731
    check(fn, x)
    reasons = _fallback_ops(solder.explain(fn, x))
    assert reasons.get("aten.constant_pad_nd") == "complex dtypes are not lowered"


def test_real_and_complex_mixed_in_one_graph():
    x, y = torch.randn(4, 5), torch.randn(4, 5)
    check(lambda a, b: (torch.polar(a.abs() + 0.1, b) * 2).abs() + a.sin(), x, y)


# -- effect tokens (linalg error checks) ----------------------------------------------------

def _torch_keeps_linalg_checks() -> bool:
    """Whether AOTAutograd hands a backend linalg's error check at all: torch 2.11 drops
    ``_linalg_check_errors`` from the graph before any backend sees it (``aot_eager`` does not
    raise there either), so no backend can raise; later versions keep it."""
    torch._dynamo.reset()
    inv = torch.compile(lambda m: torch.linalg.inv(m), backend="aot_eager")
    try:
        inv(torch.zeros(3, 3))
    except torch.linalg.LinAlgError:
        return True
    finally:
        torch._dynamo.reset()
    return False


def test_linalg_error_checks_run_and_raise():
    if not _torch_keeps_linalg_checks():
        pytest.skip(f"torch {torch.__version__} drops linalg's error check before the backend")
    a = torch.randn(4, 4) + 4 * torch.eye(4)
    check(lambda m: torch.linalg.inv(m) + 1, a)
    check(lambda m, b: torch.linalg.solve(m, b), a, torch.randn(4))
    torch._dynamo.reset()
    compiled = torch.compile(lambda m: torch.linalg.inv(m), backend="solder")
    with pytest.raises(torch.linalg.LinAlgError):
        compiled(torch.zeros(3, 3))


# -- 0-d random draws -----------------------------------------------------------------------

def test_random_draws_of_zero_dim_tensors():
    torch._dynamo.reset()
    randn = torch.compile(lambda t: torch.randn_like(t), backend="solder")
    rand = torch.compile(lambda t: torch.rand_like(t) + t, backend="solder")
    bern = torch.compile(lambda t: torch.bernoulli(t), backend="solder")
    zero = torch.tensor(0.0)
    draws = torch.stack([randn(zero) for _ in range(64)])
    assert draws.shape == (64,) and draws.std() > 0.5 and draws.abs().max() < 10
    uniform = torch.stack([rand(zero) for _ in range(64)])
    assert ((uniform >= 0) & (uniform < 1)).all() and uniform.std() > 0.1
    assert bern(torch.tensor(0.0)).item() == 0.0 and bern(torch.tensor(1.0)).item() == 1.0
    assert bern(torch.tensor(0.5)).shape == ()


# -- ops now decomposed (they fell back to ATen before) -------------------------------------

def test_norms_repeat_hardtanh_pooling_lower_without_fallbacks():
    x = torch.randn(2, 3, 6, 6)
    fns = [
        lambda t: torch.linalg.vector_norm(t, 3.0, dim=(1, 2)),
        lambda t: torch.dist(t, t.flip(0)),
        lambda t: t.repeat(1, 2, 1, 1) + 1,
        lambda t: F.hardtanh(t, -0.5, 0.5),
        lambda t: F.max_pool2d(t, 3, stride=2, padding=1),
        lambda t: F.adaptive_avg_pool2d(t, (4, 5)),  # uneven windows: gathers and sums
    ]
    for fn in fns:
        check(fn, x)
        assert solder.explain(fn, x).fallbacks == []
    check(lambda t: F.max_pool2d(t, 2), x.clone().requires_grad_(), grad=True)


@pytest.mark.parametrize("mode,align", [("bilinear", False), ("nearest", True),
                                        ("bicubic", False)])
def test_grid_sample_forward_is_gathers_in_generated_kernels(mode, align):
    # grid_sampler_2d decomposes (PyTorch's table) into index arithmetic and gathers: no ATen
    # call in an inference graph; padding modes and out-of-range grid points as eager
    x = torch.randn(2, 3, 5, 7)
    grid = torch.rand(2, 4, 6, 2) * 2.4 - 1.2
    for padding in ("zeros", "border", "reflection"):
        report = check(lambda a, g: F.grid_sample(a, g, mode=mode, padding_mode=padding,
                                                  align_corners=align), x, grid,
                       rtol=1e-4, atol=1e-5)
        assert not report.fallbacks, report


# -- decompositions of ops PyTorch leaves whole (capture/decompositions.py OWN) ---------------

def _no_fallbacks_with_grad(fn, *args):
    """The forward and backward graphs both run in generated kernels or library calls."""
    torch._dynamo.reset()
    report = solder.explain(lambda *a: fn(*a).sum(), *args)
    assert not report.fallbacks, _fallback_ops(report)


def test_max_pool3d_gradient_is_a_scatter_add():
    x = torch.randn(2, 3, 5, 6, 7, requires_grad=True)
    fn = lambda t: F.max_pool3d(t, 2, stride=(1, 2, 2), padding=1)   # noqa: E731
    check(fn, x, grad=True)
    _no_fallbacks_with_grad(fn, x)


@pytest.mark.parametrize("beta, alpha", [(1, 1), (0.5, 2.0), (0, 1)])
def test_addbmm_is_a_bmm_and_a_sum(beta, alpha):
    inp = torch.randn(3, 5, requires_grad=True)
    a, b = torch.randn(4, 3, 6, requires_grad=True), torch.randn(4, 6, 5, requires_grad=True)
    fn = lambda i, x, y: torch.addbmm(i, x, y, beta=beta, alpha=alpha)   # noqa: E731
    check(fn, inp, a, b, grad=True)
    _no_fallbacks_with_grad(fn, inp, a, b)
    if beta == 0:   # the input is not read: its NaN does not reach the result
        check(fn, torch.full((3, 5), float("nan")), a.detach(), b.detach())


@pytest.mark.parametrize("pad, shape", [((2, 3), (2, 3, 5)), ((2, 1, 3, 2), (2, 3, 5, 4)),
                                        ((-1, 2, 1, -2), (2, 3, 5, 4)),
                                        ((1, 1, 2, 0, 0, 2), (2, 2, 3, 4, 5))])
def test_replication_pad_gradient_is_index_adds(pad, shape):
    x = torch.randn(*shape, requires_grad=True)
    fn = lambda t: F.pad(t, pad, mode="replicate")   # noqa: E731
    check(fn, x, grad=True)
    _no_fallbacks_with_grad(fn, x)


def test_sgn_gradient_zero_tensor_is_lowered():
    # autograd builds sgn's gradient from aten._efficientzerotensor: a constant, not a fallback
    x = torch.randn(6, requires_grad=True)
    check(torch.sgn, x, grad=True)
    _no_fallbacks_with_grad(torch.sgn, x)


def test_bilinear_is_one_fused_reduction():
    x1, x2 = torch.randn(5, 3, requires_grad=True), torch.randn(5, 4, requires_grad=True)
    w, b = torch.randn(6, 3, 4, requires_grad=True), torch.randn(6, requires_grad=True)
    check(F.bilinear, x1, x2, w, b, grad=True)
    _no_fallbacks_with_grad(F.bilinear, x1, x2, w, b)
    check(lambda a, c, m: F.bilinear(a, c, m), torch.randn(2, 7, 3), torch.randn(2, 7, 4),
          torch.randn(6, 3, 4))


def test_logcumsumexp_is_two_prefix_reductions():
    inf, nan = float("inf"), float("nan")
    edges = torch.tensor([[-inf, 1.0, inf, 2.0], [nan, 1.0, 0.0, -1.0],
                          [-inf, -inf, 3.0, 1e30]])
    check(lambda t: torch.logcumsumexp(t, 1), edges)
    x = torch.randn(3, 50, 4, requires_grad=True)
    check(lambda t: torch.logcumsumexp(t, 1), x, grad=True)
    _no_fallbacks_with_grad(lambda t: torch.logcumsumexp(t, 1), x)


@pytest.mark.parametrize("fn", [torch.cummax, torch.cummin])
def test_cummax_cummin_keep_atens_ties_and_nans(fn):
    nan, inf = float("nan"), float("inf")
    x = torch.tensor([[1.0, 3.0, 3.0, 2.0, 5.0, 5.0], [nan, 1.0, nan, 2.0, 0.0, 9.0],
                      [-inf, -inf, 2.0, 2.0, inf, 1.0]])
    check(lambda t: tuple(fn(t, 1)), x)           # ties: the latest index; NaN: the latest NaN
    check(lambda t: tuple(fn(t, 0)), torch.randint(-3, 3, (7, 4)))
    y = torch.randn(3, 9, requires_grad=True)
    check(lambda t: fn(t, 1).values, y, grad=True)
    _no_fallbacks_with_grad(lambda t: fn(t, 1).values, y)


# -- found on the GPU (1-bit integers and integer signbit) -----------------------------------

def test_adding_booleans_is_an_or():
    # Triton adds two i1 values modulo 2 on the GPU (True + True = False); eager gives True.
    # The interpreter adds numpy bools as an or, so on the CPU the emitted text is the check.
    from solder.codegen.scalar_ops import SCALAR_OPS
    assert SCALAR_OPS["add"](["a", "b"], [torch.bool, torch.bool]) == "(a | b)"
    assert SCALAR_OPS["add"](["a", "b"], [torch.int32, torch.int32]) == "(a + b)"
    a = torch.tensor([True, True, False, False])
    b = torch.tensor([True, False, True, False])
    check(lambda a, b: (a + b, torch.add(a, b, alpha=True)), a, b)
    check(lambda a: a + torch.tensor(True, device=a.device), a)


def test_signbit_of_integers_is_a_comparison():
    # libdevice's signbit takes floats only: the GPU kernel did not compile for int64 and bool
    from solder.codegen.scalar_ops import SCALAR_OPS
    assert SCALAR_OPS["signbit"](["x"], [torch.int64]) == "(x < 0)"
    assert "libdevice" not in SCALAR_OPS["signbit"](["x"], [torch.bool])
    check(torch.signbit, torch.tensor([-3, 0, 4, -(2 ** 40)]))
    check(torch.signbit, torch.tensor([True, False]))
    check(torch.signbit, torch.tensor([-0.0, 0.0, -1.5, float("nan")]))


def test_polygamma_in_place_is_functionalized():
    # aten::polygamma_ takes (self, n) where polygamma takes (n, self); AOTAutograd's
    # functionalization refused it until Dynamo's graph spelled it polygamma + copy_
    def f(x):
        y = x * 1
        y.polygamma_(1)
        torch.Tensor.polygamma_(y, 0)
        return y
    check(f, torch.rand(6) + 0.5)

    def g(x):   # an input written in place
        x.polygamma_(2)
        return x.sum()
    check(g, torch.rand(6) + 0.5)


def test_cat_of_legacy_empty_tensors_only():
    # cat skips 1-D empty inputs (eager's legacy rule); with nothing left the lowering had no
    # value to give and the compile failed
    d = torch.get_default_device()
    check(lambda x: torch.cat([torch.arange(0, 0, device=d), x[:0] // 1]) + 1,
          torch.arange(4))
    check(lambda x: torch.stack([x[:0], x[:0] * 2]), torch.arange(4))


@pytest.mark.parametrize("args", [(0, 0), (3, 3), (4, 3, 1), (3, 5, -1), (5, 2, -3)])
def test_tril_and_triu_indices_are_generated_code(args):
    d = torch.get_default_device()
    for fn in (torch.tril_indices, torch.triu_indices):
        report = check(lambda x: fn(*args, device=d) + x, torch.zeros((), dtype=torch.int64))
        assert not report.fallbacks


@pytest.mark.parametrize("mode", ["bilinear", "nearest"])
@pytest.mark.parametrize("padding", ["zeros", "border", "reflection"])
@pytest.mark.parametrize("align", [False, True])
def test_grid_sample_3d_is_generated_code(mode, padding, align):
    # gathers from the flattened volume, ATen's arithmetic step for step (grid_sample.py)
    torch.manual_seed(0)
    x = torch.randn(2, 3, 4, 5, 6)
    grid = torch.rand(2, 3, 4, 2, 3) * 2.6 - 1.3    # reaches past the borders on every side
    grid[0, 0, 0, 0] = torch.tensor([0.2, -0.5, 1.0])   # exactly on a face
    fn = lambda x, g: F.grid_sample(x * 2, g, mode=mode, padding_mode=padding,  # noqa: E731
                                    align_corners=align)
    report = check(fn, x, grid)
    # one kernel; reflection also stores its folded coordinates (too long to recompute)
    assert not report.fallbacks and report.kernel_count <= (2 if padding == "reflection" else 1)


@pytest.mark.parametrize("spatial", [2, 3])
@pytest.mark.parametrize("mode", ["bilinear", "nearest"])
@pytest.mark.parametrize("padding,align", [("zeros", False), ("border", True),
                                           ("reflection", False), ("reflection", True)])
def test_grid_sample_gradients_are_generated_code(spatial, mode, padding, align):
    # both gradients (input: a scatter_add into the corners read; grid: the corner weights'
    # derivative through ATen's clamp and reflection rules), grid_sample.py
    torch.manual_seed(1)
    x = torch.randn(2, 3, *([4, 5, 6][-spatial:]), requires_grad=True)
    grid = (torch.rand(2, *([3, 4, 2][-spatial:]), spatial) * 2.6 - 1.3).requires_grad_()
    fn = lambda x, g: F.grid_sample(x.sin(), g, mode=mode, padding_mode=padding,  # noqa: E731
                                    align_corners=align) * 2
    report = check(fn, x, grid, grad=True)
    assert not report.fallbacks, report.fallbacks
