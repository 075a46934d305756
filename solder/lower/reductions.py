"""Reductions over any dims, with and without keepdim.

A reduction becomes a ``ComputedBuffer`` with a ``Reduction`` body that accumulates in float32
for float16/bfloat16 inputs (as eager does); what follows it (mean's division, the cast back to the
output dtype) is a ``Virtual`` on top, which the scheduler fuses into the same kernel.
"""
from __future__ import annotations

import sympy
import torch

from ..ir import expr as E
from ..ir.nodes import ComputedBuffer, Layout, Reduction
from .graph import _dense_or_contiguous
from .registry import Call, Decline, lowering
from .split_reductions import split, split_factor
from ..ir.values import Stored, TensorValue, Virtual, sym_list

aten = torch.ops.aten


def _norm_dims(dims, ndim):
    if dims is None or (isinstance(dims, (list, tuple)) and len(dims) == 0):
        return list(range(ndim))
    if isinstance(dims, int):
        dims = [dims]
    out = sorted({d % ndim if ndim else 0 for d in dims})
    return out


def acc_dtype(rtype: str, src: torch.dtype, out: torch.dtype) -> torch.dtype:
    if rtype in ("argmax", "argmin"):
        return torch.int64
    if rtype in ("any", "all"):
        return torch.bool
    if out in (torch.float16, torch.bfloat16):
        return torch.float32
    return out


# what a reduction over nothing gives (eager's identities)
_EMPTY_REDUCTION = {"sum": 0, "prod": 1, "any": False, "all": True}


def _from_identity(rtype: str, v):
    """One element reduced as eager reduces it, from its identity: a float sum starts at +0.0,
    so the sum of -0.0 is +0.0 (seed 177360: its signbit)."""
    if rtype == "sum" and v.dtype.is_floating_point:
        return E.call("add", E.const(0.0, v.dtype), v, dtype=v.dtype)
    return v


def reduce(call: Call, x: TensorValue, dims, keepdim: bool, rtype: str, out_dtype=None,
           value_dtype=None) -> TensorValue:
    """The reduction of ``x`` over ``dims``; returns it in ``out_dtype`` (default: call's)."""
    if x.dtype.is_complex:
        raise Decline("complex dtypes are not lowered")
    ndim = x.ndim
    out_dtype = out_dtype or call.dtype
    if ndim == 0:  # reducing a scalar over "dim 0" keeps it (an index of 0 for arg-reductions)
        if rtype in ("argmax", "argmin"):
            return Virtual([], out_dtype, call.device, lambda idx: E.const(0, out_dtype))
        vd = value_dtype or out_dtype
        return Virtual([], out_dtype, call.device,
                       lambda idx: E.cast(_from_identity(rtype, E.cast(x.load([]), vd)), out_dtype))
    dims = _norm_dims(dims, ndim)
    acc = acc_dtype(rtype, x.dtype, out_dtype)
    value_dtype = value_dtype or (acc if rtype not in ("argmax", "argmin") else x.dtype)
    if rtype in ("argmax", "argmin") and value_dtype in (torch.float16, torch.bfloat16):
        value_dtype = torch.float32
    red_sizes = [x.size[d] for d in dims]
    kept = [d for d in range(ndim) if d not in dims]
    out_size = [sympy.Integer(1) if d in dims else x.size[d] for d in range(ndim)] if keepdim \
        else [x.size[d] for d in kept]
    if any(n.is_Integer and int(n) == 0 for n in red_sizes):
        if rtype not in _EMPTY_REDUCTION:   # amax, argmax, ... of nothing: eager raises
            raise Decline(f"a {rtype} over an empty dimension (eager raises)")
        value = E.cast(E.const(_EMPTY_REDUCTION[rtype], acc), out_dtype)
        return Virtual(out_size, out_dtype, call.device, lambda idx: value)

    def fn(idx, ridx):
        full, r = [], 0
        k = 0
        for d in range(ndim):
            if d in dims:
                full.append(ridx[r])
                r += 1
            else:
                full.append(idx[d] if keepdim else idx[k])
                k += 1
        return E.cast(x.load(full), value_dtype)

    if all(n.is_Integer and int(n) == 1 for n in red_sizes):
        # one element per row: no reduction kernel (whose tiling would have a row length of 1),
        # just that element (or its index, 0) in the accumulator's dtype, then the output's
        zeros = [sympy.Integer(0)] * len(red_sizes)
        if rtype in ("argmax", "argmin"):
            return Virtual(out_size, out_dtype, call.device, lambda idx: E.const(0, out_dtype))
        return Virtual(out_size, out_dtype, call.device,
                       lambda idx: E.cast(_from_identity(rtype, E.cast(fn(idx, zeros), acc)),
                                          out_dtype))
    meta = call.out if isinstance(call.out, torch.Tensor) else call.out[0]
    meta_size, meta_stride = sym_list(meta.shape), sym_list(meta.stride())
    stride = _dense_or_contiguous(out_size, meta_stride if meta_size == out_size else None)
    layout = Layout(tuple(out_size), tuple(stride), sympy.Integer(0), acc, call.device)
    g = call.graph
    body = Reduction(out_size, red_sizes, rtype, fn, x.dtype)
    base = x.base if hasattr(x, "base") else x
    origins, source = ((list(dict.fromkeys(g.current_origins + base.origins)),
                        list(dict.fromkeys(g.current_source + base.source)))
                       if isinstance(base, Virtual) else ([], []))
    parts = split_factor(call, x, dims, rtype, out_size, red_sizes)
    if parts:   # partial results over chunks first: enough programs to fill the GPU
        body = split(g, body, parts, acc, call.device, origins, source)
    buf = ComputedBuffer(g.new_name(), layout, body=body)
    g.add_buffer(buf)
    if origins:
        buf.origins, buf.source = origins, source
    result = Stored(buf.name, layout)
    if acc == out_dtype:
        return result
    return Virtual(out_size, out_dtype, call.device,
                   lambda idx: E.cast(result.load(idx), out_dtype), stride=stride,
                   origins=buf.origins)


