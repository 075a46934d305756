"""The native CPU target (codegen/cpp/, runtime/native.py): CPU graphs as C++ kernels, with
eager's values, dtypes and errors; what it cannot write runs in ATen and says so."""
import re

import pytest
import torch

import solder
import solder.pipeline as P
from solder.runtime import native

pytestmark = pytest.mark.skipif(native.compiler() is None, reason="needs a C++ compiler")
OPTIONS = {"cpu_codegen": True}


@pytest.fixture(autouse=True)
def native_path(monkeypatch):
    # the CPU test run interprets Triton kernels; these tests take the native path instead
    monkeypatch.setattr(P, "_interpreting", lambda: False)


def _run(fn, *args):
    report = solder.explain(fn, *args, options=OPTIONS)
    # compiled as C++, not left whole to ATen (a kernel the target could not write or compile)
    assert "the native CPU target:" not in str(report), str(report)
    out = torch.compile(fn, backend="solder", options=OPTIONS)(*args)
    return out, report


def _same(out, ref):
    out = out if isinstance(out, (tuple, list)) else [out]
    ref = ref if isinstance(ref, (tuple, list)) else [ref]
    for o, r in zip(out, ref):
        assert o.dtype == r.dtype and o.shape == r.shape
        torch.testing.assert_close(o, r, equal_nan=True)


def test_pointwise_and_reductions_are_generated_c_plus_plus():
    def fn(x, y):
        return (torch.nn.functional.gelu(x * 2 + 1).sum(-1), (x - y).abs().amax(1),
                torch.softmax(x, -1), x.argmax(1), torch.where(x > 0, x, y * 3))
    x, y = torch.randn(33, 70), torch.randn(33, 70)
    x[3, 5] = float("nan")
    out, report = _run(fn, x, y)
    _same(out, fn(x, y))
    text = str(report)
    assert "kernel k0" in text and "ATen fallback" in text and "0 ATen fallback" in text
    src = report.graphs[0].kernels[0].source
    assert 'extern "C"' in src and "// from: " in src and "#pragma omp parallel for" in src


def test_half_precision_is_read_and_rounded_as_eager():
    # every float16 and bfloat16 bit pattern through a load, a float32 computation and a store
    bits = torch.arange(-32768, 32768, dtype=torch.int32).to(torch.int16)
    for dtype in (torch.float16, torch.bfloat16):
        x = bits.view(dtype)

        def fn(x):
            return x * 1.0, (x.float() * 0.5).to(dtype), x.float() / 3
        out, _ = _run(fn, x)
        for o, r in zip(out, fn(x)):
            same = (o == r) | (o.isnan() & r.isnan())
            assert bool(same.all()), (dtype, x[~same][:4], o[~same][:4], r[~same][:4])
            assert torch.equal(torch.signbit(o[o == 0]), torch.signbit(r[r == 0]))


def test_float32_rounds_to_bfloat16_as_eager_in_registers_and_stores():
    # ties both ways, the largest finite values (to infinity), subnormals, NaN and infinities,
    # and random bit patterns: rounded in a register (solder_round_bf16, then computed on in
    # float) and stored from one (solder_bf16_bits: already rounded)
    g = torch.Generator().manual_seed(0)
    rand = torch.randint(-2**31, 2**31 - 1, (1 << 16,), generator=g, dtype=torch.int64)
    ties = torch.tensor([0x3f808000, 0x3f818000, 0x7f7f8000, 0x7f7fffff, 0x00008000, 0x00018000,
                         0x80008000, 0x7f800000, 0xff800000, 0x7fc00001, 0xffa00000, 0x0],
                        dtype=torch.int64)
    bits = torch.cat([rand, ties, ties + 1, ties - 1]).to(torch.int32)
    x = bits.view(torch.float32)

    def fn(x):
        return (x * 1.0).to(torch.bfloat16).float() * 2.0, (x + 0.0).to(torch.bfloat16)
    out, report = _run(fn, x)
    for o, r in zip(out, fn(x)):
        same = (o == r) | (o.isnan() & r.isnan())
        assert bool(same.all()), (x[~same][:4], o[~same][:4], r[~same][:4])
    assert "solder_bf16_bits(" in report.graphs[0].kernels[0].source


