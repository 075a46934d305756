"""``python -m solder conformance``: PyTorch's OpInfo database through a torch.compile backend.

Prints the counts of ops, (op, dtype, kind) cases and samples that passed, failed, failed as
expected or passed unexpectedly, and how Solder ran each op (lowered / extern / fallback);
``--json`` writes the per-op table. Exits 1 when anything failed that the expected-failure list
does not name, or a listed case passed.
"""
from __future__ import annotations

import argparse
import json
import logging
import os
import sys
import time
from typing import Optional

from ..interpreter import use_triton_interpreter
from ..cli_help import Parser


def build_parser() -> argparse.ArgumentParser:
    p = Parser(prog="python -m solder conformance", description=__doc__,
               formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--backend", default="solder",
                   help="torch.compile backend: solder (default), inductor, aot_eager, ...")
    p.add_argument("--device", choices=("cpu", "cuda"), default=None,
                   help="default: cuda when available, else cpu (Triton's interpreter)")
    p.add_argument("--dtypes", default=None,
                   help="comma-separated; default float32 on cpu, "
                        "float32,float16,bfloat16,int64,bool on cuda")
    p.add_argument("--ops", default=None,
                   help="comma-separated OpInfo names (name or name.variant) or globs ('masked.*'); "
                        "default: all")
    p.add_argument("--ci", action="store_true",
                   help="the CI subset: its fixed op list with 2 samples each (unless --ops / "
                        "--samples say otherwise)")
    p.add_argument("--samples", type=int, default=None,
                   help="first N samples per (op, dtype, kind); default: all")
    p.add_argument("--grad", action=argparse.BooleanOptionalAction, default=True,
                   help="check gradients (default: on)")
    p.add_argument("--json", metavar="OUT", default=None, help="write the per-op table here")
    p.add_argument("--expected-failures", metavar="FILE", default=None,
                   help="default: solder/conformance/expected_failures/<backend>-<device>.txt")
    p.add_argument("--write-expected-failures", action="store_true",
                   help="rewrite the expected-failure file from this run (keeps reasons)")
    p.add_argument("--timeout", type=float, default=120.0,
                   help="seconds per sample, compile included (0: none; default 120)")
    p.add_argument("--jobs", type=int, default=None,
                   help="worker processes, 1 or more (a crash then costs one op, not the run); "
                        "default: run in this process")
    p.add_argument("--op-timeout", type=float, default=7200.0,
                   help="with --jobs: seconds one op may take before its worker is killed "
                        "(for hangs the per-sample limit cannot interrupt; default 7200)")
    p.add_argument("--deadline", type=float, default=0.0,
                   help="with --jobs: seconds after which no more ops are run (running ones are "
                        "killed) and what finished is reported; the ops not run are named and "
                        "the exit code is 1 (default 0: none)")
    p.add_argument("--explain", action=argparse.BooleanOptionalAction, default=True,
                   help="classify ops as lowered / extern / fallback: Solder's with solder.explain, "
                        "inductor's from the wrapper code it generates (default on)")
    p.add_argument("--shard", metavar="I/N", default=None,
                   help="only the I-th of N interleaved parts of the selected ops (1 <= I <= N): "
                        "a long run split over several invocations; --write-expected-failures then "
                        "keeps what other shards listed")
    p.add_argument("-q", "--quiet", action="store_true", help="no line per op")
    return p


def shard(ops: list, spec: str | None) -> list:
    """``ops[i-1::n]`` for ``spec`` "i/n"; raises ValueError on a malformed spec."""
    if spec is None:
        return ops
    from ..cli_help import interleaved_part
    return interleaved_part(ops, spec, "--shard")


