"""Pooling: each output element reads its window directly (no padded copy, no unfolded tensor),
so a pool fuses with what produces its input (a batch norm and ReLU after a convolution) and with
what consumes it.

max_pool2d_with_indices follows ATen's scan exactly: positions in row-major window order, a value
replaces the running maximum when it is larger or NaN, and the index (``ih * W + iw`` within the
plane) starts at the window's first position inside the input. The indices are only computed
where something reads them (a backward graph).
"""
from __future__ import annotations

import itertools
import math

import sympy
import torch

from ..ir import expr as E
from ..ir.indexing import FloorDiv
from .registry import Call, Decline, lowering
from ..ir.values import Stored, Virtual

aten = torch.ops.aten


def _pair(v, default, n=2):
    """An ATen window argument as n values (one value stands for all; empty: the default)."""
    v = list(v) if isinstance(v, (list, tuple)) else [v]
    if not v:
        v = list(default)
    return v * n if len(v) == 1 else v


def _window_source(call: Call, x):
    """``x`` itself when its elements are cheap to recompute at each window position (pointwise
    work fused into the pool), else ``x`` in memory."""
    if isinstance(x, Stored):
        return x
    probe = x.load([sympy.Symbol(f"pool_probe{k}", integer=True) for k in range(x.ndim)])
    if E.count_ops(probe) <= call.graph.config.inline_max_ops:
        return x
    return call.graph.realize(x)


def _window_args(what: str, x, kernel_size, stride, padding, n=2):
    """Kernel, stride and padding (n values each) as ATen defaults them; declines what is not
    unrolled."""
    if not x.dtype.is_floating_point:
        raise Decline(f"{what} of an integer tensor")
    kernel = _pair(kernel_size, (), n)
    stride = _pair(stride, kernel, n)
    padding = _pair(padding, (0,) * n, n)
    if math.prod(kernel) > 64:
        raise Decline(f"a {'x'.join(map(str, kernel))} pooling window is too large to unroll")
    return tuple(kernel), tuple(stride), tuple(padding)


def _window(src, idx, lead, corner, kernel, size, dilation=None):
    """Each position of the window whose first corner is ``corner``, row-major: (its
    coordinates, whether it is inside the input, the value there, masked outside)."""
    dilation = dilation or (1,) * len(kernel)
    for offsets in itertools.product(*(range(k) for k in kernel)):
        pos = [c + o * d for c, o, d in zip(corner, offsets, dilation)]
        inside = None
        for p, n in zip(pos, size):
            ok = E.call("logical_and", _ge0(p), _lt(p, n), dtype=torch.bool)
            inside = ok if inside is None else E.call("logical_and", inside, ok, dtype=torch.bool)
        yield pos, inside, E.with_mask(src.load(list(idx[:lead]) + pos), inside)


@lowering(aten.max_pool2d_with_indices.default, aten.max_pool3d_with_indices.default)
def _max_pool_with_indices(call: Call, x, kernel_size, stride=(), padding=0, dilation=1,
                           ceil_mode=False):
    n = 3 if call.node.target is aten.max_pool3d_with_indices.default else 2
    what = f"max_pool{n}d"
    kernel, strides, pads = _window_args(what, x, kernel_size, stride, padding, n)
    dilation = _pair(dilation, (1,) * n, n)
    src = _window_source(call, x)
    size = list(x.size[-n:])
    lead = x.ndim - n   # (N, C) or (C,)
    values_size, indices_size = call.size, [sympy.sympify(k) for k in call.node.meta["val"][1].shape]
    i64 = torch.int64

    def flat(pos):   # a position's index within its plane, row-major, as ATen's indices count
        out = pos[0]
        for p, extent in zip(pos[1:], size[1:]):
            out = out * extent + p
        return out

    def scan(idx):
        corner = [o * st - p for o, st, p in zip(idx[lead:], strides, pads)]
        # an all -inf (or all-outside) window points at its first position inside the input,
        # as ATen's kernels step a negative corner by the dilation
        clamped = [_first_inside(c, d) for c, d in zip(corner, dilation)]
        first = clamped[0]
        for c, extent in zip(clamped[1:], size[1:]):
            first = E.call("add", E.call("mul", first, E.index_value(extent), dtype=i64), c,
                           dtype=i64)
        best, where = E.const(float("-inf"), x.dtype), first
        for pos, inside, v in _window(src, idx, lead, corner, kernel, size, dilation):
            better = E.call("logical_or", E.call("gt", v, best, dtype=torch.bool),
                            E.call("isnan", v, dtype=torch.bool), dtype=torch.bool)
            take = E.call("logical_and", inside, better, dtype=torch.bool)
            best = E.call("where", take, v, best, dtype=x.dtype)
            where = E.call("where", take, E.index_value(flat(pos)), where, dtype=i64)
        return best, where

    values = Virtual(values_size, x.dtype, call.device, lambda idx: scan(idx)[0],
                     stride=call.stride)
    indices = Virtual(indices_size, i64, call.device, lambda idx: scan(idx)[1],
                      stride=[sympy.sympify(s) for s in call.node.meta["val"][1].stride()])
    return [values, indices]


