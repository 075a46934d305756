"""Elementwise ops: math, comparisons, logic, bitwise, casts, where/clamp.

Each op becomes a ``Virtual``: nothing is computed until a consumer or a realization reads it.
Type promotion follows torch (``elementwise_dtypes``): inputs are converted to the computation
dtype (float32 for float16/bfloat16, as eager's opmath does) and the result to the output dtype.
"""
from __future__ import annotations

import math

import torch
from torch._prims_common import ELEMENTWISE_TYPE_PROMOTION_KIND as K
from torch._prims_common import elementwise_dtypes

from ..ir import expr as E
from .registry import Call, Decline, lowering
from ..ir.values import TensorValue, Virtual, loader_of

aten = torch.ops.aten
prims = torch.ops.prims


def _meta_args(call: Call):
    out = []
    for a in call.node.args:
        v = a.meta.get("val") if hasattr(a, "meta") else a
        if isinstance(v, torch.SymInt):
            v = 1
        elif isinstance(v, torch.SymFloat):
            v = 1.0
        elif isinstance(v, torch.SymBool):
            v = True
        if isinstance(v, (torch.Tensor, int, float, bool, complex)):
            out.append(v)
    return out


def compute_dtype(call: Call, kind) -> torch.dtype:
    try:
        comp, _ = elementwise_dtypes(*_meta_args(call), type_promotion_kind=kind)
    except Exception:
        comp = call.dtype
    if comp in (torch.float16, torch.bfloat16):
        comp = torch.float32
    return comp


def pointwise(call: Call, name: str, inputs, kind=K.DEFAULT, result_is_bool=False) -> Virtual:
    if any(isinstance(x, TensorValue) and x.dtype.is_complex for x in inputs) or call.dtype.is_complex:
        raise Decline("complex dtypes are not lowered")
    if not call.graph.target.can_emit(name):
        raise Decline(f"scalar op {name} has no implementation in {call.graph.target.name}")
    if name == "nextafter" and call.dtype in (torch.float16, torch.bfloat16):
        # computed in float32 it would step by a float32 ulp, which rounds back to the input
        raise Decline("nextafter of float16/bfloat16 (steps in the half-precision bit pattern)")
    comp = compute_dtype(call, kind)
    size = call.size
    out_dtype = call.dtype
    common = _common_dtype(call) if name in COMPARISONS else None
    if common in (torch.float16, torch.bfloat16):
        loaders = [_in_common_dtype(x, size, comp, common) for x in inputs]
    else:
        loaders = [_scalar_loader(x, size, comp, out_dtype) if name in SCALAR_IN_TENSOR_DTYPE
                   else loader_of(x, size, comp) for x in inputs]
    op_dtype = torch.bool if result_is_bool else comp

    def fn(idx):
        return E.cast(E.call(name, *[ld(idx) for ld in loaders], dtype=op_dtype), out_dtype)

    return Virtual(size, out_dtype, call.device, fn, stride=call.stride)


# ops whose ATen kernels read a Python scalar operand in the tensor's dtype: with a float16 or
# bfloat16 tensor the scalar is rounded to it first (fmod(x, 1e-3) divides by 0.000999...).
# add, sub, mul and true division keep it in float32 (opmath), as the other ops' loaders do
# (comparisons: COMPARISONS below)
SCALAR_IN_TENSOR_DTYPE = {"fmod", "remainder", "pow", "xlogy", "atan2",
                          "hypot", "copysign", "nextafter"}


# comparisons read every operand in the operands' common dtype (ATen's comparison kernels take
# it, on both devices): a float16 tensor == 1e-3 compares with float16(1e-3), not with 1e-3 in
# float32 (which no float16 value equals), and a float32 0-d tensor beside it is rounded too
COMPARISONS = {"eq", "ne", "lt", "le", "gt", "ge"}


def _common_dtype(call: Call):
    try:
        return elementwise_dtypes(*_meta_args(call), type_promotion_kind=K.DEFAULT)[1]
    except Exception:
        return None


def _in_common_dtype(x, size, comp, common):
    if isinstance(x, (int, float)) and not isinstance(x, bool):
        c = E.cast(E.const(x, common), comp)
        return lambda idx: c
    if isinstance(x, TensorValue) and x.dtype != common:
        ld = loader_of(x, size, common)
        return lambda idx: E.cast(ld(idx), comp)
    return loader_of(x, size, comp)


