"""Crash isolation: a program that kills or hangs its worker costs that program, not the run."""
import os

from solder.fuzz.generate import generate
from solder.fuzz.program import Program, Stmt
from solder.fuzz.run import CRASH, EAGER_CRASH, PASS, TIMEOUT, RunConfig
from solder.fuzz.workers import Worker, worker_env


def _with(code):
    p = generate(4).program
    return Program(p.seed, p.inputs, [Stmt(code, "v0")], ["v0"])


def test_a_dead_or_hung_worker_is_replaced(tmp_path):
    cfg = RunConfig(backend="aot_eager", device="cpu", control=None)
    worker = Worker(cfg, worker_env("cpu"), str(tmp_path / "w.log"))
    try:
        # dies only when compiled: the backend's crash
        died = worker.ask({"program": _with(
            "v0 = a0 + (__import__('os')._exit(7) if torch.compiler.is_compiling() else 1)"
        ).to_json()}, 120)
        assert died.kind == CRASH and "exit code 7" in died.detail, died.detail
        assert died.program is not None
        # dies in eager, before the backend ran: eager's crash, not the backend's
        eager_died = worker.ask({"program": _with("v0 = a0 + __import__('os')._exit(7)").to_json()},
                                120)
        assert eager_died.kind == EAGER_CRASH and "exit code 7" in eager_died.detail
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


def test_a_written_script_runs_on_its_own(tmp_path):
    import subprocess
    import sys

    from solder.fuzz.run import WRONG, Outcome
    from solder.fuzz.script import script_text, write_script
    program = generate(6, grad=True).program
    out = Outcome(WRONG, "output 0: made up for the test")
    path = write_script(str(tmp_path), "s.py", script_text(program, out, "cpu", True, "solder",
                                                           "seed 6", "s.py"))
    env = dict(worker_env("cpu"), PYTHONPATH=os.getcwd())
    done = subprocess.run([sys.executable, path, "aot_eager"], capture_output=True, text=True,
                          env=env, cwd=str(tmp_path), timeout=300)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    assert "match under aot_eager" in done.stdout and "--- output 0" in done.stdout
    assert program.source() in open(path).read()


def test_an_error_script_carries_the_frames_the_worker_saw(tmp_path):
    from solder.fuzz.run import ERROR, Outcome
    from solder.fuzz.script import script_text
    program = generate(6, grad=True).program
    tb = 'Traceback (most recent call last):\n  File "launch.py", line 9, in _launch\nTypeError: boom'
    text = script_text(program, Outcome(ERROR, tb, error="TypeError: boom"), "cpu", True,
                       "solder", "seed 6", "s.py")
    assert '#     File "launch.py", line 9, in _launch' in text and "#   TypeError: boom" in text
    compile(text, "s.py", "exec")   # still a script


def test_a_budget_stops_taking_seeds_and_the_report_counts_the_rest(tmp_path, capsys):
    import json

    from solder.fuzz.cli import main
    report = tmp_path / "r.json"
    main(["--seeds", "0:50", "--backend", "aot_eager", "--device", "cpu", "--budget", "0",
          "--out", str(tmp_path), "--json", str(report), "-q"])
    counts = json.load(open(report))["counts"]
    assert counts["programs"] == 0 and counts["unrun"] == 50
    assert "50 seeds left unrun (--budget)" in capsys.readouterr().out


def test_past_the_budget_a_failing_program_is_written_as_drawn(tmp_path):
    from solder.fuzz.cli import Report, build_parser
    from solder.fuzz.run import WRONG, Outcome, RunConfig
    args = build_parser().parse_args(["--out", str(tmp_path), "--budget", "0"])
    report = Report(args, RunConfig(backend="solder", device="cpu", grad=False), [6])
    report.stop_at = 0.0   # long past
    program = generate(6, grad=False).program
    info = report._write(6, Outcome(WRONG, "output 0: made up", program=program.to_json()),
                         worker=None)   # (minimizing would ask the worker)
    assert info["minimize_skipped"] and "minimized_statements" not in info
    assert program.source() in open(info["script"]).read()


def test_seeds_as_a_list_of_seeds_and_ranges():
    import argparse

    from solder.fuzz.cli import parse_seeds
    assert parse_seeds(argparse.Namespace(seeds="7,3:5,100", seed=0, count=1)) == [7, 3, 4, 100]


def test_a_crash_belongs_to_what_ran_last(tmp_path):
    # eager runs again after the backend (its sensitivity, for a program that differs): a
    # worker that dies then died in eager; one that dies in the control's run, in a backend
    from solder.fuzz.run import BACKEND_MARK, EAGER_MARK
    worker = Worker(RunConfig(device="cpu"), worker_env("cpu"), str(tmp_path / "w.log"))
    try:
        for lines, in_backend in (([], False), ([BACKEND_MARK], True),
                                  ([BACKEND_MARK, EAGER_MARK], False),
                                  ([BACKEND_MARK, EAGER_MARK, BACKEND_MARK], True)):
            start = os.path.getsize(worker.log_path)
            worker.log.write(("noise\n" + "\n".join(lines) + "\n").encode())
            assert worker._died_in_a_backend(start) == in_backend, lines
    finally:
        worker.close()
