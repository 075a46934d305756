"""Parallel precompilation (runtime/precompile.py): the compile jobs predicted from a graph are
exactly the launches its first call makes (same function, pointer dtypes, integers, config), so
the first call finds every kernel compiled."""
import pytest
import torch

import solder
from solder.runtime import precompile as pre
from solder.runtime.launch import KernelRunner


def _launch_signature(fn, args, cfg):
    return (id(fn), tuple(a.dtype if isinstance(a, torch.Tensor) else a for a in args),
            tuple(sorted(cfg.items())))


@pytest.fixture
def recorded(monkeypatch):
    jobs, launches = [], []
    real_jobs = pre.compile_jobs

    def capture_jobs(*a, **k):
        out = real_jobs(*a, **k)
        jobs.extend(out)
        return out

    def record_launch(self, cfg, args, xnumel, key=None):
        if key is not None:
            launches.append(_launch_signature(self.fn, args, cfg))
        return real_launch(self, cfg, args, xnumel, key)

    real_launch = KernelRunner._launch
    monkeypatch.setattr(pre, "compile_jobs", capture_jobs)
    monkeypatch.setattr(KernelRunner, "_launch", record_launch)
    return jobs, launches


def test_jobs_are_the_first_calls_launches(recorded):
    jobs, launches = recorded

    def f(x, y, mask):
        a = torch.softmax(x * 2, dim=-1)
        b = (a + y).sum(0)
        return a.half(), torch.where(mask, b, 0.0), torch.rand_like(x) + x

    x, y = torch.randn(8, 32), torch.randn(8, 32)
    solder.explain(f, x, y, torch.rand(32) > 0.5)
    predicted = {_launch_signature(j.fn, j.args, j.cfg) for j in jobs}
    assert len(launches) >= 2 and any(_seeded(l) for l in launches)
    assert set(map(_without_seed, launches)) == set(map(_without_seed, predicted))


def _seeded(launch):
    return any(isinstance(a, int) and (a == pre._TYPICAL_SEED or a > 1 << 20) for a in launch[1])


def _without_seed(launch):
    """A seed is drawn at each call: equal launches may differ in its value."""
    fn, args, cfg = launch
    return fn, tuple("seed" if isinstance(a, int) and (a == pre._TYPICAL_SEED or a > 1 << 20)
                     else a for a in args), cfg


def test_symbolic_sizes_are_left_to_the_first_call(recorded):
    jobs, launches = recorded
    f = torch.compile(lambda x: (x * 2).sum(-1), backend="solder", dynamic=True)
    f(torch.randn(4, 8))
    assert launches and not jobs


def test_nothing_compiles_ahead_on_the_cpu_or_with_one_thread():
    assert pre.precompile([object(), object()], torch.device("cpu"), 8) == 0.0
    assert pre.precompile([object(), object()], torch.device("cuda"), 1) == 0.0


def test_compiles_are_counted_as_built_or_found_and_a_user_listener_still_hears_them():
    from triton import knobs

    from solder.runtime.launch import count_compiles
    heard, stats = [], {"triton_built": 1}
    knobs.compilation.listener = lambda **kw: heard.append(kw["cache_hit"])
    try:
        with count_compiles(stats):
            for hit in (True, False, True):   # what Triton reports for each compile
                knobs.compilation.listener(src=None, metadata={}, metadata_group={},
                                           times=None, cache_hit=hit)
        assert stats == {"triton_built": 2, "triton_cached": 2}
        assert heard == [True, False, True]
        knobs.compilation.listener(cache_hit=False)   # restored: counted no more
        assert stats["triton_built"] == 2 and len(heard) == 4
    finally:
        knobs.compilation.listener = None


def test_compiled_kernels_are_loaded_in_the_pool(monkeypatch):
    # after compiling, each distinct kernel's binary is loaded and its launcher built on the
    # pool's threads (the ``run`` property), not left to the first launch; a kernel that fails
    # to load is left to its launch, which reports it
    import contextlib
    import threading

    loaded, main = [], threading.get_ident()

    class Compiled:
        def __init__(self, fail=False):
            self.fail = fail

        @property
        def run(self):
            loaded.append((id(self), threading.get_ident()))
            if self.fail:
                raise RuntimeError("no binary")
            return lambda *a: None

    kernels = [Compiled(), Compiled(), Compiled(fail=True)]

    class Fn:
        def __init__(self, k):
            self.k = k

        def warmup(self, *args, grid, **cfg):
            return self.k

    jobs = [pre.Job(f"k{i}", Fn(k), [], {"XBLOCK": 1}) for i, k in enumerate(kernels)]
    jobs.append(pre.Job("k0_again", Fn(kernels[0]), [], {"XBLOCK": 2}))  # one binary, one load
    seconds = pre._compile_and_load(jobs, contextlib.nullcontext, 4, {})
    assert seconds > 0
    assert sorted(i for i, _ in loaded) == sorted(id(k) for k in kernels)
    assert all(t != main for _, t in loaded)