def _scalar_loader(x, size, comp, out_dtype):
    if isinstance(x, (int, float)) and not isinstance(x, bool) and \
            out_dtype in (torch.float16, torch.bfloat16):
        c = E.cast(E.const(x, out_dtype), comp)
        return lambda idx: c
    return loader_of(x, size, comp)


def _register(ops, name, kind, result_is_bool=False):
    @lowering(*ops)
    def lower(call: Call, *args, **kwargs):
        tensors = [a for a in args if isinstance(a, TensorValue) or isinstance(a, (int, float, bool))
                   or hasattr(a, "free_symbols")]
        return pointwise(call, name, tensors, kind, result_is_bool)
    return lower


_UNARY_INT_TO_FLOAT = ["exp", "exp2", "expm1", "log", "log2", "log10", "log1p", "sqrt", "rsqrt",
                       "sin", "cos", "tan", "asin", "acos", "atan", "sinh", "cosh", "tanh",
                       "asinh", "acosh", "atanh", "sigmoid", "erf", "erfc", "erfinv", "lgamma",
                       "digamma", "reciprocal"]
for _n in _UNARY_INT_TO_FLOAT:
    _register([getattr(aten, _n).default], _n, K.INT_TO_FLOAT)

for _n in ["floor", "ceil", "trunc", "frac", "neg", "sign", "bitwise_not"]:
    _register([getattr(aten, _n).default], _n, K.DEFAULT)
_register([aten.round.default], "round", K.DEFAULT)
_register([aten.abs.default], "abs", K.COMPLEX_TO_FLOAT)
_register([aten.sgn.default], "sign", K.DEFAULT)
_register([aten.square.default], "square", K.BOOL_TO_LONG)

for _n, _s in [("mul", "mul"), ("maximum", "maximum"), ("minimum", "minimum"), ("fmax", "fmax"),
               ("fmin", "fmin"), ("remainder", "remainder"), ("fmod", "fmod"),
               ("bitwise_and", "bitwise_and"), ("bitwise_or", "bitwise_or"),
               ("bitwise_xor", "bitwise_xor"), ("bitwise_left_shift", "lshift"),
               ("bitwise_right_shift", "rshift")]:
    _register([getattr(aten, _n)], _s, K.DEFAULT)
for _n in ["atan2", "hypot", "copysign", "nextafter"]:   # every overload (copysign.Tensor, ...)
    _register([getattr(aten, _n)], _n, K.INT_TO_FLOAT)
_register([aten.pow.Tensor_Tensor, aten.pow.Scalar], "pow", K.BOOL_TO_LONG)

for _n in ["eq", "ne", "lt", "le", "gt", "ge"]:
    _register([getattr(aten, _n).Tensor, getattr(aten, _n).Scalar], _n, K.ALWAYS_BOOL, True)
for _n in ["logical_and", "logical_or", "logical_xor", "logical_not", "isnan", "isinf",
           "isfinite", "signbit"]:
    _register([getattr(aten, _n).default], _n, K.ALWAYS_BOOL, True)


@lowering(aten.round.decimals)
def _round_decimals(call: Call, x, *, decimals=0):
    """As ATen: nearbyint(x * 10^d) / 10^d, or for d < 0 nearbyint(x / 10^-d) * 10^-d."""
    if not call.dtype.is_floating_point:
        raise Decline("round with decimals of an integer tensor")
    comp = compute_dtype(call, K.DEFAULT)
    load = loader_of(x, call.size, comp)
    scale = E.const(10.0 ** abs(decimals), comp)
    into, back = ("truediv", "mul") if decimals < 0 else ("mul", "truediv")

    def fn(idx):
        r = E.call("round", E.call(into, load(idx), scale, dtype=comp), dtype=comp)
        return E.cast(E.call(back, r, scale, dtype=comp), call.dtype)
    return Virtual(call.size, call.dtype, call.device, fn, stride=call.stride)


@lowering(aten.angle.default)
def _angle(call: Call, x):
    """The argument of a real number: pi below zero, 0 otherwise, NaN kept."""
    if isinstance(x, TensorValue) and x.dtype.is_complex:
        raise Decline("complex dtypes are not lowered")
    comp = compute_dtype(call, K.INT_TO_FLOAT)
    load = loader_of(x, call.size, comp)

    def fn(idx):
        v = load(idx)
        below = E.call("lt", v, E.const(0.0, comp), dtype=torch.bool)
        a = E.call("where", below, E.const(3.141592653589793, comp), E.const(0.0, comp),
                   dtype=comp)
        return E.cast(E.call("where", E.call("isnan", v, dtype=torch.bool), v, a, dtype=comp),
                      call.dtype)
    return Virtual(call.size, call.dtype, call.device, fn, stride=call.stride)


