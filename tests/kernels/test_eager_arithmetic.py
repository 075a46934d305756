"""Arithmetic whose eager answer is a rule of ATen's rather than the obvious formula: float
floor division and remainder (computed from fmod), truncating division in half precision (the
quotient rounded first), scalars converted to an integer or bool tensor's dtype
(``addcmul(..., value=0.5)`` on integers adds nothing, ``index_add`` of bools ORs), and
constants stored by scatters."""
import pytest
import torch

from .helpers import check

SPECIAL = [float("inf"), -float("inf"), float("nan"), 0.0, -0.0, 5.0, -5.0, 7.5, -7.5, 3.0,
           -3.0, 2.0, 0.3, -0.7, 1e-3, 1e4]


def _pairs(dtype):
    v = torch.tensor(SPECIAL, dtype=torch.float64)
    a, b = v.repeat_interleave(len(v)), v.repeat(len(v))
    return a.to(dtype), b.to(dtype)


def _same_bits(out, ref, also=None):
    """Equal values, NaN where eager has NaN, and the sign of every zero (or the same against
    ``also``, a second answer eager gives on another device)."""
    ok = ((out == ref) | (out.isnan() & ref.isnan())) & (
        (torch.signbit(out) == torch.signbit(ref)) | ref.isnan())
    if also is not None:
        ok |= ((out == also) | (out.isnan() & also.isnan())) & (
            (torch.signbit(out) == torch.signbit(also)) | also.isnan())
    bad = (~ok).nonzero().flatten()[:4].tolist()
    assert ok.all(), f"{int((~ok).sum())} differ, first at {bad}: {out[bad]} vs {ref[bad]}"


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.float16, torch.bfloat16])
@pytest.mark.parametrize("op", ["floor", "trunc", "remainder", "fmod"])
def test_rounding_division_at_special_values(op, dtype):
    fn = {"floor": lambda a, b: torch.div(a, b, rounding_mode="floor"),
          "trunc": lambda a, b: torch.div(a, b, rounding_mode="trunc"),
          "remainder": torch.remainder, "fmod": torch.fmod}[op]
    a, b = _pairs(dtype)
    ref = fn(a, b)
    out = torch.compile(fn, backend="solder")(a, b)
    # half precision: eager on the CPU rounds some steps to the half type, CUDA's floor
    # division runs in float32 throughout (-5 // 0.001 in float16: -4996 and -5000)
    also = fn(a.float(), b.float()).to(dtype) if op != "trunc" and dtype.itemsize == 2 else None
    if op == "fmod" or op == "remainder":
        # eager's CPU fmod of float32 is NaN where the quotient is huge (1e4 fmod 1e-3 in
        # float16 inputs); float64's is exact, as Solder's
        also = fn(a.double(), b.double()).to(dtype)
    _same_bits(out, ref, also)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16, torch.float64])
@pytest.mark.parametrize("divisor", [1e-3, 0.3, -7.0, 3, 0.0, -0.0, float("inf"), float("nan")])
def test_division_by_a_python_number_is_eager_bit_for_bit(dtype, divisor):
    # on the GPU ATen multiplies by the number's reciprocal (taken in double, rounded to the
    # compute type): -0.25 / 1e-3 is -250 there and -249.99998 divided correctly rounded, one
    # unit once truncated (fuzz seed 423751); the CPU divides
    a, _ = _pairs(dtype)
    a = torch.cat([a, torch.tensor([-0.25, 0.1, 1.7, -3.3], dtype=dtype)])
    fn = lambda x: (x / divisor, (x / divisor).nan_to_num(0.0).clamp(-1e4, 1e4).to(torch.int32))  # noqa: E731
    out = torch.compile(fn, backend="solder")(a.clone())
    ref = fn(a.clone())
    _same_bits(out[0], ref[0])
    assert torch.equal(out[1], ref[1])


def test_floor_division_of_infinity_is_nan():
    # inf // 2 is NaN in ATen (fmod(inf, 2) is NaN); floor(inf / 2) would be inf
    fn = lambda a: torch.div(a, 2.0, rounding_mode="floor")  # noqa: E731
    x = torch.tensor([float("inf"), -float("inf"), 5.0])
    out = torch.compile(fn, backend="solder")(x)
    assert out[:2].isnan().all() and out[2] == 2.0


