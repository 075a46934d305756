"""Writes: view scatters, index scatters, masked scatter, and copy_ (in-place updates).

Three kinds of write, cheapest first:
  region scatter  slice/select/diagonal/as_strided_scatter whose region has a closed-form
                  inverse (``regions.py``) is a ``ScatterVirtual``: ``where(i in region,
                  src[inverse(i)], base[i])``, computed wherever it is read. Nested scatters on
                  one base compose as nested where()s, so they are one pass over the base.
  store scatter   the region has no inverse (an overlapping as_strided) or the places come from
                  data (index_put, scatter*, masked_scatter_backward): a copy kernel writes the
                  base into a fresh buffer, then a store kernel, fused with whatever computes the
                  values and indices, writes each value to its place: ``tl.store``, or an atomic
                  update where duplicates accumulate. Readers read the store's buffer name, which
                  orders them after it.
  copy_           into a graph input (AOTAutograd's epilogue for in-place ops on inputs): an
                  in-place store, narrowed to the region when the new value is a region scatter
                  of the old one. Into anything else the graph is functional: the written value
                  is rebound, with every alias of it, to a region scatter.
Out-of-range indices are skipped rather than checked (eager raises).
"""
from __future__ import annotations

import sympy
import torch

from ..ir import expr as E
from ..ir.indexing import product, strided_offset, unravel
from ..ir.nodes import ComputedBuffer, ExternBuffer, InputBuffer, Layout, Pointwise, contiguous_strides
from .index_checks import check_in_range
from .indexing import wrapped
from .regions import (all_of, diagonal_region, is_dense, position_region, select_region,
                      slice_region, strided_region)
from .registry import Call, Decline, lowering
from ..ir.values import (Stored, TensorValue, Virtual, VirtualView, broadcast_index, loader_of,
                      sym, sym_list)

aten = torch.ops.aten
BOOL = torch.bool
HALF = (torch.float16, torch.bfloat16)


class ScatterVirtual(Virtual):
    """``base`` with ``region`` replaced by ``src``; loads of each side are masked to its part."""

    def __init__(self, base: TensorValue, src: TensorValue, region, dtype, device, stride,
                 origins=()):
        self.base, self.src, self.region = base, src, region

        def fn(idx):
            inside, j = region.inverse(idx)
            new = E.cast(src.load(broadcast_index(j, src.size, region.size)), dtype)
            if inside is None:
                return new
            old = E.cast(base.load(idx), dtype)
            outside = E.call("logical_not", inside, dtype=BOOL)
            return E.call("where", inside, E.with_mask(new, inside), E.with_mask(old, outside),
                          dtype=dtype)

        super().__init__(base.size, dtype, device, fn, stride=stride, origins=origins)


def _int_or(x):
    try:
        return int(x)
    except TypeError:
        return x


def _norm_index(i, n):
    i = _int_or(i)
    return i + n if isinstance(i, int) and i < 0 else i


# -- view scatters ----------------------------------------------------------------------------

@lowering(aten.as_strided_scatter.default)
def _as_strided_scatter(call: Call, base, src, size, stride, storage_offset=None):
    """Eager's result has the input's layout (gaps, overlap and storage offset kept), and the
    view's offset is absolute in that storage: positions are taken relative to the result's
    first element, whatever its layout."""
    # (the input's layout: the FakeTensor of the result is a clone, at offset 0 in a storage
    # of its own, dense where the input has gaps)
    meta = call.node.args[0].meta["val"]
    meta_offset, layout = sym(meta.storage_offset()), sym_list(meta.stride())
    if any(n != 1 and s == 0 for n, s in zip(meta.shape, meta.stride())):
        # an input that certainly overlaps itself (expanded) is cloned by eager instead: a
        # fresh contiguous tensor at offset 0
        meta_offset, layout = sym(0), list(contiguous_strides(call.size))
    offset = (storage_offset if storage_offset is not None else meta_offset) - meta_offset
    if any(n == 0 for n in size):  # writes nothing
        return Virtual(call.size, call.dtype, call.device, base.load, stride=call.stride)
    if is_dense(call.size, layout):
        region = strided_region(call.size, layout, size, stride, offset)
        if region is None:
            return _store_region(call, base, src, size, stride, offset)
    else:
        region = position_region(call.size, layout, size, stride, offset)
        if region is None:
            raise Decline("as_strided_scatter of a view that overlaps itself into an input "
                          "that overlaps itself or has gaps")
    return ScatterVirtual(base, src, region, call.dtype, call.device, call.stride)


