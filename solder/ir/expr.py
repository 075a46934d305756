"""Scalar expressions: what one element of a value is, as a small hash-consed DAG.

A lowering describes an element of its result as a function of the element's index; that function
returns a ``Value``. Values are structural (two equal expressions are one value), so common
subexpressions merge for free when a kernel is generated.

Kinds (``Value.op``):
    load   (buffer_name, index, mask, indirect)
                                       element ``index`` of a buffer's storage; ``mask`` (a bool
                                       value or None) guards the read (0 where false);
                                       ``indirect`` binds symbols of ``index`` to values (gathers)
    const  (python_value,)             a scalar constant
    index  (sympy_expr,)               an index expression used as a value (arange, masks)
    rand   (seed_slot, offset, kind)   counter-based random number ("rand" or "randn")
    cast   (value,)                    conversion to ``dtype``
    call   (name, value, ...)          a scalar op from codegen's scalar-op table
"""
from __future__ import annotations

import math
import weakref
from typing import Any

import sympy
import torch


class Value:
    __slots__ = ("op", "args", "dtype", "_key", "_hash", "__weakref__")

    def __new__(cls, op: str, args: tuple, dtype: torch.dtype):
        # hash-consed: an equal value made again is the one made first, so comparing two values
        # is comparing two objects (a kernel's code generation looked up every subexpression in
        # its emitted ones by walking both DAGs: a third of GPT-2's code generation on the CPU)
        key = (op, tuple(_key_of(a) for a in args), dtype)
        got = _MADE.get(key)
        if got is not None:
            return got
        self = object.__new__(cls)
        self.op = op
        self.args = args
        self.dtype = dtype
        self._key = key
        self._hash = hash(key)
        _MADE[key] = self
        return self

    def __hash__(self):
        return self._hash

    def __eq__(self, other):
        if self is other:
            return True
        if not isinstance(other, Value) or self._hash != other._hash:
            return False
        return _same_dag(self, other)

    def __repr__(self):
        return format_value(self)

    def children(self):
        if self.op == "load":
            out = [iv for _, iv in self.args[3]]
            return out + [self.args[2]] if self.args[2] is not None else out
        return [a for a in self.args if isinstance(a, Value)]


# every live value by its key (values are immutable; one that nothing holds is forgotten)
_MADE: "weakref.WeakValueDictionary[tuple, Value]" = weakref.WeakValueDictionary()


def _same_dag(a: "Value", b: "Value") -> bool:
    """Structural equality of two value DAGs, each pair of nodes compared once. (Comparing the
    keys recursively revisits shared children once per path to them: a running maximum over
    n window positions references the previous maximum twice, 2^n comparisons.)"""
    seen: set = set()
    pending = [(a, b)]
    while pending:
        x, y = pending.pop()
        if x is y or (id(x), id(y)) in seen:
            continue
        if x._hash != y._hash or x.op != y.op or x.dtype != y.dtype:
            return False
        seen.add((id(x), id(y)))
        if not _same_parts(x._key[1], y._key[1], pending):
            return False
    return True


def _same_parts(p, q, pending: list) -> bool:
    """Keys' argument parts equal, with Value pairs queued instead of compared here."""
    if isinstance(p, Value) or isinstance(q, Value):
        if not (isinstance(p, Value) and isinstance(q, Value)):
            return False
        pending.append((p, q))
        return True
    if isinstance(p, tuple) and isinstance(q, tuple):
        return len(p) == len(q) and all(_same_parts(u, v, pending) for u, v in zip(p, q))
    return p == q   # leaves compare as they would inside the keys


def _key_of(a: Any):
    if isinstance(a, tuple):
        return tuple(_key_of(x) for x in a)
    if isinstance(a, float):
        return ("f", repr(a))  # nan == nan for hashing purposes
    return a


def load(buffer: str, index, dtype: torch.dtype, mask: "Value | None" = None,
         indirect: tuple = ()) -> Value:
    return Value("load", (buffer, sympy.sympify(index), mask, tuple(indirect)), dtype)


def indirect_symbol(v: "Value") -> sympy.Symbol:
    """A symbol standing for a data-dependent index value inside an index expression."""
    return sympy.Symbol(f"ind{v._hash & 0xFFFFFFFF:x}", integer=True)


def with_mask(v: "Value", mask: "Value") -> "Value":
    """``v`` with every load in it guarded by ``mask`` (a branch of a select: its loads may
    point out of bounds where the branch is not taken)."""
    def guard(x, go):
        if x.op != "load":
            return None
        buf, index, m, ind = rebuilt(x, go).args
        m = mask if m is None else call("logical_and", m, mask, dtype=torch.bool)
        return Value("load", (buf, index, m, ind), x.dtype)
    return rebuild(v, guard)


def bind_indirect(v: "Value", binds: tuple) -> "Value | None":
    """``v`` evaluated at an index holding the symbols of ``binds`` (symbol, Value): every load
    whose index uses one carries its binding. None if anything else (an index value, a random
    offset) uses one: those are printed without bindings."""
    syms = {s for s, _ in binds}
    failed = []

    def bind(x, go):
        if x.op == "load":
            buf, index, m, ind = rebuilt(x, go).args
            used = sympy.sympify(index).free_symbols & syms
            ind = ind + tuple((s, iv) for s, iv in binds if s in used and s not in dict(ind))
            return Value("load", (buf, index, m, ind), x.dtype)
        if x.op in ("index", "rand") and sympy.sympify(
                x.args[0] if x.op == "index" else x.args[1]).free_symbols & syms:
            failed.append(x)
        return None

    out = rebuild(v, bind)
    return None if failed else out


