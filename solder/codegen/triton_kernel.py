"""Write one scheduled kernel as a Triton function.

Layout of a generated kernel:
  pointwise:  xindex is a 1-D block of elements; every member is computed and stored once.
  reduction:  xindex is a column of rows [XBLOCK, 1], rindex a row segment [1, RBLOCK]. Members
              run in stages: a stage reduces what it can and stores the per-element values whose
              inputs are ready; the next stage may use the previous stages' row results. A
              persistent kernel holds the whole row (RBLOCK >= rnumel) and runs the stages back
              to back with no loop, so each input element is loaded once; otherwise every stage
              is a loop over the row.
"""
from __future__ import annotations

import math

import sympy
import torch

from ..ir import expr as E
from ..schedule.fusion import Kernel, uses_rindex
from ..schedule.prepare import RINDEX, XINDEX
from . import scalar_ops
from .emitter import ScopedEmitter
from .generated import KernelSource  # noqa: F401  (what generate returns)
from .index_printer import Printer
from .launch_configs import exact_cover
from .stages import member_stages

TL_DTYPE = {
    torch.float32: "tl.float32", torch.float16: "tl.float16", torch.bfloat16: "tl.bfloat16",
    torch.float64: "tl.float64", torch.int8: "tl.int8", torch.int16: "tl.int16",
    torch.int32: "tl.int32", torch.int64: "tl.int64", torch.uint8: "tl.uint8",
    torch.bool: "tl.int1", torch.uint16: "tl.uint16", torch.uint32: "tl.uint32",
    torch.uint64: "tl.uint64",
}


def reg_dtype(dt: torch.dtype) -> torch.dtype:
    """Registers hold float16/bfloat16 values as float32 (eager's opmath)."""
    return torch.float32 if dt in (torch.float16, torch.bfloat16) else dt


class Emitter(ScopedEmitter):
    """Triton's values, as numbered temporaries."""

    def __init__(self, gen: "KernelGen", indent: str, parent: "Emitter | None" = None):
        super().__init__(gen, indent, parent)
        self.mask = "xmask"
        self.reloading = False  # loads of rows read for a second time: let them leave L2
        self.keeping = False    # first loads of rows that will be read again: keep them in L2

    def _tmp(self, expr: str) -> str:
        name = self.gen.new_tmp()
        self.line(f"{name} = {expr}")
        return name

    def _emit(self, v: E.Value) -> str:
        g = self.gen
        if v.op == "load":
            buf, index, mask, ind = v.args
            names = dict(g.printer.names)
            for s, iv in ind:
                names[s] = self.value(iv)
            idx = Printer(names)(index)
            if not (index.free_symbols & {XINDEX, RINDEX}):
                idx = f"{idx} + {g.zero_index(index)}"
            # a row-level load keeps the row's shape; only element-level loads need rmask, and
            # a row-level address under an element-level condition (a slice_scatter's bounds):
            # else the padding lanes past rnumel read where the condition holds there (seed
            # 230727: from an empty buffer, which killed the interpreter)
            element = RINDEX in index.free_symbols or (
                mask is not None and uses_rindex(mask))
            m = "xmask & rmask" if g.kernel.is_reduction and element else "xmask"
            if mask is not None:
                m = f"({m}) & ({self.value(mask)})"
            ptr = g.ptr(buf)
            hint = ""
            if g.kernel.is_reduction and RINDEX in index.free_symbols:
                if XINDEX not in index.free_symbols:
                    hint = ", eviction_policy='evict_last'"  # a weight every row reads: keep in L2
                elif self.reloading:
                    hint = ", eviction_policy='evict_first'"  # the row's last read
                elif self.keeping:
                    hint = ", eviction_policy='evict_last'"  # read again from L2 soon
            expr = f"tl.load({ptr} + ({idx}), {m}, other=0{hint})"
            if reg_dtype(v.dtype) != v.dtype:
                expr += ".to(tl.float32)"
            return self._tmp(expr)
        if v.op == "const":
            return _literal(v.args[0], v.dtype)
        if v.op == "index":
            e = v.args[0]
            s = g.printer(e)
            if not (sympy.sympify(e).free_symbols & {XINDEX, RINDEX}):
                s = f"{s} + {g.zero_index(e)}"
            return self._tmp(f"({s}).to({TL_DTYPE[reg_dtype(v.dtype)]})")
        if v.op == "rand":
            slot, offset, kind = v.args
            fn = {"rand": "tl.rand", "randn": "tl.randn"}[kind]
            off = g.printer(offset)
            if not (sympy.sympify(offset).free_symbols & {XINDEX, RINDEX}):
                off = f"{off} + {g.zero_index(offset)}"  # a 0-d draw: a constant offset
            return self._tmp(f"{fn}({g.seed(slot)}, ({off}).to(tl.uint32))")
        if v.op == "cast":
            return self._tmp(_cast(self.value(v.args[0]), v.args[0].dtype, v.dtype))
        if v.op == "call":
            name, *args = v.args
            exprs = [self.value(a) for a in args]
            return self._tmp(scalar_ops.emit(name, exprs, [a.dtype for a in args]))
        if v.op == "rref":
            return g.rref[v.args[0]]
        raise NotImplementedError(v.op)


