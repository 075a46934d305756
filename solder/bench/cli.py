"""``python -m solder bench``: eager, inductor and Solder side by side in one process.

    python -m solder bench [--cases a,b] [--backends eager,inductor,solder] [--json out.json]
                           [--device cuda|cpu] [--quick] [--warmup MS] [--rep MS] [--rounds N] [--list]

Progress goes to stderr as cases run; the tables go to stdout at the end, the same results to
--json. Without a GPU the run is --quick (toy sizes, kernels in Triton's interpreter, CPU
clock); it is a smoke test, not a measurement. ``--device cpu`` measures the CPU paths instead
(eager's CPU kernels, inductor's C++, Solder's) at mid sizes, the interpreter off. Exit status: 0, or 1 when some backend gave a
wrong result or raised, 2 for bad arguments.
"""
from __future__ import annotations

import argparse
import contextlib
import os
import shutil
import sys
import tempfile
import warnings
from typing import Iterator, Optional

from ..cli_help import Parser

DEFAULT_BACKENDS = "eager,inductor,solder"


def parse_args(argv: list[str]) -> argparse.Namespace:
    p = Parser(prog="python -m solder bench",
               description="eager, inductor and Solder side by side")
    p.add_argument("--cases", default="", help="comma-separated case names (default: all)")
    p.add_argument("--backends", default=DEFAULT_BACKENDS,
                   help="comma-separated: eager, inductor, solder, solder-ro and inductor-ro "
                        "(mode=\"reduce-overhead\": CUDA graphs), solder-native (CPU graphs "
                        "as C++) and solder-aten (CPU graphs as Dynamo captured them, in "
                        "ATen: Solder's default there), or any Dynamo backend name; a suffix -dyn "
                        "compiles with dynamic=True (solder-dyn, inductor-dyn)")
    p.add_argument("--json", metavar="PATH", help="also write the results here as JSON")
    p.add_argument("--device", choices=("cuda", "cpu"), default=None,
                   help="cuda (the default with a GPU) or cpu: eager's CPU kernels against "
                        "the compilers' CPU paths at mid sizes, Triton's interpreter off "
                        "(without a GPU and without --device the run is --quick instead)")
    p.add_argument("--quick", action="store_true",
                   help="toy sizes of every case (implied without a GPU)")
    p.add_argument("--warmup", type=float, default=None, help="warm-up per timing, ms")
    p.add_argument("--rep", type=float, default=None, help="timed repetitions per timing, ms")
    p.add_argument("--rounds", type=int, default=None,
                   help="steady-state timings per backend, interleaved across backends; the "
                        "table gives their median and spread (default 5 on a GPU, where host "
                        "speed drifts over seconds; 1 without)")
    p.add_argument("--list", action="store_true", help="list the cases and exit")
    p.add_argument("--suite", choices=("dashboard",), default=None,
                   help="the model dashboard's cases (solder/bench/suite.py: torchvision, timm "
                        "and transformers models, inference and training) instead of the "
                        "benchmark's; merge runs with python -m solder.bench.dashboard")
    p.add_argument("--family", choices=("torchvision", "timm", "transformers"), default="",
                   help="with --suite: one family only")
    p.add_argument("--mode", choices=("inference", "training"), default="",
                   help="with --suite: one mode only")
    p.add_argument("--part", default="",
                   help="with --suite: the k-th of n interleaved slices (k/n), for runs that "
                        "must fit a time limit")
    return p.parse_args(argv)


def cold_cache_variables(scratch: str) -> dict:
    """Environment variables for compiles with no cache to find: inductor's caches forced off
    (for its compile workers too) and empty cache folders under ``scratch`` for inductor and
    for Triton's binaries."""
    return {"TORCHINDUCTOR_FORCE_DISABLE_CACHES": "1",
            "TORCHINDUCTOR_CACHE_DIR": os.path.join(scratch, "inductor"),
            "TRITON_CACHE_DIR": os.path.join(scratch, "triton")}


@contextlib.contextmanager
def cold_cache_environment(device_type: str, interpret: bool = True) -> Iterator[None]:
    """Cold compiles for the run, everything restored afterwards: PyTorch's compile caches
    forced off (``torch.compiler.config.force_disable_caches``, which Inductor obeys; the
    environment variable TORCHINDUCTOR_FORCE_DISABLE_CACHES too, for compile workers), and
    fresh, empty cache folders for Inductor and Triton so that no kernel binary from an earlier
    run is reused. Without a GPU, Triton runs interpreted."""
    import torch

    scratch = tempfile.mkdtemp(prefix="solder-bench-")
    changes = cold_cache_variables(scratch)
    if device_type != "cuda" and interpret:
        changes["TRITON_INTERPRET"] = os.environ.get("TRITON_INTERPRET", "1")
    saved = {k: os.environ.get(k) for k in changes}
    os.environ.update(changes)
    try:
        with _caches_off(torch), warnings.catch_warnings():
            # Dynamo warns at every compile that this setting turns its profile cache off.
            warnings.filterwarnings("ignore", message=".*force_disable_caches")
            yield
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
        shutil.rmtree(scratch, ignore_errors=True)


