"""Compile a graph's kernels in parallel before its first call.

Left alone, each kernel is compiled by Triton when the wrapper first launches it: one after
another, on one core, and a tuned kernel once per candidate config. But a graph with static sizes
already says everything a compile depends on: every kernel's pointer dtypes, its sizes (so the
launch configs the runner will pick or time) and its pointers' alignment (buffers from the
caching allocator are 16-byte aligned). So right after code generation Solder asks Triton to
compile each (kernel, config) with ``warmup`` on ``MockTensor`` stand-ins, under Triton's
``AsyncCompileMode`` with a thread pool: Triton releases the GIL in its MLIR passes, LLVM and
ptxas, so the compiles overlap. The results land in Triton's in-memory and on-disk caches under
exactly the key a real launch computes, and the first call finds them there, binaries loaded
and launchers built (also in the pool). A guess that
misses (an input that is not aligned, a seed divisible by 16) only means that launch compiles as
before; a kernel that fails to compile fails again at its launch, with Solder's error message.

The graph cache stores the jobs of the configs the first call kept (``encode_jobs``): a later
process that loads the graph from the cache runs them the same way, and Triton then only reads
the binaries back from its own cache, in parallel, before the first call needs them.
"""
from __future__ import annotations

import os
import threading
import time
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any, NamedTuple

import torch

from ..codegen.launch_configs import COMPILE_OPTIONS, is_launch_config
from ..codegen.scalar_ops import interpreting
from . import launcher_check
from .launch import count_compiles

# a seed value with the specialization most draws have (not 1, not a multiple of 16, 32 bits)
_TYPICAL_SEED = 12345


class Job(NamedTuple):
    kernel: str     # the kernel's name in its graph
    fn: Any         # its @triton.jit function
    args: list      # as ``warmup`` takes them: pointer dtypes, seed and numel values
    cfg: dict       # launch config


def compile_jobs(compiled, steps, by_name) -> list[Job]:
    """One job for each kernel launch the graph's first call will make, where its sizes are
    static; duplicates removed."""
    return jobs_for(launches(steps, compiled.kernels, by_name), compiled)


def launches(steps, kernels: dict, by_name) -> list[tuple]:
    """(kernel, xnumel, rnumel, warmup arguments) of each kernel launch of the graph's first
    call whose sizes are static: plain data, worked out where the graph's IR is (a forked
    child sends them as JSON through ``encode_args``)."""
    from ..schedule.fusion import Kernel
    out = []
    for step in steps:
        if not isinstance(step, Kernel) or step.name not in kernels:
            continue
        try:
            xnumel, rnumel = int(step.xnumel), int(step.rnumel)
        except TypeError:
            continue  # symbolic sizes: compiled at the first call, for the sizes it gets
        if xnumel == 0:
            continue
        args = []
        for kind, what in kernels[step.name].args:
            if kind == "ptr":
                args.append(by_name[what].layout.dtype)
            elif kind == "seed":
                args.append(_TYPICAL_SEED)
            elif kind == "numel":
                args.append(xnumel if what == "x" else rnumel)
            else:
                break  # a size argument: not a static graph
        else:
            out.append((step.name, xnumel, rnumel, args))
    return out


def jobs_for(launch_list: list[tuple], compiled) -> list[Job]:
    """The compile jobs of ``launches``: each launch's planned configs (the heuristic one, or
    every candidate the tuner will time), duplicates removed."""
    jobs, seen = [], set()
    for name, xnumel, rnumel, args in launch_list:
        runner = compiled.runners.get(name)
        if runner is None:
            continue
        for cfg in runner.planned_configs(xnumel, rnumel):
            key = (id(runner.fn), tuple(map(str, args)), tuple(sorted(cfg.items())))
            if key not in seen:
                seen.add(key)
                jobs.append(Job(name, runner.fn, args, cfg))
    return jobs


def encode_args(args: list) -> list:
    return [f"dtype:{str(a).removeprefix('torch.')}" if isinstance(a, torch.dtype) else a
            for a in args]


def decode_args(args: list) -> list:
    """``encode_args`` undone; raises ValueError on anything else."""
    decoded = []
    for a in args:
        if isinstance(a, str) and a.startswith("dtype:"):
            dt = getattr(torch, a[len("dtype:"):], None)
            if not isinstance(dt, torch.dtype):
                raise ValueError(f"bad dtype {a!r} in a precompile job")
            decoded.append(dt)
        elif type(a) is int:
            decoded.append(a)
        else:
            raise ValueError(f"bad argument {a!r} in a precompile job")
    return decoded


