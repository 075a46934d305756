"""Triton compiles in worker processes (runtime/compile_workers.py), without a GPU: a worker
compiles a recorded specialization for sm_90 into Triton's disk cache, a fresh process asking
Triton for the same compile finds it there, a bad job is answered with its error, and the
recorder skips compiles only on its own thread."""
import json
import os
import subprocess
import sys
import textwrap
import threading
from types import SimpleNamespace

import pytest

from solder.runtime import compile_workers

KERNEL = '''
import triton
import triton.language as tl


@triton.jit
def k0(ptr0, ptr1, xnumel, XBLOCK: tl.constexpr):
    x = tl.program_id(0) * XBLOCK + tl.arange(0, XBLOCK)
    tl.store(ptr1 + x, tl.load(ptr0 + x, x < xnumel) * 2, x < xnumel)
'''

SPEC = {"name": "solder_generated.test_k.k0",
        "signature": {"ptr0": "*fp32", "ptr1": "*fp32", "xnumel": "i32", "XBLOCK": "constexpr"},
        "constant_keys": [[3]], "constant_vals": [128],
        "attrs_keys": [[0], [1]], "attrs_vals": [[["tt.divisibility", 16]]] * 2,
        "options": {"num_warps": 4, "num_stages": 3}, "key": "unused"}

# a fresh process asks Triton for the same compile and reports whether its cache had it
SAME_COMPILE = textwrap.dedent('''
    import json, sys
    from triton import knobs
    hits = []
    knobs.compilation.listener = lambda **kw: hits.append(kw["cache_hit"])
    sys.path.insert(0, sys.argv[2])
    import compile_workers_script as w
    w._compile(json.loads(sys.argv[1]), {}, {})
    print(json.dumps(hits))
''')


@pytest.fixture
def job(tmp_path, monkeypatch):
    path = tmp_path / "kernels_test.py"
    path.write_text(KERNEL)
    monkeypatch.setenv("TRITON_CACHE_DIR", str(tmp_path / "triton-cache"))
    return {"module": "solder_generated.test_k", "path": str(path), "name": "k0",
            "data": json.dumps(SPEC)}


def _in_fresh_process(code: str, job: dict, tmp_path):
    """Run ``code`` in a new interpreter (no TRITON_INTERPRET) with the worker script importable
    on its own, without Solder's package, as the workers run it; argv: the job, the script's
    folder."""
    script_dir = tmp_path / "script"
    script_dir.mkdir(exist_ok=True)
    (script_dir / "compile_workers_script.py").write_text(open(compile_workers.__file__).read())
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    return subprocess.run([sys.executable, "-c", code,
                           json.dumps({**job, "target": ["cuda", 90, 32]}), str(script_dir)],
                          env=env, capture_output=True, text=True, timeout=300)


def _firsts(records):
    return compile_workers._first_of_each([compile_workers._launcher_key(r) for r in records])


class _Target:
    backend, arch, warp_size = "cuda", 90, 32


def test_a_worker_compiles_into_the_cache_that_a_fresh_process_then_hits(job, tmp_path):
    compile_workers._POOL.clear()   # workers inherit this test's TRITON_CACHE_DIR
    stats = {}
    assert compile_workers.compile_ahead([job], _Target(), 2, stats) == 1
    # the worker's own seconds come back, split into Triton's compile and the launcher build
    assert stats["precompile_worker_compile_s"] > 0
    assert stats["precompile_worker_launcher_s"] >= 0
    assert 0 < stats["precompile_worker_slowest_s"] <= round(
        stats["precompile_worker_compile_s"] + stats["precompile_worker_launcher_s"], 2)
    # named: the kernel and its constexprs, or the launcher job
    assert stats["precompile_worker_slowest"] in ("k0 (constexprs 128; num_warps 4)",
                                                  "the launcher of k0's shape")
    cubins = list((tmp_path / "triton-cache").rglob("*.cubin"))
    assert len(cubins) == 1
    r = _in_fresh_process(SAME_COMPILE, job, tmp_path)
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout.strip().splitlines()[-1]) == [True]


