"""Writes: copy_ into graph inputs (in-place updates), and the scatter family.

``copy_(dst, src)`` on a graph input (AOTAutograd's epilogue for an in-place op on an input) is a
computed buffer that stores into the input's storage, fused with whatever computes ``src``.
"""
from __future__ import annotations

import sympy
import torch

from ..ir import expr as E
from ..ir.nodes import ComputedBuffer, Pointwise
from .registry import Call, Decline, lowering
from .tensors import Stored, TensorValue, broadcast_index, loader_of

aten = torch.ops.aten


@lowering(aten.copy_.default)
def _copy_(call: Call, dst, src, non_blocking=False):
    g = call.graph
    if not isinstance(dst, Stored):
        raise Decline("copy_ into a value that is not in memory")
    if isinstance(src, TensorValue) and src.device != dst.device:
        raise Decline("copy_ across devices")
    load = loader_of(src, dst.size, dst.dtype)
    sample_idx = [sympy.Symbol(f"c{k}", integer=True, nonnegative=True) for k in range(dst.ndim)]
    sample = load(sample_idx)
    store_at = dst.layout.index(sample_idx)
    races = any(ld.args[0] == dst.buffer and (ld.args[1] != store_at or ld.args[3])
                for ld in E.loads_of(sample))
    if races:
        # the new value reads other elements of the destination: compute it first
        tmp = g.realize(g.compute(dst.size, dst.dtype, dst.device, load))
        load = tmp.load
    buf = ComputedBuffer(g.new_name(), dst.layout, body=Pointwise(list(dst.size), load),
                         mutates=dst.buffer)
    g.add_buffer(buf)
    return dst


@lowering(aten.copy.default)
def _copy(call: Call, dst, src, non_blocking=False):
    from .tensors import Virtual
    if isinstance(src, TensorValue) and src.device != dst.device:
        raise Decline("copy across devices")
    load = loader_of(src, call.size, call.dtype)
    return Virtual(call.size, call.dtype, call.device, load, stride=call.stride)