def _caches_off(torch):
    config = getattr(torch.compiler, "config", None)
    if config is None or not hasattr(config, "force_disable_caches"):  # older torch: env only
        return contextlib.nullcontext()
    return config.patch(force_disable_caches=True)


def _log(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def _select(cases, wanted: str):
    if not wanted:
        return cases, []
    by_name = {c.name: c for c in cases}
    names = [n.strip() for n in wanted.split(",") if n.strip()]
    return [by_name[n] for n in names if n in by_name], [n for n in names if n not in by_name]


def _meta(device, quick: bool, warmup: float, rep: float, rounds: int) -> dict:
    import torch
    try:
        import triton
        triton_version: Optional[str] = triton.__version__
    except ImportError:
        triton_version = None
    name = torch.cuda.get_device_name(device) if device.type == "cuda" else "cpu"
    return {"device": name, "torch": torch.__version__, "triton": triton_version,
            "python": sys.version.split()[0], "quick": quick, "warmup_ms": warmup,
            "rep_ms": rep, "rounds": rounds,
            "timer": "triton.testing.do_bench median" if device.type == "cuda"
            else "time.perf_counter median"}


def main(argv: Optional[list[str]] = None) -> int:
    args = parse_args(list(sys.argv[1:] if argv is None else argv))
    import torch

    from solder.bench.cases import all_cases
    from solder.bench.report import RunResult, format_report
    from solder.bench.runner import Settings, run_case, warm_up_process
    from solder.bench.timing import copy_ceiling

    universe = all_cases()
    if args.suite:
        from solder.bench.suite import dashboard_cases, part_of
        universe = dashboard_cases(args.family, args.mode)
        if args.part:
            try:
                universe = part_of(universe, args.part)
            except ValueError as e:
                _log(str(e))
                return 2
    cases, unknown = _select(universe, args.cases)
    if args.list:
        for c in cases:
            print(f"{c.name:<20} {c.description}")
        return 0
    if unknown:
        _log(f"unknown case(s): {', '.join(unknown)}; see --list")
        return 2
    backends = [b.strip() for b in args.backends.split(",") if b.strip()]
    if not backends:
        _log("no backends given")
        return 2

    if args.device == "cuda" and not torch.cuda.is_available():
        _log("--device cuda: no GPU here")
        return 2
    device = torch.device(args.device or ("cuda" if torch.cuda.is_available() else "cpu"))
    native_cpu = args.device == "cpu" and not args.quick
    if native_cpu and os.environ.get("TRITON_INTERPRET") == "1":
        _log("--device cpu measures the CPU paths: run it without TRITON_INTERPRET=1")
        return 2
    quick = args.quick or (device.type != "cuda" and not native_cpu)
    if quick and not args.quick:
        _log("no GPU: running --quick (toy sizes; a smoke test, not a measurement)")
    warmup = args.warmup if args.warmup is not None else (2 if quick else 25)
    rep = args.rep if args.rep is not None else (10 if quick else 100)
    rounds = args.rounds if args.rounds is not None else (1 if quick else 5)
    if rounds < 1:
        _log("--rounds must be at least 1")
        return 2
    settings = Settings(device, quick, warmup, rep, rounds)

    with cold_cache_environment(device.type, interpret=not native_cpu):
        torch.manual_seed(0)
        _log(f"copy ceiling on {device.type} ...")
        ceiling = copy_ceiling(device, 2**30 if device.type == "cuda" else 2**26, warmup, rep)
        _log(f"  {ceiling['gbs']:.0f} GB/s")
        run = RunResult(_meta(device, quick, warmup, rep, rounds), ceiling, backends=backends)
        _log("warming up the compilers on a trivial function ...")
        warm_up_process(backends, device, _log)
        for i, case in enumerate(cases, 1):
            # a case's description gives its full sizes: a quick run says it runs others
            what = ("toy sizes (--quick)" if quick else
                    "CPU sizes (--device cpu)" if native_cpu else case.description)
            _log(f"[{i}/{len(cases)}] {case.name}: {what}")
            torch.manual_seed(0)
            run.cases.append(run_case(case, backends, settings, _log))
            if args.json:   # after every case: a run cut off keeps what it measured
                with open(args.json, "w") as f:
                    f.write(run.to_json() + "\n")

    print(format_report(run))
    if args.json:
        with open(args.json, "w") as f:
            f.write(run.to_json() + "\n")
        _log(f"wrote {args.json}")
    return 1 if run.any_wrong() else 0


if __name__ == "__main__":
    sys.exit(main())
