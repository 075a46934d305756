"""Triton compiles in worker processes (``Config.compile_processes``: one per core by default; a
LLaMA training step's cold compile on the H200 went from 17.6 to 15.7 s with them, the wait for
its kernels from 7.3 to 4.9 s).

Why: a graph's compiles on a thread pool are bound by the GIL. On an H200 host a LLaMA training
step's 69 compiles took 66.9 thread-seconds on 16 threads, for work one thread does in ~6 s
(about 38% of a Triton compile holds the GIL), and the pool's wall time was no better than a
serial compile (docs/perf-notes.md). Triton's ``compile`` needs no GPU when it is given the
target, so plain worker processes can do it.

How (``runtime/precompile.py`` calls ``compile_ahead`` before its thread pool):
1. *Record.* Each job's ``warmup`` runs with Triton's ``jit_cache_hook`` answering "skip" on
   this thread: Triton hands over exactly what it would compile (signature, constexprs,
   attributes and options, as its own specialization JSON) and compiles nothing.
2. *Compile.* The workers compile those into Triton's on-disk cache. Same source file, module
   name, specialization, target and environment give the same cache key the JIT computes.
3. *Load.* As each worker answers, the thread that asked it runs the job's ``warmup`` again: a
   cache hit (the binary read back), then the binary loads and the launcher is found in the
   cache too (a launcher job per distinct launcher shape, queued before the compiles, builds
   each stub with the C compiler once). Loads thus overlap the compiles still running; the
   thread pool is left the jobs the workers could not do.
A specialization that fails to record or to compile in a worker is compiled by the thread pool,
which reports any error the usual way.

The workers are this file run as a script (``python compile_workers.py``: Triton is imported, not
torch nor Solder, and a user's ``__main__`` is never re-run as ``multiprocessing`` would). Each
reads one JSON job per line on stdin and answers one JSON line; they live as long as the process
and exit at the end of their stdin.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from queue import Empty, Queue


# ---------------------------------------------------------------------------------------------
# In Solder's process


class _Recorder:
    """Triton's ``jit_cache_hook`` while jobs are recorded: on the recording thread it keeps the
    specialization and skips the compile; on any other thread it defers to the hook that was
    there before (a launch elsewhere must compile as usual)."""

    def __init__(self, previous):
        self.thread = threading.get_ident()
        self.previous = previous
        self.records: list[dict] = []
        self.warmup = 0   # the index of the warmup running now

    def __call__(self, **kw):
        if threading.get_ident() != self.thread:
            return self.previous(**kw) if self.previous is not None else None
        fn = kw["fn"]
        code = getattr(getattr(fn.jit_function, "fn", None), "__code__", None)
        if code is None:
            return None
        self.records.append({"module": fn.module, "path": code.co_filename, "name": fn.name,
                             "data": kw["compile"]["specialization_data"],
                             "warmup": self.warmup,
                             "cost": len(getattr(fn.jit_function, "src", "") or "")})
        return True


def record(warmups) -> list[dict]:
    """Run ``warmups`` (callables) with compiles skipped; the specializations they asked for,
    each with the index of its warmup (``"warmup"``)."""
    from triton import knobs
    previous = knobs.runtime.jit_cache_hook
    recorder = _Recorder(previous)
    knobs.runtime.jit_cache_hook = recorder
    try:
        for i, warmup in enumerate(warmups):
            recorder.warmup = i
            try:
                warmup()
            except Exception:  # noqa: BLE001 - compiled (and reported) in step 3 instead
                pass
    finally:
        if knobs.runtime.jit_cache_hook is recorder:
            knobs.runtime.jit_cache_hook = previous
    return recorder.records


def compile_ahead(records: list[dict], target, processes: int, stats: dict | None = None,
                  on_compiled=None, thread_prefix: str = "solder-compile-worker") -> int:
    """Compile ``records`` in up to ``processes`` workers; returns how many compiled. ``stats``
    gets the workers' seconds summed over jobs, split into Triton's compile
    (``precompile_worker_compile_s``) and the launcher builds (``precompile_worker_launcher_s``).
    ``on_compiled(record)`` runs as soon as a record's binary is in the cache, on the thread that
    talks to that worker (named ``thread_prefix``...): loading it there overlaps the compiles
    still running, where loading after the last one put every load on the critical path."""
    if not records or processes <= 0:
        return 0
    stats = stats if stats is not None else {}
    seconds = {"precompile_worker_compile_s": 0.0, "precompile_worker_launcher_s": 0.0}
    slowest = [0.0, ""]   # the longest job (compile and launcher): the floor of the wall time
    pool = _pool(processes)
    jobs: Queue = Queue()
    for job in _queue(records, [target.backend, target.arch, target.warp_size]):
        jobs.put(job)
    done = [0]
    lock = threading.Lock()
    ready = _AfterItsLauncher(on_compiled)

    def drain(worker):
        while True:
            try:
                job = jobs.get_nowait()
            except Empty:
                return
            answer = worker.ask(job)
            with lock:
                done[0] += bool(answer.get("ok")) and job.get("kind") != "launcher"
                job_s = 0.0
                for k, v in answer.get("seconds", {}).items():
                    key = f"precompile_worker_{k}_s"
                    if key in seconds and isinstance(v, (int, float)):
                        seconds[key] += v
                        job_s += v
                if job_s > slowest[0]:
                    slowest[:] = [job_s, _describe(job)]
            ready.answered(job, bool(answer.get("ok")))
    threads = [threading.Thread(target=drain, args=(w,), name=f"{thread_prefix}-{i}")
               for i, w in enumerate(pool[:jobs.qsize()])]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    stats.update({k: round(v, 2) for k, v in seconds.items()})
    stats["precompile_worker_slowest_s"] = round(slowest[0], 2)
    stats["precompile_worker_slowest"] = slowest[1]
    return done[0]


def _describe(job: dict) -> str:
    """A job in a few words: its kernel and constexpr values, or the launcher it built."""
    if job.get("kind") == "launcher":
        return f"the launcher of {job.get('name')}'s shape"
    try:
        data = json.loads(job["data"])
        consts = ", ".join(str(v) for v in data["constant_vals"])
        warps = data["options"].get("num_warps")
        return f"{job.get('name')} (constexprs {consts}; num_warps {warps})"
    except (KeyError, TypeError, ValueError, AttributeError):
        return str(job.get("name"))


def _queue(records: list[dict], target_json: list) -> list[dict]:
    """The workers' jobs in the order they are taken. The launchers first, each by a job of its
    own: they build while the kernels compile, instead of after the first compile of their
    shape with every load of it waiting. Then the compiles, longest kernel source first: the
    step ends with its slowest compile, so that one must not start last (ResNet-50's two largest
    kernels, a max-pool over a fused batch norm and the final pooling reduction, compile in 0.6
    s each on a 2-core CPU for sm_90, against 0.1 s for the rest, and came first and last)."""
    shapes = [_launcher_key(r) for r in records]
    queue = [{**r, "target": target_json, "kind": "launcher", "shape": shape}
             for r, shape, first in zip(records, shapes, _first_of_each(shapes))
             if first and shape is not None]
    # a signature that cannot be read builds its own launcher after its compile
    compiles = [{**r, "target": target_json, "launcher": shape is None, "shape": shape}
                for r, shape in zip(records, shapes)]
    return queue + sorted(compiles, key=lambda job: -job.get("cost", 0))   # (stable)


def _launcher_key(record: dict) -> str | None:
    """The record's launcher shape as a string; None where its signature cannot be read or has
    tensor descriptors (their launcher code depends on the compiled kernel)."""
    try:
        key = json.dumps(_launcher_shape(list(json.loads(record["data"])["signature"].values())))
    except (KeyError, TypeError, ValueError, AttributeError):
        return None
    return None if "tensordesc" in key else key


def _first_of_each(shapes: list) -> list[bool]:
    """The first record of each launcher shape, which a launcher job is made from. A launcher's
    C source (and so its cache entry) depends on the kind of each argument alone: a pointer of
    any dtype, an integer or float of a given width, a constexpr; not on names, and not on the
    compiled kernel. The jobs of one graph share a handful, and left to every job the workers
    built the same stubs side by side (a LLaMA step's 69 jobs spent 15 worker-seconds on
    launchers, as much as on the kernels). The kernels find the stub in Triton's cache when
    Solder's process loads them; a shape guessed wrong only means that launcher is built there,
    as without workers."""
    seen, first = set(), []
    for key in shapes:
        first.append(key is None or key not in seen)
        seen.add(key)
    return first


class _AfterItsLauncher:
    """Hands each compiled record to ``on_compiled`` once its launcher is in the cache too: a
    record compiled before its shape's launcher job answered waits for it, else its load would
    build the same launcher again in Solder's process. Runs on the threads that talk to the
    workers."""

    def __init__(self, on_compiled):
        self.on_compiled = on_compiled
        self.lock = threading.Lock()
        self.built: set = set()        # shapes whose launcher job has answered
        self.waiting: dict = {}        # shape -> records compiled before it did

    def answered(self, job: dict, ok: bool) -> None:
        if self.on_compiled is None:
            return
        shape = job.get("shape")
        with self.lock:
            if job.get("kind") == "launcher":
                # built (or failed: then the first load builds it, and the rest find it)
                self.built.add(shape)
                now = self.waiting.pop(shape, [])
            elif not ok:
                now = []
            elif shape is None or shape in self.built:
                now = [job]   # (no shape: the job built its own launcher)
            else:
                self.waiting.setdefault(shape, []).append(job)
                now = []
        for record in now:
            try:
                self.on_compiled(record)
            except Exception:  # noqa: BLE001 - loaded (and reported) by the caller later
                pass


def _launcher_shape(types):
    """The argument kinds a launcher is generated from: every pointer type is one kind."""
    if isinstance(types, list):
        return [_launcher_shape(t) for t in types]
    return "*" if isinstance(types, str) and types.startswith("*") else types


# a compile that takes longer than this is given up (the worker is killed and replaced); the
# thread pool then compiles that job as it would have without workers
JOB_TIMEOUT_S = 300.0


class _Worker:
    def __init__(self):
        env = dict(os.environ)
        env.pop("TRITON_INTERPRET", None)
        try:   # the cache this process's Triton reads, wherever it was set
            from triton import knobs
            env["TRITON_CACHE_DIR"] = str(knobs.cache.dir)
        except Exception:  # noqa: BLE001 - Triton's default then, as in this process
            pass
        self.proc = subprocess.Popen([sys.executable, os.path.abspath(__file__)],
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=subprocess.DEVNULL, env=env, text=True, bufsize=1)
        self.lock = threading.Lock()

    def ask(self, job: dict, timeout_s: float = JOB_TIMEOUT_S) -> dict:
        import selectors
        with self.lock:
            try:
                self.proc.stdin.write(json.dumps(job) + "\n")
                self.proc.stdin.flush()
                with selectors.DefaultSelector() as sel:
                    sel.register(self.proc.stdout, selectors.EVENT_READ)
                    if not sel.select(timeout_s):
                        self.proc.kill()   # _pool replaces dead workers
                        return {"ok": False, "error": f"no answer in {timeout_s:.0f} s"}
                line = self.proc.stdout.readline()
                return json.loads(line) if line else {"ok": False, "error": "worker exited"}
            except (OSError, ValueError) as e:
                return {"ok": False, "error": str(e)}

    def alive(self) -> bool:
        return self.proc.poll() is None


_POOL: list[_Worker] = []
_POOL_LOCK = threading.Lock()
_POOL_PID = [0]   # a forked child must not talk to its parent's workers through shared pipes


def _pool(processes: int) -> list[_Worker]:
    with _POOL_LOCK:
        if _POOL_PID[0] != os.getpid():
            _POOL.clear()
            _POOL_PID[0] = os.getpid()
        _POOL[:] = [w for w in _POOL if w.alive()]
        while len(_POOL) < processes:
            _POOL.append(_Worker())
        return list(_POOL)


MAX_DEFAULT_PROCESSES = 32


def default_processes() -> int:
    """``compile_processes=-1``: one worker per usable core, shared among the processes torchrun
    started on this machine (``LOCAL_WORLD_SIZE``: eight training ranks must not start eight
    workers per core), and at most ``MAX_DEFAULT_PROCESSES`` (each holds Triton, ~100 MB)."""
    from .precompile import default_threads
    try:
        local = max(1, int(os.environ.get("LOCAL_WORLD_SIZE") or 1))
    except ValueError:
        local = 1
    return max(1, min(MAX_DEFAULT_PROCESSES, default_threads() // local))


def warm(processes: int) -> None:
    """Start the workers now (each imports Triton's compiler before it reads a job: a second or
    two), so that they are ready when the first graph's kernels are."""
    if processes > 0:
        _pool(processes)


