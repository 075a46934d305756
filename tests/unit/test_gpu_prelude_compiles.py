"""The kernel prelude's helpers compile for an NVIDIA GPU (sm_90) on a machine without one:
Triton's front end, LLVM and the ptxas bundled with the wheel need no device. A helper that
only the interpreter ran (``tl.math.div_rn`` takes float32 only) fails here, not on a GPU."""
import importlib.util
import subprocess
import sys
import textwrap

import pytest

SCRIPT = textwrap.dedent('''
    import importlib.util, os, sys, tempfile
    import triton
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource
    from solder.codegen.launch_configs import COMPILE_OPTIONS
    from solder.codegen.scalar_ops import PRELUDE
    HEAD = "import triton\\nimport triton.language as tl\\n"

    def kernel(name, src):
        # a @triton.jit function must live in a file: Triton reads its source back
        path = os.path.join(tempfile.mkdtemp(), name + ".py")
        open(path, "w").write(src)
        spec = importlib.util.spec_from_file_location(name, path)
        mod = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(mod)
        return mod.k

    def ptx(fn, sig, options):
        return triton.compile(ASTSource(fn, sig, {"n": 64}), target=GPUTarget("cuda", 90, 32),
                              options=options).asm["ptx"]

    k = kernel("prelude_kernel", HEAD + PRELUDE + """
    @triton.jit
    def k(a, b, o, n: tl.constexpr):
        i = tl.arange(0, n)
        x = tl.load(a + i)
        y = tl.load(b + i)
        q = _div_rn(x, y) + _div_rn(x, 0.5)     # (float16 operands divide in float32)
        tl.store(o + i, q + _trunc(q) + _round_half_even(q))
    """)
    for ty in sys.argv[1:]:
        code = ptx(k, {"a": "*" + ty, "b": "*" + ty, "o": "*" + ty, "n": "constexpr"}, {})
        print(ty, "div.rn.f32" in code, "div.rn.f64" in code, "div.full.f32" in code)
    one_in = {"a": "*fp32", "o": "*fp32", "n": "constexpr"}
    # libdevice's exp and log with the options Solder compiles its kernels with, and without
    k = kernel("libdevice_kernel", HEAD + """
    @triton.jit
    def k(a, o, n: tl.constexpr):
        i = tl.arange(0, n)
        x = tl.load(a + i)
        tl.store(o + i, tl.extra.cuda.libdevice.exp(x) + tl.extra.cuda.libdevice.log(x))
    """)
    for name, options in (("solder", COMPILE_OPTIONS), ("default", {})):
        code = ptx(k, one_in, options)
        print(name, *sorted({line.split()[0] for line in code.splitlines() if ".ftz" in line}))
    # a product and a difference of two ops: contracted into one fma, x * x - x * x is the
    # rounding error of x * x, not the 0 that eager's two kernels give
    k = kernel("contract_kernel", HEAD + """
    @triton.jit
    def k(a, o, n: tl.constexpr):
        i = tl.arange(0, n)
        x = tl.load(a + i)
        t = x * x
        tl.store(o + i, t - t)
    """)
    for name, options in (("solder_fma", COMPILE_OPTIONS), ("default_fma", {})):
        print(name, "fma.rn.f32" in ptx(k, one_in, options))
''')


def test_the_prelude_compiles_to_ptx_with_correctly_rounded_division():
    if importlib.util.find_spec("triton.backends.nvidia") is None:
        pytest.skip("Triton's NVIDIA backend is not installed")
    env = {k: v for k, v in __import__("os").environ.items() if k != "TRITON_INTERPRET"}
    done = subprocess.run([sys.executable, "-c", SCRIPT, "fp32", "fp64", "fp16"],
                          capture_output=True, text=True, env=env, timeout=600)
    if done.returncode != 0 and "ptxas" in done.stderr.lower() and "not found" in done.stderr:
        pytest.skip("no ptxas on this machine")
    assert done.returncode == 0, done.stderr[-3000:]
    rows = {line.split()[0]: line.split()[1:] for line in done.stdout.splitlines()}
    # float32 and float16 (computed in float32) divide correctly rounded, float64 with its
    # own IEEE division; none with the approximate float32 division
    assert rows["fp32"] == ["True", "False", "False"]
    assert rows["fp16"] == ["True", "False", "False"]
    assert rows["fp64"] == ["False", "True", "False"]
    # Solder's kernels keep subnormals through libdevice as ATen's do: the one flushing
    # instruction left is the exponential's ex2 of a scaled argument, which the non-flushing
    # expf of CUDA's own math library uses too; Triton's default flushes throughout
    assert set(rows["solder"]) <= {"ex2.approx.ftz.f32"}
    assert "fma.rn.ftz.f32" in rows["default"]
    # no multiply and add of two ops contracted into one fma (fuzz seed 452439 on an H100:
    # log_softmax of one element, x - max - log(1), came out 2.5e-10 where eager's is 0)
    assert rows["solder_fma"] == ["False"] and rows["default_fma"] == ["True"]


def test_float_division_emits_the_correctly_rounded_helper_on_the_gpu(monkeypatch):
    from solder.codegen import scalar_ops
    monkeypatch.setattr(scalar_ops, "interpreting", lambda: False)
    f32 = [__import__("torch").float32] * 2
    assert scalar_ops.SCALAR_OPS["truediv"](["x", "y"], f32) == "_div_rn(x, y)"
    assert scalar_ops.SCALAR_OPS["reciprocal"](["x"], f32[:1]) == "_div_rn(1.0, x)"
