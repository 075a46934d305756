"""Runs one case on every backend: eager first (the reference), then each compiler from a clean
Dynamo state: cold first call (compile included), check against eager, kernel counts; then
steady-state timing in rounds that take every backend in turn, each with the host's time to
issue a call (a case whose host time reaches its median is host-bound). A backend whose output
is wrong is marked FAILED and not timed.

Why rounds: on the H200 machine the host's speed drifted by up to ~1.8x within seconds
(2026-12-04: ResNet-50's host issue time under one compiled function went 1.8 -> 3.8 -> 2.3 ms in one
process, every Python and ATen call slower alike; docs/perf-notes.md). Timing each backend
once, one after another, let that drift decide which backend "won" a host-bound case. Timing
them interleaved, several times, exposes every backend to the same drift, and the spread
between rounds says how far to trust a difference."""
from __future__ import annotations

import functools
import gc
import statistics
from dataclasses import dataclass
from typing import Callable

import torch

from solder.bench import timing
from solder.bench.cases import Case, Workload, check_close
from solder.bench.reference import float64_step, no_less_accurate
from solder.bench.report import ERROR, FAILED, OK, SKIPPED, BackendResult, CaseResult

# torch.compile options per backend that turn its on-disk caches off, so that the first call
# measures a cold compile. Inductor's caches are turned off for the whole run instead, through
# torch.compiler.config (see cli.cold_cache_environment).
COLD_OPTIONS = {"solder": {"cache": False}}
# Solder's backends by their CPU path: the configured one (as captured by default), the
# native target asked for by name, and the graphs as Dynamo captured them, in ATen
SOLDER_CPU_PATHS = {"solder": {}, "solder-native": {"cpu_codegen": True},
                    "solder-aten": {"cpu_codegen": False}}


@dataclass(frozen=True)
class Settings:
    device: torch.device
    quick: bool
    warmup_ms: float
    rep_ms: float
    rounds: int = 1   # steady-state timings per backend, interleaved across backends


def compile_for(fn: Callable, backend: str, reports: list | None = None) -> Callable:
    """``torch.compile(fn, backend=backend)`` with the backend's cold-cache options. ``fn`` is
    called through an entry function of its own code object per call of this: Dynamo keeps its
    compiled code on the code object it starts from, so several backends' compiled versions of
    one ``fn`` stay alive side by side (the timing rounds alternate between them) without one
    compile finding or evicting another's. For Solder, ``reports`` (a list) receives the
    compile's context, whose graph reports count the kernels it generated."""
    entry = _entry_of_its_own(fn, backend)
    base, ro, dynamic = split_backend(backend)
    if dynamic:   # (Dynamo's automatic dynamic sizes off: every size symbolic from the start)
        compile_ = functools.partial(torch.compile, dynamic=True)
    else:
        compile_ = torch.compile
    if base in SOLDER_CPU_PATHS:
        from solder import config
        from solder.backend import backend_for
        from solder.pipeline import CompileContext
        options = dict(COLD_OPTIONS["solder"], cuda_graphs=ro, **SOLDER_CPU_PATHS[base])
        ctx = CompileContext(config.resolve(options))
        if reports is not None:
            reports.append(ctx)
        return compile_(entry, backend=backend_for(options, ctx))
    if ro:   # torch.compile takes a mode or options, not both
        return compile_(entry, backend=base, mode="reduce-overhead")
    return compile_(entry, backend=base, options=COLD_OPTIONS.get(base))


def split_backend(backend: str) -> tuple[str, bool, bool]:
    """(Dynamo backend, reduce-overhead, dynamic sizes) of a bench backend name: a suffix
    ``-ro`` asks for mode="reduce-overhead" (CUDA graphs), ``-dyn`` for dynamic=True, in either
    order (``solder-dyn-ro``)."""
    ro = dynamic = False
    while True:
        if backend.endswith("-ro"):
            backend, ro = backend[:-3], True
        elif backend.endswith("-dyn"):
            backend, dynamic = backend[:-4], True
        else:
            return backend, ro, dynamic


def distinct_kernels(reports: list) -> int:
    """Solder's kernel count: the distinct kernels its graphs generated (forward and backward;
    twelve identical layers' kernels count once), as inductor's column counts the distinct
    Triton kernels it launched."""
    return sum(g.timings.get("distinct_kernels", len(g.kernels))
               for ctx in reports for g in ctx.graphs)


def _entry_of_its_own(fn: Callable, backend: str) -> Callable:
    def entry(*args, **kwargs):
        return fn(*args, **kwargs)
    name = "bench_entry_" + "".join(ch if ch.isalnum() else "_" for ch in backend)
    entry.__code__ = entry.__code__.replace(co_name=name)   # a new code object each time
    entry.__name__ = entry.__qualname__ = name
    return entry


def run_case(case: Case, backends: list[str], settings: Settings,
             log: Callable[[str], None]) -> CaseResult:
    result = CaseResult(case.name, bytes_formula=case.bytes_formula)
    missing = case.missing()
    if missing:
        result.status, result.detail = SKIPPED, f"needs {', '.join(missing)}"
        log(f"{case.name}: skipped: {result.detail}")
        return result
    try:
        work = case.build(settings.device, settings.quick)
        result.min_bytes = work.min_bytes
        expected = work.step(work.fn)
        timing.synchronize(settings.device)
        _check_finite(expected)
    except Exception as err:
        result.status, result.detail = ERROR, f"eager reference: {_brief(err)}"
        log(f"{case.name}: {result.detail}")
        _release(settings.device)
        return result
    torch._dynamo.reset()
    compiled: dict[str, Callable] = {}
    try:
        for name in backends:
            log(f"{case.name} / {name}: ...")
            result.backends[name], f = _first_call(name, work, expected, settings, log)
            if f is not None:
                compiled[name] = f
        _time_in_rounds(compiled, result, work, settings, log)
    finally:
        compiled.clear()
        torch._dynamo.reset()
    for name, r in result.backends.items():
        if r.status != OK:
            log(f"  {name}: {r.status}: {r.detail}")
    del work, expected
    _release(settings.device)
    return result


