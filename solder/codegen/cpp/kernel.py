"""Write one scheduled kernel as a C++ function.

Layout of a generated kernel (the Triton kernel's, one element at a time):
  pointwise:  one loop over ``xindex``; every member is computed and stored once per element.
  reduction:  one loop over rows (``xindex``); inside it the members run in stages (the same
              stages as the Triton target's), each stage a loop over the row's ``rindex`` that
              accumulates its reductions and stores its element-level members, then the row's
              results and the row-level members.
The outer loop runs on OpenMP threads when the kernel has enough work; a kernel that updates
memory another element may update too (a scatter that accumulates) runs on one thread.
Values are computed in the registers' dtype (float for float16 and bfloat16, as eager).
"""
from __future__ import annotations

import math
from typing import Optional

import sympy
import torch

from ...ir import expr as E
from ...ir import indexing
from ...schedule.fusion import Kernel
from ...schedule.prepare import RINDEX, XINDEX
from ..emitter import ScopedEmitter
from ..generated import KernelSource
from ..index_printer import Printer
from ..stages import member_stages
from . import arm_loads, columns, loop_nest, row_scratch, scalar_ops
from .scalar_ops import err_clause


C_TYPE = {
    torch.float32: "float", torch.float64: "double", torch.int8: "int8_t",
    torch.int16: "int16_t", torch.int32: "int32_t", torch.int64: "int64_t",
    torch.uint8: "uint8_t", torch.uint16: "uint16_t", torch.uint32: "uint32_t",
    torch.uint64: "uint64_t", torch.bool: "bool", torch.float16: "uint16_t",
    torch.bfloat16: "uint16_t",
}
SUPPORTED = frozenset(C_TYPE)
# elements of work below which the outer loop stays on one thread (thread start-up dominates)
PARALLEL_MIN_WORK = 1 << 15
# elements of a row summed in float before the partial sum is added into a double
SUM_CHUNK = 4096


def reg_dtype(dt: torch.dtype) -> torch.dtype:
    return torch.float32 if dt in (torch.float16, torch.bfloat16) else dt


def reg_type(dt: torch.dtype) -> str:
    return C_TYPE[reg_dtype(dt)]


class Unsupported(Exception):
    """A kernel this target cannot write (the pipeline then compiles the graph otherwise)."""


class CppPrinter(Printer):
    """Index expressions as C++: int64_t arithmetic, ``/`` on non-negative operands."""
    DIV = "/"
    MAX, MIN = "std::max<int64_t>", "std::min<int64_t>"

    def __init__(self, names: dict, split=None):
        super().__init__(names)
        self.split = split   # loop_nest.Split: xindex written as the nested loops' x0, x1

    def __call__(self, e) -> str:
        return super().__call__(self.split(e) if self.split is not None else e)

    def integer(self, n: int) -> str:
        return f"int64_t({n})"

    def _print(self, e) -> str:
        try:
            return super()._print(e)
        except NotImplementedError as err:
            raise Unsupported(str(err)) from err


