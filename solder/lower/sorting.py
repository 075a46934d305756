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
from ..ir.values import Virtual

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
    if int(n) == 1:   # one element: itself, at index 0
        return (Virtual(list(x.size), x.dtype, call.device, x.load, stride=_meta_stride(call, 0)),
                Virtual(list(x.size), I64, call.device, lambda idx: E.const(0, I64),
                        stride=_meta_stride(call, 1)))
    src, ranks = _ranks(call, x, d, descending)
    out_size = list(x.size)
    out_size[d] = sympy.Integer(k)
    return _holders(call, src, ranks, d, out_size, lambda idx: E.index_value(idx[d]))


def _ranks(call: Call, x, d: int, descending: bool):
    """(x as gathers read it, each element's rank along ``d`` in memory)."""
    src = gather_source(call, x)
    n = x.size[d]

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

    ranks = reduce(call, Virtual(list(x.size) + [n], I64, call.device, ahead_of), [x.ndim],
                   False, "sum", out_dtype=I64, value_dtype=I64)
    return src, call.graph.realize(ranks)


def _holders(call: Call, src, ranks, d: int, out_size, wanted, keep_d=True):
    """(values, indices) over ``out_size``: at each output position, the element of its row
    whose rank is ``wanted(idx)``. Without ``keep_d`` the output has no dimension ``d``."""
    n = ranks.size[d]

    def row(idx):   # an output index -> x's index with d still open
        return list(idx) if keep_d else list(idx[:d]) + [sympy.Integer(0)] + list(idx[d:])

    def holder(idx):   # the output's index, then j: j if rank[j] is the wanted one
        j = idx[-1]
        full = row(idx[:-1])
        full[d] = j
        hit = E.call("eq", ranks.load(full), wanted(idx[:-1]), dtype=B)
        return E.call("where", hit, E.index_value(j), E.const(0, I64), dtype=I64)

    indices = call.graph.realize(reduce(
        call, Virtual(list(out_size) + [n], I64, call.device, holder), [len(out_size)], False,
        "sum", out_dtype=I64, value_dtype=I64))

    def value(idx):
        where = row(idx)
        where[d] = sympy.Integer(0)
        return gather_load(src, where, {d: indices.load(idx)})

    # eager's strides for the values (a view of them, say after sorting a permuted input,
    # addresses them through these)
    return Virtual(list(out_size), src.dtype, call.device, value, stride=_meta_stride(call, 0)), \
        indices


def _meta_stride(call: Call, k: int) -> list:
    return [sympy.sympify(s) for s in call.node.meta["val"][k].stride()]


def _short_row(x, dim: int, what: str):
    if x.dtype.is_complex or x.dtype == torch.bool:
        raise Decline(f"{what} of {x.dtype} values")
    d = dim % x.ndim
    n = x.size[d]
    if not n.is_Integer or int(n) > SORT_MAX_LENGTH or int(n) == 0:
        raise Decline(f"{what} along a dimension of {n} (short rows only, 1 to "
                      f"{SORT_MAX_LENGTH}: the counting is quadratic)")
    return d, int(n)


def _rank_select(call: Call, x, dim: int, keepdim: bool, wanted_of_row, what: str):
    """values and indices of the element of each row whose ascending rank is
    ``wanted_of_row(x's index with d open)``."""
    d, n = _short_row(x, dim, what)
    if n == 1:   # one element per row: itself, at index 0
        size = list(x.size) if keepdim else [s for i, s in enumerate(x.size) if i != d]
        at = (lambda idx: x.load(list(idx))) if keepdim else \
            (lambda idx: x.load(list(idx[:d]) + [sympy.Integer(0)] + list(idx[d:])))
        return [Virtual(size, x.dtype, call.device, at, stride=_meta_stride(call, 0)),
                Virtual(size, I64, call.device, lambda idx: E.const(0, I64),
                        stride=_meta_stride(call, 1))]
    src, ranks = _ranks(call, x, d, descending=False)
    out_size = list(x.size)
    if keepdim:
        out_size[d] = sympy.Integer(1)
    else:
        del out_size[d]

    def wanted(idx):
        full = list(idx) if keepdim else list(idx[:d]) + [sympy.Integer(0)] + list(idx[d:])
        full[d] = sympy.Integer(0)
        return wanted_of_row(full)
    return list(_holders(call, src, ranks, d, out_size, wanted, keep_d=keepdim))


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


