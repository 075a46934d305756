"""Loads inside a select's taken branch lose the mask the branch already implies.

A scatter of a computed source reads ``where(m, f(load(src, i, mask=m)), g(...))``:
``select_scatter(a, b.sigmoid(), 1, 7)`` is ``where(col == 7, sigmoid(b[row] if col == 7 else
0), ...)``. The load's mask makes its value depend on the column, so ``sigmoid`` runs for every
element of the row, and the vectorized loop calls ``exp`` 64 times per row where one would do.
Inside the branch taken where ``m`` holds, ``m`` is true: the load is ``b[row]``, a value of the
row alone, which the compiler computes once per row (loop_nest.py's outer loop).

Only a load whose every element exists wherever the loop runs loses its mask (the vectorized
loop evaluates both branches in every lane); an erroring op (integer division by zero) sees a
changed value only in lanes whose result the select discards, and those read memory that
exists, so no new error can appear: only the loads' values where their mask was false change.
"""
from __future__ import annotations

from typing import Callable

from ...ir import expr as E


def _and_leaves(m: E.Value) -> list:
    if m.op == "call" and m.args[0] == "logical_and":
        return _and_leaves(m.args[1]) + _and_leaves(m.args[2])
    return [m]


def unmask(v: E.Value, in_bounds: Callable[[str, object], bool]) -> E.Value:
    """``v`` with each select's true branch reading, unmasked, the in-bounds loads that only
    its condition masked; ``in_bounds(buffer, index)`` says whether a load may go unmasked."""
    def known(x: E.Value, cond: E.Value) -> E.Value:
        def visit(y, go):
            if y.op != "load" or y.args[2] is None or y.args[3]:
                return None
            buf, index, mask, _ = y.args
            if all(leaf is cond for leaf in _and_leaves(mask)) and in_bounds(buf, index):
                return E.Value("load", (buf, index, None, ()), y.dtype)
            return None
        return E.rebuild(x, visit)

    def visit(x, go):
        if x.op == "call" and x.args[0] == "where" and len(x.args) == 4:
            _, cond, a, b = x.args
            return E.Value("call", ("where", go(cond), go(known(a, cond)), go(b)), x.dtype)
        return None
    return E.rebuild(v, visit)
