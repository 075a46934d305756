"""Load generated kernel modules and launch their kernels with a chosen block configuration."""
from __future__ import annotations

import copy
import hashlib
import importlib.util
import os
import statistics
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

import torch

from ..codegen import launch_configs
from ..codegen.scalar_ops import interpreting
from ..codegen.generated import KernelSource
from . import launcher_check


class KernelCompileError(RuntimeError):
    pass


_module_lock = threading.Lock()


def module_dir(cache_dir: str | None) -> Path:
    from .cache import default_cache_dir
    root = Path(cache_dir) if cache_dir else default_cache_dir()
    d = root / "modules"
    d.mkdir(parents=True, exist_ok=True, mode=0o700)
    return d


def load_module(source: str, cache_dir: str | None, stem: str = "kernels"):
    """Import generated source as a module (Triton's JIT reads its functions' source files)."""
    digest = hashlib.sha256(source.encode()).hexdigest()[:20]
    path = module_dir(cache_dir) / f"{stem}_{digest}.py"
    with _module_lock:
        if not path.exists() or path.read_text() != source:
            tmp = path.with_suffix(f".{os.getpid()}.{threading.get_ident()}.tmp")
            tmp.write_text(source)
            os.replace(tmp, path)
        name = f"solder_generated.{stem}_{digest}"
        if name in sys.modules:
            return sys.modules[name]
        spec = importlib.util.spec_from_file_location(name, path)
        mod = importlib.util.module_from_spec(spec)
        sys.modules[name] = mod
        spec.loader.exec_module(mod)
        return mod


class count_compiles:
    """Counts Triton compiles inside the block into ``stats``: ``triton_built`` (compiled now)
    and ``triton_cached`` (found in Triton's cache). Counted are the compiles of the thread that
    entered the block or, given ``pool_prefix``, of threads whose name starts with it (Triton
    reports a compile on the thread that ran it). Blocks may overlap across threads (a graph's
    kernels compile in the background while another graph launches): one process-wide listener
    hands each compile to the blocks it belongs to, and chains to a listener the user set."""

    def __init__(self, stats: dict, pool_prefix: str | None = None):
        self.stats = stats
        self.pool_prefix = pool_prefix
        self.hits: list[bool] = []   # appended from compile threads: list.append is atomic

    def owns(self, thread) -> bool:
        if self.pool_prefix is not None:
            return thread.name.startswith(self.pool_prefix)
        return thread.ident == self.ident

    def __enter__(self):
        self.ident = threading.get_ident()
        _Listener.add(self)
        return self

    def __exit__(self, *exc):
        _Listener.remove(self)
        cached = sum(self.hits)
        self.stats["triton_cached"] = self.stats.get("triton_cached", 0) + cached
        self.stats["triton_built"] = self.stats.get("triton_built", 0) + len(self.hits) - cached
        return False


class _Listener:
    """Triton's compilation listener while any ``count_compiles`` block is open."""
    lock = threading.Lock()
    counters: list = []
    previous = None   # the listener in place before the first block opened

    @classmethod
    def add(cls, counter) -> None:
        from triton import knobs
        with cls.lock:
            if not cls.counters:
                cls.previous = knobs.compilation.listener
                knobs.compilation.listener = cls.hear
            cls.counters.append(counter)

    @classmethod
    def remove(cls, counter) -> None:
        from triton import knobs
        with cls.lock:
            cls.counters.remove(counter)
            if not cls.counters:
                if knobs.compilation.listener == cls.hear:   # a fresh bound method each time
                    knobs.compilation.listener = cls.previous
                cls.previous = None

    @classmethod
    def hear(cls, *, cache_hit=False, **kw):
        thread = threading.current_thread()
        with cls.lock:
            counters, previous = list(cls.counters), cls.previous
        for c in counters:
            if c.owns(thread):
                c.hits.append(bool(cache_hit))
        if previous is not None:
            previous(cache_hit=cache_hit, **kw)


_next_pow2 = launch_configs.next_pow2