def _shapeless(v: E.Value) -> bool:
    """Whether ``v`` is made of constants only (a one-element ``[1]`` block when emitted)."""
    return not any(x.op in ("load", "index", "rand", "rref") for x in E.walk(v))


def _literal(x, dtype) -> str:
    if dtype == torch.bool:
        return "tl.full([1], 1, tl.int1)" if x else "tl.full([1], 0, tl.int1)"
    if dtype.is_floating_point:
        if math.isnan(x):
            s = "float('nan')"
        elif math.isinf(x):
            s = "float('inf')" if x > 0 else "float('-inf')"
        else:
            s = repr(float(x))
        tl_type = "tl.float64" if reg_dtype(dtype) == torch.float64 else "tl.float32"
        if x == 0 and math.copysign(1.0, x) < 0:
            # the interpreter's tl.full drops a zero's sign (5 / -0.0 gave inf); a product
            # keeps it everywhere (Triton's unary minus is 0 - x, +0.0 again)
            return f"(tl.full([1], 0.0, {tl_type}) * -1.0)"
        return f"tl.full([1], {s}, {tl_type})"
    return f"tl.full([1], {int(x)}, {TL_DTYPE[dtype]})"


def _cast(x: str, src: torch.dtype, dst: torch.dtype) -> str:
    if dst == torch.bool:
        return f"({x} != 0)"
    if src == torch.bool:
        return f"{x}.to({TL_DTYPE[reg_dtype(dst)]})"
    if dst in (torch.float16, torch.bfloat16):
        # round to the narrow type, keep computing in float32; an integer goes through float32
        # first, as eager converts it (and Triton's interpreter turns int64 -> bfloat16 into 0)
        if not src.is_floating_point:
            x = f"{x}.to(tl.float32)"
        return f"{_narrowed(x, reg_dtype(src), dst)}.to(tl.float32)"
    if reg_dtype(src) == reg_dtype(dst):
        return x
    return f"{x}.to({TL_DTYPE[reg_dtype(dst)]})"


def _narrowed(x: str, reg: torch.dtype, dst: torch.dtype) -> str:
    """``x`` (held as ``reg``) converted to ``dst`` for a store or a rounding. Triton's
    interpreter converts to bfloat16 wrongly: float64 by its bit pattern (1.54 became 9e-41) and
    float32 by truncation (0.3 became 0.2988, not 0.3008). There a value goes through float32 and
    is rounded to the nearest bfloat16 first (``_round_to_bf16``), so that the conversion is
    exact; generated GPU code converts directly, rounding to nearest even in hardware."""
    if dst == torch.bfloat16 and scalar_ops.interpreting():
        if reg != torch.float32:
            x = f"{x}.to(tl.float32)"
        x = f"_round_to_bf16({x})"
    return f"{x}.to({TL_DTYPE[dst]})"


IDENTITY = {
    "sum": "0", "prod": "1", "max": "float('-inf')", "min": "float('inf')", "any": "0",
    "all": "1", "argmax": "float('-inf')", "argmin": "float('inf')",
}


def _identity(rtype: str, dtype: torch.dtype) -> str:
    if rtype in ("max", "argmax") and not dtype.is_floating_point:
        return str(torch.iinfo(dtype).min) if dtype != torch.bool else "0"
    if rtype in ("min", "argmin") and not dtype.is_floating_point:
        return str(torch.iinfo(dtype).max) if dtype != torch.bool else "1"
    return IDENTITY[rtype]


