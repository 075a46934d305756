"""Lower one functional ATen FX graph into Solder's IR: an ordered list of buffers.

Walks the graph in order. Each node becomes a ``TensorValue``: views become layouts (or index
remaps of unmaterialized values), ops with a lowering become ``Virtual`` values or computed
buffers, and everything else becomes an ATen fallback call. A ``Virtual`` turns into a buffer
(is "realized") only where it must live in memory: a graph output, an argument of a library call,
or a value read by several consumers that is too expensive to recompute.
"""
from __future__ import annotations

import operator
from typing import Any, Optional

import sympy
import torch
import torch.fx as fx

from ..config import Config
from ..ir import expr as E
from ..ir.target import Target
from ..ir.nodes import (DONATED_INPUTS, PLAIN_OUTPUTS, BufferArg, Buffer, ComputedBuffer,
                        ExternBuffer, InputBuffer, Layout, Pointwise, contiguous_strides,
                        fresh_strides, int_or_big, is_non_overlapping)
from ..provenance import source_of
from . import registry
from .registry import Call, Decline, op_name
from ..ir.values import Stored, TensorValue, Virtual, VirtualView, map_nested, sym, sym_list

aten = torch.ops.aten


class LoweringError(RuntimeError):
    pass


def _lowered(a, env: dict):
    """A node's argument with nodes replaced by their lowered values."""
    if isinstance(a, fx.Node):
        return env[a]
    if isinstance(a, (torch.SymInt, torch.SymBool)):
        return sym(a)
    return a


def _strides_agree(size, stride, other) -> bool:
    """Whether two layouts of ``size`` step alike in every dim of more than one element."""
    return all(n == 1 or sympy.expand(a - b) == 0 for n, a, b in zip(size, stride, other))


def _stored_if_realized(a, v, realized: dict):
    """A value an earlier op stored (a library call's operand) as its buffer, for every later
    op: ResNet's pooled stem, stored for the next convolution, was computed again (nine
    window reads, each with its batch norm) by the residual add that reads it. Only a computed
    value (not a view: its offset is its base's) whose buffer has its own layout, eager's
    strides and offset, which views of it index through; and only one that reads more than one
    element to compute each of its own (a cast or a scale of one tensor costs a read either way,
    and computed again it keeps no buffer alive: ``x.float()`` stored for a matmul stays two
    bytes a read where ``x`` is bfloat16)."""
    if not isinstance(v, Virtual) or not isinstance(a, fx.Node):
        return v
    got = realized.get(id(v))
    meta = a.meta.get("val")
    # (sym: a symbolic offset is compared as an expression, not evaluated into a guard)
    if got is None or not isinstance(meta, torch.Tensor) or sym(meta.storage_offset()) != 0:
        return v
    stored = got[1]
    if sympy.sympify(stored.layout.offset) != 0 or not _strides_agree(
            v.size, stored.layout.stride, v.stride):
        return v
    idx = [sympy.Symbol(f"i{k}", integer=True, nonnegative=True) for k in range(len(v.size))]
    return stored if len(E.loads_of(v.load(idx))) > 1 else v


