"""Cold compiles, each in a fresh process: ``python -m solder.bench.compile_time``.

``python -m solder bench`` times every backend's cold compile in one process, one case after
another, inductor's right before Solder's. What ran before then changes the figure: on the H200
(2026-12-04) Solder's LLaMA-step compile took 20.1 s there and 10.7-14.8 s in fresh processes.
This command starts a new process for each (case, backend, repetition), with every compile cache
off and empty, after the bench's warm-up compile (imports and worker pools up, as in
``solder.bench.profile --compile``), and alternates which backend goes first from one repetition
to the next. It prints each case's median seconds per backend and Solder's over inductor's.

    python -m solder.bench.compile_time --cases resnet50,llama_train --reps 3 [--json out.json]
        [--variant early=compile_backward_early=1]   # also Solder with a setting changed
"""
from __future__ import annotations

import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from typing import Callable, Optional

from ..cli_help import Parser

_FIRST_CALL = re.compile(r" / (\w+) compile: ([0-9.]+) s for the first call")


def parse_seconds(output: str, backend: str) -> Optional[float]:
    """The first-call seconds that ``solder.bench.profile --compile`` printed for ``backend``."""
    for line in output.splitlines():
        m = _FIRST_CALL.search(line)
        if m and m.group(1) == backend:
            return float(m.group(2))
    return None


def cold_environment(scratch: str) -> dict:
    """Every compile cache off and empty: the bench's (inductor's, Triton's) and Solder's."""
    from .cli import cold_cache_variables
    return {**cold_cache_variables(scratch), "SOLDER_CACHE": "0"}


def parse_variant(text: str) -> tuple[str, dict]:
    """``NAME=FIELD=VALUE[,FIELD=VALUE]``: a column that runs Solder with those config fields
    set (through their ``SOLDER_<FIELD>`` variables); (name, environment)."""
    from solder.config import Config
    name, _, settings = text.partition("=")
    fields = {f.lower() for f in Config.__dataclass_fields__}
    env = {}
    for setting in filter(None, settings.split(",")):
        field, eq, value = setting.partition("=")
        if not eq or field.strip().lower() not in fields:
            raise ValueError(f"--variant {text!r}: {setting!r} is not FIELD=VALUE with a field "
                             f"of solder.config.Config")
        env["SOLDER_" + field.strip().upper()] = value.strip()
    if not name.strip() or name.strip() in ("solder", "inductor", "eager") or not env:
        raise ValueError(f"--variant {text!r}: give a new column name and at least one setting")
    return name.strip(), env


def run_in_fresh_process(case: str, backend: str, timeout_s: float,
                         extra_env: Optional[dict] = None) -> tuple[Optional[float], str]:
    """One cold compile in a new interpreter; (seconds or None, the output's tail)."""
    with tempfile.TemporaryDirectory(prefix="solder-compile-") as scratch:
        env = {**os.environ, **cold_environment(scratch), **(extra_env or {})}
        try:
            r = subprocess.run([sys.executable, "-m", "solder.bench.profile", case, "--backend",
                                backend, "--compile"], capture_output=True, text=True, env=env,
                               timeout=timeout_s)
        except subprocess.TimeoutExpired:
            return None, f"no result in {timeout_s:.0f} s"
    out = r.stdout[-3500:] + r.stderr[-1500:]   # the stage table, then any error
    return parse_seconds(r.stdout, backend), out


def measure(cases: list[str], backends: list[str], reps: int,
            run_one: Callable[[str, str], tuple[Optional[float], str]],
            log: Callable[[str], None] = print, budget_s: Optional[float] = None,
            clock: Callable[[], float] = time.monotonic,
            skip: Callable[[str, str], bool] = lambda case, backend: False) -> dict:
    """{case: {backend: [seconds, ...]}}; a failed run is logged and left out. With
    ``budget_s``, a case's repetition (every backend's run) starts only if the time left holds
    as many runs as long as the longest so far: the runs that did finish come in pairs, and the
    caller still prints its table when an outer time limit is near. ``skip(case, backend)``:
    a column that case does not run (a variant meant for other cases)."""
    results: dict = {c: {b: [] for b in backends if not skip(c, b)} for c in cases}
    end = None if budget_s is None else clock() + budget_s
    longest = 0.0
    for rep in range(reps):
        for case in cases:
            columns = [b for b in backends if not skip(case, b)]
            if end is not None and end - clock() < longest * len(columns):
                log(f"stopped before {case} (repetition {rep + 1}): {end - clock():.0f} s of "
                    f"the budget left, the longest run took {longest:.0f} s")
                return results
            order = columns if rep % 2 == 0 else list(reversed(columns))
            for backend in order:
                started = clock()
                seconds, tail = run_one(case, backend)
                longest = max(longest, clock() - started)
                if seconds is None:
                    log(f"{case} / {backend} (repetition {rep + 1}): no compile time\n{tail}")
                    continue
                results[case][backend].append(seconds)
                log(f"{case} / {backend} (repetition {rep + 1}): {seconds:.2f} s")
    return results


