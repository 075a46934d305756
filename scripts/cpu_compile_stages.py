"""Where a real-size model's compile goes, on a machine without a GPU.

Builds a bench case at its full size on the CPU and compiles it with Solder under Triton's
interpreter, stopping at the first call (the interpreter would take minutes to run it): what is
timed is Dynamo, capture and Solder's own stages, which are the same code on either device.
Prints the wall seconds up to the first call and each graph's stage timings (Solder's own:
cache key, lower, schedule, codegen, load, waiting for a forked child); with ``--profile``
also a cProfile of the compile (sorted by own time), with ``--dump DIR`` the generated code of
each graph, to compare two versions byte for byte.

    TRITON_INTERPRET=1 python scripts/cpu_compile_stages.py llama_train [--reps 3]
        [--profile N] [--dump DIR] [--set FIELD=VALUE ...]
    # a warm start: one process writes the cache entries, the next one reads them
    SOLDER_CACHE=1 SOLDER_CACHE_DIR=/tmp/c python scripts/cpu_compile_stages.py gpt2 --store
    SOLDER_CACHE=1 SOLDER_CACHE_DIR=/tmp/c python scripts/cpu_compile_stages.py gpt2

Cases: gpt2, llama_train, resnet50 (transformers' ResNet-50: torchvision needs a GPU build
of torch here), bert_train, vit, convnext.
"""
from __future__ import annotations

import argparse
import os
import sys
import time

os.environ.setdefault("TRITON_INTERPRET", "1")
os.environ.setdefault("SOLDER_CACHE", "0")

import torch  # noqa: E402


class StopAtFirstCall(Exception):
    pass


def _hf_resnet50(device, quick):
    from transformers import ResNetConfig, ResNetForImageClassification
    from solder.bench.cases import Workload
    torch.manual_seed(0)
    config = (ResNetConfig(embedding_size=8, hidden_sizes=[8, 16], depths=[1, 1])
              if quick else ResNetConfig())   # ResNet-50
    model = ResNetForImageClassification(config).to(device).eval()
    x = (torch.randn(2, 3, 32, 32) if quick else torch.randn(32, 3, 224, 224)).to(device)

    def forward(x):
        return model(pixel_values=x).logits
    return Workload(forward, (x,))


def build(case: str, quick: bool = False):
    if case == "resnet50":
        return _hf_resnet50(torch.device("cpu"), quick)
    from solder.bench.cases import all_cases
    return next(c for c in all_cases() if c.name == case).build(torch.device("cpu"), quick)


def compile_once(work, options: dict, dump: str | None, store: bool = False):
    """(wall seconds up to the first call, the graphs' reports). ``store``: at the first call,
    write each graph's cache entry as its first call would (with no launch configs chosen)."""
    import solder
    from solder.backend import backend_for
    from solder.config import resolve
    from solder.pipeline import CompileContext
    from solder.runtime.compiled import CompiledGraph
    torch._dynamo.reset()
    if dump:
        options = {**options, "debug_dir": dump}
    ctx = CompileContext(resolve(options))
    solder_backend = backend_for(options, ctx)
    spans = []   # (start, end) of each backend call: Dynamo's own time is the rest

    def backend(gm, example_inputs, **kwargs):
        t = time.perf_counter()
        try:
            return solder_backend(gm, example_inputs, **kwargs)
        finally:
            spans.append((t, time.perf_counter()))
    fn = torch.compile(work.fn, backend=backend)

    made = []

    def stop(self, *args):
        for graph in made if store else ():
            hooks, graph.after_first_call = graph.after_first_call, []
            for hook in hooks:
                hook()
        raise StopAtFirstCall

    def init(self, *args, **kwargs):
        real_init(self, *args, **kwargs)
        made.append(self)
    real_call, CompiledGraph.__call__ = CompiledGraph.__call__, stop
    real_init, CompiledGraph.__init__ = CompiledGraph.__init__, init
    t0 = time.perf_counter()
    try:
        work.step(fn)
    except StopAtFirstCall:
        pass
    finally:
        CompiledGraph.__call__, CompiledGraph.__init__ = real_call, real_init
    del solder
    wall = time.perf_counter() - t0
    in_backend = sum(b - a for a, b in spans)
    ctx.graphs[0].timings["outside_backend"] = wall - in_backend   # Dynamo's own (and Python's)
    return wall, ctx.graphs


def _options(settings: list[str]) -> dict:
    out = {}
    for s in settings:
        field, _, value = s.partition("=")
        out[field] = {"1": True, "0": False}.get(value, value)
    return out


def main(argv=None) -> int:
    p = argparse.ArgumentParser()
    p.add_argument("case")
    p.add_argument("--reps", type=int, default=1)
    p.add_argument("--quick", action="store_true", help="the case's toy size (a smoke test)")
    p.add_argument("--profile", type=int, metavar="N", help="cProfile the last rep, top N")
    p.add_argument("--dump", metavar="DIR", help="the generated code of each graph, in DIR")
    p.add_argument("--store", action="store_true",
                   help="with SOLDER_CACHE=1: write the cache entries, for a warm start in the "
                        "next process")
    p.add_argument("--set", action="append", default=[], metavar="FIELD=VALUE",
                   help="a solder.config.Config field for this compile")
    args = p.parse_args(argv)
    work = build(args.case, args.quick)
    options = _options(args.set)
    compile_once(work, options, None)   # imports, first-use caches: the bench warms up too
    for rep in range(args.reps):
        prof = None
        if args.profile and rep == args.reps - 1:
            import cProfile
            prof = cProfile.Profile()
            prof.enable()
        wall, graphs = compile_once(work, options, args.dump if rep == args.reps - 1 else None,
                                    args.store)
        if prof is not None:
            prof.disable()
        stages = {}
        for g in graphs:
            for k, v in g.timings.items():
                if isinstance(v, float) and not k.startswith("in_child"):
                    stages[k] = stages.get(k, 0.0) + v
        own = sum(stages.get(k, 0.0) for k in ("cache_key", "lower", "schedule", "codegen",
                                                "load", "child_wait"))
        text = " ".join(f"{k}={v:.3f}" for k, v in stages.items() if v >= 0.0005)
        print(f"{args.case} rep {rep}: {wall:.2f} s to the first call; solder own {own:.3f}; "
              f"{text}", flush=True)
        for g in graphs:
            print(f"    {g.name}: " + " ".join(
                f"{k}={v:.3f}" if isinstance(v, float) else f"{k}={v}"
                for k, v in g.timings.items()), flush=True)
        if prof is not None:
            import pstats
            (prof.dump_stats(os.environ["PROF_DUMP"]) if os.environ.get("PROF_DUMP") else None) or pstats.Stats(prof, stream=sys.stdout).sort_stats(os.environ.get("PROF_SORT", "tottime")).print_stats(args.profile)
    return 0


if __name__ == "__main__":
    sys.exit(main())
