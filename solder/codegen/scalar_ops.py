"""The scalar-op table: how each ``call`` value is written in Triton.

Each entry takes the argument expressions (strings) and their dtypes and returns an expression.
Lowerings name ops from this table; a new scalar op is one entry here. Where Triton's interpreter
(the CPU test path) lacks libdevice, an entry gives an equivalent formula from core ``tl`` math;
ops with no such formula are unavailable there (``available``), and their lowerings decline.
"""
from __future__ import annotations

import os

import torch

LD = "libdevice"


def interpreting() -> bool:
    return os.environ.get("TRITON_INTERPRET", "0") not in ("", "0")


def _ld(name, portable=None):
    def emit(args, dtypes):
        if interpreting() and portable is not None:
            return portable(*args)
        return f"{LD}.{name}({', '.join(args)})"
    return emit


def _sf(helper, libdevice=None, nan_at_inf=False):
    """A helper from special_functions.py, computed in float64 and rounded once; GPU code calls
    libdevice instead where it has the function. ``nan_at_inf``: ATen's answer at +-inf is NaN
    where libdevice gives the limit (Bessel J and Y: 0 on the H200)."""
    def emit(args, dtypes):
        if libdevice is not None and not interpreting():
            call = f"{LD}.{libdevice}({', '.join(args)})"
            if nan_at_inf:
                return f"tl.where(tl.abs({args[0]}) == float('inf'), float('nan'), {call})"
            return call
        back = "tl.float64" if dtypes[0] == torch.float64 else "tl.float32"
        return f"{helper}({', '.join(f'{a}.to(tl.float64)' for a in args)}).to({back})"
    return emit


def _sf_limit(helper, limit):
    """A helper that takes an order limit as a third argument (Hermite's NaN above it)."""
    def emit(args, dtypes):
        back = "tl.float64" if dtypes[0] == torch.float64 else "tl.float32"
        return f"{helper}({', '.join(f'{a}.to(tl.float64)' for a in args)}, {limit}).to({back})"
    return emit


def _nextafter(args, dtypes):
    """The bit-pattern helper of special_functions.py (libdevice's flushes float32 subnormals)."""
    bits = "f64" if dtypes[0] == torch.float64 else "f32"
    return f"_sf_nextafter_{bits}({args[0]}, {args[1]})"


def _fmt(template):
    return lambda args, dtypes: template.format(*args)


def _float_only(emit):
    """A rounding op: the identity on integers and bools (Triton's floor/ceil take floats)."""
    return lambda args, dtypes: args[0] if not dtypes[0].is_floating_point else emit(args, dtypes)


def _pow_op(args, dtypes):
    if not any(dt.is_floating_point for dt in dtypes):
        return f"_ipow({args[0]}, {args[1]})"   # integers: exact, wrapping like torch
    return _ld("pow", lambda x, y: f"_pow({x}, {y})")(args, dtypes)


def _is_int(dt):
    return not dt.is_floating_point and dt != torch.bool


def _float_fmod(a: str, b: str) -> str:
    """C's fmod, exact: libdevice on the GPU; Triton's ``%`` on floats is C's fmod too, and the
    interpreter computes it with numpy's exact one."""
    return f"({a} % {b})" if interpreting() else f"{LD}.fmod({a}, {b})"


def _div_rn(a: str, b: str) -> str:
    """a / b correctly rounded, as ATen divides: Triton's ``/`` on float32 is the GPU's
    approximate division (up to 2 ulp off, and it flushes subnormal operands and results to
    zero), which a floor or a truncation turns into a whole unit (5 // 0.001 gave 4999 where
    eager gives 5000; ``floor(a / b)`` in a user's program the same) and a tiny divisor into an
    infinity. Every float division takes it: kernels are memory-bound, the extra instructions
    hide behind the loads. The interpreter's ``/`` is numpy's."""
    return f"({a} / {b})" if interpreting() else f"_div_rn({a}, {b})"


