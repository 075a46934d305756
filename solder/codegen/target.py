"""The Triton target (``ir/target.py``): kernels on a GPU, or in Triton's interpreter on the CPU
(``TRITON_INTERPRET=1``), where libdevice is missing and a few ops have no formula."""
from __future__ import annotations

from dataclasses import dataclass

import torch

from . import scalar_ops


@dataclass(frozen=True)
class TritonTarget:
    interpreted: bool
    has_random = True   # counter-based draws (tl.rand)
    stored_when_broadcast = frozenset()   # a GPU recomputes for free next to its loads

    @property
    def name(self) -> str:
        return "triton (interpreter)" if self.interpreted else "triton"

    def can_emit(self, scalar_op: str) -> bool:
        return scalar_op in scalar_ops.SCALAR_OPS and not (
            self.interpreted and scalar_op in scalar_ops.LIBDEVICE_ONLY)

    def lowers_as_gpu(self, device: torch.device) -> bool:
        return device.type == "cuda" or self.interpreted


def triton_target() -> TritonTarget:
    """The Triton target of this process (the interpreter where ``TRITON_INTERPRET`` is set)."""
    return TritonTarget(scalar_ops.interpreting())