class GraphLowering:
    def __init__(self, gm: fx.GraphModule, kind: str, config: Config, graph_name: str,
                 target: Target):
        self.gm = gm
        self.target = target   # what the code generator can emit (ir/target.py)
        self.kind = kind
        self.config = config
        self.graph_name = graph_name
        self.buffers: list[Buffer] = []
        self.by_name: dict[str, Buffer] = {}
        self.inputs: list[tuple[str, str, Any]] = []   # (kind "tensor"/"symint"/"other", name, meta)
        self.outputs: list[Any] = []
        # outputs the caller gets as they are (ir/nodes.py PLAIN_OUTPUTS); None: not known
        self.plain_outputs = gm.meta.get(PLAIN_OUTPUTS)
        self.fallbacks: list[tuple[str, str]] = []
        self.constants: list[tuple[str, torch.Tensor]] = []   # tensors the graph holds
        self.env: dict[fx.Node, Any] = {}
        self.rand_slots = 0
        # float scalars of symbolic sizes (SDPA's scale 1/sqrt(head_dim)): the wrapper computes
        # each in Python from the sizes and passes it to the kernels as a float argument
        self.host_scalars: dict[sympy.Symbol, sympy.Expr] = {}
        self.current_origins: list[str] = []
        self.current_source: list[str] = []
        # id(value) -> (value, its buffer): the value is held, so that its id is not reused by a
        # later value while the entry stands (a realized view, not held by its buffer, was freed
        # and a new value at its address got its buffer)
        self._realized: dict[int, tuple[TensorValue, Stored]] = {}
        self._counter = 0
        # the accelerator the graph runs on; CPU tensors in such a graph (ATen makes 0-d CPU
        # scalars for `x[i] = 1.0` on a GPU tensor; index tensors may stay on the CPU) are
        # handled by home_device and _touches_cpu
        self.device = _graph_device(gm)

    def host_scalar(self, e: sympy.Expr) -> sympy.Symbol:
        """A symbol standing for the float expression ``e`` of sizes (see ``host_scalars``)."""
        for s, known in self.host_scalars.items():
            if known == e:
                return s
        s = sympy.Symbol(f"hs{len(self.host_scalars)}", real=True)
        self.host_scalars[s] = e
        return s

    # -- buffers --------------------------------------------------------------------------
    def new_name(self, prefix="buf") -> str:
        self._counter += 1
        return f"{prefix}{self._counter - 1}"

    def add_buffer(self, buf: Buffer) -> Buffer:
        if not buf.origins:
            buf.origins = list(self.current_origins)
        if not buf.source:
            buf.source = list(self.current_source)
        self.buffers.append(buf)
        self.by_name[buf.name] = buf
        return buf

    def compute(self, size, dtype, device, fn, stride=None, origins=None, source=None) -> Stored:
        """A new buffer computed by generated code, elementwise."""
        stride = _dense_or_contiguous(size, stride)
        layout = Layout(tuple(size), tuple(stride), sympy.Integer(0), dtype, device)
        buf = ComputedBuffer(self.new_name(), layout, origins=list(origins or []),
                             source=list(source or []), body=Pointwise(list(size), fn))
        self.add_buffer(buf)
        return Stored(buf.name, layout)

    def realize(self, t: TensorValue, stride=None) -> Stored:
        if isinstance(t, Stored):
            return t
        cached = self._realized.get(id(t))
        if cached is not None:
            return cached[1]
        if isinstance(t, Virtual):
            out = self.compute(t.size, t.dtype, t.device, t.load, stride or t.stride,
                               *self.provenance(t))
        elif isinstance(t, VirtualView):
            base = t.base
            b = None
            if _numel(t.size) == _numel(base.size) or stride is None and _is_expand_of(t):
                # a permutation/reshape/expand of the whole value: store it once, view it,
                # where the stored base has eager's layout (the view's strides address that)
                b = self.realize(base)
                if not _strides_agree(base.size, b.layout.stride, base.stride):
                    b = None
            if b is not None:
                out = b.view(t.size, t.stride, t.offset)
            else:
                out = self.compute(t.size, t.dtype, t.device, t.load, stride or t.stride,
                                   *self.provenance(base))
        else:
            raise TypeError(t)
        self._realized[id(t)] = (t, out)
        return out

    def provenance(self, t: TensorValue) -> tuple[list, list]:
        """(ATen ops, user lines) that computed ``t``: a value realized after its own op's
        lowering (by a later op, or as an output) is named after what computed it, not after
        the op being lowered then."""
        if isinstance(t, VirtualView):
            t = t.base
        if isinstance(t, Stored):
            buf = self.by_name.get(t.buffer)
            return (list(buf.origins), list(buf.source)) if buf is not None else ([], [])
        return list(getattr(t, "origins", [])), list(getattr(t, "source", []))

    def realize_dense(self, t: TensorValue) -> Stored:
        """In memory with a non-overlapping layout (for library calls that write or need it)."""
        s = self.realize(t)
        if is_non_overlapping(s.layout.size, s.layout.stride):
            return s
        return self.compute(s.size, s.dtype, s.device, s.load)

    def home_device(self, val: torch.Tensor) -> torch.device:
        """Where a value lives in Solder's code: a 0-d CPU scalar of a GPU graph moves to the
        GPU (eager mixes such scalars freely with GPU tensors)."""
        if self.device is not None and val.device.type == "cpu" and val.dim() == 0:
            return self.device
        return val.device

    def _touches_cpu(self, node, args) -> bool:
        """An op of a GPU graph that reads or makes a CPU tensor (other than a 0-d scalar
        result) runs in ATen: generated kernels address GPU memory only."""
        if self.device is None:
            return False
        if any(isinstance(a, TensorValue) and a.device.type == "cpu" for a in _flat(args)):
            return True
        val = node.meta.get("val")
        outs = val if isinstance(val, (list, tuple)) else [val]
        return any(isinstance(o, torch.Tensor) and o.device.type == "cpu" and o.dim() > 0
                   for o in outs)

    # -- the walk -------------------------------------------------------------------------
    def run(self):
        registry.load_lowerings()
        placeholder = 0
        for node in self.gm.graph.nodes:
            if node.op == "placeholder":
                self._placeholder(node, placeholder)
                placeholder += 1
            elif node.op == "call_function":
                self.current_origins = [op_name(node.target)]
                self.current_source = source_of(node)
                try:
                    self.env[node] = self._call(node)
                except Decline:
                    raise
                except LoweringError:
                    raise
                except Exception as e:  # a lowering bug must name the op and the graph
                    raise LoweringError(
                        f"Solder failed to lower {op_name(node.target)} (node {node.name}) in "
                        f"graph {self.graph_name}: {type(e).__name__}: {e}") from e
            elif node.op == "output":
                self._output(node)
            elif node.op == "get_attr":
                self.env[node] = self._constant(node)
        # every body must be complete now: evaluating one may not create buffers later
        count = len(self.buffers)
        for b in list(self.buffers):
            b.reads()
        if len(self.buffers) != count:
            raise LoweringError(f"graph {self.graph_name}: a lowering created buffers lazily "
                                f"({[b.name for b in self.buffers[count:]]})")
        return self

    def _placeholder(self, node, position):
        val = node.meta.get("val")
        if isinstance(val, torch.Tensor):
            name = f"arg{position}"
            layout = Layout(tuple(sym_list(val.shape)), tuple(sym_list(val.stride())),
                            sympy.Integer(0), val.dtype, val.device)
            donated = node.name in self.gm.meta.get(DONATED_INPUTS, ())
            self.add_buffer(InputBuffer(name, layout, position=position, donated=donated))
            self.inputs.append(("tensor", name, val))
            self.env[node] = Stored(name, layout, root_meta_offset=sym(val.storage_offset()))
        elif isinstance(val, (torch.SymInt, torch.SymFloat, torch.SymBool)):
            self.inputs.append(("symint", f"arg{position}", val))
            self.env[node] = sym(val)
        else:
            self.inputs.append(("other", f"arg{position}", val))
            self.env[node] = val

    def _constant(self, node):
        value = getattr(self.gm, node.target)
        if isinstance(value, torch.Tensor) and value.dim() == 0 and self.home_device(
                value) != value.device:
            # a CPU scalar of a GPU graph: its value is known now, so it is a constant
            from torch._subclasses.fake_tensor import unset_fake_temporarily
            with unset_fake_temporarily():   # the lowering runs under the graph's fake mode
                number = value.item()
            return Virtual([], value.dtype, self.device,
                           lambda idx: E.const(number, value.dtype), origins=["constant"])
        if isinstance(value, torch.Tensor):
            # a tensor the graph holds (not an input): the wrapper binds it like an input
            name = f"const{len(self.constants)}"
            layout = Layout(tuple(sym_list(value.shape)), tuple(sym_list(value.stride())),
                            sympy.Integer(0), value.dtype, value.device)
            self.add_buffer(InputBuffer(name, layout, position=-1))
            self.constants.append((name, value))
            return Stored(name, layout, root_meta_offset=value.storage_offset())
        return value

    def _args(self, node):
        # (not a closure that calls itself: that is a reference cycle, and it held the whole
        # lowered graph until Python's cycle collector ran)
        env, realized = self.env, self._realized

        def lowered(a):
            return _stored_if_realized(a, _lowered(a, env), realized)
        return (map_nested(node.args, lowered),
                {k: map_nested(v, lowered) for k, v in node.kwargs.items()})

    def _call(self, node):
        val = node.meta.get("val")
        target = node.target
        args, kwargs = self._args(node)
        if target is operator.getitem:
            return args[0][args[1]]
        if isinstance(val, (torch.SymInt, torch.SymFloat, torch.SymBool)):
            e = sym(val)
            if isinstance(val, torch.SymFloat) and not (e.is_Symbol or e.is_Number):
                return self.host_scalar(e)
            return e
        if isinstance(val, (int, float, bool)) and not isinstance(target, torch._ops.OpOverload):
            return val
        view = self._as_view(node, args)
        if view is not None:
            return view
        unlowered = _unlowered_dtype(node)
        if unlowered is not None:
            return self.fallback(node, args, kwargs, "complex dtypes are not lowered"
                                 if unlowered.is_complex else f"{unlowered} is not lowered")
        if self._touches_cpu(node, args):
            return self.fallback(node, args, kwargs, f"reads or makes a CPU tensor in a "
                                 f"{self.device.type} graph: runs in ATen, as eager would")
        fn = registry.lookup(target)
        if fn is None:
            return self.fallback(node, args, kwargs, f"no lowering for {op_name(target)}")
        try:
            out = fn(Call(self, node), *args, **kwargs)
        except Decline as why:
            return self.fallback(node, args, kwargs, str(why))
        self._tag(out, node, args)
        out = _with_meta_strides(out, node.meta.get("val"))
        broadcast = isinstance(out, Virtual) and self._read_broadcast_by_several(node)
        if isinstance(out, Virtual) and (len(node.users) > 1 or broadcast):
            sample = out.load([sympy.Symbol(f"q{k}", integer=True, nonnegative=True)
                               for k in range(out.ndim)])
            if (len(node.users) > 1 and (
                    E.count_ops(sample) > self.config.inline_max_ops
                    or len(E.buffers_read(sample)) > self.config.inline_max_reads)
                    or broadcast and self._holds_costly_op(sample)):
                out = self.realize(out, stride=out.stride)
        return out

    def _read_broadcast_by_several(self, node) -> bool:
        """Whether the target stores costly values (``Target.stored_when_broadcast``) and more
        than one op reads this node's value (directly or through views of it), one of them
        with more elements than the value has: read broadcast, computing it again costs it
        per read element."""
        if not self.target.stored_when_broadcast:
            return False
        mine = _numel(node.meta.get("val"))
        readers = list(_reader_numels(node))
        return mine is not None and len(readers) > 1 and any(
            n is not None and n > mine for n in readers)

    def _holds_costly_op(self, sample) -> bool:
        costly = self.target.stored_when_broadcast
        return any(x.op == "call" and x.args[0] in costly for x in E.walk(sample))

    def _tag(self, out, node, args):
        """Record which ATen ops and user lines a value fuses (for kernel comments and
        explain): its own, then those of the values it inlines."""
        if isinstance(out, (list, tuple)):   # an op with several results
            for o in out:
                self._tag(o, node, args)
            return
        if isinstance(out, Virtual):
            origins, source = [op_name(node.target)], list(self.current_source)
            for a in _flat(args):
                base = a.base if isinstance(a, VirtualView) else a
                if isinstance(base, Virtual):
                    origins.extend(o for o in base.origins if o not in origins)
                    source.extend(s for s in base.source if s not in source)
            out.origins, out.source = origins, source

    def _as_view(self, node, args) -> Optional[Any]:
        """A view op (its schema says the result aliases its first argument) lowers to a layout
        on that argument's storage, whatever the op: as_strided, unfold, diagonal, permute, ..."""
        if not _is_view_op(node.target):
            return None
        val = node.meta.get("val")
        base_node = next((a for a in node.args if isinstance(a, fx.Node)), None)
        if base_node is None or not isinstance(base_node.meta.get("val"), torch.Tensor):
            return None
        base_val = base_node.meta["val"]
        outs = val if isinstance(val, (list, tuple)) else [val]
        if not outs or not all(isinstance(o, torch.Tensor) for o in outs):
            return None
        if any(o.dtype != base_val.dtype for o in outs):
            return None  # a dtype-reinterpreting view (view(dtype)): let ATen do it
        if any(o.is_conj() != base_val.is_conj() or o.is_neg() != base_val.is_neg()
               for o in outs):
            return None  # _conj / _neg_view: same storage, but read conjugated or negated
        base = self.env[base_node]
        layout = _actual_layout(base, base_val)
        if layout is not None:
            # the FakeTensor's strides overlap where the value's do not (ir/nodes.py
            # fresh_strides): views taken from them read the wrong elements, so the view op
            # runs again on a meta tensor laid out as the value is
            outs, base_val = _view_on(node, base_node, layout, self.graph_name)
            outs = outs if isinstance(outs, (list, tuple)) else [outs]
        views = [self._view_of(base, o, base_val) for o in outs]
        return views if isinstance(val, (list, tuple)) else views[0]

    def _view_of(self, base: TensorValue, out_meta, base_meta=None) -> TensorValue:
        size, stride = sym_list(out_meta.shape), sym_list(out_meta.stride())
        offset = sym(out_meta.storage_offset())
        if isinstance(base, Stored) and base_meta is not None and not _stored_as_meta(
                base, base_meta):
            # the base is in memory in another layout than eager's (a padded matmul's rows,
            # say): eager's view strides address eager's layout, so go through the values
            values = Virtual(base.size, base.dtype, base.device, base.load,
                             stride=sym_list(base_meta.stride()))
            return VirtualView(values, size, stride,
                               offset - sym(base_meta.storage_offset()))
        if isinstance(base, Stored):
            return base.view(size, stride, offset)
        # a view of a value not in memory: its offset relative to the value's own
        relative = offset - sym(base_meta.storage_offset()) if base_meta is not None else offset
        if isinstance(base, VirtualView):
            return VirtualView(base.base, size, stride, relative + base.offset)
        return VirtualView(base, size, stride, relative)

    # -- fallbacks ------------------------------------------------------------------------
    def as_arg(self, t: TensorValue) -> BufferArg:
        s = self.realize(t)
        buf = self.by_name[s.buffer]
        is_view = (tuple(s.layout.size) != tuple(buf.layout.size)
                   or tuple(s.layout.stride) != tuple(buf.layout.stride)
                   or s.layout.offset != buf.layout.offset)
        return BufferArg(s.buffer, tuple(s.layout.size), tuple(s.layout.stride),
                         s.layout.offset, is_view)

    def _as_args(self, a):
        """An extern call's argument: tensors as buffer arguments, in lists and tuples too."""
        return map_nested(a, lambda x: self.as_arg(x) if isinstance(x, TensorValue) else x)

    def extern_call(self, node, op, args, kwargs, kind: str, reason: str = ""):
        """Call ``op`` from the wrapper; its tensor results become buffers."""
        cargs = self._as_args(tuple(args))
        ckwargs = {k: self._as_args(v) for k, v in kwargs.items()}
        val = node.meta.get("val")
        name = self.new_name()
        if kind == "fallback":
            self.fallbacks.append((op_name(op), reason))
        if isinstance(val, torch.Tensor):
            buf = ExternBuffer(name, self._extern_layout(val, args, op), op=op, args=cargs, kwargs=ckwargs,
                               kind=kind, reason=reason)
            if _is_view_op(op):
                buf.view_of = next((a.name for a in cargs if isinstance(a, BufferArg)), None)
            self.add_buffer(buf)
            return Stored(name, buf.layout)
        if isinstance(val, (list, tuple)):
            call = ExternBuffer(name, None, op=op, args=cargs, kwargs=ckwargs, kind=kind,
                                reason=reason)
            self.add_buffer(call)
            outs = []
            base = next((a.name for a in cargs if isinstance(a, BufferArg)), None) \
                if _is_view_op(op) else None
            for i, v in enumerate(val):
                if isinstance(v, torch.Tensor):
                    item = ExternBuffer(self.new_name(), self._extern_layout(v, args, op), kind="item",
                                        tuple_of=name, item=i, view_of=base)
                    self.add_buffer(item)
                    outs.append(Stored(item.name, item.layout))
                else:
                    outs.append(v)
            return type(val)(outs) if isinstance(val, tuple) else outs
        # scalar or None result: call it for its effect / value is not supported in-graph
        if val is None:
            buf = ExternBuffer(name, None, op=op, args=cargs, kwargs=ckwargs, kind=kind,
                               reason=reason)
            self.add_buffer(buf)
            return None
        raise Decline(f"{op_name(op)} returns a python scalar")

    def _extern_layout(self, val: torch.Tensor, args, op) -> Layout:
        """The result's layout; a 0-d result FakeTensor put on the CPU is on the GPU when
        ATen gets GPU inputs (Solder moved the CPU scalars they came from there). A result
        of an op that is not a view is fresh memory: never overlapping (ir/nodes.py
        fresh_strides; the wrapper copies ATen's result into this layout where they differ)."""
        layout = _layout_of(val)
        if not _is_view_op(op):
            layout = Layout(layout.size, fresh_strides(layout.size, layout.stride),
                            layout.offset, layout.dtype, layout.device)
        home = self.home_device(val)
        if home == val.device or not any(isinstance(a, TensorValue) and a.device == home
                                         for a in _flat(args)):
            return layout
        return Layout(layout.size, layout.stride, layout.offset, layout.dtype, home)

    def fallback(self, node, args, kwargs, reason: str):
        return self.extern_call(node, node.target, args, kwargs, "fallback", reason)

    # -- outputs --------------------------------------------------------------------------
    def _output(self, node):
        (results,) = node.args
        metas = [r.meta.get("val") if isinstance(r, fx.Node) else r for r in results]
        done: dict = {}   # a node returned twice is one value (the wrapper returns one tensor)
        for r, meta in zip(results, metas):
            if isinstance(r, fx.Node) and r in done:
                self.outputs.append(done[r])
                continue
            v = self.env[r] if isinstance(r, fx.Node) else r
            if isinstance(v, TensorValue):
                # a value not yet stored is named after the ops that computed it
                # (``provenance``); a copy into eager's layout after the op that returns it
                # (a view of a padded matmul), never after the graph's last op
                called = isinstance(r, fx.Node) and r.op == "call_function"
                self.current_origins = [op_name(r.target)] if called else []
                self.current_source = source_of(r) if called else []
                v = self._realize_output(v, meta)
            if isinstance(r, fx.Node):
                done[r] = v
            self.outputs.append(v)

    def _realize_output(self, v: TensorValue, meta) -> Stored:
        """Outputs keep eager's exact layout: a backward graph was traced against it."""
        if not isinstance(meta, torch.Tensor):
            return self.realize(v)
        if meta.device != v.device:   # a CPU scalar computed on the GPU: eager returns it on the CPU
            buf = ExternBuffer(self.new_name(), _layout_of(meta), op=aten._to_copy.default,
                               args=(self.as_arg(self.realize(v)),),
                               kwargs={"device": meta.device}, kind="extern",
                               reason="a CPU scalar output")
            self.add_buffer(buf)
            return Stored(buf.name, buf.layout)
        meta_stride = sym_list(meta.stride())
        if isinstance(v, VirtualView):
            base = self.realize(v.base)
            if _strides_agree(v.base.size, base.layout.stride, v.base.stride):
                return base.view(v.size, v.stride, v.offset)
            # stored in another layout than eager's (gaps or overlap): the view's strides do
            # not address it; store the view itself
        if isinstance(v, (Virtual, VirtualView)):
            if _dense_or_contiguous(v.size, meta_stride) != tuple(meta_stride) and \
                    is_non_overlapping(v.size, meta_stride) and self._realized.get(id(v)) is None:
                # eager's strides with gaps (a result that keeps its input's sliced layout):
                # kept, with the gaps unwritten, since a backward graph reads it through them
                layout = Layout(tuple(v.size), tuple(meta_stride), sympy.Integer(0), v.dtype,
                                v.device)
                origins, source = self.provenance(v)
                buf = ComputedBuffer(self.new_name(), layout, origins=origins, source=source,
                                     body=Pointwise(list(v.size), v.load))
                self.add_buffer(buf)
                out = Stored(buf.name, layout)
                self._realized[id(v)] = (v, out)
                return out
            return self.realize(v, stride=meta_stride)
        meta_stride = tuple(sym_list(meta.stride()))
        if (tuple(v.layout.stride) != meta_stride and _dense_or_contiguous(v.size, meta_stride)
                == meta_stride and not self._aliases_input(v)):
            # produced in another layout (a padded matmul, say): hand back eager's
            return self.compute(v.size, v.dtype, v.device, v.load, meta_stride)
        return v

    def _aliases_input(self, v: Stored) -> bool:
        return isinstance(self.by_name.get(v.buffer), InputBuffer)


