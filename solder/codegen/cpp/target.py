"""The native CPU target (``ir/target.py``): what its scalar-op table has; no random numbers
yet (a draw runs in ATen); graphs lower as for the CPU (library calls in their CPU forms)."""
from __future__ import annotations

import torch

from . import scalar_ops


class CppTarget:
    name = "the native CPU target"
    has_random = False
    # libm's calls, tens of cycles an element even vectorized: a (32, 16) rotary table inlined
    # into a 2-layer model's q and k ran cos and sin 32 times per entry (docs/perf-notes.md)
    stored_when_broadcast = frozenset({
        "exp", "exp2", "expm1", "log", "log2", "log10", "log1p", "sin", "cos", "tan", "asin",
        "acos", "atan", "atan2", "sinh", "cosh", "tanh", "asinh", "acosh", "atanh", "erf",
        "erfc", "erfinv", "sigmoid", "pow", "lgamma", "digamma", "hypot"})

    def can_emit(self, scalar_op: str) -> bool:
        return scalar_op in scalar_ops.SCALAR_OPS

    def lowers_as_gpu(self, device: torch.device) -> bool:
        return False
