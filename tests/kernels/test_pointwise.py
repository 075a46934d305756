"""Elementwise ops through generated kernels: values, dtypes, promotion, and fusion into one kernel."""
import pytest
import torch
import torch.nn.functional as F

from .helpers import check

UNARY = ["abs", "neg", "exp", "exp2", "expm1", "log1p", "sqrt", "rsqrt", "sin", "cos", "tan",
         "tanh", "sigmoid", "erf", "erfc", "floor", "ceil", "trunc", "round", "sign", "frac",
         "reciprocal", "sinh", "cosh", "asinh"]


@pytest.mark.parametrize("name", UNARY)
def test_unary_float32(name):
    fn = getattr(torch, name)
    x = torch.rand(37) * 2 + 0.1 if name in ("sqrt", "rsqrt", "log1p", "reciprocal") else torch.randn(37)
    check(lambda t: fn(t), x, kernels=1, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16, torch.float64])
def test_float_dtypes(dtype):
    check(lambda a, b: torch.sigmoid(a * b + 1) - a / (b.abs() + 1), torch.randn(33, dtype=dtype),
          torch.randn(33, dtype=dtype), kernels=1)


def test_integer_arithmetic():
    a, b = torch.randint(-20, 20, (64,)), torch.randint(1, 7, (64,)) * torch.tensor([1, -1]).repeat(32)
    check(lambda x, y: (x // y, x % y, torch.fmod(x, y), x * y - 3, x & 5, x | 2, x ^ y, ~x),
          a, b, kernels=1)


def test_integer_pow_is_exact_and_rounding_ops_are_the_identity_on_integers():
    # integer pow by squaring: negative exponents (1, -1 or 0, as eager), products that wrap
    # around int64, bool bases; floor/ceil/trunc/round of integers return them unchanged
    base = torch.tensor([2, -3, 0, 1, -1, 5, -1, 3, 7, -2])
    exp = torch.tensor([3, -2, -1, -5, -3, 0, -4, 40, 2, 63])
    check(lambda a, b: (torch.pow(a, b), torch.pow(3, b.abs()), torch.pow(a, 5)), base, exp,
          kernels=1)
    check(lambda a, b: torch.pow(a, b), torch.tensor([True, False, True]),
          torch.tensor([2, 0, 0]))
    check(lambda a: (torch.floor(a), torch.ceil(a), torch.trunc(a), torch.round(a) * 2),
          base, kernels=1)


def test_conversions_to_bfloat16_round_to_nearest_even_like_eager():
    # float64 and float32 values to bfloat16, ties and specials included, bit for bit as eager
    # (on the CPU this checks Solder's rounding around the interpreter's conversions, which
    # truncate float32 and misread float64). NaN stays NaN; its payload is not compared: eager
    # itself writes 0x7FC0 on the CPU and 0x7FFF on CUDA.
    x = torch.tensor([0.3, 1.5390625, -0.30078, 1.00390625, 1.01171875, 3.3895e38, 7.0,
                      float("nan"), float("inf"), -float("inf"), -0.0], dtype=torch.float64)
    out = torch.compile(lambda t: (t.to(torch.bfloat16), t.float().to(torch.bfloat16),
                                   (t.float() * 1).to(torch.bfloat16)), backend="solder")(x)
    ref = x.to(torch.bfloat16)
    nan = ref.isnan()
    for o in out:
        assert torch.equal(o.isnan(), nan)
        assert o[~nan].view(torch.int16).tolist() == ref[~nan].view(torch.int16).tolist()


def test_comparison_and_logic():
    a, b = torch.randn(50), torch.randn(50)
    check(lambda x, y: ((x < y) & (x > -0.5), (x == y) | ~(x >= 0), torch.logical_xor(x > 0, y > 0),
                        torch.isnan(x / (y - y)), torch.isinf(1 / (x - x))), a, b, kernels=1)


def test_promotion_int_float_bool():
    check(lambda i, f, b: (i + f, i * 2.5, b + i, f / i, torch.where(b, i, f)),
          torch.randint(1, 5, (20,)), torch.randn(20), torch.rand(20) > 0.5, kernels=1)


def test_where_clamp_and_scalars():
    check(lambda x: (torch.where(x > 0, x, 0.1 * x).clamp(-0.5, 0.5), x.clamp(min=0),
                     x.clamp_max(0.2), F.relu(x) ** 2, x.pow(3), x.abs().pow(0.5)),
          torch.randn(40), kernels=1)


def test_casts_round_like_eager():
    x = torch.randn(64) * 100
    check(lambda t: (t.to(torch.bfloat16), t.to(torch.float16).float() * 3, t.to(torch.int32),
                     t.to(torch.bool), (t > 0).to(torch.float32)), x, kernels=1)


def test_nan_propagates_through_max_min():
    x = torch.tensor([1.0, float("nan"), -2.0, 3.0])
    y = torch.tensor([float("nan"), 0.0, 5.0, -1.0])
    check(lambda a, b: (torch.maximum(a, b), torch.minimum(a, b), torch.fmax(a, b)), x, y)


def test_long_chain_is_one_kernel():
    check(lambda x: torch.tanh(torch.sigmoid(F.gelu(x)) * 2), torch.randn(1000), kernels=1)


def test_broadcast_siblings_share_a_kernel():
    check(lambda x, y: (x + y, x * y, (x - y).exp()), torch.randn(8, 16), torch.randn(16), kernels=1)


def test_masked_fill_and_constants():
    x = torch.randn(6, 5)
    check(lambda t: (t.masked_fill(t > 0, -1.0), torch.full_like(t, 3.0) + t, torch.zeros_like(t),
                     torch.ones(6, 5) * t), x)


def test_arange_and_iota():
    check(lambda x: (x + torch.arange(12, device=x.device).view(3, 4),
                     torch.arange(2, 14, 3, device=x.device).float() * 0.5),
          torch.randn(3, 4))


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16, torch.float32, torch.float64,
                                   torch.int64, torch.int32])