@lowering(aten.slice_scatter.default)
def _slice_scatter(call: Call, base, src, dim=0, start=None, end=None, step=1):
    dim = dim % base.ndim
    n = base.size[dim]
    start = 0 if start is None else _int_or(_norm_index(start, n))
    if isinstance(start, int) and isinstance(_int_or(n), int):
        # (a start before the first element is the first, as in slicing: x[-7::3] of 4 rows)
        start = max(0, min(start, int(n)))
    region = slice_region(base.size, dim, start, end, step, src.size[dim])
    return ScatterVirtual(base, src, region, call.dtype, call.device, call.stride)


@lowering(aten.select_scatter.default)
def _select_scatter(call: Call, base, src, dim, index):
    dim = dim % base.ndim
    region = select_region(base.size, dim, _norm_index(index, base.size[dim]))
    return ScatterVirtual(base, src, region, call.dtype, call.device, call.stride)


@lowering(aten.diagonal_scatter.default)
def _diagonal_scatter(call: Call, base, src, offset=0, dim1=0, dim2=1):
    dim1, dim2 = dim1 % base.ndim, dim2 % base.ndim
    region = diagonal_region(base.size, offset, dim1, dim2, src.size[-1])
    return ScatterVirtual(base, src, region, call.dtype, call.device, call.stride)


def _store_region(call, base, src, size, stride, offset):
    """An overlapping region: copy the base, then store ``src`` through the view. Where two view
    elements share a place, one of them wins, as with eager's copy_ on the same device."""
    g = call.graph
    target = _copy_of(call, base, call.dtype)
    if any(sympy.expand(a - b) != 0 for a, b in zip(target.layout.stride, call.stride)):
        raise Decline("as_strided_scatter on a base whose output layout is not dense")
    size = list(size)

    def place(j):
        return strided_offset(j, stride, offset), (), None

    value = loader_of(src, size, call.dtype)
    buf = ComputedBuffer(g.new_name(), target.layout, body=Pointwise(size, value),
                         mutates=target.buffer, scatter=place)
    g.add_buffer(buf)
    return Stored(buf.name, target.layout)


# -- copy_ / copy -----------------------------------------------------------------------------

@lowering(aten.copy_.default)
def _copy_(call: Call, dst, src, non_blocking=False):
    if isinstance(src, TensorValue) and src.device != dst.device:
        raise Decline("copy_ across devices")
    g = call.graph
    if isinstance(dst, Stored) and isinstance(g.by_name.get(dst.buffer), InputBuffer):
        return _store_into(call, dst, src)
    return _rebind(call, dst, src)


def _same(a, b) -> bool:
    return len(a) == len(b) and all(sympy.expand(sympy.sympify(x) - y) == 0 for x, y in zip(a, b))


def _same_place(t, dst: Stored) -> bool:
    return (isinstance(t, Stored) and t.buffer == dst.buffer and _same(t.size, dst.size)
            and _same(t.layout.stride, dst.layout.stride)
            and sympy.expand(t.layout.offset - dst.layout.offset) == 0)


