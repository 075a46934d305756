"""A row's expensive values, computed once: kept in a scratch array for the later stages.

A reduction kernel's stages each loop over the row (``kernel.py``); a later stage often needs a
value an earlier one computed per element: softmax's ``exp(x - max)`` is summed in the second
loop and divided by the sum in the third. Recomputing it costs a transcendental call per
element and pass, most of the kernel's time. Where the row length is static and small enough
for the stack, the earlier loop also writes such a value into ``float scK[rnumel]`` (in the
value's register type: no rounding) and the later loops read it back.

Only values with a transcendental call in them, float16/bfloat16 elements read from memory
(widened to float once) and values rounded to float16/bfloat16 are kept (a subtraction is
cheaper to recompute than to store and load), and only the largest ones a later stage reads
whole.
"""
from __future__ import annotations

import sympy
import torch

from ...ir import expr as E

# calls worth a store and a load per element to avoid computing again
EXPENSIVE = frozenset({
    "exp", "exp2", "expm1", "log", "log2", "log10", "log1p", "sin", "cos", "tan", "sinh",
    "cosh", "tanh", "asin", "acos", "atan", "asinh", "acosh", "atanh", "atan2", "erf", "erfc",
    "lgamma", "sigmoid", "pow", "hypot"})

# elements of the largest row kept on the stack (64 KiB of floats, 128 KiB of doubles)
SCRATCH_MAX = 16384


def loop_roots(stage) -> list:
    """The values a stage computes inside its loop over the row: what its reductions reduce
    and what its element-level members store (with their masks)."""
    roots = []
    for p in stage:
        if p.reduction_type is not None or p.level == "r":
            roots.append(p.value)
            if p.reduction_type is None and p.store_mask is not None:
                roots.append(p.store_mask)
    return roots


def _expensive(v: E.Value) -> bool:
    return any(x.op == "call" and x.args[0] in EXPENSIVE for x in E.walk(v))


def _worth_keeping(v: E.Value) -> bool:
    # a transcendental call; a float16/bfloat16 element read from memory, widened to float
    # once instead of again in each loop (the row then comes from the stack, not the cache);
    # or a value rounded to float16/bfloat16 (RMSNorm's ``(x + res).float()``): one kept value
    # instead of its operands and a rounding in each loop
    return (v.op == "call" and _expensive(v)) or (
        v.op in ("load", "cast") and v.dtype in (torch.float16, torch.bfloat16))


def plan(stages: list, rnumel) -> dict:
    """{stage index: [values its loop keeps]} for the later stages to read back; empty where
    the row length is symbolic or too long for the stack."""
    n = sympy.sympify(rnumel)
    if not (n.is_Integer and 0 < int(n) <= SCRATCH_MAX) or len(stages) < 2:
        return {}
    made: dict = {}     # value -> the first stage whose loop computes it
    for i, stage in enumerate(stages):
        for root in loop_roots(stage):
            for x in E.walk(root):
                made.setdefault(x, i)
    keep: dict = {}
    for j, stage in enumerate(stages):
        stack = list(loop_roots(stage))
        seen = set()
        while stack:
            v = stack.pop()
            if v in seen:
                continue
            seen.add(v)
            i = made.get(v)
            if i is not None and i < j and _worth_keeping(v):
                if v not in keep.setdefault(i, []):
                    keep[i].append(v)
                continue    # read whole: nothing under it is needed here
            stack.extend(v.children())
    return keep
