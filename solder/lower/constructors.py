"""Constructors: full/zeros/ones/empty (and *_like), arange/iota, scalar_tensor, random numbers.

Random numbers come from Triton's counter-based Philox generator, keyed by a seed the wrapper draws
from torch's default generator at each call and by the element's index: a given
``torch.manual_seed`` reproduces them run to run; they differ from eager's stream.
"""
from __future__ import annotations

import sympy
import torch

from ..ir import expr as E
from .registry import Call, Decline, lowering
from ..ir.values import Virtual, sym

aten = torch.ops.aten
prims = torch.ops.prims


def _const(call: Call, value, stride=None):
    dtype = call.dtype
    if isinstance(value, sympy.Basic) and not value.is_Number:
        v = E.cast(E.index_value(value, torch.int64), dtype)
    else:
        v = E.const(value, dtype)
    return Virtual(call.size, dtype, call.device, lambda idx: v, stride=stride or call.stride)


@lowering(aten.full.default, aten.full_like.default, aten.new_full.default)
def _full(call: Call, *args, **kwargs):
    target = call.node.target
    value = args[1] if target is not aten.new_full.default else args[2]
    return _const(call, value)


@lowering(aten.zeros.default, aten.zeros_like.default, aten.new_zeros.default,
          aten.empty.memory_format, aten.empty_like.default, aten.new_empty.default,
          aten.empty_strided.default, aten.new_empty_strided.default,
          aten.empty_permuted.default,
          aten._efficientzerotensor.default)   # autograd's zero gradient (sgn, ...)
def _zeros(call: Call, *args, **kwargs):
    # empty's contents are unspecified; zeros are a valid choice and cost nothing extra.
    # empty_strided's strides are the caller's, overlapping ones too
    strided = call.node.target in (aten.empty_strided.default, aten.new_empty_strided.default)
    return _const(call, 0, call.meta_stride if strided else None)


@lowering(aten.ones.default, aten.ones_like.default, aten.new_ones.default)
def _ones(call: Call, *args, **kwargs):
    return _const(call, 1)


@lowering(aten.scalar_tensor.default)
def _scalar_tensor(call: Call, value, **kwargs):
    return _const(call, value)


@lowering(aten.arange.start_step, aten.arange.start, aten.arange.default)
def _arange(call: Call, *args, **kwargs):
    target = call.node.target
    if target is aten.arange.default:
        start, step = 0, 1
    elif target is aten.arange.start:
        start, step = args[0], 1
    else:
        start, step = args[0], args[2] if len(args) > 2 else kwargs.get("step", 1)
    dtype = call.dtype
    if any(isinstance(x, float) for x in (start, step)) or dtype.is_floating_point:
        s = E.const(float(start) if not isinstance(start, sympy.Basic) else 0, torch.float64)
        st = E.const(float(step), torch.float64)

        def fn(idx):
            i = E.cast(E.index_value(idx[0]), torch.float64)
            return E.cast(E.call("add", s, E.call("mul", i, st, dtype=torch.float64),
                                 dtype=torch.float64), dtype)
        if isinstance(start, sympy.Basic) and not start.is_Number:
            raise Decline("floating arange with a symbolic start")
        return Virtual(call.size, dtype, call.device, fn)
    start, step = sym(start), sym(step)
    return Virtual(call.size, dtype, call.device,
                   lambda idx: E.cast(E.index_value(start + step * idx[0]), dtype))


@lowering(prims.iota.default)
def _iota(call: Call, length, *, start, step, dtype, device, requires_grad):
    s, st = sym(start), sym(step)
    return Virtual(call.size, dtype, call.device,
                   lambda idx: E.cast(E.index_value(s + st * idx[0]), dtype))


def _random(call: Call, kind: str, transform=None, out_dtype=None):
    """A fresh draw per element: ``rand`` (uniform on [0, 1)) or ``randn`` (standard normal),
    in float32, mapped by ``transform`` (a float32 value -> a value) and cast to the result's
    dtype."""
    if not call.graph.target.has_random:
        raise Decline(f"{kind}: {call.graph.target.name} draws no random numbers")
    dtype = out_dtype or call.dtype
    if out_dtype is None and dtype not in (torch.float32, torch.float16, torch.bfloat16,
                                           torch.float64):
        raise Decline(f"{kind} of dtype {dtype}")
    g = call.graph
    slot = g.rand_slots
    g.rand_slots += 1
    size = call.size
    strides, acc = [], sympy.Integer(1)
    for n in reversed(size):
        strides.append(acc)
        acc = acc * n
    strides.reverse()

    def fn(idx):
        flat = sum((i * s for i, s in zip(idx, strides)), sympy.Integer(0))
        draw = E.rand(slot, flat, kind)
        return E.cast(transform(draw, idx) if transform else draw, dtype)
    return Virtual(size, dtype, call.device, fn, stride=call.stride)


