"""Long reductions into few outputs, split in two so that they fill the GPU.

A reduction kernel runs one program per block of outputs: 64 columns of a column sum, one row of
a row sum. Split are those with few programs that each read many elements (``MIN_WORK``). A weight gradient's column sums over the tokens (``[4096, 1024]`` summed over its
4096 rows, one per RMSNorm or LayerNorm weight, bias of a linear layer) then run 16 programs on
an H200's 132 SMs, each walking 4096 rows, latency-bound: ~50-60 us where the bytes need ~8
(the LLaMA step's backward in a 2026-12-04 profile, docs/perf-notes.md). A sum of a whole tensor runs one program.

Split: the first reduction gives ``S`` partial results per output, each over a contiguous chunk
of ``R / S`` of the reduced elements (row-major over the reduced dims), in the accumulator's
dtype; the second reduces the ``S`` partials, in a kernel of its own. ``S`` is the smallest
power of two that gives about ``TARGET_PROGRAMS`` programs, while chunks stay long enough to be
worth a program. The reduction's order changes (as any blocked reduction's does), not its
accumulator: float16/bfloat16 inputs still accumulate in float32 through both steps.
"""
from __future__ import annotations

import math

import sympy

from ..ir.indexing import FloorDiv, ModIndex

SPLITTABLE = {"sum", "prod", "max", "min", "any", "all", "xor_sum"}
MIN_REDUCED = 4096          # shorter reductions are quick enough in one kernel
# elements one program would read: below this a program is quick enough that a second kernel
# (and its launch, in host-bound steps) costs more than the split saves; a loss's mean over
# 8192 tokens stays one kernel, a column sum of [4096, 1024] (64 columns a program) splits
MIN_WORK = 1 << 17
TARGET_PROGRAMS = 256       # about two per SM on an H200
OUTER_BLOCK = 64            # outputs per program of a column reduction (launch_configs)
MIN_CHUNK = {"outer": 256, "inner": 1024}


def split_factor(call, x, dims, rtype: str, out_size, red_sizes) -> int:
    """How many partial results per output to compute first (0: do not split)."""
    if rtype not in SPLITTABLE or not call.graph.config.split_reductions:
        return 0
    if not call.graph.target.lowers_as_gpu(call.device):
        return 0
    try:
        reduced = math.prod(int(n) for n in red_sizes)
        outputs = math.prod(int(n) for n in out_size)
    except TypeError:   # symbolic sizes: one kernel, whatever they turn out to be
        return 0
    if reduced < MIN_REDUCED or outputs == 0:
        return 0
    hint = "outer" if _across_rows(x, dims) else "inner"
    programs = max(1, outputs // OUTER_BLOCK) if hint == "outer" else outputs
    if reduced * (OUTER_BLOCK if hint == "outer" else 1) < MIN_WORK:
        return 0
    s = 1
    while (programs * s < TARGET_PROGRAMS and reduced % (2 * s) == 0
           and reduced // (2 * s) >= MIN_CHUNK[hint]):
        s *= 2
    return s if s > 1 else 0


def _across_rows(x, dims) -> bool:
    """Whether the reduced elements of one output lie across rows in memory (the innermost
    dimension of ``x`` is one that is kept): a column reduction."""
    stride = x.layout.stride if hasattr(x, "layout") else getattr(x, "stride", None)
    if stride is None:
        return False
    sized = [(d, s) for d, (n, s) in enumerate(zip(x.size, stride))
             if not (isinstance(n, sympy.Integer) and int(n) == 1) and s != 0]
    try:
        innermost = min(sized, key=lambda ds: int(ds[1]))[0]
    except (TypeError, ValueError):   # symbolic strides, or nothing left
        return False
    return innermost not in dims


def chunked(fn, red_sizes, chunk: int):
    """``fn`` over (``s`` and the output index, the index within chunk ``s``): the reduced
    index is ``s * chunk + r``, unravelled row-major over ``red_sizes``."""
    sizes = [sympy.Integer(int(n)) for n in red_sizes]

    def partial(idx, ridx):
        flat = idx[0] * chunk + ridx[0]
        full, inner = [], sympy.Integer(1)
        for k in range(len(sizes) - 1, -1, -1):
            q = FloorDiv(flat, inner)
            full.append(q if k == 0 else ModIndex(q, sizes[k]))
            inner = inner * sizes[k]
        return fn(list(idx[1:]), full[::-1])
    return partial


def split(graph, body, s: int, acc, device, origins, source=()):
    """``body`` (a ``Reduction``) as its second step: the reduction of ``s`` partial results,
    which a new buffer computes first."""
    from ..ir.nodes import ComputedBuffer, Layout, Reduction, contiguous_strides
    from ..ir.values import Stored
    reduced = math.prod(int(n) for n in body.red_ranges)
    size = [sympy.Integer(s)] + list(body.ranges)
    layout = Layout(tuple(size), tuple(contiguous_strides(size)), sympy.Integer(0), acc, device)
    partials = ComputedBuffer(graph.new_name(), layout, origins=list(origins),
                              source=list(source),
                              body=Reduction(size, [sympy.Integer(reduced // s)],
                                             body.reduction_type,
                                             chunked(body.fn, body.red_ranges, reduced // s),
                                             body.src_dtype))
    graph.add_buffer(partials)
    stored = Stored(partials.name, layout)
    return Reduction(list(body.ranges), [sympy.Integer(s)], body.reduction_type,
                     lambda idx, ridx: stored.load([ridx[0], *idx]), acc)