# ---------------------------------------------------------------------------------------------
# In a worker


def _compile(job: dict, modules: dict, seconds: dict) -> str:
    import importlib.util

    import triton
    from triton.backends.compiler import GPUTarget
    mod = modules.get(job["path"])
    if mod is None:
        # the module name is part of the kernel's cache key: import it under Solder's own name
        spec = importlib.util.spec_from_file_location(job["module"], job["path"])
        mod = importlib.util.module_from_spec(spec)
        sys.modules[job["module"]] = mod
        spec.loader.exec_module(mod)
        modules[job["path"]] = mod
    src = _source(job, getattr(mod, job["name"]))
    backend, arch, warp_size = job["target"]
    t0 = time.perf_counter()
    if job.get("kind") == "launcher":   # the stub alone: its source needs no compiled kernel
        launcher = _build_launcher(src, _NoTensorDescriptors, backend)
        seconds.update(launcher=time.perf_counter() - t0)
        return launcher
    options = {k: _tuples(v) for k, v in json.loads(job["data"])["options"].items()}
    kernel = triton.compile(src, target=GPUTarget(backend, arch, warp_size), options=options)
    t1 = time.perf_counter()
    launcher = (_build_launcher(kernel.src, kernel.metadata, backend) if job.get("launcher", True)
                else "built by its shape's launcher job")
    seconds.update(compile=t1 - t0, launcher=time.perf_counter() - t1)
    return launcher


