"""A sum over a strided dimension of contiguous columns, with the columns in the inner loop.

A reduction kernel runs one row per ``xindex`` and loops over the row's ``rindex``. Where the
reduced dimension is the strided one (a bias gradient: the sum over the tokens of a
``(tokens, features)`` gradient reads ``ptr[features * rindex + xindex]``), that inner loop reads
one element every ``features`` elements, which the compiler can only gather. Swapping the loops
makes every read contiguous: a block of ``BLOCK`` columns keeps one accumulator each, the row
loop runs outside, and the vectorized loop inside runs along the block's columns. Then the
block's results are stored, with the members that read them.

Taken for kernels whose reductions are all sums (each column's rows added in order, in double
for float32 and the half types, as a row's sum is), with no element-level store, where every
load that moves with both the column and the row reads contiguous columns along a strided row
(a load that moves with one of them alone, a per-row label or a per-column bias, reads one
value either way).
"""
from __future__ import annotations

import sympy

from ...ir import expr as E
from ...schedule.prepare import RINDEX, XINDEX
from .scalar_ops import err_clause

BLOCK = 64   # columns per block: 64 double accumulators, half a kilobyte


def _step(index, var):
    """The integer stride of ``var`` in ``index``, None where it is not a plain term."""
    index = sympy.expand(sympy.sympify(index))
    for atom in index.atoms(sympy.Function):
        if var in atom.free_symbols:
            return None   # inside a division or remainder
    step = index.coeff(var)
    return int(step) if step.is_Integer else None


def applies(kernel, stages) -> bool:
    if not kernel.is_reduction or not stages:
        return False
    first, later = stages[0], stages[1:]
    if any(p.reduction_type not in (None, "sum") for p in first):
        return False
    if not any(p.reduction_type == "sum" for p in first):
        return False
    if any(p.reduction_type is None and p.level == "r" for p in first):
        return False
    if any(p.reduction_type is not None or p.level == "r" for s in later for p in s):
        return False
    columns, rows = False, False
    for p in first:
        if p.reduction_type is None:
            continue
        for ld in E.loads_of(p.value):
            if ld.args[3]:   # an indirect load: its address is data
                continue
            free = sympy.sympify(ld.args[1]).free_symbols
            if XINDEX not in free or RINDEX not in free:
                continue   # one value per row or per column: read once either way
            sx, sr = _step(ld.args[1], XINDEX), _step(ld.args[1], RINDEX)
            if sx == 1 and sr is not None and sr > 1:
                columns = True
            else:
                rows = True
    return columns and not rows


def body(gen, stages, emitter, reg_dtype, reg_type) -> list[str]:
    """The kernel's loops: blocks of columns (on threads) of rows of contiguous columns.
    ``emitter``, ``reg_dtype`` and ``reg_type`` are kernel.py's (which imports this module)."""
    k = gen.kernel
    first = stages[0]
    reds, dups = [], []
    for p in first:
        if p.reduction_type == "sum":
            key = ("sum", p.value)
            (dups if gen.reduced.setdefault(key, p.buffer.name) != p.buffer.name
             else reds).append(p)
    lines = [f"    for (int64_t xblock = 0; xblock < xnumel; xblock += {BLOCK}) {{",
             f"        const int64_t xn = std::min<int64_t>({BLOCK}, xnumel - xblock);"]
    accs = {}
    for p in reds:
        reg = reg_dtype(p.value.dtype)
        acc_t = "double" if reg.is_floating_point else reg_type(reg)
        accs[p.buffer.name] = (f"acc{len(accs)}", acc_t)
        lines.append(f"        {acc_t} acc{len(accs) - 1}[{BLOCK}] = {{}};")
    inner = emitter(gen, " " * 16)
    for p in reds:
        name, acc_t = accs[p.buffer.name]
        inner.line(f"{name}[xi] += {acc_t}({inner.value(p.value)});")
    lines += ["        for (int64_t rindex = 0; rindex < rnumel; ++rindex) {",
              "            #pragma omp simd" + err_clause(inner.lines),
              "            for (int64_t xi = 0; xi < xn; ++xi) {",
              "                const int64_t xindex = xblock + xi;"]
    lines += inner.lines + ["            }", "        }"]
    lines += ["        for (int64_t xi = 0; xi < xn; ++xi) {",
              "            const int64_t xindex = xblock + xi;"]
    epi = emitter(gen, " " * 12)
    for p in reds:
        name, _ = accs[p.buffer.name]
        reg = reg_dtype(p.value.dtype)
        result = epi.tmp(reg, f"{reg_type(reg)}({name}[xi])")
        gen.rref[p.buffer.name] = result
        epi.cache[E.Value("rref", (p.buffer.name,), p.buffer.dtype)] = result
        gen._store_reduction(epi, p)
    for p in dups:
        original = gen.reduced[("sum", p.value)]
        gen.rref[p.buffer.name] = gen.rref[original]
        epi.cache[E.Value("rref", (p.buffer.name,), p.buffer.dtype)] = gen.rref[original]
        gen._store_reduction(epi, p)
    for p in first:
        if p.reduction_type is None:   # x-level members of the first stage
            gen._store(epi, p)
    for stage in stages[1:]:
        for p in stage:
            gen._store(epi, p)
    lines += epi.lines + ["        }", "    }"]
    return lines
