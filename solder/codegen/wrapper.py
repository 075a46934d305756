"""Write a scheduled graph as a Python module: bind sizes, allocate, launch, call, return.

The module defines ``call(args)``. Names it uses but does not define are injected by the runtime:
``K`` (kernel runners by name), ``OPS`` (ATen ops of library calls and fallbacks), ``CONSTS``
(argument values with no literal form), ``S`` (``solder.runtime.support``) and ``R``
(``S.reinterpret``: a view by size, strides and offset increment, without autograd's view
bookkeeping). Allocations take over dead buffers where ``memory_plan`` finds one.
"""
from __future__ import annotations

import sympy
import torch

from ..ir.indexing import FloorDiv, ModIndex
from ..ir.nodes import (BufferArg, ComputedBuffer, ExternBuffer, InputBuffer, UserKernelCall,
                       collect_buffer_args)
from ..ir.values import Stored
from ..schedule.fusion import AllocStep, CallStep, Kernel
from ..lower.extern import OUT_VARIANTS
from .memory_plan import plan_reuse, writes_into_given_storage
from .generated import KernelSource, WrapperModule  # noqa: F401  (generate returns one)


class PyPrinter:
    """sympy size expressions as Python over the bound symbol names."""

    def __call__(self, e) -> str:
        e = sympy.sympify(e)
        if e.is_Integer:
            return str(int(e))
        if e.is_Symbol:
            return str(e)
        if isinstance(e, FloorDiv):
            return f"({self(e.args[0])} // {self(e.args[1])})"
        if isinstance(e, ModIndex):
            return f"({self(e.args[0])} % {self(e.args[1])})"
        if e.is_Add:
            return "(" + " + ".join(self(a) for a in e.args) + ")"
        if e.is_Mul:
            return "(" + " * ".join(self(a) for a in e.args) + ")"
        if e.is_Pow and e.exp.is_Integer and int(e.exp) > 0:
            return "(" + " * ".join([self(e.base)] * int(e.exp)) + ")"
        if isinstance(e, sympy.floor):
            return f"int({self(e.args[0])} // 1)"
        if isinstance(e, sympy.Rational):
            return f"({e.p} / {e.q})"
        # sympy functions that torch's shape env produces (FloorDiv/Mod of its own)
        name = type(e).__name__
        if name in ("FloorDiv",):
            return f"({self(e.args[0])} // {self(e.args[1])})"
        if name in ("Mod", "PythonMod", "ModularIndexing"):
            if name == "ModularIndexing":
                return f"(({self(e.args[0])} // {self(e.args[1])}) % {self(e.args[2])})"
            return f"({self(e.args[0])} % {self(e.args[1])})"
        if name in ("Max",):
            return "max(" + ", ".join(self(a) for a in e.args) + ")"
        if name in ("Min",):
            return "min(" + ", ".join(self(a) for a in e.args) + ")"
        if name in ("CeilDiv", "CleanDiv"):
            a, b = self(e.args[0]), self(e.args[1])
            return f"(-(-{a} // {b}))" if name == "CeilDiv" else f"({a} // {b})"
        # float scalars of sizes, computed as the shape env evaluates them
        if name in ("IntTrueDiv", "FloatTrueDiv"):
            return f"({self(e.args[0])} / {self(e.args[1])})"
        if name == "ToFloat":
            return f"float({self(e.args[0])})"
        if name == "FloatPow":
            return f"({self(e.args[0])} ** {self(e.args[1])})"
        if name == "OpaqueUnaryFn_sqrt":
            return f"math.sqrt({self(e.args[0])})"
        if isinstance(e, sympy.Float):
            return repr(float(e))
        raise NotImplementedError(f"size expression {e} ({name})")