def test_half_truncating_division_rounds_the_quotient_first():
    # 3 / 0.30078125 = 9.97 rounds to 10 in bfloat16 before it is truncated
    a = torch.tensor([3.0, -3.0], dtype=torch.bfloat16)
    b = torch.tensor([0.30078125, 0.30078125], dtype=torch.bfloat16)
    fn = lambda a, b: torch.div(a, b, rounding_mode="trunc")  # noqa: E731
    out = torch.compile(fn, backend="solder")(a, b)
    assert out.tolist() == fn(a, b).tolist() == [10.0, -10.0]


@pytest.mark.parametrize("value", [0.5, 1.7, -1.7, 3])
def test_addcmul_of_integers_truncates_the_scalar(value):
    a = torch.tensor([1, 2, 3])
    t1, t2 = torch.tensor([4, 5, 6]), torch.tensor([[7], [-8]])
    check(lambda a, t1, t2: torch.addcmul(a, t1, t2, value=value), a, t1, t2)


def test_addcmul_promotes_before_it_multiplies():
    a, t1 = torch.randn(5), torch.randint(-3, 4, (5,))
    t2 = torch.randn(5, dtype=torch.float64)
    check(lambda a, t1, t2: torch.addcmul(a, t1, t2, value=0.5), a, t1, t2)


DTYPES = [torch.bool, torch.int8, torch.uint8, torch.int32, torch.int64, torch.float16,
          torch.bfloat16, torch.float32, torch.float64]


def _sample(dtype, shape):
    if dtype == torch.bool:
        return torch.rand(shape) > 0.5
    if dtype.is_floating_point:
        return torch.randn(shape).to(dtype)
    return torch.randint(0 if dtype == torch.uint8 else -5, 6, shape).to(dtype)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("alpha", [1, 2, -1, 0])
def test_index_add_alpha_in_every_dtype(dtype, alpha):
    if dtype == torch.uint8 and alpha < 0:
        pytest.skip("eager refuses a negative alpha for uint8")
    idx = torch.tensor([1, 3, 3, 0, 1])
    x, src = _sample(dtype, (3, 4)), _sample(dtype, (3, 5))
    check(lambda x, s: torch.index_add(x, 1, idx, s, alpha=alpha), x, src)


@pytest.mark.parametrize("dtype", [torch.float32, torch.int64, torch.bool])
def test_index_add_of_a_constant_source(dtype):
    # the source is a constant: each atomic update adds one value (the interpreter read a
    # one-element value as a block of the pointer's shape and added garbage)
    idx = torch.tensor([1, 2, 2, 0])

    def fn(x):
        src = torch.full((2, 4), 1 if dtype != torch.float32 else 0.5, dtype=x.dtype,
                         device=x.device)
        return torch.index_add(x, 1, idx.to(x.device), src, alpha=-1 if dtype != torch.bool
                               else 1)
    check(fn, _sample(dtype, (2, 3)))


def test_index_add_into_a_zero_dim_tensor():
    fn = lambda x, s: torch.index_add(x, 0, torch.tensor(0, device=x.device), s, alpha=3)  # noqa: E731
    check(fn, torch.tensor(1.0), torch.tensor(2.0))


def test_scatter_of_a_computed_constant():
    def fn(x, i):
        return x.scatter_add(0, i, torch.full(i.shape, 0.5, device=x.device) * -2.0)
    check(fn, torch.zeros(4), torch.tensor([0, 0, 3, 1, 0]))


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_a_half_precision_constant_holds_its_rounded_value(dtype):
    # full(..., 1e-3, dtype=bfloat16) holds 0.000999..., also where float32 registers read it
    def fn(x):
        c = torch.full((3,), 1e-3, dtype=dtype, device=x.device)
        return c.float() * 1000 + x, c == x.to(dtype)
    check(fn, torch.tensor([0.0, 1e-3, 2.0]))