def test_a_value_rounded_to_bfloat16_is_kept_for_the_later_loop():
    # RMSNorm over a residual sum: (x + res) rounded to bfloat16 once, in the sum's loop, and
    # read back from the row's scratch by the normalizing loop
    def fn(x, res, w):
        h = x + res
        return (h.float() * torch.rsqrt(h.float().pow(2).mean(-1, keepdim=True) + 1e-6)
                ).to(x.dtype) * w, h
    x, res = torch.randn(9, 200).bfloat16(), torch.randn(9, 200).bfloat16()
    w = torch.randn(200).bfloat16()
    out, report = _run(fn, x, res, w)
    _same(out, fn(x, res, w))
    src = report.graphs[0].kernels[0].source
    assert "float sc0[200];" in src and " sc1[" not in src
    # three roundings: the sum's, the normalized value's and the product's (not the sum's again)
    assert src.count("solder_round_bf16(") == 3


def test_loads_in_bounds_everywhere_are_unmasked_and_the_rest_stay_masked():
    # as_strided_scatter's two halves: each element read exists wherever the loop runs, so it
    # is read unconditionally and selected (a plain vector load, not a masked gather); a pad's
    # read of x[i - 1] reaches before the first element at i = 0 and keeps its mask (a 1-d
    # pad: a row's pad is a segment of its own, below)
    def scatter(a, b):
        return torch.as_strided_scatter(a * 8 + 10, b * 2 - 4, size=(a.numel() // 2,),
                                        stride=(2,))
    a, b = torch.randn(64), torch.randn(32)
    out, report = _run(scatter, a, b)
    _same(out, scatter(a, b))
    src = report.graphs[0].kernels[0].source
    # (a row of 2, unrolled: each block reads its own element of a)
    assert "? ptr" not in src and src.count("= ptr0[") == 1 and src.count("= ptr1[") == 2

    def pad(x):
        return torch.nn.functional.pad(x, (1, 1), value=-1.0) * 2
    x = torch.randn(35)
    out, report = _run(pad, x)
    _same(out, pad(x))
    assert "? ptr0[" in report.graphs[0].kernels[0].source


def test_integer_division_is_pythons_and_zero_raises_as_eager():
    # (not MIN // -1: eager's own truncating division traps on it)
    a = torch.tensor([7, -7, 7, -7, 0, 9], dtype=torch.int64)
    b = torch.tensor([2, 2, -2, -2, 3, -1], dtype=torch.int64)

    def fn(a, b):
        return a // b, a % b, torch.fmod(a, b), torch.div(a, b, rounding_mode="trunc"), a / b
    out, _ = _run(fn, a, b)
    _same(out, fn(a, b))
    compiled = torch.compile(lambda a, b: a // b + 1, backend="solder", options=OPTIONS)
    with pytest.raises(ZeroDivisionError):
        compiled(a, torch.zeros_like(b))


def test_a_costly_table_read_broadcast_by_several_ops_is_computed_once():
    # a rotary table: cos and sin of positions, read by q and k of two layers broadcast over
    # batch and heads through one shared unsqueeze; inlined, libm ran per read element
    def fn(q, k, pos):
        emb = pos[:, None].float() * torch.arange(1, 9).float()
        cos, sin = emb.cos().to(q.dtype).unsqueeze(0), emb.sin().to(q.dtype).unsqueeze(0)
        outs = []
        for _ in range(2):
            q = q * cos + q.flip(-1) * sin
            k = k * cos + k.flip(-1) * sin
            outs += [q, k]
        return outs
    q, k, pos = torch.randn(6, 16, 8), torch.randn(6, 16, 8), torch.arange(16)
    out, report = _run(fn, q, k, pos)
    _same(out, fn(q, k, pos))
    kernels = [kr.source for g in report.graphs for kr in g.kernels]
    with_libm = [src for src in kernels if "std::cos" in src or "std::sin" in src]
    assert len(with_libm) == 1 and len(kernels) > 1, with_libm
    # ... and computes the table alone: one input read (the positions), the two tables stored
    pointers = next(line for line in with_libm[0].splitlines() if line.startswith("// pointers"))
    assert pointers.count("=arg") == 1 and pointers.count("=buf") == 2, pointers


def _simd_pragmas(src: str) -> list[str]:
    return [line.strip() for line in src.splitlines() if "#pragma omp" in line]


def test_the_error_flag_is_reduced_only_in_loops_that_can_raise():
    # an index_put's row loop and a sum's row loop without integer division carry no
    # reduction of the flag (a private copy per lane per row: 20% of a scatter's loop); the
    # same loops with a floor division keep it and raise eager's ZeroDivisionError
    x, v = torch.randn(64, 64), torch.randn(16, 64)
    idx = torch.randperm(64)[:16]
    fn = lambda x, i, v: (torch.index_put(x * 2, (i,), v + 1), x.sum(-1))  # noqa: E731
    out, report = _run(fn, x, idx, v)
    _same(out, fn(x, idx, v))
    pragmas = [p for g in report.graphs for k in g.kernels for p in _simd_pragmas(k.source)]
    assert pragmas and not any("solder_err" in p for p in pragmas), pragmas

    a, b = torch.randint(-50, 50, (64, 64)), torch.randint(1, 9, (16, 64))
    fn = lambda a, i, b: (torch.index_put(a * 2, (i,), b // (a[:16] % 7 + 1)),  # noqa: E731
                          (a // b.repeat(4, 1)).sum(-1))
    b[3, 5] = 0
    src = "\n".join(k.source for g in _run(fn, a, idx, b.clamp(min=1))[1].graphs
                    for k in g.kernels)
    # (the index check's all-reduction divides nothing)
    inner = [p for p in _simd_pragmas(src) if p.startswith("#pragma omp simd")
             and "reduction(&:" not in p]
    assert len(inner) == 2 and all("reduction(|:solder_err)" in p for p in inner), inner
    with pytest.raises(ZeroDivisionError):
        torch.compile(fn, backend="solder", options=OPTIONS)(a, idx, b)


@pytest.mark.parametrize("through", ["native_call", "ctypes"])
def test_kernels_are_called_through_one_c_entry_or_ctypes(monkeypatch, through, tmp_path):
    # native_call.py: functools.partial(call, address) per kernel, tensors read as their data
    # pointers and sizes as integers in C; where it cannot be built, a ctypes runner
    from solder.runtime import native_call
    if through == "ctypes":
        monkeypatch.setattr(native_call, "load", lambda cxx, cache_dir: None)
    else:
        call = native_call.load(native.compiler(), tmp_path)
        if call is None:
            pytest.skip("no Python headers to build the extension against")
        assert call.__name__ == "call"
        with pytest.raises(TypeError):
            call(0)   # an address and no argument
        import ctypes

        import numpy as np
        lib = native.load('extern "C" long long twice(float* a, long long n, long long k) {'
                          ' for (long long i = 0; i < n; ++i) a[i] *= 2; return k; }',
                          str(tmp_path))
        address = ctypes.cast(lib.twice, ctypes.c_void_p).value
        a = torch.ones(5)
        assert call(address, a, np.int64(3), 0) is None   # a numpy integer as a size
        assert a.tolist() == [2, 2, 2, 1, 1]
        with pytest.raises(ZeroDivisionError):
            call(address, a, 0, 1)   # the kernel's error flag
    made, runners = [], native.runners
    monkeypatch.setattr(native, "runners", lambda *a: made.append(runners(*a)) or made[-1])
    options = {**OPTIONS, "cache_dir": str(tmp_path)}
    x, y = torch.randn(40, 33), torch.randint(-5, 5, (40, 33))
    compiled = torch.compile(lambda x, y: ((x * 2).softmax(-1), y // 3), backend="solder",
                             options=options)
    _same(compiled(x, y), ((x * 2).softmax(-1), y // 3))
    div = torch.compile(lambda a, b: a // b + 1, backend="solder", options=options)
    with pytest.raises(ZeroDivisionError):
        div(y, torch.zeros_like(y))
    kinds = {type(r).__name__ for got in made for r in got.values()}
    assert kinds == ({"partial"} if through == "native_call" else {"NativeKernelRunner"}), kinds


def test_floats_keep_eagers_nan_infinities_and_signed_zeros():
    x = torch.tensor([-0.0, 0.0, float("inf"), -float("inf"), float("nan"), 2.5, -2.5, 1e-40])
    y = torch.tensor([0.0, -0.0, 2.0, -3.0, 1.0, -0.0, 0.5, 3.0])

    def fn(x, y):
        return (torch.maximum(x, y), torch.minimum(x, y), torch.fmax(x, y), torch.relu(x),
                torch.div(x, y, rounding_mode="floor"), torch.remainder(x, y), x / y,
                torch.round(x * 2), torch.sign(x), x.clamp(min=0.0))
    out, _ = _run(fn, x, y)
    for o, r in zip(out, fn(x, y)):
        same = (o == r) | (o.isnan() & r.isnan())
        assert bool(same.all()) and torch.equal(torch.signbit(o[o == 0]),
                                                torch.signbit(r[r == 0])), (o, r)


def test_an_accumulating_scatter_runs_on_one_thread_and_matches():
    def fn(x, idx, src):
        return torch.index_add(x, 0, idx, src, alpha=2)
    x, src = torch.zeros(5, 3), torch.randn(40000, 3)
    idx = torch.randint(0, 5, (40000,))
    out, report = _run(fn, x, idx, src)
    _same(out, fn(x, idx, src))
    assert "omp parallel" not in report.graphs[0].kernels[-1].source


def test_what_the_target_lacks_runs_in_aten_and_explain_says_why():
    def fn(x):
        return torch.special.i0(x) + torch.rand_like(x) * 0 + 1
    x = torch.randn(16)
    out, report = _run(fn, x)
    torch.testing.assert_close(out, torch.special.i0(x) + 1)
    text = str(report)
    assert "i0" in text and "has no implementation in the native CPU target" in text
    assert "draws no random numbers" in text


def test_a_training_step_matches_eager():
    model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.LayerNorm(16), torch.nn.GELU(),
                                torch.nn.Linear(16, 4))
    x = torch.randn(5, 8)
    compiled = torch.compile(model, backend="solder", options=OPTIONS)
    compiled(x).square().sum().backward()
    got = [p.grad.clone() for p in model.parameters()]
    model.zero_grad()
    model(x).square().sum().backward()
    for g, p in zip(got, model.parameters()):
        torch.testing.assert_close(g, p.grad)


def test_without_a_compiler_the_graph_runs_as_captured_and_says_why(monkeypatch):
    monkeypatch.setattr(native, "compiler", lambda: None)
    fn = lambda x: x.sin() + 1  # noqa: E731
    report = solder.explain(fn, torch.randn(4), options=OPTIONS)
    assert "as captured" in str(report) and "no C++ compiler was found" in str(report)
    x = torch.randn(4)
    torch.testing.assert_close(torch.compile(fn, backend="solder", options=OPTIONS)(x), fn(x))


def test_cpu_graphs_run_as_captured_unless_the_option_asks_for_c_plus_plus():
    fn = lambda x: x.sin() + 1  # noqa: E731
    report = solder.explain(fn, torch.randn(4))
    assert "as captured" in str(report) and "cpu_codegen is off" in str(report)
    report = solder.explain(fn, torch.randn(4), options=OPTIONS)
    assert report.kernel_count >= 1 and "as captured" not in str(report), str(report)


def test_random_programs_match_eager_on_the_native_path(monkeypatch):
    # a small budget of the differential fuzzer, forward and gradients, through the native
    # target in this process (the larger runs are in docs/fuzz-runs.md)
    from solder.fuzz.run import PASS, RunConfig, check_seed
    monkeypatch.setenv("SOLDER_CPU_CODEGEN", "1")
    monkeypatch.setenv("SOLDER_CACHE", "0")
    built = []
    build = native.build
    monkeypatch.setattr(native, "build", lambda *a: built.append(1) or build(*a))
    cfg = RunConfig(grad=True)
    bad = []
    for seed in range(500000, 500012):
        out = check_seed(seed, cfg)
        if out.kind not in (PASS, "eager_rejected", "control_wrong", "control_error"):
            bad.append((seed, out.kind, out.detail[:300], out.error))
    assert not bad, bad
    assert len(built) >= 10   # the programs' graphs ran as C++


@pytest.mark.parametrize("name,train", [("gpt2", False), ("llama", False), ("bert", False),
                                        ("vit", False), ("resnet", False), ("convnext", False),
                                        ("gpt2", True), ("llama", True)])
def test_models_match_eager_on_the_native_path(monkeypatch, name, train):
    pytest.importorskip("transformers")
    from tests.models import test_models_cpu as models
    monkeypatch.setenv("SOLDER_CPU_CODEGEN", "1")
    built = []
    build = native.build
    monkeypatch.setattr(native, "build", lambda *a: built.append(1) or build(*a))
    models._check(getattr(models, name), train=train)
    assert built


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_a_rows_exp_is_computed_once_and_read_back_by_the_later_loop(dtype):
    # softmax: the sum's loop keeps exp(x - max) in a row scratch array (row_scratch.py) and
    # the division's loop reads it, in float for a bfloat16 row too (no extra rounding)
    def fn(x):
        return torch.softmax(x, -1)
    x = torch.randn(37, 300, dtype=dtype)
    out, report = _run(fn, x)
    _same(out, fn(x))
    src = report.graphs[0].kernels[0].source
    assert src.count("std::exp(") == 1 and "float sc0[300];" in src
    # a bfloat16 element is widened once, in the first loop, and read from the stack after
    assert src.count("_to_float(") == (1 if dtype == torch.bfloat16 else 0)


def test_rows_without_a_static_length_or_too_long_recompute():
    from solder.codegen.cpp import row_scratch
    def fn(x):
        return torch.softmax(x, -1)
    x = torch.randn(2, row_scratch.SCRATCH_MAX + 1)
    out, report = _run(fn, x)
    _same(out, fn(x))
    src = report.graphs[0].kernels[0].source
    assert " sc0[" not in src and src.count("std::exp(") == 2


def test_float_sums_go_by_chunks_of_float_partial_sums_into_a_double():
    # a row of 3 chunks and a bit: vectorized float sums per chunk, a double across them
    def fn(x):
        return x.sum(-1), (x * x).mean(-1), torch.nn.functional.layer_norm(x, (x.shape[-1],))
    x = torch.randn(3, 3 * 4096 + 17) + 100.0
    out, report = _run(fn, x)
    _same(out, fn(x))
    src = "\n".join(k.source for g in report.graphs for k in g.kernels)
    assert "r0 += 4096" in src and "double " in src


def test_double_sums_stay_double():
    # float64 rows sum in double throughout: float partial sums (float32's chunks) would lose
    # half the digits (the fuzzer's seed 700387: a0.sum() of a float64 scalar)
    x = torch.randn(4, 1000, dtype=torch.float64) * 1e3 + torch.rand(4, 1000, dtype=torch.float64)
    out, report = _run(lambda x: (x.sum(-1), x.sum()), x)
    for o, r in zip(out, (x.sum(-1), x.sum())):
        torch.testing.assert_close(o, r, rtol=1e-13, atol=0)
    src = "\n".join(k.source for g in report.graphs for k in g.kernels)
    assert "float " not in src, src


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float64])
def test_vectorized_max_and_min_keep_eagers_nan(dtype):
    # a plain max per lane and a NaN flag beside it: NaN first, last, alone in a row or in
    # half of it, beside rows of infinities, and with a sum in the same loop
    def fn(x):
        return x.amax(-1), x.amin(-1), x.softmax(-1), (x.amax(-1), x.sum(-1)), x.amin(0)
    x = torch.randn(7, 300, dtype=dtype)
    x[0, 0] = x[1, 299] = x[2, 150] = float("nan")
    x[3], x[4], x[5, :150] = float("-inf"), float("inf"), float("nan")
    out, report = _run(fn, x)
    _same([out[0], out[1], out[2], *out[3], out[4]], [*fn(x)[:3], *fn(x)[3], fn(x)[4]])
    src = "\n".join(k.source for g in report.graphs for k in g.kernels)
    assert "reduction(max:" in src and "reduction(min:" in src and "quiet_NaN()" in src


@pytest.mark.parametrize("dtype", [torch.int64, torch.int32, torch.int16, torch.uint8])
def test_vectorized_integer_max_and_min_reach_the_extremes(dtype):
    info = torch.iinfo(dtype)
    x = torch.randint(info.min, info.max, (5, 300), dtype=dtype)
    x[0, 0], x[1, 299], x[2], x[3] = info.max, info.min, info.min, info.max
    out, report = _run(lambda x: (x.amax(-1), x.amin(-1), x.amax(0)), x)
    _same(out, (x.amax(-1), x.amin(-1), x.amax(0)))
    src = "\n".join(k.source for g in report.graphs for k in g.kernels)
    assert "reduction(max:" in src and "reduction(min:" in src, src


@pytest.mark.parametrize("dtype", [torch.bool, torch.float32, torch.int64])
def test_any_and_all_rows_vectorize_as_bytes_and_match(dtype):
    # a uint8_t accumulator under | and & (GCC vectorizes those, not || and && on a bool):
    # rows all true, all false, one exception first or last, NaN (true, as eager counts it)
    x = torch.ones(6, 300, dtype=dtype)
    x[1] = 0
    x[2, 0] = 0
    x[3, 299] = 0
    x[4, 150:] = 0
    if dtype.is_floating_point:
        x[5, 7] = float("nan")
    idx = torch.randint(-300, 300, (2000,))   # its range check is an all over the indices
    fn = lambda x, i: (x.all(-1), x.any(-1), (x != 0).all(0), torch.all(x), torch.any(x[1]),  # noqa: E731
                       x[:, i])
    out, report = _run(fn, x, idx)
    _same(out, fn(x, idx))
    src = "\n".join(k.source for g in report.graphs for k in g.kernels)
    assert "reduction(&:" in src and "&= uint8_t(" in src and "reduction(|:t" in src, src
    assert "reduction(&&:" not in src and "reduction(||:" not in src
    idx[1000] = 300
    with pytest.raises(RuntimeError, match="index out of range"):
        torch.compile(fn, backend="solder", options=OPTIONS)(x, idx)


def test_what_does_not_change_along_a_row_is_computed_once_before_its_loop():
    # a layer norm of an embedding plus a residual (GPT-2's first block): the row's token id,
    # its bounds check and the row's first element (the shifted variance) are read once per
    # row, before the row's loops; a row-invariant value is not kept in a scratch array
    def fn(ids, table, x):
        return torch.nn.functional.layer_norm(table[ids] + x, (64,))
    ids, table, x = torch.randint(0, 50, (3, 16)), torch.randn(50, 64), torch.randn(3, 16, 64)
    out, report = _run(fn, ids, table, x)
    _same(out, fn(ids, table, x))
    src = next(k.source for g in report.graphs for k in g.kernels if "aten.sum" in k.source)
    before, loops = src.split("for (int64_t r", 1)
    assert re.search(r"int64_t t\d+ = ptr\d+\[xindex\];", before), src   # the token id
    assert not re.search(r"= ptr\d+\[xindex\];", loops), src
    assert src.count("float sc") <= 2, src


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float64, torch.int64])
def test_a_sum_over_strided_rows_runs_with_the_columns_inside(dtype):
    # columns.py: a bias gradient's sum over the tokens reads ptr[features * r + x]; with the
    # columns inside, every read is contiguous. Per-row values (a label, a row's scale) and
    # per-column ones (a bias) ride along; a row's contiguous sum keeps the row loop inside.
    def fn(g, scale, bias):
        return (g * scale[:, None]).sum(0) + bias, g.sum((0, 1)) if g.dim() == 3 else g.sum(0)
    make = (lambda *s: torch.randint(-9, 9, s, dtype=dtype)) if not dtype.is_floating_point \
        else (lambda *s: torch.randn(*s).to(dtype))
    g, scale, bias = make(300, 130), make(300), make(130)
    out, report = _run(fn, g, scale, bias)
    _same(out, fn(g, scale, bias))
    srcs = [k.source for gr in report.graphs for k in gr.kernels]
    cols = [s for s in srcs if "columns inside" in s]
    assert cols and all("for (int64_t xi = 0; xi < xn; ++xi)" in s for s in cols), srcs
    g3 = make(3, 40, 70)
    out, report = _run(lambda g: g.sum((0, 1)), g3)
    _same(out, g3.sum((0, 1)))
    assert "columns inside" in report.graphs[0].kernels[0].source
    out, report = _run(lambda g: g.sum(-1), g)
    _same(out, g.sum(-1))
    assert "columns inside" not in report.graphs[0].kernels[0].source


def test_a_strided_sum_with_the_columns_inside_raises_eagers_zero_division():
    x, d = torch.randint(-9, 9, (300, 130)), torch.randint(1, 5, (300, 130))
    out, report = _run(lambda x, d: (x // d).sum(0), x, d)
    _same(out, (x // d).sum(0))
    assert "columns inside" in report.graphs[0].kernels[0].source
    d[5, 7] = 0
    with pytest.raises(ZeroDivisionError):
        torch.compile(lambda x, d: (x // d).sum(0), backend="solder", options=OPTIONS)(x, d)


def test_long_strided_float_sums_keep_eagers_accuracy():
    # each column's rows added in order in a double: 200000 rows of float32 near 1000
    g = torch.randn(200000, 9) + 1000.0
    out, report = _run(lambda g: g.sum(0), g)
    torch.testing.assert_close(out, g.sum(0), rtol=1e-6, atol=0)
    assert "columns inside" in report.graphs[0].kernels[0].source


def test_a_small_kernel_on_one_thread_stays_vectorized():
    # the thread count's condition names `parallel`: a bare `if` on `parallel for simd` also
    # turns the simd loop off when false (OpenMP 5.0), and kernels under 32768 elements ran
    # scalar (a GPT-2 MLP's gelu, 8192 bf16 elements: 232 us, 21 us with the modifier)
    x = torch.randn(64, 128)
    out, report = _run(lambda x: (torch.tanh(x) * 2, x.softmax(-1)), x)
    _same(out, (torch.tanh(x) * 2, x.softmax(-1)))
    pragmas = [line.strip() for g in report.graphs for k in g.kernels
               for line in k.source.splitlines() if "omp parallel" in line]
    assert pragmas and all("if(parallel: " in p for p in pragmas), pragmas
    assert not any(re.search(r"\bif\((?!parallel:)", p) for p in pragmas), pragmas


def _inner_loops(src: str) -> list[str]:
    """The bodies of a source's nested ``x1`` loops (loop_nest.py)."""
    return [part.split("return solder_err")[0] for part in src.split("for (int64_t x1 = 0;")[1:]]


def test_views_and_scatters_run_as_nested_loops_without_inner_divisions():
    # a flat loop would read positions back as xindex // C and xindex % C: 64-bit divisions
    # that keep the loop from vectorizing; nested loops read them as x0 and x1
    def fn(a, b, c):
        s = torch.slice_scatter(a * 3 + 1, b.sigmoid(), dim=1, start=8, end=40)
        t = torch.select_scatter(a * 2, b[:, 0].exp(), dim=1, index=7)
        return s, t, c.permute(0, 2, 1) * 2 + c[:, :, ::2].sum(-1, keepdim=True).transpose(1, 2)
    a, b, c = torch.randn(50, 48), torch.randn(50, 32), torch.randn(6, 20, 24)
    out, report = _run(fn, a, b, c)
    _same(out, fn(a, b, c))
    srcs = [k.source for k in report.graphs[0].kernels]
    nested = [s for s in srcs if "for (int64_t x1 = 0;" in s]
    assert nested, srcs
    for src in nested:
        for body in _inner_loops(src):
            # index divisions print as `/ int64_t(N)` and `% int64_t(N)`
            assert "/ int64_t(" not in body and "% int64_t(" not in body, src


def test_what_does_not_change_along_a_nested_row_is_computed_before_its_loop():
    # an index_put of rows: the row's index, its wrap and bounds check and the target row are
    # the same for every x1; computed once per x0, the x1 loop stores contiguously under one
    # condition (they were computed per element, 1.11x inductor's time on the bench case)
    def fn(a, idx, v):
        return torch.index_put(a * 2 - 1, (idx,), v + 1)
    a, v = torch.randn(64, 16), torch.randn(10, 16)
    idx = torch.randperm(64)[:10] - 32        # negative indices wrap
    out, report = _run(fn, a, idx, v)
    _same(out, fn(a, idx, v))
    (src,) = [k.source for k in report.graphs[0].kernels if "if (t" in k.source]
    (body,) = _inner_loops(src)
    before = src.split("for (int64_t x1 = 0;")[0]
    assert re.search(r"int64_t t\d+ = ptr\d+\[x0\];", before), src     # the row's index
    assert "x0]" not in body and "int64_t(0)" not in body, src


def test_nested_loops_need_a_divisor_that_divides_the_loop():
    from solder.codegen.cpp import loop_nest
    from solder.ir.indexing import FloorDiv, ModIndex
    from solder.schedule.prepare import XINDEX

    class Kernel:   # just what choose() reads
        is_reduction, prepared = False, {}

        def __init__(self, xnumel):
            self.xnumel = xnumel
    exprs = [ModIndex(XINDEX, 24) + 24 * FloorDiv(XINDEX, 480), FloorDiv(XINDEX, 24)]
    orig = loop_nest.index_exprs
    try:
        loop_nest.index_exprs = lambda k: exprs
        split = loop_nest.choose(Kernel(24 * 20 * 6))
        # 24 leaves no division of x1 (480 would leave x1 % 24 and x1 // 24)
        assert split.inner == 24 and split(exprs[0]) == 24 * FloorDiv(loop_nest.OUTER, 20) \
            + loop_nest.INNER
        assert loop_nest.choose(Kernel(24 * 20 + 5)) is None   # neither divides the loop
        exprs[:] = [ModIndex(XINDEX, 3)]   # too short an inner loop to vectorize: unrolled
        split = loop_nest.choose(Kernel(30))
        assert split.inner == 3 and split.unrolled
        # a row of 4 would leave no division to x1, but all of 16's to x0 per element: a row
        # that removes one is preferred to an unrolled one
        exprs[:] = [ModIndex(XINDEX, 4) + 4 * FloorDiv(XINDEX, 16)]
        split = loop_nest.choose(Kernel(64))
        assert split.inner == 16 and not split.unrolled
    finally:
        loop_nest.index_exprs = orig


def test_a_short_row_is_unrolled_into_the_vectorized_outer_loop():
    # stride 2 and 3: the positions are xindex // C and xindex % C with C < 8; the x0 loop is
    # the vectorized one and each x1 value a block of its own, its comparisons folded
    def fn(a, b, c, d):
        s = torch.as_strided_scatter(a * 8 + 10, b * 2 - 4, size=(a.numel() // 2,), stride=(2,))
        t = torch.select_scatter(c * 2 + 1, d.sigmoid(), dim=1, index=1)
        return s, t, c[:, ::2] * 3
    a, b, c, d = torch.randn(64), torch.randn(32), torch.randn(40, 3), torch.randn(40)
    out, report = _run(fn, a, b, c, d)
    _same(out, fn(a, b, c, d))
    srcs = [k.source for k in report.graphs[0].kernels]
    unrolled = [s for s in srcs if "the row unrolled" in s]
    assert len(unrolled) >= 2, srcs
    for src in unrolled:
        assert "#pragma omp parallel for simd" in src and "for (int64_t x1" not in src, src
        assert "const int64_t x1 = 1;" in src and "% int64_t(" not in src, src
    # the select's comparison folded: only the block of column 1 computes the sigmoid
    sel = next(s for s in unrolled if "std::exp" in s)
    assert sel.count("std::exp") == 1, sel


def test_nested_loops_with_symbolic_sizes():
    def fn(a, b):
        return torch.select_scatter(a * 2 + 1, b.sigmoid(), dim=1, index=3)
    compiled = torch.compile(fn, backend="solder", options=OPTIONS, dynamic=True)
    for rows in (5, 9, 17):
        a, b = torch.randn(rows, 16), torch.randn(rows)
        _same(compiled(a, b), fn(a, b))
    report = solder.explain(fn, torch.randn(11, 16), torch.randn(11), options=OPTIONS,
                            dynamic=True)
    src = report.graphs[0].kernels[0].source
    # the row length is the column count's size symbol
    assert re.search(r"x0 < \((s\d+) > 0 \? xnumel / \1 : 0\).*for \(int64_t x1 = 0; x1 < \1;",
                     src, re.S), src


def test_a_rows_segments_know_their_comparisons_and_drop_their_masks():
    # a slice's bounds, a select's column, a pad's edges and a cat's boundaries cut each row
    # into segments; in each the comparisons are constants, so the kernel has no masked load
    # and computes a branch only where it is taken
    F = torch.nn.functional
    progs = {
        "slice": lambda a, b: torch.slice_scatter(a * 3 + 1, b.sigmoid(), dim=1, start=8, end=40),
        "slice_head": lambda a, b: torch.slice_scatter(a, b.exp(), dim=1, start=0, end=32),
        "select_last": lambda a, b: torch.select_scatter(a, b[:, 1].exp(), dim=1, index=-1),
        "pad": lambda a, b: F.pad(b, (3, 5), value=-2.0).exp(),
        "crop_pad": lambda a, b: F.pad(a, (-4, 2)) * 2,
        "cat3": lambda a, b: torch.cat([a[:, :10].sin(), b, a[:, 10:20].cos()], dim=1) + 1,
        "ne": lambda a, b: torch.where(torch.arange(48) != 5, a, a.exp()),
    }
    a, b = torch.randn(50, 48), torch.randn(50, 32)
    for name, fn in progs.items():
        out, report = _run(fn, a, b)
        _same(out, fn(a, b))
        src = report.graphs[0].kernels[-1].source
        assert src.count("for (int64_t x1 = ") >= 2, (name, src)
        assert "? ptr" not in src, (name, src)
    src = _run(progs["slice"], a, b)[1].graphs[0].kernels[-1].source
    # the sigmoid is computed only inside the slice
    assert src.count("std::exp") == 1 and "for (int64_t x1 = 8; x1 < 40;" in src, src


def test_segments_fold_what_they_know():
    from solder.codegen.cpp import loop_nest
    from solder.ir import expr as E
    from solder.ir.indexing import ModIndex
    from solder.schedule.prepare import XINDEX
    split = loop_nest.Split(__import__("sympy").Integer(16), 4)
    col = E.index_value(ModIndex(XINDEX, 16))
    ge = E.call("ge", col, E.index_value(4), dtype=torch.bool)
    lt = E.call("lt", E.index_value(12), col, dtype=torch.bool)   # 12 < x1: x1 > 12
    inside = E.call("logical_and", ge, E.call("logical_not", lt, dtype=torch.bool),
                    dtype=torch.bool)
    x = E.load("a", XINDEX, torch.float32, mask=inside)
    v = E.call("where", inside, x, E.const(1.0, torch.float32), dtype=torch.float32)
    segs = loop_nest.segments(split, [v])
    assert [(lo, hi) for lo, hi, _ in segs] == [(0, 4), (4, 13), (13, 16)]
    folded = [loop_nest.fix(v, outcomes) for _, _, outcomes in segs]
    assert folded[0] == E.const(1.0, torch.float32) == folded[2]
    assert folded[1] == E.load("a", XINDEX, torch.float32)


def test_an_aten_views_base_keeps_its_storage_while_the_view_lives():
    # fuzz seed 1020316: the restrict pointers and the reused storage gave inf for 4.9e142
    from tests.kernels.test_memory_plan import _view_kept_past_its_bases_last_reader as fn
    a = torch.tensor([8, 4])
    out, _ = _run(fn, a)
    assert torch.equal(out[0], fn(a)[0])
