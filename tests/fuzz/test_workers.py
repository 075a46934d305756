"""Crash isolation: a program that kills or hangs its worker costs that program, not the run."""
import os

from solder.fuzz.generate import generate
from solder.fuzz.program import Program, Stmt
from solder.fuzz.run import CRASH, PASS, TIMEOUT, RunConfig
from solder.fuzz.workers import Worker, worker_env


def _with(code):
    p = generate(4).program
    return Program(p.seed, p.inputs, [Stmt(code, "v0")], ["v0"])


def test_a_dead_or_hung_worker_is_replaced(tmp_path):
    cfg = RunConfig(backend="aot_eager", device="cpu", control=None)
    worker = Worker(cfg, worker_env("cpu"), str(tmp_path / "w.log"))
    try:
        died = worker.ask({"program": _with("v0 = a0 + __import__('os')._exit(7)").to_json()}, 120)
        assert died.kind == CRASH and "exit code 7" in died.detail
        assert died.program is not None
        hung = worker.ask({"program": _with("v0 = a0 + __import__('time').sleep(600)").to_json()}, 5)
        assert hung.kind == TIMEOUT
        fine = worker.ask({"seed": 4}, 120)
        assert fine.kind == PASS, fine.detail
        again = worker.ask({"program": generate(4).program.to_json(), "grad": True}, 120)
        assert again.kind == PASS, again.detail
    finally:
        worker.close()
    assert worker.proc is None


def test_the_worker_environment_runs_kernels_without_a_gpu():
    env = worker_env("cpu")
    assert env["TRITON_INTERPRET"] == "1" and env["SOLDER_CACHE"] == "0"
    assert worker_env("cuda").get("TRITON_INTERPRET") == os.environ.get("TRITON_INTERPRET")