def _first_call(name: str, work: Workload, expected, settings: Settings,
                log: Callable[[str], None]) -> tuple[BackendResult, Callable | None]:
    """Compile (cold), check against eager and count launches; returns the result so far and
    the function to time (None when the backend failed)."""
    r = BackendResult(name)
    device = settings.device
    try:
        if name == "eager":
            f = work.fn
        else:
            reports: list = []
            f = compile_for(work.fn, name, reports)
            out, r.compile_s = timing.cold_call(lambda: work.step(f), device)
            if reports:
                r.kernels = distinct_kernels(reports)
            log(f"  cold first call {r.compile_s:.2f} s")
            try:
                check_close(out, expected, work.tolerance)
            except AssertionError as err:
                # a training step's gradients in bf16: judged against the step in float64
                # (eager's own error the measure), where the case has a model to convert
                ref = float64_step(work) if work.grad_leaves else None
                worse = "no float64 reference" if ref is None else \
                    no_less_accurate(out, expected, ref)
                if worse is not None:
                    r.status, r.detail = FAILED, f"wrong output: {_brief(err)} ({worse})"
                    return r, None
                log("  off eager's values by more than the tolerance, but no less accurate "
                    "than eager against the step in float64")
            del out
        if name.startswith("solder"):
            r.slow_launches = _slow_launches(lambda: work.step(f), device)
            if r.slow_launches:
                log(f"  {r.slow_launches} launches per call through Triton's Python launcher")
        r.call_mib, r.peak_mib = _call_memory(lambda: work.step(f), device)
        seen = timing.kernel_launches(lambda: work.step(f), device)
        if seen:
            r.launches = seen["launches"]
            if name.startswith("inductor"):   # Solder's came from its compile context above
                r.kernels = seen["triton_kernels"]
        return r, f
    except Exception as err:
        r.status, r.detail = ERROR, _brief(err)
        return r, None


def _time_in_rounds(compiled: dict[str, Callable], result: CaseResult, work: Workload,
                    settings: Settings, log: Callable[[str], None]) -> None:
    """Each round times every backend once, starting one backend later than the round before
    (so no backend always runs first); a backend's time is the median over the rounds."""
    names = list(compiled)
    if not names:
        return
    host: dict[str, list[float]] = {n: [] for n in names}
    for k in range(max(1, settings.rounds)):
        shift = k % len(names)
        for name in names[shift:] + names[:shift]:
            r = result.backends[name]
            if r.status != OK:
                continue
            try:
                ms = timing.median_ms(lambda: work.step(compiled[name]), settings.device,
                                      settings.warmup_ms, settings.rep_ms)
                host[name].append(timing.host_issue_ms(lambda: work.step(compiled[name]),
                                                       settings.device))
            except Exception as err:
                r.status, r.detail = ERROR, _brief(err)
                continue
            r.round_ms.append(ms)
        log(f"  round {k + 1}: " + ", ".join(
            f"{n} {result.backends[n].round_ms[-1]:.3f} ms" for n in names
            if len(result.backends[n].round_ms) == k + 1))
    for name in names:
        r = result.backends[name]
        if r.status == OK and r.round_ms:
            r.median_ms = statistics.median(r.round_ms)
            r.host_ms = statistics.median(host[name])
            log(f"  {name}: median {r.median_ms:.3f} ms over {len(r.round_ms)} round(s), "
                f"host {r.host_ms:.3f} ms per call")


def _slow_launches(thunk, device) -> int:
    from solder.runtime import launch
    before = launch.SLOW_LAUNCHES
    thunk()
    timing.synchronize(device)
    return launch.SLOW_LAUNCHES - before


def _call_memory(thunk, device) -> tuple:
    """(the peak memory one call allocates above what is allocated before it, the peak with
    it), in MiB (CUDA; (None, None) elsewhere)."""
    if device.type != "cuda":
        return None, None
    timing.synchronize(device)
    before = torch.cuda.memory_allocated(device)
    torch.cuda.reset_peak_memory_stats(device)
    out = thunk()
    timing.synchronize(device)
    del out
    peak = torch.cuda.max_memory_allocated(device)
    return (peak - before) / 2**20, peak / 2**20


def _check_finite(outputs) -> None:
    items = outputs if isinstance(outputs, (tuple, list)) else (outputs,)
    for t in items:
        if isinstance(t, torch.Tensor) and t.is_floating_point() and not torch.isfinite(t).all():
            raise ValueError("eager output is not finite; the case's inputs need rescaling")


def _brief(err: BaseException, limit: int = 400) -> str:
    text = " ".join(f"{type(err).__name__}: {err}".split())
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _release(device: torch.device) -> None:
    gc.collect()
    if device.type == "cuda":
        torch.cuda.empty_cache()


def warm_up_process(backends: list[str], device: torch.device,
                    log: Callable[[str], None]) -> None:
    """Compiles a trivial function once per compiler, so that one-time process costs (imports,
    compile worker pools, the device context) do not land in the first case's compile time.
    Failures are ignored here; the cases report them."""
    x = torch.randn(64, device=device)
    for name in backends:
        if name == "eager":
            continue
        try:
            torch._dynamo.reset()
            compile_for(lambda t: t * 2 + 1, name)(x)
            timing.synchronize(device)
        except Exception as err:
            log(f"warm-up of {name} failed: {_brief(err, 200)}")
        finally:
            torch._dynamo.reset()