def _first_inside(corner, dilation: int):
    i64 = torch.int64
    c = E.index_value(corner)
    if dilation == 1:
        return E.call("maximum", c, E.const(0, i64), dtype=i64)
    steps = E.call("floordiv", E.call("sub", E.const(dilation - 1, i64), c, dtype=i64),
                   E.const(dilation, i64), dtype=i64)   # ceil(-c / d) where c < 0
    moved = E.call("add", c, E.call("mul", steps, E.const(dilation, i64), dtype=i64), dtype=i64)
    return E.call("where", E.call("lt", c, E.const(0, i64), dtype=torch.bool), moved, c,
                  dtype=i64)


def _ge0(e):
    return E.call("ge", E.index_value(e), E.const(0, torch.int64), dtype=torch.bool)


def _lt(e, n):
    return E.call("lt", E.index_value(e), E.index_value(n), dtype=torch.bool)


@lowering(aten.avg_pool2d.default, aten.avg_pool3d.default)
def _avg_pool(call: Call, x, kernel_size, stride=(), padding=0, ceil_mode=False,
              count_include_pad=True, divisor_override=None):
    """ATen's rule: the divisor is the window clipped to the padded input (count_include_pad)
    or to the input itself, unless divisor_override; the sum is accumulated in float32."""
    n = 3 if call.node.target is aten.avg_pool3d.default else 2
    kernel, stride, padding = _window_args(f"avg_pool{n}d", x, kernel_size, stride, padding, n)
    src = _window_source(call, x)
    size = x.size[-n:]
    lead = x.ndim - n
    acc = torch.float64 if x.dtype == torch.float64 else torch.float32

    def fn(idx):
        corner = [o * s - p for o, s, p in zip(idx[lead:], stride, padding)]
        total = E.const(0.0, acc)
        for _, inside, v in _window(src, idx, lead, corner, kernel, size):
            total = E.call("add", total, E.call("where", inside, E.cast(v, acc),
                                                E.const(0.0, acc), dtype=acc), dtype=acc)
        divisor = _avg_divisor(corner, kernel, size, padding, count_include_pad,
                               divisor_override, acc)
        return E.cast(E.call("truediv", total, divisor, dtype=acc), x.dtype)

    return Virtual(call.size, x.dtype, call.device, fn, stride=call.stride)


def _avg_divisor(corner, kernel, size, pad, count_include_pad, divisor_override, acc):
    """The divisor of the window whose first corner is ``corner``, as ATen counts it."""
    if divisor_override:
        return E.const(float(divisor_override), acc)
    i64 = torch.int64
    count = None
    for lo, k, n, p in zip(corner, kernel, size, pad):
        end_padded = E.call("minimum", E.index_value(lo + k), E.index_value(n + p), dtype=i64)
        if count_include_pad:
            length = E.call("sub", end_padded, E.index_value(lo), dtype=i64)
        else:
            start = E.call("maximum", E.index_value(lo), E.const(0, i64), dtype=i64)
            end = E.call("minimum", end_padded, E.index_value(n), dtype=i64)
            length = E.call("sub", end, start, dtype=i64)
        count = length if count is None else E.call("mul", count, length, dtype=i64)
    return E.cast(count, acc)