@lowering(aten.sum.dim_IntList, aten.sum.default)
def _sum(call: Call, x, dims=None, keepdim=False, dtype=None):
    if x.dtype == torch.bool or not x.dtype.is_floating_point:
        return reduce(call, x, dims, keepdim, "sum", value_dtype=call.dtype)
    return reduce(call, x, dims, keepdim, "sum")


@lowering(aten.prod.dim_int, aten.prod.default)
def _prod(call: Call, x, dim=None, keepdim=False, dtype=None):
    return reduce(call, x, dim, keepdim, "prod",
                  value_dtype=None if x.dtype.is_floating_point else call.dtype)


@lowering(aten.mean.dim, aten.mean.default)
def _mean(call: Call, x, dims=None, keepdim=False, dtype=None):
    ndim = x.ndim
    n = sympy.Integer(1)
    for d in (_norm_dims(dims, ndim) if ndim else []):
        n = n * x.size[d]
    out_dtype = call.dtype
    acc = acc_dtype("sum", x.dtype, out_dtype)
    total = reduce(call, x, dims, keepdim, "sum", out_dtype=acc)
    count = E.index_value(n, torch.int64)
    return Virtual(call.size, out_dtype, call.device,
                   lambda idx: E.cast(E.call("truediv", total.load(idx), E.cast(count, acc), dtype=acc),
                                      out_dtype), stride=call.stride)


@lowering(aten.amax.default, aten.amin.default)
def _amax(call: Call, x, dims=(), keepdim=False):
    rtype = "max" if call.node.target is aten.amax.default else "min"
    return reduce(call, x, dims, keepdim, rtype)


@lowering(aten.max.default, aten.min.default)
def _max_all(call: Call, x):
    rtype = "max" if call.node.target is aten.max.default else "min"
    return reduce(call, x, None, False, rtype)


@lowering(aten.argmax.default, aten.argmin.default)
def _argmax(call: Call, x, dim=None, keepdim=False):
    rtype = "argmax" if call.node.target is aten.argmax.default else "argmin"
    if dim is None:
        if keepdim:
            raise Decline("argmax with dim=None and keepdim=True")
        return reduce(call, x, None, False, rtype)
    return reduce(call, x, [dim], keepdim, rtype)


@lowering(aten.max.dim, aten.min.dim)
def _max_dim(call: Call, x, dim, keepdim=False):
    is_max = call.node.target is aten.max.dim
    values = reduce(call, x, [dim], keepdim, "max" if is_max else "min", out_dtype=x.dtype)
    indices = reduce(call, x, [dim], keepdim, "argmax" if is_max else "argmin",
                     out_dtype=torch.int64)
    return (values, indices)


@lowering(aten.any.default, aten.any.dim, aten.any.dims, aten.all.default, aten.all.dim,
          aten.all.dims)
def _any_all(call: Call, x, dims=None, keepdim=False):
    rtype = call.node.target.overloadpacket.__name__
    return reduce(call, x, dims, keepdim, rtype, value_dtype=torch.bool)


