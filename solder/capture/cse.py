"""Common-subexpression elimination on the joint forward/backward graph, before partitioning.

The min-cut partitioner sees one node per distinct value: two identical ``t(weight)`` nodes would
each count as a saved tensor or a recomputation. AOTAutograd's partitioner has a CSE pass of its
own, but it imports much of TorchInductor (its pattern matcher: ~180 modules, 0.7 s on a 2-core
CPU) at a process's first training compile. Solder runs this pass instead and turns that one off.

A node is merged into an earlier one when both call the same ATen or prims op on the same
arguments and nothing can tell them apart:
- no random op (the ``nondeterministic_seeded`` tag) and no ``empty``-family op (the memory is
  uninitialized, and each may be filled by a different later write);
- no op that mutates or returns nothing (a mutating op also starts a new region: a value computed
  after it is never merged with one computed before);
- no node whose storage is one of the graph's outputs (two outputs that are distinct tensors in
  eager must stay distinct);
- the same activation-checkpointing tags.
"""
from __future__ import annotations

import operator
from typing import Any, Optional

import torch
import torch.fx as fx

_NAMESPACES = ("aten", "prims")
_UNINITIALIZED = ("empty", "empty_like", "empty_strided", "empty_permuted", "new_empty",
                  "new_empty_strided")


def eliminate_common_subexpressions(graph: fx.Graph) -> int:
    """Merges duplicate nodes of ``graph`` in place; returns how many were removed."""
    outputs = _output_storages(graph)
    seen: dict = {}
    region = 0
    removed = 0
    for node in list(graph.nodes):
        if node.op != "call_function":
            continue
        if _mutates(node):
            region += 1
            continue
        if not _mergeable(node) or _storages(node) & outputs:
            continue
        key = _key(node, region)
        if key is None:
            continue
        first = seen.setdefault(key, node)
        if first is not node:
            node.replace_all_uses_with(first)
            graph.erase_node(node)
            removed += 1
    return removed


def _mutates(node: fx.Node) -> bool:
    schema = getattr(node.target, "_schema", None)
    if schema is not None:
        return schema.is_mutable or not schema.returns
    return node.target is not operator.getitem and node.is_impure()


def _mergeable(node: fx.Node) -> bool:
    target = node.target
    if target is operator.getitem:
        return True
    if not isinstance(target, torch._ops.OpOverload) or target.namespace not in _NAMESPACES:
        return False
    if torch.Tag.nondeterministic_seeded in target.tags:
        return False
    return target.overloadpacket.__name__ not in _UNINITIALIZED


def _key(node: fx.Node, region: int) -> Optional[tuple]:
    try:
        key = (node.target, region, _hashable(node.args), _hashable(node.kwargs),
               node.meta.get("recompute"), node.meta.get("ac_graph_id"))
        hash(key)
    except TypeError:
        return None   # an argument with no stable identity: left alone
    return key


def _hashable(value: Any):
    # the type is part of the key: 1, 1.0 and True are equal (and hash alike) in Python, but
    # they are different arguments to an op
    if isinstance(value, fx.Node):
        return ("node", value)
    if isinstance(value, (list, tuple)):
        return (type(value).__name__, tuple(_hashable(v) for v in value))
    if isinstance(value, dict):
        return ("dict", tuple(sorted((k, _hashable(v)) for k, v in value.items())))
    if isinstance(value, slice):
        return ("slice", _hashable((value.start, value.stop, value.step)))
    if isinstance(value, float) and value != value:
        raise TypeError("NaN")   # never equal to itself: no merge
    return (type(value).__name__, value)


def _storages(node: fx.Node) -> set:
    """The storages of the tensors a node makes (several for an op with many results)."""
    val = node.meta.get("val")
    found = set()
    for t in (val if isinstance(val, (list, tuple)) else [val]):
        if isinstance(t, torch.Tensor):
            try:
                found.add(t.untyped_storage()._cdata)
            except (NotImplementedError, RuntimeError):
                pass
    return found


def _output_storages(graph: fx.Graph) -> set:
    out = next((n for n in reversed(graph.nodes) if n.op == "output"), None)
    if out is None:
        return set()
    return set().union(*(_storages(n) for n in out.all_input_nodes))