class Emitter(ScopedEmitter):
    """C++ values, as numbered temporaries of their registers' types. A row loop's emitter
    ``hoists`` into the code before the loop what does not change along the row (the row's
    token id, its first element, its mean): computed once per row, and the loop is left with
    vector work only (an int64 load of the row's id kept GCC from vectorizing a GPT-2
    layer norm)."""

    hoist: "Emitter | None" = None

    def owner(self, v: E.Value) -> ScopedEmitter:
        if self.hoist is not None and not self.gen.along_row(v):
            return self.hoist
        return self

    def tmp(self, dtype: torch.dtype, expr: str) -> str:
        name = self.gen.new_tmp()
        self.line(f"{reg_type(dtype)} {name} = {expr};")
        return name

    def _emit(self, v: E.Value) -> str:
        g = self.gen
        if v.dtype not in SUPPORTED:
            raise Unsupported(f"dtype {v.dtype}")
        if v.op == "load":
            buf, index, mask, ind = v.args
            names = dict(g.printer.names)
            for s, iv in ind:
                names[s] = self.value(iv)
            idx = CppPrinter(names, g.printer.split)(index)
            read = g.read(buf, idx)
            if mask is not None and not ind and g.always_in_bounds(buf, index):
                # an element that exists wherever the loop is: read it unconditionally and
                # select, which vectorizes as a plain load and a blend instead of a masked
                # gather (as_strided_scatter's halves)
                read = f"({self.value(mask)} ? {self.tmp(v.dtype, read)} : {reg_type(v.dtype)}(0))"
            elif mask is not None:
                read = f"({self.value(mask)} ? {read} : {reg_type(v.dtype)}(0))"
            return self.tmp(v.dtype, read)
        if v.op == "const":
            return _literal(v.args[0], v.dtype)
        if v.op == "index":
            return self.tmp(v.dtype, f"{reg_type(v.dtype)}({g.printer(v.args[0])})")
        if v.op == "cast":
            return self.tmp(v.dtype, _cast(self.value(v.args[0]), v.args[0].dtype, v.dtype))
        if v.op == "call":
            name, *args = v.args
            if name not in scalar_ops.SCALAR_OPS:
                raise Unsupported(f"scalar op {name}")
            exprs = [self.value(a) for a in args]
            return self.tmp(v.dtype, scalar_ops.emit(name, exprs, [a.dtype for a in args]))
        if v.op == "rref":
            return g.rref[v.args[0]]
        raise Unsupported(f"value {v.op}")


def _literal(x, dtype) -> str:
    t = reg_type(dtype)
    if dtype == torch.bool:
        return "true" if x else "false"
    if dtype.is_floating_point:
        if math.isnan(x):
            return f"std::numeric_limits<{t}>::quiet_NaN()"
        if math.isinf(x):
            return f"{'' if x > 0 else '-'}std::numeric_limits<{t}>::infinity()"
        return f"{t}({float(x)!r})"
    return f"{t}({int(x)}{'LL' if abs(int(x)) > 2**31 - 1 else ''})"


def _cast(x: str, src: torch.dtype, dst: torch.dtype) -> str:
    if dst == torch.bool:
        return f"({x} != 0)"
    if dst == torch.float16:
        return f"solder_round_half(float({x}))"
    if dst == torch.bfloat16:
        return f"solder_round_bf16(float({x}))"
    return f"{reg_type(dst)}({x})"


IDENTITY = {"sum": "0", "prod": "1", "any": "0", "all": "1"}
# reductions a vectorized row loop can do, by their OpenMP reduction identifier; any and all
# accumulate a uint8_t with | and & (GCC 12 vectorizes those, not || and && on a bool: an index
# check's row of 16384 int64 went 14 -> 3 us)
SIMD_REDUCTIONS = {"sum": "+", "prod": "*", "any": "|", "all": "&", "max": "solder_max",
                   "min": "solder_min"}
# a max or min in a vectorized row: each lane a plain max (one instruction, nothing but the
# accumulator on the loop-carried chain) and, for floats, a NaN flag beside it, NaN the result
# if set (eager's NaN propagation; 15% of a bf16 softmax row's time against solder_max's checks)
PLAIN_SIMD_MINMAX = {"max": ("max", ">"), "min": ("min", "<")}


def _identity(rtype: str, dtype: torch.dtype) -> str:
    t = reg_type(dtype)
    if rtype in IDENTITY:
        return IDENTITY[rtype] if rtype in ("any", "all") else f"{t}({IDENTITY[rtype]})"
    big = rtype in ("min", "argmin")
    if dtype.is_floating_point:
        return f"{'' if big else '-'}std::numeric_limits<{t}>::infinity()"
    if dtype == torch.bool:
        return "true" if big else "false"
    return f"std::numeric_limits<{t}>::{'max' if big else 'lowest'}()"