def _floordiv(args, dtypes):
    a, b = args
    if _is_int(dtypes[0]):
        q = f"({a} // {b})"
        return f"tl.where((({a} % {b}) != 0) & (({a} < 0) != ({b} < 0)), {q} - 1, {q})"
    # ATen's floor division of floats, step by step (floor(a / b) differs: inf // 2 is NaN
    # there, the quotient is rounded from (a - fmod(a, b)) / b, a zero keeps a / b's sign)
    mod = _float_fmod(a, b)
    div = _div_rn(f"({a} - {mod})", b)
    div = f"tl.where(({mod} != 0) & (({b} < 0) != ({mod} < 0)), {div} - 1.0, {div})"
    fl = f"tl.floor({div})"
    fl = f"tl.where(({div}) - {fl} > 0.5, {fl} + 1.0, {fl})"
    q = _div_rn(a, b)
    return f"tl.where({b} == 0, {q}, tl.where(({div}) != 0, {fl}, {q} * 0.0))"


def _remainder(args, dtypes):
    a, b = args
    if _is_int(dtypes[0]):
        r = f"({a} % {b})"
        return f"tl.where(({r} != 0) & (({r} < 0) != ({b} < 0)), {r} + {b}, {r})"
    # ATen's: fmod, moved into b's sign (a - floor(a / b) * b loses a's low bits and is NaN
    # for a finite a and an infinite b)
    mod = _float_fmod(a, b)
    return f"tl.where(({mod} != 0) & (({mod} < 0) != ({b} < 0)), {mod} + {b}, {mod})"


def _fmod(args, dtypes):
    a, b = args
    if _is_int(dtypes[0]):
        return f"({a} % {b})"
    return _float_fmod(a, b)


def _truncdiv(args, dtypes):
    a, b = args
    if _is_int(dtypes[0]):
        return f"({a} // {b})"  # Triton's integer division truncates, like C
    return f"_trunc({_div_rn(a, b)})"


def _abs(args, dtypes):
    if dtypes[0] == torch.bool:
        return args[0]
    return f"tl.abs({args[0]})"


def _sign(args, dtypes):
    x = args[0]
    if dtypes[0] == torch.bool:
        return x
    return f"(({x} > 0).to({x}.dtype) - ({x} < 0).to({x}.dtype))"


def _add(args, dtypes):
    if dtypes[0] == torch.bool:
        return f"({args[0]} | {args[1]})"   # True + True is True; 1-bit addition would wrap
    return f"({args[0]} + {args[1]})"


def _signbit(args, dtypes):
    x = args[0]
    if dtypes[0] == torch.bool:
        return f"({x} != {x})"   # never negative (all False)
    if not dtypes[0].is_floating_point:
        return f"({x} < 0)"      # libdevice's signbit takes floats only
    return _signbit_float(args, dtypes)


_signbit_float = _ld("signbit", lambda x: f"(({x} < 0) | ((1.0 / {x}) < 0))")


def _tie(kind, a, b):
    """Of two equal floats, what max/min returns: eager on the CPU returns the first
    (``std::max``: ``relu(-0.0)`` is -0.0); ATen's CUDA kernels call ``fmaxf``/``fminf``, for
    which -0.0 < +0.0 (``relu(-0.0)`` is +0.0 there). Only zeros tell them apart: the sum of two
    zeros is +0.0 unless both are -0.0, and -((-a) + (-b)) is -0.0 unless both are +0.0."""
    if interpreting():
        return a
    if kind == "max":
        return f"tl.where({a} == 0, {a} + {b}, {a})"
    return f"tl.where({a} == 0, (({a} * -1.0) + ({b} * -1.0)) * -1.0, {a})"


def _pick(kind, a, b):
    more = ">" if kind == "max" else "<"
    return f"tl.where({b} {more} {a}, {b}, tl.where({a} {more} {b}, {a}, {_tie(kind, a, b)}))"


