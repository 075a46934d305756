"""The native CPU target (``ir/target.py``): what its scalar-op table has; no random numbers
yet (a draw runs in ATen); graphs lower as for the CPU (library calls in their CPU forms)."""
from __future__ import annotations

import torch

from . import scalar_ops


class CppTarget:
    name = "the native CPU target"
    has_random = False

    def can_emit(self, scalar_op: str) -> bool:
        return scalar_op in scalar_ops.SCALAR_OPS

    def lowers_as_gpu(self, device: torch.device) -> bool:
        return False