def main(argv: Optional[list[str]] = None) -> int:
    args = build_parser().parse_args(argv)
    if args.deadline and not (args.jobs and args.jobs >= 1):
        print("error: --deadline needs --jobs", file=sys.stderr)
        return 2
    import torch  # does not import triton; torch._dynamo (imported below) does

    device = args.device or ("cuda" if torch.cuda.is_available() else "cpu")
    # one op's graphs have a few kernels each: compile worker processes (one per core, per
    # process) would cost more to start than they save, times --jobs processes
    os.environ.setdefault("SOLDER_COMPILE_PROCESSES", "0")
    if device == "cpu":
        use_triton_interpreter("conformance", argv)

    # Graph breaks are expected (data-dependent ops) and counted per sample; their warnings
    # would bury the report.
    logging.getLogger("torch").setLevel(logging.CRITICAL)

    from . import expected as expected_mod
    from .results import summarize, table
    from .runner import RunConfig, run_suite
    from .selection import CI_OPS, parse_dtypes, select_ops

    names = [n.strip() for n in args.ops.split(",") if n.strip()] if args.ops else None
    if args.ci and names is None:
        names = list(CI_OPS)
    samples = args.samples if args.samples is not None else (2 if args.ci else None)
    try:
        ops = shard(select_ops(names), args.shard)
        dtypes = tuple(parse_dtypes(args.dtypes, device))
    except (KeyError, ValueError) as err:
        print(f"error: {err.args[0]}", file=sys.stderr)
        return 2
    try:
        from torch._dynamo.backends.registry import lookup_backend
        lookup_backend(args.backend)
    except Exception as err:  # noqa: BLE001 - say so once instead of failing every sample
        print(f"error: backend {args.backend!r} is not available: {err}", file=sys.stderr)
        return 2
    xfail_path = args.expected_failures or expected_mod.path_for(args.backend, device)
    expected = expected_mod.load(xfail_path)
    config = RunConfig(backend=args.backend, device=device, dtypes=dtypes, samples=samples,
                       expected_failures=frozenset(expected), grad=args.grad,
                       timeout_s=args.timeout, explain=args.explain)

    print(f"OpInfo conformance: backend {args.backend}, device {device}, dtypes "
          f"{','.join(dtypes)}, {len(ops)} ops{f' (shard {args.shard})' if args.shard else ''}, "
          f"samples per case: {samples or 'all'}, "
          f"gradients: {'on' if args.grad else 'off'}, expected failures: {xfail_path} "
          f"({len(expected)} listed)", flush=True)
    progress = None if args.quiet else _progress_printer(len(ops))
    start = time.perf_counter()
    not_run: list[str] = []
    if args.jobs is not None and args.jobs >= 1:
        from .parallel import run_parallel
        results, not_run = run_parallel(
            _names(ops), config, args.jobs, hard_limit_s=args.op_timeout,
            progress=progress and (lambda r: progress(_applied(r, expected))),
            deadline_s=args.deadline)
        for r in results:
            _applied(r, expected)
    else:
        results = run_suite(ops, config, expected, progress)
    seconds = time.perf_counter() - start

    summary = summarize(results)
    _print_summary(summary, results, seconds, args.backend)
    if not_run:
        print(f"\n{len(not_run)} ops not run (past the --deadline of {args.deadline:g} s): "
              f"{', '.join(not_run)}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"backend": args.backend, "device": device, "dtypes": list(dtypes),
                       "shard": args.shard, "not_run": not_run,
                       "samples": samples, "grad": args.grad, "seconds": round(seconds, 1),
                       "torch": torch.__version__, "summary": summary,
                       "ops": table(results)}, f, indent=1)
        print(f"per-op table written to {args.json}")
    if args.write_expected_failures:
        cases = [c for r in results for c in r.cases]
        new = expected_mod.regenerate(expected, cases)
        expected_mod.write(xfail_path, new, args.backend, device)
        print(f"expected failures written to {xfail_path}: {len(new)} entries "
              f"(was {len(expected)})")
        return 1 if not_run else 0
    bad = summary["cases"]["failed"] + summary["cases"]["unexpectedly-passed"] + len(not_run)
    return 1 if bad else 0


def _names(ops) -> list[str]:
    from .selection import full_name
    return [full_name(op) for op in ops]


def _applied(result, expected):
    for case in result.cases:
        case.apply_expected(expected)
    return result


def _progress_printer(total: int):
    done = 0

    def show(result) -> None:
        nonlocal done
        done += 1
        marks = " ".join(f"{c.dtype}/{c.kind}:{_SHORT[c.outcome]}" for c in result.cases)
        seconds = sum(c.seconds for c in result.cases)
        lowering = "" if result.lowering == "unknown" else f" [{result.lowering}]"
        print(f"[{done:>4}/{total}] {result.op:<44} {result.outcome:<19} {seconds:7.1f}s "
              f"{marks}{lowering}", flush=True)
    return show


_SHORT = {"passed": "ok", "failed": "FAIL", "expected-failed": "xfail",
          "unexpectedly-passed": "XPASS", "n/a": "n/a"}


def _print_summary(summary: dict, results, seconds: float, backend: str) -> None:
    print(f"\n{len(results)} ops in {seconds:.0f} s")
    for what in ("ops", "cases", "samples"):
        counts = "  ".join(f"{k} {v}" for k, v in summary[what].items())
        print(f"  {what + ':':<9} {counts}")
    if backend in ("solder", "inductor"):
        low = "  ".join(f"{k} {v}" for k, v in sorted(summary["lowering"].items()))
        source = "solder.explain" if backend == "solder" else "inductor's generated wrappers"
        print(f"  {'lowering:':<9} {low}   (ops, from {source})")
    failed = [c for r in results for c in r.cases if c.outcome == "failed"]
    xpassed = [c for r in results for c in r.cases if c.outcome == "unexpectedly-passed"]
    if failed:
        print(f"\nfailures not in the expected-failure list ({len(failed)}):")
        for c in failed:
            print(f"  {c.op} {c.dtype} {c.kind}: {c.first_failure()[:400]}")
    if xpassed:
        print(f"\nlisted as expected failures but passed ({len(xpassed)}): remove them "
              f"(--write-expected-failures does)")
        for c in xpassed:
            print(f"  {c.op} {c.dtype} {c.kind}  ({c.outcome}; listed: {c.expected_reason})")
