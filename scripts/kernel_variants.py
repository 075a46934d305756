"""Hand-written variants of the kernels Solder generates for two micro cases, timed side by side
on a GPU, to find what a codegen change should be before making it (docs/perf-notes.md).

    PYTHONPATH=. python3 scripts/kernel_variants.py

layernorm 16384x4096 fp32 (weight, bias) and tanh(sigmoid(gelu(x)) * 2) over 2^27 fp32. Every
variant is checked against torch (fresh random inputs, output poisoned first), then timed with
do_bench (median, L2 flushed). Prints one table.
"""
from __future__ import annotations

import os

import torch
import triton
import triton.language as tl
from triton.language.extra import libdevice


if os.environ.get("TRITON_INTERPRET") == "1":  # no libdevice in the interpreter
    @triton.jit
    def _tanh(x):
        return 2.0 * tl.sigmoid(2.0 * x) - 1.0
else:
    _tanh = libdevice.tanh


@triton.jit
def ln_persistent(x_ptr, w_ptr, b_ptr, y_ptr, xnumel, rnumel, XBLOCK: tl.constexpr,
                  RBLOCK: tl.constexpr, MASKED: tl.constexpr, X_EVICT: tl.constexpr,
                  W_EVICT: tl.constexpr, ONE_SUM: tl.constexpr):
    xindex = tl.program_id(0) * XBLOCK + tl.arange(0, XBLOCK)[:, None]
    rindex = tl.arange(0, RBLOCK)[None, :]
    if MASKED:
        m = (xindex < xnumel) & (rindex < rnumel)
        x = tl.load(x_ptr + xindex * rnumel + rindex, m, other=0, eviction_policy=X_EVICT)
        w = tl.load(w_ptr + rindex + xindex * 0, m, other=0, eviction_policy=W_EVICT)
        b = tl.load(b_ptr + rindex + xindex * 0, m, other=0, eviction_policy=W_EVICT)
    else:
        m = None
        x = tl.load(x_ptr + xindex * RBLOCK + rindex, eviction_policy=X_EVICT)
        w = tl.load(w_ptr + rindex, eviction_policy=W_EVICT)
        b = tl.load(b_ptr + rindex, eviction_policy=W_EVICT)
    mean = tl.sum(x, 1)[:, None] / RBLOCK
    d = x - mean
    if ONE_SUM:  # var from E[x^2] - mean^2: both sums reduce together
        var = tl.sum(x * x, 1)[:, None] / RBLOCK - mean * mean
    else:
        var = tl.sum(d * d, 1)[:, None] / RBLOCK
    y = d * tl.rsqrt(var + 1e-5) * w + b
    if MASKED:
        tl.store(y_ptr + xindex * rnumel + rindex, y, m)
    else:
        tl.store(y_ptr + xindex * RBLOCK + rindex, y)


@triton.jit
def ln_looped(x_ptr, w_ptr, b_ptr, y_ptr, xnumel, rnumel: tl.constexpr, RBLOCK: tl.constexpr):
    # two passes over the row: sums (x kept in L2), then normalize (x read from L2 last time)
    row = tl.program_id(0)
    acc = tl.zeros([RBLOCK], tl.float32)
    acc2 = tl.zeros([RBLOCK], tl.float32)
    for off in range(0, rnumel, RBLOCK):
        r = off + tl.arange(0, RBLOCK)
        x = tl.load(x_ptr + row * rnumel + r, eviction_policy="evict_last")
        acc += x
        acc2 += x * x
    mean = tl.sum(acc, 0) / rnumel
    var = tl.sum(acc2, 0) / rnumel - mean * mean
    rstd = tl.rsqrt(var + 1e-5)
    for off in range(0, rnumel, RBLOCK):
        r = off + tl.arange(0, RBLOCK)
        x = tl.load(x_ptr + row * rnumel + r, eviction_policy="evict_first")
        w = tl.load(w_ptr + r, eviction_policy="evict_last")
        b = tl.load(b_ptr + r, eviction_policy="evict_last")
        tl.store(y_ptr + row * rnumel + r, (x - mean) * rstd * w + b)


@triton.jit
def ln_reads(x_ptr, w_ptr, b_ptr, y_ptr, XBLOCK: tl.constexpr, RBLOCK: tl.constexpr,
             FORM: tl.constexpr, FIRST_EVICT: tl.constexpr):
    # the generated kernel's 2-D layout; FORM 0: mean, var and output each from a fresh read of
    # the row (what RELOAD=1 generates); 1: mean and var from the first read, the output from a
    # second; 2: sums of x - x[0] and of its square in one read (shifted: no cancellation of
    # large means), the output from a second read
    xindex = tl.program_id(0) * XBLOCK + tl.arange(0, XBLOCK)[:, None]
    rindex = tl.arange(0, RBLOCK)[None, :]
    x = tl.load(x_ptr + xindex * RBLOCK + rindex, eviction_policy=FIRST_EVICT)
    if FORM == 2:
        shift = tl.load(x_ptr + xindex * RBLOCK)
        d = x - shift
        ds = tl.sum(d, 1)[:, None] / RBLOCK
        mean = shift + ds
        var = tl.sum(d * d, 1)[:, None] / RBLOCK - ds * ds
    else:
        mean = tl.sum(x, 1)[:, None] / RBLOCK
        if FORM == 0:
            x = tl.load(x_ptr + xindex * RBLOCK + rindex)
        d = x - mean
        var = tl.sum(d * d, 1)[:, None] / RBLOCK
    x = tl.load(x_ptr + xindex * RBLOCK + rindex, eviction_policy="evict_first")
    w = tl.load(w_ptr + rindex, eviction_policy="evict_last")
    b = tl.load(b_ptr + rindex, eviction_policy="evict_last")
    tl.store(y_ptr + xindex * RBLOCK + rindex, (x - mean) * tl.rsqrt(var + 1e-5) * w + b)


