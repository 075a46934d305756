"""Gradients that come from outputs with no elements are zeros, computed as zeros.

A backward graph gets one tangent per forward output that needs a gradient; for an output with
no elements (``v.narrow(1, 1, 0)``) that tangent is empty, and what the backward computes from
it alone is zero in exact arithmetic: it enters every derivative formula linearly. Computed, it
is not always zero: ``xlogy``'s derivative multiplies it by ``self / other``, and 0 * 0 / 0 is
NaN, which then reaches the input's gradient (fuzz seed 532948). Eager never computes it:
nothing flows back from an output the loss does not use, and an empty output is one (its
gradient is undefined, and autograd skips formulas whose gradients are all undefined).

So every floating value of the backward that depends on empty tangents and on no other tangent
is replaced by contiguous zeros of its shape before lowering; what mixes both is computed as
before, from those zeros. (An empty output that the loss does use, ``v.sum()``, gets the same
zeros where eager would compute 0 * 0 / 0: the exact answer over eager's NaN.)
"""
from __future__ import annotations

import torch
import torch.fx as fx

from .passes import remove_dead_code

aten = torch.ops.aten


def zero_empty_tangent_gradients(gm: fx.GraphModule) -> int:
    """Rewrites ``gm`` (a backward graph) in place; the number of values replaced."""
    graph = gm.graph
    empty, other = set(), set()    # nodes depending on empty tangents / on other tangents
    for node in graph.nodes:
        if node.op == "placeholder":
            if node.name.startswith("tangents_token"):
                # an effect token (empty too): what is ordered by it is not a gradient
                other.add(node)
            elif node.name.startswith("tangents"):
                (empty if _static_numel(node.meta.get("val")) == 0 else other).add(node)
            continue
        inputs = node.all_input_nodes
        if any(i in other for i in inputs):
            other.add(node)
        elif any(i in empty for i in inputs):
            empty.add(node)
    replaced = 0
    for node in list(graph.nodes):
        if node not in empty or node.op != "call_function" or not node.users:
            continue
        val = node.meta.get("val")
        if not (isinstance(val, torch.Tensor) and val.is_floating_point()
                and all(isinstance(s, int) for s in val.shape)):
            continue   # (bools and integers are computed again from the zeros)
        with graph.inserting_before(node):
            zeros = _zeros_like(graph, val)
        node.replace_all_uses_with(zeros)
        replaced += 1
    if replaced:
        # Solder's dead-code removal: FX's own would drop ops kept for their effect (linalg's
        # error checks), which return nothing
        remove_dead_code(gm)
        gm.recompile()
    return replaced


def _static_numel(val):
    if not isinstance(val, torch.Tensor):
        return None
    n = 1
    for s in val.shape:
        if not isinstance(s, int):
            return None
        n *= s
    return n


def _zeros_like(graph: fx.Graph, val: torch.Tensor) -> fx.Node:
    """Contiguous zeros of ``val``'s shape: the value it stands for may be an expanded view
    (stride 0), which later writes into it must not inherit."""
    zeros = graph.call_function(aten.full.default, (list(val.shape), 0.0),
                                dict(dtype=val.dtype, layout=torch.strided, device=val.device,
                                     pin_memory=False))
    zeros.meta["val"] = val.new_zeros(val.shape)
    return zeros