def _with_meta_strides(out, val):
    """``out`` whose values carry eager's strides: views of a value not in memory address it
    through them, and a lowering may not have known them (an op with several results)."""
    if isinstance(out, (list, tuple)) and isinstance(val, (list, tuple)):
        return type(out)(_with_meta_strides(o, v) for o, v in zip(out, val))
    if type(out) is Virtual and isinstance(val, torch.Tensor) and \
            len(out.size) == val.dim():
        stride = list(fresh_strides(out.size, sym_list(val.stride())))
        if list(out.stride) != list(stride):
            return Virtual(out.size, out.dtype, out.device, out.fn, stride=stride,
                           origins=out.origins, source=out.source)
    return out


def _actual_layout(base: TensorValue, meta: torch.Tensor) -> Optional[tuple]:
    """(size, strides, offset) of ``base`` where ``meta`` (its FakeTensor) overlaps itself and
    ``base`` does not; else None."""
    if not isinstance(base, (Stored, Virtual, VirtualView)) or \
            is_non_overlapping(sym_list(meta.shape), sym_list(meta.stride())):
        return None
    if isinstance(base, Stored):
        stride, offset = base.layout.stride, base.layout.offset + base.root_meta_offset
    else:
        stride, offset = base.stride, getattr(base, "offset", 0)
    if not is_non_overlapping(base.size, stride):
        return None   # overlapping in fact too (an expanded input): the FakeTensor is right
    return base.size, stride, offset