def encode_jobs(jobs: list[Job], compiled, device: torch.device) -> dict:
    """The jobs whose config the graph's first call kept, as JSON for the graph cache."""
    kept = []
    for job in jobs:
        runner = compiled.runners.get(job.kernel)
        if runner is not None and job.cfg in runner.configs.values():
            kept.append([job.kernel, encode_args(job.args), job.cfg])
    return {"device": str(device), "jobs": kept}


def decode_jobs(data: dict, compiled) -> tuple[list[Job], torch.device]:
    """``encode_jobs``'s result back as jobs for ``compiled``; raises ValueError on anything
    that is not a job of this graph."""
    device = torch.device(data["device"])
    jobs = []
    for kernel, args, cfg in data["jobs"]:
        runner = compiled.runners.get(kernel)
        if runner is None or not is_launch_config(cfg):
            raise ValueError(f"bad precompile job for kernel {kernel!r}")
        jobs.append(Job(kernel, runner.fn, decode_args(args), cfg))
    return jobs, device


def precompile(jobs: list[Job], device: torch.device, threads: int,
               stats: dict | None = None) -> float:
    """Compiles ``jobs`` on ``threads`` threads and loads the binaries, counting Triton's builds
    and cache hits into ``stats``; returns the seconds it took (0 where there is nothing to do:
    the interpreter, a CPU graph, one thread)."""
    if not start(jobs, device, threads, stats):
        return 0.0
    return wait_all()


# Graph precompiles run one after another on one background thread (each spreads its jobs over
# its own pool), so a graph's kernels compile while the program goes on: AOTAutograd lowers the
# backward graph, Dynamo traces on. A graph's first call waits for its own precompile
# (``wait_for``): its kernels are then in their JIT functions' caches. The precompiles queued
# after it (a backward graph's, whose kernels only the backward launches) go on meanwhile; two
# graphs that share a kernel module are safe too, as the queue finishes the earlier graph's
# first and a later warmup finds the kernel already compiled.
_BACKGROUND: ThreadPoolExecutor | None = None
_BACKGROUND_PID = 0   # a forked child inherits the executor but not its thread: it makes its own
_PENDING: set = set()
_PENDING_LOCK = threading.Lock()
POOL_THREAD_PREFIX = "solder-precompile"


def start(jobs: list[Job], device: torch.device, threads: int, stats: dict | None = None,
          on_device=None, processes: int = 0) -> Future | None:
    """Starts compiling ``jobs`` in the background; returns its future (for ``wait_for``), or
    None where there is nothing to do. ``on_device``: a context factory that makes ``device``
    current (default torch.cuda's)."""
    global _BACKGROUND, _BACKGROUND_PID
    if threads <= 1 or len(jobs) < 2 or interpreting() or device.type != "cuda":
        return None
    if _BACKGROUND is None or _BACKGROUND_PID != os.getpid():
        _BACKGROUND = ThreadPoolExecutor(1, thread_name_prefix=POOL_THREAD_PREFIX + "-graphs")
        _BACKGROUND_PID = os.getpid()
        with _PENDING_LOCK:
            _PENDING.clear()   # a parent's compiles, which no thread here will finish
    stats = stats if stats is not None else {}
    on_device = on_device or (lambda: torch.cuda.device(device))
    future = _BACKGROUND.submit(_compile_and_load, jobs, on_device, threads, stats, processes)
    with _PENDING_LOCK:
        _PENDING.add(future)
    future.add_done_callback(_done)
    return future


def _done(future) -> None:
    with _PENDING_LOCK:
        _PENDING.discard(future)


def wait_for(future: Future) -> float:
    """Blocks until one precompile (``start``'s future) is done; returns the seconds waited."""
    t0 = time.perf_counter()
    try:
        future.result()
    except Exception:  # noqa: BLE001 - each launch compiles again and reports
        pass
    return time.perf_counter() - t0


def wait_all() -> float:
    """Blocks until no precompile is running; returns the seconds waited."""
    t0 = time.perf_counter()
    while True:
        with _PENDING_LOCK:
            pending = list(_PENDING)
        if not pending:
            return time.perf_counter() - t0
        for future in pending:
            try:
                future.result()
            except Exception:  # noqa: BLE001 - each launch compiles again and reports
                pass
            _done(future)


