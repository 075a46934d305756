"""One graph through the stages: lower -> schedule -> codegen -> runtime.

``compile_graph`` is what AOTAutograd calls for each forward, backward and inference graph. It
returns a callable taking the graph's inputs as a list, and records a ``GraphReport`` for
``solder.explain``.
"""
from __future__ import annotations

import itertools
import logging
import os
import time
from pathlib import Path
from typing import Callable, Optional

import torch
import torch.fx as fx

from . import logs
from .config import Config
from .reports import CallReport, GraphReport, KernelReport  # noqa: F401  (re-exported)

_graph_ids = itertools.count()


class CompileContext:
    """Where reports of one ``torch.compile`` (or one ``solder.explain``) are collected."""

    def __init__(self, config: Config):
        self.config = config
        self.graphs: list[GraphReport] = []
        self.rewrites: list[str] = []   # what was rewritten in Dynamo's graphs, one line each
        self.notes: list[str] = []      # what a rewrite looked at and left alone, and why
        self.started: Optional[float] = None   # when Dynamo handed over the current graph
        self.started_cpu: Optional[float] = None   # this thread's CPU seconds then
        # the next backward, lowered in a forked child (runtime/forked_compile.ForkedWork)
        self.backward_child = None
        # the graph being compiled: its number of inputs and which are leaves that require
        # grad (capture/saved_values.py treats them as parameters)
        self.input_count: Optional[int] = None
        self.leaf_inputs: frozenset = frozenset()


def compile_graph(gm: fx.GraphModule, example_inputs, kind: str, ctx: CompileContext) -> Callable:
    # a backward that a forked child lowered while the forward compiled (capture/aot.py)
    child = None
    if kind == "backward":
        child, ctx.backward_child = ctx.backward_child, None
    try:
        return _compile_graph(gm, kind, ctx, child)
    finally:
        if child is not None:
            child.discard()   # not asked (a cache hit, a dump), or asked already


def _compile_graph(gm: fx.GraphModule, kind: str, ctx: CompileContext, child) -> Callable:
    config = ctx.config
    name = f"graph{next(_graph_ids)}_{kind}"
    report = GraphReport(name, kind,
                         fx_graph_printer=lambda: gm.print_readable(print_output=False))
    ctx.graphs.append(report)
    dump = _dump_dir(config, name)
    report.dump_dir = dump
    if dump:
        _write(dump, "fx_graph.txt", report.fx_graph)
    if config.debug_eager:
        return _eager_runner(gm)
    cpu = _cpu_graph(gm)
    if cpu and not _interpreting():
        if native_cpu(config):
            return _compile_native(gm, kind, config, name, report, dump)
        # (a graph with CPU tensors that reached AOTAutograd: one that ran on a GPU too)
        _note_cpu_fallback(report, name, config)
        return _eager_runner(gm)

    from .runtime import graph_cache
    t_key = time.perf_counter()
    captured = {"capture": max(0.0, t_key - ctx.started) if ctx.started else 0.0}
    if ctx.started and ctx.started_cpu is not None:
        # the thread's own CPU seconds beside each wall time: where the wall time is much
        # longer, the thread waited (for the GIL, held by the kernels' compile threads)
        captured["cpu_capture"] = time.thread_time() - ctx.started_cpu
    cache, key, cache_state = graph_cache.prepare(gm, kind, config, _interpreting())
    logs.log.debug("%s: %d FX nodes, cache %s", name, len(gm.graph.nodes), cache_state)
    if key is not None:   # Solder's own time on a warm start too: the graph printed and hashed
        captured["cache_key"] = time.perf_counter() - t_key
    if key is not None and not dump:  # a dump wants every stage, so it compiles
        t0 = time.perf_counter()
        report.timings = {**captured, "cache": "hit"}
        loaded = graph_cache.load(cache, key, name, config, report)
        if loaded is not None:
            compiled, (jobs, device) = loaded
            report.timings["load"] = time.perf_counter() - t0
            # Triton reads the kernels' binaries back from its cache, in parallel
            _precompile(compiled, jobs, device, config, report.timings, cached=True)
            ctx.started = None
            _log_artifacts(name, report, None, compiled.kernel_source, compiled.wrapper_source)
            _log_after_first_call(compiled, report, config)
            return compiled

    if child is not None and not dump:
        got = _from_child(child, gm, name, config, report, captured)
        if got is not None:
            return _finish(report=report, ctx=ctx, cache=cache, key=key,
                           cache_state=cache_state, config=config, **got)

    from .runtime.compiled import CompiledGraph
    generated = generate_code(gm, kind, config, name, report)
    graph, steps, kernels, wrapper, module_src = generated[:5]
    _show_stages(dump, name, report, generated, "kernels.py")
    report.timings = {**captured, **generated[5]}
    t3 = time.perf_counter()
    compiled = CompiledGraph(name, wrapper, module_src, kernels, config,
                             os.path.join(dump, "kernels.py") if dump else None, report.timings)
    report.timings["load"] = time.perf_counter() - t3
    jobs, device = _compile_jobs(compiled, steps, graph)
    files = None
    if key is not None:
        try:
            files = graph_cache.encode(name, wrapper, module_src, kernels, report, graph)
        except graph_cache.Uncacheable as e:
            cache_state = f"skip ({e})"
    return _finish(compiled, report, ctx, cache, key, cache_state, config, files, jobs, device)