def _view_on(node, base_node, layout: tuple, graph_name: str):
    """``node``'s view op applied, on the meta device, to a tensor of ``layout`` in place of
    its base."""
    def refuse():
        raise LoweringError(f"graph {graph_name}: {op_name(node.target)} (node {node.name}) "
                            f"views a value whose FakeTensor overlaps itself, with symbolic "
                            f"sizes or tensor arguments: not lowered")
    try:
        size, stride, offset = ([int(n) for n in layout[0]], [int(s) for s in layout[1]],
                                int(layout[2]))
    except TypeError:
        refuse()
    from torch._subclasses.fake_tensor import unset_fake_temporarily
    with unset_fake_temporarily():
        storage = torch.empty(offset + sum((n - 1) * s for n, s in zip(size, stride)) + 1,
                              device="meta")
        actual = storage.as_strided(size, stride, offset)

        def arg(a):
            if a is base_node:
                return actual
            v = a.meta.get("val") if isinstance(a, fx.Node) else a
            if isinstance(v, (torch.Tensor, torch.SymInt, torch.SymFloat, torch.SymBool)):
                refuse()
            return v
        out = node.target(*map_nested(node.args, arg),
                          **{k: map_nested(v, arg) for k, v in node.kwargs.items()})
    return out, actual


def _stored_as_meta(s: Stored, meta: torch.Tensor) -> bool:
    """Whether ``s`` sits in memory where eager's tensor would (strides and offset), so that
    eager's view strides and offsets address it."""
    if any(sympy.sympify(a - b) != 0 for n, a, b in zip(s.size, s.layout.stride,
                                                          sym_list(meta.stride())) if n != 1):
        return False
    return sympy.sympify(s.layout.offset - (sym(meta.storage_offset()) - s.root_meta_offset)) == 0


