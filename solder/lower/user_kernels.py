"""User-written Triton kernels: lowering of ``triton_kernel_wrapper_mutation`` (and ``_functional``)
and their launch from the generated wrapper.

Capture's reinplace pass (``capture/reinplace.py``) has turned each functional call into a
mutation call on the tensors the kernel may write where they are (an explicit
``user_kernel_arg_clone`` where a copy is needed). Lowering a launch:
  1. puts every tensor argument in memory in eager's exact layout: a value not yet in memory has
     its whole storage realized (an ``empty`` output is only allocated), and every lowered value
     of that storage is rebound to it, so views and the kernel's own stride arguments address the
     same elements as in eager;
  2. computes now the pending pointwise values that read a buffer the kernel writes and are used
     after the launch (recomputed later, they would see the new value);
  3. adds a ``UserKernelLaunch`` and, per written buffer, a ``UserKernelResult``: a new name for
     the same storage after the launch. Lowered values on the old name are rebound to the new one,
     so later readers wait for the launch, and the scheduler runs the launch after every reader of
     the old name.
The wrapper calls a ``runtime.user_kernel.UserKernelLauncher`` (kept in ``CONSTS``), which
launches through Triton itself, so autotuning and heuristics behave as in eager code.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Optional

import sympy
import torch
import torch.fx as fx

from ..capture.reinplace import (EMPTY_OPS, FUNCTIONAL, INFO, MUTATION, kernel_label,
                                 kernel_writes, storage_span, user_kernel_arg_clone,
                                 user_kernel_input_write)
from ..ir import expr as E
from ..ir.nodes import ComputedBuffer, Layout, Pointwise, UserKernelCall
from .registry import Call, lowering
from ..ir.values import Stored, Virtual, VirtualView, loader_of, map_nested

aten = torch.ops.aten


@dataclass(eq=False)
class UserKernelLaunch(UserKernelCall):
    """The launch itself; ``tensor_args`` are its tensor parameters, ``scalar_args`` its size
    parameters (sympy where symbolic), ``const_args`` the rest (fixed at capture)."""
    scalar_args: dict = field(default_factory=dict)
    tma: dict = field(default_factory=dict)
    config_kwargs: Optional[list] = None   # per autotune config, when there is a grid per config
    site: str = ""
    aliases: list = field(default_factory=list)   # (result name, written buffer name)


@dataclass(eq=False)
class UserKernelResult(UserKernelCall):
    """Buffer ``written`` after launch ``call`` wrote it: the same tensor under a new name."""
    call: str = ""
    written: str = ""

    def reads(self) -> set[str]:
        return {self.call}


@dataclass(eq=False)
class UserKernelAlloc(UserKernelCall):
    """Storage for an ``empty`` a kernel fills: allocated, never initialized (as in eager)."""

    def reads(self) -> set[str]:
        return set()


def _error(msg: str):
    from .graph import LoweringError
    return LoweringError(msg)


# --- lowerings ----------------------------------------------------------------------------------

@lowering(MUTATION)
def _mutation(call: Call, *, kernel_idx, constant_args_idx, grid, tma_descriptor_metadata,
              kwargs):
    g, node = call.graph, call.node
    fx_kwargs = node.kwargs["kwargs"]
    kernel = _kernel(kernel_idx)
    keys = _tensor_keys(fx_kwargs)
    info = node.meta.get(INFO)
    if info is not None:
        written, certain, reason = set(info["written"]), info["certain"], info["reason"]
        decisions = info["decisions"]
    else:   # a mutation call from the user's graph itself: it writes in place by definition
        written, certain, reason = kernel_writes(kernel, keys)
        decisions = {k: "in place" for k in written}
    values = {k: resident(g, fx_kwargs[k]) for k in keys}
    _launch(call, kernel, constant_args_idx, grid, tma_descriptor_metadata, fx_kwargs, values,
            written, certain, reason, decisions)
    return None


@lowering(FUNCTIONAL)
def _functional(call: Call, *, kernel_idx, constant_args_idx, grid, tma_descriptor_metadata,
                kwargs, tensors_to_clone):
    """Unreinplaced form: every written argument is copied first (one copy per distinct tensor,
    so an argument passed twice stays one tensor to the kernel)."""
    g, node = call.graph, call.node
    fx_kwargs = node.kwargs["kwargs"]
    kernel = _kernel(kernel_idx)
    keys = _tensor_keys(fx_kwargs)
    written, certain, reason = kernel_writes(kernel, keys)
    values, copies = {}, {}
    for k in keys:
        a = fx_kwargs[k]
        values[k] = resident(g, a)
        if any(fx_kwargs[j] is a for j in written):
            if a not in copies:
                copies[a] = span_copy(g, values[k])
            values[k] = copies[a]
    decisions = {k: "clone kept: functional call not reinplaced" for k in written}
    renames = _launch(call, kernel, constant_args_idx, grid, tma_descriptor_metadata, fx_kwargs,
                      values, written, certain, reason, decisions)
    out = {}
    for k in tensors_to_clone:
        v = values[k]
        out[k] = Stored(renames.get(v.buffer, v.buffer), v.layout, v.root_meta_offset)
    return out


@lowering(user_kernel_arg_clone)
def _arg_clone(call: Call, x):
    return span_copy(call.graph, resident(call.graph, call.node.args[0]))


@lowering(user_kernel_input_write)
def _input_write(call: Call, dst, src):
    """The final value of a graph input, stored into its storage (under the name a user kernel's
    in-place write gave it)."""
    g = call.graph
    if not isinstance(dst, Stored):
        raise _error(f"graph {g.graph_name}: {call.node.name} writes a value not in memory")
    load = loader_of(src, dst.size, dst.dtype)
    idx = [sympy.Symbol(f"c{k}", integer=True, nonnegative=True) for k in range(dst.ndim)]
    at = dst.layout.index(idx)
    if any(ld.args[0] == dst.buffer and (sympy.expand(ld.args[1] - at) != 0 or ld.args[3])
           for ld in E.loads_of(load(idx))):
        load = g.compute(dst.size, dst.dtype, dst.device, load).load  # reads other elements
    g.add_buffer(ComputedBuffer(g.new_name(), dst.layout, body=Pointwise(list(dst.size), load),
                                mutates=dst.buffer))
    return dst


# --- arguments in memory ------------------------------------------------------------------------

def _kernel(idx):
    from torch._higher_order_ops.triton_kernel_wrap import kernel_side_table
    return kernel_side_table.get_kernel(idx)


def _tensor_keys(fx_kwargs) -> list:
    return [k for k, v in fx_kwargs.items()
            if isinstance(v, fx.Node) and isinstance(v.meta.get("val"), torch.Tensor)]


def resident(g, node: fx.Node) -> Stored:
    """FX node ``node``'s value in memory, laid out as in eager: a value not in memory has its
    whole storage realized, and every lowered value of that storage is rebound to it."""
    own = g.env[node]
    if isinstance(own, (Virtual, VirtualView)):
        v = _root_virtual(own)
        members = [m for m in g.env if isinstance(m, fx.Node) and isinstance(
            g.env[m], (Virtual, VirtualView)) and _root_virtual(g.env[m]) is v]
        base = _realize_root(g, v, [m for m in members if g.env[m] is v])
        for m in members:
            t = g.env[m]
            g.env[m] = base if t is v else base.view(t.size, t.stride, t.offset)
    out = g.env[node]
    meta = node.meta["val"]
    if not isinstance(out, Stored) or not _same_strides(out, meta):
        raise _error(f"graph {g.graph_name}: {node.name} would reach the user kernel laid out as "
                     f"{out!r}, eager has strides {list(meta.stride())}")
    return out


def _same_strides(t: Stored, meta) -> bool:
    for n, a, b in zip(meta.size(), t.layout.stride, meta.stride()):
        if isinstance(n, int) and n == 1:
            continue
        if sympy.expand(sympy.sympify(a) - _sym(b)) != 0:
            return False
    return True


def _sym(x):
    return x.node.expr if isinstance(x, torch.SymInt) else sympy.Integer(int(x))


def _root_virtual(t):
    return t.base if isinstance(t, VirtualView) else t


def _realize_root(g, v: Virtual, nodes) -> Stored:
    if any(n.op == "call_function" and n.target in EMPTY_OPS for n in nodes):
        layout = Layout(tuple(v.size), tuple(v.stride), sympy.Integer(0), v.dtype, v.device)
        buf = g.add_buffer(UserKernelAlloc(g.new_name(), layout))
        return Stored(buf.name, layout)
    return g.realize(v, stride=v.stride)


def span_copy(g, src: Stored) -> Stored:
    """A copy of the storage span ``src`` covers, seen with ``src``'s sizes and strides."""
    lay = src.layout
    span = sympy.sympify(storage_span(lay.size, lay.stride))
    flat = Layout((span,), (sympy.Integer(1),), sympy.Integer(0), lay.dtype, lay.device)
    body = Pointwise([span], lambda idx: E.load(src.buffer, lay.offset + idx[0], lay.dtype))
    buf = g.add_buffer(ComputedBuffer(g.new_name(), flat, body=body))
    return Stored(buf.name, Layout(lay.size, lay.stride, sympy.Integer(0), lay.dtype, lay.device))