@lowering(aten.add.Tensor, aten.add.Scalar, aten.sub.Tensor, aten.sub.Scalar,
          aten.rsub.Tensor, aten.rsub.Scalar)
def _add_sub(call: Call, a, b, alpha=1):
    name = call.node.target.overloadpacket.__name__
    if name == "rsub":
        a, b, name = b, a, "sub"
    if alpha != 1:
        comp = compute_dtype(call, K.DEFAULT)
        scale = loader_of(alpha, call.size, comp)
        inner = loader_of(b, call.size, comp)
        b = Virtual(call.size, comp, call.device,
                    lambda idx: E.call("mul", inner(idx), scale(idx), dtype=comp))
    return pointwise(call, name, [a, b])


@lowering(aten.div.Tensor, aten.div.Scalar, aten.div.Tensor_mode, aten.div.Scalar_mode)
def _div(call: Call, a, b, rounding_mode=None):
    if rounding_mode is None:
        if _scalar_divisor_on_gpu(call, b):
            # ATen's CUDA kernel multiplies by the reciprocal of a Python number, taken in
            # double and rounded to the compute type: -0.25 / 1e-3 is -250 there, where the
            # correctly rounded float32 quotient is -249.99998 (a later truncation to int then
            # differs by one; fuzz seed 423751)
            inv = 1.0 / b if b != 0 else math.copysign(math.inf, b)
            return pointwise(call, "mul", [a, inv], K.INT_TO_FLOAT)
        return pointwise(call, "truediv", [a, b], K.INT_TO_FLOAT)
    name = {"floor": "floordiv", "trunc": "truncdiv"}[rounding_mode]
    if name == "truncdiv" and call.dtype in (torch.float16, torch.bfloat16) and \
            isinstance(b, TensorValue):
        # ATen truncates the quotient rounded to the half type (3 / 0.3008 in bfloat16 is
        # 9.97, rounded 10, truncated 10); by a Python scalar, and in floor division, it
        # runs in float32 throughout
        size = call.size
        la, lb = loader_of(a, size, torch.float32), loader_of(b, size, torch.float32)

        def fn(idx):
            q = E.cast(E.call("truediv", la(idx), lb(idx), dtype=torch.float32), call.dtype)
            return E.cast(E.call("trunc", E.cast(q, torch.float32), dtype=torch.float32),
                          call.dtype)
        return Virtual(size, call.dtype, call.device, fn, stride=call.stride)
    return pointwise(call, name, [a, b], K.DEFAULT)


def _scalar_divisor_on_gpu(call: Call, b) -> bool:
    return (call.device.type == "cuda" and isinstance(b, (int, float))
            and not isinstance(b, bool) and call.dtype.is_floating_point)


@lowering(aten.floor_divide.default, aten.floor_divide.Scalar)
def _floor_divide(call: Call, a, b):
    return pointwise(call, "floordiv", [a, b], K.DEFAULT)


@lowering(aten.pow.Tensor_Scalar)
def _pow_scalar(call: Call, a, exponent):
    comp = compute_dtype(call, K.BOOL_TO_LONG)
    x = loader_of(a, call.size, comp)
    small = {2: ["mul"], 3: ["mul", "mul"]}
    if isinstance(exponent, (int, float)) and exponent in (0.5, -0.5, 1, -1, 2, 3, -2) and \
            (comp.is_floating_point or exponent in (1, 2, 3)):
        def fn(idx):
            v = x(idx)
            if exponent == 0.5:
                r = E.call("sqrt", v, dtype=comp)
            elif exponent == -0.5:
                r = E.call("rsqrt", v, dtype=comp)
            elif exponent == 1:
                r = v
            elif exponent == -1:
                r = E.call("reciprocal", v, dtype=comp)
            elif exponent == -2:
                r = E.call("reciprocal", E.call("mul", v, v, dtype=comp), dtype=comp)
            else:
                r = v
                for _ in small[int(exponent)]:
                    r = E.call("mul", r, v, dtype=comp)
            return E.cast(r, call.dtype)
        return Virtual(call.size, call.dtype, call.device, fn, stride=call.stride)
    return pointwise(call, "pow", [a, exponent], K.BOOL_TO_LONG)


