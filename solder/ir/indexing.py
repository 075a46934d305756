"""Index arithmetic: sympy expressions over loop variables, simplified with their ranges.

Loop variables are non-negative integer symbols with a known (possibly symbolic) extent. Views and
scatters produce floor divisions and remainders of affine expressions; most of them vanish once the
ranges are known (``(12*i0 + i1) // 12 == i0`` when ``i1 < 12``). What cannot be simplified stays
as ``FloorDiv``/``ModIndex``, which is still correct, only slower.
"""
from __future__ import annotations

import math
from typing import Iterable, Mapping, Optional, Sequence

import sympy



class Memo:
    """Answers of a pure function by key, forgotten all at once past ``limit`` entries. Index
    math is asked the same questions over and over: a model's layers repeat their index
    expressions, and a buffer's are worked out again for each kernel it is tried in."""

    def __init__(self, limit: int = 1 << 16):
        self.limit = limit
        self.answers: dict = {}

    def get(self, key, compute):
        got = self.answers.get(key)
        if got is None:
            if len(self.answers) >= self.limit:
                self.answers.clear()
            got = self.answers[key] = compute()
        return got


def size_symbol(name: str) -> sympy.Symbol:
    return sympy.Symbol(name, integer=True, positive=True)


def index_symbol(name: str) -> sympy.Symbol:
    return sympy.Symbol(name, integer=True, nonnegative=True)


