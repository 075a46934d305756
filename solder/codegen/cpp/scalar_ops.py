"""The native CPU target's scalar-op table: each entry takes argument expressions (C++ strings)
and their dtypes and returns a C++ expression with eager's CPU semantics. An op missing here is
one the target cannot emit (``target.py``): its lowering declines and ATen runs it."""
from __future__ import annotations

import torch


def _is_int(dt) -> bool:
    return not dt.is_floating_point and dt != torch.bool


def _f(fmt):
    return lambda a, d: fmt.format(*a)


def _unary(fn):
    return lambda a, d: f"{fn}({a[0]})"


def _add(a, d):
    return f"({a[0]} || {a[1]})" if d[0] == torch.bool else f"({a[0]} + {a[1]})"


def _abs(a, d):
    return a[0] if d[0] == torch.bool else f"solder_abs({a[0]})"


def _truediv(a, d):
    return f"({a[0]} / {a[1]})"


def _floordiv(a, d):
    x, y = a
    if _is_int(d[0]):
        return f"solder_floordiv_int({x}, {y}, solder_err)"
    return f"solder_floordiv({x}, {y})"


def _truncdiv(a, d):
    x, y = a
    if _is_int(d[0]):
        return f"solder_truncdiv_int({x}, {y}, solder_err)"
    return f"std::trunc({x} / {y})"


def _remainder(a, d):
    if _is_int(d[0]):
        return f"solder_remainder_int({a[0]}, {a[1]}, solder_err)"
    return f"solder_remainder({a[0]}, {a[1]})"


def _fmod(a, d):
    if _is_int(d[0]):
        return f"solder_fmod_int({a[0]}, {a[1]}, solder_err)"
    return f"std::fmod({a[0]}, {a[1]})"


def _minmax(kind):
    def emit(a, d):
        fn = "solder_max" if kind == "max" else "solder_min"
        return f"{fn}({a[0]}, {a[1]})"
    return emit


def _fminmax(kind):
    def emit(a, d):
        fn = "solder_fmax" if kind == "max" else "solder_fmin"
        return f"{fn}({a[0]}, {a[1]})"
    return emit


def _sign(a, d):
    if d[0] == torch.bool:
        return a[0]
    return f"solder_sign({a[0]})"


SCALAR_OPS = {
    "add": _add, "sub": _f("({0} - {1})"), "mul": _f("({0} * {1})"), "truediv": _truediv,
    "floordiv": _floordiv, "truncdiv": _truncdiv, "remainder": _remainder, "fmod": _fmod,
    "neg": _f("(-{0})"), "abs": _abs, "sign": _sign, "reciprocal": _f("(1 / {0})"),
    "square": _f("({0} * {0})"),
    "maximum": _minmax("max"), "minimum": _minmax("min"),
    "fmax": _fminmax("max"), "fmin": _fminmax("min"),
    "fma": _f("std::fma({0}, {1}, {2})"),
    "exp": _unary("std::exp"), "exp2": _unary("std::exp2"), "expm1": _unary("std::expm1"),
    "log": _unary("std::log"), "log2": _unary("std::log2"), "log10": _unary("std::log10"),
    "log1p": _unary("std::log1p"), "sqrt": _unary("std::sqrt"),
    "rsqrt": _f("(1 / std::sqrt({0}))"),
    "sin": _unary("std::sin"), "cos": _unary("std::cos"), "tan": _unary("std::tan"),
    "sinh": _unary("std::sinh"), "cosh": _unary("std::cosh"), "tanh": _unary("std::tanh"),
    "asin": _unary("std::asin"), "acos": _unary("std::acos"), "atan": _unary("std::atan"),
    "asinh": _unary("std::asinh"), "acosh": _unary("std::acosh"),
    "atanh": _unary("std::atanh"), "atan2": _f("std::atan2({0}, {1})"),
    "hypot": _f("std::hypot({0}, {1})"), "copysign": _f("std::copysign({0}, {1})"),
    "erf": _unary("std::erf"), "erfc": _unary("std::erfc"), "lgamma": _unary("solder_lgamma"),
    "floor": _unary("std::floor"), "ceil": _unary("std::ceil"), "trunc": _unary("std::trunc"),
    # torch.round: halves to even (the default rounding mode)
    "round": _unary("std::nearbyint"), "frac": _f("({0} - std::trunc({0}))"),
    "sigmoid": _f("(1 / (1 + std::exp(-{0})))"),
    "pow": _f("solder_pow({0}, {1})"),
    "isnan": _f("({0} != {0})"), "isinf": _unary("std::isinf"),
    "isfinite": _unary("std::isfinite"), "signbit": _unary("std::signbit"),
    "eq": _f("({0} == {1})"), "ne": _f("({0} != {1})"), "lt": _f("({0} < {1})"),
    "le": _f("({0} <= {1})"), "gt": _f("({0} > {1})"), "ge": _f("({0} >= {1})"),
    "logical_and": _f("(({0} != 0) && ({1} != 0))"), "logical_or": _f("(({0} != 0) || ({1} != 0))"),
    "logical_xor": _f("(({0} != 0) != ({1} != 0))"), "logical_not": _f("({0} == 0)"),
    "bitwise_and": _f("({0} & {1})"), "bitwise_or": _f("({0} | {1})"),
    "bitwise_xor": _f("({0} ^ {1})"), "bitwise_not": lambda a, d: (
        f"(!{a[0]})" if d[0] == torch.bool else f"(~{a[0]})"),
    "lshift": _f("solder_lshift({0}, {1})"), "rshift": _f("solder_rshift({0}, {1})"),
    "where": _f("({0} ? {1} : {2})"),
}


def emit(name: str, args: list[str], dtypes: list) -> str:
    return SCALAR_OPS[name](args, dtypes)


def err_clause(body: list[str]) -> str:
    """The error flag's reduction clause for a vectorized loop of ``body``, only where the
    body can raise (an integer division): each one costs every iteration of the loop around
    it a private copy of the flag per lane and their reduction (a scatter's rows of 64 floats:
    20% of the loop, GCC 12)."""
    return " reduction(|:solder_err)" if any("solder_err" in line for line in body) else ""