@lowering(aten.where.self, aten.where.ScalarSelf, aten.where.ScalarOther, aten.where.Scalar)
def _where(call: Call, cond, a, b):
    comp = call.dtype
    c = loader_of(cond, call.size, torch.bool)
    la, lb = loader_of(a, call.size, comp), loader_of(b, call.size, comp)
    return Virtual(call.size, comp, call.device,
                   lambda idx: E.call("where", c(idx), la(idx), lb(idx), dtype=comp),
                   stride=call.stride)


@lowering(aten.masked_fill.Scalar, aten.masked_fill.Tensor)
def _masked_fill(call: Call, x, mask, value):
    comp = call.dtype
    c = loader_of(mask, call.size, torch.bool)
    lx, lv = loader_of(x, call.size, comp), loader_of(value, call.size, comp)
    return Virtual(call.size, comp, call.device,
                   lambda idx: E.call("where", c(idx), lv(idx), lx(idx), dtype=comp),
                   stride=call.stride)


@lowering(aten.clamp.default, aten.clamp.Tensor, aten.clamp_min.default, aten.clamp_max.default,
          aten.clamp_min.Tensor, aten.clamp_max.Tensor)
def _clamp(call: Call, x, lo=None, hi=None):
    name = call.node.target.overloadpacket.__name__
    if name == "clamp_max":
        lo, hi = None, lo
    comp = compute_dtype(call, K.DEFAULT)
    lx = loader_of(x, call.size, comp)
    llo = loader_of(lo, call.size, comp) if lo is not None else None
    lhi = loader_of(hi, call.size, comp) if hi is not None else None

    def fn(idx):
        v = lx(idx)
        if llo is not None:
            v = E.call("maximum", v, llo(idx), dtype=comp)
        if lhi is not None:
            v = E.call("minimum", v, lhi(idx), dtype=comp)
        return E.cast(v, call.dtype)
    return Virtual(call.size, call.dtype, call.device, fn, stride=call.stride)


@lowering(aten.relu.default)
def _relu(call: Call, x):
    return _clamp(call, x, 0)


@lowering(aten._to_copy.default)
def _to_copy(call: Call, x, dtype=None, layout=None, device=None, pin_memory=None,
             non_blocking=False, memory_format=None):
    if device is not None and torch.device(device) != x.device:
        raise Decline("a copy to another device")
    if x.dtype.is_complex or call.dtype.is_complex:
        raise Decline("complex dtypes are not lowered")
    return _cast(call, x, call.dtype)


@lowering(prims.convert_element_type.default)
def _convert(call: Call, x, dtype):
    if x.dtype.is_complex or dtype.is_complex:
        raise Decline("complex dtypes are not lowered")
    return _cast(call, x, dtype)


def _cast(call: Call, x, dtype):
    return Virtual(call.size, dtype, call.device, lambda idx: E.cast(x.load(idx), dtype),
                   stride=call.stride)


@lowering(aten.clone.default, aten.lift_fresh_copy.default, aten.contiguous.default)
def _clone(call: Call, x, memory_format=None):
    return Virtual(call.size, x.dtype, call.device, x.load, stride=call.stride)


# prims that decompositions leave behind
for _n, _s, _k in [("add", "add", K.DEFAULT), ("sub", "sub", K.DEFAULT), ("mul", "mul", K.DEFAULT),
                   ("neg", "neg", K.DEFAULT), ("exp", "exp", K.DEFAULT), ("log", "log", K.DEFAULT),
                   ("sqrt", "sqrt", K.DEFAULT), ("rsqrt", "rsqrt", K.DEFAULT),
                   ("maximum", "maximum", K.DEFAULT), ("minimum", "minimum", K.DEFAULT)]:
    _register([getattr(prims, _n).default], _s, _k)


@lowering(prims.div.default)
def _prims_div(call: Call, a, b):
    # prims.div truncates for integers and is true division for floats
    name = "truediv" if call.dtype.is_floating_point else "truncdiv"
    return pointwise(call, name, [a, b], K.DEFAULT)


@lowering(prims.where.default)
def _prims_where(call: Call, cond, a, b):
    return _where(call, cond, a, b)
