"""A 2-d max pool's backward reads its window offsets (int8), not its indices (int64).

``max_pool2d_with_indices`` returns, for each output, the index of its maximum within the
input's plane, as int64; autograd saves it for the backward, which adds each gradient there. At
a ResNet-50's stem (batch 16, 64x56x56 outputs) that is 24.5 MiB held from the forward to the
backward. The same information fits a byte: the position within the window (``kh * KW + kw``,
below 64 since Solder unrolls no larger window). Before the partition, each index tensor the
backward alone reads is replaced there by indices recomputed from such offsets; the
partitioner then finds it cheapest to save the offsets (computed in the forward, in the pool's
own kernel) and recomputes the indices in the backward, inside the scatter that reads them.

Offsets and indices convert exactly: the maximum of the window whose first corner is
``(oh * sh - ph, ow * sw - pw)`` lies at ``corner + k * dilation`` for some ``k`` inside the
window (an all-NaN or all-outside window points at its first position inside the input, also
inside the window, as ATen's padding is at most half the kernel).
"""
from __future__ import annotations

import operator

import torch
from torch.fx import GraphModule, Node

from .saved_values import forward_nodes

aten = torch.ops.aten


def save_pool_offsets(joint: GraphModule, num_fwd_outputs) -> int:
    """Rewrite, in the joint graph, the backward's reads of 2-d max pool indices; the number of
    pools rewritten."""
    if num_fwd_outputs is None:
        return 0
    forward = forward_nodes(joint, num_fwd_outputs)
    rewritten = 0
    for pool in list(joint.graph.nodes):
        if pool.target is not aten.max_pool2d_with_indices.default:
            continue
        indices = [u for u in pool.users if u.target is operator.getitem and u.args[1] == 1]
        if len(indices) != 1:
            continue
        idx = indices[0]
        readers = list(idx.users)
        if not readers or any(r in forward for r in readers):
            continue   # the program itself reads the indices (return_indices=True)
        recomputed = _recomputed_indices(joint.graph, pool, idx)
        if recomputed is None:
            continue
        for r in readers:
            r.replace_input_with(idx, recomputed)
        rewritten += 1
    if rewritten:
        joint.graph.lint()
        joint.recompile()
    return rewritten


def _args(pool: Node):
    """The pool's input, and its kernel, stride, padding and dilation as two values each (ATen
    takes one value for both, and an empty stride for the kernel's)."""
    names = ("stride", "padding", "dilation")
    given = dict(zip(names, pool.args[2:5]), **{k: v for k, v in pool.kwargs.items() if k in names})

    def pair(v, default):
        v = [v] if isinstance(v, int) else list(v or default)
        return v * 2 if len(v) == 1 else v
    kernel = pair(pool.args[1], None)
    return (pool.args[0], kernel, pair(given.get("stride"), kernel),
            pair(given.get("padding"), [0]), pair(given.get("dilation"), [1]))


def _recomputed_indices(graph, pool: Node, idx: Node):
    x, kernel, stride, padding, dilation = _args(pool)
    val = idx.meta.get("val")
    xval = x.meta.get("val") if isinstance(x, Node) else None
    if val is None or xval is None or kernel[0] * kernel[1] > 127:
        return None
    if not all(isinstance(s, int) for s in (*val.shape, *xval.shape)):
        return None   # symbolic sizes: left as they are
    width = xval.shape[-1]
    oh_n, ow_n = val.shape[-2], val.shape[-1]
    fake_mode = getattr(val, "fake_mode", None)
    if fake_mode is None:
        return None
    i64 = torch.int64
    emitted: list[Node] = []

    def emit(target, *args, **kwargs):   # each node after the last: the graph stays in order
        with graph.inserting_after(emitted[-1] if emitted else idx):
            node = graph.call_function(target, args, kwargs)
        vals = [a.meta["val"] if isinstance(a, Node) else a for a in args]
        with fake_mode:
            node.meta["val"] = target(*vals, **kwargs)
        node.meta["stack_trace"] = pool.meta.get("stack_trace")
        emitted.append(node)
        return node

    rows = emit(aten.arange.start_step, 0, oh_n, 1, dtype=i64, device=val.device)
    cols = emit(aten.arange.start_step, 0, ow_n, 1, dtype=i64, device=val.device)
    top = emit(aten.unsqueeze.default,
               emit(aten.sub.Tensor, emit(aten.mul.Tensor, rows, stride[0]), padding[0]), -1)
    left = emit(aten.sub.Tensor, emit(aten.mul.Tensor, cols, stride[1]), padding[1])
    # the forward: offsets within the window
    ih = emit(aten.div.Tensor_mode, idx, width, rounding_mode="floor")
    iw = emit(aten.remainder.Scalar, idx, width)
    kh = emit(aten.sub.Tensor, ih, top)
    kw = emit(aten.sub.Tensor, iw, left)
    if dilation[0] != 1:
        kh = emit(aten.div.Tensor_mode, kh, dilation[0], rounding_mode="floor")
    if dilation[1] != 1:
        kw = emit(aten.div.Tensor_mode, kw, dilation[1], rounding_mode="floor")
    offsets = emit(aten._to_copy.default,
                   emit(aten.add.Tensor, emit(aten.mul.Tensor, kh, kernel[1]), kw),
                   dtype=torch.int8)
    # the backward: indices from them
    wide = emit(aten._to_copy.default, offsets, dtype=i64)
    back_h = emit(aten.add.Tensor, top, emit(aten.mul.Tensor, emit(
        aten.div.Tensor_mode, wide, kernel[1], rounding_mode="floor"), dilation[0]))
    back_w = emit(aten.add.Tensor, left, emit(aten.mul.Tensor, emit(
        aten.remainder.Scalar, wide, kernel[1]), dilation[1]))
    out = emit(aten.add.Tensor, emit(aten.mul.Tensor, back_h, width), back_w)
    if tuple(out.meta["val"].shape) != tuple(val.shape) or out.meta["val"].stride() != val.stride():
        for n in reversed(emitted):
            graph.erase_node(n)
        return None
    return out
