"""Group computed buffers into kernels, and order kernels and library calls.

A kernel has a tiling (xnumel, rnumel): pointwise kernels are (numel, 1); reduction kernels are
(rows, row length). A buffer joins the open kernel when it fits the tiling and every value it needs
from the kernel is available there: pointwise buffers are recomputed at any index (their inputs
are in memory or in the kernel), reduction results only for their own row (they live in
registers). The open kernel is extended greedily with any ready buffer that fits, so independent
siblings over the same iteration space share a kernel; a pointwise kernel whose elements are
exactly the rows of a following reduction is re-tiled to hold it (a residual add before a norm).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Optional, Union

import sympy

from ..config import Config
from ..ir import expr as E
from ..ir.indexing import product, simplify_index
from ..ir.nodes import Buffer, ComputedBuffer, ExternBuffer, InputBuffer, Reduction, UserKernelCall
from ..ir.values import position_to_index
from .prepare import RINDEX, XINDEX, Prepared, equal, fits, prepare


class NotFusible(Exception):
    pass


@dataclass
class Kernel:
    name: str
    xnumel: sympy.Expr
    rnumel: sympy.Expr
    nodes: list = field(default_factory=list)        # ComputedBuffers in order
    prepared: dict = field(default_factory=dict)      # name -> Prepared (values resolved)
    stores: list = field(default_factory=list)        # names written to memory
    persistent: bool = True
    reduction_hint: str = "inner"   # "outer" when consecutive rows, not row elements, are adjacent

    @property
    def is_reduction(self):
        return self.rnumel != 1

    def origins(self) -> list[str]:
        out = []
        for n in self.nodes:
            out.extend(o for o in n.origins if o not in out)
        return out

    def source_lines(self) -> list[str]:
        out = []
        for n in self.nodes:
            out.extend(s for s in n.source if s not in out)
        return out


@dataclass
class AllocStep:
    """A buffer with no elements: allocated, never computed."""
    buffer: ComputedBuffer


@dataclass
class CallStep:
    buffer: Union[ExternBuffer, UserKernelCall]


class KernelBuilder:
    """Resolves the values of buffers inside one kernel (in-kernel reads become registers)."""

    def __init__(self, kernel: Kernel, by_name: dict, size_ranges: dict):
        self.k = kernel
        self.by_name = by_name
        self.ranges = dict(size_ranges)
        self.ranges[XINDEX] = kernel.xnumel
        self.ranges[RINDEX] = kernel.rnumel
        self.members: dict[str, Prepared] = {}

    def try_add(self, buf: ComputedBuffer) -> Prepared:
        p = prepare(buf, self.k.xnumel, self.k.rnumel, self.ranges)
        self._check_after_write(buf, p, p.value)
        value = self.resolve(p.value, depth=0)
        self._check_after_write(buf, p, value)   # what it reads through recomputed members
        if p.level == "x" and p.reduction_type is None and uses_rindex(value):
            raise NotFusible("a per-row value that needs the whole row")
        if p.reduction_type is not None and _uses_rref_r_level(value):
            raise NotFusible("reduction input depends on a per-element in-kernel value")
        if buf.mutates:
            self._check_mutation(buf, p)
        binds = tuple((s, self.resolve(v, depth=0)) for s, v in p.store_binds)
        smask = self.resolve(p.store_mask, depth=0) if p.store_mask is not None else None
        left = {ld.args[0] for v in (value, smask, *(b for _, b in binds)) if v is not None
                for ld in E.loads_of(v)} & set(self.members)
        if left:   # a member is stored only if something outside reads it: read it there
            raise NotFusible(f"reads {sorted(left)} of this kernel from memory")
        out = Prepared(buf, value, p.store_index, p.level, p.reduction_type, binds, smask)
        self.members[buf.name] = out
        return out

    def _check_mutation(self, buf, p):
        target = buf.mutates
        for other in self.members.values():
            for ld in E.loads_of(other.value):
                if ld.args[0] == target and (buf.scatter is not None
                                             or not equal(ld.args[1], p.store_index)):
                    raise NotFusible("in-place write races with a read of another element")
        if buf.scatter is not None and (self.k.rnumel != 1 or target in self.members or any(
                o.buffer.mutates == target for o in self.members.values())):
            raise NotFusible("a scatter needs every other write of its target done first")

    def _check_after_write(self, buf, p, value):
        # a write in this kernel is seen only by the same element's later reads: other programs
        # may still be writing (a scatter: anywhere), so other reads go to a later kernel. A read
        # of the target by its old name wants the value before the write (the write waits for
        # every such reader): after the write in the same kernel it would see the new one
        for o in self.members.values():
            target = o.buffer.mutates
            if not target:
                continue
            if o.buffer.scatter is not None and target in (buf.name, buf.mutates):
                raise NotFusible("writes the target of a scatter in this kernel")
            for ld in E.loads_of(value):
                if ld.args[0] == target and buf.mutates != target:
                    raise NotFusible("reads the old value of a buffer this kernel overwrote")
                if ld.args[0] in (target, o.buffer.name) and (
                        o.buffer.scatter is not None or not equal(ld.args[1], o.store_index)):
                    raise NotFusible("reads a buffer another element of this kernel writes")

    def resolve(self, value: E.Value, depth: int) -> E.Value:
        if depth > 32:
            raise NotFusible("inlining too deep")

        def repl(x, go):
            if x.op != "load" or x.args[0] not in self.members:
                return None
            # its mask and a gather's index bindings first: they may load members too (a
            # gather of a gather), and those reads must be resolved like any other
            name, index, mask, ind = E.rebuilt(x, go).args
            src = self.members[name]
            if src.reduction_type is not None:
                if mask is not None or ind or not equal(index, src.store_index):
                    raise NotFusible(f"reads reduction {name} outside its own row ({index} vs {src.store_index}, mask={mask}, ind={ind})")
                return E.Value("rref", (name,), x.dtype)
            if equal(index, src.store_index) and mask is None and not ind:
                return src.value if src.value.dtype == x.dtype else E.cast(src.value, x.dtype)
            # recompute the producer at another element
            buf = self.by_name[name]
            idx = position_to_index(index, list(buf.layout.size), list(buf.layout.stride))
            v = buf.body.fn([simplify_index(sympy.sympify(i), self.ranges) for i in idx])
            v = E.map_indices(v, lambda e: simplify_index(e, self.ranges))
            v = self.resolve(v, depth + 1)
            if ind:  # a gather's data-dependent index: the recomputed loads need its bindings
                v = E.bind_indirect(v, ind)
                if v is None:
                    raise NotFusible(f"gathers from {name} at an index only data gives")
            if mask is not None:
                v = E.with_mask(v, mask)
            return v if v.dtype == x.dtype else E.cast(v, x.dtype)

        return E.rebuild(value, repl)


def uses_rindex(v: E.Value) -> bool:
    """Whether a value varies along the row (an index, load address or draw with rindex)."""
    return any(RINDEX in sympy.sympify(e).free_symbols for e in E.index_exprs(v))


def _uses_rref_r_level(v: E.Value) -> bool:
    return False


def schedule(graph, config: Config):
    """Returns the ordered steps (Kernel or CallStep) of a lowered graph."""
    nodes = [b for b in graph.buffers if not isinstance(b, InputBuffer)]
    produced = {b.name for b in graph.buffers}
    order = {b.name: i for i, b in enumerate(nodes)}
    deps = {b.name: {r for r in b.reads() if r in produced and r in order} for b in nodes}
    readers: dict[str, set] = {}
    for b in nodes:
        for r in b.reads():
            readers.setdefault(r, set()).add(b.name)
    writers: dict[str, set] = {}
    by_name = graph.by_name
    views: dict[str, list] = {}   # buffer -> the ATen views of it
    for b in nodes:
        if isinstance(b, ExternBuffer) and b.view_of:
            views.setdefault(b.view_of, []).append(b.name)
    for b in nodes:
        target = getattr(b, "mutates", None)
        if target:
            deps[b.name] |= _old_value_readers(b.name, target, readers, views) & set(order)
            # after the target exists and after earlier writes into it (a scatter's later readers
            # read the write's own name, so they wait for it through ``reads``)
            deps[b.name] |= ({target} & set(order)) | writers.get(target, set())
            writers.setdefault(target, set()).add(b.name)
    for b in nodes:  # a user kernel writing a buffer in place: after every reader and writer
        if isinstance(b, UserKernelCall):
            for target in {b.tensor_args[p].name for p in b.writes}:
                deps[b.name] |= {r for r in readers.get(target, ()) if r != b.name}
                deps[b.name] |= writers.get(target, set())
    size_ranges = {}
    done: set[str] = set()
    steps: list = []
    pending = list(nodes)
    builder: Optional[KernelBuilder] = None
    kcount = 0

    def ready(b):
        return deps[b.name] <= done

    while pending:
        placed = False
        if builder is not None and config.fuse:
            for b in pending:
                if isinstance(b, ComputedBuffer) and ready(b) and not _is_empty(b) and _try_join(builder, b, by_name,
                                                                           size_ranges):
                    builder.k.nodes.append(b)
                    done.add(b.name)
                    pending.remove(b)
                    placed = True
                    break
        if placed:
            continue
        if builder is not None and config.fuse and _hoist(builder, pending, deps, done, steps,
                                                          by_name, size_ranges, kcount):
            kcount += 1
            continue
        if builder is not None:
            steps.append(builder)
            builder = None
        b = next((x for x in pending if ready(x)), None)
        if b is None:
            raise RuntimeError(f"schedule cycle among {[x.name for x in pending]}")
        pending.remove(b)
        done.add(b.name)
        if isinstance(b, ComputedBuffer) and _is_empty(b):
            steps.append(AllocStep(b))
        elif isinstance(b, ComputedBuffer):
            xn, rn = _tiling(b)
            kernel = Kernel(f"k{kcount}", xn, rn)
            kcount += 1
            builder = KernelBuilder(kernel, by_name, size_ranges)
            builder.try_add(b)
            kernel.nodes.append(b)
        else:
            steps.append(CallStep(b))
    if builder is not None:
        steps.append(builder)
    return _finish(steps, graph, config)


def _old_value_readers(writer: str, target: str, readers: dict, views: dict) -> set:
    """Every buffer that reads ``target`` before ``writer`` overwrites it: its readers, and the
    readers of any view of it that ATen computes (another name for the same memory). A
    pointwise reader may be recomputed inside a later buffer's kernel: in the writer's kernel
    ``KernelBuilder._check_after_write`` keeps such a read out, and in another kernel the
    reader is stored (read by a buffer outside its kernel) before the write."""
    names, pending = {target}, [target]
    while pending:
        for alias in views.get(pending.pop(), ()):
            if alias not in names:
                names.add(alias)
                pending.append(alias)
    return {r for n in names for r in readers.get(n, ()) if r != writer}


def _hoist(builder, pending, deps, done, steps, by_name, size_ranges, kcount) -> bool:
    """A buffer that fits the open kernel but waits on an independent buffer: run that buffer
    first, in its own step before the open kernel, and keep the open kernel growing."""
    members = {n.name for n in builder.k.nodes}
    for b in pending:
        if not isinstance(b, ComputedBuffer) or not fits(b, builder.k.xnumel, builder.k.rnumel):
            continue
        missing = [by_name[d] for d in deps[b.name] - done]
        if len(missing) != 1:
            continue
        (m,) = missing
        if not (deps[m.name] <= done) or deps[m.name] & members:
            continue
        if isinstance(m, ComputedBuffer):
            xn, rn = _tiling(m)
            k = KernelBuilder(Kernel(f"k{kcount}", xn, rn), by_name, size_ranges)
            k.try_add(m)
            k.k.nodes.append(m)
            steps.append(k)
        else:
            steps.append(CallStep(m))
        pending.remove(m)
        done.add(m.name)
        return True
    return False


def _is_empty(b: ComputedBuffer) -> bool:
    n = product(b.body.ranges)
    return n.is_Integer and int(n) == 0


def _tiling(b: ComputedBuffer):
    if isinstance(b.body, Reduction):
        return product(b.body.ranges), product(b.body.red_ranges)
    return product(b.body.ranges), sympy.Integer(1)


def _try_join(builder: KernelBuilder, b: ComputedBuffer, by_name, size_ranges) -> bool:
    k = builder.k
    if fits(b, k.xnumel, k.rnumel):
        try:
            builder.try_add(b)
            return True
        except NotFusible:
            builder.members.pop(b.name, None)
            return False
    # a pointwise kernel can become the prologue of a reduction over the same elements
    if k.rnumel == 1 and isinstance(b.body, Reduction):
        xn, rn = _tiling(b)
        if equal(xn * rn, k.xnumel) and all(fits(n, xn, rn) for n in k.nodes):
            trial = KernelBuilder(Kernel(k.name, xn, rn), by_name, size_ranges)
            try:
                for n in k.nodes + [b]:
                    trial.try_add(n)
            except NotFusible:
                return False
            builder.k.xnumel, builder.k.rnumel = xn, rn
            builder.ranges, builder.members = trial.ranges, trial.members
            return True
    return False


def _finish(steps, graph, config):
    out = []
    outputs = {o.buffer for o in graph.outputs if hasattr(o, "buffer")}
    kernel_of = {}
    for s in steps:
        if isinstance(s, KernelBuilder):
            for n in s.k.nodes:
                kernel_of[n.name] = s.k
    readers: dict[str, set] = {}
    for b in graph.buffers:
        for r in b.reads():
            readers.setdefault(r, set()).add(b.name)
    targets = {getattr(b, "mutates", None) for b in graph.buffers}  # written later: in memory
    kernels = 0
    for s in steps:
        if isinstance(s, KernelBuilder):
            k = s.k
            k.name = f"k{kernels}"  # numbered in launch order
            kernels += 1
            k.prepared = {n.name: s.members[n.name] for n in k.nodes}
            for n in k.nodes:
                outside = any(kernel_of.get(r) is not k for r in readers.get(n.name, ()))
                if n.mutates or n.name in outputs or outside or n.name in targets:
                    k.stores.append(n.name)
            k.reduction_hint = _reduction_hint(k)
            k.persistent = _persistent(k, config)
            out.append(k)
        else:
            out.append(s)
    return out


def _persistent(k: Kernel, config: Config) -> bool:
    if not k.is_reduction:
        return True
    limit = config.persistent_reduction_max if k.reduction_hint == "inner" else 1024
    try:
        return int(k.rnumel) <= limit
    except TypeError:
        return False


def _reduction_hint(k: Kernel) -> str:
    """Whether the reduced loads walk memory along the row (inner) or across rows (outer)."""
    if not k.is_reduction:
        return "inner"
    inner = outer = 0
    for p in k.prepared.values():
        for ld in E.loads_of(p.value):
            e = sympy.expand(sympy.sympify(ld.args[1]))
            if RINDEX not in e.free_symbols:
                continue
            if e.coeff(RINDEX) == 1:
                inner += 1
            elif e.coeff(XINDEX) == 1:
                outer += 1
    return "outer" if outer > inner else "inner"
