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
    from solder.codegen.scalar_ops import PRELUDE
    src = "import triton\\nimport triton.language as tl\\n" + PRELUDE + """
    @triton.jit
    def k(a, b, o, n: tl.constexpr):
        i = tl.arange(0, n)
        x = tl.load(a + i)
        y = tl.load(b + i)
        q = _div_rn(x, y) + _div_rn(x, 0.5)     # (float16 operands divide in float32)
        tl.store(o + i, q + _trunc(q) + _round_half_even(q))
    """
    path = os.path.join(tempfile.mkdtemp(), "prelude_kernel.py")
    open(path, "w").write(src)
    spec = importlib.util.spec_from_file_location("prelude_kernel", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    for ty in sys.argv[1:]:
        sig = {"a": "*" + ty, "b": "*" + ty, "o": "*" + ty, "n": "constexpr"}
        ptx = triton.compile(ASTSource(mod.k, sig, {"n": 64}),
                             target=GPUTarget("cuda", 90, 32)).asm["ptx"]
        print(ty, "div.rn.f32" in ptx, "div.rn.f64" in ptx, "div.full.f32" in ptx)
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