def _store_into(call, dst: Stored, src):
    """An in-place store into a graph input. When the new value is the old one with a region
    replaced (AOTAutograd's ``copy_(x, slice_scatter(x, ...))``), only the region is written."""
    g = call.graph
    writer = g.by_name.get(getattr(src, "buffer", None))
    if isinstance(writer, ComputedBuffer) and writer.mutates == dst.buffer and \
            _same_place(Stored(dst.buffer, src.layout, dst.root_meta_offset), dst):
        return dst  # the scatter already wrote into the input (``_writes_back``)
    while (isinstance(src, ScatterVirtual) and src.dtype == dst.dtype
           and _same(src.size, dst.size) and _same_place(src.base, dst)):
        size, stride, offset = src.region.layout_on(dst.size, dst.layout.stride,
                                                    dst.layout.offset) or (None,) * 3
        if size is None:
            break
        dst = Stored(dst.buffer, Layout(tuple(size), tuple(stride), sympy.expand(offset),
                                        dst.dtype, dst.device), dst.root_meta_offset)
        src = src.src
    load = loader_of(src, dst.size, dst.dtype)
    sample_idx = [sympy.Symbol(f"c{k}", integer=True, nonnegative=True) for k in range(dst.ndim)]
    store_at = dst.layout.index(sample_idx)
    reads = E.loads_of(load(sample_idx))
    races = any(ld.args[0] == dst.buffer and (sympy.expand(ld.args[1] - store_at) != 0 or ld.args[3])
                for ld in reads)
    others = _written_inputs(g) - {dst.buffer}
    if races or any(ld.args[0] in others for ld in reads):
        # the new value reads other elements of the destination, or another input this graph
        # also writes (a.copy_(b); b.copy_(f(a)): each write would wait for the other): compute
        # it first
        tmp = g.compute(dst.size, dst.dtype, dst.device, load)
        load = tmp.load
    buf = ComputedBuffer(g.new_name(), dst.layout, body=Pointwise(list(dst.size), load),
                         mutates=dst.buffer)
    g.add_buffer(buf)
    return dst


def _written_inputs(g) -> set:
    """The graph inputs that a ``copy_`` writes (AOTAutograd's epilogue), by buffer name."""
    found = getattr(g, "_written_input_buffers", None)
    if found is None:
        found = set()
        for node in g.gm.graph.nodes:
            if node.op == "call_function" and node.target is aten.copy_.default:
                v = g.env.get(node.args[0]) if isinstance(node.args[0], torch.fx.Node) else None
                if isinstance(v, Stored) and isinstance(g.by_name.get(v.buffer), InputBuffer):
                    found.add(v.buffer)
        g._written_input_buffers = found
    return found


def _rebind(call, dst, src):
    """copy_ into a value that is not a graph input: the graph stays functional. The written
    value becomes a region scatter of the old one, and so does every alias of it in the graph."""
    g = call.graph
    if isinstance(dst, Stored):  # a buffer of this graph: rebind every view of it
        root = g.by_name[dst.buffer].layout
        base = Stored(dst.buffer, root, dst.root_meta_offset)
        base_stride = list(root.stride)
        view = (dst.size, list(dst.layout.stride), dst.layout.offset)

        def alias(v):
            if isinstance(v, Stored) and v.buffer == dst.buffer:
                return v.size, list(v.layout.stride), v.layout.offset
            return None
    else:
        base = dst.base if isinstance(dst, VirtualView) else dst
        base_stride = list(base.stride)
        view = (dst.size, list(dst.stride), dst.offset) if isinstance(dst, VirtualView) else \
            (dst.size, base_stride, sympy.Integer(0))

        def alias(v):
            if v is base:
                return base.size, base_stride, sympy.Integer(0)
            if isinstance(v, VirtualView) and v.base is base:
                return v.size, list(v.stride), v.offset
            return None
    region = strided_region(base.size, base_stride, *view)
    if region is None:  # (an ATen fallback would not update the aliases: refuse, loudly)
        raise NotImplementedError("copy_ into an overlapping view of a value that is not a "
                                  "graph input")
    new = ScatterVirtual(base, src, region, base.dtype, base.device, base_stride,
                         origins=[call.op_name])

    def view_of(geometry):
        size, stride, offset = geometry
        if _same(size, base.size) and _same(stride, base_stride) and sympy.sympify(offset) == 0:
            return new
        return VirtualView(new, size, stride, offset)

    for node, v in list(g.env.items()):
        geometry = alias(v)
        if geometry is not None:
            g.env[node] = view_of(geometry)
    return view_of(view)


@lowering(aten.copy.default)
def _copy(call: Call, dst, src, non_blocking=False):
    if isinstance(src, TensorValue) and src.device != dst.device:
        raise Decline("copy across devices")
    load = loader_of(src, call.size, call.dtype)
    return Virtual(call.size, call.dtype, call.device, load, stride=call.stride)


