"""Why does Solder's cold compile of a model take longer inside the bench's process?

On the H200 (session 14) the LLaMA step's Solder compile took 20.1 s in `python -m solder bench`
(after the earlier cases, right after inductor's compile of the same model) and 10.7-14.8 s in
fresh processes; inductor's own moved from 23.9 to 25.1 s. This script times one case's Solder
compile stage by stage, first in a fresh process (`solder.bench.profile CASE --compile`), then in
this process after the earlier cases ran the way the bench runs them and inductor compiled the
case, and prints what differs: the stages, Python's garbage collections during the compile (and
the seconds they took), the CPU seconds other processes (inductor's and Solder's workers) used
meanwhile, live objects and threads.

    PYTHONPATH=. python3 scripts/diag_compile_order.py --case llama_train --before gpt2,resnet50
"""
from __future__ import annotations

import argparse
import gc
import os
import subprocess
import sys
import tempfile
import threading
import time

import torch
from diag_bench_order import child_stats   # scripts/ is on the path when run


def children_cpu_s() -> float:
    """CPU seconds used so far by this process's children (inductor's and Solder's workers)."""
    return sum(cpu for _, _, cpu in child_stats())


class GcTimer:
    """Counts and times the collector's passes by generation while active."""

    def __init__(self):
        self.count = [0, 0, 0]
        self.seconds = [0.0, 0.0, 0.0]
        self._t0 = 0.0

    def __call__(self, phase, info):
        if phase == "start":
            self._t0 = time.perf_counter()
        else:
            g = info["generation"]
            self.count[g] += 1
            self.seconds[g] += time.perf_counter() - self._t0

    def __enter__(self):
        gc.callbacks.append(self)
        return self

    def __exit__(self, *exc):
        gc.callbacks.remove(self)


def solder_compile(label: str, work) -> None:
    from solder.bench.profile import _solder_stages
    from solder.bench.runner import compile_for
    reports: list = []
    fn = compile_for(work.fn, "solder", reports)
    kids0 = children_cpu_s()
    with GcTimer() as gct:
        t0 = time.perf_counter()
        work.step(fn)
        torch.cuda.synchronize()
        total = time.perf_counter() - t0
    print(f"== {label}: Solder's first call {total:.2f} s; collections by generation "
          f"{gct.count} taking {[round(s, 2) for s in gct.seconds]} s; other processes' CPU "
          f"{children_cpu_s() - kids0:.1f} s; live objects {len(gc.get_objects())}; threads "
          f"{len(threading.enumerate())}")
    if reports:
        _solder_stages(reports[0], total)


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--case", default="llama_train")
    p.add_argument("--before", default="gpt2,resnet50")
    args = p.parse_args()
    from solder.bench.compile_time import cold_environment
    env = {**os.environ, **cold_environment(tempfile.mkdtemp(prefix="solder-diag-"))}
    fresh = subprocess.run([sys.executable, "-m", "solder.bench.profile", args.case, "--compile"],
                           capture_output=True, text=True, env=env)
    print("== fresh process\n" + fresh.stdout + fresh.stderr[-800:])

    import solder  # noqa: F401
    from solder.bench.cases import all_cases
    from solder.bench.cli import cold_cache_environment
    from solder.bench.runner import Settings, compile_for, run_case, warm_up_process
    cases = {c.name: c for c in all_cases()}
    dev = torch.device("cuda")
    settings = Settings(dev, False, 100, 400)
    with cold_cache_environment("cuda"):
        warm_up_process(["inductor", "solder"], dev, print)
        for name in [n for n in args.before.split(",") if n]:
            t0 = time.perf_counter()
            r = run_case(cases[name], ["eager", "inductor", "solder"], settings, print)
            print(f"ran {name} in {time.perf_counter() - t0:.1f} s: "
                  + ", ".join(f"{b} compile {v.compile_s}" for b, v in r.backends.items()))
        work = cases[args.case].build(dev, False)
        torch._dynamo.reset()
        kids0 = children_cpu_s()
        t0 = time.perf_counter()
        work.step(compile_for(work.fn, "inductor"))
        torch.cuda.synchronize()
        print(f"== inductor's compile of {args.case} here: {time.perf_counter() - t0:.2f} s, "
              f"other processes' CPU {children_cpu_s() - kids0:.1f} s")
        solder_compile(f"after {args.before} and inductor's compile", work)


if __name__ == "__main__":
    main()
