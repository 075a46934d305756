"""A computed buffer's body, written in terms of a kernel's two loop indices.

Every kernel iterates ``xindex`` over ``xnumel`` (rows, or all elements of a pointwise kernel) and,
in reduction kernels, ``rindex`` over ``rnumel`` (the reduced elements of a row). ``prepare`` takes
a buffer and a tiling and returns the value to compute and the index to store it at, with the
buffer's loop dimensions first merged where every access treats them as one flat dimension and
then recovered from xindex/rindex by division and remainder (which the ranges usually remove).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

import sympy

from ..ir import expr as E
from ..ir.indexing import (Memo, index_symbol, merge_dims, product, simplify_index, unravel)
from ..ir.nodes import ComputedBuffer, Reduction

XINDEX = index_symbol("xindex")
RINDEX = index_symbol("rindex")


@dataclass
class Prepared:
    buffer: ComputedBuffer
    value: E.Value               # element to store (pointwise) or to reduce (reduction)
    store_index: sympy.Expr      # in terms of xindex (and rindex for r-level pointwise)
    level: str                   # "x": one value per row; "r": one per element of the row
    reduction_type: Optional[str] = None
    store_binds: tuple = ()      # scatters: (symbol, Value) pairs bound in store_index
    store_mask: Optional[E.Value] = None


def equal(a, b) -> bool:
    if a == b:
        return True
    if _is_integer(a) and _is_integer(b):   # two different numbers: no algebra to do
        return False
    return sympy.expand(a - b) == 0


def _is_integer(v) -> bool:
    return isinstance(v, int) or getattr(v, "is_Integer", False)


def split_point(sizes, xnumel) -> Optional[int]:
    """k such that prod(sizes[:k]) == xnumel, or None."""
    acc = sympy.Integer(1)
    if equal(acc, xnumel):
        return 0
    for k, n in enumerate(sizes):
        acc = acc * n
        if equal(acc, xnumel):
            # prefer including trailing size-1 dims in the x part
            k += 1
            while k < len(sizes) and sizes[k] == 1:
                k += 1
            return k
    return None


# fits' answers by (ranges, reduced ranges, tiling): the scheduler asks for every pending
# buffer against each open kernel, and a model's layers repeat the same shapes
_FITS = Memo()


def fits(buf: ComputedBuffer, xnumel, rnumel) -> bool:
    body = buf.body
    red = tuple(body.red_ranges) if isinstance(body, Reduction) else None
    ranges = tuple(body.ranges)
    return _FITS.get((ranges, red, xnumel, rnumel), lambda: _fits(ranges, red, xnumel, rnumel))


def _fits(ranges, red_ranges, xnumel, rnumel) -> bool:
    if red_ranges is not None:
        return equal(product(ranges), xnumel) and equal(product(red_ranges), rnumel)
    n = product(ranges)
    if rnumel == 1:
        return equal(n, xnumel)
    if equal(n, xnumel):
        return True  # one value per row
    k = split_point(ranges, xnumel)
    return k is not None and equal(product(ranges[k:]), rnumel)


def _memory_order(vars_, sizes, strides):
    """Iterate a buffer's dims in the order its elements lie in memory (channels-last and other
    permuted layouts then store, and usually load, contiguously)."""
    if len(vars_) < 2 or len(strides) < len(vars_):
        return vars_, sizes
    try:
        keys = [int(s) for s in strides[:len(vars_)]]
    except TypeError:
        return vars_, sizes
    order = sorted(range(len(vars_)), key=lambda d: -keys[d])  # stable: ties keep their order
    return [vars_[d] for d in order], [sizes[d] for d in order]


# remap2's answers by (expression, substitutions, extents): a model's repeated layers map the
# same index expressions onto the same kernel shapes
_REMAPPED = Memo()


def prepare(buf: ComputedBuffer, xnumel, rnumel, ranges_env: dict) -> Prepared:
    body = buf.body
    binds, smask = (), None
    if isinstance(body, Reduction):
        xs = [index_symbol(f"i{k}") for k in range(len(body.ranges))]
        rs = [index_symbol(f"r{k}") for k in range(len(body.red_ranges))]
        value = body.fn(xs, rs)
        store = buf.layout.index(xs)
        x_sizes, r_sizes = list(body.ranges), list(body.red_ranges)
        level, rtype = "x", body.reduction_type
    else:
        sizes = list(body.ranges)
        if rnumel != 1 and not equal(product(sizes), xnumel):
            k = split_point(sizes, xnumel)
            level = "r"
        else:
            k, level = len(sizes), "x"
        idx = [index_symbol(f"i{j}") for j in range(len(sizes))]
        value = body.fn(idx)
        store = buf.layout.index(idx)
        if buf.scatter is not None:
            store, binds, smask = buf.scatter(idx)
        xs, rs = idx[:k], idx[k:]
        x_sizes, r_sizes = sizes[:k], sizes[k:]
        rtype = None
    if getattr(buf, "scatter", None) is None:
        xs, x_sizes = _memory_order(xs, x_sizes, buf.layout.stride)
    extra = [v for _, v in binds] + ([smask] if smask is not None else [])
    exprs = [store] + E.index_exprs(value) + [e for v in extra for e in E.index_exprs(v)]
    subst = {}
    for vars_, sizes, flat in ((xs, x_sizes, XINDEX), (rs, r_sizes, RINDEX)):
        new_sizes, new_vars, zeros = merge_dims(sizes, exprs, vars_)
        exprs = [e.xreplace(zeros) if zeros else e for e in exprs]
        subst.update(zeros)
        for v, i in zip(new_vars, unravel(flat, new_sizes)):
            subst[v] = i
    ranges = dict(ranges_env)
    ranges[XINDEX] = xnumel
    ranges[RINDEX] = rnumel

    # merged-away variables go to 0 first, then survivors to their xindex/rindex expressions
    zeros = {k: v for k, v in subst.items() if v == 0}
    rest = {k: v for k, v in subst.items() if v != 0}

    subst_key = (frozenset(zeros.items()), frozenset(rest.items()),
                 frozenset(ranges.items()))

    def remap2(e):
        e = sympy.sympify(e)
        return _REMAPPED.get((e, subst_key), lambda: remap(e))

    def remap(e):
        if zeros:
            e = e.xreplace(zeros)
        if rest:
            e = e.xreplace(rest)
        return simplify_index(e, ranges)

    value = E.map_indices(value, remap2)
    binds = tuple((sym, E.map_indices(v, remap2)) for sym, v in binds)
    smask = E.map_indices(smask, remap2) if smask is not None else None
    return Prepared(buf, value, remap2(store), level, rtype, binds, smask)