# -- store scatters: a copy kernel, then a store kernel ---------------------------------------

def _copy_of(call, base, dtype, read_after=False) -> Stored:
    """A fresh buffer holding ``base`` in the op's output layout: the target of a scatter. Or
    the graph input ``base`` itself, when the result goes back into it (AOTAutograd's
    ``copy_(x, index_put(x, ...))`` for ``x.index_put_(...)``) and nothing else reads it:
    neither another op nor, ``read_after``, the lowering itself once the scatter wrote."""
    g = call.graph
    if not read_after and _writes_back(call, base, dtype):
        return base
    return g.compute(call.size, dtype, call.device, lambda idx: E.cast(base.load(idx), dtype),
                     stride=call.stride)


def _writes_back(call, base, dtype) -> bool:
    g = call.graph
    node, base_node = call.node, call.node.args[0]
    if not (isinstance(base, Stored) and isinstance(g.by_name.get(base.buffer), InputBuffer)
            and base.dtype == dtype and base.layout == g.by_name[base.buffer].layout
            and _same(base.layout.stride, call.stride)):
        return False
    back = [u for u in node.users if u.target is aten.copy_.default and u.args[0] is base_node
            and u.args[1] is node]
    # nothing else reads the input, before or after: its old value is needed nowhere
    return bool(back) and set(base_node.users) == {node, *back}


def _acc_dtype(dtype, mode):
    if mode == "store":
        return dtype
    if dtype in HALF:
        return torch.float32  # accumulate in float32, round once at the end
    if dtype == BOOL or (not dtype.is_floating_point and dtype.itemsize < 4):
        raise Decline(f"no {mode} for {dtype} in generated code")
    return dtype


def _scatter(call, target: Stored, loop_size, value, place, mode) -> Stored:
    """A store kernel over ``loop_size``: ``value(idx)`` goes to ``place(idx)`` = (index of the
    target, indirect binds, mask) of ``target``."""
    g = call.graph
    layout = target.layout
    if any(n == 0 for n in loop_size):  # nothing to store
        return target

    def at(idx):
        coords, binds, mask = place(idx)
        return layout.index(coords), binds, mask

    buf = ComputedBuffer(g.new_name(), layout,
                         body=Pointwise(list(loop_size), lambda idx: E.cast(value(idx), layout.dtype)),
                         mutates=target.buffer, scatter=at, store_mode=mode)
    g.add_buffer(buf)
    return Stored(buf.name, layout)


def _cast_back(call, t: TensorValue) -> TensorValue:
    if t.dtype == call.dtype:
        return t
    stride = list(t.layout.stride) if isinstance(t, Stored) else list(t.stride)
    return Virtual(call.size, call.dtype, call.device, lambda idx: E.cast(t.load(idx), call.dtype),
                   stride=stride)


def _in_range(v: E.Value, n) -> E.Value:
    return E.call("logical_and", E.call("ge", v, E.const(0, torch.int64), dtype=BOOL),
                  E.call("lt", v, E.index_value(n), dtype=BOOL), dtype=BOOL)


def _broadcast_sizes(sizes) -> list:
    nd = max(len(s) for s in sizes)
    out = []
    for k in range(nd):
        dims = [s[len(s) - nd + k] for s in sizes if len(s) - nd + k >= 0]
        big = [d for d in dims if d != 1]
        out.append(big[0] if big else sympy.Integer(1))
    return out


