"""sort and topk along a short dimension, as two counting reductions and a gather.

For each element j of a row, its rank is the number of elements i that come before it:
``x[i]`` ahead of ``x[j]`` in the requested order (NaN counts as the largest value, as in eager),
or equal and ``i < j`` (a stable order). The output's slot t then holds the index whose rank is
t, found by a second reduction, and the value there is gathered. That is n^2 work per row, fine
for the short rows this serves (routing over experts, small sorts); longer rows fall back.
"""
from __future__ import annotations

import sympy
import torch

from ..ir import expr as E
from .indexing import gather_load, gather_source
from .reductions import reduce
from .registry import Call, Decline, lowering
from .tensors import Virtual

aten = torch.ops.aten

SORT_MAX_LENGTH = 1024
B, I64 = torch.bool, torch.int64


def _ahead(a: E.Value, b: E.Value, descending: bool) -> E.Value:
    """Whether value ``a`` comes strictly before ``b``; NaN is the largest value."""
    nan_a, nan_b = E.call("isnan", a, dtype=B), E.call("isnan", b, dtype=B)
    if descending:
        bigger = E.call("gt", a, b, dtype=B)
        return E.call("logical_or", E.call("logical_and", nan_a, E.call(
            "logical_not", nan_b, dtype=B), dtype=B), bigger, dtype=B)
    smaller = E.call("lt", a, b, dtype=B)
    return E.call("logical_or", E.call("logical_and", nan_b, E.call(
        "logical_not", nan_a, dtype=B), dtype=B), smaller, dtype=B)


def _tied(a: E.Value, b: E.Value) -> E.Value:
    both_nan = E.call("logical_and", E.call("isnan", a, dtype=B), E.call("isnan", b, dtype=B),
                      dtype=B)
    return E.call("logical_or", E.call("eq", a, b, dtype=B), both_nan, dtype=B)


def _sorted(call: Call, x, dim: int, descending: bool, k=None):
    """(values, indices) of the first ``k`` (default all) elements along ``dim`` in order."""
    if x.dtype.is_complex or x.dtype == torch.bool:
        raise Decline(f"sorting {x.dtype} values")
    if x.ndim == 0:
        return (Virtual([], x.dtype, call.device, lambda idx: x.load([])),
                Virtual([], I64, call.device, lambda idx: E.const(0, I64)))
    d = dim % x.ndim
    n = x.size[d]
    if not n.is_Integer or int(n) > SORT_MAX_LENGTH:
        raise Decline(f"sorting along a dimension of {n} (short rows only, at most "
                      f"{SORT_MAX_LENGTH}: the counting sort is quadratic)")
    if int(n) == 0:
        raise Decline("sorting an empty dimension")
    k = int(n) if k is None else int(k)
    src = gather_source(call, x)

    def at(idx, pos):
        full = list(idx)
        full[d] = pos
        return src.load(full)

    def ahead_of(idx):   # idx: x's index (j at d), then i: whether element i comes before j
        j, i = idx[d], idx[-1]
        a, b = at(idx[:-1], i), at(idx[:-1], j)
        earlier = E.call("lt", E.index_value(i), E.index_value(j), dtype=B)
        before = E.call("logical_or", _ahead(a, b, descending), E.call(
            "logical_and", _tied(a, b), earlier, dtype=B), dtype=B)
        return E.cast(before, I64)

    size = list(x.size)
    ranks = reduce(call, Virtual(size + [n], I64, call.device, ahead_of), [x.ndim], False,
                   "sum", out_dtype=I64, value_dtype=I64)
    ranks = call.graph.realize(ranks)
    out_size = list(size)
    out_size[d] = sympy.Integer(k)

    def holder(idx):   # idx: the output's index (slot t at d), then j: j if rank[j] == t
        t, j = idx[d], idx[-1]
        full = list(idx[:-1])
        full[d] = j
        hit = E.call("eq", ranks.load(full), E.index_value(t), dtype=B)
        return E.call("where", hit, E.index_value(j), E.const(0, I64), dtype=I64)

    indices = call.graph.realize(reduce(call, Virtual(out_size + [n], I64, call.device, holder),
                                        [x.ndim], False, "sum", out_dtype=I64, value_dtype=I64))

    def value(idx):
        where = list(idx)
        where[d] = sympy.Integer(0)
        return gather_load(src, where, {d: indices.load(idx)})

    return Virtual(out_size, x.dtype, call.device, value), indices


@lowering(aten.sort.default)
def _sort(call: Call, x, dim=-1, descending=False):
    return list(_sorted(call, x, dim, descending))


@lowering(aten.sort.stable)
def _sort_stable(call: Call, x, *, stable=None, dim=-1, descending=False):
    return list(_sorted(call, x, dim, descending))


@lowering(aten.topk.default)
def _topk(call: Call, x, k, dim=-1, largest=True, sorted=True):
    if not sorted:
        raise Decline("topk with sorted=False (eager's order is its own)")
    if not isinstance(k, int):
        raise Decline("topk with a symbolic k")
    return list(_sorted(call, x, dim, largest, k))