def _minmax(kind):
    def emit(args, dtypes):
        a, b = args
        if dtypes[0].is_floating_point:
            # torch propagates NaN from either side; equal values as eager's device does (_tie)
            return f"tl.where(({a} != {a}) | ({b} != {b}), {a} + {b}, {_pick(kind, a, b)})"
        return f"{'tl.minimum' if kind == 'min' else 'tl.maximum'}({a}, {b})"
    return emit


def _fminmax(kind):
    def emit(args, dtypes):
        a, b = args
        if not dtypes[0].is_floating_point:
            return f"{'tl.minimum' if kind == 'min' else 'tl.maximum'}({a}, {b})"
        # NaN only where both are; equal values as eager's device does (_tie)
        return f"tl.where({a} != {a}, {b}, tl.where({b} != {b}, {a}, {_pick(kind, a, b)}))"
    return emit


SCALAR_OPS = {
    # arithmetic
    "add": _add,
    "sub": _fmt("({0} - {1})"),
    "mul": _fmt("({0} * {1})"),
    # correctly rounded, as ATen's CUDA kernels divide (see _div_rn)
    "truediv": lambda args, dtypes: _div_rn(*args),
    "floordiv": _floordiv,
    "truncdiv": _truncdiv,
    "remainder": _remainder,
    "fmod": _fmod,
    # Triton's unary minus is 0 - x: -(0.0) would be +0.0; a product keeps the sign
    "neg": lambda a, d: f"({a[0]} * -1.0)" if d[0].is_floating_point else f"(-{a[0]})",
    "abs": _abs,
    "sign": _sign,
    "reciprocal": lambda args, dtypes: _div_rn("1.0", args[0]),
    "square": _fmt("({0} * {0})"),
    "maximum": _minmax("max"),
    "minimum": _minmax("min"),
    "fmax": _fminmax("max"),
    "fmin": _fminmax("min"),
    "fma": _fmt("tl.fma({0}, {1}, {2})"),
    # exponentials and logs
    "exp": _fmt("tl.exp({0})"),
    "exp2": _fmt("tl.exp2({0})"),
    "expm1": _ld("expm1", lambda x: f"_i_expm1({x})"),
    "log": _fmt("tl.log({0})"),
    "log2": _fmt("tl.log2({0})"),
    "log10": _ld("log10", lambda x: f"(tl.log({x}) * 0.4342944819032518)"),
    "log1p": _ld("log1p", lambda x: f"_i_log1p({x})"),
    "sqrt": _fmt("tl.sqrt({0})"),
    "rsqrt": _fmt("tl.rsqrt({0})"),
    "pow": _pow_op,
    # trigonometric and hyperbolic
    "sin": _fmt("tl.sin({0})"),
    "cos": _fmt("tl.cos({0})"),
    "tan": _ld("tan", lambda x: f"(tl.sin({x}) / tl.cos({x}))"),
    "asin": _sf("_sf_asin", "asin"),
    "acos": _sf("_sf_acos", "acos"),
    "atan": _sf("_sf_atan", "atan"),
    "atan2": _sf("_sf_atan2", "atan2"),
    "sinh": _ld("sinh", lambda x: f"_i_sinh({x})"),
    "cosh": _ld("cosh", lambda x: f"((tl.exp({x}) + tl.exp(-{x})) * 0.5)"),
    "tanh": _ld("tanh", lambda x: f"_i_tanh({x})"),
    "asinh": _ld("asinh", lambda x: f"_i_asinh({x})"),
    "acosh": _ld("acosh", lambda x: f"tl.log({x} + tl.sqrt({x} * {x} - 1.0))"),
    "atanh": _ld("atanh", lambda x: f"_i_atanh({x})"),
    "sigmoid": _fmt("tl.sigmoid({0})"),
    # special functions
    "erf": _fmt("tl.erf({0})"),
    "erfc": _ld("erfc", lambda x: f"(1.0 - tl.erf({x}))"),
    "erfinv": _sf("_sf_erfinv", "erfinv"),
    "lgamma": _sf("_sf_lgamma", "lgamma"),
    "digamma": _sf("_sf_digamma"),       # libdevice has none
    "trigamma": _sf("_sf_trigamma"),
    "zeta": _sf("_sf_zeta"),
    "i0": _sf("_sf_i0"),
    "i0e": _sf("_sf_i0e"),
    "i1": _sf("_sf_i1"),
    "i1e": _sf("_sf_i1e"),
    "k0": _sf("_sf_k0"),
    "k0e": _sf("_sf_k0e"),
    "k1": _sf("_sf_k1"),
    "k1e": _sf("_sf_k1e"),
    "spherical_j0": _sf("_sf_spherical_j0"),
    "erfcx": _sf("_sf_erfcx"),
    "airy_ai": _sf("_sf_airy_ai"),
    "igamma": _sf("_sf_igamma"),
    "igammac": _sf("_sf_igammac"),
    "log_ndtr": _sf("_sf_log_ndtr"),
    "ndtri": _sf("_sf_ndtri"),
    "chebyshev_t": _sf("_sf_cheb_t"),
    "chebyshev_u": _sf("_sf_cheb_u"),
    "chebyshev_v": _sf("_sf_cheb_v"),
    "chebyshev_w": _sf("_sf_cheb_w"),
    "shifted_chebyshev_t": _sf("_sf_shifted_cheb_t"),
    "shifted_chebyshev_u": _sf("_sf_shifted_cheb_u"),
    "shifted_chebyshev_v": _sf("_sf_shifted_cheb_v"),
    "shifted_chebyshev_w": _sf("_sf_shifted_cheb_w"),
    "laguerre_l": _sf("_sf_laguerre"),
    "legendre_p": _sf("_sf_legendre"),
    # ATen's order limit for Hermite: 128 in float32, 512 in float64, 1024 otherwise
    "hermite_h_f32": _sf_limit("_sf_hermite_h", 128),
    "hermite_h_f64": _sf_limit("_sf_hermite_h", 512),
    "hermite_h_half": _sf_limit("_sf_hermite_h", 1024),
    "hermite_he_f32": _sf_limit("_sf_hermite_he", 128),
    "hermite_he_f64": _sf_limit("_sf_hermite_he", 512),
    "hermite_he_half": _sf_limit("_sf_hermite_he", 1024),
    # frexp's two results (special_functions.py; float16/bfloat16 arrive as float32, exactly)
    "frexp_mantissa": lambda a, d: (f"_sf_frexp_f64({a[0]})[0]" if d[0] == torch.float64
                                    else f"_sf_frexp_f32({a[0]})[0]"),
    "frexp_exponent": lambda a, d: (f"_sf_frexp_f64({a[0]})[1]" if d[0] == torch.float64
                                    else f"_sf_frexp_f32({a[0]})[1]"),
    "bessel_j0": _sf("_sf_j0", "j0", nan_at_inf=True),
    "bessel_j1": _sf("_sf_j1", "j1", nan_at_inf=True),
    "bessel_y0": _sf("_sf_y0", "y0", nan_at_inf=True),
    "bessel_y1": _sf("_sf_y1", "y1", nan_at_inf=True),
    # C's hypot: an infinite side gives inf even against NaN (the formula would give NaN)
    "hypot": _ld("hypot", lambda x, y: f"tl.where((tl.abs({x}) == float('inf')) | "
                 f"(tl.abs({y}) == float('inf')), float('inf'), tl.sqrt({x} * {x} + {y} * {y}))"),
    # (a product with -1: Triton's -a is 0 - a, +0.0 for a zero)
    "copysign": _ld("copysign", lambda x, y: f"tl.where(({y} < 0) | ((1.0 / {y}) < 0), tl.abs({x}) * -1.0, tl.abs({x}))"),
    "nextafter": _nextafter,
    # rounding
    "floor": _float_only(_fmt("tl.floor({0})")),
    "ceil": _float_only(_fmt("tl.ceil({0})")),
    "trunc": _float_only(_ld("trunc", lambda x: f"_trunc({x})")),
    "round": _float_only(_ld("nearbyint", lambda x: f"_round_half_even({x})")),
    "frac": _fmt("({0} - _trunc({0}))"),
    # comparisons and logic
    "eq": _fmt("({0} == {1})"),
    "ne": _fmt("({0} != {1})"),
    "lt": _fmt("({0} < {1})"),
    "le": _fmt("({0} <= {1})"),
    "gt": _fmt("({0} > {1})"),
    "ge": _fmt("({0} >= {1})"),
    "logical_and": _fmt("(({0} != 0) & ({1} != 0))"),
    "logical_or": _fmt("(({0} != 0) | ({1} != 0))"),
    "logical_xor": _fmt("(({0} != 0) ^ ({1} != 0))"),
    "logical_not": _fmt("({0} == 0)"),
    "bitwise_and": _fmt("({0} & {1})"),
    "bitwise_or": _fmt("({0} | {1})"),
    "bitwise_xor": _fmt("({0} ^ {1})"),
    "bitwise_not": lambda a, d: f"(~{a[0]})" if d[0] != torch.bool else f"({a[0]} == 0)",
    "lshift": _fmt("({0} << {1})"),
    "rshift": _fmt("({0} >> {1})"),
    "isnan": _fmt("({0} != {0})"),
    "isinf": _fmt("(tl.abs({0}) == float('inf'))"),
    "isfinite": _fmt("(tl.abs({0}) < float('inf'))"),
    "signbit": _signbit,
    "where": _fmt("tl.where({0}, {1}, {2})"),
}

