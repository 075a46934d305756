"""The elements a view covers in its base, and the inverse: for a base element, whether the view
holds it and which view element it is. A view-scatter is ``where(i in region, src[inverse(i)],
base[i])``, so the inverse must be closed-form index arithmetic.

Two forms:
  Region          per dimension: view element j is base element ``start + sum_k c_k * j_k``,
                  each base dimension stepped by at most one view dimension (slice, select,
                  diagonal, and any as_strided whose strides split that way on the base)
  PositionRegion  on storage positions of the base: view element j is at position
                  ``offset + sum_k j_k * t_k``, inverted greedily from the largest stride down
                  (any non-overlapping as_strided; the base may have gaps or overlap itself)
A view with no such form (overlapping strides) has no inverse: ``strided_region`` returns None.

Index arithmetic here keeps every ``FloorDiv``/``ModIndex`` argument non-negative wherever the
element is in the region (generated code divides with truncation); outside it, results are
garbage that the region predicate masks off.
"""
from __future__ import annotations

from typing import Optional

import sympy
import torch

from ..ir import expr as E
from ..ir.indexing import FloorDiv, ModIndex, strided_offset

BOOL = torch.bool


def _provable(expr) -> bool:
    """True only when ``expr >= 0`` is certain."""
    e = sympy.expand(sympy.sympify(expr))
    if e.is_Integer:
        return int(e) >= 0
    return bool(e.is_nonnegative)


def _cmp(op, a, b) -> E.Value:
    return E.call(op, E.index_value(a), E.index_value(b), dtype=BOOL)


def all_of(conds) -> Optional[E.Value]:
    out = None
    for c in conds:
        out = c if out is None else E.call("logical_and", out, c, dtype=BOOL)
    return out


def _int(x) -> Optional[int]:
    try:
        return int(x)
    except TypeError:
        return None


class Region:
    """View element j is base element ``start[d] + sum_k coeffs_k[d] * j_k``."""

    def __init__(self, base_size, start, dims):
        self.base_size = list(base_size)
        self.start = [sympy.sympify(s) for s in start]
        self.dims = [(sympy.sympify(n), {d: sympy.sympify(c) for d, c in cs.items()})
                     for n, cs in dims]
        self.size = [n for n, _ in self.dims]

    def index(self, j) -> list:
        out = list(self.start)
        for jk, (n, coeffs) in zip(j, self.dims):
            for d, c in coeffs.items():
                out[d] = out[d] + c * jk
        return out

    def inverse(self, idx):
        """(predicate or None when every element is in the region, view index)."""
        conds, j = [], []
        stepped = set()
        for n, coeffs in self.dims:
            if n == 1 or not coeffs:
                j.append(sympy.Integer(0))
                continue
            (d0, c0), *others = sorted(coeffs.items(), key=lambda dc: _int(dc[1]) or 1 << 62)
            stepped.update(coeffs)
            t = idx[d0] - self.start[d0]
            jk = t if c0 == 1 else FloorDiv(t, c0)
            j.append(jk)
            if self.start[d0] != 0:
                conds.append(_cmp("ge", idx[d0], self.start[d0]))
            if c0 != 1:
                conds.append(_cmp("eq", ModIndex(t, c0), 0))
            last = self.start[d0] + c0 * (n - 1)
            if not _provable(last - (self.base_size[d0] - 1)):
                conds.append(_cmp("le", idx[d0], last))
            for d, c in others:
                conds.append(_cmp("eq", idx[d], self.start[d] + c * jk))
        for d, n in enumerate(self.base_size):
            if d not in stepped and not (n == 1 and self.start[d] == 0):
                conds.append(_cmp("eq", idx[d], self.start[d]))
        return all_of(conds), j

    def layout_on(self, size, stride, offset):
        """The view's (size, stride, offset) on a base stored with ``stride`` at ``offset``."""
        vstride = [sum((c * stride[d] for d, c in cs.items()), sympy.Integer(0))
                   for _, cs in self.dims]
        return list(self.size), vstride, strided_offset(self.start, stride, offset)


