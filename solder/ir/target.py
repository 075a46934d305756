"""What lowering may ask of the code generator it lowers for, and nothing else.

Lowering decides what becomes generated code and what an ATen call; some of those decisions
depend on the target: whether it has a scalar op (the interpreter has no libdevice), and whether
its kernels stand for a GPU's (the interpreter runs the GPU's lowering on the CPU, so tests see
it). A target is handed to ``GraphLowering`` by the pipeline; lowering never imports codegen.
The Triton target is ``codegen/target.py``; a native CPU target answers the same questions.
"""
from __future__ import annotations

from typing import Protocol

import torch


class Target(Protocol):
    name: str
    has_random: bool   # whether generated code draws random numbers (else ATen draws them)

    def can_emit(self, scalar_op: str) -> bool:
        """Whether generated code can compute this entry of the scalar-op table."""

    def lowers_as_gpu(self, device: torch.device) -> bool:
        """Whether a graph on ``device`` is lowered as for a GPU: library calls in their GPU
        forms (attention operands, a convolution's bias apart), reductions split."""