@lowering(aten.avg_pool2d_backward.default, aten.avg_pool3d_backward.default)
def _avg_pool_backward(call: Call, grad, x, kernel_size, stride, padding, ceil_mode,
                       count_include_pad, divisor_override):
    """Each input element gathers grad / divisor from the (at most ceil(k / s) per dim)
    windows that contain it."""
    n = 3 if call.node.target is aten.avg_pool3d_backward.default else 2
    kernel, stride, padding = _window_args(f"avg_pool{n}d_backward", grad, kernel_size,
                                           stride, padding, n)
    size = x.size[-n:]
    out_size = grad.size[-n:]
    lead = x.ndim - n
    acc = torch.float64 if grad.dtype == torch.float64 else torch.float32

    def candidates(i, k, s, p, n_out):
        """(window index, whether it holds input position i) for each window that may."""
        out = []
        for a in range(-(-k // s)):
            o = FloorDiv(i + p, s) - a
            holds = E.call("logical_and", _ge0(o), _lt(o, n_out), dtype=torch.bool)
            holds = E.call("logical_and", holds, _lt(i, o * s - p + k), dtype=torch.bool)
            out.append((o, holds))
        return out

    def fn(idx):
        total = E.const(0.0, acc)
        per_dim = [candidates(i, k, s, p, m) for i, k, s, p, m in
                   zip(idx[lead:], kernel, stride, padding, out_size)]
        for choice in itertools.product(*per_dim):
            windows = [o for o, _ in choice]
            ok = choice[0][1]
            for _, holds in choice[1:]:
                ok = E.call("logical_and", ok, holds, dtype=torch.bool)
            g = E.cast(E.with_mask(grad.load(list(idx[:lead]) + windows), ok), acc)
            corner = [o * s - p for o, s, p in zip(windows, stride, padding)]
            divisor = _avg_divisor(corner, kernel, size, padding, count_include_pad,
                                   divisor_override, acc)
            share = E.call("truediv", g, divisor, dtype=acc)
            total = E.call("add", total, E.call("where", ok, share, E.const(0.0, acc),
                                                dtype=acc), dtype=acc)
        return E.cast(total, grad.dtype)

    return Virtual(call.size, grad.dtype, call.device, fn, stride=call.stride)


def _static_sizes(what: str, *tensors_and_dims):
    try:
        return [[int(n) for n in t.size[-k:]] for t, k in tensors_and_dims]
    except TypeError:
        raise Decline(f"{what} with symbolic sizes") from None


def _adaptive_bounds(o, n, m):
    """Window ``o`` of n inputs over m outputs: [floor(o n / m), ceil((o + 1) n / m))."""
    return FloorDiv(o * n, m), FloorDiv((o + 1) * n + m - 1, m)


def _adaptive_window(src, idx, lead, bounds, reach):
    """Each position of an adaptive window read at its largest size (``reach`` per dim),
    row-major: (its coordinates, whether it is inside the window, the value, masked outside)."""
    for offsets in itertools.product(*(range(r) for r in reach)):
        pos = [lo + a for (lo, _), a in zip(bounds, offsets)]
        inside = None
        for p, (_, hi) in zip(pos, bounds):
            ok = _lt(p, hi)
            inside = ok if inside is None else E.call("logical_and", inside, ok,
                                                      dtype=torch.bool)
        yield pos, inside, E.with_mask(src.load(list(idx[:lead]) + pos), inside)


@lowering(aten._adaptive_avg_pool3d.default)
def _adaptive_avg_pool3d(call: Call, x, output_size):
    """Each output averages its window, whose bounds are index arithmetic of its position; the
    window is read as its largest size (ceil(n / m) + 1 per dim) with the rest masked."""
    if not x.dtype.is_floating_point:
        raise Decline("adaptive_avg_pool3d of an integer tensor")
    (size,) = _static_sizes("adaptive_avg_pool3d", (x, 3))
    out = [int(n) for n in call.size[-3:]]
    reach = [-(-n // m) + 1 for n, m in zip(size, out)]
    if math.prod(reach) > 64:
        raise Decline("an adaptive_avg_pool3d window too large to unroll")
    src = _window_source(call, x)
    lead = x.ndim - 3
    acc = torch.float64 if x.dtype == torch.float64 else torch.float32
    i64 = torch.int64

    def fn(idx):
        bounds = [_adaptive_bounds(o, n, m) for o, n, m in zip(idx[lead:], size, out)]
        total = E.const(0.0, acc)
        for _, inside, v in _adaptive_window(src, idx, lead, bounds, reach):
            v = E.cast(v, acc)
            total = E.call("add", total, E.call("where", inside, v, E.const(0.0, acc),
                                                dtype=acc), dtype=acc)
        count = None
        for lo, hi in bounds:
            length = E.index_value(hi - lo)
            count = length if count is None else E.call("mul", count, length, dtype=i64)
        return E.cast(E.call("truediv", total, E.cast(count, acc), dtype=acc), x.dtype)

    return Virtual(call.size, x.dtype, call.device, fn, stride=call.stride)


@lowering(aten.adaptive_max_pool2d.default, aten.adaptive_max_pool3d.default)
def _adaptive_max_pool(call: Call, x, output_size):
    """Windows of any size (evenly dividing ones are decomposed into a max pool before this),
    scanned as ATen's kernel does: row-major, a value replaces the maximum when larger or NaN,
    the index (flat within the plane) starts at the window's first position."""
    nd = 3 if call.node.target is aten.adaptive_max_pool3d.default else 2
    what = f"adaptive_max_pool{nd}d"
    if not x.dtype.is_floating_point:
        raise Decline(f"{what} of an integer tensor")
    (size,) = _static_sizes(what, (x, nd))
    out = [int(n) for n in call.size[-nd:]]
    reach = [-(-n // m) + 1 for n, m in zip(size, out)]
    if math.prod(reach) > 64:
        raise Decline(f"an {what} window too large to unroll")
    src = _window_source(call, x)
    lead = x.ndim - nd
    i64 = torch.int64
    strides = [math.prod(size[d + 1:]) for d in range(nd)]   # flat index within the plane
    indices_meta = call.node.meta["val"][1]

    def scan(idx):
        bounds = [_adaptive_bounds(o, n, m) for o, n, m in zip(idx[lead:], size, out)]
        first = sum(lo * st for (lo, _), st in zip(bounds, strides))
        best, where = E.const(float("-inf"), x.dtype), E.index_value(first)
        for pos, inside, v in _adaptive_window(src, idx, lead, bounds, reach):
            better = E.call("logical_or", E.call("gt", v, best, dtype=torch.bool),
                            E.call("isnan", v, dtype=torch.bool), dtype=torch.bool)
            take = E.call("logical_and", inside, better, dtype=torch.bool)
            best = E.call("where", take, v, best, dtype=x.dtype)
            flat = E.index_value(sum(p * st for p, st in zip(pos, strides)))
            where = E.call("where", take, flat, where, dtype=i64)
        return best, where

    values = Virtual(call.size, x.dtype, call.device, lambda idx: scan(idx)[0],
                     stride=call.stride)
    indices = Virtual([sympy.sympify(n) for n in indices_meta.shape], i64, call.device,
                      lambda idx: scan(idx)[1],
                      stride=[sympy.sympify(st) for st in indices_meta.stride()])
    return [values, indices]


@lowering(aten._adaptive_avg_pool2d_backward.default, aten._adaptive_avg_pool3d_backward.default)
def _adaptive_avg_pool_backward(call: Call, grad, x):
    """Input ``i`` gathers grad / window size from the windows that hold it: those from
    floor(i m / n), at most ceil(m / n) + 1 of them per dim."""
    nd = 3 if call.node.target is aten._adaptive_avg_pool3d_backward.default else 2
    what = f"adaptive_avg_pool{nd}d_backward"
    if not grad.dtype.is_floating_point:
        raise Decline(f"{what} of an integer tensor")
    size, out = _static_sizes(what, (x, nd), (grad, nd))
    reach = [-(-m // n) + 1 for n, m in zip(size, out)]
    if math.prod(reach) > 64:
        raise Decline(f"{what} that upsamples this much")
    if nd == 3 and call.device.type == "cuda" and any(m > n for n, m in zip(size, out)):
        # Triton 3.6 miscompiles this kernel on the H200 when a thread holds several elements
        # (XBLOCK 512: 90 of 360 gradients wrong, some NaN; XBLOCK 32 or int64 indices: exact;
        # Triton's interpreter: exact). Until the cause is found, ATen computes it.
        raise Decline(f"{what} that upsamples, on CUDA (a Triton miscompile, docs/perf-notes.md)")
    lead = x.ndim - nd
    acc = torch.float64 if grad.dtype == torch.float64 else torch.float32
    i64 = torch.int64

    def windows(i, n, m, r):
        found = []
        for a in range(r):
            o = FloorDiv(i * m, n) + a
            start, end = _adaptive_bounds(o, n, m)
            holds = E.call("logical_and", _lt(o, m), E.call(
                "logical_and", E.call("le", E.index_value(start), E.index_value(i),
                                      dtype=torch.bool), _lt(i, end), dtype=torch.bool),
                dtype=torch.bool)
            found.append((o, holds, E.index_value(end - start)))
        return found

    def fn(idx):
        total = E.const(0.0, acc)
        per_dim = [windows(i, n, m, r) for i, n, m, r in zip(idx[lead:], size, out, reach)]
        for choice in itertools.product(*per_dim):
            ok, length = choice[0][1], choice[0][2]
            for _, holds, ln in choice[1:]:
                ok = E.call("logical_and", ok, holds, dtype=torch.bool)
                length = E.call("mul", length, ln, dtype=i64)
            g = E.cast(E.with_mask(grad.load(list(idx[:lead]) + [o for o, _, _ in choice]), ok),
                       acc)
            total = E.call("add", total, E.call(
                "where", ok, E.call("truediv", g, E.cast(length, acc), dtype=acc),
                E.const(0.0, acc), dtype=acc), dtype=acc)
        return E.cast(total, grad.dtype)

    return Virtual(call.size, grad.dtype, call.device, fn, stride=call.stride)
