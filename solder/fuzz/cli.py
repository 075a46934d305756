"""``python -m solder fuzz``: random programs, compiled and compared with eager.

Each seed gives one program (the same on every machine); it runs in a worker process under a
time limit, is compared with eager (values, dtypes, shapes, strides, the inputs afterwards and,
with --grad, the gradients), and when it fails it is minimized and written to --out as a
standalone script. The summary counts programs, passes, wrong results, errors (the backend
raised where eager ran), timeouts, crashes, the draws eager rejected, and apart, as explained
(not the backend's own), the wrong results the control backend gives too and the errors it
raises too. Exit status 1 when anything was wrong,
an unexplained error, a timeout or a crash.
"""
from __future__ import annotations

import argparse
import json
import sys
import threading
import time
from typing import Optional

from .program import Program
from .run import (CONTROL_ERROR, CONTROL_WRONG, CRASH, EAGER_CRASH, EAGER_REJECTED, ERROR, PASS,
                  TIMEOUT, WRONG, Outcome, RunConfig)

KINDS = (PASS, WRONG, ERROR, CONTROL_WRONG, CONTROL_ERROR, TIMEOUT, CRASH, EAGER_REJECTED,
         EAGER_CRASH)
NOT_PROGRAMS = (EAGER_REJECTED, EAGER_CRASH)   # seeds with no program eager runs
FAILURES = (WRONG, ERROR, TIMEOUT, CRASH)


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m solder fuzz", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--seeds", metavar="A:B", default=None,
                   help="the seeds A to B-1; or seeds and ranges separated by commas (1,5,10:20)")
    p.add_argument("--count", type=int, default=100, help="programs (default 100)")
    p.add_argument("--seed", type=int, default=0, help="first seed, with --count (default 0)")
    p.add_argument("--grad", action="store_true",
                   help="also compare the gradients of the floating inputs (backward of a "
                        "random weighted sum of everything observed)")
    p.add_argument("--device", choices=("cpu", "cuda"), default=None,
                   help="default: cuda when available, else cpu (Triton's interpreter)")
    p.add_argument("--backend", default="solder",
                   help="torch.compile backend (default solder; aot_eager and inductor are "
                        "controls)")
    p.add_argument("--control", default=None,
                   help="backend run when the backend raises, to tell whose error it is "
                        "(default aot_eager; eager for --backend aot_eager; 'none': off)")
    p.add_argument("--jobs", type=int, default=1, help="worker processes (default 1)")
    p.add_argument("--timeout", type=float, default=None,
                   help="seconds per program, compile included (default 180 on cpu, 60 on cuda)")
    p.add_argument("--budget", type=float, default=None, metavar="SECONDS",
                   help="start no program and minimize no failing one after this many seconds "
                        "(failing programs are then written as drawn); the summary says how "
                        "many seeds were left unrun (for runs under a wall-clock limit)")
    p.add_argument("--out", default="fuzz-findings",
                   help="folder for the failing programs' scripts (default ./fuzz-findings)")
    p.add_argument("--no-minimize", action="store_true", help="write failing programs as drawn")
    p.add_argument("--minimize-checks", type=int, default=150,
                   help="most candidate programs tried per failing program (default 150)")
    p.add_argument("--json", metavar="FILE", default=None, help="write every outcome here")
    p.add_argument("--show", type=int, metavar="SEED", default=None,
                   help="print the seed's program and exit")
    p.add_argument("-q", "--quiet", action="store_true", help="no line per program")
    return p


def parse_seeds(args) -> list:
    if args.seeds is None:
        return list(range(args.seed, args.seed + args.count))
    seeds = []
    try:
        for part in args.seeds.split(","):
            if ":" in part:
                a, b = (int(x) for x in part.split(":"))
                seeds += range(a, b)
            else:
                seeds.append(int(part))
    except ValueError:
        raise SystemExit(f"--seeds wants A:B or seeds and ranges separated by commas "
                         f"(1,5,10:20), got {args.seeds!r}") from None
    return seeds


def main(argv: Optional[list] = None) -> int:
    args = build_parser().parse_args(argv)
    if args.show is not None:
        from .generate import generate
        gen = generate(args.show, args.grad)
        print(gen.program.source(), end="")
        return 0
    import torch
    device = args.device or ("cuda" if torch.cuda.is_available() else "cpu")
    control = args.control or ("eager" if args.backend == "aot_eager" else "aot_eager")
    cfg = RunConfig(backend=args.backend, device=device, grad=args.grad,
                    control=None if control == "none" else control)
    timeout = args.timeout if args.timeout is not None else (180.0 if device == "cpu" else 60.0)
    seeds = parse_seeds(args)
    report = Report(args, cfg, seeds)
    start = time.monotonic()

    from .workers import run_seeds
    stop_at = start + args.budget if args.budget is not None else None
    report.stop_at = stop_at   # past it, failing programs are written as drawn
    run_seeds(seeds, cfg, args.jobs, timeout, report.handle, stop_at=stop_at)
    report.seconds = time.monotonic() - start
    print(report.summary())
    if args.json:
        with open(args.json, "w") as f:
            json.dump(report.to_json(), f, indent=1)
    return 1 if any(report.counts[k] for k in FAILURES) else 0


