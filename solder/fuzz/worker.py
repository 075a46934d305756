"""A fuzz worker process: jobs in on stdin, one JSON outcome per line out.

``python -m solder.fuzz.worker '<RunConfig as JSON>'``. A job is ``{"id": n, "seed": s}`` (draw
the seed's program and check it) or ``{"id": n, "program": {...}, "grad": b}`` (check this program: the
minimizer's candidates). What programs and compilers print goes to stderr, so stdout carries
only outcomes. After a program that left the GPU unusable (a device-side assert) the worker
answers and exits, and the parent starts a fresh one.
"""
from __future__ import annotations

import dataclasses
import json
import logging
import os
import sys
import traceback


def main(argv: list[str]) -> int:
    answers = os.fdopen(os.dup(sys.stdout.fileno()), "w", buffering=1)
    os.dup2(sys.stderr.fileno(), sys.stdout.fileno())
    logging.getLogger("torch").setLevel(logging.ERROR)   # graph breaks are not failures

    from .program import Program
    from .run import CRASH, Outcome, RunConfig, check_program, check_seed

    base = RunConfig(**json.loads(argv[0]))
    for line in sys.stdin:
        if not line.strip():
            continue
        job = json.loads(line)
        cfg = dataclasses.replace(base, grad=job.get("grad", base.grad))
        try:
            if "seed" in job:
                out = check_seed(job["seed"], cfg)
            else:
                out = check_program(Program.from_json(job["program"]), cfg)
        except Exception:  # noqa: BLE001 - the fuzzer's own failure, reported as a crash
            out = Outcome(CRASH, "the fuzzer raised: " + traceback.format_exc(limit=-6),
                          program=job.get("program"))
        answers.write(json.dumps({"id": job["id"], "outcome": out.to_json()}) + "\n")
        if out.poisoned:
            return 3
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
