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
Where no such row removes a division, a row shorter than ``MIN_INNER`` (``as_strided_scatter``
with stride 2 reads ``xindex // 2`` and ``xindex % 2``) is unrolled instead: the vectorized loop
is the one over ``x0``, its body one block per ``x1`` value with ``x1`` a constant (an
interleaved store, no gather).
"""
from __future__ import annotations

import operator
from typing import Iterable, Optional

import sympy
import torch

from ...ir import expr as E
from ...ir.indexing import FloorDiv, ModIndex, index_symbol, simplify_index
from ...schedule.prepare import XINDEX

OUTER = index_symbol("x0")
INNER = index_symbol("x1")
# shorter inner loops do not vectorize: a row shorter than this is unrolled into the x0 loop
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
        # a short row: one block per x1 value inside the (vectorized) x0 loop
        self.unrolled = bool(inner.is_Integer and int(inner) < MIN_INNER)
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
        if not (d.is_Integer and int(d) >= 2 or d.is_Symbol and d.is_positive):
            continue
        outer = sympy.cancel(xnumel / d)
        if sympy.fraction(outer)[1] != 1:
            continue
        split = Split(d, outer)
        left = len(_divisions([split(e) for e in exprs], INNER))
        # an unrolled row only where no row of 8 or more removes a division: a short row
        # leaves the divisions by the longer ones to x0, per element (a LLaMA rotary
        # backward's x0 % 4, x0 / 16, ... where a row of 16 divides nothing)
        key = (split.unrolled, left, -int(d) if d.is_Integer else 0)
        if left < len(flat) and (best_key is None or key < best_key):
            best, best_key = split, key
    return best


# ---------------------------------------------------------------------------------------------
# The inner loop in segments: where the kernel compares x1 with constants (a slice's bounds, a
# select's column, a pad's edges, a cat's boundary), each segment between the constants knows
# every such comparison's outcome. Its body is the kernel's with those outcomes as constants:
# the compiler drops the branch a segment never takes (a slice_scatter's sigmoid outside the
# slice, the masked loads of a cat's other input) and each segment's loads are plain.

COMPARISONS = {"lt", "le", "gt", "ge", "eq", "ne"}
FLIPPED = {"lt": "gt", "le": "ge", "gt": "lt", "ge": "le", "eq": "eq", "ne": "ne"}
# more segments than this: the kernel's source grows faster than it gains
MAX_SEGMENTS = 5


def _exact(v: E.Value) -> bool:
    # an integer register: a float one rounds large positions (x1 < n would not be exact)
    return not v.dtype.is_floating_point and not v.dtype.is_complex and v.dtype != torch.bool


def _integer(v: E.Value, split: Split):
    if not _exact(v):
        return None
    if v.op == "const":
        return int(v.args[0])
    if v.op == "index":
        e = split(v.args[0])
        return int(e) if e.is_Integer else None
    return None


def _inner_plus(v: E.Value, split: Split):
    """``k`` where ``v`` is the index value ``x1 + k``, else None."""
    if v.op != "index" or not _exact(v):
        return None
    rest = split(v.args[0]) - INNER
    return int(rest) if rest.is_Integer else None


def _on_inner(cmp: E.Value, split: Split):
    """(op, n) where ``cmp`` compares ``x1`` with the integer ``n`` as ``x1 op n``, else None."""
    _, a, b = cmp.args
    op = cmp.args[0]
    k, n = _inner_plus(a, split), _integer(b, split)
    if k is None or n is None:
        k, n, op = _inner_plus(b, split), _integer(a, split), FLIPPED[op]
    if k is None or n is None:
        return None
    return op, n - k


_TRUTH = {name: getattr(operator, name) for name in COMPARISONS}


def segments(split: Split, values) -> list:
    """[(lo, hi, {comparison: outcome})] covering ``[0, inner)``, or [] where nothing is gained
    (no comparison of ``x1`` with a constant, a symbolic row, too many segments). An unrolled
    row has one segment per ``x1`` value."""
    if not split.inner.is_Integer:
        return []
    c = int(split.inner)
    found = {}
    for v in values:
        for x in E.walk(v):
            if x.op == "call" and x.args[0] in COMPARISONS and x not in found:
                on = _on_inner(x, split)
                if on is not None:
                    found[x] = on
    cuts = {0, c}
    for op, n in found.values():
        # where the outcome can change: x1 == n - 1 | n, or n | n + 1
        cuts |= {n + 1} if op in ("le", "gt") else {n} if op in ("lt", "ge") else {n, n + 1}
    cuts = sorted(x for x in cuts if 0 <= x <= c)
    if split.unrolled:
        cuts = list(range(c + 1))
    elif len(cuts) <= 2 or len(cuts) - 1 > MAX_SEGMENTS:
        return []
    return [(lo, hi, {x: _TRUTH[op](lo, n) for x, (op, n) in found.items()})
            for lo, hi in zip(cuts, cuts[1:])]


def fix(v: E.Value, outcomes: dict) -> E.Value:
    """``v`` with the comparisons a segment knows replaced by their outcomes, and what they
    decide folded: a select of a known condition is its branch, a load of a known mask a plain
    load or zero (the generated code then shows only what the segment computes)."""
    if not outcomes:
        return v

    def visit(x, go):
        if x in outcomes:
            return E.const(outcomes[x], torch.bool)
        return _fold(E.rebuilt(x, go))
    return E.rebuild(v, visit)


def _known(v: E.Value):
    return bool(v.args[0]) if v.op == "const" and v.dtype == torch.bool else None


def _fold(x: E.Value) -> E.Value:
    if x.op == "load" and x.args[2] is not None:
        m = _known(x.args[2])
        if m is True:
            return E.Value("load", (x.args[0], x.args[1], None, x.args[3]), x.dtype)
        if m is False:
            return E.const(0, x.dtype)
        return x
    if x.op != "call":
        return x
    name, args = x.args[0], x.args[1:]
    known = [_known(a) for a in args]
    if name == "where" and known[0] is not None:
        taken = args[1] if known[0] else args[2]
        # (a branch of another dtype keeps the select: its conversion is the C++ ternary's)
        return taken if taken.dtype == x.dtype else x
    if name == "logical_not" and known[0] is not None:
        return E.const(not known[0], torch.bool)
    if name in ("logical_and", "logical_or"):
        absorbing = name == "logical_or"   # the value that decides: True for or, False for and
        if absorbing in known:
            return E.const(absorbing, torch.bool)
        if known[0] is not None and known[1] is None and args[1].dtype == torch.bool:
            return args[1]
        if known[1] is not None and known[0] is None and args[0].dtype == torch.bool:
            return args[0]
        if None not in known:
            return E.const(not absorbing, torch.bool)
    return x
