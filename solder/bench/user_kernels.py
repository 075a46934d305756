"""A user-written Triton kernel between pointwise ops (the user-kernel benchmark case).

Imported only when the case is built: importing Triton fixes whether its interpreter is on."""
from __future__ import annotations

import torch
import triton
import triton.language as tl


@triton.jit
def rmsnorm_kernel(x_ptr, w_ptr, y_ptr, n, eps, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    offs = tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + row * n + offs, mask=mask, other=0).to(tl.float32)
    w = tl.load(w_ptr + offs, mask=mask, other=0).to(tl.float32)
    rstd = 1.0 / tl.sqrt(tl.sum(x * x, axis=0) / n + eps)
    tl.store(y_ptr + row * n + offs, (x * rstd * w).to(y_ptr.dtype.element_ty), mask=mask)


def residual_rmsnorm_gelu(x, res, w):
    """h = x + res (generated), y = rmsnorm(h) * w (the user's kernel), gelu(y) * 2 (generated);
    returns the activation and h. The kernel writes a fresh `empty_like`: no copy is needed."""
    h = x + res
    y = torch.empty_like(h)
    n = h.shape[-1]
    rmsnorm_kernel[(h.numel() // n,)](h, w, y, n, 1e-6, BLOCK=triton.next_power_of_2(n))
    return torch.nn.functional.gelu(y) * 2, h
