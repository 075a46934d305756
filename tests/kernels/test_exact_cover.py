"""Kernels whose static sizes every launch config tiles exactly are generated without bounds
masks (codegen/launch_configs.py); every other kernel keeps them, and a kernel without masks
refuses a config that would run a partial block instead of reading out of bounds."""
import pytest
import torch

import solder
from solder.codegen import launch_configs as lc
from solder.runtime.launch import KernelCompileError, KernelRunner

from .helpers import check

UNMASKED = "xmask = tl.full([XBLOCK], 1, tl.int1)"


def _source(fn, *args, **kw):
    return solder.explain(fn, *args, **kw).source()


@pytest.mark.parametrize("n, unmasked", [(8192 * 3, True), (8192 * 3 + 1, False), (1000, False)])
def test_pointwise_masks_follow_the_size(n, unmasked):
    x = torch.randn(n)
    check(lambda x: torch.sigmoid(x) * 2, x, kernels=1)
    assert (UNMASKED in _source(lambda x: torch.sigmoid(x) * 2, x)) == unmasked


@pytest.mark.parametrize("rows, cols, unmasked", [(256, 256, True), (256, 200, False),
                                                  (100, 256, False)])
def test_row_reduction_masks_follow_the_size(rows, cols, unmasked):
    def f(x, w):
        return torch.softmax(x, -1) * w
    x, w = torch.randn(rows, cols), torch.randn(cols)
    check(f, x, w, kernels=1)
    src = _source(f, x, w)
    assert ("rmask = tl.full([1, RBLOCK], 1, tl.int1)" in src) == unmasked, src
    assert "xnumel[" not in src  # a size is a scalar on the GPU (the interpreter is lenient)
    assert "eviction_policy='evict_last'" in src  # w is read by every row


def test_a_full_reduction_keeps_scalar_masks():
    src = _source(lambda t: (t.prod(), (t > 1).sum()), torch.rand(5, 7) + 0.5)
    assert "xmask = xindex < xnumel\n" in src, src


def test_symbolic_sizes_keep_their_masks():
    f = lambda x: torch.sigmoid(x) * 2  # noqa: E731
    src = solder.explain(f, torch.randn(8192 * 2), dynamic=True).source()
    assert UNMASKED not in src and "xindex < xnumel" in src


def test_exact_cover_checks_every_candidate_on_gpu_and_interpreter():
    assert lc.exact_cover(False, False, False, 8192 * 5, 1)
    assert not lc.exact_cover(False, False, False, 6144, 1)   # a 4096 block would not tile
    assert not lc.exact_cover(False, False, False, 8192 * 5 + 16, 1)
    assert lc.exact_cover(True, True, False, 512, 1024)
    assert not lc.exact_cover(True, True, False, 512, 1000)   # RBLOCK 1024 > a 1000-long row
    assert not lc.exact_cover(True, True, False, 12, 1024)    # an XBLOCK of 8 or 16 would not tile
    import sympy
    assert not lc.exact_cover(False, False, False, sympy.Symbol("s0"), 1)


def test_an_unmasked_kernel_refuses_a_config_that_does_not_tile(monkeypatch):
    x = torch.randn(8192 * 2)
    f = torch.compile(lambda x: torch.sigmoid(x) * 2, backend="solder")
    monkeypatch.setattr(KernelRunner, "candidates",
                        lambda self, xn, rn: [dict(XBLOCK=3 * 1024, num_warps=4)])
    with pytest.raises(KernelCompileError, match="no bounds masks"):
        f(x)
