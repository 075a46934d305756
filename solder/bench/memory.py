"""``python -m solder.bench.memory CASE [--backends inductor,solder]``: where a step's peak GPU
memory goes, per backend.

One steady-state call of the case is recorded with PyTorch's allocator history
(``torch.cuda.memory._record_memory_history``); the trace is replayed to find the moment of
peak memory, and the allocations alive then are grouped by the line that made them: a line of
a Solder wrapper (``<solder graphN_kind wrapper>``, with the wrapper's own text), or the first frame
outside torch for eager's and inductor's. What was allocated before the call (weights, inputs)
is counted apart as resident. Issue 38's question, per buffer: which of ours are alive at the
peak that inductor's are not."""
from __future__ import annotations

import collections
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


def summarize(live: dict, sources: Optional[dict] = None, top: int = 15) -> list[str]:
    by = collections.Counter()
    count = collections.Counter()
    for size, frames in live.values():
        k = group_key(frames, sources)
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


def main(argv=None) -> int:
    p = Parser(prog="python -m solder.bench.memory")
    p.add_argument("case")
    p.add_argument("--backends", default="inductor,solder")
    p.add_argument("--top", type=int, default=15)
    args = p.parse_args(argv)
    if not torch.cuda.is_available():
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
    device = torch.device("cuda", torch.cuda.current_device())
    work = case.build(device, False)
    for backend in [b.strip() for b in args.backends.split(",") if b.strip()]:
        torch._dynamo.reset()
        reports: list = []
        f = work.fn if backend == "eager" else compile_for(work.fn, backend, reports)
        for _ in range(2):   # compile, tune, settle the allocator
            work.step(f)
        resident, peak, live = record_one_call(lambda: work.step(f), device)
        sources = {g.name: g.wrapper for ctx in reports for g in ctx.graphs if g.wrapper}
        print(f"== {args.case} / {backend}: peak {peak / 2**20:.1f} MiB above "
              f"{resident / 2**20:.1f} MiB resident; alive at the peak, by where allocated:")
        print("\n".join(summarize(live, sources, args.top)))
        del f
        torch.cuda.empty_cache()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
