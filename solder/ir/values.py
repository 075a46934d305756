"""What an FX tensor lowers to: a function from an element's index to its ``Value``.

Three forms:
  Stored       a buffer in memory, seen through a strided layout (graph inputs, computed buffers,
               library results, and every view of those: a view is just another layout)
  Virtual      not in memory: computed wherever it is read (pointwise work waiting to be fused)
  VirtualView  a view of a Virtual: the view's index is mapped to a storage position through the
               view's strides, then back to the Virtual's index through the Virtual's own strides
"""
from __future__ import annotations

from typing import Callable, Optional, Sequence

import sympy
import torch

from . import expr as E
from .indexing import FloorDiv, Memo, ModIndex, strided_offset
from .nodes import Layout


def sym(x):
    """A python int / SymInt / sympy expression as a sympy expression."""
    if isinstance(x, sympy.Basic):
        return x
    if isinstance(x, bool):
        return sympy.Integer(int(x))
    if isinstance(x, int):
        return sympy.Integer(x)
    if isinstance(x, (torch.SymInt, torch.SymBool, torch.SymFloat)):
        return _index_functions(x.node.expr)
    raise TypeError(f"not an index/size: {x!r}")


def _index_functions(e):
    """The shape env's integer division and remainder as Solder's (which kernels can print)."""
    from torch.utils._sympy import functions as F
    if not isinstance(e, sympy.Basic) or not e.has(F.FloorDiv, F.ModularIndexing, F.CleanDiv):
        return e
    e = e.replace(F.ModularIndexing, lambda a, b, n: ModIndex(FloorDiv(a, b), n))
    return e.replace(F.FloorDiv, FloorDiv).replace(F.CleanDiv, FloorDiv)


def map_nested(a, leaf: Callable):
    """``leaf`` applied to every element of ``a`` that is not a list or tuple, the nesting
    (and each list's or tuple's type) kept."""
    if isinstance(a, (list, tuple)):
        return type(a)(map_nested(x, leaf) for x in a)
    return leaf(a)


def sym_list(xs) -> list:
    return [sym(x) for x in xs]


class TensorValue:
    size: list
    dtype: torch.dtype
    device: torch.device

    def load(self, idx: Sequence) -> E.Value:
        raise NotImplementedError

    @property
    def ndim(self):
        return len(self.size)


class Stored(TensorValue):
    def __init__(self, buffer: str, layout: Layout, root_meta_offset=0):
        self.buffer = buffer
        self.layout = layout
        self.size = list(layout.size)
        self.dtype = layout.dtype
        self.device = layout.device
        # storage offset (in the FakeTensor world) of the buffer's data pointer; views of this
        # buffer compute their offset relative to it
        self.root_meta_offset = sym(root_meta_offset)

    def load(self, idx):
        return E.load(self.buffer, self.layout.index(idx), self.dtype)

    def view(self, size, stride, meta_offset) -> "Stored":
        layout = Layout(tuple(size), tuple(stride), sympy.expand(sym(meta_offset) - self.root_meta_offset),
                        self.dtype, self.device)
        return Stored(self.buffer, layout, self.root_meta_offset)

    def __repr__(self):
        return f"Stored({self.buffer}: {self.layout})"


class Virtual(TensorValue):
    def __init__(self, size, dtype, device, fn: Callable, stride=None, origins=(), source=()):
        from ..ir.nodes import contiguous_strides
        self.size = list(size)
        self.dtype = dtype
        self.device = device
        self.fn = fn
        # the layout it would have in memory (eager's strides); views of it index through these
        self.stride = list(stride) if stride is not None else list(contiguous_strides(size))
        self.origins = list(origins)
        # the user's lines of the ops it computes: the buffer it becomes names them, wherever
        # (in a later op's lowering, or as a graph output) it is realized
        self.source = list(source)
        self._memo: dict = {}

    def load(self, idx):
        key = tuple(idx)
        v = self._memo.get(key)
        if v is None:
            v = self.fn(list(idx))
            if v.dtype != self.dtype:
                v = E.cast(v, self.dtype)
            self._memo[key] = v
        return v

    def __repr__(self):
        return f"Virtual({str(self.dtype).replace('torch.', '')}{self.size})"


