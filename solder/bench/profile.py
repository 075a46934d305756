"""``python -m solder bench --profile CASE``-style helper: where one backend's time goes.

Prints the wall time of one call against the GPU time of its kernels (the difference is Python
and launch overhead) and the kernels that take the most GPU time."""
from __future__ import annotations

import sys
import time

import torch

from ..cli_help import Parser


def main(argv=None) -> int:
    p = Parser(prog="python -m solder.bench.profile")
    p.add_argument("case")
    p.add_argument("--backend", default="solder")
    p.add_argument("--top", type=int, default=15)
    p.add_argument("--cprofile", action="store_true",
                   help="also profile the host side of steady-state calls (Python functions)")
    p.add_argument("--host-ops", action="store_true",
                   help="also list the host time by ATen op and CUDA runtime call")
    p.add_argument("--compile", action="store_true",
                   help="where the cold compile's time goes: Solder's stages, and for either "
                        "backend Dynamo's own timings (after the bench's warm-up compile)")
    p.add_argument("--compile-profile", metavar="FILE",
                   help="with --compile: cProfile the compile and write its stats to FILE")
    args = p.parse_args(argv)
    import solder  # noqa: F401  (registers the backend)
    from solder.bench.cases import all_cases
    case = next(c for c in all_cases() if c.name == args.case)
    dev = torch.device("cuda")
    work = case.build(dev, False)
    if args.compile:
        return _compile_breakdown(args.case, work, args.backend, args.compile_profile)
    fn = work.fn if args.backend == "eager" else torch.compile(work.fn, backend=args.backend)
    n = 20
    prof = breakdown(f"{args.case} / {args.backend}", lambda: work.step(fn), args.top, n,
                     count_slow_launches=args.backend == "solder")
    if args.host_ops:   # where the host's time goes, by ATen op and CUDA runtime call
        cpu = [e for e in prof.key_averages() if e.device_type == torch.autograd.DeviceType.CPU]
        cpu.sort(key=lambda e: -e.self_cpu_time_total)
        print("host time by op (self, per call of the compiled function):")
        for e in cpu[:args.top]:
            print(f"  {e.self_cpu_time_total / 5 / 1e3:8.3f} ms  x{e.count // 5:<5} {e.key[:100]}")
    if args.cprofile:
        import cProfile
        import io
        import pstats
        prof_host = cProfile.Profile()
        prof_host.enable()
        for _ in range(n):
            work.step(fn)
        prof_host.disable()
        torch.cuda.synchronize()
        text = io.StringIO()
        pstats.Stats(prof_host, stream=text).sort_stats("tottime").print_stats(args.top)
        print(f"host profile of {n} calls (tottime = own time):")
        print("\n".join(text.getvalue().splitlines()[4:]))
    return 0


def breakdown(label: str, call, top: int = 15, n: int = 20, count_slow_launches: bool = True):
    """Print one call's wall time against its host issue time and its GPU kernels' time, with
    the kernels taking the most GPU time; returns the profiler (5 calls) for more tables."""
    for _ in range(3):
        call()
    torch.cuda.synchronize()
    from solder.runtime import launch
    slow_before = launch.SLOW_LAUNCHES
    import gc
    collections = [0, 0, 0]

    def count_gc(phase, info):
        if phase == "start":
            collections[info["generation"]] += 1
    gc.callbacks.append(count_gc)
    t0 = time.perf_counter()
    for _ in range(n):
        call()
    host = (time.perf_counter() - t0) / n  # host time to issue one call (no sync inside)
    gc.callbacks.remove(count_gc)
    torch.cuda.synchronize()
    wall = (time.perf_counter() - t0) / n
    slow = (launch.SLOW_LAUNCHES - slow_before) / n
    from torch.profiler import ProfilerActivity, profile
    with profile(activities=[ProfilerActivity.CUDA, ProfilerActivity.CPU]) as prof:
        for _ in range(5):
            call()
        torch.cuda.synchronize()
    events = [e for e in prof.key_averages() if e.device_type == torch.autograd.DeviceType.CUDA]
    gpu = sum(e.self_device_time_total for e in events) / 5 / 1e3
    launches = sum(e.count for e in events) / 5
    print(f"{label}: wall {wall * 1e3:.3f} ms per call, host issue {host * 1e3:.3f} ms, GPU "
          f"kernels {gpu:.3f} ms in {launches:.0f} launches"
          + (f", {slow:.1f} launches per call through Triton's Python launcher"
             if count_slow_launches else "")
          + f"; garbage collections per generation in {n} calls: {collections}")
    events.sort(key=lambda e: -e.self_device_time_total)
    for e in events[:top]:
        print(f"  {e.self_device_time_total / 5 / 1e3:8.3f} ms  x{e.count // 5:<4} {e.key[:110]}")
    return prof


