"""Work that runs in a forked copy of this process, its answer read back as JSON.

A training graph's backward is lowered, scheduled and generated while the forward is: the
backward's Solder stages run in a child forked right after the partition (capture/aot.py), the
forward's in this process, and the backward compile then only reads the child's answer
(pipeline.py). Python runs one thread at a time, so a thread would not overlap them; a fork
needs nothing sent to the child, which starts with the graph, its example values and every
module already in memory.

What the child may do is narrow: pure Python over the graph (no CUDA: a forked child must not
touch the GPU context it inherited, and PyTorch raises if it tries to start one), no locks that
another thread of the parent may have held at the fork, nothing that writes where the parent
reads, except its answer. Anything that goes wrong in the child (an error, an answer that does
not parse, a child that stops using the CPU, as one that waits on a lock forever would) makes
``ForkedWork.answer`` return None with the reason, and the caller does the work itself.
"""
from __future__ import annotations

import json
import os
import select
import shutil
import signal
import sys
import tempfile
import time
import warnings
import weakref
from typing import Callable, Optional

# a child whose CPU time has not moved for this long is stuck, not slow
STALL_S = 2.0
POLL_S = 0.25


def available() -> bool:
    """Forking is on Linux only (macOS forks but its system libraries object to it)."""
    return sys.platform.startswith("linux") and hasattr(os, "fork")


class ForkedWork:
    """``work()`` running in a forked child; ``answer()`` waits for its JSON result."""

    def __init__(self, pid: int, done_fd: int, folder: str):
        self.pid, self.done_fd, self.folder = pid, done_fd, folder
        self.started = time.perf_counter()
        self.reason = ""          # why there is no answer, for the report
        self._finalizer = weakref.finalize(self, _reap, pid, done_fd, folder, os.getpid())

    @classmethod
    def start(cls, work: Callable[[], dict]) -> Optional["ForkedWork"]:
        if not available():
            return None
        folder = tempfile.mkdtemp(prefix="solder-forked-")
        read_fd, write_fd = os.pipe()
        with warnings.catch_warnings():
            # Python 3.12 warns that forking a process with threads may deadlock the child;
            # the child here takes no lock another thread uses, and a stuck one is detected
            warnings.simplefilter("ignore", DeprecationWarning)
            try:
                pid = os.fork()
            except OSError:
                os.close(read_fd)
                os.close(write_fd)
                shutil.rmtree(folder, ignore_errors=True)
                return None
        if pid == 0:   # the child: never returns
            os.close(read_fd)
            _run_child(work, os.path.join(folder, "answer.json"), write_fd)
        os.close(write_fd)
        return cls(pid, read_fd, folder)

    def answer(self, max_wait_s: float = 600.0) -> Optional[dict]:
        """The child's result, or None (``reason`` says why) once it failed, exited without one,
        stopped using the CPU for ``STALL_S``, or took ``max_wait_s``."""
        try:
            return self._wait(max_wait_s)
        except OSError as e:
            self.reason = f"waiting for the child failed: {e}"
            return None
        finally:
            self._finalizer()

    def discard(self) -> None:
        """Stop the child (its answer is not needed)."""
        self._finalizer()

    def _wait(self, max_wait_s: float) -> Optional[dict]:
        end = time.perf_counter() + max_wait_s
        last_cpu, still_since = None, time.perf_counter()
        done = select.poll()   # not select.select: a busy process's descriptors pass 1024
        done.register(self.done_fd, select.POLLIN | select.POLLHUP)
        while True:
            if done.poll(POLL_S * 1000):
                break
            now = time.perf_counter()
            cpu = _cpu_ticks(self.pid)
            if cpu is None or cpu != last_cpu:
                last_cpu, still_since = cpu, now
            elif now - still_since > STALL_S:
                self.reason = f"the child used no CPU for {STALL_S:.0f} s (stuck)"
                return None
            if now > end:
                self.reason = f"no answer in {max_wait_s:.0f} s"
                return None
        try:
            with open(os.path.join(self.folder, "answer.json"), encoding="utf-8") as f:
                got = json.load(f)
        except (OSError, ValueError) as e:
            self.reason = f"the child left no answer ({type(e).__name__})"
            return None
        if not isinstance(got, dict) or "error" in got:
            self.reason = f"the child failed: {got.get('error') if isinstance(got, dict) else got}"
            return None
        return got


def _run_child(work: Callable[[], dict], path: str, done_fd: int) -> None:
    code = 1
    try:
        try:
            got = work()
        except BaseException as e:  # noqa: BLE001 - reported to the parent, which redoes it
            got = {"error": f"{type(e).__name__}: {e}"}
        with open(path + ".part", "w", encoding="utf-8") as f:
            json.dump(got, f)
        os.replace(path + ".part", path)   # the parent sees all of it or nothing
        code = 0
    except BaseException:  # noqa: BLE001 - nothing written: the parent reads no answer
        pass
    finally:
        try:
            os.write(done_fd, b"x")
        finally:
            os._exit(code)   # no atexit handlers, no buffers of the parent's flushed twice


def _cpu_ticks(pid: int) -> Optional[int]:
    """user + system CPU ticks of ``pid`` (Linux /proc), or None."""
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        return int(fields[11]) + int(fields[12])
    except (OSError, IndexError, ValueError):
        return None


def _reap(pid: int, done_fd: int, folder: str, owner: int) -> None:
    if os.getpid() != owner:   # a later child's copy of this handle: not its child to stop
        return
    try:
        os.kill(pid, signal.SIGKILL)
    except OSError:
        pass
    try:
        os.waitpid(pid, 0)
    except OSError:
        pass
    try:
        os.close(done_fd)
    except OSError:
        pass
    shutil.rmtree(folder, ignore_errors=True)
