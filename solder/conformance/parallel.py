"""``--jobs N``: ops spread over N worker processes, one op at a time each.

A worker (``python -m solder.conformance.worker``) reads op names on stdin and answers each with
one JSON line (an OpResult). The parent hands the next op to whichever worker answers first, so
slow ops do not hold up a fixed shard. A worker that dies (a segfault in a kernel, an abort) or
that runs one op past the hard limit is replaced; that op is recorded as failed with the exit
code and the end of the worker's stderr, and the run goes on.
"""
from __future__ import annotations

import dataclasses
import json
import os
import selectors
import subprocess
import sys
import tempfile
import time
from collections import deque
from typing import Callable, Optional

from .results import OpResult, from_json
from .runner import RunConfig, broken_result
from .selection import all_opinfos


class _Worker:
    def __init__(self, config: RunConfig, log_dir: str, number: int):
        self.log_path = os.path.join(log_dir, f"worker-{number}.log")
        self.log = open(self.log_path, "ab")
        fields = dataclasses.asdict(config)
        fields["expected_failures"] = sorted(config.expected_failures)
        payload = json.dumps(fields)
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "solder.conformance.worker", payload],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self.log, text=True,
            bufsize=1)
        self.op: Optional[str] = None
        self.started = 0.0

    def send(self, op: str) -> None:
        self.op, self.started = op, time.monotonic()
        self.proc.stdin.write(op + "\n")
        self.proc.stdin.flush()

    def stop(self, kill: bool = False) -> int:
        if kill:
            self.proc.kill()
        else:
            self.proc.stdin.close()
        code = self.proc.wait()
        self.log.close()
        return code

    def stderr_tail(self, limit: int = 1500) -> str:
        with open(self.log_path, "rb") as f:
            f.seek(0, os.SEEK_END)
            f.seek(max(0, f.tell() - limit))
            return " ".join(f.read().decode(errors="replace").split())


def run_parallel(names: list[str], config: RunConfig, jobs: int, hard_limit_s: float,
                 progress: Optional[Callable[[OpResult], None]] = None,
                 deadline_s: float = 0.0) -> tuple[list[OpResult], list[str]]:
    """Results of run_op for the named ops (expected failures not yet applied), and the ops not
    run: with ``deadline_s``, ops still pending or running that many seconds after the start are
    dropped (their workers killed), so a run cut short by a time limit still reports what ran."""
    if not isinstance(config.backend, str):
        raise ValueError("--jobs needs a backend given by name")
    pending = deque(sorted(names))
    results: dict[str, OpResult] = {}
    selector = selectors.DefaultSelector()
    give_up_at = time.monotonic() + deadline_s if deadline_s else None
    not_run: list[str] = []
    with tempfile.TemporaryDirectory(prefix="solder-conformance-") as log_dir:
        spawned = 0

        def start_worker() -> None:
            nonlocal spawned
            worker = _Worker(config, log_dir, spawned)
            spawned += 1
            selector.register(worker.proc.stdout, selectors.EVENT_READ, worker)
            worker.send(pending.popleft())

        def finish(result: OpResult) -> None:
            results[result.op] = result
            if progress:
                progress(result)

        def replace(worker: _Worker, why: str) -> None:
            selector.unregister(worker.proc.stdout)
            code = worker.stop(kill=True)
            op = all_opinfos()[worker.op]
            finish(broken_result(op, config, f"{why} (worker exit code {code}); "
                                             f"its stderr ended: {worker.stderr_tail()}"))
            if pending:
                start_worker()

        for _ in range(min(jobs, len(pending))):
            start_worker()
        while selector.get_map():
            for key, _ in selector.select(timeout=5.0):
                worker = key.data
                line = worker.proc.stdout.readline()
                if not line:
                    replace(worker, "the worker process died while running this op")
                    continue
                finish(from_json(json.loads(line)))
                if pending:
                    worker.send(pending.popleft())
                else:
                    selector.unregister(worker.proc.stdout)
                    worker.stop()
            if give_up_at is not None and time.monotonic() > give_up_at:
                not_run.extend(pending)
                pending.clear()
                for key in list(selector.get_map().values()):
                    worker = key.data
                    selector.unregister(worker.proc.stdout)
                    worker.stop(kill=True)
                    not_run.append(worker.op)
                break
            if hard_limit_s:
                for key in list(selector.get_map().values()):
                    worker = key.data
                    if time.monotonic() - worker.started > hard_limit_s:
                        replace(worker, f"the op ran past the hard limit of {hard_limit_s:g} s")
    return [results[name] for name in sorted(results)], sorted(not_run)