@triton.jit
def gelu_chain(x_ptr, y_ptr, n, XBLOCK: tl.constexpr, MASKED: tl.constexpr,
               X_EVICT: tl.constexpr):
    i = tl.program_id(0) * XBLOCK + tl.arange(0, XBLOCK)
    if MASKED:
        x = tl.load(x_ptr + i, i < n, other=0, eviction_policy=X_EVICT)
    else:
        x = tl.load(x_ptr + i, eviction_policy=X_EVICT)
    g = x * 0.5 * (tl.erf(x * 0.7071067811865476) + 1.0)
    y = _tanh(tl.sigmoid(g) * 2.0)
    if MASKED:
        tl.store(y_ptr + i, y, i < n)
    else:
        tl.store(y_ptr + i, y)


DEV = "cuda" if torch.cuda.is_available() else "cpu"


def _check_and_time(name, launch, ref_fn, out, rows, nbytes):
    from triton.testing import do_bench
    if not torch.cuda.is_available():
        do_bench = lambda f, **_: (f(), 1.0)[1]  # noqa: E731 - the smoke test checks values only
    out.fill_(float("nan"))
    launch()
    if torch.cuda.is_available():
        torch.cuda.synchronize()
    ref = ref_fn()
    err = ((out.double() - ref.double()).norm() / ref.double().norm()).item()
    ok = err < 1e-5 and not out.isnan().any().item()
    ms = do_bench(launch, warmup=25, rep=200, return_mode="median")
    rows.append((name, ms, nbytes / ms / 1e6, err, ok))
    print(rows[-1], flush=True)


def main():
    rows = []
    torch.manual_seed(0)
    small = os.environ.get("TRITON_INTERPRET") == "1"  # a CPU smoke test of the script
    m, n = (8, 64) if small else (16384, 4096)
    x, w, b = (torch.randn(m, n, device=DEV), torch.randn(n, device=DEV),
               torch.randn(n, device=DEV))
    y = torch.empty_like(x)
    ref = lambda: torch.nn.functional.layer_norm(x, (n,), w, b)
    nbytes = 4 * 2 * m * n
    full = os.environ.get("VARIANTS", "all") == "all"   # VARIANTS=ln: the layernorm reads only
    for masked in ((True, False) if full else (False,)):
        for xe, we in ((("", ""), ("", "evict_last"), ("evict_first", "evict_last")) if full
                       else (("", "evict_last"),)):
            for one_sum in ((False, True) if full else (False,)):
                for xb, warps in ((1, 8), (1, 16), (2, 16)):
                    name = (f"ln persistent masked={int(masked)} x={xe or '-'} w={we or '-'} "
                            f"onesum={int(one_sum)} XB={xb} w{warps}")
                    launch = (lambda xb=xb, warps=warps, masked=masked, xe=xe, we=we, os_=one_sum:
                              ln_persistent[(m // xb,)](x, w, b, y, m, n, XBLOCK=xb, RBLOCK=n,
                                                        MASKED=masked, X_EVICT=xe, W_EVICT=we,
                                                        ONE_SUM=os_, num_warps=warps))
                    _check_and_time(name, launch, ref, y, rows, nbytes)
    for rb, warps in [c for c in ((1024, 4), (1024, 8), (2048, 8), (2048, 16), (4096, 16), (32, 1))
                      if n % c[0] == 0 and (c[0] == 32) == small]:
        launch = lambda rb=rb, warps=warps: ln_looped[(m,)](x, w, b, y, m, n, RBLOCK=rb,
                                                              num_warps=warps)
        _check_and_time(f"ln looped RB={rb} w{warps}", launch, ref, y, rows, nbytes)
    for form in (0, 1, 2):
        for first in ("", "evict_last"):
            for xb, warps in ((1, 8), (1, 16), (2, 16)):
                launch = (lambda xb=xb, warps=warps, form=form, first=first:
                          ln_reads[(m // xb,)](x, w, b, y, XBLOCK=xb, RBLOCK=n, FORM=form,
                                               FIRST_EVICT=first, num_warps=warps))
                _check_and_time(f"ln reads form={form} first={first or '-'} XB={xb} w{warps}",
                                launch, ref, y, rows, nbytes)
    if not full:
        return _print(rows)
    N = 2**12 if small else 2**27
    g = torch.randn(N, device=DEV)
    gy = torch.empty_like(g)
    gref = lambda: torch.tanh(torch.sigmoid(torch.nn.functional.gelu(g)) * 2)
    for masked in (True, False):
        for xe in ("", "evict_first"):
            for xb, warps in ((1024, 4), (2048, 8), (4096, 8)):
                launch = (lambda xb=xb, warps=warps, masked=masked, xe=xe:
                          gelu_chain[(N // xb,)](g, gy, N, XBLOCK=xb, MASKED=masked, X_EVICT=xe,
                                                 num_warps=warps))
                _check_and_time(f"gelu masked={int(masked)} x={xe or '-'} XB={xb} w{warps}",
                                launch, gref, gy, rows, 8 * N)
    _print(rows)


def _print(rows):
    print(f"\n{'variant':62} {'ms':>8} {'GB/s':>6} {'rel err':>9} ok")
    for name, ms, bw, err, ok in rows:
        print(f"{name:62} {ms:8.4f} {bw:6.0f} {err:9.1e} {ok}")


if __name__ == "__main__":
    main()
