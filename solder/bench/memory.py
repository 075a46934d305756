"""``python -m solder.bench.memory CASE [--backends inductor,solder]``: where a step's peak GPU
memory goes, per backend.

One steady-state call of the case is recorded with PyTorch's allocator history
(``torch.cuda.memory._record_memory_history``); the trace is replayed to find the moment of
peak memory, and the allocations alive then are grouped by the line that made them: a line of
a Solder wrapper (``<solder graphN_kind wrapper>``, with the wrapper's own text), or the first frame
outside torch for eager's and inductor's. What was allocated before the call (weights, inputs)
is counted apart as resident. Issue 38's question, per buffer: which of ours are alive at the
peak that inductor's are not.

With ``--device cpu`` the same question is asked of the CPU allocator through the profiler
(``profile_memory=True``): its allocation events carry the running total, and each is grouped by
the innermost Python function and the ATen op that made it (the profiler knows a frame's
function, not its current line). Solder's native CPU target and inductor's C++ make the same
partitioning and buffer decisions as on a GPU, so a small CPU step shows where a training step's
memory goes without a GPU (the library calls differ: oneDNN's workspaces are not cuDNN's)."""
from __future__ import annotations

import collections
import inspect
import re
from typing import Iterable, Optional

import torch

from ..cli_help import Parser


def peak_of(trace: Iterable[dict]) -> tuple[int, dict]:
    """(peak bytes above the start, {address: (size, frames)} alive at the peak) from one
    device's allocator trace (``_snapshot()["device_traces"][d]``): allocations add, frees
    (``free_requested``; a block freed before the recording began is ignored) subtract."""
    live: dict = {}
    now = peak = 0
    at_peak: dict = {}
    for e in trace:
        action = e.get("action")
        if action == "alloc":
            live[e["addr"]] = (e["size"], e.get("frames") or [])
            now += e["size"]
            if now > peak:
                peak, at_peak = now, dict(live)
        elif action == "free_requested" and e["addr"] in live:
            now -= live.pop(e["addr"])[0]
    return peak, at_peak


def group_key(frames: list, sources: Optional[dict] = None) -> str:
    """Where an allocation was made: the innermost frame of a Solder wrapper (with its source
    line), else the innermost frame outside torch and Python's own files."""
    for f in frames:
        name = f.get("filename", "")
        if name.startswith("<solder graph") and name.endswith(" wrapper>"):
            graph = name[len("<solder "):-len(" wrapper>")]
            text = ""
            if sources and graph in sources:
                lines = sources[graph].splitlines()
                if 0 < f.get("line", 0) <= len(lines):
                    text = ": " + lines[f["line"] - 1].strip()
            return f"{graph} line {f.get('line')}{text}"
    for f in frames:
        name = f.get("filename", "")
        if name and "/torch/" not in name and not name.startswith("<") and "??" not in name:
            return f"{name.rsplit('/', 1)[-1]}:{f.get('line')} in {f.get('name')}"
    return "(no Python frame)"


def summarize(live: dict, sources: Optional[dict] = None, top: int = 15,
              key=group_key) -> list[str]:
    by = collections.Counter()
    count = collections.Counter()
    for size, frames in live.values():
        k = key(frames, sources)
        by[k] += size
        count[k] += 1
    return [f"{size / 2**20:9.1f} MiB  x{count[k]:<4} {k[:150]}" for k, size in by.most_common(top)]


def record_one_call(step, device) -> tuple[int, int, dict]:
    """(resident bytes before, peak bytes above them, allocations alive at the peak) of
    ``step()``."""
    torch.cuda.synchronize(device)
    resident = torch.cuda.memory_allocated(device)
    torch.cuda.memory._record_memory_history(max_entries=1_000_000)
    try:
        out = step()
        torch.cuda.synchronize(device)
        del out
        snap = torch.cuda.memory._snapshot()
    finally:
        torch.cuda.memory._record_memory_history(enabled=None)
    trace = snap["device_traces"][device.index or 0]
    peak, live = peak_of(trace)
    return resident, peak, live