@lowering(aten.index_put.default, aten._unsafe_index_put.default)
def _index_put(call: Call, base, indices, values, accumulate=False):
    indices = list(indices) + [None] * (base.ndim - len(indices))
    present = [d for d, t in enumerate(indices) if t is not None]
    if not present:
        raise Decline("index_put with no index tensors")
    if any(indices[d].dtype == BOOL for d in present):
        if len(present) != 1:
            raise Decline("a boolean index together with other indices")
        return _index_put_mask(call, base, indices[present[0]], present[0], values, accumulate)
    if any(indices[d].dtype not in (torch.int64, torch.int32) for d in present):
        raise Decline("index tensors of an unusual dtype")
    mode = "atomic_add" if accumulate else "store"
    for d in present:
        check_in_range(call, indices[d], base.size[d], negative_ok=True)
    bshape = _broadcast_sizes([indices[d].size for d in present])
    nb = len(bshape)
    adjacent = present == list(range(present[0], present[-1] + 1))
    first = present[0] if adjacent else 0
    rest = [d for d in range(base.ndim) if d not in present]
    if adjacent:
        vshape = list(base.size[:first]) + bshape + list(base.size[present[-1] + 1:])
    else:
        vshape = bshape + [base.size[d] for d in rest]

    def place(idx):
        bidx = idx[first:first + nb]
        others = iter(list(idx[:first]) + list(idx[first + nb:]))
        coords, binds, conds = [], [], []
        for d in range(base.ndim):
            if d in present:
                t = indices[d]
                v = wrapped(call, t.load(broadcast_index(bidx, t.size, bshape)), base.size[d])
                s = E.indirect_symbol(v)
                coords.append(s)
                binds.append((s, v))
                conds.append(_in_range(v, base.size[d]))
            else:
                coords.append(next(others))
        return coords, tuple(binds), all_of(conds)

    value = loader_of(values, vshape)
    target = _copy_of(call, base, _acc_dtype(call.dtype, mode))
    return _cast_back(call, _scatter(call, target, vshape, value, place, mode))


def _mask_rank(call, mask, size) -> Stored:
    """The running count of true elements of ``mask`` (broadcast to ``size``), row-major, flat,
    inclusive. A prefix sum: ATen's cumsum, as a library call (generated code has no scan)."""
    g = call.graph
    n = product(size)
    flat = g.compute([n], torch.int64, call.device, lambda f: E.cast(
        mask.load(broadcast_index(unravel(f[0], size), mask.size, size)), torch.int64))
    layout = Layout((n,), (sympy.Integer(1),), sympy.Integer(0), torch.int64, call.device)
    buf = ExternBuffer(g.new_name(), layout, op=aten.cumsum.default, args=(g.as_arg(flat), 0),
                       kind="extern", origins=["aten.cumsum"])
    g.add_buffer(buf)
    return Stored(buf.name, layout)


def _rank_at(rank: Stored, idx, size) -> E.Value:
    """0-based rank among the true elements of the element at ``idx`` of ``size``."""
    flat = strided_offset(idx, contiguous_strides(size))
    return E.call("sub", rank.load([flat]), E.const(1, torch.int64), dtype=torch.int64)


def _flat_load(s: Stored, k: E.Value, ok: E.Value) -> E.Value:
    """Element ``k`` (a data-dependent value) of ``s`` in row-major order."""
    sym = E.indirect_symbol(k)
    return E.load(s.buffer, s.layout.index(unravel(sym, s.size)), s.dtype, mask=ok,
                  indirect=((sym, k),))


def _index_put_mask(call, base, mask, first, values, accumulate):
    """``base[..., mask, ...] = values``: a select where values broadcast over the selected
    elements, else values taken in order (a running count of the mask)."""
    size, dtype = call.size, call.dtype
    k = mask.ndim
    trailing = base.ndim - first - k
    nd = values.ndim
    count_dim = nd - trailing - 1  # values' dim that runs over the selected elements
    old = loader_of(base, size, dtype)

    def is_set(idx):
        return E.cast(mask.load(idx[first:first + k]), BOOL)

    spread = count_dim < 0 or values.size[count_dim] == 1
    n = sympy.Integer(1) if spread else values.size[count_dim]
    vfull = list(size[:first]) + [n] + list(size[first + k:])
    if spread:
        def new(idx):
            vidx = list(idx[:first]) + [sympy.Integer(0)] + list(idx[first + k:])
            return E.cast(values.load(broadcast_index(vidx, values.size, vfull)), dtype)
    else:
        rank = _mask_rank(call, mask, mask.size)
        vals = call.graph.realize(values)

        def new(idx):
            r = _rank_at(rank, idx[first:first + k], mask.size)
            sym = E.indirect_symbol(r)
            vidx = list(idx[:first]) + [sym] + list(idx[first + k:])
            vidx = broadcast_index(vidx, values.size, vfull)
            ok = E.call("logical_and", is_set(idx), _in_range(r, n), dtype=BOOL)
            v = E.load(vals.buffer, vals.layout.index(vidx), vals.dtype, mask=ok,
                       indirect=((sym, r),))
            return E.cast(v, dtype)

    def fn(idx):
        m = is_set(idx)
        v = E.with_mask(new(idx), m)
        if accumulate:
            v = E.call("add", old(idx), v, dtype=dtype)
        return E.call("where", m, v, old(idx), dtype=dtype)
    return Virtual(size, dtype, call.device, fn, stride=call.stride)