# Launches that went through Triton's Python launcher (first launches, new specializations)
# rather than the compiled kernel directly: a steady state should add none (bench.profile).
SLOW_LAUNCHES = 0

# Kernels smaller than TUNE_MIN_ELEMENTS run on a heuristic config: timing candidates costs a
# Triton compile each, far more than the best config could save.
TUNE_MIN_ELEMENTS = launch_configs.TUNE_MIN_ELEMENTS
TUNE_MAX_CANDIDATES = launch_configs.TUNE_MAX_CANDIDATES


class KernelRunner:
    """Calls one generated kernel: picks XBLOCK/RBLOCK/num_warps for the sizes it is called
    with (timing a few candidates on a GPU for large kernels, once per size bucket), then
    launches through Triton's compiled launcher directly once a kernel is compiled."""

    def __init__(self, fn, src: KernelSource, graph_name: str, dump_path: str | None,
                 autotune: bool, stats: dict | None = None):
        self.fn = fn
        # compile-time accounting shared with the graph's report: seconds in Triton's compiler
        # (first launches) and in tuning, and how many kernels were compiled
        self.stats = stats if stats is not None else {}
        self.src = src
        self.graph_name = graph_name
        self.dump_path = dump_path
        self.autotune = autotune
        self.configs: dict[Any, dict] = {}
        self.fast: dict[Any, Any] = {}   # (config key, specialization) -> compiled kernel
        # (size arguments, seed specialization, all pointers 16-byte aligned) -> LaunchPlan: the
        # steady state of a graph is one dict lookup and one call into Triton's C launcher
        self.plans: dict[Any, LaunchPlan] = {}
        # (config, specialization) whose launcher runtime/launcher_check.py has checked
        self.launchers_checked: set = set()
        self.ptr_idx = tuple(i for i, (kind, _) in enumerate(src.args) if kind == "ptr")
        self.seed_idx = tuple(i for i, (kind, _) in enumerate(src.args) if kind == "seed")
        self.tail_start = min((i for i, (kind, _) in enumerate(src.args)
                               if kind in ("size", "numel")), default=len(src.args))
        self.interp = interpreting()

    def for_call_site(self) -> "KernelRunner":
        """The runner for another call site of the same kernel code: it shares launch configs,
        compiled kernels and statistics, and keeps its own launch plans (two call sites may pass
        pointers of different dtypes, which a plan's key leaves out)."""
        site = copy.copy(self)
        site.plans = {}
        return site

    def candidates(self, xnumel: int, rnumel: int) -> list[dict]:
        """Launch configs to try; the first is the heuristic choice."""
        return launch_configs.candidates(self.src.is_reduction, self.src.persistent,
                                         self.src.reduction_hint == "outer", xnumel, rnumel,
                                         self.interp, self.src.reload)

    def __call__(self, *args):
        key = self._plan_key(args)
        plan = self.plans.get(key)
        if plan is not None and _launch_hooks_idle():
            if plan.grid0:
                plan.launch(plan.grid0, 1, 1, _raw_stream(_current_device()), plan.function,
                            plan.cooperative, plan.pdl, None, None, plan.metadata, None, None,
                            None, *args, *plan.constexprs)
            return
        self._call_and_plan(args, key)

    def _plan_key(self, args):
        acc = 0
        for i in self.ptr_idx:
            acc |= args[i].data_ptr()
        seeds = tuple((args[i] == 1, args[i] % 16 == 0) for i in self.seed_idx)
        return args[self.tail_start:], seeds, not acc & 15

    def _call_and_plan(self, args, key):
        if self.src.is_reduction:
            xnumel, rnumel = int(args[-2]), int(args[-1])
        else:
            xnumel, rnumel = int(args[-1]), 1
        if xnumel == 0:
            if not self.interp:
                self.plans[key] = LaunchPlan(None, 0, None, False, False, None, ())
            return
        size_key = (_next_pow2(xnumel), _next_pow2(rnumel))
        cfg = self.configs.get(size_key)
        if cfg is None:
            cfg = self._choose(args, xnumel, rnumel)
            self.configs[size_key] = cfg
        if self.src.even and not launch_configs.covers(
                cfg, self.src.persistent, xnumel, rnumel if self.src.is_reduction else None):
            # a kernel without bounds masks must never run a partial block
            raise KernelCompileError(
                f"Solder kernel {self.src.name} of graph {self.graph_name} has no bounds masks "
                f"but launch config {cfg} does not tile its sizes ({xnumel}, {rnumel})")
        kernel = self._launch(cfg, args, xnumel, size_key)
        if self.interp or not key[2]:
            return  # a misaligned pointer: _launch's specialization lookup decides each time
        kernel = kernel or self.fast.get((size_key, _specialization(args)))
        run = getattr(kernel, "run", None)
        if (run is not None and getattr(run, "launch", None) is not None
                and not getattr(run, "global_scratch_size", 1)
                and not getattr(run, "profile_scratch_size", 1)):
            grid0 = (xnumel + cfg["XBLOCK"] - 1) // cfg["XBLOCK"]
            self.plans[key] = LaunchPlan(run.launch, grid0, kernel.function,
                                         run.launch_cooperative_grid, run.launch_pdl,
                                         kernel.packed_metadata, tuple(self._constexprs(cfg)))

    def _launch(self, cfg, args, xnumel, key=None):
        grid0 = (xnumel + cfg["XBLOCK"] - 1) // cfg["XBLOCK"]
        if key is not None and not self.interp:
            spec = (key, _specialization(args))
            kernel = self.fast.get(spec)
            if kernel is not None and _launch_hooks_idle():
                kernel.run(grid0, 1, 1, _stream(), kernel.function, kernel.packed_metadata, None,
                           None, None, *args, *self._constexprs(cfg))
                return kernel
        global SLOW_LAUNCHES
        SLOW_LAUNCHES += 1
        t0 = time.perf_counter()
        try:
            if self.interp:
                kernel = self.fn[(grid0,)](*args, **cfg, **launch_configs.COMPILE_OPTIONS)
            else:
                with count_compiles(self.stats):
                    # its launcher checked before its first launch (runtime/launcher_check.py);
                    # once per config and specialization: tuning's timed launches come here too
                    checked = (tuple(sorted(cfg.items())), _specialization(args))
                    if checked not in self.launchers_checked:
                        launcher_check.check_before_launch(
                            self.fn, args, {**cfg, **launch_configs.COMPILE_OPTIONS}, self.stats)
                        self.launchers_checked.add(checked)
                    kernel = self.fn[(grid0,)](*args, **cfg, **launch_configs.COMPILE_OPTIONS)
        except Exception as e:
            fewer = _fewer_warps(cfg) if _layout_passes_failed(e) else None
            if fewer is not None:
                # Triton's layout passes fail on some kernels at some warp counts (a 32-wide
                # row of an 18-element reduction with a broadcast compare of its result, 2 or
                # more warps: TritonGPURemoveLayoutConversions); with fewer warps the same
                # kernel compiles, and the sizes keep the config that did
                if key is not None and self.configs.get(key) == cfg:
                    self.configs[key] = fewer
                self.stats["compile_retries"] = self.stats.get("compile_retries", 0) + 1
                return self._launch(fewer, args, xnumel, key)
            where = f" (generated source: {self.dump_path})" if self.dump_path else ""
            raise KernelCompileError(
                f"Solder kernel {self.src.name} of graph {self.graph_name} failed to compile or "
                f"launch{where}: {type(e).__name__}: {e}{_foreign_kernels(self.fn, e)}"
                f"\n--- kernel source ---\n{self.src.source}"
            ) from e
        if key is not None and not self.interp and _fast_launch_ok(kernel):
            self.fast[(key, _specialization(args))] = kernel
        if key is not None:  # a first launch of this specialization: mostly compile time
            self.stats["triton_compile"] = self.stats.get("triton_compile", 0.0) + (
                time.perf_counter() - t0)
        return kernel

    def _constexprs(self, cfg):
        out = [cfg["XBLOCK"]]
        if self.src.is_reduction:
            out.append(cfg["RBLOCK"])
        if self.src.reload:
            out.append(cfg["RELOAD"])
        return out

    def will_tune(self, xnumel: int, rnumel: int) -> bool:
        # pointwise kernels are memory-bound and near the copy ceiling on the heuristic config;
        # each candidate costs a Triton compile (most of a cold compile's time), so only
        # reductions, whose best shape depends on the row length, are timed
        return (self.autotune and self.src.is_reduction and not self.interp
                and len(self.candidates(xnumel, rnumel)[:TUNE_MAX_CANDIDATES]) > 1
                and torch.cuda.is_available() and xnumel * rnumel >= TUNE_MIN_ELEMENTS)

    def planned_configs(self, xnumel: int, rnumel: int) -> list[dict]:
        """The configs the first call with these sizes will compile: the one already chosen
        (restored from the cache), the candidates it will time, or the heuristic one."""
        chosen = self.configs.get((_next_pow2(xnumel), _next_pow2(rnumel)))
        if chosen is not None:
            return [chosen]
        cands = self.candidates(xnumel, rnumel)[:TUNE_MAX_CANDIDATES]
        return cands if self.will_tune(xnumel, rnumel) else cands[:1]

    def _choose(self, args, xnumel, rnumel):
        cands = self.candidates(xnumel, rnumel)[:TUNE_MAX_CANDIDATES]
        if not self.will_tune(xnumel, rnumel):
            return cands[0]
        t_start = time.perf_counter()
        # time on copies of the pointer arguments: the kernel may update some in place
        scratch = [a.clone() if isinstance(a, torch.Tensor) else a for a in args]
        flush = l2_flush_buffer(scratch[0].device if isinstance(scratch[0], torch.Tensor)
                                else torch.device("cuda"))
        best, best_t = cands[0], float("inf")
        for cfg in cands:
            try:
                t = median_launch_ms(lambda: self._launch(cfg, scratch, xnumel), flush)
            except KernelCompileError:
                continue
            if t < best_t:
                best, best_t = cfg, t
        self.stats["autotune"] = self.stats.get("autotune", 0.0) + time.perf_counter() - t_start
        return best