def _settle_old_readers(g, node: fx.Node, names: set):
    """Pending values that read ``names`` and are used after ``node`` are computed now."""
    pos = {n: i for i, n in enumerate(g.gm.graph.nodes)}
    here = pos[node]
    for m in list(g.env):
        if not isinstance(m, fx.Node) or pos.get(m, here) >= here:
            continue
        if any(pos.get(u, here + 1) > here for u in m.users):
            g.env[m] = map_nested(g.env[m], lambda v: _realize_if_reads(g, v, names))


def _realize_if_reads(g, v, names):
    if not isinstance(v, (Virtual, VirtualView)):
        return v
    idx = [sympy.Symbol(f"u{k}", integer=True, nonnegative=True) for k in range(v.ndim)]
    if any(ld.args[0] in names for ld in E.loads_of(v.load(idx))):
        return g.realize(v)
    return v


def _rebind(g, renames: dict):
    for m in list(g.env):
        g.env[m] = map_nested(g.env[m], lambda v: _renamed(v, renames))


def _renamed(v, renames: dict):
    if isinstance(v, Stored) and v.buffer in renames:
        return Stored(renames[v.buffer], v.layout, v.root_meta_offset)
    return v


# --- the launch ---------------------------------------------------------------------------------

def _launch(call: Call, kernel, constant_args_idx, grid, tma, fx_kwargs, values: dict,
            written: set, certain: bool, reason: str, decisions: dict) -> dict:
    """Adds the launch and its results; returns {written buffer: its name after the launch}."""
    from torch._higher_order_ops.triton_kernel_wrap import kernel_side_table
    g, node = call.graph, call.node
    label = kernel_label(kernel)
    site = g.current_source[0] if g.current_source else f"node {node.name}"
    where = f"user Triton kernel {label}, called at {site} (graph {g.graph_name})"
    consts = dict(kernel_side_table.get_constant_args(constant_args_idx))
    grids = _check_grids(grid, kernel, where)
    _check_autotune(kernel, values, where)
    for name, meta in (tma or {}).items():
        if not meta or meta[0] != "stable":
            raise _error(f"{where}: argument {name} is an experimental TMA descriptor, which "
                         "Solder does not support (use triton.tools.tensor_descriptor)")
    scalars = {k: v for k, v in call_args(call).items() if k not in values}
    written_bufs = {values[k].buffer for k in written if k in values}
    _settle_old_readers(g, node, written_bufs)
    launch = UserKernelLaunch(
        g.new_name(), None, kernel=kernel, kernel_name=label, grid=grids,
        tensor_args={k: g.as_arg(v) for k, v in values.items()}, const_args=consts,
        writes=tuple(sorted(k for k in written if k in values)), certain=certain,
        scalar_args=scalars, tma=dict(tma or {}), site=site,
        config_kwargs=[dict(c.kwargs) for c in kernel.configs] if len(grids) > 1 else None)
    g.add_buffer(launch)
    renames = {}
    for b in sorted(written_bufs):
        res = UserKernelResult(g.new_name(), g.by_name[b].layout, call=launch.name, written=b)
        g.add_buffer(res)
        launch.aliases.append((res.name, b))
        renames[b] = res.name
    _rebind(g, renames)
    _report(g, label, site, written, certain, reason, decisions, values, renames)
    return renames


