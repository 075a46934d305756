"""Persistent reductions whose later stages read the row again carry two forms under a RELOAD
constexpr: rows kept in registers (0) and rows read once for the reductions and again for the
last stage (1); the tuner
times both on a GPU. Both must give eager's values."""
import pytest
import torch
import torch.nn.functional as F

import solder
from solder.codegen import launch_configs as lc
from solder.runtime.launch import KernelRunner

from .helpers import check

CASES = {
    "layer_norm": (lambda x, w, b: F.layer_norm(x, (96,), w, b), False),
    "softmax": (lambda x, w, b: torch.softmax(x * w, -1) + b, False),
    "rms_norm": (lambda x, w, b: F.rms_norm(x, (96,), w) * b, False),
    "log_softmax backward": (lambda x, w, b: torch.log_softmax(x * w + b, -1), True),
    "layer_norm backward": (lambda x, w, b: F.layer_norm(x, (96,), w, b), True),
}


@pytest.fixture(params=[0, 1], ids=["registers", "reload"])
def reload(request, monkeypatch):
    real = KernelRunner.candidates

    def forced(self, xnumel, rnumel):
        return [dict(c, RELOAD=request.param) if "RELOAD" in c else c
                for c in real(self, xnumel, rnumel)]
    monkeypatch.setattr(KernelRunner, "candidates", forced)
    return request.param


@pytest.mark.parametrize("name", list(CASES))
def test_both_forms_give_eager_values(name, reload):
    fn, grad = CASES[name]
    x = torch.randn(12, 96, requires_grad=grad)
    w = torch.randn(96, requires_grad=grad)
    b = torch.randn(96, requires_grad=grad)
    report = check(fn, x, w, b, grad=grad, rtol=1e-4, atol=1e-4)
    assert "if RELOAD:" in report.source()   # the forced form really was there to run


def test_a_norm_kernel_has_both_forms():
    src = solder.explain(CASES["layer_norm"][0], torch.randn(8, 96), torch.randn(96),
                         torch.randn(96)).source()
    assert "RELOAD: tl.constexpr" in src and "if RELOAD:" in src
    reloaded = src[src.index("if RELOAD:"):src.index("else:  # keep")]
    row_reads = [ln for ln in reloaded.splitlines() if "tl.load(ptr0" in ln and "rindex" in ln]
    # two reads of the row of x: the first (mean and variance) kept in L2, the second its last
    # (and, beside them, of the row's first element: the shift of its variance)
    assert len(row_reads) == 2
    assert "evict_last" in row_reads[0] and "evict_first" in row_reads[1]


def test_a_kernel_that_writes_what_it_reads_keeps_its_rows():
    def f(x):
        x.sub_(x.mean(-1, keepdim=True))   # the kernel stores into the buffer it reduces
        return x
    src = check(f, torch.randn(8, 96)).source()
    assert "RELOAD" not in src


def test_the_tuner_compares_both_forms():
    cands = lc.candidates(True, True, False, 16384, 4096, interp=False, reload=True)
    assert cands[0]["RELOAD"] == 0 and cands[1]["RELOAD"] == 1
    assert cands[1]["num_warps"] == max(c["num_warps"] for c in cands)
    assert all(c["RELOAD"] == 0 for c in lc.candidates(True, True, False, 16384, 4096,
                                                        interp=True, reload=True))