def test_each_compile_loads_its_binary_in_the_same_pool_job(monkeypatch):
    # under Triton's AsyncCompileMode a compile is submitted to Solder's executor, which loads
    # the binary (and builds the launcher) as soon as that compile is done, on the same thread,
    # instead of after every compile has finished; thread-seconds of both halves are recorded
    import contextlib
    import threading

    from triton.runtime._async_compile import active_mode

    events = []

    class Compiled:
        @property
        def run(self):
            events.append(("load", id(self), threading.get_ident()))
            return lambda *a: None

    class Fn:
        def __init__(self, i):
            self.i = i

        def warmup(self, *args, grid, **cfg):
            def compile_fn():
                k = Compiled()
                events.append(("compile", id(k), threading.get_ident()))
                return k
            return active_mode.get().submit(self.i, compile_fn, lambda k: None)

    jobs = [pre.Job(f"k{i}", Fn(i), [], {"XBLOCK": 1}) for i in range(3)]
    stats = {}
    pre._compile_and_load(jobs, contextlib.nullcontext, 2, stats)
    compiled = {k: t for what, k, t in events if what == "compile"}
    loads = {k: t for what, k, t in events if what == "load"}
    assert len(compiled) == 3 and loads == compiled     # every kernel loaded, on its own thread
    for what, k, _ in events:                          # each load right after its compile
        if what == "load":
            assert ("compile", k, loads[k]) in events[:events.index(("load", k, loads[k]))]
    assert stats["precompile_compile_thread_s"] >= 0 and stats["precompile_load_thread_s"] >= 0
    assert all(f"k{i} {{'XBLOCK': 1}}" in stats["precompile_slowest"] for i in range(3))


class _GatedJit:
    """A stand-in @triton.jit function whose warmup submits a compile to Triton's async mode;
    the compile waits for ``gate`` (if any), reports a build as Triton does and appends
    ``name`` to ``done``."""

    class Compiled:
        run = None

    def __init__(self, name, done, gate=None):
        self.name, self.done, self.gate = name, done, gate

    def warmup(self, *args, grid, **cfg):
        from triton.runtime._async_compile import active_mode

        def compile_fn():
            if self.gate is not None:
                self.gate.wait(10)
            from triton import knobs
            knobs.compilation.listener(cache_hit=False)   # as Triton reports a build
            self.done.append(self.name)
            return self.Compiled()
        return active_mode.get().submit(self.name, compile_fn, lambda k: None)


def test_a_graph_compiles_in_the_background_and_its_first_call_waits(monkeypatch):
    # start() returns at once; the program goes on (here: the main thread checks the compile
    # has not finished); wait_all() blocks until it has, and counts the compiles of the pool
    import contextlib
    import threading

    release = threading.Event()
    done = []
    monkeypatch.setattr(pre, "interpreting", lambda: False)
    jobs = [pre.Job(f"k{i}", _GatedJit(i, done, release), [], {"XBLOCK": 1}) for i in range(3)]
    stats = {}
    assert pre.start(jobs, torch.device("cuda"), 2, stats, on_device=contextlib.nullcontext)
    assert done == []                  # still compiling: start did not wait
    release.set()
    assert pre.wait_all() >= 0
    assert sorted(done) == [0, 1, 2] and stats["triton_built"] == 3
    assert pre.wait_all() < 0.5        # nothing left to wait for


def test_a_graph_waits_for_its_own_precompile_not_for_the_ones_queued_after_it(monkeypatch):
    # the forward's first call must not wait for the backward's kernels (queued behind it on the
    # background thread): only the backward launches those
    import contextlib
    import threading

    release_second = threading.Event()
    done = []
    monkeypatch.setattr(pre, "interpreting", lambda: False)
    first = [pre.Job(f"f{i}", _GatedJit(f"f{i}", done), [], {"XBLOCK": 1}) for i in range(2)]
    second = [pre.Job(f"b{i}", _GatedJit(f"b{i}", done, release_second), [], {"XBLOCK": 1})
              for i in range(2)]
    f1 = pre.start(first, torch.device("cuda"), 2, {}, on_device=contextlib.nullcontext)
    f2 = pre.start(second, torch.device("cuda"), 2, {}, on_device=contextlib.nullcontext)
    try:
        assert pre.wait_for(f1) < 5
        assert sorted(done) == ["f0", "f1"] and not f2.done()   # the second still compiling
    finally:
        release_second.set()
    assert pre.wait_for(f2) < 5 and sorted(done) == ["b0", "b1", "f0", "f1"]


