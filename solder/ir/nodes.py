"""The IR: buffers (what lives in memory) and the bodies that compute them.

A graph lowers to an ordered list of buffers. Each buffer has a strided ``Layout`` and is one of:
  InputBuffer     a graph input
  ComputedBuffer  written by generated code: a ``Pointwise`` or ``Reduction`` body
  ExternBuffer    the result of a library call (mm, conv, attention) or of an ATen fallback
  UserKernelCall  a user Triton kernel launch (writes some of its arguments)
A ComputedBuffer may also write into another buffer's storage (``mutates``): the in-place update of
a graph input, or a scatter into a fresh output.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Optional, Sequence

import sympy
import torch

from .expr import Value
from .indexing import product, strided_offset


@dataclass
class Layout:
    size: tuple
    stride: tuple
    offset: Any  # elements, relative to the buffer's data pointer
    dtype: torch.dtype
    device: torch.device

    def index(self, idx: Sequence) -> sympy.Expr:
        return strided_offset(idx, self.stride, self.offset)

    @property
    def numel(self):
        return product(self.size)

    def is_contiguous(self) -> bool:
        expected = sympy.Integer(1)
        for n, s in reversed(list(zip(self.size, self.stride))):
            if n != 1 and sympy.expand(s - expected) != 0:
                return False
            expected = expected * n
        return True

    def __str__(self):
        dt = str(self.dtype).replace("torch.", "")
        off = f", offset={self.offset}" if self.offset != 0 else ""
        return f"{dt}{list(self.size)} stride={list(self.stride)}{off}"


def contiguous_strides(size: Sequence) -> tuple:
    strides, acc = [], sympy.Integer(1)
    for n in reversed(list(size)):
        strides.append(acc)
        acc = acc * n
    return tuple(reversed(strides))


def is_non_overlapping(size: Sequence, stride: Sequence) -> bool:
    """Whether no two elements share a place (gaps allowed). A symbolic stride is taken as an
    outer dim's and its bound is not checked."""
    dims = sorted(((s, n) for n, s in zip(size, stride) if n != 1), key=lambda p: int_or_big(p[0]))
    expected = sympy.Integer(1)
    for s, n in dims:
        if int_or_big(s) == 0:
            return False
        try:
            if int(s) < int(expected):
                return False
        except TypeError:
            pass
        expected = s * n
    return True


def fresh_strides(size: Sequence, stride: Sequence) -> tuple:
    """The strides of a result computed into memory of its own: its FakeTensor's, unless they
    overlap, which no such result of eager's does. A FakeTensor may keep an expanded input's
    zero stride (torch 2.11's select_scatter of an expanded gradient, fuzz seed 500530: its
    views then read every element from the first); eager's kernel writes it contiguous."""
    if any(int_or_big(n) == 0 for n in size) or is_non_overlapping(size, stride):
        return tuple(stride)
    return contiguous_strides(size)


def int_or_big(s):
    """``s`` as an int; a symbolic ``s`` as a number larger than any (it sorts last)."""
    try:
        return int(s)
    except TypeError:
        return 1 << 62   # symbolic: larger than any number


@dataclass
class Pointwise:
    ranges: list
    fn: Callable[[list], Value]

    def kind(self):
        return "pointwise"


@dataclass
class Reduction:
    ranges: list          # output dims (keepdim dims included, as 1)
    red_ranges: list      # reduced dims
    reduction_type: str   # sum prod max min argmax argmin any all xor_sum
    fn: Callable[[list, list], Value]   # element to reduce, given (output index, reduced index)
    src_dtype: torch.dtype

    def kind(self):
        return "reduction"


@dataclass(eq=False)
class Buffer:
    name: str
    layout: Layout
    origins: list = field(default_factory=list)   # "aten.op" names this buffer came from
    source: list = field(default_factory=list)    # user source lines ("file:line code")

    @property
    def dtype(self):
        return self.layout.dtype

    def reads(self) -> set[str]:
        return set()