def _compile_and_load(jobs, on_device, threads, stats, processes: int = 0) -> float:
    from triton import AsyncCompileMode
    t0 = time.perf_counter()
    stats = stats if stats is not None else {}
    per_job: list = []   # (compile s, load s, kernel, config): list.append is atomic
    with count_compiles(stats, POOL_THREAD_PREFIX):
        if processes > 0:
            try:
                _compile_in_workers(jobs, on_device, processes, stats, per_job)
            except Exception as e:  # noqa: BLE001 - the thread pool below compiles them all
                stats["precompile_workers_failed"] = f"{type(e).__name__}: {e}"
        t_pool = time.perf_counter()
        with ThreadPoolExecutor(min(threads, len(jobs)),
                                thread_name_prefix=POOL_THREAD_PREFIX) as pool:
            # A kernel's first launch would load its binary and build its launcher (a small C
            # module per argument signature, compiled with the system C compiler where Triton's
            # cache has none), one kernel after another: "first launches" in the compile
            # report, 1.6 s of a LLaMA training step's cold compile on an H200. Each pool job
            # does it right after its own compile instead, overlapping the compiles still
            # running. Jobs the workers compiled are loaded already (``_compile_in_workers``).
            executor = _CompileThenLoad(pool, on_device, per_job)
            with on_device(), AsyncCompileMode(executor, ignore_errors=True):
                results = []
                for job in jobs:
                    executor.job = job   # warmup submits its compile, if any, right now
                    results.append(_warmup(job))
            # what Triton already held in memory came back at once, not through the pool
            ready = {id(k): k for k in results if k is not None and not hasattr(k, "future")}
            list(pool.map(lambda k: _load(k, on_device), ready.values()))
    # the pool's wall time (after the workers: reading their binaries back), then its
    # thread-seconds: which half of the work the wall time went to
    stats["precompile_pool_s"] = time.perf_counter() - t_pool
    stats["precompile_compile_thread_s"] = sum(r[0] for r in per_job)
    stats["precompile_load_thread_s"] = sum(r[1] for r in per_job)
    slowest = sorted(per_job, key=lambda r: -r[0])[:5]
    stats["precompile_slowest"] = "; ".join(f"{name} {cfg} {sec:.2f}+{load:.2f} s"
                                            for sec, load, name, cfg in slowest)
    return time.perf_counter() - t0


def _compile_in_workers(jobs, on_device, processes: int, stats: dict, per_job: list) -> None:
    """Compile the jobs into Triton's disk cache in worker processes first
    (runtime/compile_workers.py), each read back and loaded as soon as its worker answers."""
    from triton.runtime import driver

    from . import compile_workers
    t0 = time.perf_counter()
    with on_device():
        target = driver.active.get_current_target()
        records = compile_workers.record([lambda job=job: _warmup(job) for job in jobs])
    stats["precompile_record_s"] = time.perf_counter() - t0

    def load_now(record):
        job = jobs[record["warmup"]]

        def cache_hit():   # the binary the worker just wrote
            with on_device():
                return _warmup(job)
        _timed_compile_and_load(job, cache_hit, on_device, per_job)
    stats["precompile_in_workers"] = compile_workers.compile_ahead(
        records, target, processes, stats, on_compiled=load_now,
        thread_prefix=POOL_THREAD_PREFIX + "-worker")
    stats["precompile_workers_s"] = time.perf_counter() - t0


class _CompileThenLoad:
    """The executor Triton's ``AsyncCompileMode`` submits compiles to: each compile, once done,
    loads its binary and builds its launcher in the same pool thread."""

    def __init__(self, pool, on_device, per_job: list):
        self.pool, self.on_device = pool, on_device
        self.job: Job | None = None   # the job whose warmup is submitting now
        self.per_job = per_job        # (compile s, load s, kernel, config)

    def submit(self, compile_fn):
        job = self.job

        return self.pool.submit(_timed_compile_and_load, job, compile_fn, self.on_device,
                                self.per_job)


def _timed_compile_and_load(job: Job, compile_fn, on_device, per_job: list):
    """``compile_fn()``, then load its kernel; (compile s, load s, kernel, config) to ``per_job``
    (list.append is atomic)."""
    t0 = time.perf_counter()
    kernel = compile_fn()
    t1 = time.perf_counter()
    if kernel is not None:
        _load(kernel, on_device)
    per_job.append((t1 - t0, time.perf_counter() - t1, job.kernel, job.cfg))
    return kernel


def _warmup(job: Job):
    try:
        return job.fn.warmup(*job.args, grid=(1,), **job.cfg, **COMPILE_OPTIONS)
    except Exception:  # noqa: BLE001 - the launch compiles it again and reports
        return None


def _load(kernel, on_device) -> None:
    try:
        with on_device():
            kernel.run  # noqa: B018 - the property loads the binary and builds the launcher
            launcher_check.check_and_repair(kernel)
    except Exception:  # noqa: BLE001 - the launch loads it again and reports
        pass


def default_threads() -> int:
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # not on Linux
        return max(1, os.cpu_count() or 1)
