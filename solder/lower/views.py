"""Ops that rearrange elements without arithmetic: cat, stack, constant_pad_nd, flip.

Plain views (view, permute, expand, slice, select, as_strided, unfold, diagonal, ...) need no entry
here: ``GraphLowering`` lowers any op whose result shares its input's storage to a layout on that
storage (or an index remap of an unmaterialized value), whatever the op is.
"""
from __future__ import annotations

import sympy
import torch

from ..ir import expr as E
from .registry import Call, lowering
from ..ir.values import TensorValue, Virtual

aten = torch.ops.aten


@lowering(aten.cat.default)
def _cat(call: Call, tensors, dim=0):
    tensors = [t for t in tensors if isinstance(t, TensorValue) and not
               (t.ndim == 1 and t.size[0] == 0)]
    ndim = len(call.size)
    dim = dim % ndim
    dtype = call.dtype
    if not tensors:   # every input a legacy empty 1-D tensor: so is the result
        return Virtual(call.size, dtype, call.device, lambda idx: E.const(0, dtype),
                       stride=call.stride)
    starts, acc = [], sympy.Integer(0)
    for t in tensors:
        starts.append(acc)
        acc = acc + t.size[dim]

    def fn(idx):
        i = idx[dim]
        out = None
        for t, start in reversed(list(zip(tensors, starts))):
            shifted = list(idx)
            shifted[dim] = i - start
            v = E.cast(t.load(shifted), dtype)
            if out is None:
                out = v
                continue
            inside = E.call("lt", E.index_value(i), E.index_value(start + t.size[dim]),
                            dtype=torch.bool)
            out = E.call("where", inside, E.with_mask(v, inside),
                         E.with_mask(out, E.call("logical_not", inside, dtype=torch.bool)),
                         dtype=dtype)
        return out
    return Virtual(call.size, dtype, call.device, fn, stride=call.stride)


@lowering(aten.constant_pad_nd.default)
def _pad(call: Call, x, pad, value=0):
    ndim = x.ndim
    dtype = call.dtype
    fill = E.const(value, dtype)

    def fn(idx):
        src = list(idx)
        conds = []
        for k in range(len(pad) // 2):
            d = ndim - 1 - k
            before = pad[2 * k]
            src[d] = idx[d] - before
            conds.append(E.call("ge", E.index_value(src[d]), E.index_value(0), dtype=torch.bool))
            conds.append(E.call("lt", E.index_value(src[d]), E.index_value(x.size[d]),
                                dtype=torch.bool))
        inside = conds[0]
        for c in conds[1:]:
            inside = E.call("logical_and", inside, c, dtype=torch.bool)
        v = E.with_mask(E.cast(x.load(src), dtype), inside)
        return E.call("where", inside, v, fill, dtype=dtype)
    return Virtual(call.size, dtype, call.device, fn, stride=call.stride)


@lowering(aten.flip.default)
def _flip(call: Call, x, dims):
    dims = [d % x.ndim for d in dims]

    def fn(idx):
        src = [x.size[d] - 1 - i if d in dims else i for d, i in enumerate(idx)]
        return x.load(src)
    return Virtual(call.size, call.dtype, call.device, fn, stride=call.stride)
