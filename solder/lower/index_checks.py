"""Index tensors checked against the dimension they index (``check_indices`` setting).

On by default, as eager checks: each indexing op adds an ``all`` reduction over its index
tensor, fused into the op's kernel, and ``aten._assert_async`` on the result: an exception naming
the op on the CPU, a device-side assert on the GPU (as eager's own), no host synchronization.
A backward graph does not check the index tensors it receives from the forward, which checked
them where it indexed with them. ``check_indices=False`` drops both: an out-of-range index then reads 0 in a gather and is skipped
by a scatter."""
from __future__ import annotations

import torch

from ..ir import expr as E
from ..ir.nodes import ExternBuffer, InputBuffer
from .registry import Call, op_name
from ..ir.values import Stored, TensorValue, Virtual

aten = torch.ops.aten


def check_in_range(call: Call, index, n, negative_ok: bool) -> None:
    """Assert ``lo <= index < n`` for every element, lo = -n where the op wraps negative
    indices (advanced indexing) and 0 where eager rejects them (gather, scatter, ...)."""
    g = call.graph
    if not g.config.check_indices or not isinstance(index, TensorValue):
        return
    if any(n == 0 for n in call.size):
        # no element is read or written: eager checks an index where it moves an element
        # (x[idx] of a (1, 0) tensor with idx out of range returns an empty tensor)
        return
    if g.kind == "backward" and isinstance(index, Stored) and isinstance(
            g.by_name.get(index.buffer), InputBuffer):
        # saved by the forward, which indexed the same dimension with it and checked it there
        # (autograd's formulas scatter a gradient back through the forward's own indices)
        return
    from .reductions import reduce
    lo = -n if negative_ok else 0
    sample = index.load([_SAMPLE[k] for k in range(index.ndim)]) \
        if index.ndim <= len(_SAMPLE) else None
    known = value_bounds(sample) if sample is not None else (None, None)
    size = int(n) if getattr(n, "is_Integer", False) or isinstance(n, int) else None
    if size is not None and known[0] is not None and known[1] is not None and \
            known[0] >= -size * negative_ok and known[1] < size:
        return   # in range by construction (a clamp, a remainder by a constant)
    i64 = torch.int64

    def inside(idx):
        v = E.cast(index.load(idx), i64)
        return E.call("logical_and",
                      E.call("ge", v, E.index_value(lo), dtype=torch.bool),
                      E.call("lt", v, E.index_value(n), dtype=torch.bool), dtype=torch.bool)

    flags = Virtual(index.size, torch.bool, call.device, inside)
    every = g.realize(reduce(call, flags, None, False, "all", out_dtype=torch.bool))
    what = op_name(call.node.target)
    msg = (f"{what}: index out of range (valid: {lo} <= index < {n}), in graph {g.graph_name} "
           f"(Solder's check_indices)")
    check = ExternBuffer(g.new_name(), None, op=aten._assert_async.msg,
                         args=(g.as_arg(every), msg), kind="check", reason=msg)
    check.origins = [what]
    g.add_buffer(check)


import sympy as _sympy  # noqa: E402

_SAMPLE = [_sympy.Symbol(f"chk{k}", integer=True, nonnegative=True) for k in range(8)]


def value_bounds(v: E.Value) -> tuple:
    """(lowest, highest) an integer value can take, each None where unknown: the few forms
    that bound an index by construction (constants, clamps, max/min, where, abs, remainder by a
    positive constant, casts between integer types)."""
    if v.op == "const":
        x = v.args[0]
        return (x, x) if isinstance(x, int) and not isinstance(x, bool) else (None, None)
    if v.op == "cast":
        inner = v.args[0]
        if inner.dtype.is_floating_point or inner.dtype == torch.bool or v.dtype.itemsize < 8:
            return (None, None)   # a narrowing cast may wrap
        return value_bounds(inner)
    if v.op != "call":
        return (None, None)
    name, *args = v.args
    b = [value_bounds(a) for a in args]
    if name in ("maximum", "minimum") and len(b) == 2:
        (l1, h1), (l2, h2) = b
        if name == "maximum":
            lo = max(x for x in (l1, l2) if x is not None) if (l1, l2) != (None, None) else None
            hi = max(h1, h2) if None not in (h1, h2) else None
        else:
            lo = min(l1, l2) if None not in (l1, l2) else None
            hi = min(x for x in (h1, h2) if x is not None) if (h1, h2) != (None, None) else None
        return (lo, hi)
    if name == "where" and len(b) == 3:
        (_, _), (l1, h1), (l2, h2) = b
        return (min(l1, l2) if None not in (l1, l2) else None,
                max(h1, h2) if None not in (h1, h2) else None)
    if name == "abs":
        return (0, None)
    if name == "remainder" and len(b) == 2:
        lo, hi = b[1]
        if lo is not None and lo == hi and lo > 0:
            return (0, lo - 1)
    return (None, None)