@lowering(aten.masked_scatter.default)
def _masked_scatter(call: Call, base, mask, source):
    size, dtype = call.size, call.dtype
    rank = _mask_rank(call, mask, size)
    src = call.graph.realize(source)
    n_src = product(source.size)
    old = loader_of(base, size, dtype)

    def fn(idx):
        m = E.cast(mask.load(broadcast_index(idx, mask.size, size)), BOOL)
        r = _rank_at(rank, idx, size)
        ok = E.call("logical_and", m, E.call("lt", r, E.index_value(n_src), dtype=BOOL), dtype=BOOL)
        new = E.cast(_flat_load(src, r, ok), dtype)
        return E.call("where", m, new, E.with_mask(old(idx), E.call("logical_not", m, dtype=BOOL)),
                      dtype=dtype)
    return Virtual(size, dtype, call.device, fn, stride=call.stride)


@lowering(aten.masked_scatter_backward.default)
def _masked_scatter_backward(call: Call, grad, mask, sizes):
    gsize = grad.size
    rank = _mask_rank(call, mask, gsize)
    n = product(call.size)

    def place(idx):
        r = _rank_at(rank, idx, gsize)
        sym = E.indirect_symbol(r)
        m = E.cast(mask.load(broadcast_index(idx, mask.size, gsize)), BOOL)
        ok = E.call("logical_and", m, E.call("lt", r, E.index_value(n), dtype=BOOL), dtype=BOOL)
        return unravel(sym, call.size), ((sym, r),), ok

    zeros = Virtual(call.size, call.dtype, call.device, lambda idx: E.const(0, call.dtype))
    target = _copy_of(call, zeros, call.dtype)
    return _scatter(call, target, gsize, grad.load, place, "store")


# -- scatter / scatter_add / scatter_reduce ---------------------------------------------------

_REDUCE = {"sum": "atomic_add", "add": "atomic_add", "amax": "atomic_max", "amin": "atomic_min"}


def _identity(reduce, dtype):
    if reduce in ("sum", "add", "mean"):
        return 0
    big = float("inf") if dtype.is_floating_point else torch.iinfo(dtype).max
    return -big if reduce == "amax" else big


@lowering(aten.scatter.src, aten.scatter.value, aten.scatter.reduce, aten.scatter.value_reduce,
          aten.scatter_add.default, aten.scatter_reduce.two)
def _scatter_family(call: Call, base, dim, index, src, reduce=None, include_self=True):
    if call.node.target is aten.scatter_add.default:
        reduce = "sum"
    if reduce in ("multiply", "prod"):
        raise Decline(f"scatter reduce={reduce!r}: no atomic multiply in generated code")
    dim = dim % max(base.ndim, 1)
    loop = list(index.size)
    n = base.size[dim] if base.ndim else sympy.Integer(1)
    check_in_range(call, index, n, negative_ok=False)

    def place(idx):
        v = wrapped(call, index.load(idx), n)
        if base.ndim == 0:  # one place (0-d index and src too)
            return [], (), _in_range(v, n)
        s = E.indirect_symbol(v)
        coords = list(idx)
        coords[dim] = s
        return coords, ((s, v),), _in_range(v, n)

    value = loader_of(src, loop)
    if reduce is None and _one_index_per_line(base, index, dim):
        return _scatter_one_hot(call, base, dim, index, value, n)
    if reduce is None:
        return _scatter(call, _copy_of(call, base, call.dtype), loop, value, place, "store")
    if reduce == "mean":
        return _scatter_mean(call, base, loop, value, place, include_self)
    mode = _REDUCE[reduce]
    acc = _acc_dtype(call.dtype, mode)
    # (amax/amin of floats read the input's NaNs after the scatter: _nan_wins)
    nan_of_input = reduce in ("amax", "amin") and acc.is_floating_point and include_self
    target = _copy_of(call, base, acc, read_after=nan_of_input)
    if not include_self:  # the reduction starts from its identity where anything lands
        ident = _identity(reduce, acc)
        target = _scatter(call, target, loop, lambda idx: E.const(ident, acc), place, "store")
    out = _scatter(call, target, loop, value, place, mode)
    if reduce in ("amax", "amin") and acc.is_floating_point:
        out = _nan_wins(call, base, out, loop, value, place, acc, include_self)
    return _cast_back(call, out)


