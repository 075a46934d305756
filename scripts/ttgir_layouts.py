"""Compile a generated Triton kernel for sm_90 on any machine (no GPU needed: Triton's compiler
takes the target) and report the layout conversions in its TTGIR, for variants of the source.

    python scripts/ttgir_layouts.py kernels.py [--kernel k0] [--xblock 32,512] [--dump DIR]

Made for the adaptive_avg_pool3d backward miscompile (docs/perf-notes.md, session 11): its
kernels.py comes from a CPU run with SOLDER_DEBUG_DIR set. Pointer arguments are assumed float32
and 16-byte aligned, integer ones int32, as the JIT specializes them there."""
import argparse
import importlib.util
import inspect
import os
import re
import tempfile

import triton
from triton.backends.compiler import GPUTarget
from triton.compiler import ASTSource

VARIANTS = {
    "as generated": lambda s: s,
    "int64 xindex": lambda s: s.replace("xindex = xoffset + tl.arange(0, XBLOCK)",
                                        "xindex = (xoffset + tl.arange(0, XBLOCK)).to(tl.int64)"),
}


def _load(text: str, name: str):
    path = os.path.join(tempfile.mkdtemp(), f"{name}.py")
    with open(path, "w") as f:
        f.write(text)
    spec = importlib.util.spec_from_file_location(name, path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def ttgir(fn, xblock: int) -> str:
    params = list(inspect.signature(fn.fn).parameters)
    sig, attrs = {}, {}
    for i, p in enumerate(params):
        if p.startswith("ptr"):
            sig[p] = "*fp32"
            attrs[(i,)] = [["tt.divisibility", 16]]
        elif p in ("XBLOCK", "RBLOCK", "RELOAD"):
            sig[p] = "constexpr"
        else:
            sig[p] = "i32"
    src = ASTSource(fn=fn, signature=sig, constexprs={"XBLOCK": xblock}, attrs=attrs)
    return triton.compile(src, target=GPUTarget("cuda", 90, 32)).asm["ttgir"]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("kernels")
    ap.add_argument("--kernel", default="k0")
    ap.add_argument("--xblock", default="32,512")
    ap.add_argument("--dump")
    args = ap.parse_args()
    text = open(args.kernels).read()
    for name, edit in VARIANTS.items():
        fn = getattr(_load(edit(text), "v_" + re.sub(r"\W", "_", name)), args.kernel)
        for xb in (int(x) for x in args.xblock.split(",")):
            ir = ttgir(fn, xb)
            conv = [re.sub(r" loc\(.*", "", line.split(": ")[-1]) for line in ir.splitlines()
                    if "convert_layout" in line]
            kinds = {c: conv.count(c) for c in sorted(set(conv))}
            print(f"{name:14s} XBLOCK={xb:<4d} {len(conv)} convert_layouts {kinds}")
            if args.dump:
                os.makedirs(args.dump, exist_ok=True)
                with open(os.path.join(args.dump, f"{name.replace(' ', '_')}_x{xb}.ttgir"), "w") as f:
                    f.write(ir)


if __name__ == "__main__":
    main()