class Report:
    """Outcomes as they come from the workers' threads; failing programs minimized and
    written on the thread that found them."""

    def __init__(self, args, cfg: RunConfig, seeds: list):
        self.args, self.cfg, self.seeds = args, cfg, seeds
        self.lock = threading.Lock()
        self.records: dict = {}
        self.counts = {k: 0 for k in KINDS}
        self.rejected = 0
        self.seconds = 0.0
        self.stop_at: Optional[float] = None   # --budget's end: no minimizing after it

    def handle(self, seed: int, out: Outcome, worker) -> None:
        record = {"seed": seed, "kind": out.kind, "detail": out.detail[:2000], "error": out.error,
                  "control": out.control, "seconds": round(out.seconds, 2),
                  "rejected": out.rejected, "diffs": out.diffs}
        if out.kind != PASS and out.program:
            record["source"] = Program.from_json(out.program).source()
        if out.kind in FAILURES:
            record.update(self._write(seed, out, worker))
        with self.lock:
            self.records[seed] = record
            self.counts[out.kind] += 1
            self.rejected += out.rejected
            if not self.args.quiet:
                print(self._line(record), flush=True)

    def _write(self, seed: int, out: Outcome, worker) -> dict:
        from .generate import generate
        from .minimize import minimize
        from .script import script_text, write_script
        program = Program.from_json(out.program) if out.program else \
            generate(seed, self.cfg.grad).program
        info = {"ops": program.ops(), "statements": len(program.stmts)}
        final, grad = program, self.cfg.grad
        spent = self.stop_at is not None and time.monotonic() >= self.stop_at
        if spent:
            info["minimize_skipped"] = "the --budget was spent"
        if not self.args.no_minimize and out.kind != TIMEOUT and not spent:
            def check(p, g):
                return worker.ask({"program": p.to_json(), "grad": g}, self._timeout())
            got = minimize(program, out, self.cfg.grad, check, self.args.minimize_checks)
            final, grad, out = got.program, got.grad, got.outcome
            info.update(minimized_statements=len(final.stmts), minimize_checks=got.checks,
                        minimized_ops=final.ops())
        name = f"{self.cfg.backend}_seed{seed}{'_grad' if self.cfg.grad else ''}.py"
        found = (f"seed {seed}{', --grad' if self.cfg.grad else ''}; "
                 f"{len(program.stmts)} statements minimized to {len(final.stmts)}")
        text = script_text(final, out, self.cfg.device, grad, self.cfg.backend, found, name)
        info["script"] = write_script(self.args.out, name, text)
        info["minimized_detail"] = (out.detail if out.kind != ERROR else out.error)[:500]
        return info

    def _timeout(self) -> float:
        if self.args.timeout is not None:
            return self.args.timeout
        return 180.0 if self.cfg.device == "cpu" else 60.0

    @staticmethod
    def _line(r: dict) -> str:
        text = r["error"] if r["kind"] in (ERROR, CONTROL_ERROR) else r["detail"]
        text = " ".join(text.split())[:200]
        line = f"seed {r['seed']}: {r['kind']} ({r['seconds']:.1f} s)"
        if r["kind"] != PASS:
            line += f" {text}"
        if r["kind"] in (CONTROL_ERROR, CONTROL_WRONG):
            line += f" [{r['control'][:160]}]"
        if "script" in r:
            line += f" -> {r['script']}"
        return line

    def summary(self) -> str:
        c = self.counts
        programs = sum(c[k] for k in KINDS if k not in NOT_PROGRAMS)
        mode = "forward and gradients" if self.cfg.grad else "forward"
        unrun = len(self.seeds) - len(self.records)
        ctl = self.cfg.control or "the control"
        lines = [f"fuzz: {programs} programs ({mode}, backend {self.cfg.backend}, "
                 f"{self.cfg.device}, seeds {self._seed_text()}) in "
                 f"{self.seconds:.0f} s" + (f"; {unrun} seeds left unrun (--budget)"
                                            if unrun else "")
                 if self.seeds else "fuzz: no seeds",
                 f"  passed {c[PASS]}, wrong {c[WRONG]}, errors {c[ERROR]}, timeouts "
                 f"{c[TIMEOUT]}, crashes {c[CRASH]}; explained: wrong under {ctl} too "
                 f"{c[CONTROL_WRONG]}, errors {ctl} raises too {c[CONTROL_ERROR]}",
                 f"  draws eager rejected: {self.rejected}"
                 + (f" (and {c[EAGER_REJECTED]} seeds with no program eager runs on "
                    f"{self.cfg.device})" if c[EAGER_REJECTED] else "")
                 + (f"; seeds where eager itself crashed (torch's bug, not compared): "
                    f"{c[EAGER_CRASH]}" if c[EAGER_CRASH] else "")]
        for kind, title in ((WRONG, "wrong"), (ERROR, "errors"), (TIMEOUT, "timeouts"),
                            (CRASH, "crashes"), (EAGER_CRASH, "eager crashed (not compared)"),
                            (CONTROL_WRONG, f"wrong under {self.cfg.control} too (explained)"),
                            (CONTROL_ERROR, f"errors {self.cfg.control} raises too (explained)")):
            rows = [r for s, r in sorted(self.records.items()) if r["kind"] == kind]
            if rows:
                lines.append(f"{title}:")
                lines += ["  " + self._line(r) for r in rows]
        return "\n".join(lines)

    def _seed_text(self) -> str:
        s = self.seeds
        if s == list(range(s[0], s[-1] + 1)):
            return f"{s[0]}:{s[-1] + 1}"
        return ",".join(map(str, s[:20])) + (f",... ({len(s)} seeds)" if len(s) > 20 else "")

    def to_json(self) -> dict:
        return {"backend": self.cfg.backend, "device": self.cfg.device, "grad": self.cfg.grad,
                "control": self.cfg.control, "seconds": round(self.seconds, 1),
                "counts": dict(self.counts, programs=sum(
                    self.counts[k] for k in KINDS if k not in NOT_PROGRAMS),
                    rejected_draws=self.rejected,
                    unrun=len(self.seeds) - len(self.records)),
                "programs": [self.records[s] for s in sorted(self.records)]}


if __name__ == "__main__":
    sys.exit(main())