def _graph_device(gm) -> Optional[torch.device]:
    for node in gm.graph.nodes:
        val = node.meta.get("val")
        for v in (val if isinstance(val, (list, tuple)) else [val]):
            if isinstance(v, torch.Tensor) and v.device.type not in ("cpu", "meta"):
                return v.device
    return None


# no alias annotation in their schemas, but they return views all the same
_EXTRA_VIEWS = {aten._unsafe_view.default, aten._reshape_alias.default}


def _is_view_op(target) -> bool:
    if target in _EXTRA_VIEWS:
        return True
    if not isinstance(target, torch._ops.OpOverload):
        return False
    schema = target._schema
    if schema.is_mutable or not schema.returns:
        return False
    info = schema.returns[0].alias_info
    return info is not None and not info.is_write


# the dtypes generated code computes in; an op that reads or makes any other (complex, the
# float8 formats, ...) runs in ATen
LOWERED_DTYPES = frozenset({
    torch.float32, torch.float16, torch.bfloat16, torch.float64, torch.int8, torch.int16,
    torch.int32, torch.int64, torch.uint8, torch.bool, torch.uint16, torch.uint32, torch.uint64})


def _unlowered_dtype(node) -> Optional[torch.dtype]:
    """The first dtype outside ``LOWERED_DTYPES`` among the op's tensors, or None."""
    metas = [node.meta.get("val")]
    metas += [a.meta.get("val") for a in node.all_input_nodes]
    stack = list(metas)
    while stack:
        m = stack.pop()
        if isinstance(m, (list, tuple)):
            stack.extend(m)
        elif isinstance(m, torch.Tensor) and m.dtype not in LOWERED_DTYPES:
            return m.dtype
    return None


