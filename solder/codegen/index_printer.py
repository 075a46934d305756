"""Index expressions (sympy) as code, for every target: the Triton printer here, the C++ one a
subclass that changes only how it writes an integer, a floor division and max/min."""
from __future__ import annotations

import sympy
# sizes of symbolic shapes arrive with PyTorch's own sympy functions (Mod, FloorDiv, ...)
import torch.utils._sympy.functions as _torch_sympy

from ..ir.indexing import FloorDiv, Memo, ModIndex, bounds

_SORT_KEYS = Memo()   # sympy's str of an index term: the order terms print in, by term


def _sort_key(term) -> str:
    # str() of a sympy expression is slow, and a model's layers print the same terms again
    return _SORT_KEYS.get(term, lambda: str(term))


def _lift(a, b) -> int:
    """The smallest k with ``a + k*b`` never negative, where ``a``'s lower bound is a negative
    number and ``b`` a positive one; else 0. A view's position read through a larger base
    (``VirtualView``, a cat's or a circular pad's pieces) is negative in the lanes its mask
    drops (``(rindex - 18) // 42``): the generated ``//`` and ``%`` truncate there where the IR
    means a floor, and Triton's compiler, which reasons about divisions of index ranges to
    vectorize loads, got a wrong sum from such a kernel on an H100 (fuzz seed 780169) that
    Triton's interpreter computed right."""
    if not (getattr(b, "is_Integer", False) and int(b) > 0):
        return 0
    lo = bounds(a, {})[0]
    if lo is None or not getattr(lo, "is_Integer", False) or int(lo) >= 0:
        return 0
    return -(int(lo) // int(b))


class Printer:
    """Triton's (and Python's) spelling. The IR's divisions are floors of non-negative operands;
    a dividend that can be negative (a view's position in lanes its mask drops) is printed
    lifted by a multiple of the divisor (``_lift``), so every printed division, truncating in
    the generated code, sees a non-negative dividend."""
    DIV = "//"
    MAX, MIN = "tl.maximum", "tl.minimum"

    def __init__(self, names: dict):
        self.names = names   # symbol -> name in the generated code
        self.printed: dict = {}   # expression -> its text, within one kernel

    def __call__(self, e) -> str:
        e = sympy.sympify(e)
        text = self.printed.get(e)
        if text is None:
            text = self.printed[e] = self._print(e)
        return text

    def integer(self, n: int) -> str:
        return str(n)

    def _print(self, e) -> str:
        if e.is_Integer:
            return self.integer(int(e))
        if e.is_Symbol:
            return self.names.get(e, str(e))
        if isinstance(e, (FloorDiv, ModIndex)):
            a, b = e.args
            k = _lift(a, b)
            if k:   # a + k*b is never negative: the division is the same under floor and trunc
                a = a + k * b
            if isinstance(e, ModIndex):
                return f"({self(a)} % {self(b)})"
            text = f"({self(a)} {self.DIV} {self(b)})"
            return f"({text} - {self.integer(k)})" if k else text
        if isinstance(e, (sympy.Mod, _torch_sympy.Mod, _torch_sympy.PythonMod)):
            # sympy's Mod (in sizes of symbolic shapes, e.g. padded head dims) takes the divisor's
            # sign; the generated % truncates, so a possibly negative dividend needs the long form
            a, b = self(e.args[0]), self(e.args[1])
            if e.args[0].is_nonnegative and e.args[1].is_positive:
                return f"({a} % {b})"
            return f"((({a} % {b}) + {b}) % {b})"
        if isinstance(e, (_torch_sympy.FloorDiv, _torch_sympy.CleanDiv)):
            # PyTorch's symbolic-shape division (in sizes): floor, so non-negative operands only
            if e.args[0].is_nonnegative and e.args[1].is_positive:
                return f"({self(e.args[0])} {self.DIV} {self(e.args[1])})"
        if isinstance(e, (sympy.Max, sympy.Min, _torch_sympy.Max, _torch_sympy.Min)):
            # e.g. Max(1, s - Mod(s, 8) + 8): GPT-2 with a symbolic sequence length, torch 2.11
            fn = self.MAX if isinstance(e, (sympy.Max, _torch_sympy.Max)) else self.MIN
            args = sorted(e.args, key=_sort_key)
            out = self(args[0])
            for a in args[1:]:
                out = f"{fn}({out}, {self(a)})"
            return out
        if isinstance(e, _torch_sympy.PowByNatural) and e.args[1].is_Integer:
            return "(" + " * ".join([self(e.args[0])] * int(e.args[1])) + ")"
        if isinstance(e, sympy.floor) and e.args[0].is_Mul:
            num, den = e.args[0].as_numer_denom()
            if den.is_positive and num.is_nonnegative:
                return f"({self(num)} {self.DIV} {self(den)})"
        if e.is_Add:
            terms = sorted(e.args, key=lambda t: (t.is_Integer, _sort_key(t)))
            out = self(terms[0])
            for t in terms[1:]:
                c, rest = t.as_coeff_Mul()
                if c.is_negative:
                    out += f" - {self(-t)}"
                else:
                    out += f" + {self(t)}"
            return f"({out})"
        if e.is_Mul:
            return "(" + " * ".join(self(a) for a in e.args) + ")"
        if e.is_Pow and e.exp.is_Integer and int(e.exp) > 0:
            return "(" + " * ".join([self(e.base)] * int(e.exp)) + ")"
        raise NotImplementedError(f"index expression {e}")
