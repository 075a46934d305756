"""Every register a Solder kernel's PTX reads is written first: ptxas is never handed an
undefined one.

LLVM's SLP vectorizer (Triton runs it at O3 without a target cost model) packs pairs of narrow
integer index computations into ``<2 x i8>`` vectors; where one lane is poison, the NVPTX back
end packs a register it never wrote::

    mov.b32   %r384, {%rs83, %rs198};   // %rs198: the poison lane, written nowhere
    or.b32    %r385, %r75, %r384;
    mov.b32   {%rs199, _}, %r385;       // only the defined lane is read
    setp.lt.u16 %p218, %rs199 & 255, 2; // "row < 2 and column < 2" of a circular pad

The PTX is right (emulated lane by lane it gives eager's values), and so are the Triton IR and
the LLVM IR before it; the cubin is not: on an H100 and an H200 (CUDA 13's ptxas, Triton 3.6)
the test came out false for the corner elements of a circular pad (fuzz seed 780169: zeros
where the input's values belonged, docs/fuzz-runs.md). Giving each such register a value
(one ``mov`` of 0 at the kernel's start) changes no value the kernel computes, since an
undefined register may hold anything, zero included, and takes the ambiguity away from ptxas.

Installed around Solder's own compiles only (``defining_undefined_registers``), chained with
any hook already installed. Triton's binary cache does not key on the hook: the generated
modules' preamble says so in a comment whose length moved every kernel's first line, which
Triton's key includes, so no cubin compiled before this treatment is reused.
"""
from __future__ import annotations

import contextlib
import re
import threading

# instructions with no destination operand
_NO_DESTINATION = ("st.", "bar.", "barrier.", "ret", "red.", "fence", "membar", "prefetch", "bra",
                   "trap", "exit", "cp.async.commit", "cp.async.wait", "griddepcontrol",
                   "call")
_REGISTER = re.compile(r"%(?:rs|rd|r|p|fd|f|h|hh)\d+\b")
_ZERO = {"rs": "mov.b16 {r}, 0;", "r": "mov.b32 {r}, 0;", "rd": "mov.b64 {r}, 0;",
         "f": "mov.b32 {r}, 0;", "fd": "mov.b64 {r}, 0;", "h": "mov.b16 {r}, 0;",
         "hh": "mov.b32 {r}, 0;", "p": "setp.ne.b32 {r}, 0, 0;"}


def undefined_registers(ptx: str) -> list[str]:
    """The virtual registers ``ptx`` reads but no instruction writes (sorted)."""
    used, written = set(), set()
    for raw in ptx.split("\n"):
        line = raw.split("//")[0].strip()
        if not line or line.startswith((".", "$", "{", "}")) or line.endswith(":"):
            continue
        line = re.sub(r"^@!?%p\d+\s+", "", line).rstrip(";")
        parts = line.split(None, 1)
        if len(parts) < 2:
            continue
        opcode, operands = parts
        used.update(_REGISTER.findall(operands))
        if opcode.startswith(_NO_DESTINATION):
            continue
        # the destination: the first operand, or a braced group of them ({%rs1, %rs2}); a
        # setp's %p1|%p2 is one operand
        first = re.match(r"\s*(\{[^}]*\}|[^,]+)", operands)
        if first:
            written.update(_REGISTER.findall(first.group(1)))
    return sorted(used - written)


def define_undefined_registers(ptx: str) -> tuple[str, list[str]]:
    """``ptx`` with each register it reads before any write set to 0 at the start of its
    function, and those registers. Only single-function modules are changed (Triton's are)."""
    registers = undefined_registers(ptx)
    lines = ptx.split("\n")
    # the function's own declarations: the first run of .reg lines (inline assembly may
    # declare more inside braces further down)
    declarations = []
    for i, line in enumerate(lines):
        if line.strip().startswith(".reg"):
            declarations.append(i)
        elif declarations and line.strip():
            break
    entries = sum(1 for line in lines if line.lstrip().startswith((".entry", ".visible .entry",
                                                                    ".func", ".visible .func")))
    if not registers or not declarations or entries != 1:
        return ptx, []
    kinds = [re.match(r"%([a-z]+)", r).group(1) for r in registers]
    zeroes = [f"\t{_ZERO[k].format(r=r)}  // written nowhere else (solder/runtime/ptx_registers.py)"
              for k, r in zip(kinds, registers)]
    last = declarations[-1]
    return "\n".join(lines[:last + 1] + zeroes + lines[last + 1:]), registers


def _hook(previous):
    def add_stages(backend, stages, options, language, capability):
        if previous is not None:
            previous(backend, stages, options, language, capability)
        make_ptx = stages.get("ptx")
        if make_ptx is None:
            return

        def ptx(src, metadata):
            return define_undefined_registers(make_ptx(src, metadata))[0]
        stages["ptx"] = ptx
    add_stages.solder_defines_registers = True
    return add_stages


_lock = threading.Lock()
_active = {"count": 0, "previous": None}


@contextlib.contextmanager
def defining_undefined_registers():
    """Triton compiles inside this block give ptxas no undefined register (NVIDIA targets).
    Reentrant and thread-safe: the hook stays installed while any thread is inside a block
    (a compile of another thread in that time gets it too, which changes none of its values)."""
    try:
        from triton import knobs
    except ImportError:        # a Triton without knobs: nothing to install
        yield
        return
    rt = knobs.runtime
    with _lock:
        if _active["count"] == 0:
            _active["previous"] = getattr(rt, "add_stages_inspection_hook", None)
            rt.add_stages_inspection_hook = _hook(_active["previous"])
        _active["count"] += 1
    try:
        yield
    finally:
        with _lock:
            _active["count"] -= 1
            if _active["count"] == 0:
                if getattr(rt.add_stages_inspection_hook, "solder_defines_registers", False):
                    rt.add_stages_inspection_hook = _active["previous"]
                _active["previous"] = None
