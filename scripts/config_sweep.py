"""Times one memory-bound bench case under every launch config of a list, against inductor.

    PYTHONPATH=. python3 scripts/config_sweep.py layernorm gelu_chain [--out DIR]

Each Solder row forces one config on every kernel of the graph (the heuristic and tuner are
bypassed), checks the result against eager, and times it as the benchmark does; "solder auto"
is the normal path and names the config the tuner chose. Inductor runs twice: the spread of
its two times is the noise floor of the table. Inductor's generated code goes to
DIR/<case>.inductor.log (through torch._logging, the public switch for it).
"""
from __future__ import annotations

import argparse
import logging
import os
import sys

import torch

from solder.bench import cases as bench_cases
from solder.bench.timing import median_ms
from solder.runtime import launch

SWEEPS = {
    # reductions: (XBLOCK, num_warps, RELOAD) with RBLOCK from the row; RELOAD 1 reads rows
    # again in later stages (kernels without the RELOAD form ignore it)
    "layernorm": [(xb, w, r) for xb in (1, 2, 4) for w in (4, 8, 16, 32) for r in (0, 1)
                  if xb * 4096 // (w * 32) >= 4],
    "rmsnorm_residual": [(xb, w, r) for xb in (1, 2, 4) for w in (4, 8, 16) for r in (0, 1)],
    "softmax": [(xb, w, r) for xb in (1, 2) for w in (8, 16, 32) for r in (0, 1)],
    # pointwise: (XBLOCK, num_warps)
    "gelu_chain": [(xb, w) for xb in (512, 1024, 2048, 4096, 8192) for w in (4, 8, 16)
                   if xb // (w * 32) >= 2],
}


def _forced(config):
    def candidates(self, xnumel, rnumel):
        if self.src.is_reduction:
            rb = 1 << max(0, (rnumel - 1).bit_length())
            cfg = dict(XBLOCK=config[0], RBLOCK=rb, num_warps=config[1])
            return [dict(cfg, RELOAD=config[2]) if self.src.reload else cfg]
        return [dict(XBLOCK=config[0], num_warps=config[1])]
    return candidates


def _time(case, fn, wl, device):
    out = wl.step(fn)
    bench_cases.check_close(out, wl.step(wl.fn), wl.tolerance)
    return median_ms(lambda: wl.step(fn), device, warmup_ms=25, rep_ms=200)


def main(argv=None):
    ap = argparse.ArgumentParser()
    ap.add_argument("cases", nargs="+")
    ap.add_argument("--out", default=os.environ.get("OUT", "/tmp"))
    a = ap.parse_args(argv)
    device = torch.device("cuda")
    by_name = {c.name: c for c in bench_cases.MEMORY_CASES}
    rows = []
    chosen = []
    real_choose = launch.KernelRunner._choose

    def recording_choose(self, *args):
        cfg = real_choose(self, *args)
        chosen.append(f"{self.src.name}:{cfg}")
        return cfg

    for name in a.cases:
        case = by_name[name]
        wl = case.build(device, False)
        gb = lambda ms: wl.min_bytes / ms / 1e6 if wl.min_bytes else float("nan")
        handler = logging.FileHandler(os.path.join(a.out, f"{name}.inductor.log"))
        torch._logging.set_logs(output_code=True)
        logging.getLogger("torch._inductor").addHandler(handler)
        for rep in (1, 2):
            torch._dynamo.reset()
            ms = _time(case, torch.compile(wl.fn, backend="inductor"), wl, device)
            rows.append((name, f"inductor #{rep}", ms, gb(ms)))
            print(rows[-1], flush=True)
        torch._logging.set_logs(output_code=False)
        logging.getLogger("torch._inductor").removeHandler(handler)
        launch.KernelRunner._choose = recording_choose
        torch._dynamo.reset()
        chosen.clear()
        ms = _time(case, torch.compile(wl.fn, backend="solder"), wl, device)
        rows.append((name, "solder auto " + " ".join(chosen), ms, gb(ms)))
        print(rows[-1], flush=True)
        launch.KernelRunner._choose = real_choose
        real_candidates = launch.KernelRunner.candidates
        for cfg in SWEEPS.get(name, []):
            launch.KernelRunner.candidates = _forced(cfg)
            torch._dynamo.reset()
            try:
                ms = _time(case, torch.compile(wl.fn, backend="solder"), wl, device)
            except Exception as e:  # noqa: BLE001 - a config that does not compile is a row too
                rows.append((name, f"solder {cfg}", float("nan"), float("nan")))
                print(name, cfg, "failed:", type(e).__name__, str(e)[:200], flush=True)
                continue
            finally:
                launch.KernelRunner.candidates = real_candidates
            rows.append((name, f"solder {cfg}", ms, gb(ms)))
            print(rows[-1], flush=True)
    print(f"\n{'case':18} {'variant':60} {'ms':>8} {'GB/s':>7}")
    for name, variant, ms, bw in rows:
        print(f"{name:18} {variant[:60]:60} {ms:8.4f} {bw:7.0f}")


if __name__ == "__main__":
    sys.exit(main())
