"""Crash isolation: every program runs in a worker process (``worker.py``), under a time limit.

A worker that dies (a segfault, an abort, a device-side assert that leaves the GPU unusable)
or does not answer within the limit is killed and replaced by a fresh one at the next job; the
program gets a CRASH or TIMEOUT outcome with the end of the worker's stderr; a worker that
died while eager ran (no ``BACKEND_MARK`` in its stderr since the job began, or an
``EAGER_MARK`` after the last one) died in eager, and the program gets EAGER_CRASH: torch's
bug, not compared, and never redrawn in the parent (which would die the same way). ``--jobs N`` runs
N workers, each driven by one thread of the parent that takes the next seed, and minimizes a
failing program through the same worker before taking another.
"""
from __future__ import annotations

import dataclasses
import json
import os
import queue
import select
import subprocess
import sys
import tempfile
import threading
import time
from typing import Callable, Optional

from .run import BACKEND_MARK, CRASH, EAGER_CRASH, EAGER_MARK, TIMEOUT, Outcome, RunConfig


class Worker:
    def __init__(self, cfg: RunConfig, env: dict, log_path: str):
        self.cfg, self.env, self.log_path = cfg, env, log_path
        self.proc: Optional[subprocess.Popen] = None
        self.jobs = 0
        self.log = open(log_path, "ab")

    def _start(self) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "solder.fuzz.worker", json.dumps(dataclasses.asdict(self.cfg))],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self.log, env=self.env,
            text=True, bufsize=1)

    def ask(self, job: dict, timeout: float) -> Outcome:
        """The worker's outcome for a job, or CRASH / TIMEOUT (the worker is then replaced)."""
        if self.proc is None or self.proc.poll() is not None:
            self._start()
        self.jobs += 1
        job = dict(job, id=self.jobs)
        self.log.flush()
        log_start = os.path.getsize(self.log_path)
        try:
            self.proc.stdin.write(json.dumps(job) + "\n")
            self.proc.stdin.flush()
        except (BrokenPipeError, OSError):
            return self._died(log_start, job)
        deadline = time.monotonic() + timeout if timeout else None
        while True:
            wait = None if deadline is None else max(0.0, deadline - time.monotonic())
            ready, _, _ = select.select([self.proc.stdout], [], [], wait)
            if not ready:
                self.stop(kill=True)
                return Outcome(TIMEOUT, f"no answer within {timeout:g} s; the worker's stderr "
                                        f"ended: {self._tail(log_start)}", program=job.get("program"))
            line = self.proc.stdout.readline()
            if not line:
                return self._died(log_start, job)
            answer = json.loads(line)
            if answer.get("id") != job["id"]:
                continue
            out = Outcome.from_json(answer["outcome"])
            if out.poisoned:
                self.stop()
            return out

    def _died(self, log_start: int, job: dict) -> Outcome:
        code = self.proc.wait()
        self.proc = None
        tail = self._tail(log_start)
        if not self._died_in_a_backend(log_start):
            return Outcome(EAGER_CRASH, f"eager itself died (exit code {code}), no backend "
                                        f"running; the worker's stderr ended: {tail}",
                           program=job.get("program"))
        return Outcome(CRASH, f"the worker died (exit code {code}); its stderr ended: {tail}",
                       program=job.get("program"))

    def _died_in_a_backend(self, start: int) -> bool:
        """Whether the last of the job's marks in the worker's stderr says a backend ran."""
        self.log.flush()
        with open(self.log_path, "rb") as f:
            f.seek(start)
            text = f.read()
        return text.rfind(BACKEND_MARK.encode()) > text.rfind(EAGER_MARK.encode())

    def _tail(self, start: int, limit: int = 2000) -> str:
        self.log.flush()
        with open(self.log_path, "rb") as f:
            f.seek(max(start, os.path.getsize(self.log_path) - limit))
            return " ".join(f.read().decode(errors="replace").split())[-limit:]

    def stop(self, kill: bool = False) -> None:
        if self.proc is None:
            return
        if kill:
            self.proc.kill()
        else:
            try:
                self.proc.stdin.close()
            except OSError:
                pass
        try:
            self.proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        self.proc = None

    def close(self) -> None:
        self.stop()
        self.log.close()


def worker_env(device: str) -> dict:
    """The environment of a worker: Triton's interpreter without a GPU, no on-disk compile
    cache (every program is new, and a cache written while the compiler's sources change
    would be stale), no tuning on the interpreter."""
    env = dict(os.environ)
    env.setdefault("SOLDER_CACHE", "0")
    if device == "cpu":
        env.setdefault("TRITON_INTERPRET", "1")
        env.setdefault("SOLDER_AUTOTUNE", "0")
    return env


def run_seeds(seeds: list, cfg: RunConfig, jobs: int, timeout: float,
              handle: Callable[[int, Outcome, "Worker"], None],
              log_dir: Optional[str] = None, stop_at: Optional[float] = None) -> None:
    """Check each seed in a worker; handle(seed, outcome, worker) runs on the worker's thread
    (it may ask the worker more, to minimize) and must do its own locking. With stop_at (a
    ``time.monotonic()`` value) no seed is started after it; the rest are left unrun."""
    pending: "queue.Queue[int]" = queue.Queue()
    for s in seeds:
        pending.put(s)
    own_dir = log_dir is None
    log_dir = log_dir or tempfile.mkdtemp(prefix="solder-fuzz-")
    env = worker_env(cfg.device)
    errors: list = []

    def drive(number: int) -> None:
        worker = Worker(cfg, env, os.path.join(log_dir, f"worker-{number}.log"))
        try:
            while stop_at is None or time.monotonic() < stop_at:
                try:
                    seed = pending.get_nowait()
                except queue.Empty:
                    return
                handle(seed, worker.ask({"seed": seed}, timeout), worker)
        except BaseException as err:  # noqa: BLE001 - reported by the main thread
            errors.append(err)
        finally:
            worker.close()

    threads = [threading.Thread(target=drive, args=(i,), daemon=True)
               for i in range(max(1, min(jobs, len(seeds))))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    if own_dir and not errors:
        for name in os.listdir(log_dir):
            os.remove(os.path.join(log_dir, name))
        os.rmdir(log_dir)
    if errors:
        raise errors[0]