def _no_generator(kwargs):
    if kwargs.get("generator") is not None:
        raise Decline("an explicit generator")


@lowering(aten.rand.default, aten.rand_like.default)
def _rand(call: Call, *args, **kwargs):
    _no_generator(kwargs)
    return _random(call, "rand")


@lowering(aten.randn.default, aten.randn_like.default)
def _randn(call: Call, *args, **kwargs):
    _no_generator(kwargs)
    return _random(call, "randn")


# --- distributions of in-place random ops (x.uniform_(), x.normal_(), ...) and their kin -------
# Each maps float32 draws as eager's kernels do; the streams differ from eager's, the laws do not.

F32 = torch.float32


def _f(x) -> E.Value:
    return E.const(float(x), F32)


def _op(name, *args) -> E.Value:
    return E.call(name, *args, dtype=F32)


@lowering(aten.uniform.default)
def _uniform(call: Call, self, low=0.0, high=1.0, *, generator=None):
    _no_generator({"generator": generator})
    return _random(call, "rand", lambda u, idx: _op("add", _op("mul", u, _f(high - low)), _f(low)))


def _affine_normal(mean_at, std_at):
    return lambda z, idx: _op("add", _op("mul", z, std_at(idx)), mean_at(idx))


@lowering(aten.normal_functional.default)
def _normal_functional(call: Call, self, mean=0.0, std=1.0, *, generator=None):
    _no_generator({"generator": generator})
    return _random(call, "randn", _affine_normal(lambda idx: _f(mean), lambda idx: _f(std)))


@lowering(aten.normal.Tensor_Tensor, aten.normal.Tensor_float, aten.normal.float_Tensor,
          aten.normal.float_float)
def _normal(call: Call, mean, std, *args, generator=None, **kwargs):
    _no_generator({"generator": generator})
    from ..ir.values import loader_of
    size = call.size
    mean_at, std_at = loader_of(mean, size, F32), loader_of(std, size, F32)
    return _random(call, "randn", _affine_normal(mean_at, std_at))


@lowering(aten.log_normal.default)
def _log_normal(call: Call, self, mean=1.0, std=2.0, *, generator=None):
    _no_generator({"generator": generator})
    normal = _affine_normal(lambda idx: _f(mean), lambda idx: _f(std))
    return _random(call, "randn", lambda z, idx: _op("exp", normal(z, idx)))


@lowering(aten.cauchy.default)
def _cauchy(call: Call, self, median=0.0, sigma=1.0, *, generator=None):
    _no_generator({"generator": generator})
    # median + sigma * tan(pi * (u - 1/2))
    return _random(call, "rand", lambda u, idx: _op("add", _f(median), _op(
        "mul", _f(sigma), _op("tan", _op("mul", _f(3.141592653589793), _op("sub", u, _f(0.5)))))))


@lowering(aten.geometric.default)
def _geometric(call: Call, self, p, *, generator=None):
    _no_generator({"generator": generator})
    if not 0 < p < 1:
        raise Decline(f"geometric with p={p}")
    # the number of Bernoulli(p) trials to the first success: ceil(log(1 - u) / log(1 - p)),
    # with 1 - u in (0, 1]
    import math
    return _random(call, "rand", lambda u, idx: _op("ceil", _op(
        "truediv", _op("log", _op("sub", _f(1.0), u)), _f(math.log1p(-p)))))


@lowering(aten.randint.low, aten.randint.default, aten.randint_like.low_dtype,
          aten.randint_like.default)
def _randint(call: Call, *args, generator=None, **kwargs):
    _no_generator({"generator": generator})
    target = call.node.target
    if target is aten.randint.low:
        low, high = args[0], args[1]
    elif target is aten.randint.default:
        low, high = 0, args[0]
    elif target is aten.randint_like.low_dtype:
        low, high = args[1], args[2]
    else:
        low, high = 0, args[1]
    if not all(isinstance(v, int) for v in (low, high)):
        raise Decline("randint with symbolic bounds")
    span = high - low
    if not 0 < span <= 1 << 24:   # float32 draws give every integer of the range exactly once
        raise Decline(f"randint over a range of {span} values")
    # low + floor(u * span), u in [0, 1); the min keeps a rounded-up product inside the range
    return _random(call, "rand", lambda u, idx: _op("add", _op("minimum", _op(
        "floor", _op("mul", u, _f(span))), _f(span - 1)), _f(low)), out_dtype=call.dtype)
