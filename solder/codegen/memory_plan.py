"""Buffer reuse: a new buffer takes the storage of one that is already dead.

Allocating through the caching allocator costs microseconds of host time per buffer, which adds
up to a large share of a training step's wrapper time. The plan is static: walking the wrapper's
steps in order, a buffer whose last reader has run goes into a pool keyed by (dtype, device,
storage span); a later allocation with the same key takes it over (renamed, or reinterpreted when
its strides differ) instead of allocating. Reuse is exact-size, so peak memory never grows.

Only storage that nothing else can still reach is donated: buffers Solder allocated itself,
fresh results of library calls, and a backward's saved tensors that AOTAutograd donates (it then
refuses ``retain_graph=True``: the backward is their last holder). Never another graph input,
an output, a buffer another buffer writes into (a scatter's or in-place update's target, whose
storage lives on under the writer's name), an element of a library call's result tuple, or
anything a user Triton kernel was given (its results are the same storage under new names).
"""
from __future__ import annotations

from dataclasses import dataclass, field

import sympy

from ..ir import expr as E
from ..ir.nodes import ComputedBuffer, ExternBuffer, Layout
from ..schedule.fusion import AllocStep, Kernel
from ..schedule.prepare import equal


@dataclass
class ReusePlan:
    reuse: dict = field(default_factory=dict)    # receiver name -> donor name
    donors: set = field(default_factory=set)     # names handed on instead of deleted
    # receivers written in place: the kernel that writes them reads their donor, only at the
    # elements it writes, for the last time (the donor's name is dropped after that kernel)
    in_place: set = field(default_factory=set)

    @property
    def count(self) -> int:
        return len(self.reuse)


def storage_span(layout: Layout):
    """Elements from the first to one past the last element the layout addresses."""
    span = sympy.Integer(1)
    for n, s in zip(layout.size, layout.stride):
        if n == 0:
            return sympy.Integer(0)
        span = span + (sympy.sympify(n) - 1) * sympy.sympify(s)
    return sympy.expand(span)


def _key(layout: Layout):
    return (layout.dtype, str(layout.device), storage_span(layout))


def plan_reuse(graph, steps, last_use: dict, keep: set, in_place: bool = True) -> ReusePlan:
    """Which allocation takes over which dead buffer, for the wrapper's ``steps``. With
    ``in_place``, a pointwise kernel's result may also take the storage of a buffer that dies
    at that kernel, where the kernel reads it only at the elements it writes (a batch norm and
    ReLU over a convolution's result: eager's ``relu_``, inductor's in-place buffers): without
    it, ResNet-50's inference peak held its largest activation twice."""
    from ..lower.user_kernels import UserKernelAlloc
    from ..ir.nodes import UserKernelCall
    by_name = graph.by_name
    never = set(keep)
    for b in graph.buffers:
        if isinstance(b, ComputedBuffer) and b.mutates:
            never.add(b.mutates)
            never.add(b.name)
        elif isinstance(b, UserKernelCall):
            never |= b.reads() | {b.name}
            never |= {getattr(b, "written", None)} - {None}
        elif isinstance(b, ExternBuffer) and b.view_of:
            # an ATen view run as a fallback (``view(dtype)``) shares its base's memory: the base
            # is neither pooled when its own last reader is done nor written over in place while
            # the view may still be read (fuzz seed 1020316: a sort's result took the storage
            # of a cumprod that a float64 view of it still read)
            never.add(b.view_of)

    dies_after: dict[int, list] = {}
    for name, i in last_use.items():
        dies_after.setdefault(i, []).append(name)
    # buffers that die at one step join the pool in graph order: ``last_use`` is filled from
    # sets of names, whose order changes from one process to the next (string hashing), and
    # so did which donor an allocation took (the generated wrapper differed between runs)
    position = {b.name: i for i, b in enumerate(graph.buffers)}
    for names in dies_after.values():
        names.sort(key=lambda n: (position.get(n, -1), n))

    plan = ReusePlan()
    pool: dict = {}          # key -> [donor names], most recently freed last
    # allocated (or returned fresh by a library call) and unaliased; and a backward's inputs
    # that AOTAutograd donated (capture/donated_inputs.py)
    donatable: set = {b.name for b in graph.buffers if getattr(b, "donated", False)}

    def take(buf):
        if buf.layout is None or buf.name in never:
            return
        key = _key(buf.layout)
        free = pool.get(key)
        if free:
            exact = [d for d in free if _same_layout(by_name[d].layout, buf.layout)]
            donor = exact[-1] if exact else free[-1]
            free.remove(donor)
            plan.reuse[buf.name] = donor
            plan.donors.add(donor)
        donatable.add(buf.name)

    for i, step in enumerate(steps):
        if isinstance(step, Kernel):
            for name in step.stores:
                buf = by_name[name]
                if buf.mutates:
                    continue
                donor = _in_place_donor(step, buf, dies_after.get(i, ()), donatable, never,
                                        by_name) if in_place else None
                if donor is not None:
                    plan.reuse[buf.name] = donor
                    plan.in_place.add(buf.name)
                    donatable.discard(donor)   # (not pooled when it dies after this step)
                    donatable.add(buf.name)
                else:
                    take(buf)
        elif isinstance(step, AllocStep):
            if not step.buffer.mutates:
                take(step.buffer)
        elif isinstance(step.buffer, UserKernelAlloc):
            take(step.buffer)
        elif writes_into_given_storage(step.buffer):
            take(step.buffer)
        elif _fresh_library_result(step.buffer) and step.buffer.name not in never:
            donatable.add(step.buffer.name)
        for name in dies_after.get(i, ()):
            if name in donatable and name not in never:
                pool.setdefault(_key(by_name[name].layout), []).append(name)
    return plan