# A tuned kernel has >= 4M elements (>= ~10 us a launch): the median of 20 launches ranks its
# candidates. Triton's do_bench spent ~15 ms a candidate on fixed time budgets (0.44 s of a LLaMA
# step's cold compile on an H200); this spends about a millisecond.
TUNE_TIMED_LAUNCHES = 20


def l2_flush_buffer(device: torch.device) -> torch.Tensor:
    """Bytes to overwrite before each timed launch, twice the L2 cache: a kernel is timed
    reading its inputs from memory, as it will in the program, not from the cache."""
    try:
        l2 = torch.cuda.get_device_properties(device).L2_cache_size
    except (AttributeError, RuntimeError, AssertionError):
        l2 = 0
    return torch.empty(2 * max(l2, 8 << 20), dtype=torch.int8, device=device)


def median_launch_ms(launch: Callable[[], Any], flush: torch.Tensor,
                     timed: int = TUNE_TIMED_LAUNCHES) -> float:
    """The median milliseconds of ``timed`` launches, each timed alone with CUDA events after
    the cache is flushed; one untimed launch first (a first launch may still load the binary)."""
    launch()
    events = [(torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True))
              for _ in range(timed)]
    for start, end in events:
        flush.zero_()
        start.record()
        launch()
        end.record()
    torch.cuda.synchronize(flush.device)
    return statistics.median(start.elapsed_time(end) for start, end in events)