def _compile_breakdown(name, work, backend: str = "solder", stats_file: str | None = None) -> int:
    """Compile once (after the bench's warm-up compile, so one-time process costs are not
    counted) and print Dynamo's timings; for Solder, each stage's seconds summed over graphs."""
    from solder.bench.runner import warm_up_process
    t0 = time.perf_counter()
    warm_up_process([backend], torch.device("cuda"), print)
    print(f"{name} / {backend}: warm-up compile {time.perf_counter() - t0:.2f} s")
    torch._dynamo.utils.compilation_time_metrics.clear()
    ctx = None
    if backend == "solder":
        from solder.backend import backend_for
        from solder.config import from_env
        from solder.pipeline import CompileContext
        ctx = CompileContext(from_env())
        fn = torch.compile(work.fn, backend=backend_for(None, ctx))
    else:
        fn = torch.compile(work.fn, backend=backend)
    prof = None
    if stats_file:
        import cProfile
        prof = cProfile.Profile()
        prof.enable()
    t0 = time.perf_counter()
    work.step(fn)
    torch.cuda.synchronize()
    total = time.perf_counter() - t0
    if prof is not None:
        prof.disable()
        prof.dump_stats(stats_file)
    print(f"{name} / {backend} compile: {total:.2f} s for the first call")
    print("  dynamo's timings (s): " + ", ".join(
        f"{k} {sum(v):.2f}" for k, v in sorted(torch._dynamo.utils.compilation_time_metrics.items(),
                                               key=lambda kv: -sum(kv[1]))[:12]))
    if ctx is not None:
        _solder_stages(ctx, total)
    return 0


def _solder_stages(ctx, total: float) -> None:
    stages: dict = {}
    counts: dict = {}
    for g in ctx.graphs:
        for k, v in g.timings.items():
            if k == "precompile_slowest":
                print(f"  {g.name} slowest precompile jobs (compile+load): {v}")
            elif k == "precompile_worker_slowest":
                print(f"  {g.name} slowest worker job: {v}")
            elif isinstance(v, float) and k.startswith(("precompile_", "in_child_", "cpu_",
                                                        "first_call_")):
                # inside the wait, summed over a pool's threads, in a forked child (its share
                # of the critical path is child_wait), a stage's CPU seconds beside its wall
                # seconds, or the first call's, which holds the waits, launches and tuning:
                # not a stage of its own
                counts[k] = round(counts.get(k, 0.0) + v, 2)
            elif isinstance(v, float):   # seconds
                stages[k] = stages.get(k, 0.0) + v
            elif isinstance(v, int):   # kernel counts
                counts[k] = counts.get(k, 0) + v
            elif k == "cache":         # the cache state
                counts[f"cache {v}"] = counts.get(f"cache {v}", 0) + 1
            else:                      # a note (why a forked child's code was not used)
                print(f"  {g.name} {k}: {v}")
    kernels = sum(len(g.kernels) for g in ctx.graphs)
    print(f"  {len(ctx.graphs)} graphs, {kernels} kernels")
    print("  " + ", ".join(f"{k}: {v}" for k, v in sorted(counts.items())))
    for k, v in sorted(stages.items(), key=lambda kv: -kv[1]):
        print(f"  {k:<16} {v:8.2f} s")
    print(f"  {'(rest: dynamo, autograd, python)':<16} {total - sum(stages.values()):8.2f} s")


if __name__ == "__main__":
    sys.exit(main())