prims = torch.ops.prims


@lowering(prims.sum.default)
def _prims_sum(call: Call, x, dims, output_dtype=None):
    return reduce(call, x, dims, False, "sum",
                  value_dtype=None if x.dtype.is_floating_point else call.dtype)


@lowering(prims.var.default)
def _prims_var(call: Call, x, dims, correction=1, output_dtype=None):
    """Two passes over the row in one kernel: the mean, then the squared deviations."""
    if x.dtype.is_complex:
        raise Decline("complex var")
    ndim = x.ndim
    dims = _norm_dims(dims, ndim)
    n = sympy.Integer(1)
    for d in dims:
        n = n * x.size[d]
    acc = torch.float64 if x.dtype == torch.float64 else torch.float32
    total = reduce(call, x, dims, True, "sum", out_dtype=acc, value_dtype=acc)
    count = E.index_value(n, torch.int64)

    def centered_sq(idx):
        mean_idx = [sympy.Integer(0) if d in dims else i for d, i in enumerate(idx)]
        mean = E.call("truediv", total.load(mean_idx), E.cast(count, acc), dtype=acc)
        c = E.call("sub", E.cast(x.load(idx), acc), mean, dtype=acc)
        return E.call("mul", c, c, dtype=acc)
    sq = Virtual(x.size, acc, x.device, centered_sq)
    ss = reduce(call, sq, dims, False, "sum", out_dtype=acc, value_dtype=acc)
    denom = E.cast(E.index_value(n - correction if not isinstance(correction, float) else n, torch.int64), acc)
    if isinstance(correction, float):
        denom = E.call("sub", denom, E.const(correction, acc), dtype=acc)
    zero = E.const(0, acc)
    out_dtype = call.dtype

    def fn(idx):
        d = E.call("maximum", denom, zero, dtype=acc)
        return E.cast(E.call("truediv", ss.load(idx), d, dtype=acc), out_dtype)
    return Virtual(call.size, out_dtype, call.device, fn, stride=call.stride)


# --- prefix sums and products as reductions ---------------------------------------------------
# out[..., j, ...] = reduce over k of (x[..., k, ...] if k <= j else the identity): n times the
# work of a scan, but it is a plain reduction, fused like any other; rows are short where models
# use it (positions from an attention mask).
PREFIX_MAX_LENGTH = 2048


def _prefix(call: Call, x, dim, rtype: str, identity):
    if x.ndim == 0:
        return Virtual([], call.dtype, call.device, lambda idx: E.cast(x.load([]), call.dtype))
    d = dim % x.ndim
    n = x.size[d]
    if not n.is_Integer:
        raise Decline(f"{rtype} prefix over a symbolic length")
    if int(n) > PREFIX_MAX_LENGTH:
        raise Decline(f"a {rtype} prefix over {int(n)} elements (above {PREFIX_MAX_LENGTH}, "
                      "a scan kernel would be needed)")
    if int(n) == 0:
        raise Decline(f"a {rtype} prefix over an empty dimension")
    acc = acc_dtype(rtype, x.dtype, call.dtype)

    def terms(idx):   # idx: x's index, then k
        j, k = idx[d], idx[-1]
        src = list(idx[:-1])
        src[d] = k
        inside = E.call("le", E.index_value(k), E.index_value(j), dtype=torch.bool)
        v = E.cast(E.with_mask(x.load(src), inside), acc)
        return E.call("where", inside, v, E.const(identity, acc), dtype=acc)

    expanded = Virtual(list(x.size) + [n], acc, call.device, terms)
    return reduce(call, expanded, [x.ndim], False, rtype, value_dtype=acc)


@lowering(aten.cumsum.default)
def _cumsum(call: Call, x, dim, *, dtype=None):
    return _prefix(call, x, dim, "sum", 0)


@lowering(aten.cumprod.default)
def _cumprod(call: Call, x, dim, *, dtype=None):
    return _prefix(call, x, dim, "prod", 1)