def test_overlapping_counters_on_two_threads_count_their_own_compiles():
    # a background precompile (pool threads) and a launch on the main thread count at the same
    # time; each block gets its own thread's compiles, and the user's listener is back at the end
    # whichever block closes first
    import threading

    from triton import knobs

    from solder.runtime.launch import count_compiles
    heard = []
    user = knobs.compilation.listener = lambda **kw: heard.append(kw["cache_hit"])
    try:
        pool_stats, main_stats = {}, {}
        pool_block = count_compiles(pool_stats, "solder-precompile")
        main_block = count_compiles(main_stats)
        pool_block.__enter__()
        main_block.__enter__()
        t = threading.Thread(target=lambda: knobs.compilation.listener(cache_hit=True),
                             name="solder-precompile_0")
        t.start()
        t.join()
        knobs.compilation.listener(cache_hit=False)           # on the main thread
        pool_block.__exit__(None, None, None)                 # the first to open closes first
        knobs.compilation.listener(cache_hit=False)
        main_block.__exit__(None, None, None)
        assert pool_stats == {"triton_cached": 1, "triton_built": 0}
        assert main_stats == {"triton_cached": 0, "triton_built": 2}
        assert knobs.compilation.listener is user and heard == [True, False, False]
    finally:
        knobs.compilation.listener = None


def test_the_first_call_runs_the_waits_once():
    from solder.runtime.compiled import CompiledGraph
    from solder.codegen.wrapper import WrapperModule
    import solder.config as config_mod
    g = CompiledGraph("g", WrapperModule("def call(args):\n    return [args[0] + 1]\n"), "", {},
                      config_mod.resolve(None), None)
    waited = []
    g.before_first_call.append(lambda: waited.append(1))
    assert g([torch.ones(1)])[0].item() == 2 and g([torch.ones(1)])[0].item() == 2
    assert waited == [1]


def test_workers_that_cannot_start_leave_the_compiles_to_the_pool(monkeypatch):
    # compile_processes > 0 where the worker step fails (here: no GPU target): the thread pool
    # still compiles every job, and the report says why the workers did not
    import contextlib

    class Fn:
        def warmup(self, *args, grid, **cfg):
            return None

    def broken(*a):
        raise RuntimeError("no driver")
    monkeypatch.setattr(pre, "_compile_in_workers", broken)
    stats = {}
    pre._compile_and_load([pre.Job("k0", Fn(), [], {"XBLOCK": 1})], contextlib.nullcontext, 2,
                          stats, processes=2)
    assert stats["precompile_workers_failed"] == "RuntimeError: no driver"
    # the pool's own wall time is reported beside its thread-seconds
    assert isinstance(stats["precompile_pool_s"], float) and stats["precompile_pool_s"] >= 0


def test_a_forked_child_starts_its_own_background_thread(monkeypatch):
    # the parent's executor (and any compile it had pending) means nothing in a child: its
    # thread does not exist there, so the child makes its own instead of waiting forever
    import contextlib
    import os

    class Fn:
        def warmup(self, *args, grid, **cfg):
            return None

    monkeypatch.setattr(pre, "interpreting", lambda: False)
    jobs = [pre.Job(f"k{i}", Fn(), [], {"XBLOCK": 1}) for i in range(2)]
    assert pre.start(jobs, torch.device("cuda"), 2, {}, on_device=contextlib.nullcontext)
    pre.wait_all()
    parent_executor = pre._BACKGROUND
    monkeypatch.setattr(pre, "_BACKGROUND_PID", os.getpid() + 1)   # as a forked child sees it
    with pre._PENDING_LOCK:
        pre._PENDING.add(object.__new__(type("Stale", (), {})))     # a parent's pending compile
    assert pre.start(jobs, torch.device("cuda"), 2, {}, on_device=contextlib.nullcontext)
    assert pre._BACKGROUND is not parent_executor
    assert pre.wait_all() < 5


@pytest.mark.parametrize("cached, expected", [(False, 3), (True, 0)])
def test_a_graph_from_the_cache_asks_no_worker_process(monkeypatch, cached, expected):
    # a graph loaded from Solder's cache had its kernels compiled when it was stored: Triton's
    # cache holds them, and the threads read them back without starting the worker processes
    import solder.config as config_mod
    from solder import pipeline
    from solder.runtime.compiled import CompiledGraph
    from solder.codegen.wrapper import WrapperModule
    asked = []
    monkeypatch.setattr(pre, "start", lambda jobs, device, threads, stats, processes: (
        asked.append(processes), False)[1])
    config = config_mod.resolve({"compile_processes": 3})
    g = CompiledGraph("g", WrapperModule("def call(args):\n    return []\n"), "", {}, config, None)
    pipeline._precompile(g, [object(), object()], torch.device("cuda"), config, {}, cached=cached)
    assert asked == [expected]