def test_hypot_of_an_infinite_side_is_infinite_even_against_nan():
    a = torch.tensor([float("inf"), float("nan"), -float("inf"), 3.0])
    b = torch.tensor([float("nan"), -float("inf"), 1.0, 4.0])
    out = torch.compile(torch.hypot, backend="solder")(a, b)
    assert out.tolist() == [float("inf")] * 3 + [5.0]


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
@pytest.mark.parametrize("op", ["fmod", "remainder", "pow", "rpow", "mul", "div", "floor",
                                "trunc"])
def test_a_python_scalar_is_read_as_each_op_reads_it(op, dtype):
    # fmod, remainder and pow read the scalar in the half type (fmod(x, 0.0123) of bfloat16
    # divides by 0.01232...); mul and the divisions keep it in float32 (add too on CUDA; the
    # CPU's float16 add rounds it, which is within a float16 tolerance either way)
    s = 0.0123
    fn = {"fmod": lambda x: torch.fmod(x, s), "remainder": lambda x: torch.remainder(x, s),
          "pow": lambda x: x.abs() ** 1.37, "rpow": lambda x: 1.37 ** x,
          "mul": lambda x: x * s, "div": lambda x: x / s,
          "floor": lambda x: torch.div(x, s, rounding_mode="floor"),
          "trunc": lambda x: torch.div(x, s, rounding_mode="trunc")}[op]
    x = torch.randn(64, generator=torch.Generator().manual_seed(0), device="cpu")
    x = (x * 3).to(dtype=dtype, device=torch.empty(0).device)   # (the default device)
    out = torch.compile(fn, backend="solder")(x)
    assert torch.equal(out, fn(x))


@pytest.mark.parametrize("reduce", ["amax", "amin"])
@pytest.mark.parametrize("include_self", [True, False])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_scatter_reduce_max_and_min_propagate_nan(reduce, include_self, dtype):
    nan = float("nan")
    base = torch.tensor([1.0, nan, 3.0, -2.0]).to(dtype)
    src = torch.tensor([nan, 5.0, -1.0, 0.5, 9.0]).to(dtype)
    idx = torch.tensor([0, 1, 2, 2, 3])
    check(lambda b, s, i: torch.scatter_reduce(b, 0, i, s, reduce, include_self=include_self),
          base, src, idx)


@pytest.mark.parametrize("dtype", [torch.float32, torch.int32, torch.bool])
def test_index_fill_in_every_form(dtype):
    # Solder's own decomposition: PyTorch's (torch 2.11) made a copy_ into an empty_permuted,
    # which AOTAutograd refused in a functional graph (every index_fill failed to compile)
    idx = torch.tensor([0, 2, 0, -1])

    def fn(x, y):
        i = idx.to(x.device)
        a = torch.index_fill(x, 1, i, 1)
        b = torch.index_fill(x.t(), 0, i[1], torch.tensor(0, dtype=torch.float64))
        c = x[:, ::2].index_fill(1, i[:1], 0)
        d = y.expand(3, 2, 4).diagonal().clone().index_fill_(0, i[3:], 1)
        e = torch.index_fill(y[0, 0, 0], 0, i[:1], 1)
        return a, b, c, d, e
    check(fn, _sample(dtype, (4, 4)), _sample(dtype, (1, 2, 4)))


def test_index_fill_gradient():
    idx = torch.tensor([1, 1, 3])
    check(lambda x: torch.index_fill(x * 2, 0, idx, 0.5).sin(), torch.randn(5, 3), grad=True)


@pytest.mark.parametrize("dim", [-1, 0, (-1,), None])
@pytest.mark.parametrize("keepdim", [False, True])
def test_vector_norm_over_dims_of_size_one(dim, keepdim):
    # torch 2.11's decomposition kept a reduced dim of size 1 given as a negative index
    check(lambda x, y: (torch.linalg.vector_norm(x, 3, dim=dim, keepdim=keepdim),
                        torch.linalg.vector_norm(y, dim=dim, keepdim=keepdim)),
          torch.randn(1).half(), torch.randn(3, 1))


