"""``linspace`` as ATen's kernels compute it, op by op in the result's dtype.

PyTorch's reference decomposition computes in float32 for float16 and bfloat16 and rounds once,
and takes its step from Python's double; ATen's CPU and CUDA kernels compute the step and each
element in the result's dtype, each operation rounded (``start + step * i`` below the middle,
``end - step * (steps - i - 1)`` from it), and for integer dtypes in double on the CPU and in
float on CUDA, truncated. Their
values differ by a unit in the last place for a third of a float16 or bfloat16 range
(``linspace(0.5, 1.5, 16)``: 0.703125 in eager, 0.69921875 through the reference), which a
layer norm with such a weight then carries into its output (fuzz seed 213858)."""
from __future__ import annotations

import torch
from torch._decomp import get_decompositions

aten = torch.ops.aten
_REFERENCE = get_decompositions([aten.linspace])[aten.linspace.default]


def linspace(start, end, steps, *, dtype=None, layout=None, device=None, pin_memory=None):
    kernel = torch.device(device if device is not None else torch.get_default_device()).type
    return linspace_as_on(kernel, start, end, steps, dtype=dtype, layout=layout, device=device,
                          pin_memory=pin_memory)


def linspace_as_on(kernel, start, end, steps, *, dtype=None, layout=None, device=None,
                   pin_memory=None):
    """linspace's values as ATen's ``kernel`` ("cpu" or "cuda") computes them, on ``device``."""
    dtype = dtype or torch.get_default_dtype()
    if dtype.is_complex or any(isinstance(x, complex) for x in (start, end)):
        return _REFERENCE(start, end, steps, dtype=dtype, layout=layout, device=device,
                          pin_memory=pin_memory)
    torch._check(steps >= 0, lambda: "number of steps must be non-negative")
    i = torch.arange(steps, dtype=torch.int64, device=device)
    if dtype in (torch.float16, torch.bfloat16):
        # each operation in the dtype, rounded as the kernel's half-type arithmetic rounds it
        first = torch.scalar_tensor(start, dtype=dtype, device=device)
        last = torch.scalar_tensor(end, dtype=dtype, device=device)
        if steps == 1:
            return first.expand(1).clone()
        step = (last - first) / _count(steps - 1, dtype, device)
        low = first + step * i.to(dtype)
        high = last - step * (steps - 1 - i).to(dtype)
        return torch.where(i < steps // 2, low, high)
    # float32, float64 and integers: the step in the dtype and each element one fused
    # multiply-add (the kernels' compilers contract ``start + step * i``), here in double with
    # its rounding error carried (exact products, then sums). For integers the CPU kernel's step
    # is a double, the CUDA kernel's a float, and so are its elements before the truncation
    # (an int64 linspace(1000, -1000, 301)[99]: 339 on the CPU, 340 on CUDA)
    step_dtype = dtype
    if not dtype.is_floating_point:
        step_dtype = torch.float32 if kernel == "cuda" else torch.float64
    first = torch.scalar_tensor(start, dtype=dtype, device=device).to(step_dtype)
    last = torch.scalar_tensor(end, dtype=dtype, device=device).to(step_dtype)
    if steps == 1:
        return first.expand(1).to(dtype).clone()
    step = ((last - first) / _count(steps - 1, step_dtype, device)).to(torch.float64)
    first, last = first.to(torch.float64), last.to(torch.float64)
    low = _fma(step, i.to(torch.float64), first)
    high = _fma(-step, (steps - 1 - i).to(torch.float64), last)
    out = torch.where(i < steps // 2, low, high)
    if dtype.is_floating_point:
        return out.to(dtype)
    return out.to(step_dtype).trunc().to(dtype)


def _count(n: int, dtype, device):
    """``n`` as a tensor divisor: the kernels divide by it on the host, correctly rounded,
    and a division by a Python number lowers on the GPU as ATen's CUDA kernel divides, by
    multiplying with its reciprocal (1.75 / 15 and 1.75 * (1 / 15) differ in float32: every
    element of a float32 ``linspace(-2.0, -0.25, 16)`` moved by the step's last bit)."""
    return torch.scalar_tensor(n, dtype=dtype, device=device)


def _fma(a, b, c):
    """a * b + c in float64 with one rounding, but for ties: the product split exactly
    (Dekker's product, Veltkamp's split) and summed with its error (Knuth's sum)."""
    p = a * b
    ah, al = _split(a)
    bh, bl = _split(b)
    p_err = ((ah * bh - p) + ah * bl + al * bh) + al * bl
    s = p + c
    v = s - p
    s_err = (p - (s - v)) + (c - v)
    return s + (s_err + p_err)


def _split(x):
    t = x * 134217729.0     # 2**27 + 1
    hi = t - (t - x)
    return hi, x - hi
