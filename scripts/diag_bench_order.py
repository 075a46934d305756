"""Why is a model slower under Solder when the benchmark ran other models before it?

ResNet-50 took 2.54 ms under Solder benchmarked alone (inductor 2.75) but 3.4-4.4 ms after GPT-2
and LLaMA in the same process (docs/perf-notes.md, sessions 7-11). This script measures one
model (``--case``, default resnet50) in a fresh process, then again after other cases ran the
way the benchmark runs them, and prints what differs: wall/host/GPU time per call, Triton's slow
launcher, garbage collections, live threads and child processes, global backend flags, and the
host's hottest Python functions.

    PYTHONPATH=. python3 scripts/diag_bench_order.py --case resnet50 --before gpt2,llama_train
"""
from __future__ import annotations

import argparse
import cProfile
import gc
import io
import os
import pstats
import threading
import time

import torch


def flags() -> dict:
    b = torch.backends
    return {"cudnn.benchmark": b.cudnn.benchmark, "cudnn.tf32": b.cudnn.allow_tf32,
            "matmul.tf32": b.cuda.matmul.allow_tf32,
            "bf16_reduced": b.cuda.matmul.allow_bf16_reduced_precision_reduction,
            "fp16_reduced": b.cuda.matmul.allow_fp16_reduced_precision_reduction,
            "precision": torch.get_float32_matmul_precision(),
            "deterministic": torch.are_deterministic_algorithms_enabled(),
            "grad": torch.is_grad_enabled(), "gc": gc.isenabled(), "gc_thresholds": gc.get_threshold()}


def child_stats() -> list[tuple[str, str, float]]:
    """(pid, state, CPU seconds so far) of each child process (worker pools), from /proc."""
    out = []
    try:
        kids = open(f"/proc/{os.getpid()}/task/{os.getpid()}/children").read().split()
    except OSError:
        return out
    for k in kids:
        try:
            st = open(f"/proc/{k}/stat").read().split()
            out.append((k, st[2], (int(st[13]) + int(st[14])) / os.sysconf("SC_CLK_TCK")))
        except OSError:
            pass
    return out


def children() -> list[str]:
    return [f"{pid}:{state}:cpu={cpu:.1f}s" for pid, state, cpu in child_stats()]


def state(label: str) -> None:
    print(f"-- state {label}: threads {[t.name for t in threading.enumerate()]}")
    print(f"   children {children()}")
    print(f"   live objects {len(gc.get_objects())}, gc counts {gc.get_count()}, "
          f"cuda allocated {torch.cuda.memory_allocated() / 2**20:.0f} MiB reserved "
          f"{torch.cuda.memory_reserved() / 2**20:.0f} MiB")
    print(f"   flags {flags()}")


def measure(label: str, work, fn, top: int = 12) -> None:
    from solder.bench import timing
    from solder.bench.profile import breakdown
    dev = torch.device("cuda")
    med = timing.median_ms(lambda: work.step(fn), dev, 100, 400)
    print(f"== {label}: do_bench median {med:.3f} ms")
    breakdown(label, lambda: work.step(fn), top=6)
    prof = cProfile.Profile()
    prof.enable()
    for _ in range(20):
        work.step(fn)
    prof.disable()
    torch.cuda.synchronize()
    text = io.StringIO()
    pstats.Stats(prof, stream=text).sort_stats("tottime").print_stats(top)
    print("\n".join(text.getvalue().splitlines()[4:]))


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--case", default="resnet50")
    p.add_argument("--before", default="gpt2,llama_train")
    p.add_argument("--backends", default="eager,inductor,solder",
                   help="backends the earlier cases run on")
    args = p.parse_args()
    import solder  # noqa: F401
    from solder.bench.cases import all_cases
    from solder.bench.cli import cold_cache_environment
    from solder.bench.runner import Settings, compile_for, run_case, warm_up_process
    cases = {c.name: c for c in all_cases()}
    dev = torch.device("cuda")
    settings = Settings(dev, False, 100, 400)
    with cold_cache_environment("cuda"):
        warm_up_process(["inductor", "solder"], dev, print)
        work = cases[args.case].build(dev, False)
        for backend in ("solder", "inductor"):
            torch._dynamo.reset()
            fn = compile_for(work.fn, backend)
            t0 = time.perf_counter()
            work.step(fn)
            torch.cuda.synchronize()
            print(f"{args.case} / {backend} first call {time.perf_counter() - t0:.2f} s")
            state(f"fresh, {backend}")
            measure(f"{args.case} / {backend}, fresh process", work, fn)
        del work, fn
        for name in args.before.split(","):
            t0 = time.perf_counter()
            r = run_case(cases[name], args.backends.split(","), settings, print)
            print(f"ran {name} in {time.perf_counter() - t0:.1f} s: "
                  + ", ".join(f"{b}={v.median_ms}" for b, v in r.backends.items()))
        work = cases[args.case].build(dev, False)
        for backend in ("solder", "inductor"):
            torch._dynamo.reset()
            fn = compile_for(work.fn, backend)
            work.step(fn)
            torch.cuda.synchronize()
            state(f"after {args.before}, {backend}")
            measure(f"{args.case} / {backend}, after {args.before}", work, fn)
            if backend == "solder":
                gc.collect()
                gc.freeze()   # earlier cases' objects out of the collector's sight
                measure(f"{args.case} / solder, after, gc.freeze()", work, fn, top=0)
                gc.unfreeze()
                gc.disable()
                measure(f"{args.case} / solder, after, gc disabled", work, fn, top=0)
                gc.enable()


if __name__ == "__main__":
    main()