@pytest.mark.parametrize("call", ["vector_norm", "linalg_norm", "torch_norm", "method"])
def test_vector_norm_gradient_over_dims_of_size_one(call):
    # the backward of a norm of a (1, 1) tensor over dims (-2, 1): torch 2.11's metadata pass
    # made the gradient (1,), and the compiled backward refused eager's ()
    norm = {"vector_norm": lambda x: torch.linalg.vector_norm(x, 1, dim=(-2, 1)),
            "linalg_norm": lambda x: torch.linalg.norm(x, dim=-1),
            "torch_norm": lambda x: torch.norm(x, 3, dim=(-1, 0)),
            "method": lambda x: x.norm(2, -2)}[call]
    x = torch.randn(1, 1, dtype=torch.float64, requires_grad=True)
    out = torch.compile(norm, backend="solder")(x)
    ref = norm(x)
    assert out.shape == ref.shape
    torch.testing.assert_close(out, ref)
    grad, = torch.autograd.grad(out.sum() * 3, x)
    want, = torch.autograd.grad(ref.sum() * 3, x)
    torch.testing.assert_close(grad, want)


def test_negative_norm_dims_are_made_non_negative_before_autograd():
    from solder.capture.before_autograd import rewrite_before_autograd

    def fn(x):
        return (torch.linalg.vector_norm(x, 1, dim=(-2, 1)), torch.linalg.norm(x, dim=-1),
                x.norm(2, -2), torch.norm(x, dim=[0, -1]))
    gm = torch.fx.symbolic_trace(fn)
    for node in gm.graph.nodes:
        if node.op == "placeholder":
            node.meta["example_value"] = torch.empty(1, 1)
    assert rewrite_before_autograd(gm)
    dims = [node.args[2] if len(node.args) > 2 else node.kwargs["dim"]
            for node in gm.graph.nodes if node.op in ("call_function", "call_method")]
    assert dims == [(0, 1), 1, 0, [0, 1]]


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16])
def test_statistics_of_a_constant_row_are_exact(dtype):
    # eager's Welford updates give a constant row a variance of exactly 0 and its value as the
    # mean: a normalization returns its bias there, and 1 / var is inf. A plain two-pass
    # variance rounds sum / n away from the value (the layer norm was off by 1e-4, 1 / var
    # finite)
    import torch.nn.functional as F
    x = torch.randn(4, 6, 10).to(dtype)
    x[0] = 0.1
    x[1, 2] = -3.7
    x[:, 3] = 2.3   # a constant channel for the batch norm
    w, b = torch.randn(10).to(dtype), torch.randn(10).to(dtype)
    cw, cb = torch.randn(6).to(dtype), torch.randn(6).to(dtype)

    def fn(x, w, b, cw, cb):
        var, mean = torch.var_mean(x, -1)
        return (var, mean, 1 / var, torch.std(x, (1, 2)), F.layer_norm(x, (10,), w, b),
                F.group_norm(x, 3, cw, cb), F.batch_norm(x, None, None, cw, cb, training=True))
    args = (x, w, b, cw, cb)
    out, ref = torch.compile(fn, backend="solder")(*args), fn(*args)
    torch.testing.assert_close(out[3], ref[3])   # (std over (1, 2): rows that vary)
    exact = [(o[0], r[0]) for o, r in zip(out[:3], ref[:3])] + [
        (out[4][0], ref[4][0]), (out[4][1, 2], ref[4][1, 2])]
    # a layer norm's: its bias, but on the CPU in float16/bfloat16, whose kernel keeps the
    # rounding error of x * rstd - mean * rstd (fuzz seed 591323)
    if x.device.type != "cpu" or dtype == torch.float32:
        exact += [(out[4][0], b.expand(6, 10)), (out[4][1, 2], b)]
    # the batch norm's constant channel is its bias: eager's CUDA kernel (Welford) says so;
    # its CPU kernel takes two passes and is off by rounding there. (A group norm applies
    # x * (rstd * w) + (b - mean * rstd * w), in eager's kernels too: not exact.)
    exact.append((out[6][:, 3], cb[3].expand(4, 10)))
    torch.testing.assert_close(out[5], ref[5], rtol=2e-2, atol=2e-2)
    for k, (o, r) in enumerate(exact):
        assert torch.equal(o, r), (k, o.flatten()[:12], r.flatten()[:12])