def test_linspace_has_eagers_exact_values(dtype):
    # fuzz seed 213858: PyTorch's reference computes a bfloat16 linspace in float32 and rounds
    # once (0.69921875 at linspace(0.5, 1.5, 16)[3]); ATen's kernels round each operation in
    # the dtype (0.703125), and contract start + step * i into one fused multiply-add for the
    # other dtypes (an int64 linspace(1000, -1000, 301)[99] is 339, not 340)
    ranges = [(0.5, 1.5, 16), (-2.0, -0.25, 16), (-2.0, -0.25, 1), (0, 1, 7), (-3, 7, 5),
              (1000.0, -1000.0, 301), (-7, 8, 300), (0, 10, 0)]

    def fn(x):
        return [torch.linspace(a, b, n, dtype=dtype, device=x.device) for a, b, n in ranges]
    x = torch.zeros(1)
    out = torch.compile(fn, backend="solder")(x)
    for o, r in zip(out, fn(x)):
        assert o.dtype == r.dtype and torch.equal(o, r), (o, r)


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_integers_cast_to_half_precision(dtype):
    # a count divided in bf16, as cross_entropy's mean does (int64 -> bf16 went to 0 under the
    # interpreter: a division by zero)
    x = torch.tensor([3, -7, 1000, 2**20 + 1, 0])
    check(lambda x, y: (x.to(dtype), y.sum().to(dtype) / (x.ne(0).sum().to(dtype))),
          x, torch.randn(5).to(dtype))


def test_copysign_round_decimals_and_angle_are_lowered():
    x = torch.tensor([1.2345, -2.5, 0.5, -0.0, float("nan"), 1234.5, -7.0, 0.0])
    y = torch.tensor([-1.0, 2.0, -0.0, 3.0, 1.0, -1.0, float("nan"), -2.0])
    report = check(lambda x, y: (torch.copysign(x, y), torch.copysign(x, -1.5),
                                 torch.round(x * 3, decimals=2), torch.round(x, decimals=-2),
                                 torch.angle(x), torch.angle(torch.arange(-2, 3, device=x.device))),
                   x, y, kernels=None)
    assert not report.fallbacks, report.fallbacks