def _nan_wins(call, base, out: Stored, loop, value, place, acc, include_self) -> TensorValue:
    """amax/amin propagate NaN in eager; atomic max/min keep a number over a NaN. A NaN source
    is stored after every atomic update (a kernel of its own: the scatter orders it), and a NaN
    of the input it reduces into is kept where it is."""
    def nan_place(idx):
        coords, binds, ok = place(idx)
        bad = E.call("isnan", E.cast(value(idx), acc), dtype=BOOL)
        return coords, binds, bad if ok is None else E.call("logical_and", ok, bad, dtype=BOOL)
    out = _scatter(call, out, loop, lambda idx: E.const(float("nan"), acc), nan_place, "store")
    if not include_self:
        return out

    def fn(idx):
        old = E.cast(base.load(idx), acc)
        return E.call("where", E.call("isnan", old, dtype=BOOL), old, out.load(idx), dtype=acc)
    return Virtual(out.size, acc, call.device, fn, stride=out.layout.stride)


def _one_index_per_line(base, index, dim) -> bool:
    """Every line of ``base`` along ``dim`` receives exactly one index (nll_loss's backward:
    ``zeros.scatter(1, target[:, None], -1)``)."""
    if base.ndim == 0 or index.ndim != base.ndim or index.size[dim] != 1:
        return False
    return all(d == dim or sympy.expand(index.size[d] - base.size[d]) == 0
               for d in range(base.ndim))


def _scatter_one_hot(call, base, dim, index, value, n):
    """One index per line: each element is the scattered value where its position along ``dim``
    equals the line's index, else the base's. One pass, fused with producer and consumer."""
    dtype = call.dtype

    def fn(idx):
        line = list(idx)
        line[dim] = sympy.Integer(0)
        hit = E.call("eq", E.index_value(idx[dim]), wrapped(call, index.load(line), n),
                     dtype=torch.bool)
        return E.call("where", hit, E.cast(value(line), dtype), E.cast(base.load(idx), dtype),
                      dtype=dtype)
    return Virtual(call.size, dtype, call.device, fn, stride=call.stride)


def _scatter_mean(call, base, loop, value, place, include_self):
    dtype = call.dtype
    acc = _acc_dtype(dtype, "atomic_add")
    total = _copy_of(call, base, acc)
    if not include_self:
        total = _scatter(call, total, loop, lambda idx: E.const(0, acc), place, "store")
    total = _scatter(call, total, loop, value, place, "atomic_add")
    start = Virtual(call.size, acc, call.device, lambda idx: E.const(int(include_self), acc))
    count = call.graph.compute(call.size, acc, call.device, start.load, stride=call.stride)
    count = _scatter(call, count, loop, lambda idx: E.const(1, acc), place, "atomic_add")
    div = "truediv" if acc.is_floating_point else "floordiv"

    def fn(idx):
        n = E.call("maximum", count.load(idx), E.const(1, acc), dtype=acc)
        return E.cast(E.call(div, total.load(idx), n, dtype=acc), dtype)
    return Virtual(call.size, dtype, call.device, fn, stride=call.stride)


# -- what data-dependent shapes leave behind --------------------------------------------------

@lowering(aten._assert_scalar.default)
def _assert_scalar(call: Call, cond, msg=None):
    # range facts about a size a fallback returned (u0 >= 0, u0 <= numel): nothing to compute
    return None