class PositionRegion:
    """View element j sits at storage position ``offset + sum_k j_k * stride_k`` of a dense base
    whose element i sits at ``sum_d i_d * base_stride_d``; view strides are distinct integers."""

    def __init__(self, base_size, base_stride, size, stride, offset):
        self.base_size, self.base_stride = list(base_size), list(base_stride)
        self.size, self.stride = list(size), [int(s) for s in stride]
        self.offset = sympy.sympify(offset)

    def inverse(self, idx):
        p = strided_offset(idx, self.base_stride, 0)
        order = sorted((k for k, n in enumerate(self.size) if n != 1),
                       key=lambda k: self.stride[k], reverse=True)
        j = [sympy.Integer(0)] * len(self.size)
        conds = []
        if not order:
            conds.append(_cmp("eq", p, self.offset))
            return all_of(conds), j
        top = order[0]
        t0 = self.stride[top]
        off = _int(self.offset)
        if off is not None and off < 0:   # the view starts before the base's first element
            rest = p - off                # >= 0 everywhere
            j[top] = FloorDiv(rest, t0)
        else:
            a, b = (off // t0, off % t0) if off is not None else (0, self.offset)
            if off is None or off != 0:
                conds.append(_cmp("ge", p, self.offset))
            rest = p - b                  # >= a * t0 >= 0 wherever p >= offset
            j[top] = FloorDiv(rest, t0) - a
        r = ModIndex(rest, t0)
        for k in order[1:]:
            j[k] = FloorDiv(r, self.stride[k])
            r = ModIndex(r, self.stride[k])
        for k in order:
            conds.append(_cmp("lt", j[k], self.size[k]))
        if r != 0:
            conds.append(_cmp("eq", r, 0))
        return all_of(conds), j

    def layout_on(self, size, stride, offset):
        if len(stride) != len(self.base_stride) or any(
                sympy.expand(a - b) != 0 for a, b in zip(stride, self.base_stride)):
            return None
        return list(self.size), list(self.stride), self.offset + offset


def is_dense(size, stride) -> bool:
    """Every position of the span holds exactly one element (a permutation of contiguous)."""
    dims = [(s, n) for n, s in zip(size, stride) if n != 1]
    if any(_int(s) is None for s, _ in dims):
        # symbolic strides: only the plain contiguous order is recognised
        expected = sympy.Integer(1)
        for n, s in reversed(list(zip(size, stride))):
            if n != 1 and sympy.expand(s - expected) != 0:
                return False
            expected = expected * n
        return True
    expected = sympy.Integer(1)
    for s, n in sorted(dims, key=lambda sn: int(sn[0])):
        if sympy.expand(s - expected) != 0:
            return False
        expected = expected * n
    return True


def strided_region(base_size, base_stride, size, stride, offset):
    """The region of the strided view (size, stride, offset) of a dense base; None when the
    view overlaps itself (or that cannot be ruled out)."""
    if any(n == 0 for n in size) or not is_dense(base_size, base_stride):
        return None
    region = _split_by_dims(base_size, base_stride, size, stride, offset)
    if region is not None:
        return region
    return position_region(base_size, base_stride, size, stride, offset)


def position_region(base_size, base_stride, size, stride, offset):
    """The view as storage positions; the base may have any layout (gaps, overlap: each base
    element is in the region when its position is). None when the view overlaps itself."""
    if any(_int(s) is None for n, s in zip(size, stride) if n != 1):
        return None
    dims = sorted(((int(s), n) for n, s in zip(size, stride) if n != 1))
    span = sympy.Integer(0)
    for s, n in dims:  # each stride must clear the span of all smaller ones
        if s <= 0 or not _provable(s - 1 - span):
            return None
        span = span + (n - 1) * s
    return PositionRegion(base_size, base_stride, size, stride, offset)


def _split_by_dims(base_size, base_stride, size, stride, offset) -> Optional[Region]:
    ints = [_int(x) for x in list(base_size) + list(base_stride) + list(size) + list(stride)]
    if any(v is None for v in ints) or _int(offset) is None:
        return None
    order = sorted((d for d, n in enumerate(base_size) if n != 1),
                   key=lambda d: int(base_stride[d]), reverse=True)

    def digits(x):
        out = {}
        for d in order:
            q, x = divmod(x, int(base_stride[d]))
            if q:
                out[d] = q
        return out if x == 0 else None

    start_d = digits(int(offset))
    if start_d is None:
        return None
    start = [start_d.get(d, 0) for d in range(len(base_size))]
    used, dims = set(), []
    for n, s in zip(size, stride):
        n = int(n)
        if n == 1:
            dims.append((1, {}))
            continue
        coeffs = digits(int(s)) if int(s) > 0 else None
        if not coeffs or used & set(coeffs):
            return None
        for d, c in coeffs.items():
            if start[d] + c * (n - 1) > int(base_size[d]) - 1:
                return None
        used |= set(coeffs)
        dims.append((n, coeffs))
    if any(start[d] > int(base_size[d]) - 1 for d in range(len(base_size))):
        return None
    return Region(base_size, start, dims)


# -- the regions of slice / select / diagonal, straight from the op's arguments ---------------

def slice_region(base_size, dim, start, end, step, n) -> Region:
    dims = [(base_size[d], {d: 1}) if d != dim else (n, {d: step}) for d in range(len(base_size))]
    starts = [0] * len(base_size)
    starts[dim] = start
    return Region(base_size, starts, dims)


def select_region(base_size, dim, index) -> Region:
    dims = [(base_size[d], {d: 1}) for d in range(len(base_size)) if d != dim]
    starts = [0] * len(base_size)
    starts[dim] = index
    return Region(base_size, starts, dims)


def diagonal_region(base_size, offset, dim1, dim2, n) -> Region:
    dims = [(base_size[d], {d: 1}) for d in range(len(base_size)) if d not in (dim1, dim2)]
    dims.append((n, {dim1: 1, dim2: 1}))
    starts = [0] * len(base_size)
    if offset >= 0:
        starts[dim2] = offset
    else:
        starts[dim1] = -offset
    return Region(base_size, starts, dims)