def _finish(compiled, report, ctx, cache, key, cache_state, config, files, jobs, device):
    """Start the kernels' parallel compile; arrange the cache entry and the log line."""
    _precompile(compiled, jobs, device, config, report.timings)
    if key is not None and files is not None:
        from .runtime import graph_cache
        cache_state = graph_cache.store_after_first_call(compiled, cache, key, files,
                                                         (jobs, device))
    report.timings["cache"] = cache_state
    ctx.started = None  # the next graph's capture starts after this one
    _log_after_first_call(compiled, report, config)
    return compiled


def _log_after_first_call(compiled, report, config) -> None:
    """The graph's compile line at INFO (``TORCH_LOGS=solder``; ``log_compile`` shows it
    whatever the level), after its first call: Triton's and the tuner's time are known then."""
    if config.log_compile or logs.compile_log.isEnabledFor(logging.INFO):
        compiled.after_first_call.append(lambda: logs.info(
            logs.compile_log, compile_log_line(report), always=config.log_compile))


def _show_stages(dump, name, report, generated, kernels_file: str) -> None:
    """A generated graph's stages under the debug folder (where asked) and in the logs."""
    graph, steps, _, wrapper, module_src = generated[:5]
    if dump:
        _write(dump, "ir.txt", _format_ir(graph))
        _write(dump, "schedule.txt", _format_schedule(steps))
        _write(dump, kernels_file, module_src)
        _write(dump, "wrapper.py", wrapper.source)
    _log_artifacts(name, report, steps, module_src, wrapper.source)


def _log_artifacts(name, report, steps, module_src, wrapper_src) -> None:
    """The graph's generated code, kernels and fallbacks for ``TORCH_LOGS`` and the trace."""
    logs.emit("output_code", name, lambda: f"{module_src}\n# wrapper\n{wrapper_src}")
    if steps is not None:   # (a graph from the cache or a child has its code only)
        logs.emit("schedule", name, lambda: _format_schedule(steps))
    if report.fallbacks:
        logs.emit("perf_hints", name, lambda: "\n".join(
            f"{f.op} runs in ATen: {f.reason}" for f in report.fallbacks))


def child_answer(gm: fx.GraphModule, kind: str, config: Config) -> dict:
    """What a forked child sends back for ``gm`` (runtime/forked_compile.py): the generated
    code as a cache entry's files, the first call's kernel launches and the stage seconds, as
    JSON, and the fingerprint of the graph it compiled."""
    from .runtime import graph_cache, precompile
    name = f"graph_child_{kind}"   # the entry names its graph; loading renames it
    report = GraphReport(name, kind)
    graph, steps, kernels, wrapper, module_src, seconds = generate_code(gm, kind, config, name,
                                                                         report)
    files = graph_cache.encode(name, wrapper, module_src, kernels, report, graph)
    device = next((b.layout.device for b in graph.buffers if b.layout is not None), None)
    return {"fingerprint": graph_cache.fingerprint(gm),
            "files": {k: v.decode() for k, v in files.items()},
            "launches": [[n, x, r, precompile.encode_args(a)]
                         for n, x, r, a in precompile.launches(steps, kernels, graph.by_name)],
            "device": str(device) if device is not None else None, "seconds": seconds}


