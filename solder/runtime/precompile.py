"""Compile a graph's kernels in parallel before its first call.

Left alone, each kernel is compiled by Triton when the wrapper first launches it: one after
another, on one core, and a tuned kernel once per candidate config. But a graph with static sizes
already says everything a compile depends on: every kernel's pointer dtypes, its sizes (so the
launch configs the runner will pick or time) and its pointers' alignment (buffers from the
caching allocator are 16-byte aligned). So right after code generation Solder asks Triton to
compile each (kernel, config) with ``warmup`` on ``MockTensor`` stand-ins, under Triton's
``AsyncCompileMode`` with a thread pool: Triton releases the GIL in its MLIR passes, LLVM and
ptxas, so the compiles overlap. The results land in Triton's in-memory and on-disk caches under
exactly the key a real launch computes, and the first call finds them there. A guess that
misses (an input that is not aligned, a seed divisible by 16) only means that launch compiles as
before; a kernel that fails to compile fails again at its launch, with Solder's error message.
"""
from __future__ import annotations

import os
import time
from concurrent.futures import ThreadPoolExecutor

import torch

from ..codegen.scalar_ops import interpreting
from .launch import TUNE_MAX_CANDIDATES

# a seed value with the specialization most draws have (not 1, not a multiple of 16, 32 bits)
_TYPICAL_SEED = 12345


def compile_jobs(compiled, steps, by_name) -> list:
    """(jit function, warmup arguments, launch config) for each kernel launch the graph's first
    call will make, where its sizes are static; duplicates removed."""
    from ..schedule.fusion import Kernel
    jobs, seen = [], set()
    for step in steps:
        if not isinstance(step, Kernel) or step.name not in compiled.runners:
            continue
        runner = compiled.runners[step.name]
        try:
            xnumel, rnumel = int(step.xnumel), int(step.rnumel)
        except TypeError:
            continue  # symbolic sizes: compiled at the first call, for the sizes it gets
        if xnumel == 0:
            continue
        args = []
        for kind, what in runner.src.args:
            if kind == "ptr":
                args.append(by_name[what].layout.dtype)
            elif kind == "seed":
                args.append(_TYPICAL_SEED)
            elif kind == "numel":
                args.append(xnumel if what == "x" else rnumel)
            else:
                break  # a size argument: not a static graph
        else:
            for cfg in runner.planned_configs(xnumel, rnumel):
                key = (id(runner.fn), tuple(map(str, args)), tuple(sorted(cfg.items())))
                if key not in seen:
                    seen.add(key)
                    jobs.append((runner.fn, args, cfg))
    return jobs


def precompile(jobs: list, device: torch.device, threads: int) -> float:
    """Compiles ``jobs`` (from ``compile_jobs``) on ``threads`` threads; returns the seconds it
    took (0 where there is nothing to do: the interpreter, a CPU graph, one thread)."""
    if threads <= 1 or len(jobs) < 2 or interpreting() or device.type != "cuda":
        return 0.0
    from triton import AsyncCompileMode
    t0 = time.perf_counter()
    with torch.cuda.device(device), ThreadPoolExecutor(min(threads, len(jobs))) as pool, \
            AsyncCompileMode(pool, ignore_errors=True):
        for fn, args, cfg in jobs:
            try:
                fn.warmup(*args, grid=(1,), **cfg)
            except Exception:  # noqa: BLE001 - the launch compiles it again and reports
                pass
    return time.perf_counter() - t0


def default_threads() -> int:
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # not on Linux
        return max(1, os.cpu_count() or 1)