class VirtualView(TensorValue):
    def __init__(self, base: Virtual, size, stride, offset):
        self.base = base
        self.size = list(size)
        self.stride = list(stride)
        self.offset = sym(offset)
        self.dtype = base.dtype
        self.device = base.device

    def load(self, idx):
        # ``offset`` is relative to the base's own storage offset (eager's is not always 0:
        # a functional copy into a view keeps the view's offset)
        pos = strided_offset(idx, self.stride, self.offset)
        return self.base.load(position_to_index(pos, self.base.size, self.base.stride))


_INDICES = Memo()


def position_to_index(pos, size, stride) -> list:
    """Index of the element at storage position ``pos`` in a non-overlapping strided layout."""
    return list(_INDICES.get((pos, tuple(size), tuple(stride)),
                             lambda: tuple(_position_to_index(pos, size, stride))))


def _position_to_index(pos, size, stride) -> list:
    # dims from the largest stride down: each dim's index is the position divided by its
    # stride, modulo the next larger stride over its own. That ratio is the dim's size in a
    # dense layout; it is larger where eager's layout has gaps (a functional copy into a
    # sliced view keeps the view's strides: size (3, 3), strides (1, 4))
    if any(n == 0 for n in size):   # no elements: no position to map back
        return [sympy.Integer(0)] * len(size)
    order = [d for d in sorted(range(len(size)), key=lambda d: _stride_key(stride[d]),
                                reverse=True) if not (size[d] == 1 or stride[d] == 0)]
    idx = [sympy.Integer(0)] * len(size)
    outer, rest, nested = None, pos, True
    for k, d in enumerate(order):
        if outer is None:
            idx[d] = FloorDiv(pos, stride[d])
        else:
            span = sympy.simplify(outer / stride[d])
            if nested and span.is_integer and \
                    sympy.simplify(span - size[d]).is_nonnegative is not False:
                idx[d] = ModIndex(FloorDiv(pos, stride[d]), span)
            elif _clears(stride[d], [(size[e], stride[e]) for e in order[k + 1:]]) and \
                    _clears(outer, [(size[e], stride[e]) for e in order[k:]]):
                # strides that do not divide the ones above (rows 10 apart, every third
                # column; or rows 20 apart of blocks of 6) but each clears the reach of the
                # smaller ones: what is left after the outer dims, divided
                nested = False
                idx[d] = FloorDiv(rest, stride[d])
            else:
                raise NotImplementedError(
                    f"a value with strides {list(stride)} for sizes {list(size)} overlaps "
                    f"itself: its views cannot be read through index arithmetic")
        outer = stride[d]
        rest = ModIndex(rest, stride[d])
    return idx


def _clears(s, smaller) -> bool:
    """Whether stride ``s`` exceeds the largest offset that the smaller dims reach."""
    reach = sum(((n - 1) * t for n, t in smaller), sympy.Integer(0))
    return bool(sympy.simplify(s - reach - 1).is_nonnegative)


def _stride_key(s):
    try:
        return int(s)
    except TypeError:
        return 1 << 62  # symbolic strides belong to outer dims in practice


def broadcast_index(idx: Sequence, from_size: Sequence, to_size: Sequence) -> list:
    """Index into a tensor of ``from_size`` broadcast to ``to_size``."""
    offset = len(to_size) - len(from_size)
    out = []
    for d, n in enumerate(from_size):
        out.append(sympy.Integer(0) if n == 1 and to_size[d + offset] != 1 else idx[d + offset])
    return out


def loader_of(x, size, dtype: Optional[torch.dtype] = None):
    """A loader over ``size`` for a tensor (broadcast) or a python scalar (constant)."""
    if isinstance(x, TensorValue):
        def fn(idx, x=x):
            v = x.load(broadcast_index(idx, x.size, size))
            return E.cast(v, dtype) if dtype is not None else v
        return fn
    if isinstance(x, sympy.Basic) and not x.is_Number:
        # a size (integer) or a float of sizes (a host scalar, see Graph.host_scalar)
        boolean = x.is_Relational or isinstance(
            x, (sympy.logic.boolalg.BooleanAtom, sympy.logic.boolalg.BooleanFunction))
        floating = x.is_integer is not True and not boolean
        value = E.index_value(x, torch.float64 if floating else torch.int64)
        return lambda idx: E.cast(value, dtype) if dtype is not None else value
    c = E.const(x, dtype if dtype is not None else _scalar_dtype(x))
    return lambda idx: c


def _scalar_dtype(x):
    if isinstance(x, bool):
        return torch.bool
    if isinstance(x, int):
        return torch.int64
    return torch.float64