def _source(job: dict, fn):
    """The ``ASTSource`` Triton's JIT would compile for the recorded specialization."""
    import triton.language as tl
    from triton.compiler import ASTSource
    data = json.loads(job["data"])
    constexprs = {}
    for k, v in zip(data["constant_keys"], data["constant_vals"]):
        if isinstance(v, str) and tl.dtype.is_dtype(v):
            v = tl.dtype(v)
        elif isinstance(v, dict) and "constexpr" in v:
            v = tl.constexpr(v["constexpr"])
        constexprs[tuple(k)] = v
    attrs = dict(zip(map(tuple, data["attrs_keys"]), data["attrs_vals"]))
    signature = {k: _tuples(v) for k, v in data["signature"].items()}
    return ASTSource(fn, signature, constexprs, attrs)


class _NoTensorDescriptors:
    """The compiled-kernel metadata a launcher reads, for a kernel without tensor descriptors
    (Solder's kernels have none): only ``tensordesc_meta`` changes the stub's source."""
    tensordesc_meta = None
    num_ctas = 1
    global_scratch_size = global_scratch_align = 0
    profile_scratch_size = profile_scratch_align = 0
    launch_cooperative_grid = launch_pdl = False


def _build_launcher(src, metadata, backend: str) -> str:
    """Build a kernel's launcher into Triton's cache: a C stub per launcher shape, compiled
    with the host's C compiler (~0.3 s each on an H200 host, most of what loading a fresh
    kernel costs). Solder's process then finds it there: the cache key is the stub's source.
    "built", or why not (the kernel is fine either way; the launcher is then built at load, as
    without workers)."""
    if backend != "cuda":
        return "launchers are built ahead only for CUDA"
    try:
        from triton.backends.nvidia.driver import CudaLauncher
        CudaLauncher(src, metadata)   # builds and caches (loads nothing in _serve)
        return "built"
    except Exception as e:  # noqa: BLE001 - e.g. no libcuda on this host
        return f"{type(e).__name__}: {str(e)[:200]}"