@lowering(aten.logcumsumexp.default)
def _logcumsumexp(call: Call, x, dim):
    """log of the prefix sums of exp(x): the prefix maximum m, then m + log of the prefix sum of
    exp(x - m), both as prefix reductions (an infinite m shifts by 0: all -inf stays -inf, +inf
    stays +inf; NaN propagates)."""
    if not x.dtype.is_floating_point:
        raise Decline("logcumsumexp of an integer tensor")
    if x.ndim == 0:
        return Virtual([], call.dtype, call.device, lambda idx: E.cast(x.load([]), call.dtype))
    d = dim % x.ndim
    n = x.size[d]
    if not n.is_Integer or not 0 < int(n) <= PREFIX_MAX_LENGTH:
        raise Decline(f"a logcumsumexp prefix over {n} elements")
    acc = torch.float64 if x.dtype == torch.float64 else torch.float32

    def term(idx, shift):
        j, k = idx[d], idx[-1]
        src = list(idx[:-1])
        src[d] = k
        inside = E.call("le", E.index_value(k), E.index_value(j), dtype=torch.bool)
        v = E.cast(E.with_mask(x.load(src), inside), acc)
        if shift is None:
            return E.call("where", inside, v, E.const(float("-inf"), acc), dtype=acc)
        e = E.call("exp", E.call("sub", v, shift(idx[:-1]), dtype=acc), dtype=acc)
        return E.call("where", inside, e, E.const(0.0, acc), dtype=acc)

    size = list(x.size) + [n]
    peak = reduce(call, Virtual(size, acc, call.device, lambda idx: term(idx, None)),
                  [x.ndim], False, "max", out_dtype=acc, value_dtype=acc)

    def shift(idx):
        m = peak.load(list(idx))
        return E.call("where", E.call("isinf", m, dtype=torch.bool), E.const(0.0, acc), m,
                      dtype=acc)
    total = reduce(call, Virtual(size, acc, call.device, lambda idx: term(idx, shift)),
                   [x.ndim], False, "sum", out_dtype=acc, value_dtype=acc)

    def fn(idx):
        r = E.call("add", E.call("log", total.load(idx), dtype=acc), shift(idx), dtype=acc)
        return E.cast(r, call.dtype)
    return Virtual(call.size, call.dtype, call.device, fn, stride=call.stride)


@lowering(aten.cummax.default, aten.cummin.default)
def _cummax_cummin(call: Call, x, dim):
    """(values, indices) of the running maximum (minimum): the prefix extreme, and the last
    position up to j that holds it, as ATen's scan keeps (ties move the index forward; once a
    NaN is seen it is the value, with the index of the latest NaN)."""
    is_max = call.node.target is aten.cummax.default
    if x.ndim == 0:
        return [Virtual([], x.dtype, call.device, lambda idx: x.load([])),
                Virtual([], torch.int64, call.device, lambda idx: E.const(0, torch.int64))]
    if x.dtype == torch.bool:
        raise Decline("cummax/cummin of a bool tensor")
    d = dim % x.ndim
    n = x.size[d]
    if not n.is_Integer or not 0 < int(n) <= PREFIX_MAX_LENGTH:
        raise Decline(f"a cummax/cummin prefix over {n} elements")
    floating = x.dtype.is_floating_point
    worst = float("-inf" if is_max else "inf") if floating else (
        torch.iinfo(x.dtype).min if is_max else torch.iinfo(x.dtype).max)
    i64 = torch.int64

    def at(idx):
        j, k = idx[d], idx[-1]
        src = list(idx[:-1])
        src[d] = k
        inside = E.call("le", E.index_value(k), E.index_value(j), dtype=torch.bool)
        return inside, E.with_mask(x.load(src), inside), k

    def value_term(idx):
        inside, v, _ = at(idx)
        return E.call("where", inside, v, E.const(worst, x.dtype), dtype=x.dtype)

    size = list(x.size) + [n]
    extreme = reduce(call, Virtual(size, x.dtype, call.device, value_term), [x.ndim], False,
                     "max" if is_max else "min", out_dtype=x.dtype, value_dtype=x.dtype)

    def index_term(idx):
        inside, v, k = at(idx)
        e = extreme.load(list(idx[:-1]))
        hit = E.call("eq", v, e, dtype=torch.bool)
        if floating:
            hit = E.call("logical_or", hit, E.call(
                "logical_and", E.call("isnan", v, dtype=torch.bool),
                E.call("isnan", e, dtype=torch.bool), dtype=torch.bool), dtype=torch.bool)
        hit = E.call("logical_and", inside, hit, dtype=torch.bool)
        return E.call("where", hit, E.index_value(k), E.const(-1, i64), dtype=i64)
    last = reduce(call, Virtual(size, i64, call.device, index_term), [x.ndim], False, "max",
                  out_dtype=i64, value_dtype=i64)
    indices_meta = call.node.meta["val"][1]
    return [Virtual(call.size, x.dtype, call.device, lambda idx: extreme.load(idx),
                    stride=call.stride),
            Virtual(call.size, i64, call.device, lambda idx: last.load(idx),
                    stride=[sympy.sympify(s) for s in indices_meta.stride()])]
