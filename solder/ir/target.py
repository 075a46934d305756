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
    # scalar ops costly enough that a value computing one, which more than one op reads and
    # one of them broadcast (over more elements than the value has), is stored once rather
    # than computed again in each consumer's every element (a rotary table's cos and sin
    # read by every layer's q and k); empty where computing again is cheap next to memory
    stored_when_broadcast: frozenset

    def can_emit(self, scalar_op: str) -> bool:
        """Whether generated code can compute this entry of the scalar-op table."""

    def lowers_as_gpu(self, device: torch.device) -> bool:
        """Whether a graph on ``device`` is lowered as for a GPU: library calls in their GPU
        forms (attention operands, a convolution's bias apart), reductions split."""