class FloorDiv(sympy.Function):
    """``a // b`` for non-negative ``a`` and positive ``b`` (index arithmetic only)."""

    is_integer = True
    is_nonnegative = True

    @classmethod
    def eval(cls, a, b):
        if b == 1:
            return a
        if a == 0:
            return sympy.Integer(0)
        if a.is_Integer and b.is_Integer:
            return sympy.Integer(int(a) // int(b))
        if isinstance(a, FloorDiv):
            return FloorDiv(a.args[0], a.args[1] * b)
        # Pull out terms that are multiples of b: (4*i + j) // 2 == 2*i + j // 2.
        quotient, rest = _split_divisible(a, b)
        if quotient != 0 and _nonnegative(rest):
            return quotient + FloorDiv(rest, b)
        return None


class ModIndex(sympy.Function):
    """``a % b`` for non-negative ``a`` and positive ``b`` (index arithmetic only)."""

    is_integer = True
    is_nonnegative = True

    @classmethod
    def eval(cls, a, b):
        if b == 1 or a == 0:
            return sympy.Integer(0)
        if a.is_Integer and b.is_Integer:
            return sympy.Integer(int(a) % int(b))
        _, rest = _split_divisible(a, b)
        if rest != a and _nonnegative(rest):
            return ModIndex(rest, b)
        reduced = _congruent_terms(a, b)
        if reduced is not None:
            return ModIndex(reduced, b)
        return None


def _congruent_terms(a, b):
    """``a`` with terms swapped for smaller congruent ones modulo ``b``, or None: a term ``y %
    m`` with ``b`` dividing ``m`` is ``y`` (a circular pad's ``((y % 6) + 16) % 6``), and an
    integer constant ``c`` outside ``[0, b)`` is ``c % b`` where what remains of the sum is
    non-negative without it. The sum stays non-negative, as ModIndex asks: the first swap adds
    a multiple of ``m``, the second keeps a remainder that is."""
    terms = list(sympy.Add.make_args(a))
    changed = False
    for i, t in enumerate(terms):
        if (isinstance(t, ModIndex) and t.args[1].is_Integer and b.is_Integer
                and int(t.args[1]) % int(b) == 0):
            terms[i], changed = t.args[0], True
    if b.is_Integer:
        consts = [t for t in terms if t.is_Integer]
        if len(consts) == 1 and not 0 <= int(consts[0]) < int(b):
            rest = sympy.Add(*[t for t in terms if t is not consts[0]])
            if _nonnegative(rest) or int(consts[0]) < 0:
                terms[terms.index(consts[0])] = sympy.Integer(int(consts[0]) % int(b))
                changed = True
    return sympy.Add(*terms) if changed else None


def _nonnegative(rest) -> bool:
    # Generated code divides with C semantics (truncation): a split may only leave a remainder
    # that is non-negative wherever the whole is, e.g. not (6*i + j - 1) // 2 -> 3*i + (j - 1) // 2
    return rest == 0 or rest.is_nonnegative is True


_SPLITS = Memo()


def _split_divisible(expr, d):
    """Split ``expr`` into (terms divisible by d) / d and the rest; d an int or a size symbol."""
    return _SPLITS.get((expr, d), lambda: _split(expr, sympy.sympify(d)))


def _split(expr, d):
    quotient, rest = sympy.Integer(0), sympy.Integer(0)
    if d == 0:  # only in the index math of tensors with no elements: nothing to split
        return quotient, expr
    for term in sympy.Add.make_args(sympy.expand(expr)):
        if d.is_Integer:
            # an integer coefficient divisible by d divides exactly: no need for sympy's cancel
            # (a third of a ConvNeXt graph's lowering time went to it)
            coeff, factors = term.as_coeff_Mul()
            if coeff.is_Integer and int(coeff) % int(d) == 0:
                quotient += sympy.Integer(int(coeff) // int(d)) * factors
                continue
        elif sympy.fraction(sympy.cancel(term / d))[1] == 1:
            quotient += sympy.cancel(term / d)
            continue
        rest += term
    return quotient, rest


# ---------------------------------------------------------------------------------------------
# Range analysis: bounds of an index expression given the extents of its variables.

def bounds(expr, ranges: Mapping[sympy.Symbol, sympy.Expr]):
    """Inclusive (lower, upper) bounds of ``expr``; upper may be symbolic; None if unknown."""
    expr = sympy.sympify(expr)
    if expr.is_Integer:
        return expr, expr
    if expr.is_Symbol:
        if expr in ranges:
            return sympy.Integer(0), ranges[expr] - 1
        if expr.is_positive:
            # a size (loop variables are only nonnegative): its own value bounds it both ways,
            # so sums of sizes and bounded indices compare symbolically (16*s*j + k < 64*s)
            return expr, expr
        if expr.is_nonnegative:
            return sympy.Integer(0), None
        return None, None
    if isinstance(expr, FloorDiv):
        lo, hi = bounds(expr.args[0], ranges)
        d = expr.args[1]
        return (FloorDiv(lo, d) if lo is not None else None,
                FloorDiv(hi, d) if hi is not None and d.is_Integer else None)
    if isinstance(expr, ModIndex):
        lo, hi = bounds(expr.args[0], ranges)
        n = expr.args[1]
        if hi is not None and provably_le(hi, n - 1):
            return lo, hi
        return sympy.Integer(0), n - 1
    if expr.is_Add:
        lo, hi = sympy.Integer(0), sympy.Integer(0)
        for a in expr.args:
            alo, ahi = bounds(a, ranges)
            lo = None if lo is None or alo is None else lo + alo
            hi = None if hi is None or ahi is None else hi + ahi
        return lo, hi
    if expr.is_Mul:
        coeff, rest = expr.as_coeff_Mul()
        if coeff != 1:
            lo, hi = bounds(rest, ranges)
            if coeff.is_nonnegative:
                return (None if lo is None else coeff * lo, None if hi is None else coeff * hi)
            return (None if hi is None else coeff * hi, None if lo is None else coeff * lo)
        # product of non-negative factors (a size symbol times an index)
        lo, hi = sympy.Integer(1), sympy.Integer(1)
        for a in expr.args:
            alo, ahi = bounds(a, ranges)
            if alo is None or not provably_le(0, alo):
                return None, None
            lo = lo * alo
            hi = None if hi is None or ahi is None else hi * ahi
        return lo, hi
    if expr.is_nonnegative:
        return sympy.Integer(0), None
    return None, None


def provably_le(a, b) -> bool:
    """True only when a <= b is provable (sizes are positive integers)."""
    if a is None or b is None:
        return False
    diff = sympy.expand(b - a)
    if diff.is_Integer:
        return int(diff) >= 0
    return bool(diff.is_nonnegative)


_SIMPLIFIED = Memo()   # by expression and the extents of its symbols


def simplify_index(expr, ranges: Mapping[sympy.Symbol, sympy.Expr]):
    """Remove FloorDiv/ModIndex that the ranges prove trivial; bottom-up."""
    expr = sympy.sympify(expr)
    if not expr.has(FloorDiv, ModIndex):
        return expr
    key = (expr, frozenset((s, ranges.get(s)) for s in expr.free_symbols))
    return _SIMPLIFIED.get(key, lambda: _simplify(expr, ranges))


def _simplify(expr, ranges):
    if not expr.has(FloorDiv, ModIndex):
        return expr
    if isinstance(expr, (FloorDiv, ModIndex)):
        a = _simplify(expr.args[0], ranges)
        b = expr.args[1]
        lo, hi = bounds(a, ranges)
        if isinstance(expr, ModIndex):
            if lo is not None and provably_le(0, lo) and provably_le(hi, b - 1):
                return a
            return _divide_out(expr.func, a, b, ranges)
        if lo is not None and provably_le(0, lo) and provably_le(hi, b - 1):
            return sympy.Integer(0)
        return _divide_out(expr.func, a, b, ranges)
    out = expr.func(*[_simplify(a, ranges) for a in expr.args])
    return _recombine(out) if out.is_Add else out


def _divide_out(kind, a, b, ranges):
    """``a // b`` or ``a % b`` where ``b == g * d`` and ``a == g * q + rest`` with ``rest`` in
    ``[0, g)``: ``q // d``, or ``g * (q % d) + rest``. A cat's or a reshape's flat index over
    symbolic sizes (``(192*r + x) // (192*s)`` with ``x < 192``) would otherwise keep its
    divisions, and the views around it could not recombine them."""
    for g in _common_factors(a, b):
        q, rest = _split_divisible(a, g)
        if q == 0:
            continue
        lo, hi = bounds(rest, ranges)
        if lo is None or not (provably_le(0, lo) and provably_le(hi, g - 1)):
            continue
        d = sympy.cancel(b / g)
        if kind is FloorDiv:
            return FloorDiv(q, d)
        return g * ModIndex(q, d) + rest
    return kind(a, b)


def _common_factors(a, b) -> list:
    """Proper factors ``g`` of the divisor ``b`` to try: its symbolic part and each size in
    it, its integer coefficient, and that coefficient's common divisors with the integer
    coefficients of ``a``'s terms (largest first)."""
    coeff, sizes = sympy.sympify(b).as_coeff_Mul()
    found = []
    if sizes != 1:
        found += [f for f in sympy.Mul.make_args(sizes) if f != b]
        if sizes != b:
            found.append(sizes)
    if coeff.is_Integer and int(coeff) > 1:
        c = int(coeff)
        if sizes != 1:
            found.append(coeff)
        shared = {math.gcd(c, int(k)) for k in (t.as_coeff_Mul()[0]
                                                for t in sympy.Add.make_args(sympy.expand(a)))
                  if k.is_Integer}
        found += [sympy.Integer(g) for g in sorted(shared, reverse=True) if 1 < g < c]
    return list(dict.fromkeys(found))


def _split_factor(term, kind):
    """term == coeff * f with f a ``kind`` call and coeff free of index functions."""
    if isinstance(term, kind):
        return sympy.Integer(1), term
    if term.is_Mul:
        found = [a for a in term.args if isinstance(a, kind)]
        if len(found) == 1:
            coeff = sympy.Mul(*[a for a in term.args if a is not found[0]])
            if not coeff.has(FloorDiv, ModIndex):
                return coeff, found[0]
    return None, None


def _div_parts(term):
    """term == coeff * FloorDiv(base, div) -> (coeff, base, div)."""
    coeff, f = _split_factor(term, FloorDiv)
    if f is None:
        return None
    return coeff, f.args[0], f.args[1]


def _recombine(expr):
    """Undo an unravel: ``R*(a // (Q*R)) + (a // Q) % R == a // Q`` (scaled), repeatedly, so that
    dims split for a kernel and joined again by a store index vanish."""
    changed = True
    while changed and expr.is_Add:
        changed = False
        terms = list(expr.args)
        for i, t in enumerate(terms):
            coeff, rest = _split_factor(t, ModIndex)
            if rest is None:
                continue
            inner, r = rest.args
            if isinstance(inner, FloorDiv):
                base, q = inner.args
            else:
                base, q = inner, sympy.Integer(1)
            for j, u in enumerate(terms):
                parts = _div_parts(u) if j != i else None
                if parts is None:
                    continue
                k, ubase, p = parts
                if ubase == base and sympy.expand(p - q * r) == 0 and sympy.expand(k - coeff * r) == 0:
                    merged = coeff * (FloorDiv(base, q) if q != 1 else base)
                    rest_terms = [x for n, x in enumerate(terms) if n not in (i, j)]
                    expr = sympy.Add(*rest_terms, merged)
                    changed = True
                    break
            if changed:
                break
    return expr


def linear_coefficients(expr, var):
    """Coefficients with which ``var`` appears in every Add of ``expr``; None if it appears
    other than linearly (inside a product with another variable, say)."""
    found = []
    return found if _linear_terms(sympy.sympify(expr), var, found) else None


def _linear_terms(e, var, found: list) -> bool:
    """``linear_coefficients``' walk: appends (coefficient, Add) pairs to ``found``; False where
    ``var`` appears other than linearly."""
    if not e.has(var):
        return True
    if e == var:
        found.append((sympy.Integer(1), None))
        return True
    if e.is_Add or e.is_Mul:
        terms = sympy.Add.make_args(e) if e.is_Add else (e,)
        ok = True
        for t in terms:
            coeff, rest = t.as_independent(var, as_Add=False)
            if rest == var:
                found.append((coeff, e))
            elif t.has(var):
                ok = ok and all(_linear_terms(a, var, found) for a in t.args)
        return ok
    return all(_linear_terms(a, var, found) for a in e.args)


_MERGED = Memo()


def merge_dims(sizes: Sequence, exprs: Iterable, variables: Sequence[sympy.Symbol]):
    """Merge adjacent loop dimensions that every expression uses as one flat dimension.

    Returns (new_sizes, new_vars, substitution). The substitution sends every merged-away (or
    size-1) variable to 0; the surviving inner variable of a merged pair then ranges over the
    product of both extents. Apply it to every index expression of the loop body.
    """
    exprs = tuple(sympy.sympify(e) for e in exprs)
    new_sizes, new_vars, subst = _MERGED.get(
        (tuple(sizes), exprs, tuple(variables)),
        lambda: _merge_dims(list(sizes), list(exprs), variables))
    return list(new_sizes), list(new_vars), dict(subst)   # the caller may change them


def _merge_dims(sizes: list, exprs: list, variables):
    subst = {v: sympy.Integer(0) for v, s in zip(variables, sizes) if s == 1}
    keep = [i for i, s in enumerate(sizes) if s != 1]
    if subst:
        exprs = [e.xreplace(subst) for e in exprs]
    sizes = [sizes[i] for i in keep]
    cur = [variables[i] for i in keep]
    i = len(cur) - 2
    while i >= 0:
        outer, inner = cur[i], cur[i + 1]
        if _mergeable(exprs, outer, inner, sizes[i + 1]):
            exprs = [e.xreplace({outer: sympy.Integer(0)}) for e in exprs]
            subst[outer] = sympy.Integer(0)
            sizes[i + 1] = sizes[i] * sizes[i + 1]
            del sizes[i], cur[i]
        i -= 1
    return sizes, cur, subst


def _mergeable(exprs, outer, inner, n_inner) -> bool:
    for e in exprs:
        co = linear_coefficients(e, outer)
        ci = linear_coefficients(e, inner)
        if co is None or ci is None:
            return False
        if not co and not ci:
            continue
        # every Add that holds one holds the other, with coeff(outer) == n_inner * coeff(inner)
        by_add_o = {id(a): c for c, a in co}
        by_add_i = {id(a): c for c, a in ci}
        if set(by_add_o) != set(by_add_i) or len(co) != len(by_add_o) or len(ci) != len(by_add_i):
            return False
        for key, c_o in by_add_o.items():
            if sympy.expand(c_o - n_inner * by_add_i[key]) != 0:
                return False
    return True


def product(values) -> sympy.Expr:
    out = sympy.Integer(1)
    for v in values:
        out = out * v
    return out


def unravel(flat, sizes: Sequence) -> list:
    """Per-dimension indices of a row-major flat index over ``sizes``."""
    out = []
    stride = sympy.Integer(1)
    for n in reversed(list(sizes)):
        out.append(ModIndex(FloorDiv(flat, stride), n) if n != 1 else sympy.Integer(0))
        stride = stride * n
    out.reverse()
    if sizes:
        # the outermost index needs no remainder: the flat index stays below the numel
        first_stride = product(sizes[1:])
        out[0] = FloorDiv(flat, first_stride) if sizes[0] != 1 else sympy.Integer(0)
    return out


def strided_offset(index: Sequence, strides: Sequence, offset=0) -> sympy.Expr:
    # one Add of all terms: sympy canonicalizes once instead of once per dimension
    return sympy.Add(sympy.sympify(offset), *[sympy.Mul(i, s) for i, s in zip(index, strides)])


def evaluate_int(expr, env: Optional[Mapping] = None) -> int:
    expr = sympy.sympify(expr)
    if env:
        expr = expr.subs(env)
    expr = expr.replace(FloorDiv, lambda a, b: sympy.floor(a / b)).replace(
        ModIndex, lambda a, b: sympy.Mod(a, b))
    return int(expr)
