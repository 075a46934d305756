"""A compiled kernel handed another kernel's launcher is found out and given its own, rebuilt
from source, before it launches (runtime/launcher_check.py; the checks alone are tested on the
CPU in tests/unit/test_launcher_check.py)."""
import pytest
import torch

from solder.runtime import launcher_check as lc

pytestmark = pytest.mark.gpu

triton = pytest.importorskip("triton")
tl = triton.language


@triton.jit
def _add(x, y, out, n, BLOCK: tl.constexpr):
    i = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(out + i, tl.load(x + i, mask=i < n) + tl.load(y + i, mask=i < n), mask=i < n)


@triton.jit
def _scale(x, out, n, BLOCK: tl.constexpr):
    i = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(out + i, tl.load(x + i, mask=i < n) * 3.0, mask=i < n)


def test_a_kernel_with_another_kernels_launcher_gets_its_own():
    x, y = torch.randn(1000, device="cuda"), torch.randn(1000, device="cuda")
    out = torch.empty_like(x)
    add = _add.warmup(x, y, out, x.numel(), BLOCK=256, grid=(1,))
    scale = _scale.warmup(x, out, x.numel(), BLOCK=256, grid=(1,))
    add.run, scale.run  # noqa: B018 - loaded, launchers built
    add._run.launch = scale._run.launch   # what long-lived processes were seen to hold
    with pytest.raises(TypeError, match="arguments"):
        _add[(4,)](x, y, out, x.numel(), BLOCK=256)
    stats = {}
    assert lc.check_and_repair(add, stats) and stats == {"launchers_rebuilt": 1}
    assert lc.launcher_problem(add._run.launch, lc.expected_arity(add)) is None
    _add[(4,)](x, y, out, x.numel(), BLOCK=256)
    torch.testing.assert_close(out, x + y)
    _scale[(4,)](x, out, x.numel(), BLOCK=256)   # the other kernel keeps its own
    torch.testing.assert_close(out, x * 3)


def test_solder_kernels_launch_with_the_check_in_place():
    f = torch.compile(lambda a, b: torch.sin(a) * b + 1, backend="solder")
    a, b = torch.randn(4096, device="cuda"), torch.randn(4096, device="cuda")
    torch.testing.assert_close(f(a, b), torch.sin(a) * b + 1)
    torch.testing.assert_close(f(b, a), torch.sin(b) * a + 1)