def table(results: dict, backends: list[str]) -> str:
    head = "case".ljust(14) + "".join(f"{b + ' s (runs)':>30}" for b in backends)
    # every column against inductor's (Solder's and its variants')
    over = [b for b in backends if b != "inductor"] if "inductor" in backends else []
    lines = [head + "".join(f"{b + '/inductor':>17}" for b in over)]
    for case, by_backend in results.items():
        row = case.ljust(14)
        medians = {}
        for b in backends:
            runs = by_backend.get(b)
            if runs is None:
                cell = "-"   # not run for this case
            elif runs:
                medians[b] = statistics.median(runs)
                cell = f"{medians[b]:.2f} ({', '.join(f'{s:.1f}' for s in runs)})"
            else:
                cell = "failed"
            row += f"{cell:>30}"
        for b in over:
            if b in medians and "inductor" in medians:
                row += f"{medians[b] / medians['inductor']:17.2f}"
            else:
                row += f"{'-':>17}"
        lines.append(row)
    return "\n".join(lines)


def main(argv=None) -> int:
    p = Parser(prog="python -m solder.bench.compile_time",
               description=__doc__.split("\n\n")[0])
    p.add_argument("--cases", default="gpt2,llama_train,resnet50",
                   help="comma-separated bench cases (a GPU is needed)")
    p.add_argument("--backends", default="inductor,solder")
    p.add_argument("--reps", type=int, default=2, help="fresh processes per case and backend")
    p.add_argument("--timeout", type=float, default=240, help="seconds per process")
    p.add_argument("--variant", action="append", default=[], metavar="NAME=FIELD=VALUE,...",
                   help="also a column NAME: Solder with these config fields set, e.g. "
                        "early=compile_backward_early=1 (repeatable)")
    p.add_argument("--variant-cases", metavar="CASE,...",
                   help="run the --variant columns for these cases only (default: all)")
    p.add_argument("--json", help="write the seconds of every run here")
    p.add_argument("--log", help="append each run's output (its compile breakdown) here")
    p.add_argument("--budget", type=float, help="seconds for the whole measurement: no case's "
                   "repetition starts that would not end inside it")
    args = p.parse_args(argv)
    cases = [c.strip() for c in args.cases.split(",") if c.strip()]
    backends = [b.strip() for b in args.backends.split(",") if b.strip()]
    try:
        variants = dict(parse_variant(v) for v in args.variant)
    except ValueError as e:
        p.error(str(e))
    backends += [v for v in variants if v not in backends]
    if not cases or not backends or args.reps < 1:
        p.error("give at least one case, one backend and one repetition")

    def run_one(case, column):
        if column in variants:
            seconds, out = run_in_fresh_process(case, "solder", args.timeout, variants[column])
        else:
            seconds, out = run_in_fresh_process(case, column, args.timeout)
        if args.log:   # each run's stage table, for where the seconds went
            with open(args.log, "a") as f:
                f.write(f"== {case} / {column}\n{out}\n")
        return seconds, out
    variant_cases = ({c.strip() for c in args.variant_cases.split(",") if c.strip()}
                     if args.variant_cases else set(cases))
    results = measure(cases, backends, args.reps, run_one,
                      log=lambda s: print(s, file=sys.stderr, flush=True), budget_s=args.budget,
                      skip=lambda case, column: column in variants and case not in variant_cases)
    print(table(results, backends))
    if args.json:
        with open(args.json, "w") as f:
            json.dump(results, f, indent=1)
    complete = all(runs for by_backend in results.values() for runs in by_backend.values())
    return 0 if complete else 1


if __name__ == "__main__":
    sys.exit(main())
