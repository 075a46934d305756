"""A pointwise kernel's flat loop as two nested loops, where that removes the inner divisions.

A pointwise kernel runs over ``xindex`` in ``[0, xnumel)``, and a view or a scatter of a
2-or-more-dimensional tensor reads its positions back as ``xindex // C`` and ``xindex % C``
(``slice_scatter``'s column test, ``select_scatter``'s ``xindex % 64 == 7``). A 64-bit division
per element keeps the compiler from vectorizing the loop at all. With
``xindex = C * x0 + x1`` (``x0`` in ``[0, xnumel / C)``, ``x1`` in ``[0, C)``), the index
simplifier (``ir/indexing.simplify_index``) turns ``xindex // C`` into ``x0`` and
``xindex % C`` into ``x1``: the inner loop over ``x1`` is contiguous and division-free, and what
depends on ``x0`` alone is computed once per row. The outer loop runs on threads, the inner one
is vectorized.

``C`` is chosen among the divisors the kernel's own index expressions use: the one that leaves
the fewest divisions depending on ``x1`` (of equal ones the largest, the longest inner loop).
"""
from __future__ import annotations

from typing import Iterable, Optional

import sympy

from ...ir import expr as E
from ...ir.indexing import FloorDiv, ModIndex, index_symbol, simplify_index
from ...schedule.prepare import XINDEX

OUTER = index_symbol("x0")
INNER = index_symbol("x1")
# shorter inner loops do not vectorize: the flat loop's divisions by a constant are cheaper
MIN_INNER = 8


def _divisions(exprs: Iterable, var) -> set:
    return {a for e in exprs for a in sympy.sympify(e).atoms(FloorDiv, ModIndex)
            if var in a.args[0].free_symbols}


def index_exprs(kernel) -> list:
    """Every index expression a pointwise kernel's members read or store through."""
    out = []
    for p in kernel.prepared.values():
        values = [p.value] + [v for _, v in p.store_binds]
        values += [p.store_mask] * (p.store_mask is not None)
        out.append(p.store_index)
        out += [e for v in values for e in E.index_exprs(v)]
    return out


class Split:
    """``xindex = inner * x0 + x1``: rewrites index expressions for the nested loops."""

    def __init__(self, inner, outer):
        self.inner, self.outer = inner, outer   # sympy: an integer or a size symbol
        self.ranges = {OUTER: outer, INNER: inner}
        self._done: dict = {}

    def __call__(self, e):
        e = sympy.sympify(e)
        out = self._done.get(e)
        if out is None:
            out = e
            if XINDEX in e.free_symbols:
                out = simplify_index(e.subs(XINDEX, self.inner * OUTER + INNER), self.ranges)
            self._done[e] = out
        return out


def choose(kernel) -> Optional[Split]:
    """The split that leaves the inner loop the fewest divisions, or None where the flat loop
    is as good (no division of ``xindex``, or none that a split removes)."""
    if kernel.is_reduction:
        return None
    exprs = index_exprs(kernel)
    flat = _divisions(exprs, XINDEX)
    if not flat:
        return None
    xnumel = sympy.sympify(kernel.xnumel)
    best, best_key = None, None
    for d in sorted({a.args[1] for a in flat}, key=str):
        # a size symbol's value is not known here: taken as long enough
        if not (d.is_Integer and int(d) >= MIN_INNER or d.is_Symbol and d.is_positive):
            continue
        outer = sympy.cancel(xnumel / d)
        if sympy.fraction(outer)[1] != 1:
            continue
        split = Split(d, outer)
        left = len(_divisions([split(e) for e in exprs], INNER))
        key = (left, -int(d) if d.is_Integer else 0)
        if left < len(flat) and (best_key is None or key < best_key):
            best, best_key = split, key
    return best