class WrapperGen:
    def __init__(self, graph, steps, kernels: dict[str, KernelSource], graph_name: str,
                 in_place: bool = True):
        self.graph = graph
        self.in_place = in_place   # results may be written over a buffer their kernel reads
        self.steps = steps
        self.kernels = kernels
        self.graph_name = graph_name
        self.p = PyPrinter()
        self.lines: list[str] = []
        self.ops: list = []
        self.consts: list = []
        self.bound: set = set()
        self.devices: dict = {}    # device constants, defined once at module level
        self.plan = None

    def emit(self, text=""):
        self.lines.append("    " + text if text else "")

    def generate(self) -> WrapperModule:
        g = self.graph
        names = [name for _, name, _ in g.inputs]
        if names:
            self.emit(f"{', '.join(names)}{',' if len(names) == 1 else ''} = args")
            # the caller's list let go (AOTAutograd hands a backward its saved activations in
            # it and keeps none): each input is freed after its last use below, not at return
            self.emit("args.clear()")
        for cname, value in g.constants:
            self.consts.append(value)
            self.emit(f"{cname} = CONSTS[{len(self.consts) - 1}]")
        self._bind_symbols()
        for s, e in g.host_scalars.items():
            self.emit(f"{s} = {self.p(e)}  # a float of the sizes, for the kernels")
        self._check_inputs()
        if g.rand_slots:
            dev = self._device()
            self.emit(f"seeds = S.draw_seeds({g.rand_slots}, {dev})")
        last_use = self._last_uses()
        keep = self._output_buffers()
        self.plan = plan_reuse(g, self.steps, last_use, keep, self.in_place)
        if any(getattr(g.by_name.get(d), "donated", False) for d in self.plan.reuse.values()):
            self.emit(f"S.check_donated_inputs({self.graph_name!r})  # it writes over saved "
                      "tensors")
        tensor_inputs = {name for kind, name, _ in g.inputs if kind == "tensor"}
        unused = sorted(tensor_inputs - set(last_use) - keep)
        if unused:
            self.emit(f"del {', '.join(unused)}  # inputs no step reads")
        for i, step in enumerate(self.steps):
            if isinstance(step, Kernel):
                self._kernel(step)
            elif isinstance(step, AllocStep):
                if not step.buffer.mutates:
                    self._alloc(step.buffer)
            else:
                self._call(step.buffer)
            # (an input's name is dropped too: the caller's references decide whether it lives)
            dead = [n for n, last in last_use.items() if last == i and n not in keep
                    and n not in self.plan.donors
                    and (n in tensor_inputs or not isinstance(g.by_name.get(n), InputBuffer))]
            if dead:
                self.emit(f"del {', '.join(sorted(dead))}")
        outs, seen = [], {}
        for i, o in enumerate(g.outputs):
            if id(o) in seen:   # the graph returns one value twice: eager's one tensor, twice
                outs.append(seen[id(o)])
                continue
            text = self._output(o, i)
            if any(o2 is o for o2 in g.outputs[i + 1:]) and not text.isidentifier():
                # a view made here would be a new tensor at each place; the next graph takes
                # two tensors on one storage that are not views of each other, which
                # AOTAutograd refuses for inputs it writes (fuzz seed 730308)
                self.emit(f"out{i} = {text}")
                text = f"out{i}"
            seen[id(o)] = text
            outs.append(text)
        self.emit(f"return ({', '.join(outs)}{',' if len(outs) == 1 else ''})")
        head = [f"# {self.graph_name}: generated by Solder ({g.kind} graph)", "import math",
                "import torch", ""]
        head += [f"{name} = {expr}" for expr, name in self.devices.items()]
        if self.plan.count:
            head.append(f"# {self.plan.count} allocations reuse the storage of dead buffers")
        head += ["", "", "def call(args):"]
        return WrapperModule("\n".join(head + self.lines) + "\n", self.ops, self.consts)

    # -- inputs ---------------------------------------------------------------------------
    def _bind_symbols(self):
        for kind, name, meta in self.graph.inputs:
            if kind == "symint":
                e = meta.node.expr
                if e.is_Symbol and e not in self.bound:
                    self.emit(f"{e} = {name}")
                    self.bound.add(e)
            elif kind == "tensor":
                for d, n in enumerate(meta.shape):
                    self._bind(n, f"{name}.size({d})")
                for d, s in enumerate(meta.stride()):
                    self._bind(s, f"{name}.stride({d})")
                self._bind(meta.storage_offset(), f"{name}.storage_offset()")

    def _bind(self, v, source):
        if isinstance(v, torch.SymInt):
            e = v.node.expr
            if e.is_Symbol and e not in self.bound:
                self.emit(f"{e} = {source}")
                self.bound.add(e)

    def _check_inputs(self):
        if not self.graph.config.check_input_layouts:
            return
        written = self._written_inputs()
        for kind, name, meta in self.graph.inputs:
            if kind != "tensor":
                continue
            size = self._tuple(meta.shape)
            stride = self._tuple(meta.stride())
            # the common case costs two tuple comparisons; the helper sorts out the rest
            self.emit(f"if {name}.stride() != {stride} or {name}.shape != {size}:")
            self.emit(f"    {name} = S.check_input({name}, {size}, {stride}, {name!r}, "
                      f"{self.graph_name!r}{', True' if name in written else ''})")

    def _written_inputs(self) -> set:
        """Inputs the graph writes in place (a copy of them would lose the write)."""
        out = set()
        for b in self.graph.buffers:
            if isinstance(b, ComputedBuffer) and b.mutates:
                out.add(b.mutates)
            elif isinstance(b, UserKernelCall):
                out.update(b.tensor_args[p].name for p in b.writes if p in b.tensor_args)
            elif isinstance(b, ExternBuffer) and getattr(getattr(b.op, "_schema", None),
                                                         "is_mutable", False):
                collect_buffer_args(tuple(b.args) + tuple(b.kwargs.values()), out)
        return out

    def _tuple(self, xs) -> str:
        items = [self.p(x.node.expr if isinstance(x, torch.SymInt) else x) for x in xs]
        return "(" + ", ".join(items) + ("," if len(items) == 1 else "") + ")"

    def _device(self) -> str:
        for b in self.graph.buffers:
            if b.layout is not None:
                return self._device_const(b.layout.device)
        return self._device_const(torch.device("cpu"))

    def _device_const(self, d) -> str:
        expr = f"torch.device({d.type!r}, {d.index})" if d.index is not None \
            else f"torch.device({d.type!r})"
        if expr not in self.devices:
            self.devices[expr] = f"DEVICE_{d.type}" + (f"_{d.index}" if d.index is not None else "")
        return self.devices[expr]

    # -- steps ----------------------------------------------------------------------------
    def _alloc(self, buf):
        lay = buf.layout
        donor = self.plan.reuse.get(buf.name) if self.plan is not None else None
        if donor is not None:
            dlay = self.graph.by_name[donor].layout
            storage = donor if self._tuple(dlay.size) == self._tuple(lay.size) and \
                self._tuple(dlay.stride) == self._tuple(lay.stride) else \
                f"R({donor}, {self._tuple(lay.size)}, {self._tuple(lay.stride)}, 0)"
            if buf.name in self.plan.in_place:   # the donor's name is dropped after the kernel
                self.emit(f"{buf.name} = {storage}  # written in place: its kernel reads "
                          f"{donor} only at the elements it writes")
            else:
                self.emit(f"{buf.name} = {storage}; del {donor}  # reuse")
            return
        dev = self._device_const(lay.device)
        self.emit(f"{buf.name} = torch.empty_strided({self._tuple(lay.size)}, "
                  f"{self._tuple(lay.stride)}, dtype={lay.dtype}, device={dev})")

    def _kernel(self, k: Kernel):
        src = self.kernels[k.name]
        for name in k.stores:
            buf = self.graph.by_name[name]
            if not buf.mutates:
                self._alloc(buf)
        args = []
        for kind, what in src.args:
            if kind == "ptr":
                args.append(what)
            elif kind == "seed":
                args.append(f"seeds[{what}]")
            elif kind == "size":
                args.append(what)
            elif kind == "numel":
                args.append(self.p(k.xnumel if what == "x" else k.rnumel))
        self.emit(f"K[{k.name!r}]({', '.join(args)})")
        for name in k.stores:  # a scatter's result is its target: readers use the scatter's name
            buf = self.graph.by_name[name]
            if getattr(buf, "scatter", None) is not None:
                self.emit(f"{name} = {buf.mutates}")

    def _arg(self, a) -> str:
        if isinstance(a, BufferArg):
            if not a.is_view:
                return a.name
            return f"R({a.name}, {self._tuple(a.size)}, {self._tuple(a.stride)}, {self.p(a.offset)})"
        if isinstance(a, (list, tuple)):
            inner = ", ".join(self._arg(x) for x in a)
            return f"[{inner}]" if isinstance(a, list) else f"({inner}{',' if len(a) == 1 else ''})"
        if isinstance(a, sympy.Basic):
            return self.p(a)
        if isinstance(a, (bool, int, str)) or a is None:
            return repr(a)
        if isinstance(a, float):
            return repr(a) if a == a and abs(a) != float("inf") else f"float({str(a)!r})"
        if isinstance(a, torch.dtype):
            return str(a)
        self.consts.append(a)
        return f"CONSTS[{len(self.consts) - 1}]"

    def _call(self, buf):
        if isinstance(buf, UserKernelCall):
            from ..lower.user_kernels import emit_user_kernel
            emit_user_kernel(self, buf)
            return
        if buf.kind == "item":
            self.emit(f"{buf.name} = {buf.tuple_of}[{buf.item}]")
            self._ensure(buf)
            return
        out_variant = buf.name in self.plan.reuse and writes_into_given_storage(buf)
        if out_variant:
            self._alloc(buf)
        self.ops.append(OUT_VARIANTS[buf.op] if out_variant else buf.op)
        op = f"OPS[{len(self.ops) - 1}]"
        args = [self._arg(a) for a in buf.args]
        args += [f"{k}={self._arg(v)}" for k, v in buf.kwargs.items()]
        if out_variant:
            origin = buf.origins[0] if buf.origins else ""
            self.emit(f"{op}({', '.join(args + [f'out={buf.name}'])})  # {origin} into reused storage")
            return
        tag = {"extern": "library call", "check": "index check"}.get(
            buf.kind, f"ATen fallback: {buf.reason}")
        self.emit(f"# {tag}")
        lhs = buf.name if buf.layout is not None or buf.tuple_of is None else buf.name
        self.emit(f"{lhs} = {op}({', '.join(args)})  # {buf.origins[0] if buf.origins else ''}")
        if buf.layout is not None:
            for d, n in enumerate(buf.layout.size):  # a size only the data gives (nonzero, x[mask])
                if isinstance(n, sympy.Symbol) and n not in self.bound:
                    self.emit(f"{n} = {buf.name}.size({d})")
                    self.bound.add(n)
            self._ensure(buf)

    def _ensure(self, buf):
        lay = buf.layout
        if lay is None:
            return
        # (an optional result of a library op may be None at run time)
        self.emit(f"if {buf.name} is not None and {buf.name}.stride() != {self._tuple(lay.stride)}:")
        self.emit(f"    {buf.name} = S.ensure_layout({buf.name}, {self._tuple(lay.size)}, "
                  f"{self._tuple(lay.stride)})")

    # -- outputs and lifetimes ------------------------------------------------------------
    def _output(self, o, index: int = -1) -> str:
        if isinstance(o, Stored):
            buf = self.graph.by_name[o.buffer]
            lay, blay = o.layout, buf.layout
            if (tuple(lay.size) == tuple(blay.size) and tuple(lay.stride) == tuple(blay.stride)
                    and lay.offset == blay.offset):
                return o.buffer
            # R, not as_strided: an output is never an autograd view of a buffer the graph
            # made (one made inside AOTAutograd's autograd.Function may not be written in
            # place later, where eager's result, a fresh tensor, may); outputs that really
            # alias an input or each other AOTAutograd regenerates itself, except in an
            # inference graph, which returns a view of another output as it is: there it is a
            # real view (its ._base that output, as eager's; a later graph that writes into
            # one of them takes the two for a base and its view). A view of an input is a real
            # view too: AOTAutograd does not regenerate one made by a multi-output view op
            # (``unbind``, ``split``) and returns ours, which a later graph that takes it and
            # its input (and writes one) must see as a view (fuzz seed 274809). So is a view of
            # another output that AOTAutograd hands over as it is in a training forward, one
            # that does not require grad (fuzz seed 460140; an integer one never does)
            geometry = f"{self._tuple(lay.size)}, {self._tuple(lay.stride)}, {self.p(lay.offset)}"
            if isinstance(buf, InputBuffer):   # (an input may start anywhere in its storage)
                return (f"{o.buffer}.as_strided({self._tuple(lay.size)}, {self._tuple(lay.stride)}"
                        f", {o.buffer}.storage_offset() + {self.p(lay.offset)})")
            if o.buffer in self._whole_outputs() and self._handed_over(o, index):
                return f"{o.buffer}.as_strided({geometry})"
            return f"R({o.buffer}, {geometry})"
        if isinstance(o, sympy.Basic):
            return self.p(o)
        return self._arg(o)

    def _handed_over(self, o, index: int) -> bool:
        """Whether the caller gets output ``index`` as the graph returns it (not regenerated by
        AOTAutograd from the output it views)."""
        g = self.graph
        if g.kind == "inference":
            return True
        if g.kind != "forward":
            return False
        plain = getattr(g, "plain_outputs", None)
        if plain is not None:
            return index in plain
        buf = g.by_name[o.buffer]
        dtype = getattr(buf.layout, "dtype", None)
        return dtype is not None and not (dtype.is_floating_point or dtype.is_complex)

    def _whole_outputs(self) -> set:
        """Buffers returned as they are (not as a view of them)."""
        whole = set()
        for o in self.graph.outputs:
            if isinstance(o, Stored):
                lay, blay = o.layout, self.graph.by_name[o.buffer].layout
                if (tuple(lay.size), tuple(lay.stride), lay.offset) == \
                        (tuple(blay.size), tuple(blay.stride), blay.offset):
                    whole.add(o.buffer)
        return whole

    def _output_buffers(self) -> set:
        out = set()
        for o in self.graph.outputs:
            if isinstance(o, Stored):
                out.add(o.buffer)
            elif isinstance(o, BufferArg):
                out.add(o.name)
        return out

    def _last_uses(self) -> dict:
        last = {}
        for i, step in enumerate(self.steps):
            if isinstance(step, AllocStep):
                names = {step.buffer.name}
            elif isinstance(step, Kernel):
                names = set(step.stores)
                for p in step.prepared.values():
                    from ..ir.expr import loads_of
                    extra = [v for _, v in p.store_binds] + [p.store_mask] * (p.store_mask is not None)
                    for v in [p.value] + extra:
                        names |= {ld.args[0] for ld in loads_of(v)}
            else:
                names = step.buffer.reads() | {step.buffer.name}
            for n in names:
                buf = self.graph.by_name.get(n)
                if isinstance(buf, ComputedBuffer) and buf.mutates:
                    last[buf.mutates] = i  # the written buffer lives until the write is done
                    if buf.scatter is None:
                        continue
                last[n] = i
        return last