def _layout_of(val: torch.Tensor) -> Layout:
    return Layout(tuple(sym_list(val.shape)), tuple(sym_list(val.stride())), sympy.Integer(0),
                  val.dtype, val.device)


def _numel(size):
    out = sympy.Integer(1)
    for n in size:
        out = out * n
    return out


def _is_expand_of(t: VirtualView) -> bool:
    return any(s == 0 for s in t.stride)


def _dense_or_contiguous(size, stride):
    """Eager's strides when they describe a dense, non-overlapping layout; else contiguous."""
    if stride is None or len(stride) != len(size):
        return contiguous_strides(size)
    dims = sorted(range(len(size)), key=lambda d: (int_or_big(stride[d]), -d))
    expected = sympy.Integer(1)
    for d in dims:
        if size[d] == 1:
            continue
        if sympy.expand(stride[d] - expected) != 0:
            return contiguous_strides(size)
        expected = expected * size[d]
    # size-1 dims may carry any stride in eager; give them a consistent one
    return tuple(stride)


def _flat(args):
    for a in args:
        if isinstance(a, (list, tuple)):
            yield from _flat(a)
        else:
            yield a


def _numel(val) -> Optional[int]:
    """A node's element count where it is a tensor of static size."""
    if not isinstance(val, torch.Tensor):
        return None
    n = val.numel()
    return n if isinstance(n, int) else None   # (a symbolic count is not evaluated: no guard)


def _reader_numels(node: fx.Node, depth: int = 0):
    """The element counts of the ops that read ``node``, through views of it (each layer's
    ``cos.unsqueeze(1)`` is read by that layer's products)."""
    for u in node.users:
        if u.op == "call_function" and _is_view_op(u.target) and depth < 8:
            yield from _reader_numels(u, depth + 1)
        else:
            yield _numel(u.meta.get("val"))