def _tuples(v):
    return tuple(_tuples(x) for x in v) if isinstance(v, list) else v


def _prepare_compiler() -> None:
    """What every job needs, done before the first job arrives: the workers start while Solder
    captures the graph (``warm``), so Triton's import and its one-time compile setup are over
    by the time the kernels are. Without this the first jobs waited for them: a ConvNeXt cold
    compile spent 3.2 s waiting on 41 compiles of at most 0.1 s each; with the import alone,
    2.4 s (on the CPU a worker's first compile took 0.97 s, its second 0.04)."""
    import triton  # noqa: F401
    import triton.language  # noqa: F401
    from triton.backends import backends   # discovers the targets' compiler modules
    from triton.compiler import ASTSource  # noqa: F401
    if "nvidia" in backends:
        try:
            from triton.backends.nvidia import driver   # the launcher builder
            driver.libcuda_dirs()   # asks ldconfig where libcuda is, once per process
        except Exception:  # noqa: BLE001 - at the first job instead (no libcuda on a CPU host)
            pass
    import triton.compiler.code_generator  # noqa: F401  (imported by a first compile)
    try:
        # the first compile's cache key hashes Triton's own sources and libtriton (0.3 s on a
        # 2-core CPU, 16 workers at once on one file after that): once per process, done now
        from triton.runtime.cache import triton_key
        triton_key()
    except Exception:  # noqa: BLE001 - computed at the first job instead
        pass