# Helpers the interpreter formulas use; emitted into every kernel module.
PRELUDE = '''
@triton.jit
def _div_rn(a, b):
    # correctly rounded in float32 (Triton's / is the approximate division there); float64's
    # / is already IEEE division. (q's dtype is the division's: float16 operands divide in
    # float32; the unused approximate quotient is dead code to the compiler.) The operands are
    # widened to q's shape and type by subtracting +0.0, which keeps every value: adding it
    # would turn -0.0 into +0.0, and x / -0.0 into the other infinity
    q = a / b
    if q.dtype == tl.float32:
        q = tl.math.div_rn(a - tl.zeros_like(q), b - tl.zeros_like(q))
    return q


@triton.jit
def _trunc(x):
    return tl.where(x >= 0, tl.floor(x), tl.ceil(x))


@triton.jit
def _round_half_even(x):
    # integers (every float from 2**23 up in float32: x + 0.5 would round there), infinities
    # and zeros are their own rounding; a result of 0 keeps x's sign (round(-0.3) is -0.0)
    r = tl.floor(x + 0.5)
    tie = (r - x) == 0.5
    r = tl.where(tie & ((r % 2) != 0), r - 1.0, r)
    r = tl.where(r == 0, x * 0.0, r)
    return tl.where(tl.floor(x) == x, x, r)


@triton.jit
def _asinh(x):
    ax = tl.abs(x)
    r = tl.log(ax + tl.sqrt(ax * ax + 1.0))
    return tl.where(x < 0, -r, r)


# The interpreter's odd functions near 0 (the GPU calls libdevice): in float64, by the series
# below |x| < 1e-5, where exp(x) - 1 and its kind cancel to 0 (eager's expm1(1e-30) is 1e-30),
# and f(-0.0) is -0.0 as in ATen
@triton.jit
def _i_expm1(x):
    w = x.to(tl.float64)
    return tl.where(tl.abs(w) < 1e-5, w * (1.0 + 0.5 * w), tl.exp(w) - 1.0).to(x.dtype)


@triton.jit
def _i_log1p(x):
    w = x.to(tl.float64)
    return tl.where(tl.abs(w) < 1e-5, w * (1.0 - 0.5 * w), tl.log(1.0 + w)).to(x.dtype)


@triton.jit
def _i_sinh(x):
    w = x.to(tl.float64)
    big = (tl.exp(w) - tl.exp(-w)) * 0.5
    return tl.where(tl.abs(w) < 1e-5, w * (1.0 + w * w / 6.0), big).to(x.dtype)


@triton.jit
def _i_tanh(x):
    w = x.to(tl.float64)
    big = 2.0 * tl.sigmoid(2.0 * w) - 1.0
    return tl.where(tl.abs(w) < 1e-5, w * (1.0 - w * w / 3.0), big).to(x.dtype)


@triton.jit
def _i_asinh(x):
    w = x.to(tl.float64)
    return tl.where(tl.abs(w) < 1e-5, w * (1.0 - w * w / 6.0), _asinh(w)).to(x.dtype)


@triton.jit
def _i_atanh(x):
    w = x.to(tl.float64)
    big = 0.5 * tl.log((1.0 + w) / (1.0 - w))
    return tl.where(tl.abs(w) < 1e-5, w * (1.0 + w * w / 3.0), big).to(x.dtype)


@triton.jit
def _round_to_bf16(x):
    # float32 -> the nearest bfloat16 (ties to even), still as float32: Triton's interpreter
    # truncates this conversion; NaN stays NaN
    b = x.to(tl.uint32, bitcast=True)
    r = (b + 0x7FFF + ((b >> 16) & 1)) & 0xFFFF0000
    return tl.where(x != x, x, r.to(tl.float32, bitcast=True))


@triton.jit
def _ipow(x, y):
    # integer power by squaring (products wrap like torch's); a negative exponent gives 1 for
    # base 1, -1 or 1 for base -1 (odd or even exponent) and 0 for every other base
    r = x * 0 + y * 0 + 1
    b = x + y * 0
    e = tl.where(y < 0, 0, y)
    for _ in tl.static_range(63):
        r = tl.where((e & 1) != 0, r * b, r)
        b = b * b
        e = e >> 1
    neg = tl.where(x == 1, 1, tl.where(x == -1, tl.where((y & 1) != 0, -1, 1), 0))
    return tl.where(y < 0, neg, r)


@triton.jit
def _pow(x, y):
    # real power as C's pow, in float64 (one rounding, at the end): negative bases only for
    # integral exponents (or -inf); x ** +-inf by |x| against 1 ((-1) ** inf is 1); 1 ** y and
    # x ** 0 are 1 even for NaN; a zero's or an infinity's sign kept for odd exponents (a
    # product with -1: Triton's -r is 0 - r, +0.0 for r = 0.0)
    xd = x.to(tl.float64)
    yd = y.to(tl.float64)
    ax = tl.abs(xd)
    r = tl.exp(yd * tl.log(ax))
    yi = tl.floor(yd)
    odd = (yi == yd) & ((yi - 2.0 * tl.floor(yi * 0.5)) != 0)
    negative = (xd < 0) | ((xd == 0) & (1.0 / xd < 0))
    r = tl.where(negative & odd, r * -1.0, r)
    r = tl.where((xd < 0) & (ax != float('inf')) & (yi != yd), float('nan'), r)
    inf_y = tl.abs(yd) == float('inf')
    r = tl.where(inf_y & (ax == 1), 1.0, r)
    r = tl.where(inf_y & (ax < 1), tl.where(yd > 0, 0.0, float('inf')), r)
    r = tl.where(inf_y & (ax > 1), tl.where(yd > 0, float('inf'), 0.0), r)
    return tl.where((yd == 0) | (xd == 1), 1.0, r).to(x.dtype)
'''


def emit(name: str, args: list[str], dtypes: list[torch.dtype]) -> str:
    return SCALAR_OPS[name](args, dtypes)


# ops with no formula for the interpreter (codegen/target.py): none at present
LIBDEVICE_ONLY = frozenset()