def _from_child(child, gm, name, config, report, captured) -> Optional[dict]:
    """``_finish``'s arguments for the child's answer, or None (the reason in the report's
    timings, under ``child``) when it has none or compiled another graph than ``gm``."""
    from .runtime import graph_cache, precompile
    from .runtime.compiled import CompiledGraph
    t0 = time.perf_counter()
    got = child.answer()
    try:
        if got is None:
            raise ValueError(child.reason)
        if got["fingerprint"] != graph_cache.fingerprint(gm):
            raise ValueError("AOTAutograd changed the backward graph after the partition")
        files = {k: v.encode() for k, v in got["files"].items()}
        entry = graph_cache.decode(files, name)
        # the wait and the check that the answer is this graph's: the critical path's share
        report.timings = {**captured, "child_wait": time.perf_counter() - t0,
                          **{f"in_child_{k}": v for k, v in got["seconds"].items()}}
        t1 = time.perf_counter()
        compiled = CompiledGraph(name, entry.wrapper, entry.module_src, entry.kernels, config,
                                 None, report.timings)
        jobs = precompile.jobs_for([(n, x, r, precompile.decode_args(a))
                                    for n, x, r, a in got["launches"]], compiled)
        device = torch.device(got["device"]) if got["device"] else None
    except Exception as e:  # noqa: BLE001 - whatever the reason, the graph compiles here
        captured["child"] = f"not used: {type(e).__name__}: {e}"
        return None
    graph_cache.fill_report(report, entry.report)
    report.timings["load"] = time.perf_counter() - t1
    _log_artifacts(name, report, None, entry.module_src, entry.wrapper.source)
    return {"compiled": compiled, "files": files, "jobs": jobs, "device": device}


def generate_code(gm: fx.GraphModule, kind: str, config: Config, name: str, report,
                  native: bool = False):
    """Lower, schedule and generate code for ``gm``, filling ``report``'s kernels, library
    calls and fallbacks: (graph IR, steps, kernels, wrapper, kernel module source, seconds by
    stage). ``native``: C++ for the CPU (codegen/cpp/) instead of Triton."""
    from .codegen.wrapper import WrapperGen
    from .lower.graph import GraphLowering
    from .schedule.fusion import Kernel, schedule
    if native:
        from .codegen.cpp.kernel import generate as generate_native
        from .codegen.cpp.module import translation_unit as kernel_module_source
        from .codegen.cpp.target import CppTarget as make_target
        generate = lambda step, by_name, int64: generate_native(step, by_name)  # noqa: E731
    else:
        from .codegen.module import kernel_module_source
        from .codegen.target import triton_target as make_target
        from .codegen.triton_kernel import generate

    t0, cpu0 = time.perf_counter(), time.thread_time()
    graph = GraphLowering(gm, kind, config, name, make_target()).run()
    t1 = time.perf_counter()
    steps = schedule(graph, config)
    t2 = time.perf_counter()
    int64 = _needs_int64(graph)
    kernels = {s.name: generate(s, graph.by_name, int64) for s in steps if isinstance(s, Kernel)}
    # (the C++ kernels declare their pointers restrict: no result over a buffer it reads)
    wrapper = WrapperGen(graph, steps, kernels, name, in_place=not native).generate()
    module_src = kernel_module_source(list(kernels.values()))
    t3, cpu3 = time.perf_counter(), time.thread_time()
    report.wrapper = wrapper.source
    for s in steps:
        if isinstance(s, Kernel):
            report.kernels.append(KernelReport(s.name, kernels[s.name].source, s.origins(),
                                               s.source_lines()))
        else:
            b = s.buffer
            if getattr(b, "kind", None) == "extern":
                schema = getattr(b.op, "_schema", None)
                how = f"as {schema.name}" if schema and schema.name.startswith("solder::") else ""
                report.externs.append(CallReport(b.origins[0] if b.origins else str(b.op), how))
    report.fallbacks = [CallReport(op, reason) for op, reason in graph.fallbacks]
    report.user_kernels = list(getattr(graph, "user_kernel_reports", []))
    return (graph, steps, kernels, wrapper, module_src,
            {"lower": t1 - t0, "schedule": t2 - t1, "codegen": t3 - t2,
             "cpu_lower_schedule_codegen": cpu3 - cpu0})


_LOGGED_STAGES = (("capture", "capture"), ("cache_key", "cache key"), ("lower", "lower"),
                  ("schedule", "schedule"), ("child_wait", "waiting for the child's code"),
                  ("codegen", "codegen"), ("load", "load"),
                  ("parallel_compile", "waiting for the parallel Triton compile"),
                  ("triton_compile", "first launches"), ("autotune", "tuning"),
                  ("first_call_wall", "the first call in all"))