def test_a_bad_job_is_answered_with_its_error_and_the_worker_goes_on(job):
    compile_workers._POOL.clear()
    bad = {**job, "name": "no_such_kernel"}
    (worker,) = compile_workers._pool(1)
    answer = worker.ask({**bad, "target": ["cuda", 90, 32]})
    assert answer["ok"] is False and "no_such_kernel" in answer["error"]
    assert worker.ask({**job, "target": ["cuda", 90, 32]})["ok"] is True
    # workers yield the cores to Solder's process, whose one thread is the critical path
    assert (os.getpriority(os.PRIO_PROCESS, worker.proc.pid)
            == min(19, os.getpriority(os.PRIO_PROCESS, 0) + compile_workers.WORKER_NICENESS))


def test_the_recorder_skips_compiles_on_its_own_thread_only():
    heard = []
    recorder = compile_workers._Recorder(lambda **kw: heard.append(kw["key"]) or None)
    info = SimpleNamespace(module="m", name="k0", jit_function=SimpleNamespace(fn=test_a_bad_job_is_answered_with_its_error_and_the_worker_goes_on))
    call = dict(key="a", fn=info, compile={"specialization_data": "{}"})
    assert recorder(**call) is True and recorder.records[0]["name"] == "k0"
    out = []
    t = threading.Thread(target=lambda: out.append(recorder(**{**call, "key": "b"})))
    t.start()
    t.join()
    assert out == [None] and heard == ["b"] and len(recorder.records) == 1


# A process without the interpreter whose Triton driver names an sm_90 GPU (no GPU needed).
SM90_DRIVER = textwrap.dedent('''
    import contextlib, sys, threading, torch
    from triton import knobs
    from triton.backends.compiler import GPUTarget
    from triton.runtime import driver
    target = GPUTarget("cuda", 90, 32)

    class Driver:
        def get_current_target(self): return target
        def get_current_device(self): return 0
        def get_current_stream(self, device=None): return 0
    driver.set_active(Driver())
''')

# The whole path in a process without the interpreter, Triton's driver replaced by one that
# names an sm_90 GPU: the JIT's own warmup is recorded (not compiled), a worker compiles it, and
# the JIT's real compile of the same launch then finds it in the cache, under its own key.
RECORD_COMPILE_HIT = SM90_DRIVER + textwrap.dedent('''
    from solder.runtime import compile_workers
    from solder.runtime.launch import load_module
    fn = load_module(open(sys.argv[1]).read(), sys.argv[2], stem="record_test").k0
    warmup = lambda: fn.warmup(torch.float32, torch.float32, 1000, grid=(1,), XBLOCK=128)
    records = compile_workers.record([warmup])
    assert len(records) == 1 and not list(fn.device_caches[0][0]), records
    assert records[0]["cost"] == len(fn.src) > 0   # the kernel's size orders the queue
    assert compile_workers.compile_ahead(records, target, 1) == 1
    hits = []
    knobs.compilation.listener = lambda **kw: hits.append(kw["cache_hit"])
    kernel = warmup()
    print("HITS", hits, kernel.metadata.name)
''')