@dataclass(eq=False)
class InputBuffer(Buffer):
    position: int = 0
    # a backward's saved tensor that AOTAutograd donated: its storage may be written over
    # once it is dead (capture/donated_inputs.py)
    donated: bool = False


@dataclass(eq=False)
class ComputedBuffer(Buffer):
    body: Any = None                  # Pointwise | Reduction
    mutates: Optional[str] = None     # name of the buffer whose storage this writes into
    # a scatter into ``mutates``: loop index -> (storage index, indirect binds, mask or None);
    # the index may hold symbols bound to data (``E.indirect_symbol``), as a gather's load does
    scatter: Optional[Callable] = None
    store_mode: str = "store"         # or an atomic update: "atomic_add", "atomic_max", ...
    _reads: Optional[set] = None

    def reads(self) -> set[str]:
        if self._reads is None:
            from .expr import loads_of
            from .indexing import index_symbol
            idx = [index_symbol(f"i{k}") for k in range(len(self.body.ranges))]
            if isinstance(self.body, Reduction):
                ridx = [index_symbol(f"r{k}") for k in range(len(self.body.red_ranges))]
                vs = [self.body.fn(idx, ridx)]
            else:
                vs = [self.body.fn(idx)]
            if self.scatter is not None:
                _, binds, mask = self.scatter(idx)
                vs += [v for _, v in binds] + ([mask] if mask is not None else [])
            self._reads = {ld.args[0] for v in vs for ld in loads_of(v)}
        return self._reads


@dataclass(eq=False)
class ExternBuffer(Buffer):
    """``op(*args, **kwargs)`` called from the wrapper. Tensor arguments are buffer names
    (wrapped in ``BufferArg``); ``kind`` is "extern" (a vendor library) or "fallback" (ATen)."""
    op: Any = None
    args: tuple = ()
    kwargs: dict = field(default_factory=dict)
    kind: str = "extern"
    reason: str = ""
    # for multi-output ops: this buffer is element ``item`` of the op's result tuple
    tuple_of: Optional[str] = None
    item: Optional[int] = None
    layout_is_exact: bool = True
    # the buffer whose memory the result shares (an ATen view op run as a fallback, such as
    # view(dtype)): reading the result is reading that buffer, for the ordering of writes
    view_of: Optional[str] = None

    def reads(self) -> set[str]:
        out = set()
        collect_buffer_args(self.args, out)
        collect_buffer_args(tuple(self.kwargs.values()), out)
        if self.tuple_of:
            out.add(self.tuple_of)
        return out


@dataclass(eq=False)
class UserKernelCall(Buffer):
    """A user Triton kernel launch; its tensor arguments are buffer names. It writes the
    arguments listed in ``writes`` in place (their buffers were copied first where needed)."""
    kernel: Any = None
    kernel_name: str = ""
    grid: Any = None
    tensor_args: dict = field(default_factory=dict)   # param -> BufferArg
    const_args: dict = field(default_factory=dict)
    writes: tuple = ()
    certain: bool = True

    def reads(self) -> set[str]:
        out = set()
        collect_buffer_args(tuple(self.tensor_args.values()), out)
        return out


@dataclass(frozen=True)
class BufferArg:
    """A tensor argument of a wrapper-level call: a buffer, seen through an optional view."""
    name: str
    size: tuple = None
    stride: tuple = None
    offset: Any = 0
    is_view: bool = False


def collect_buffer_args(args, out: set):
    for a in args:
        if isinstance(a, BufferArg):
            out.add(a.name)
        elif isinstance(a, (list, tuple)):
            collect_buffer_args(a, out)


# gm.meta key (capture/aot.py sets it on a forward graph): positions of the outputs that
# AOTAutograd hands to the caller as they are; a view among them is returned as a real view
PLAIN_OUTPUTS = "solder_plain_outputs"
# gm.meta key (capture/donated_inputs.py sets it on a backward graph): the placeholder names
# whose storage the graph may write over once they are dead
DONATED_INPUTS = "solder_donated_inputs"