@dataclass(frozen=True)
class LaunchPlan:
    """Everything a launch of one compiled kernel needs besides its arguments (grid0 0: the
    kernel has no elements to cover and is skipped)."""
    launch: Any          # Triton's compiled C launcher (CudaLauncher.launch)
    grid0: int
    function: Any
    cooperative: bool
    pdl: bool
    metadata: Any
    constexprs: tuple


def _specialization(args) -> tuple:
    """What Triton specializes a compiled kernel on: pointer dtype and alignment, and for
    integers being 1, a multiple of 16, or too large for 32 bits. Equal keys can reuse the
    compiled kernel (identical kernel sources share one function: an int32 and an int64 copy
    of the same code are two binaries)."""
    out = []
    for a in args:
        if isinstance(a, torch.Tensor):
            out.append((_DTYPE_NAMES.get(a.dtype) or str(a.dtype), a.data_ptr() % 16 == 0))
        elif isinstance(a, int) and not isinstance(a, bool):
            out.append((a == 1, a % 16 == 0, -(1 << 31) <= a < (1 << 31)))
        else:
            out.append(type(a))
    return tuple(out)


_DTYPE_NAMES = {d: str(d) for d in (torch.float32, torch.float16, torch.bfloat16, torch.float64,
                                    torch.int64, torch.int32, torch.int16, torch.int8,
                                    torch.uint8, torch.bool)}