def call_args(call: Call) -> dict:
    """The kernel's non-tensor arguments that travel in the graph (sizes, possibly symbolic)."""
    g = call.graph
    out = {}
    for k, v in call.node.kwargs["kwargs"].items():
        if isinstance(v, fx.Node):
            if isinstance(v.meta.get("val"), torch.Tensor):
                continue
            out[k] = g.env[v]
        else:
            out[k] = v
    return out


def _check_grids(grid, kernel, where) -> list:
    grids = list(grid) if isinstance(grid, (list, tuple)) else [grid]
    if not grids:
        raise _error(f"{where}: no grid")
    for gr in grids:
        if isinstance(gr, (list, tuple)) and len(gr) > 3:
            raise _error(f"{where}: grid {tuple(gr)} has {len(gr)} dimensions; Triton grids have "
                         "at most 3")
        if not isinstance(gr, (list, tuple)) and not callable(gr):
            raise _error(f"{where}: grid {gr!r} is neither a tuple nor a function of the meta "
                         "parameters")
    if len(grids) > 1:
        configs = getattr(kernel, "configs", None)
        if configs is None or len(configs) != len(grids):
            raise _error(f"{where}: {len(grids)} grids (one per autotune config) but the kernel "
                         f"has {len(configs) if configs is not None else 'no'} autotune configs; "
                         "Solder cannot tell which grid goes with the config the autotuner picks")
    return grids