def test_mean_of_infinities_is_nan_as_eager_var_mean_gives_it():
    # rows whose infinity is followed by another update: NaN in eager's Welford on both
    # devices. Elsewhere eager's answer depends on its order of updates (the last row's mean is
    # NaN on the CPU, -inf on an H100 under torch 2.11): Solder's is NaN there
    inf = float("inf")
    y = torch.tensor([[-inf, -inf, -inf], [inf, 1.0, 2.0], [1.0, -inf, 2.0]])
    out = torch.compile(lambda y: torch.var_mean(y, 1), backend="solder")(y)
    ref = torch.var_mean(y[:2], 1)
    for o, r in zip(out, ref):
        o, last = o[:2], o[2]
        assert torch.equal(o.isnan(), r.isnan()) and torch.equal(o[~o.isnan()], r[~r.isnan()])
        assert last.isnan()
    # a single element is its own mean (the shift by it would make inf - inf)
    one = torch.tensor([[inf], [2.0]])
    out = torch.compile(lambda y: torch.var_mean(y, 1, correction=0), backend="solder")(one)
    assert out[1].tolist() == [inf, 2.0] and out[0][0].isnan() and out[0][1] == 0


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.float16])
def test_round_keeps_the_sign_of_zero_and_leaves_integers(dtype):
    # round(-0.3) is -0.0 (1 / it is -inf), and a float32 integer above 2**23 is its own
    # rounding (x + 0.5 rounds to the next even integer there)
    x = torch.tensor([-0.3, -0.5, 0.5, -0.0, 2.5, -3.5, 8388609.0, 2.0**52 + 1, float("inf"),
                      float("nan"), 1e-8]).to(dtype)
    _same_bits(torch.compile(torch.round, backend="solder")(x), torch.round(x))
    fn = lambda a: torch.div(a, torch.round(a), rounding_mode="trunc")  # noqa: E731
    _same_bits(torch.compile(fn, backend="solder")(x), fn(x))


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_std_of_half_values_takes_its_root_before_rounding(dtype):
    # a float16 variance of 5e7 is inf; its square root, 7071, is not
    x = torch.tensor([[1e4, 0.0, 5.0], [-1e4, 2.0, 1e4]]).to(dtype)
    check(lambda x: (x.std(0), torch.std_mean(x, 1), x.var(0)), x)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.float16])
def test_negation_of_zero_is_negative_zero(dtype):
    # Triton's unary minus is 0 - x, which gives +0.0 for -(0.0)
    x = torch.tensor([0.0, -0.0, 1.5, float("inf")]).to(dtype)
    _same_bits(torch.compile(torch.neg, backend="solder")(x), torch.neg(x))
    _same_bits(torch.compile(lambda t: torch.signbit(-t), backend="solder")(x).to(dtype),
               torch.signbit(-x).to(dtype))


def test_index_fill_of_a_strided_input_keeps_its_order_of_dims():
    # eager's index_fill clones its input (preserving the order of dims) before filling: an
    # as_strided_scatter of the result then lands where eager's does
    b = torch.arange(24).reshape(6, 4)

    def fn(a):
        v = torch.index_fill(a, 1, torch.tensor([0], device=a.device), 3)
        return v, torch.as_strided_scatter(v, torch.zeros(1, dtype=v.dtype, device=v.device),
                                           (1,), (1,), 3)
    for a in (b[::3].permute(1, 0), b[:, ::2], b.t()):
        out, ref = torch.compile(fn, backend="solder")(a), fn(a)
        assert all(torch.equal(o, r) and o.stride() == r.stride() for o, r in zip(out, ref))
        torch._dynamo.reset()


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.float16, torch.int64])
def test_true_division_and_reciprocal_keep_the_sign_of_zero(dtype):
    # 0 / -3 is -0.0 in eager, and x / -0.0 the infinity of the other sign: the GPU's
    # correctly rounded division must keep both (its operands once lost a zero's sign)
    a, b = _pairs(torch.float64)
    if not dtype.is_floating_point:
        a, b = (a.nan_to_num(0.0, 8.0, -8.0) % 9).to(dtype), (b.nan_to_num(0.0, 8.0, -8.0) % 5 - 2).to(dtype)
    else:
        a, b = a.to(dtype), b.to(dtype)

    def fn(a, b):
        q = a / b
        return q, b / q, torch.reciprocal(q)
    for out, ref in zip(torch.compile(fn, backend="solder")(a, b), fn(a, b)):
        _same_bits(out, ref)


