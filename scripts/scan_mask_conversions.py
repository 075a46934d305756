"""Scan generated kernels for the pattern behind the adaptive_avg_pool3d miscompile (docs/
perf-notes.md, session 11): a load whose mask comes through an i1 ``convert_layout``, i.e. a
gather in one layout under a mask computed in another. Compiles each pointwise kernel of a
SOLDER_DEBUG_DIR dump for sm_90 on this machine (no GPU needed) at the given XBLOCKs.

    SOLDER_DEBUG_DIR=/tmp/dump pytest tests/kernels/test_pooling.py   # on the CPU
    python scripts/scan_mask_conversions.py /tmp/dump [--xblock 512,1024]

The pattern is common and mostly harmless: over the pooling and view tests (session 11) it
flagged 17 of 129 distinct pointwise kernels, among them adaptive_avg_pool3d's own forward, and
all of those but the pool3d backward pass on the H200. It narrows a search; it is no verdict.
Kernels whose arguments this script types wrongly (non-float pointers) fail to compile and are
listed as such."""
import argparse
import glob
import os
import re
import sys

sys.path.insert(0, os.path.dirname(__file__))
from ttgir_layouts import _load, ttgir  # noqa: E402

SSA = re.compile(r"%[\w.#]+")


def converted_mask_loads(ir: str) -> int:
    """Loads whose mask operand derives (through and/or) from an i1 convert_layout."""
    flagged, count = set(), 0
    for line in ir.splitlines():
        line = line.strip()
        m = re.match(r"(%[\w.#]+) = (\S+)", line)
        if m and m.group(2) == "ttg.convert_layout" and "xi1," in line:
            flagged.add(m.group(1))
        elif m and m.group(2) in ("arith.andi", "arith.ori") and any(
                v in flagged for v in SSA.findall(line.split("=", 1)[1])):
            flagged.add(m.group(1))
        elif m and m.group(2) == "tt.load":
            operands = SSA.findall(line.split("tt.load", 1)[1].split(":")[0])
            if len(operands) > 1 and operands[1] in flagged:
                count += 1
    return count


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("dump")
    ap.add_argument("--xblock", default="512,1024")
    args = ap.parse_args()
    seen, hits, total = set(), 0, 0
    for path in sorted(glob.glob(os.path.join(args.dump, "**", "kernels.py"), recursive=True)):
        text = open(path).read()
        mod = _load(text, "scan_" + re.sub(r"\W", "_", path))
        for name in re.findall(r"^def (k\d+)\(([^)]*)\)", text, re.M):
            kname, params = name
            if "RBLOCK" in params:
                continue   # reductions: launched with their own block shapes
            body = text.split(f"def {kname}(", 1)[1].split("\n@triton.jit", 1)[0]
            if body in seen:
                continue
            seen.add(body)
            total += 1
            for xb in (int(x) for x in args.xblock.split(",")):
                try:
                    n = converted_mask_loads(ttgir(getattr(mod, kname), xb))
                except Exception as e:  # noqa: BLE001 - report and go on
                    print(f"{path}:{kname}: compile failed ({type(e).__name__})")
                    break
                if n:
                    hits += 1
                    print(f"{path}:{kname} XBLOCK={xb}: {n} loads under converted masks")
                    break
    print(f"{total} distinct pointwise kernels, {hits} with loads under converted masks")


if __name__ == "__main__":
    main()