class CppKernelGen:
    def __init__(self, kernel: Kernel, by_name: dict):
        self.kernel = kernel
        self.by_name = by_name
        self.args: list = []
        self.ptr_names: dict = {}
        self.size_names: dict = {}
        self.rref: dict = {}
        self.reduced: dict = {}
        self.serial = False   # an accumulating scatter: one thread
        self.columns = False  # columns.py's loop order
        self.keep: dict = {}      # stage -> values its loop keeps for later ones (row_scratch)
        self.scratch: dict = {}   # value -> the scratch array that holds it
        self.unmasked: dict = {}  # member -> its value with arm_loads.py's unmasked loads
        self._tmp = 0
        self._along_row: dict = {}
        self.printer = CppPrinter({XINDEX: "xindex", RINDEX: "rindex",
                                   loop_nest.OUTER: "x0", loop_nest.INNER: "x1"})

    def along_row(self, v: E.Value) -> bool:
        """Whether ``v`` changes with ``rindex`` (with nested loops, ``x1``): it reads the
        row's index or a row's scratch array, or a value under it does."""
        got = self._along_row.get(v)
        if got is None:
            split = self.printer.split
            if v in self.scratch:
                got = True
            elif v.op in ("load", "index", "rand"):
                index = sympy.sympify(v.args[1] if v.op in ("load", "rand") else v.args[0])
                got = (loop_nest.INNER in split(index).free_symbols if split is not None
                       else RINDEX in index.free_symbols)
            else:
                got = False
            got = got or any(self.along_row(c) for c in v.children())
            self._along_row[v] = got
        return got

    def new_tmp(self) -> str:
        self._tmp += 1
        return f"t{self._tmp - 1}"

    def _target(self, buf: str) -> str:
        b = self.by_name[buf]
        return b.mutates if getattr(b, "mutates", None) else buf

    def ptr(self, buf: str) -> str:
        target = self._target(buf)
        if target not in self.ptr_names:
            self.ptr_names[target] = f"ptr{len(self.ptr_names)}"
            self.args.append(("ptr", target))
        return self.ptr_names[target]

    def always_in_bounds(self, buf: str, index) -> bool:
        """Whether ``index`` addresses an element of ``buf``'s own layout for every value the
        loop variables take (so a load of it needs no mask to be safe)."""
        k, lay = self.kernel, self.by_name[self._target(buf)].layout
        index = sympy.sympify(index)
        if any(str(s).startswith("ind") for s in index.free_symbols):
            return False
        dims = [(sympy.sympify(n), sympy.sympify(st)) for n, st in zip(lay.size, lay.stride)]
        if not all(n.is_positive and st.is_nonnegative for n, st in dims):
            return False
        first = sympy.sympify(lay.offset)
        last = first + sum(((n - 1) * st for n, st in dims), sympy.Integer(0))
        lo, hi = indexing.bounds(index, {XINDEX: k.xnumel, RINDEX: k.rnumel})
        return indexing.provably_le(first, lo) and indexing.provably_le(hi, last)

    def dtype_of(self, buf: str) -> torch.dtype:
        dt = self.by_name[self._target(buf)].dtype
        if dt not in SUPPORTED:
            raise Unsupported(f"buffer {buf} of dtype {dt}")
        return dt

    def read(self, buf: str, idx: str) -> str:
        dt = self.dtype_of(buf)
        raw = f"{self.ptr(buf)}[{idx}]"
        if dt == torch.float16:
            return f"solder_half_to_float({raw})"
        if dt == torch.bfloat16:
            return f"solder_bf16_to_float({raw})"
        return raw

    def write(self, buf: str, idx: str, val: str, val_dtype: torch.dtype,
              exact: bool = False) -> str:
        """The store's target and value; ``exact``: the value is one of the buffer's dtype
        already (rounded to it, or read as it), which a bfloat16 store then truncates."""
        dt = self.dtype_of(buf)
        if dt == torch.float16:
            val = f"solder_float_to_half(float({val}))"
        elif dt == torch.bfloat16:
            fn = "solder_bf16_bits" if exact and val_dtype == dt else "solder_float_to_bf16"
            val = f"{fn}(float({val}))"
        elif dt == torch.bool:
            val = f"({val} != 0)"
        else:
            val = f"{C_TYPE[dt]}({val})"
        return f"{self.ptr(buf)}[{idx}]", val

    def size_symbols(self, exprs) -> None:
        for e in exprs:
            for s in sympy.sympify(e).free_symbols:
                if s not in (XINDEX, RINDEX) and not str(s).startswith("ind") \
                        and s not in self.size_names:
                    self.size_names[s] = str(s)
                    self.printer.names[s] = str(s)

    def generate(self) -> KernelSource:
        k = self.kernel
        for p in k.prepared.values():
            extra = [v for _, v in p.store_binds] + [p.store_mask] * (p.store_mask is not None)
            self.size_symbols([p.store_index] + [e for v in [p.value] + extra
                                                 for e in E.index_exprs(v)])
            if getattr(p.buffer, "store_mode", "store") != "store":
                self.serial = True
        self.size_symbols([k.xnumel, k.rnumel])
        split = self.printer.split = loop_nest.choose(k)
        body = self._body() if split is None else self._nested(split)
        size_args = sorted(self.size_names.values())
        for s in size_args:
            self.args.append(("size", s))
        self.args += [("numel", "x")] + ([("numel", "r")] if k.is_reduction else [])
        params = []
        for kind, what in self.args:
            if kind == "ptr":
                params.append(f"{C_TYPE[self.dtype_of(what)]}* __restrict__ {self.ptr_names[what]}"
                              if not self._aliased(what) else
                              f"{C_TYPE[self.dtype_of(what)]}* {self.ptr_names[what]}")
        params += [f"int64_t {s}" for s in size_args] + ["int64_t xnumel"]
        params += ["int64_t rnumel"] if k.is_reduction else []
        origins = k.origins()
        doc = [f"// {k.name}: fuses {', '.join(origins)}"] if origins else [f"// {k.name}"]
        doc += ["// pointers: " + ", ".join(f"{p}={b}" for b, p in self.ptr_names.items())]
        doc += [f"// from: {s}" for s in k.source_lines()[:6]]
        work = "xnumel * rnumel" if k.is_reduction else "xnumel"
        # a pointwise kernel's elements are independent: its loop is also vectorized (the C
        # library's vector math, module.py's declarations)
        simd = "" if k.is_reduction else " simd"
        # `if(parallel: ...)`, never a bare `if`: on a combined `parallel for simd` a bare if
        # applies to the simd loop too (OpenMP 5.0), and a small kernel, run on one thread,
        # lost its vectorization with it (10x slower on 8192 elements, GCC 12)
        omp = [] if self.serial else [
            f"    #pragma omp parallel for{simd if split is None or split.unrolled else ''}"
            f"{err_clause(body)} if(parallel: {work} >= {PARALLEL_MIN_WORK})"]
        if self.columns:
            doc += [f"// columns inside: {columns.BLOCK} columns' sums at a time, the rows "
                    "outside (a strided reduction read contiguously)"]
        elif split is None:
            body = ["    for (int64_t xindex = 0; xindex < xnumel; ++xindex) {"] + body + ["    }"]
        elif split.unrolled:
            doc += [f"// xindex = {self.printer(split.inner)} * x0 + x1: the row unrolled, "
                    "x1 a constant in each block"]
        else:
            doc += [f"// xindex = {self.printer(split.inner)} * x0 + x1: no division in the "
                    "inner loop"]
        src = "\n".join(
            doc + [f'extern "C" int64_t {k.name}({", ".join(params)}) {{',
                   "    int64_t solder_err = 0;"] + omp
            + body + ["    return solder_err;", "}", ""])
        return KernelSource(k.name, src, list(self.args), k.is_reduction, k.persistent,
                            k.xnumel, k.rnumel, True, origins, k.reduction_hint)

    def _aliased(self, buf: str) -> bool:
        """A buffer this kernel both reads and writes (an in-place update) is not restrict."""
        k = self.kernel
        written = {self._target(b) for b in k.stores}
        return buf in written and any(
            self._target(v.args[0]) == buf for p in k.prepared.values()
            for v in E.walk(p.value) if v.op == "load")

    def _nested(self, split) -> list[str]:
        """A pointwise kernel as loop_nest.py's rows (on threads) of contiguous, vectorized
        inner loops, one per segment of the row."""
        k, c = self.kernel, self.printer(split.inner)
        values = [v for p in k.prepared.values() for v in (p.value, p.store_mask) if v is not None]
        segs = loop_nest.segments(split, values) or [(0, c, {})]
        rows = f"xnumel / {c}" if split.inner.is_Integer else f"({c} > 0 ? xnumel / {c} : 0)"
        lines = [f"    for (int64_t x0 = 0; x0 < {rows}; ++x0) {{"]
        if split.unrolled:
            for lo, _, outcomes in segs:
                em = Emitter(self, " " * 12)
                for p in k.prepared.values():
                    self._store(em, p, outcomes)
                lines += ["        {", f"            const int64_t x1 = {lo};",
                          f"            const int64_t xindex = {c} * x0 + x1;"]
                lines += em.lines + ["        }"]
            return lines + ["    }"]
        for lo, hi, outcomes in segs:
            # what does not change along x1 (an index_put's row: its index, bounds check and
            # address) is computed once per x0 before the vectorized loop, which then stores
            # contiguously under one condition; a segment is never empty, so hoisted loads
            # are loads the loop would make
            pre = Emitter(self, " " * 8)
            em = Emitter(self, " " * 12, parent=pre)
            em.hoist = pre
            for p in k.prepared.values():
                self._store(em, p, outcomes)
            lines += pre.lines
            lines += [] if self.serial else ["        #pragma omp simd" + err_clause(em.lines)]
            lines += [f"        for (int64_t x1 = {lo}; x1 < {hi}; ++x1) {{",
                      f"            const int64_t xindex = {c} * x0 + x1;"]
            lines += em.lines + ["        }"]
        return lines + ["    }"]

    def _body(self) -> list[str]:
        k = self.kernel
        top = Emitter(self, " " * 8)
        if not k.is_reduction:
            for name, p in k.prepared.items():
                self._store(top, p)
            return top.lines
        stages = member_stages(k)
        if not self.serial and columns.applies(k, stages):
            self.columns = True   # columns.py: the columns inside, the rows outside
            return columns.body(self, stages, Emitter, reg_dtype, reg_type)
        self.keep = row_scratch.plan(stages, k.rnumel)
        for i, stage in enumerate(stages):
            self._stage(top, stage, i)
        return top.lines

    def _store(self, em: Emitter, p, outcomes: Optional[dict] = None) -> None:
        """``p``'s store; ``outcomes``: comparisons whose value the loop's segment knows."""
        if p.buffer.name not in self.kernel.stores:
            return
        known = lambda v: loop_nest.fix(v, outcomes)  # noqa: E731
        if p.buffer.name not in self.unmasked:   # (once per member, not once per segment)
            self.unmasked[p.buffer.name] = arm_loads.unmask(p.value, self.always_in_bounds)
        v = em.value(known(self.unmasked[p.buffer.name]))
        printer = self.printer
        if p.store_binds:   # a scatter: the address depends on data
            printer = CppPrinter({**self.printer.names,
                                  **{s: em.value(known(iv)) for s, iv in p.store_binds}},
                                 self.printer.split)
        idx = printer(p.store_index)
        where, val = self.write(p.buffer.name, idx, v, p.value.dtype,
                                exact=p.value.op in ("cast", "load"))
        mode = getattr(p.buffer, "store_mode", "store")
        if mode == "store":
            stmt = f"{where} = {val};"
        elif mode == "atomic_add":
            stmt = f"{where} += {val};" if self.dtype_of(p.buffer.name) not in (
                torch.float16, torch.bfloat16, torch.bool) else None
        else:
            stmt = None
        if stmt is None:
            raise Unsupported(f"store mode {mode} into {self.dtype_of(p.buffer.name)}")
        if p.store_mask is not None:
            stmt = f"if ({em.value(known(p.store_mask))}) {stmt}"
        em.line(stmt)

    def _stage(self, top: Emitter, stage, index: int = 0) -> None:
        reds, dups = [], []
        for p in stage:
            if p.reduction_type is not None:
                key = (p.reduction_type, p.value)
                (dups if self.reduced.setdefault(key, p.buffer.name) != p.buffer.name
                 else reds).append(p)
        rlevel = [p for p in stage if p.reduction_type is None and p.level == "r"]
        xlevel = [p for p in stage if p.reduction_type is None and p.level == "x"]
        accs, plain, nan_flags = {}, set(), {}
        simd = all(p.reduction_type in SIMD_REDUCTIONS for p in reds) and not self.serial
        for p in reds:
            dt = reg_dtype(p.value.dtype)
            rt = p.reduction_type
            if rt not in ("sum", "prod", "max", "min", "any", "all", "argmax", "argmin"):
                raise Unsupported(f"reduction {rt}")
            acc = self.new_tmp()
            # float sums accumulate in double (eager's CPU sums are cascaded: as accurate)
            acc_t = "double" if rt in ("sum", "prod") and dt == torch.float32 else \
                ("uint8_t" if rt in ("any", "all") else reg_type(dt))
            init = _identity(rt, dt)
            top.line(f"{acc_t} {acc} = {init};")
            accs[p.buffer.name] = [acc, acc_t]
            if simd and rt in PLAIN_SIMD_MINMAX and dt != torch.bool:
                plain.add(p.buffer.name)
            if p.buffer.name in plain and dt.is_floating_point:
                nan_flags[p.buffer.name] = flag = self.new_tmp()
                top.line(f"int {flag} = 0;")
            if rt in ("argmax", "argmin"):
                ai = self.new_tmp()
                top.line(f"int64_t {ai} = 0;")
                accs[p.buffer.name].append(ai)
        if reds or rlevel:
            # what the row's loop hoists lands before it (and stays known to the later
            # stages); only where the row is never empty, since the loop would then not run
            # what the hoisted code computes (a row's first element does not exist)
            rnumel = sympy.sympify(self.kernel.rnumel)
            hoist = isinstance(rnumel, sympy.Integer) and rnumel > 0
            # a value kept for the later loops that does not change along the row is hoisted
            # instead: one register, not an array of copies
            kept = [v for v in self.keep.get(index, []) if not hoist or self.along_row(v)]
            for v in kept:   # row_scratch.py: read back by the later stages
                self.scratch[v] = f"sc{len(self.scratch)}"
                top.line(f"{reg_type(v.dtype)} {self.scratch[v]}[{int(self.kernel.rnumel)}];")
            # a float32 sum: float partial sums over chunks of the row (vectorized as wide as
            # float goes), each added into the double accumulator (a cascade, as eager's sums)
            parts = {p.buffer.name: self.new_tmp() for p in reds
                     if simd and p.reduction_type == "sum"
                     and reg_dtype(p.value.dtype) == torch.float32}
            mark, pre = len(top.lines), Emitter(self, top.indent, parent=top.parent)
            pre.cache = top.cache
            loop = top
            if parts:
                top.line(f"for (int64_t r0 = 0; r0 < rnumel; r0 += {SUM_CHUNK}) {{")
                loop = Emitter(self, top.indent + "    ", parent=top)
                loop.line(f"const int64_t r1 = std::min<int64_t>(r0 + {SUM_CHUNK}, rnumel);")
                for part in parts.values():
                    loop.line(f"float {part} = 0.0f;")
            into = {p.buffer.name: parts.get(p.buffer.name, accs[p.buffer.name][0]) for p in reds}
            if simd:
                # no arg-reductions: the row's loop is vectorized, each lane reducing its part
                # (another order of the same sums; max and min as module.py declares them)
                clauses = "".join(
                    f" reduction({PLAIN_SIMD_MINMAX[p.reduction_type][0]}:{into[p.buffer.name]})"
                    if p.buffer.name in plain
                    else f" reduction({SIMD_REDUCTIONS[p.reduction_type]}:{into[p.buffer.name]})"
                    for p in reds)
                clauses += "".join(f" reduction(|:{flag})" for flag in nan_flags.values())
                loop.line("#pragma omp simd" + clauses)
            pragma = len(loop.lines) - 1 if simd else None
            lo, hi = ("r0", "r1") if parts else ("0", "rnumel")
            loop.line(f"for (int64_t rindex = {lo}; rindex < {hi}; ++rindex) {{")
            inner = Emitter(self, loop.indent + "    ", parent=loop)
            inner.hoist = pre if hoist else None
            for v, name in self.scratch.items():
                if v not in kept:
                    inner.cache[v] = f"{name}[rindex]"
            for p in reds:
                v = inner.value(p.value)
                acc = accs[p.buffer.name]
                rt = p.reduction_type
                if rt == "sum":
                    inner.line(f"{into[p.buffer.name]} += {v};")
                elif rt == "prod":
                    inner.line(f"{acc[0]} *= {v};")
                elif rt == "any":
                    inner.line(f"{acc[0]} |= uint8_t({v} != 0);")
                elif rt == "all":
                    inner.line(f"{acc[0]} &= uint8_t({v} != 0);")
                elif p.buffer.name in plain:
                    op = PLAIN_SIMD_MINMAX[rt][1]
                    inner.line(f"{acc[0]} = {v} {op} {acc[0]} ? {v} : {acc[0]};")
                    if p.buffer.name in nan_flags:
                        inner.line(f"{nan_flags[p.buffer.name]} |= ({v} != {v});")
                elif rt in ("max", "min"):
                    # NaN wins and stays; of equal values the first
                    inner.line(f"{acc[0]} = solder_{rt}({acc[0]}, {v});")
                else:   # argmax / argmin: the first index of the extreme value, NaN the largest
                    op = ">" if rt == "argmax" else "<"
                    isnan = f"({v} != {v})" if p.value.dtype.is_floating_point else "false"
                    accnan = f"({acc[0]} != {acc[0]})" if p.value.dtype.is_floating_point \
                        else "false"
                    inner.line(f"if (!{accnan} && ({isnan} || {v} {op} {acc[0]} || rindex == 0)) "
                               f"{{ {acc[0]} = {v}; {acc[2]} = rindex; }}")
            for p in rlevel:
                self._store(inner, p)
            for v in kept:
                inner.line(f"{self.scratch[v]}[rindex] = {inner.value(v)};")
            if pragma is not None:   # the row's integer divisions flag errors lane by lane
                loop.lines[pragma] += err_clause(inner.lines)
            loop.lines += inner.lines
            loop.line("}")
            if parts:
                for name, part in parts.items():
                    loop.line(f"{accs[name][0]} += {part};")
                top.lines += loop.lines
                top.line("}")
            top.lines[mark:mark] = pre.lines
        for p in reds:
            acc = accs[p.buffer.name]
            rt = p.reduction_type
            if p.buffer.name in nan_flags:
                top.line(f"if ({nan_flags[p.buffer.name]}) "
                         f"{acc[0]} = std::numeric_limits<{acc[1]}>::quiet_NaN();")
            result = acc[2] if rt in ("argmax", "argmin") else acc[0]
            out_dt = p.buffer.dtype
            name = top.tmp(out_dt if rt in ("argmax", "argmin") else reg_dtype(p.value.dtype)
                           if rt not in ("any", "all") else torch.bool, result)
            self.rref[p.buffer.name] = name
            top.cache[E.Value("rref", (p.buffer.name,), p.buffer.dtype)] = name
            self._store_reduction(top, p)
        for p in dups:
            first = self.reduced[(p.reduction_type, p.value)]
            self.rref[p.buffer.name] = self.rref[first]
            top.cache[E.Value("rref", (p.buffer.name,), p.buffer.dtype)] = self.rref[first]
            self._store_reduction(top, p)
        for p in xlevel:
            self._store(top, p)

    def _store_reduction(self, em: Emitter, p) -> None:
        if p.buffer.name not in self.kernel.stores:
            return
        idx = self.printer(p.store_index)
        where, val = self.write(p.buffer.name, idx, self.rref[p.buffer.name], p.value.dtype)
        em.line(f"{where} = {val};")


def generate(kernel: Kernel, by_name: dict) -> KernelSource:
    return CppKernelGen(kernel, by_name).generate()