def test_a_recorded_launch_compiled_by_a_worker_is_the_jits_own_cache_hit(tmp_path):
    src = tmp_path / "k.py"
    src.write_text(KERNEL)
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    env["TRITON_CACHE_DIR"] = str(tmp_path / "triton-cache")
    env["PYTHONPATH"] = os.pathsep.join([os.path.dirname(os.path.dirname(
        os.path.dirname(os.path.abspath(compile_workers.__file__))))] +
        [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p])
    r = subprocess.run([sys.executable, "-c", RECORD_COMPILE_HIT, str(src), str(tmp_path / "c")],
                       env=env, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stdout + r.stderr[-3000:]
    assert "HITS [True] k0" in r.stdout


def test_a_worker_that_does_not_answer_is_killed_and_replaced(job, monkeypatch):
    compile_workers._POOL.clear()
    (worker,) = compile_workers._pool(1)
    import signal
    os.kill(worker.proc.pid, signal.SIGSTOP)   # a worker that will not answer in time
    try:
        answer = worker.ask({**job, "target": ["cuda", 90, 32]}, timeout_s=1)
    finally:
        if worker.proc.poll() is None:
            os.kill(worker.proc.pid, signal.SIGCONT)
    assert answer == {"ok": False, "error": "no answer in 1 s"}
    worker.proc.wait(10)
    (fresh,) = compile_workers._pool(1)
    assert fresh is not worker and fresh.ask({**job, "target": ["cuda", 90, 32]})["ok"] is True


# A stand-in libcuda (an empty shared library) lets the launcher stub link on a host without a
# GPU; whether it then loads does not matter here, only which process compiled it.
LAUNCHER_FROM_CACHE = textwrap.dedent('''
    import json, sys
    import triton.runtime.build as build
    def refuse(*a, **k):
        raise AssertionError("the launcher was compiled again")
    build._build = refuse
    class Module:   # the stand-in libcuda defines no CUDA functions: the stub cannot load
        launch = None
    build._load_module_from_path = lambda name, path: Module
    sys.path.insert(0, sys.argv[2])
    import compile_workers_script as w
    print("LAUNCHER", w._compile(json.loads(sys.argv[1]), {}, {}))
''')


@pytest.fixture
def fake_libcuda(tmp_path, monkeypatch):
    lib = tmp_path / "libcuda"
    lib.mkdir()
    (lib / "empty.c").write_text("int solder_test_stub;\n")
    subprocess.run(["cc", "-shared", "-fPIC", "-Wl,-soname,libcuda.so.1", "-o",
                    str(lib / "libcuda.so.1"), str(lib / "empty.c")], check=True)
    os.symlink(lib / "libcuda.so.1", lib / "libcuda.so")
    monkeypatch.setenv("TRITON_LIBCUDA_PATH", str(lib))
    monkeypatch.setenv("LD_LIBRARY_PATH", str(lib))
    return lib


@pytest.mark.parametrize("kind", ["after its compile", "launcher job"])
def test_a_worker_builds_the_launcher_that_a_fresh_process_then_finds(job, tmp_path,
                                                                       fake_libcuda, kind):
    # a launcher job builds the stub from the recorded signature alone, before any compile:
    # the kernel compiled later (here in a fresh process) finds the very same stub
    compile_workers._POOL.clear()   # workers inherit this test's environment
    (worker,) = compile_workers._pool(1)
    extra = {"kind": "launcher"} if kind == "launcher job" else {}
    answer = worker.ask({**job, "target": ["cuda", 90, 32], **extra})
    assert answer["ok"] is True and answer["launcher"] == "built", answer
    stubs = list((tmp_path / "triton-cache").rglob("__triton_launcher*.so"))
    assert len(stubs) == 1, answer
    cubins = list((tmp_path / "triton-cache").rglob("*.cubin"))
    assert len(cubins) == (0 if extra else 1)
    r = _in_fresh_process(LAUNCHER_FROM_CACHE, job, tmp_path)
    assert r.returncode == 0, r.stderr
    line = [x for x in r.stdout.splitlines() if x.startswith("LAUNCHER")][-1]
    assert "compiled again" not in line, line
    compile_workers._POOL.clear()


def test_each_launcher_signature_is_built_by_one_job_only(job, tmp_path, fake_libcuda):
    # two configs of one kernel share a launcher (same signature) and a third job has another:
    # the workers build two stubs, not three, and the jobs that did not build theirs say so
    spec = json.loads(job["data"])
    other = {**spec, "constant_vals": [256]}
    wider = {**spec, "signature": {**spec["signature"], "xnumel": "i64"}}
    records = [job, {**job, "data": json.dumps(other)}, {**job, "data": json.dumps(wider)}]
    assert _firsts(records) == [True, False, True]
    # other pointer dtypes and other names make the same launcher source
    renamed = {**spec, "signature": {"a": "*bf16", "b": "*i64", "n": "i32", "B": "constexpr"}}
    assert _firsts(
        [job, {**job, "data": json.dumps(renamed)}]) == [True, False]
    assert _firsts([{"data": "not json"}] * 2) == [True, True]
    compile_workers._POOL.clear()   # workers inherit this test's environment
    stats = {}
    compiled = []
    # three kernels compiled (the launcher jobs are not counted), two stubs built, and each
    # record handed on once its launcher is built
    assert compile_workers.compile_ahead(records, _Target(), 2, stats,
                                         on_compiled=lambda r: compiled.append(r["data"])) == 3
    assert sorted(compiled) == sorted(r["data"] for r in records)
    assert len(list((tmp_path / "triton-cache").rglob("__triton_launcher*.so"))) == 2
    assert len(list((tmp_path / "triton-cache").rglob("*.cubin"))) == 3
    worker = compile_workers._pool(1)[0]
    answer = worker.ask({**records[1], "target": ["cuda", 90, 32], "launcher": False})
    assert answer["launcher"] == "built by its shape's launcher job"
    compile_workers._POOL.clear()


def test_launcher_shapes_that_match_make_the_same_launcher_source():
    # the ground truth the sharing relies on: Triton's own launcher generator
    pytest.importorskip("triton.backends.nvidia.driver")
    from triton.backends.nvidia.driver import make_launcher
    sigs = [{"p0": "*fp32", "p1": "*bf16", "n": "i32", "XBLOCK": "constexpr"},
            {"x": "*i64", "y": "*fp16", "m": "i32", "R": "constexpr"},
            {"p0": "*fp32", "p1": "*bf16", "n": "i64", "XBLOCK": "constexpr"},
            {"p0": "*fp32", "n": "i32", "p1": "*bf16", "XBLOCK": "constexpr"}]
    for a in sigs:
        for b in sigs:
            same_shape = (compile_workers._launcher_shape(list(a.values()))
                          == compile_workers._launcher_shape(list(b.values())))
            if same_shape:   # one shape, one source (the converse need not hold)
                assert make_launcher({}, a, None) == make_launcher({}, b, None)
    assert compile_workers._launcher_shape(list(sigs[0].values())) == \
        compile_workers._launcher_shape(list(sigs[1].values()))


def test_the_default_worker_count_is_shared_among_torchrun_ranks_and_capped(monkeypatch):
    from solder.runtime import compile_workers, precompile
    monkeypatch.setattr(precompile, "default_threads", lambda: 128)
    monkeypatch.delenv("LOCAL_WORLD_SIZE", raising=False)
    assert compile_workers.default_processes() == compile_workers.MAX_DEFAULT_PROCESSES
    monkeypatch.setenv("LOCAL_WORLD_SIZE", "8")      # eight ranks on a 128-core machine
    assert compile_workers.default_processes() == 16
    monkeypatch.setattr(precompile, "default_threads", lambda: 4)
    assert compile_workers.default_processes() == 1   # never none
    monkeypatch.setenv("LOCAL_WORLD_SIZE", "not a number")
    assert compile_workers.default_processes() == 4


def test_a_worker_imports_the_compiler_before_its_first_job(job, tmp_path):
    # started while the graph is captured, a worker has Triton's compiler imported and its
    # one-time setup (Triton's own cache key) done by the time the jobs come: with no job at
    # all (stdin closed), they are already there
    code = textwrap.dedent('''
        import io, sys
        sys.path.insert(0, sys.argv[2])
        import compile_workers_script as w
        before = "triton.compiler" in sys.modules
        sys.stdin = io.StringIO("")
        w._serve()
        from triton.runtime.cache import triton_key
        print("IMPORTED", before, "triton.compiler.code_generator" in sys.modules,
              "triton.backends.nvidia.compiler" in sys.modules,
              triton_key.cache_info().currsize == 1, file=sys.stderr)
    ''')
    r = _in_fresh_process(code, job, tmp_path)
    assert r.returncode == 0, r.stderr
    assert "IMPORTED False True True True" in r.stderr, r.stderr


def test_a_compiled_record_is_handed_on_after_its_shapes_launcher_job():
    handed = []
    after = compile_workers._AfterItsLauncher(lambda r: handed.append(r["id"]))
    launcher_a = {"id": "la", "shape": "A", "kind": "launcher"}
    a1 = {"id": "a1", "shape": "A", "launcher": False}
    a2 = {"id": "a2", "shape": "A", "launcher": False}
    launcher_b = {"id": "lb", "shape": "B", "kind": "launcher"}
    b1 = {"id": "b1", "shape": "B", "launcher": False}
    odd = {"id": "odd", "shape": None, "launcher": True}
    after.answered(a1, True)        # compiled before its shape's launcher: waits
    after.answered(odd, True)       # an unreadable shape builds its own: at once
    assert handed == ["odd"]
    after.answered(launcher_a, True)   # the launcher is in the cache: the one waiting goes
    assert handed == ["odd", "a1"]
    after.answered(a2, True)
    after.answered(b1, True)
    after.answered(launcher_b, False)  # it failed: the waiting one goes on (and builds it)
    after.answered({"id": "b2", "shape": "B", "launcher": False}, False)   # failed: not handed
    assert handed == ["odd", "a1", "a2", "b1"]


RECORD_COMPILE_LOAD = SM90_DRIVER + textwrap.dedent('''
    from solder.runtime import precompile as pre
    from solder.runtime.launch import load_module
    fn = load_module(open(sys.argv[1]).read(), sys.argv[2], stem="record_load_test").k0
    jobs = [pre.Job("k0", fn, [torch.float32, torch.float32, 1000], {"XBLOCK": b})
            for b in (128, 256)]
    heard = []
    knobs.compilation.listener = lambda **kw: heard.append(
        (kw["cache_hit"], threading.current_thread().name))
    stats, per_job = {}, []
    pre._compile_in_workers(jobs, contextlib.nullcontext, 2, stats, per_job)
    print("IN_JIT", len(list(fn.device_caches[0][0])), "LOADED", len(per_job))
    print("HEARD", sorted(heard))
''')


def test_workers_compiles_are_loaded_as_they_answer_on_the_threads_that_asked(tmp_path):
    # the precompile's worker step leaves each compiled kernel in its JIT function's cache (a
    # cache hit of the worker's binary), read back on the worker's thread before the step ends
    src = tmp_path / "k.py"
    src.write_text(KERNEL)
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    env["TRITON_CACHE_DIR"] = str(tmp_path / "cache")
    r = subprocess.run([sys.executable, "-c", RECORD_COMPILE_LOAD, str(src), str(tmp_path)],
                       env=env, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr[-3000:]
    assert "IN_JIT 2 LOADED 2" in r.stdout, r.stdout + r.stderr[-2000:]
    heard = r.stdout.split("HEARD ", 1)[1].strip()
    assert heard.count("(True, 'solder-precompile-worker-") == 2, heard
    assert "False" not in heard, heard


def test_launcher_jobs_go_first_then_the_longest_kernels():
    spec = SPEC
    wide = {**spec, "signature": {**spec["signature"], "xnumel": "i64"}}
    records = [{"name": "small", "data": json.dumps(spec), "cost": 100},
               {"name": "big", "data": json.dumps(spec), "cost": 5000},
               {"name": "mid", "data": json.dumps(wide), "cost": 800},
               {"name": "small2", "data": json.dumps(spec), "cost": 100},
               {"name": "odd", "data": "not json", "cost": 300}]
    queue = compile_workers._queue(records, ["cuda", 90, 32])
    # one launcher job per readable shape (from the first record of each), then the compiles
    assert [(j["name"], j.get("kind", "compile")) for j in queue] == [
        ("small", "launcher"), ("mid", "launcher"),
        ("big", "compile"), ("mid", "compile"), ("odd", "compile"), ("small", "compile"),
        ("small2", "compile")]
    # only the unreadable one builds its launcher after its compile
    assert [j["name"] for j in queue if j.get("launcher")] == ["odd"]
    assert all(j["target"] == ["cuda", 90, 32] for j in queue)