def _check_autotune(kernel, values, where):
    """Autotune features that name arguments must name tensors this launch passes."""
    for attr in ("restore_value", "reset_to_zero"):
        names = getattr(kernel, attr, None) or []
        bad = [n for n in names if n not in values]
        if bad:
            raise _error(f"{where}: @triton.autotune({attr}={list(names)}) names {bad}, which "
                         "are not tensor arguments of this call; Solder cannot honour it")


def _report(g, label, site, written, certain, reason, decisions, values, renames):
    parts = [f"{label} at {site}"]
    if not certain:
        parts.append(f"analysis uncertain ({reason}): every tensor argument counts as written")
    parts.append("writes " + (", ".join(sorted(written)) if written else "nothing"))
    for k in sorted(written):
        if k in values:
            b = values[k].buffer
            parts.append(f"{k}: {decisions.get(k, 'in place')}; writes buffer {b}, named "
                         f"{renames.get(b, b)} after the launch")
    g.__dict__.setdefault("user_kernel_reports", []).append("; ".join(parts))


# --- the wrapper --------------------------------------------------------------------------------

def emit_user_kernel(w, buf):
    """Wrapper code for a launch (and for the buffers around it)."""
    if isinstance(buf, UserKernelAlloc):
        w.emit("# storage a user kernel fills")
        w._alloc(buf)
        return
    if isinstance(buf, UserKernelResult):
        return  # bound right after its launch, while the written buffer is still in scope
    from ..runtime.user_kernel import UserKernelLauncher
    launcher = UserKernelLauncher(buf.kernel, buf.kernel_name, buf.site, w.graph_name,
                                  buf.const_args, buf.config_kwargs, buf.tma)
    grids = "[" + ", ".join(_grid_source(w, gr) for gr in buf.grid) + "]"
    args = [f"{k}={w._arg(v)}" for k, v in buf.tensor_args.items()]
    args += [f"{k}={w._arg(v)}" for k, v in buf.scalar_args.items()]
    writes = ", ".join(buf.writes) or "nothing"
    w.emit(f"# user Triton kernel {buf.kernel_name} (writes {writes}), from {buf.site}")
    w.emit(f"{buf.name} = {w._arg(launcher)}({', '.join([grids] + args)})")
    for alias, written in buf.aliases:
        w.emit(f"{alias} = {written}")


def _grid_source(w, gr) -> str:
    if isinstance(gr, (list, tuple)):
        items = [w._arg(x) for x in gr]
        return "(" + ", ".join(items) + ("," if len(items) == 1 else "") + ")"
    return w._arg(gr)