@lowering(aten.kthvalue.default)
def _kthvalue(call: Call, x, k, dim=-1, keepdim=False):
    if x.ndim == 0:
        return list(_sorted(call, x, 0, False))
    if not isinstance(k, int):
        raise Decline("kthvalue with a symbolic k")
    return _rank_select(call, x, dim, keepdim, lambda row: E.const(k - 1, I64), "kthvalue")


@lowering(aten.median.dim, aten.nanmedian.dim)
def _median_dim(call: Call, x, dim=-1, keepdim=False):
    """The lower median; a row with NaN gives its first NaN (eager propagates NaN), or for
    nanmedian the lower median of the others (NaN at index 0 when all are NaN)."""
    if x.ndim == 0:
        return list(_sorted(call, x, 0, False))
    skip_nan = call.node.target is aten.nanmedian.dim
    d, n = _short_row(x, dim, "median")
    is_float = x.dtype.is_floating_point
    nan_count = None
    if is_float:
        nans = Virtual(list(x.size), I64, call.device,
                       lambda idx: E.cast(E.call("isnan", x.load(idx), dtype=B), I64))
        nan_count = call.graph.realize(reduce(call, nans, [d], True, "sum", out_dtype=I64,
                                              value_dtype=I64))

    def wanted(row):
        middle = E.const((n - 1) // 2, I64)
        if nan_count is None:
            return middle
        count = nan_count.load(row)
        first_nan = E.call("sub", E.const(n, I64), count, dtype=I64)
        if skip_nan:   # the lower median of the non-NaN values (ranked first)
            kept = E.call("maximum", first_nan, E.const(1, I64), dtype=I64)
            return E.call("floordiv", E.call("sub", kept, E.const(1, I64), dtype=I64),
                          E.const(2, I64), dtype=I64)
        return E.call("where", E.call("gt", count, E.const(0, I64), dtype=B), first_nan,
                      middle, dtype=I64)
    return _rank_select(call, x, d, keepdim, wanted, "median")


# --- searching a sorted sequence: a count of the boundaries before each value ------------------

def _count_before(call: Call, x, boundaries, right: bool):
    """For each element of ``x``: how many boundaries come before it, ``b < v`` (NaN values
    after every boundary, as eager's search places them) or ``b <= v`` with ``right``. 1-D
    boundaries serve every element; N-D ones are searched row by row (leading dims of x)."""
    if x.dtype.is_complex or boundaries.dtype.is_complex:
        raise Decline("searching complex values")
    m = boundaries.size[-1]
    if not m.is_Integer or int(m) > SORT_MAX_LENGTH or int(m) == 0:
        raise Decline(f"searching {m} boundaries (at most {SORT_MAX_LENGTH}: the count is "
                      "linear in them for every value)")
    if boundaries.ndim > 1 and list(boundaries.size[:-1]) != list(x.size[:-1]):
        raise Decline("boundaries whose leading dims differ from the values'")
    lead = boundaries.ndim - 1

    def before(idx):   # x's index, then k
        v, k = x.load(list(idx[:-1])), idx[-1]
        b = boundaries.load(list(idx[:-1][:lead]) + [k])
        if right:
            return E.cast(E.call("logical_not", E.call("lt", v, b, dtype=B), dtype=B), I64)
        nan_after = E.call("logical_and", E.call("isnan", v, dtype=B), E.call(
            "logical_not", E.call("isnan", b, dtype=B), dtype=B), dtype=B)
        return E.cast(E.call("logical_or", E.call("lt", b, v, dtype=B), nan_after, dtype=B), I64)

    if x.ndim == 0:
        counted = Virtual([m], I64, call.device, lambda idx: before([idx[0]]))
        return reduce(call, counted, [0], False, "sum", out_dtype=call.dtype, value_dtype=I64)
    counted = Virtual(list(x.size) + [m], I64, call.device, before)
    return reduce(call, counted, [x.ndim], False, "sum", out_dtype=call.dtype, value_dtype=I64)


@lowering(aten.bucketize.Tensor)
def _bucketize(call: Call, x, boundaries, *, out_int32=False, right=False):
    if boundaries.ndim != 1:
        raise Decline("bucketize with boundaries that are not 1-D")
    return _count_before(call, x, boundaries, right)


@lowering(aten.searchsorted.Tensor)
def _searchsorted(call: Call, sorted_sequence, x, *, out_int32=False, right=False, side=None,
                  sorter=None):
    if sorter is not None:
        raise Decline("searchsorted with a sorter")
    return _count_before(call, x, sorted_sequence, right or side == "right")
