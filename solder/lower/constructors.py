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
from .tensors import Virtual, sym

aten = torch.ops.aten
prims = torch.ops.prims


def _const(call: Call, value):
    dtype = call.dtype
    if isinstance(value, sympy.Basic) and not value.is_Number:
        v = E.cast(E.index_value(value, torch.int64), dtype)
    else:
        v = E.const(value, dtype)
    return Virtual(call.size, dtype, call.device, lambda idx: v, stride=call.stride)


@lowering(aten.full.default, aten.full_like.default, aten.new_full.default)
def _full(call: Call, *args, **kwargs):
    target = call.node.target
    value = args[1] if target is not aten.new_full.default else args[2]
    return _const(call, value)


@lowering(aten.zeros.default, aten.zeros_like.default, aten.new_zeros.default,
          aten.empty.memory_format, aten.empty_like.default, aten.new_empty.default,
          aten.empty_strided.default, aten.new_empty_strided.default)
def _zeros(call: Call, *args, **kwargs):
    # empty's contents are unspecified; zeros are a valid choice and cost nothing extra
    return _const(call, 0)


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


def _random(call: Call, kind: str):
    if call.dtype not in (torch.float32, torch.float16, torch.bfloat16, torch.float64):
        raise Decline(f"{kind} of dtype {call.dtype}")
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
        return E.cast(E.rand(slot, flat, kind), call.dtype)
    return Virtual(size, call.dtype, call.device, fn, stride=call.stride)


@lowering(aten.rand.default, aten.rand_like.default)
def _rand(call: Call, *args, **kwargs):
    if kwargs.get("generator") is not None:
        raise Decline("an explicit generator")
    return _random(call, "rand")


@lowering(aten.randn.default, aten.randn_like.default)
def _randn(call: Call, *args, **kwargs):
    if kwargs.get("generator") is not None:
        raise Decline("an explicit generator")
    return _random(call, "randn")