def _kernel_module(src: str, name: str):
    """A module of Triton kernels written here (Triton's interpreter reads their source from
    a file)."""
    import importlib.util
    import os
    import tempfile
    path = os.path.join(tempfile.mkdtemp(), f"{name}.py")
    with open(path, "w") as f:
        f.write(src)
    spec = importlib.util.spec_from_file_location(name, path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_the_division_helper_keeps_signed_zeros_and_infinities():
    # the prelude's helper itself, as the GPU runs it (here in Triton's interpreter, whose
    # div_rn is numpy's division): the codegen calls it only on a GPU
    import os

    import triton  # noqa: F401
    from solder.codegen.scalar_ops import PRELUDE
    if os.environ.get("TRITON_INTERPRET") != "1":
        pytest.skip("runs the helper in Triton's interpreter")
    src = "import triton\nimport triton.language as tl\n" + PRELUDE + (
        "\n@triton.jit\ndef k(a, b, o, n: tl.constexpr):\n"
        "    i = tl.arange(0, n)\n"
        "    tl.store(o + i, _div_rn(tl.load(a + i), tl.load(b + i)))\n")
    mod = _kernel_module(src, "div_helper")
    a = torch.tensor([-0.0, 0.0, 1.0, -1.0, 3.0, -0.0, 0.0, 2.5], device="cpu")
    b = torch.tensor([3.0, -3.0, -0.0, -0.0, 0.0, -2.0, 0.0, -0.5], device="cpu")
    out = torch.empty_like(a)
    mod.k[(1,)](a, b, out, 8)
    _same_bits(out, a / b)


_ZERO_SIGN_OPS = {
    "expm1": torch.expm1, "log1p": torch.log1p, "sinh": torch.sinh, "tanh": torch.tanh,
    "asinh": torch.asinh, "atanh": torch.atanh, "asin": torch.asin,
    "elu": torch.nn.functional.elu, "celu": torch.nn.functional.celu,
    "selu": torch.nn.functional.selu, "relu": torch.relu, "relu6": torch.nn.functional.relu6,
    "hardtanh": torch.nn.functional.hardtanh,
    "maximum": lambda z: torch.maximum(z, torch.zeros_like(z)),
    "minimum": lambda z: torch.minimum(z, torch.zeros_like(z)),
    "maximum_zero_first": lambda z: torch.maximum(torch.zeros_like(z), z),
    "minimum_zero_first": lambda z: torch.minimum(torch.zeros_like(z), z),
    "clamp": lambda z: z.clamp(min=0.0), "clamp_max": lambda z: z.clamp(max=0.0),
    "fmax": lambda z: torch.fmax(z, torch.zeros_like(z)),
    "fmin": lambda z: torch.fmin(z, torch.zeros_like(z)),
    "atan2": lambda z: torch.atan2(z, torch.full_like(z, 2.0)),   # seed 182441
}


@pytest.mark.parametrize("name", sorted(_ZERO_SIGN_OPS))
def test_the_sign_of_a_zero_result_is_eagers(name):
    # f(-0.0) is -0.0 for odd functions (exp(x) - 1 gave +0.0), and of two equal values
    # maximum, minimum and clamp return what eager's kernels on the device do: the first on
    # the CPU (relu(-0.0) is -0.0), -0.0 < +0.0 on CUDA (relu(-0.0) is +0.0); a gradient
    # through sqrt or a division by the result turns the sign into an infinity's
    fn = _ZERO_SIGN_OPS[name]
    z = torch.tensor([-0.0, 0.0, -1e-30, 1e-30])
    _same_bits(torch.compile(fn, backend="solder")(z), fn(z))


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
@pytest.mark.parametrize("op", ["eq", "ne", "lt", "le", "gt", "ge"])
def test_a_comparison_reads_its_operands_in_their_common_dtype(op, dtype):
    # ATen compares a half tensor with a Python scalar (or a float32 0-d tensor) after
    # rounding it to the half type, on both devices: x == 1e-3 holds where x holds
    # float16(1e-3) (seed 144566: a masked_fill_ of 1e-3 compared with 1e-3)
    cmp = getattr(torch, op)
    x = torch.tensor([1e-3, 0.5, 2e-3, 0.0999, 0.1, 0.1001, -1e-3], dtype=dtype)
    zero_d = torch.tensor(0.1, dtype=torch.float32, device=x.device)
    for fn in (lambda x: cmp(x, 1e-3), lambda x: cmp(x, 0.1), lambda x: cmp(x, zero_d),
               lambda x: cmp(x, -1e-3), lambda x: {"eq": 0.1 == x, "ne": 0.1 != x,
                                                     "lt": 0.1 < x, "le": 0.1 <= x,
                                                     "gt": 0.1 > x, "ge": 0.1 >= x}[op]):
        assert torch.equal(torch.compile(fn, backend="solder")(x), fn(x))


@pytest.mark.parametrize("op", ["maximum", "minimum", "fmax", "fmin"])
def test_the_gpu_form_of_max_and_min_orders_zeros_as_cuda_does(op, monkeypatch):
    # the expression a GPU kernel gets (emitted as if not interpreting), run here in the
    # interpreter: ATen's CUDA kernels call fmaxf/fminf, for which -0.0 < +0.0 whatever the
    # order, and NaN propagates (maximum) or yields to a number (fmax)
    import os

    import triton  # noqa: F401
    from solder.codegen import scalar_ops
    if os.environ.get("TRITON_INTERPRET") != "1":
        pytest.skip("runs the GPU form in Triton's interpreter")
    monkeypatch.setattr(scalar_ops, "interpreting", lambda: False)
    expr = scalar_ops.SCALAR_OPS[op](["x", "y"], [torch.float32, torch.float32])
    src = ("import triton\nimport triton.language as tl\n"
           "@triton.jit\ndef k(a, b, o, n: tl.constexpr):\n"
           "    i = tl.arange(0, n)\n    x = tl.load(a + i)\n    y = tl.load(b + i)\n"
           f"    tl.store(o + i, {expr})\n")
    mod = _kernel_module(src, "minmax_gpu_form")
    nan = float("nan")
    a = torch.tensor([-0.0, 0.0, -0.0, 0.0, 1.0, -2.0, nan, 3.0, nan], device="cpu")
    b = torch.tensor([0.0, -0.0, -0.0, 0.0, 1.0, 5.0, 1.0, nan, nan], device="cpu")
    a16, b16 = (torch.cat([t, torch.zeros(7)]) for t in (a, b))
    out = torch.empty_like(a16)
    mod.k[(1,)](a16, b16, out, 16)
    out = out[:9]
    zero_pos = {"maximum": True, "fmax": True, "minimum": False, "fmin": False}[op]
    for i in range(4):   # two zeros: +0.0 for max (unless both -0.0), -0.0 for min
        both = torch.signbit(a[i]) == torch.signbit(b[i])
        want_neg = bool(torch.signbit(a[i])) if both else not zero_pos
        assert out[i] == 0 and bool(torch.signbit(out[i])) == want_neg, (i, out[i])
    big = op in ("maximum", "fmax")
    assert out[4] == 1.0 and out[5] == (5.0 if big else -2.0)
    if op in ("maximum", "minimum"):
        assert out[6:].isnan().all()
    else:
        assert out[6] == 1.0 and out[7] == 3.0 and out[8].isnan()


def test_a_sum_of_negative_zeros_is_positive_zero_as_eager():
    # eager's float sum starts at +0.0, so one -0.0 (or a row of them) sums to +0.0; a sum over
    # one element was that element itself (seed 177360: its signbit)
    z = torch.tensor([[-0.0], [-0.0]])
    for fn in (lambda z: z.sum(1), lambda z: z[0, 0].sum(), lambda z: z.view(-1)[:1].sum(0),
               lambda z: z.sum(0), lambda z: z.mean(1), lambda z: z.sum(1, dtype=torch.float64),
               lambda z: z.prod(1)):
        _same_bits(torch.compile(fn, backend="solder")(z), fn(z))