def compile_log_line(report) -> str:
    """One line for ``log_compile``: where a graph's compile went, stage by stage."""
    t = report.timings
    kernels = t.get("kernels", len(report.kernels))
    counts = [f"{kernels} kernels"]
    if "distinct_kernels" in t:
        counts.append(f"{t['distinct_kernels']} distinct")
    if report.fallbacks:
        counts.append(f"{len(report.fallbacks)} ATen fallbacks")
    if "triton_built" in t or "triton_cached" in t:
        counts.append(f"Triton built {t.get('triton_built', 0)}, found "
                      f"{t.get('triton_cached', 0)} compiled")
    stages = ", ".join(f"{label} {1e3 * t[key]:.0f} ms" for key, label in _LOGGED_STAGES
                       if isinstance(t.get(key), float))
    return f"solder: {report.name}: {'; '.join(counts)}; {stages}; cache {t.get('cache', 'off')}"


def _compile_jobs(compiled, steps, graph):
    """(the graph's precompile jobs, its device); no jobs where there are no kernels."""
    from .runtime import precompile as pre
    device = next((b.layout.device for b in graph.buffers if b.layout is not None), None)
    if device is None or not compiled.runners:
        return [], device
    return pre.compile_jobs(compiled, steps, graph.by_name), device


def _precompile(compiled, jobs, device, config, stats, cached: bool = False) -> None:
    """Compile the graph's kernels in parallel: in the background (``overlap_compile``), the
    first call waiting for them, or right now. ``parallel_compile`` is the time spent waiting:
    the share of the compile on the critical path. ``cached``: the graph came from Solder's
    cache, so its kernels were compiled when it was stored and Triton's cache holds their
    binaries; the thread pool reads them back, and the worker processes are not asked (a GPT-2
    warm start waited 1.41 s on them for 10 cache hits)."""
    from .runtime import precompile as pre
    stats["parallel_compile"] = 0.0
    if not jobs:
        return
    threads = config.compile_threads or pre.default_threads()
    from .runtime.compile_workers import default_processes
    processes = default_processes() if config.compile_processes < 0 else config.compile_processes
    if cached:
        processes = 0
    future = pre.start(jobs, device, threads, stats, processes=processes)
    if future is None:
        return

    def wait():
        stats["parallel_compile"] = stats.get("parallel_compile", 0.0) + pre.wait_for(future)
    if config.overlap_compile:
        compiled.before_first_call.append(wait)
    else:
        wait()


def native_cpu(config: Config) -> bool:
    """Whether CPU graphs compile to C++ (``cpu_codegen`` on and a C++ compiler found)."""
    if not config.cpu_codegen:
        return False
    from .runtime.native import compiler
    return compiler() is not None


def _compile_native(gm, kind: str, config: Config, name: str, report: GraphReport, dump):
    """A CPU graph as C++ kernels (codegen/cpp/, runtime/native.py); not cached on disk yet
    beyond the compiled libraries. A kernel the target cannot write, or a failed C++ compile,
    runs the whole graph in ATen with the reason in ``solder.explain``."""
    from .codegen.cpp.kernel import Unsupported
    from .runtime.compiled import CompiledGraph
    from .runtime.native import NativeCompileError
    try:
        generated = generate_code(gm, kind, config, name, report, native=True)
        kernels, wrapper, module_src = generated[2:5]
        _show_stages(dump, name, report, generated, "kernels.cpp")
        report.timings = {**generated[5], "cache": "off (native CPU code)"}
        t0 = time.perf_counter()
        compiled = CompiledGraph(name, wrapper, module_src, kernels, config, None,
                                 report.timings, native=True)
        report.timings["load"] = time.perf_counter() - t0
    except (Unsupported, NativeCompileError) as e:
        report.kernels, report.externs = [], []
        report.fallbacks = [CallReport("whole graph", f"the native CPU target: {e}")]
        logs.log.info("%s runs in ATen: the native CPU target: %s", name, e)
        return _eager_runner(gm)
    _log_after_first_call(compiled, report, config)
    return compiled


CPU_REASON = ("its tensors are on the CPU and cpu_codegen is off: the graph runs as Dynamo "
              "captured it (options={'cpu_codegen': True} compiles CPU graphs to C++; Solder's "
              "Triton kernels run on a CPU only through Triton's interpreter, TRITON_INTERPRET=1)")
NO_COMPILER_REASON = ("its tensors are on the CPU, but no C++ compiler was found for the native "
                      "CPU target (set CXX to one)")


def _note_cpu_fallback(report: GraphReport, name: str, config: Config) -> None:
    # native_cpu() said no: cpu_codegen off, or on with no compiler found
    reason = NO_COMPILER_REASON if config.cpu_codegen else CPU_REASON
    report.fallbacks.append(CallReport("whole graph", reason))
    if config.cuda_graphs:
        report.cuda_graphs = "not replayed: its inputs are CPU tensors (the graph runs in ATen)"
    logs.say_once(
        "cpu", "Solder: %s runs in ATen, not compiled: %s. Said once; solder.explain lists "
        "each such graph.", name, reason)