def _in_place_donor(k: Kernel, buf, dying, donatable: set, never: set, by_name):
    """A buffer dying at kernel ``k`` that only ``buf``'s own value reads, and only at the
    element it writes (the same storage, no gather), so that ``buf`` may be written over it;
    else None. Only ``buf``'s value: another result of the kernel that reads it could load it
    after ``buf``'s store (fuzz seeds 721294, 721781, 722001: a bool read after an index
    check's flag was stored over it). In a kernel over rows, which may read a row again after
    writing part of it, only where no other member reads the donor at all: the log-softmax
    backward's gradient over the saved logits (inductor does the same with AOTAutograd's
    donated buffers), not a softmax backward, whose row sum reads its saved output."""
    p = k.prepared.get(buf.name)
    if p is None or p.store_binds or getattr(buf, "scatter", None) is not None \
            or buf.layout is None or buf.name in never:
        return None
    if k.rnumel != 1 and (p.level != "r" or p.reduction_type is not None):
        return None   # in a reduction kernel, only a result stored per element of the row

    def loads(q):
        return [ld for v in (q.value, q.store_mask, *(b for _, b in q.store_binds))
                if v is not None for ld in E.loads_of(v)]
    own = loads(p)
    # in a pointwise kernel the members kept in registers are inside the stored values; in a
    # kernel over rows they are read in their own loops (a row's sum over the donor), so every
    # member counts: the C++ target declares the pointers restrict, and its compiler may order
    # such a read after the store
    others = {ld.args[0] for name, q in k.prepared.items()
              if name != buf.name and (name in k.stores or k.rnumel != 1) for ld in loads(q)}
    for d in dying:
        donor = by_name.get(d)
        if d not in donatable or d in never or d in others or donor is None \
                or donor.layout is None:
            continue
        if _key(donor.layout) != _key(buf.layout) or not _same_storage(donor.layout, buf.layout) \
                or sympy.expand(sympy.sympify(donor.layout.offset) - buf.layout.offset) != 0:
            continue
        reads = [ld for ld in own if ld.args[0] == d]
        if reads and all(not ld.args[3] and equal(ld.args[1], p.store_index) for ld in reads):
            return d
    return None


def writes_into_given_storage(buf) -> bool:
    """A library call with an ``out=`` form whose result layout is the plain contiguous one
    (``out=`` then writes in place, never resizes or copies)."""
    from ..lower.extern import OUT_VARIANTS
    return (_fresh_library_result(buf) and buf.op in OUT_VARIANTS and not buf.kwargs
            and buf.layout.is_contiguous())


def _fresh_library_result(buf) -> bool:
    return (isinstance(buf, ExternBuffer) and buf.kind == "extern" and buf.tuple_of is None
            and buf.layout is not None)


def _same_storage(a: Layout, b: Layout) -> bool:
    """The same layout, or both contiguous over the same elements (a backward's saved logits,
    (4096, 32000), and their gradient, (4, 1024, 32000)): the wrapper reinterprets the donor."""
    if _same_layout(a, b):
        return True
    return a.is_contiguous() and b.is_contiguous() and \
        sympy.expand(sympy.sympify(a.numel) - b.numel) == 0


def _same_layout(a: Layout, b: Layout) -> bool:
    return (len(a.size) == len(b.size)
            and all(sympy.expand(sympy.sympify(x) - y) == 0 for x, y in zip(a.size, b.size))
            and all(sympy.expand(sympy.sympify(x) - y) == 0 for x, y in zip(a.stride, b.stride)))
