"""Gathers: index (advanced indexing), index_select, gather, embedding.

An index tensor's value becomes part of a load's address (an indirect index); negative indices
wrap as in eager. Out-of-range indices are masked (read as 0) rather than checked.
"""
from __future__ import annotations

import sympy
import torch

from ..ir import expr as E
from .index_checks import check_in_range
from .registry import Call, Decline, lowering
from ..ir.values import Stored, TensorValue, Virtual, broadcast_index

aten = torch.ops.aten


def wrapped(call: Call, index_value: E.Value, n) -> E.Value:
    """An index value with negative entries wrapped around ``n``."""
    iv = E.cast(index_value, torch.int64)
    size = E.index_value(n)
    neg = E.call("lt", iv, E.const(0, torch.int64), dtype=torch.bool)
    return E.call("where", neg, E.call("add", iv, size, dtype=torch.int64), iv, dtype=torch.int64)


def gather_source(call: Call, x: TensorValue) -> TensorValue:
    """What a gather reads: ``x`` itself when its elements can be recomputed at data-dependent
    indices (pointwise work on buffers, fused into the gather), else ``x`` in memory."""
    if isinstance(x, Stored):
        return x
    syms = [sympy.Symbol(f"ind_probe{k}", integer=True) for k in range(x.ndim)]
    probe = x.load(syms)
    fake = tuple((s, E.const(0, torch.int64)) for s in syms)
    if E.count_ops(probe) <= call.graph.config.inline_max_ops and \
            E.bind_indirect(probe, fake) is not None:
        return x
    return call.graph.realize(x)


def gather_load(s: TensorValue, src_idx: list, indirect: dict) -> E.Value:
    """Load ``s`` at ``src_idx`` where some entries are data-dependent values (``indirect``
    maps dim -> Value): the address depends on data. ``s`` is in memory, or a value that
    ``gather_source`` allows to be recomputed there."""
    x = s
    idx = list(src_idx)
    binds = []
    mask = None
    for d, v in indirect.items():
        sym = E.indirect_symbol(v)
        idx[d] = sym
        binds.append((sym, v))
        ok = E.call("logical_and", E.call("ge", v, E.const(0, torch.int64), dtype=torch.bool),
                    E.call("lt", v, E.index_value(x.size[d]), dtype=torch.bool), dtype=torch.bool)
        mask = ok if mask is None else E.call("logical_and", mask, ok, dtype=torch.bool)
    if isinstance(s, Stored):
        return E.load(s.buffer, s.layout.index(idx), s.dtype, mask=mask, indirect=tuple(binds))
    return E.with_mask(E.bind_indirect(s.load(idx), tuple(binds)), mask)


@lowering(aten.index.Tensor)
def _index(call: Call, x, indices):
    present = [d for d, t in enumerate(indices) if t is not None]
    if any(t.dtype == torch.bool for t in indices if t is not None):
        raise Decline("boolean mask indexing has a data-dependent output shape")
    # advanced indices broadcast together; their dims go first unless they are adjacent
    adjacent = present == list(range(present[0], present[-1] + 1))
    bshape = list(torch.broadcast_shapes(*[tuple(t.size) for t in indices if t is not None])) \
        if all(all(isinstance(n, (int, sympy.Integer)) for n in t.size) for t in indices if t is not None) \
        else None
    if bshape is None:
        raise Decline("advanced indexing with symbolic index shapes")
    bshape = [sympy.Integer(int(n)) for n in bshape]
    nb = len(bshape)
    first = present[0] if adjacent else 0
    out_size = call.size
    xs = gather_source(call, x)
    for d in present:
        check_in_range(call, indices[d], x.size[d], negative_ok=True)

    def fn(idx):
        bidx = idx[first:first + nb]
        src, rest = [], [i for k, i in enumerate(idx) if not (first <= k < first + nb)]
        it = iter(rest)
        indirect = {}
        for d in range(x.ndim):
            if d in present:
                t = indices[d]
                v = t.load(broadcast_index(bidx, t.size, bshape))
                indirect[d] = wrapped(call, v, x.size[d])
                src.append(sympy.Integer(0))
            else:
                src.append(next(it))
        return gather_load(xs, src, indirect)
    return Virtual(out_size, call.dtype, call.device, fn, stride=call.stride)


@lowering(aten.index_select.default)
def _index_select(call: Call, x, dim, index):
    if x.ndim == 0:  # its one element (eager checks that the index is 0)
        return Virtual(call.size, call.dtype, call.device, lambda idx: x.load([]))
    dim = dim % max(x.ndim, 1)
    xs = gather_source(call, x)
    check_in_range(call, index, x.size[dim], negative_ok=False)

    def fn(idx):
        src = list(idx)
        v = wrapped(call, index.load([idx[dim]] if index.ndim == 1 else []), x.size[dim])
        return gather_load(xs, src, {dim: v})
    return Virtual(call.size, call.dtype, call.device, fn, stride=call.stride)


@lowering(aten.gather.default)
def _gather(call: Call, x, dim, index, sparse_grad=False):
    if x.ndim == 0:
        return Virtual(call.size, call.dtype, call.device, lambda idx: x.load([]))
    dim = dim % max(x.ndim, 1)
    xs = gather_source(call, x)
    check_in_range(call, index, x.size[dim], negative_ok=False)

    def fn(idx):
        v = wrapped(call, index.load(idx), x.size[dim])
        return gather_load(xs, list(idx), {dim: v})
    return Virtual(call.size, call.dtype, call.device, fn, stride=call.stride)


@lowering(aten.embedding.default)
def _embedding(call: Call, weight, indices, padding_idx=-1, scale_grad_by_freq=False,
               sparse=False):
    ws = gather_source(call, weight)
    check_in_range(call, indices, weight.size[0], negative_ok=False)

    def fn(idx):
        v = wrapped(call, indices.load(idx[:-1]), weight.size[0])
        return gather_load(ws, [sympy.Integer(0), idx[-1]], {0: v})
    return Virtual(call.size, call.dtype, call.device, fn, stride=call.stride)