class KernelGen:
    def __init__(self, kernel: Kernel, by_name: dict, int64: bool):
        self.kernel = kernel
        self.by_name = by_name
        self.int64 = int64
        self.args: list = []
        self.ptr_names: dict = {}
        self.size_names: dict = {}
        self.seed_names: dict = {}
        self.rref: dict = {}
        self.even = False
        self.reload = False
        # (reduction type, reduced value) -> the buffer that already reduces it: var_mean and
        # a separate mean of the same row reduce once
        self.reduced: dict = {}
        self._tmp = 0
        self.printer = Printer({XINDEX: "xindex", RINDEX: "rindex"})

    def new_tmp(self) -> str:
        self._tmp += 1
        return f"t{self._tmp - 1}"

    def ptr(self, buf: str) -> str:
        target = self.by_name[buf].mutates if getattr(self.by_name[buf], "mutates", None) else buf
        if target not in self.ptr_names:
            # numbered, not named after buffers: identical layers then give identical code
            self.ptr_names[target] = f"ptr{len(self.ptr_names)}"
            self.args.append(("ptr", target))
        return self.ptr_names[target]

    def seed(self, slot: int) -> str:
        if slot not in self.seed_names:
            self.seed_names[slot] = f"seed{slot}"
            self.args.append(("seed", slot))
        return self.seed_names[slot]

    def zero_index(self, e) -> str:
        return "xindex * 0"  # gives a constant index the block's shape

    def size_symbols(self, exprs):
        for e in exprs:
            for s in sympy.sympify(e).free_symbols:
                if s not in (XINDEX, RINDEX) and not str(s).startswith("ind") and s not in self.size_names:
                    self.size_names[s] = str(s)
                    self.printer.names[s] = str(s)

    def generate(self) -> KernelSource:
        k = self.kernel
        for p in k.prepared.values():
            extra = [v for _, v in p.store_binds] + [p.store_mask] * (p.store_mask is not None)
            self.size_symbols([p.store_index] + [e for v in [p.value] + extra
                                                 for e in E.index_exprs(v)])
        self.size_symbols([k.xnumel, k.rnumel])
        self.even = exact_cover(k.is_reduction, k.persistent, k.reduction_hint == "outer",
                                k.xnumel, k.rnumel)
        body = self._body()
        sig = []
        for kind, what in self.args:
            sig.append(self.ptr_names[what] if kind == "ptr" else self.seed_names[what])
        size_args = sorted(self.size_names.values())
        for s in size_args:
            self.args.append(("size", s))
        # Triton's interpreter passes ints as 1-element arrays, which a loop bound cannot take
        rnumel = "rnumel: tl.constexpr" if not k.persistent and scalar_ops.interpreting() else "rnumel"
        sig += size_args + ["xnumel"] + ([rnumel] if k.is_reduction else [])
        self.args += [("numel", "x")] + ([("numel", "r")] if k.is_reduction else [])
        sig += ["XBLOCK: tl.constexpr"] + (["RBLOCK: tl.constexpr"] if k.is_reduction else [])
        sig += ["RELOAD: tl.constexpr"] if self.reload else []
        header = [f"@triton.jit", f"def {k.name}({', '.join(sig)}):"]
        origins = k.origins()
        doc = [f"    # fuses: {', '.join(origins)}"] if origins else []
        doc += ["    # pointers: " + ", ".join(f"{p}={b}" for b, p in self.ptr_names.items())]
        doc += [f"    # from: {s}" for s in k.source_lines()[:6]]
        src = "\n".join(header + doc + body) + "\n"
        return KernelSource(k.name, src, list(self.args), k.is_reduction, k.persistent,
                            k.xnumel, k.rnumel, self.int64, origins, k.reduction_hint, self.even,
                            self.reload)

    def _body(self) -> list[str]:
        k = self.kernel
        ind = "    "
        pid = "tl.program_id(0).to(tl.int64)" if self.int64 else "tl.program_id(0)"
        lines = []
        # sizes every launch config tiles exactly: all-true masks, which Triton drops
        xmask = "tl.full([XBLOCK], 1, tl.int1)" if self.even else "xindex < xnumel"
        if not k.is_reduction:
            lines += [f"{ind}xoffset = {pid} * XBLOCK",
                      f"{ind}xindex = xoffset + tl.arange(0, XBLOCK)",
                      f"{ind}xmask = {xmask}"]
            em = Emitter(self, ind)
            for name, p in k.prepared.items():
                if name in k.stores:
                    self._store(em, p, "xmask")
            return lines + em.lines
        lines += [f"{ind}xoffset = {pid} * XBLOCK",
                  f"{ind}xindex = xoffset + tl.arange(0, XBLOCK)[:, None]",
                  f"{ind}xmask = " + ("tl.full([XBLOCK, 1], 1, tl.int1)" if self.even
                                                 else "xindex < xnumel")]
        top = Emitter(self, ind)
        stages = self._stages()
        if k.persistent:
            lines += [f"{ind}rindex = tl.arange(0, RBLOCK)[None, :]",
                      f"{ind}rmask = {self._rmask()}"]
            return lines + self._persistent_body(top, stages)
        for stage in stages:
            self._loop_stage(top, stage)
        return lines + top.lines

    def _rmask(self) -> str:
        return "tl.full([1, RBLOCK], 1, tl.int1)" if self.even else "rindex < rnumel"

    def _stages(self):
        return member_stages(self.kernel)

    def _store(self, em: Emitter, p, mask: str):
        k = self.kernel
        if p.buffer.name not in k.stores:
            return
        v = em.value(p.value)
        out_dtype = self.by_name[p.buffer.name].dtype
        printer = self.printer
        if p.store_binds:  # a scatter: the address depends on data
            printer = Printer({**self.printer.names, **{s: em.value(iv) for s, iv in p.store_binds}})
        if p.store_mask is not None:
            mask = f"({mask}) & ({em.value(p.store_mask)})"
        idx = printer(p.store_index)
        ptr = self.ptr(p.buffer.name)
        if not (sympy.sympify(p.store_index).free_symbols & {XINDEX, RINDEX}):
            idx = f"{idx} + xindex * 0"
        val = v
        if out_dtype == torch.bool:
            val = f"({v} != 0)"
        else:
            val = _narrowed(v, reg_dtype(p.value.dtype), out_dtype)
        mode = getattr(p.buffer, "store_mode", "store")
        if _shapeless(p.value):  # a constant is one element: give it the block's shape
            # (Triton broadcasts it for tl.store; the interpreter's atomics read a [1] value
            # as if it had the pointer's shape, adding garbage)
            shape = "[XBLOCK]" if not k.is_reduction else (
                "[XBLOCK, RBLOCK]" if p.level == "r" else "[XBLOCK, 1]")
            val = f"(tl.full({shape}, 0, {TL_DTYPE[out_dtype]}) + {val})"
        if mode == "store":
            em.line(f"tl.store({ptr} + ({idx}), {val}, {mask})")
        else:  # an atomic update (duplicate indices accumulate)
            em.line(f"tl.{mode}({ptr} + ({idx}), {val}, {mask}, sem='relaxed')")

    def _finalize(self, em: Emitter, p, acc: str, acc_idx: str | None):
        rtype = p.reduction_type
        name = self.new_tmp()
        if rtype in ("argmax", "argmin"):
            em.line(f"_, {name} = tl.reduce(({acc}, {acc_idx}), 1, _{rtype}_combine)")
            em.line(f"{name} = {name}[:, None]")
        elif rtype == "sum" and reg_dtype(p.value.dtype).is_floating_point:
            # + 0.0: eager's float sums start at +0.0, so a row of -0.0 sums to +0.0; a tree
            # of -0.0 + -0.0 alone gives -0.0 (a persistent row on a GPU)
            em.line(f"{name} = (tl.sum({acc}, 1) + 0.0)[:, None]")
        elif rtype == "sum":
            em.line(f"{name} = tl.sum({acc}, 1)[:, None]")
        else:
            em.line(f"{name} = tl.reduce({acc}, 1, _{rtype}_combine)[:, None]")
        self.rref[p.buffer.name] = name
        em.cache[E.Value("rref", (p.buffer.name,), p.buffer.dtype)] = name

    def _masked(self, em, p, v: str) -> str:
        dt = reg_dtype(p.value.dtype)
        ident = _identity(p.reduction_type, dt)
        if p.reduction_type in ("any", "all"):
            v = f"({v} != 0).to(tl.int8)"
        return f"tl.where(xmask & rmask, {v}, {ident})"

    def _same_reduction(self, em: Emitter, p) -> bool:
        """True when an earlier member of this kernel reduces the same value the same way: p
        then reads that result instead of reducing again."""
        key = (p.reduction_type, p.value)
        first = self.reduced.setdefault(key, p.buffer.name)
        if first == p.buffer.name:
            return False
        name = self.rref[first]
        self.rref[p.buffer.name] = name
        em.cache[E.Value("rref", (p.buffer.name,), p.buffer.dtype)] = name
        return True

    def _persistent_body(self, top: Emitter, stages) -> list[str]:
        """The stages of a persistent kernel. Where the last stage reads the row again (a layer
        norm's normalize step after its sums), the kernel can either keep the row in registers
        until then or read it again from L2. Neither wins everywhere, so both are generated
        under a RELOAD constexpr and the launch tuner times them. In the reloading form the
        reductions share the first read, which keeps the row in L2 (evict_last), and the last
        stage reads it again for the last time (evict_first). On an H200 (layer norm,
        16384x4096 fp32) that form ran in 0.129 ms against 0.133 for the register-held one, and
        without the evict_last hint it gained nothing (docs/perf-notes.md)."""
        self.reload = len(stages) > 1 and self._can_reload(stages[-1])
        if not self.reload:
            for stage in stages:
                self._persistent_stage(top, stage)
            return top.lines
        rref, reduced = dict(self.rref), dict(self.reduced)
        first = Emitter(self, top.indent + "    ", parent=top)
        first.keeping = True
        for stage in stages[:-1]:
            self._persistent_stage(first, stage)
        # the last stage loads what it reads anew: only row results (rrefs) carry over
        last = Emitter(self, top.indent + "    ")
        last.cache = {v: n for v, n in first.cache.items() if v.op == "rref"}
        last.reloading = True
        self._persistent_stage(last, stages[-1])
        self.rref, self.reduced = rref, reduced
        kept = Emitter(self, top.indent + "    ", parent=top)
        for stage in stages:
            self._persistent_stage(kept, stage)
        return (top.lines + [f"{top.indent}if RELOAD:  # read the row again (from L2)"]
                + first.lines + last.lines
                + [f"{top.indent}else:  # keep the row in registers"] + kept.lines)

    def _can_reload(self, last_stage) -> bool:
        """Whether the last stage reads rows at element level and no buffer this kernel writes
        is also read by it (a reload would see the new values)."""
        k = self.kernel
        if k.reduction_hint == "outer":
            return False
        target = lambda b: getattr(self.by_name[b], "mutates", None) or b  # noqa: E731
        loaded = {target(v.args[0]) for p in k.prepared.values() for v in E.walk(p.value)
                  if v.op == "load"}
        row_reads = any(v.op == "load" and {XINDEX, RINDEX} <= sympy.sympify(v.args[1]).free_symbols
                        for p in last_stage for v in E.walk(p.value))
        return row_reads and not loaded & {target(b) for b in k.stores}

    def _persistent_stage(self, em: Emitter, stage):
        em.mask = "xmask & rmask"
        for p in stage:
            if p.reduction_type is None or self._same_reduction(em, p):
                continue
            v = em.value(p.value)
            masked = em._tmp(self._masked(em, p, v))
            idx = None
            if p.reduction_type in ("argmax", "argmin"):
                # int64, as the Value (the interpreter's arange is int32: an int64 identity
                # next to it overflowed, seed 187929)
                idx = em._tmp("(rindex + xindex * 0).to(tl.int64)")
            self._finalize(em, p, masked, idx)
        for p in stage:
            if p.reduction_type is None:
                self._store(em, p, "xmask & rmask" if p.level == "r" else "xmask")
            else:
                self._store_reduction(em, p)

    def _store_reduction(self, em, p):
        if p.buffer.name not in self.kernel.stores:
            return
        out_dtype = self.by_name[p.buffer.name].dtype
        r = self.rref[p.buffer.name]
        val = f"({r} != 0)" if out_dtype == torch.bool else _narrowed(
            r, reg_dtype(p.value.dtype), out_dtype)
        idx = self.printer(p.store_index)
        if not (sympy.sympify(p.store_index).free_symbols & {XINDEX}):
            idx = f"{idx} + xindex * 0"
        em.line(f"tl.store({self.ptr(p.buffer.name)} + ({idx}), {val}, xmask)")

    def _loop_stage(self, top: Emitter, stage):
        reds, dups = [], []
        for p in stage:
            if p.reduction_type is not None:
                key = (p.reduction_type, p.value)
                (dups if self.reduced.setdefault(key, p.buffer.name) != p.buffer.name
                 else reds).append(p)
        rlevel = [p for p in stage if p.reduction_type is None and p.level == "r"]
        xlevel = [p for p in stage if p.reduction_type is None and p.level == "x"]
        accs = {}
        for p in reds:
            dt = TL_DTYPE[reg_dtype(p.value.dtype)] if p.reduction_type not in ("any", "all") \
                else "tl.int8"
            acc = self.new_tmp()
            top.line(f"{acc} = tl.full([XBLOCK, RBLOCK], {_identity(p.reduction_type, reg_dtype(p.value.dtype))}, {dt})")
            accs[p.buffer.name] = [acc]
            if p.reduction_type in ("argmax", "argmin"):
                ai = self.new_tmp()
                top.line(f"{ai} = tl.full([XBLOCK, RBLOCK], 0, tl.int64)")
                accs[p.buffer.name].append(ai)
        if reds or rlevel:
            top.line("for roffset in range(0, rnumel, RBLOCK):")
            inner = Emitter(self, top.indent + "    ", parent=top)
            inner.mask = "xmask & rmask"
            inner.line("rindex = roffset + tl.arange(0, RBLOCK)[None, :]")
            inner.line(f"rmask = {self._rmask()}")
            for p in reds:
                v = inner.value(p.value)
                masked = inner._tmp(self._masked(inner, p, v))
                acc = accs[p.buffer.name]
                rt = p.reduction_type
                if rt == "sum":
                    inner.line(f"{acc[0]} = {acc[0]} + {masked}")
                elif rt in ("argmax", "argmin"):
                    inner.line(f"{acc[0]}, {acc[1]} = _{rt}_combine({acc[0]}, {acc[1]}, {masked}, "
                               f"rindex + xindex * 0)")
                else:
                    inner.line(f"{acc[0]} = _{rt}_combine({acc[0]}, {masked})")
            for p in rlevel:
                self._store(inner, p, "xmask & rmask")
            top.lines += inner.lines
        for p in reds:
            acc = accs[p.buffer.name]
            self._finalize(top, p, acc[0], acc[1] if len(acc) > 1 else None)
            self._store_reduction(top, p)
        for p in dups:
            self._same_reduction(top, p)
            self._store_reduction(top, p)
        for p in xlevel:
            self._store(top, p, "xmask")


REDUCTION_PRELUDE = '''
@triton.jit
def _max_combine(a, b):
    return tl.where((a > b) | (a != a), a, b)


@triton.jit
def _min_combine(a, b):
    return tl.where((a < b) | (a != a), a, b)


@triton.jit
def _prod_combine(a, b):
    return a * b


@triton.jit
def _any_combine(a, b):
    return a | b


@triton.jit
def _all_combine(a, b):
    return a & b


@triton.jit
def _argmax_combine(a, ia, b, ib):
    # larger value wins; NaN counts as largest; ties go to the lower index (as torch)
    take_a = (a > b) | ((a != a) & (b == b)) | (((a == b) | ((a != a) & (b != b))) & (ia < ib))
    return tl.where(take_a, a, b), tl.where(take_a, ia, ib)


@triton.jit
def _argmin_combine(a, ia, b, ib):
    take_a = (a < b) | ((a != a) & (b == b)) | (((a == b) | ((a != a) & (b != b))) & (ia < ib))
    return tl.where(take_a, a, b), tl.where(take_a, ia, ib)
'''


def generate(kernel: Kernel, by_name: dict, int64: bool) -> KernelSource:
    return KernelGen(kernel, by_name, int64).generate()