def run_as_captured_on_cpu(gm: fx.GraphModule, ctx: CompileContext) -> Optional[Callable]:
    """Dynamo's graph itself, run by eager PyTorch, for a graph whose tensors are all on the
    CPU when no kernels can run there (no interpreter): at eager's speed, where AOTAutograd's
    decomposed graph run op by op was up to 6x slower (a gelu chain's ``gelu`` became nine
    ops, a softmax five); None for any other graph."""
    if ctx.config.debug_eager or _interpreting() or native_cpu(ctx.config) \
            or not _dynamo_graph_on_cpu(gm):
        return None
    name = f"graph{next(_graph_ids)}_as_captured"
    report = GraphReport(name, "as captured",
                         fx_graph_printer=lambda: gm.print_readable(print_output=False))
    ctx.graphs.append(report)
    _note_cpu_fallback(report, name, ctx.config)
    return gm.forward


def _dynamo_graph_on_cpu(gm) -> bool:
    """Every tensor of a Dynamo graph (its inputs, what each node makes, its constants) on the
    CPU, and nothing Solder handles before ATen would (a user kernel launch)."""
    if any(isinstance(n.target, torch._ops.HigherOrderOperator) for n in gm.graph.nodes):
        return False
    devices = _tensor_devices(gm, "example_value")
    devices.update(t.device.type for t in [*gm.parameters(), *gm.buffers()])
    return devices == {"cpu"}


def _tensor_devices(gm, key: str) -> set:
    """The device types of the tensors the graph's nodes carry in ``meta[key]`` (Dynamo's
    graphs: "example_value"; AOTAutograd's: "val")."""
    devices = set()
    for node in gm.graph.nodes:
        val = node.meta.get(key, node.meta.get("val"))
        for v in (val if isinstance(val, (list, tuple)) else [val]):
            if isinstance(v, torch.Tensor):
                devices.add(v.device.type)
    return devices


def _interpreting() -> bool:
    from .codegen.scalar_ops import interpreting
    return interpreting()


def _cpu_graph(gm) -> bool:
    """Only CPU tensors (a GPU graph may hold CPU scalars and index tensors: the lowering
    routes what touches them to ATen)."""
    devices = _tensor_devices(gm, "val")
    return "cpu" in devices and devices <= {"cpu", "meta"}


def _needs_int64(graph) -> bool:
    limit = 2**31 - 1
    for b in graph.buffers:
        if b.layout is None:
            continue
        try:
            span = 1 + sum((int(n) - 1) * abs(int(s)) for n, s in zip(b.layout.size, b.layout.stride))
            span += abs(int(b.layout.offset))
        except TypeError:
            return True  # symbolic sizes: any size may come
        if span >= limit:
            return True
    return False


def _eager_runner(gm):
    def run(args):
        return gm(*args)
    run._boxed_call = True
    return run


def _dump_dir(config: Config, name: str) -> Optional[str]:
    if not config.debug_dir:
        return None
    d = Path(config.debug_dir) / name
    d.mkdir(parents=True, exist_ok=True)
    return str(d)


def _write(folder: str, fname: str, text: str):
    Path(folder, fname).write_text(text)


def _format_ir(graph) -> str:
    from .ir.nodes import ComputedBuffer, ExternBuffer, InputBuffer, Reduction
    lines = []
    for b in graph.buffers:
        if isinstance(b, InputBuffer):
            lines.append(f"{b.name} = input {b.layout}")
        elif isinstance(b, ComputedBuffer):
            kind = "reduction " + b.body.reduction_type if isinstance(b.body, Reduction) else "pointwise"
            target = f" (writes into {b.mutates})" if b.mutates else ""
            lines.append(f"{b.name} = {kind} {b.layout}{target}  # {', '.join(b.origins)}")
        elif isinstance(b, ExternBuffer):
            lines.append(f"{b.name} = {b.kind} {b.origins[0] if b.origins else b.op} "
                         f"{b.layout if b.layout else ''} {b.reason}")
        else:
            lines.append(f"{b.name} = {type(b).__name__}")
    return "\n".join(lines) + "\n"


def _format_schedule(steps) -> str:
    from .schedule.fusion import Kernel
    lines = []
    for s in steps:
        if isinstance(s, Kernel):
            lines.append(f"{s.name}: x={s.xnumel} r={s.rnumel} persistent={s.persistent} "
                         f"nodes={[n.name for n in s.nodes]} stores={s.stores}")
        else:
            lines.append(f"call {s.buffer.name}")
    return "\n".join(lines) + "\n"