def _foreign_kernels(fn, e: Exception) -> str:
    """For a launcher that takes another number of arguments than the kernel's (seen a few
    times in long-lived processes, never reproduced alone: docs/fuzz-runs.md): which compiled
    kernels the JIT function holds, so that the report says whose binary it was."""
    if not (isinstance(e, TypeError) and "arguments" in str(e)):
        return ""
    try:
        held = []
        for device, caches in getattr(fn, "device_caches", {}).items():
            for key, kernel in caches[0].items():
                src = getattr(kernel, "src", None)
                held.append(f"{getattr(kernel, 'name', '?')} "
                            f"({len(getattr(src, 'signature', {}))} parameters, from "
                            f"{getattr(getattr(src, 'fn', None), 'module', '?')})")
        return (f" [the JIT function {getattr(fn, 'module', '?')}.{getattr(fn, '__name__', '?')} "
                f"with {len(getattr(fn, 'arg_names', []))} parameters holds: "
                f"{'; '.join(held) or 'nothing'}]")
    except Exception as err:  # noqa: BLE001 - a report's detail, never a second error
        return f" [its compiled kernels could not be listed: {err}]"


def _layout_passes_failed(e: Exception) -> bool:
    """Whether Triton's compiler failed inside its MLIR pass pipeline (not in the front end,
    where a kernel's source is wrong whatever its warps)."""
    return isinstance(e, RuntimeError) and "PassManager::run failed" in str(e)


def _fewer_warps(cfg: dict) -> dict | None:
    warps = cfg.get("num_warps", 4)
    return dict(cfg, num_warps=warps // 2) if warps > 1 else None


def _fast_launch_ok(kernel) -> bool:
    return kernel is not None and hasattr(kernel, "run") and hasattr(kernel, "function")


_TRITON_RUNTIME_KNOBS = None


def _launch_hooks_idle() -> bool:
    """Whether no launch hook is registered (a profiler such as proton registers some; launches
    then go through Triton's own launcher, which feeds them). Triton 3.6 keeps its hooks as
    always-present ``HookChain`` objects: an empty chain is idle, a plain function never is."""
    global _TRITON_RUNTIME_KNOBS
    rt = _TRITON_RUNTIME_KNOBS
    if rt is None:
        from triton import knobs
        rt = _TRITON_RUNTIME_KNOBS = knobs.runtime
    return _hook_idle(rt.launch_enter_hook) and _hook_idle(rt.launch_exit_hook)


def _hook_idle(hook) -> bool:
    return hook is None or not getattr(hook, "calls", True)


def _no_cuda(*_):
    raise RuntimeError("CUDA launch without torch's CUDA bindings")


_raw_stream = getattr(torch._C, "_cuda_getCurrentRawStream", _no_cuda)
_current_device = getattr(torch._C, "_cuda_getDevice", _no_cuda)


def _stream():
    # the raw handle, without building a Stream object at every launch (where torch has it)
    raw, device = (getattr(torch._C, n, None) for n in ("_cuda_getCurrentRawStream",
                                                       "_cuda_getDevice"))
    if raw is None or device is None:
        return torch.cuda.current_stream().cuda_stream
    return raw(device())
