"""Special functions: Bessel, gamma-family, error-function relatives (scalar ops whose Triton
code lives in codegen/special_functions.py, or libdevice on the GPU where it has them)."""
from __future__ import annotations

import math

import torch
from torch._prims_common import ELEMENTWISE_TYPE_PROMOTION_KIND as K

from ..ir import expr as E
from .pointwise import compute_dtype, pointwise
from .registry import Call, Decline, lowering
from ..ir.values import TensorValue, Virtual, loader_of

aten = torch.ops.aten

_UNARY = {
    aten.i0.default: "i0",
    aten.special_i0e.default: "i0e",
    aten.special_i1.default: "i1",
    aten.special_i1e.default: "i1e",
    aten.special_modified_bessel_i0.default: "i0",
    aten.special_modified_bessel_i1.default: "i1",
    aten.special_modified_bessel_k0.default: "k0",
    aten.special_modified_bessel_k1.default: "k1",
    aten.special_scaled_modified_bessel_k0.default: "k0e",
    aten.special_scaled_modified_bessel_k1.default: "k1e",
    aten.special_spherical_bessel_j0.default: "spherical_j0",
    aten.special_erfcx.default: "erfcx",
    aten.special_airy_ai.default: "airy_ai",
    aten.special_log_ndtr.default: "log_ndtr",
    aten.special_ndtri.default: "ndtri",
    aten.special_bessel_j0.default: "bessel_j0",
    aten.special_bessel_j1.default: "bessel_j1",
    aten.special_bessel_y0.default: "bessel_y0",
    aten.special_bessel_y1.default: "bessel_y1",
}


def _unary(name):
    def lower(call: Call, x):
        return pointwise(call, name, [x], K.INT_TO_FLOAT)
    return lower


for _op, _name in _UNARY.items():
    lowering(_op)(_unary(_name))


@lowering(aten.igamma.default)
def _igamma(call: Call, a, x):
    """The regularized lower incomplete gamma function P(a, x)."""
    return pointwise(call, "igamma", [a, x], K.INT_TO_FLOAT)


@lowering(aten.igammac.default)
def _igammac(call: Call, a, x):
    """The regularized upper incomplete gamma function Q(a, x) = 1 - P(a, x)."""
    return pointwise(call, "igammac", [a, x], K.INT_TO_FLOAT)


@lowering(aten.special_zeta)
def _zeta(call: Call, x, q):
    """Hurwitz zeta(x, q), every overload (either side may be a Python number)."""
    return pointwise(call, "zeta", [x, q], K.INT_TO_FLOAT)


@lowering(aten.polygamma.default)
def _polygamma(call: Call, n, x):
    """psi^(n)(x): digamma, trigamma, else (-1)^(n+1) n! zeta(n + 1, x)."""
    if not isinstance(n, int) or n < 0:
        raise Decline(f"polygamma of order {n!r}")
    if n == 0:
        return pointwise(call, "digamma", [x], K.INT_TO_FLOAT)
    if n == 1:
        return pointwise(call, "trigamma", [x], K.INT_TO_FLOAT)
    if isinstance(x, TensorValue) and x.dtype.is_complex:
        raise Decline("complex dtypes are not lowered")
    comp = compute_dtype(call, K.INT_TO_FLOAT)
    load = loader_of(x, call.size, comp)
    scale = (-1.0) ** (n + 1) * math.factorial(n)

    def fn(idx):
        z = E.call("zeta", E.const(float(n + 1), comp), load(idx), dtype=comp)
        return E.cast(E.call("mul", E.const(scale, comp), z, dtype=comp), call.dtype)
    return Virtual(call.size, call.dtype, call.device, fn, stride=call.stride)


_POLYNOMIALS = {
    aten.special_chebyshev_polynomial_t: "chebyshev_t",
    aten.special_chebyshev_polynomial_u: "chebyshev_u",
    aten.special_chebyshev_polynomial_v: "chebyshev_v",
    aten.special_chebyshev_polynomial_w: "chebyshev_w",
    aten.special_shifted_chebyshev_polynomial_t: "shifted_chebyshev_t",
    aten.special_shifted_chebyshev_polynomial_u: "shifted_chebyshev_u",
    aten.special_shifted_chebyshev_polynomial_v: "shifted_chebyshev_v",
    aten.special_shifted_chebyshev_polynomial_w: "shifted_chebyshev_w",
    aten.special_laguerre_polynomial_l: "laguerre_l",
    aten.special_legendre_polynomial_p: "legendre_p",
}


def _polynomial(name):
    def lower(call: Call, x, n):
        """p_n(x) for every overload (x or n may be a Python number)."""
        return pointwise(call, name, [x, n], K.INT_TO_FLOAT)
    return lower


for _op, _name in _POLYNOMIALS.items():
    lowering(_op)(_polynomial(_name))


def _hermite(name):
    def lower(call: Call, x, n):
        """Hermite's NaN above an order limit depends on the result dtype (as ATen's)."""
        suffix = {torch.float32: "f32", torch.float64: "f64"}.get(call.dtype, "half")
        return pointwise(call, f"{name}_{suffix}", [x, n], K.INT_TO_FLOAT)
    return lower


lowering(aten.special_hermite_polynomial_h)(_hermite("hermite_h"))
lowering(aten.special_hermite_polynomial_he)(_hermite("hermite_he"))


@lowering(aten.frexp.Tensor)
def _frexp(call: Call, x):
    """(mantissa, exponent) from the bit pattern; two outputs of one elementwise loop."""
    if not isinstance(x, TensorValue) or not x.dtype.is_floating_point:
        raise Decline("frexp of a non-floating tensor")
    comp = torch.float64 if x.dtype == torch.float64 else torch.float32
    load = loader_of(x, call.size, comp)

    def mantissa(idx):
        return E.cast(E.call("frexp_mantissa", load(idx), dtype=comp), x.dtype)

    def exponent(idx):
        return E.call("frexp_exponent", load(idx), dtype=torch.int32)
    return (Virtual(call.size, x.dtype, call.device, mantissa, stride=call.stride),
            Virtual(call.size, torch.int32, call.device, exponent, stride=call.stride))