def _skip_loading_launchers() -> None:
    """A worker never launches a kernel: a launcher built into Triton's cache is all it needs.
    Loading it would also load libcuda into every worker, for nothing."""
    from triton.runtime import build

    class NotLoaded:
        launch = None
    build._load_module_from_path = lambda name, path: NotLoaded


# Workers run at a lower priority than Solder's process. They start as the first graph is
# captured and take every core while a graph's kernels compile, but the critical path is that
# process's one thread (Dynamo, AOTAutograd, lowering the next graph): on a loaded machine the
# scheduler should give it its core first. Idle cores still go to the workers.
WORKER_NICENESS = 10


def _serve() -> None:
    out = os.fdopen(os.dup(1), "w", buffering=1)
    os.dup2(2, 1)   # what Triton or a kernel module prints must not reach the answers
    try:
        os.nice(WORKER_NICENESS)
    except (OSError, AttributeError):  # not permitted, or not on this platform: same priority
        pass
    try:
        _skip_loading_launchers()
        _prepare_compiler()
    except Exception:  # noqa: BLE001 - each job then imports what it needs and reports errors
        pass
    modules: dict = {}
    for line in sys.stdin:
        seconds: dict = {}
        try:
            answer = {"ok": True, "launcher": _compile(json.loads(line), modules, seconds)}
        except Exception as e:  # noqa: BLE001 - the job is compiled in Solder's process instead
            answer = {"ok": False, "error": f"{type(e).__name__}: {str(e)[:500]}"}
        answer["seconds"] = seconds
        out.write(json.dumps(answer) + "\n")


if __name__ == "__main__":
    _serve()
