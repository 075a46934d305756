"""Clocks for the benchmark: cold first calls, steady-state medians, the copy ceiling, launches.

On a GPU steady-state time is ``triton.testing.do_bench`` (median, L2 flushed between calls);
without one it is the median of ``time.perf_counter`` around single calls, which is only good
for a smoke test (kernels run in Triton's interpreter there).
"""
from __future__ import annotations

import statistics
import time
from typing import Any, Callable, Optional

import torch


def synchronize(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def cold_call(thunk: Callable[[], Any], device: torch.device) -> tuple[Any, float]:
    """Runs ``thunk`` once (the first call of a freshly compiled function, so compile included);
    returns its result and the wall seconds up to the device being idle again."""
    synchronize(device)
    start = time.perf_counter()
    out = thunk()
    synchronize(device)
    return out, time.perf_counter() - start


def median_ms(thunk: Callable[[], Any], device: torch.device, warmup_ms: float,
              rep_ms: float) -> float:
    """Median milliseconds of one call of ``thunk`` in steady state."""
    if device.type == "cuda":
        from triton.testing import do_bench

        # Long calls (a model's training step) still get at least ~10 timed repetitions.
        _, one_s = cold_call(thunk, device)
        _, one_s = cold_call(thunk, device)
        rep_ms = max(rep_ms, 10 * one_s * 1e3)
        warmup_ms = max(warmup_ms, 2 * one_s * 1e3)
        return float(do_bench(thunk, warmup=warmup_ms, rep=rep_ms, return_mode="median"))
    return _cpu_median_ms(thunk, warmup_ms, rep_ms)


def _cpu_median_ms(thunk: Callable[[], Any], warmup_ms: float, rep_ms: float,
                   min_calls: int = 3, max_calls: int = 100) -> float:
    # Warm up for warmup_ms (at least one call), then time single calls until rep_ms has passed
    # (at least min_calls of them).
    deadline = time.perf_counter() + warmup_ms / 1e3
    thunk()
    while time.perf_counter() < deadline:
        thunk()
    samples: list[float] = []
    deadline = time.perf_counter() + rep_ms / 1e3
    while len(samples) < min_calls or (time.perf_counter() < deadline and
                                       len(samples) < max_calls):
        start = time.perf_counter()
        thunk()
        samples.append((time.perf_counter() - start) * 1e3)
    return statistics.median(samples)


def host_issue_ms(thunk: Callable[[], Any], device: torch.device, budget_ms: float = 50.0,
                  max_calls: int = 50) -> float:
    """Milliseconds the host takes to issue one call (no synchronization between calls): a
    call whose host time reaches its median time is host-bound, and its GPU waits on Python
    and ATen. Without a GPU it is the wall time of a call."""
    synchronize(device)
    start = time.perf_counter()
    thunk()
    one = time.perf_counter() - start
    calls = max(3, min(max_calls, int(budget_ms / 1e3 / max(one, 1e-6))))
    synchronize(device)
    start = time.perf_counter()
    for _ in range(calls):
        thunk()
    issued = time.perf_counter() - start
    synchronize(device)
    return issued / calls * 1e3


def copy_ceiling(device: torch.device, nbytes: int, warmup_ms: float,
                 rep_ms: float) -> dict:
    """Achievable bandwidth on this device: one large device-to-device copy of ``nbytes``
    (random data), counted as nbytes read plus nbytes written over its median time."""
    src = torch.empty(nbytes // 4, dtype=torch.float32, device=device).normal_()
    dst = torch.empty_like(src)
    ms = median_ms(lambda: dst.copy_(src), device, warmup_ms, rep_ms)
    moved = 2 * src.numel() * src.element_size()
    del src, dst
    return {"bytes": moved, "ms": ms, "gbs": gb_per_s(moved, ms)}


def gb_per_s(nbytes: Optional[int], ms: Optional[float]) -> Optional[float]:
    if not nbytes or not ms or ms <= 0:
        return None
    return nbytes / (ms * 1e-3) / 1e9


def kernel_launches(thunk: Callable[[], Any], device: torch.device) -> Optional[dict]:
    """GPU kernels launched by one call of ``thunk`` (after a warm call), seen by the profiler:
    ``launches`` counts every kernel launch (memcpy/memset excluded), ``triton_kernels`` the
    distinct kernels whose name starts with "triton" (what Inductor generates). None without a
    GPU or when the profiler is unavailable."""
    if device.type != "cuda":
        return None
    try:
        from torch.autograd import DeviceType
        from torch.profiler import ProfilerActivity, profile

        thunk()
        synchronize(device)
        with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
            thunk()
            synchronize(device)
        names = [e.name for e in prof.events()
                 if getattr(e, "device_type", None) == DeviceType.CUDA
                 and not e.name.startswith(("Memcpy", "Memset"))]
    except Exception:  # the profiler is a nicety; timing does not depend on it
        return None
    return {"launches": len(names),
            "triton_kernels": len({n for n in names if n.startswith("triton")})}
