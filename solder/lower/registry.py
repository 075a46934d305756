"""The lowering registry: ``@lowering(aten.op, ...)`` maps an ATen op to a function that builds IR.

A lowering receives a ``Call`` (the FX node, its FakeTensor result, the graph being lowered) and
the node's arguments with every tensor already lowered (``TensorValue``) and every size a sympy
expression. It returns a ``TensorValue`` (or a list of them), or raises ``Decline`` with a reason,
in which case the op runs through ATen and ``solder.explain`` lists it with that reason.
"""
from __future__ import annotations

import functools
import weakref

from typing import Any, Callable

import torch

from ..ir.nodes import fresh_strides
from ..ir.values import sym_list

LOWERINGS: dict[Any, Callable] = {}


class Decline(Exception):
    """A lowering cannot handle this case; the op falls back to ATen with this reason."""


def lowering(*ops):
    def register(fn):
        for op in ops:
            for overload in _overloads(op):
                if overload in LOWERINGS:
                    raise RuntimeError(f"two lowerings for {overload}")
                LOWERINGS[overload] = fn
        return fn
    return register


def _overloads(op):
    if isinstance(op, torch._ops.OpOverloadPacket):
        return [getattr(op, name) for name in op.overloads()]
    return [op]


def lookup(target):
    return LOWERINGS.get(target)


class Call:
    """One FX node being lowered."""

    def __init__(self, graph, node):
        # a weak reference: the index functions of the values a lowering returns keep their
        # Call, and the graph keeps those values, so a strong one made the whole lowered graph
        # a reference cycle, left for Python's cycle collector to find
        self.graph = weakref.proxy(graph)
        self.node = node
        self.out = node.meta.get("val")
        # ops with several results: dtype/size/... describe the first tensor among them
        self.first = self.out if not isinstance(self.out, (list, tuple)) else next(
            (o for o in self.out if isinstance(o, torch.Tensor)), None)

    @property
    def op_name(self) -> str:
        return op_name(self.node.target)

    @property
    def dtype(self) -> torch.dtype:
        return self.first.dtype

    @property
    def device(self) -> torch.device:
        return self.graph.home_device(self.first)

    @property
    def size(self) -> list:
        return sym_list(self.first.shape)

    @property
    def stride(self) -> list:
        # (a lowering's result is in memory of its own, or would be: never overlapping)
        return list(fresh_strides(self.size, self.meta_stride))

    @property
    def meta_stride(self) -> list:
        """The FakeTensor's strides as they are (overlapping ones kept)."""
        return sym_list(self.first.stride())


@functools.lru_cache(maxsize=None)   # asked for every node of every graph; ops are few
def op_name(target) -> str:
    if isinstance(target, torch._ops.OpOverload):
        pkt = target._schema.name.split("::")
        overload = target._overloadname
        return f"{pkt[0]}.{pkt[1]}" + (f".{overload}" if overload and overload != "default" else "")
    return getattr(target, "__name__", str(target))


def load_lowerings():
    """Import every op family so that its table registers."""
    from . import pointwise, reductions, views, constructors, extern, indexing  # noqa: F401
    from . import scatter, user_kernels, pooling, sorting, special  # noqa: F401