def const(value, dtype: torch.dtype) -> Value:
    if dtype == torch.bool:
        value = bool(value)
    elif dtype.is_floating_point:
        value = float(value)
        if dtype in (torch.float16, torch.bfloat16, torch.float32) and math.isfinite(value):
            # the value a tensor of this dtype holds (full((n,), 1e-3, dtype=bfloat16) is
            # 0.000999...): registers hold half types as float32, where 1e-3 would stay 1e-3
            value = float(torch.tensor(value, dtype=dtype))
    elif not dtype.is_complex:
        value = int(value)
    return Value("const", (value,), dtype)


def index_value(expr, dtype: torch.dtype = torch.int64) -> Value:
    return Value("index", (sympy.sympify(expr),), dtype)


def cast(v: Value, dtype: torch.dtype) -> Value:
    if v.dtype == dtype:
        return v
    if v.op == "const":
        return const(v.args[0], dtype) if _const_castable(v.args[0], dtype) else Value("cast", (v,), dtype)
    return Value("cast", (v,), dtype)


def _const_castable(x, dtype) -> bool:
    if isinstance(x, float) and not dtype.is_floating_point:
        return False  # float->int truncation and nan/inf rules: let the kernel do it
    return not (isinstance(x, float) and math.isfinite(x) is False and dtype == torch.bool)


def call(name: str, *args: Value, dtype: torch.dtype) -> Value:
    return Value("call", (name, *args), dtype)


def rand(seed_slot: int, offset, kind: str, dtype: torch.dtype = torch.float32) -> Value:
    return Value("rand", (seed_slot, sympy.sympify(offset), kind), dtype)


def loads_of(v: Value) -> list[Value]:
    """Every load in the DAG under ``v`` (each once)."""
    seen, out, stack = set(), [], [v]
    while stack:
        x = stack.pop()
        if x in seen:
            continue
        seen.add(x)
        if x.op == "load":
            out.append(x)
        stack.extend(x.children())
    return out


def walk(v: Value):
    """Every value under ``v``, children before parents, each once."""
    seen, order = set(), []

    def visit(x):
        if x in seen:
            return
        seen.add(x)
        for c in x.children():
            visit(c)
        order.append(x)

    try:
        visit(v)
    finally:
        del visit   # it refers to itself: each call would otherwise leave a reference cycle
    return order


def count_ops(v: Value) -> int:
    return sum(1 for x in walk(v) if x.op in ("call", "cast", "rand"))


def buffers_read(v: Value) -> set:
    """The buffers ``v`` loads from."""
    return {x.args[0] for x in walk(v) if x.op == "load"}


def format_value(v: Value, depth: int = 6) -> str:
    if v.op == "load":
        return f"{v.args[0]}[{v.args[1]}]"
    if v.op == "const":
        return repr(v.args[0])
    if v.op == "index":
        return f"idx({v.args[0]})"
    if v.op == "rand":
        return f"{v.args[2]}(seed{v.args[0]}, {v.args[1]})"
    if depth == 0:
        return "…"
    if v.op == "cast":
        return f"{str(v.dtype).replace('torch.', '')}({format_value(v.args[0], depth - 1)})"
    return f"{v.args[0]}({', '.join(format_value(a, depth - 1) for a in v.args[1:])})"


def map_indices(v: Value, f) -> Value:
    """``v`` with every index expression (loads, index values, random offsets) mapped by ``f``."""
    def remap(x, go):
        if x.op == "load":
            buf, index, m, ind = rebuilt(x, go).args
            return Value("load", (buf, f(index), m, ind), x.dtype)
        if x.op == "index":
            return Value("index", (f(x.args[0]),), x.dtype)
        if x.op == "rand":
            return Value("rand", (x.args[0], f(x.args[1]), x.args[2]), x.dtype)
        return None
    return rebuild(v, remap)


def index_exprs(v: Value) -> list:
    """Every index expression under ``v``."""
    out = []
    for x in walk(v):
        if x.op in ("load", "index"):
            out.append(x.args[1] if x.op == "load" else x.args[0])
        elif x.op == "rand":
            out.append(x.args[1])
    return out


def rebuild(v: Value, visit) -> Value:
    """Rebuild ``v`` bottom-up, each value once. ``visit(x, go)`` returns a replacement for ``x``
    (``go`` rebuilds a child) or None to keep ``x`` with its children rebuilt."""
    memo: dict = {}

    def go(x):
        out = memo.get(x)
        if out is None:
            out = visit(x, go)
            if out is None:
                out = rebuilt(x, go)
            memo[x] = out
        return out

    try:
        return go(v)
    finally:
        del go   # it refers to itself: each call would otherwise leave a reference cycle


def rebuilt(x: Value, go) -> Value:
    """``x`` with its child values replaced by ``go(child)``."""
    if x.op == "load":
        buf, index, m, ind = x.args
        return Value("load", (buf, index, go(m) if m is not None else None,
                              tuple((s, go(iv)) for s, iv in ind)), x.dtype)
    if x.op in ("cast", "call"):
        return Value(x.op, tuple(go(a) if isinstance(a, Value) else a for a in x.args), x.dtype)
    return x