def cpu_allocations(step) -> tuple[int, dict]:
    """(peak bytes above the start, {address: (size, frames)} alive at the peak) of ``step()``
    on the CPU, from the profiler's allocation events; a frame is {"filename", "line", "name"},
    the ATen op that allocated first (its filename "aten")."""
    from torch._C._profiler import _EventType
    from torch.profiler import ProfilerActivity, profile

    with profile(activities=[ProfilerActivity.CPU], profile_memory=True, with_stack=True) as prof:
        out = step()
        del out
    events = []
    stack = list(prof.profiler.kineto_results.experimental_event_tree())
    while stack:
        node = stack.pop()
        stack.extend(node.children)
        if node.tag == _EventType.Allocation:
            events.append((node.start_time_ns, node))
    events.sort(key=lambda e: e[0])
    trace = []
    for _, node in events:
        size = node.extra_fields.alloc_size
        trace.append({"action": "alloc" if size > 0 else "free_requested",
                      "addr": node.extra_fields.ptr, "size": abs(size),
                      "frames": _frames_of(node) if size > 0 else []})
    return peak_of(trace)


def _frames_of(node) -> list:
    from torch._C._profiler import _EventType

    frames = []
    parent = node.parent
    while parent is not None:
        if parent.tag == _EventType.PyCall:
            # "<solder graph0_forward wrapper>(1): call" or "/path/file.py(12): fn"
            m = re.match(r"(.*)\((\d+)\): (.*)$", parent.name)
            if m:
                frames.append({"filename": m.group(1), "line": int(m.group(2)),
                               "name": m.group(3)})
        elif not frames:
            frames.append({"filename": "aten", "line": 0, "name": parent.name})
        parent = parent.parent
    return frames


def cpu_group_key(frames: list, sources: Optional[dict] = None) -> str:
    op = next((f["name"] for f in frames if f["filename"] == "aten"), "")
    where = group_key([f for f in frames if f["filename"] != "aten"])
    if " line " in where and where.startswith("graph"):
        where = where.split(" line ")[0]   # a wrapper's def line says nothing on the CPU
    return f"{where} {op}".strip()


def main(argv=None) -> int:
    p = Parser(prog="python -m solder.bench.memory")
    p.add_argument("case")
    p.add_argument("--backends", default="inductor,solder")
    p.add_argument("--top", type=int, default=15)
    p.add_argument("--device", default="cuda", choices=("cuda", "cpu"))
    p.add_argument("--gpu-size", action="store_true",
                   help="on the CPU, build the case at its GPU size (resnet50_train, vit_train, "
                        "llama_train)")
    args = p.parse_args(argv)
    if args.device == "cuda" and not torch.cuda.is_available():
        print("python -m solder.bench.memory needs a CUDA device (it reads the allocator's "
              "history)")
        return 2
    import solder  # noqa: F401  (registers the backend)
    from solder.bench.cases import all_cases
    from solder.bench.runner import compile_for
    case = next((c for c in all_cases() if c.name == args.case), None)
    if case is None:
        print(f"unknown case {args.case!r}")
        return 2
    on_cpu = args.device == "cpu"
    device = torch.device("cpu") if on_cpu else torch.device("cuda", torch.cuda.current_device())
    if args.gpu_size:
        if "gpu_size" not in inspect.signature(case.build).parameters:
            print(f"--gpu-size: the case {args.case!r} has one size on the CPU")
            return 2
        work = case.build(device, False, gpu_size=True)
    else:
        work = case.build(device, False)
    for backend in [b.strip() for b in args.backends.split(",") if b.strip()]:
        torch._dynamo.reset()
        reports: list = []
        f = work.fn if backend == "eager" else compile_for(work.fn, backend, reports)
        for _ in range(2):   # compile, tune, settle the allocator
            work.step(f)
        if on_cpu:
            peak, live = cpu_allocations(lambda: work.step(f))
            print(f"== {args.case} / {backend} (cpu): peak {peak / 2**20:.2f} MiB above the "
                  "start of the call; alive at the peak, by where allocated:")
            print("\n".join(summarize(live, None, args.top, cpu_group_key)))
        else:
            resident, peak, live = record_one_call(lambda: work.step(f), device)
            sources = {g.name: g.wrapper for ctx in reports for g in ctx.graphs if g.wrapper}
            print(f"== {args.case} / {backend}: peak {peak / 2**20:.1f} MiB above "
                  f"{resident / 2**20:.1f} MiB resident; alive at the peak, by where allocated:")
            print("\n".join(summarize(live, sources, args.top)))
            torch.cuda.empty_cache()
        del f
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
