"""The fresh-process cold-compile command (solder/bench/compile_time.py), without a GPU: what
it reads from each process, the order it runs them in, and its table."""
import pytest

from solder.bench import compile_time as ct

PROFILE_OUTPUT = """llama_train / solder: warm-up compile 3.96 s
llama_train / solder compile: 10.71 s for the first call
  dynamo's timings (s): _compile.compile_inner 6.20
"""


def test_the_first_call_seconds_are_read_for_the_backend_asked():
    assert ct.parse_seconds(PROFILE_OUTPUT, "solder") == 10.71
    assert ct.parse_seconds(PROFILE_OUTPUT, "inductor") is None   # the warm-up line is not it
    assert ct.parse_seconds("Traceback ...", "solder") is None


def test_backends_alternate_first_and_failed_runs_are_left_out():
    calls, logged = [], []
    seconds = iter([2.0, 1.0, None, 3.0, 4.0, 1.5, 2.5, 1.0])

    def run_one(case, backend):
        calls.append((case, backend))
        s = next(seconds)
        return s, "boom" if s is None else ""
    results = ct.measure(["a", "b"], ["inductor", "solder"], 2, run_one, log=logged.append)
    assert calls == [("a", "inductor"), ("a", "solder"), ("b", "inductor"), ("b", "solder"),
                     ("a", "solder"), ("a", "inductor"), ("b", "solder"), ("b", "inductor")]
    assert results == {"a": {"inductor": [2.0, 1.5], "solder": [1.0, 4.0]},
                       "b": {"inductor": [1.0], "solder": [3.0, 2.5]}}
    assert any("b / inductor (repetition 1): no compile time" in s and "boom" in s
               for s in logged)
    text = ct.table(results, ["inductor", "solder"])
    a_row = next(line for line in text.splitlines() if line.startswith("a "))
    assert "1.75 (2.0, 1.5)" in a_row and "2.50 (1.0, 4.0)" in a_row
    assert a_row.rstrip().endswith("1.43")        # 2.50 / 1.75


def test_every_cache_is_off_and_private_to_the_run(tmp_path):
    env = ct.cold_environment(str(tmp_path))
    assert env["SOLDER_CACHE"] == "0" and env["TORCHINDUCTOR_FORCE_DISABLE_CACHES"] == "1"
    assert env["TRITON_CACHE_DIR"].startswith(str(tmp_path))
    assert env["TORCHINDUCTOR_CACHE_DIR"].startswith(str(tmp_path))


def test_a_run_without_cases_is_refused():
    with pytest.raises(SystemExit):
        ct.main(["--cases", "", "--reps", "1"])


def test_a_variant_is_solder_with_config_fields_set_and_gets_its_own_ratio():
    assert ct.parse_variant("early=compile_backward_early=1") == (
        "early", {"SOLDER_COMPILE_BACKWARD_EARLY": "1"})
    assert ct.parse_variant("two=compile_processes=4,pause_gc=0") == (
        "two", {"SOLDER_COMPILE_PROCESSES": "4", "SOLDER_PAUSE_GC": "0"})
    for bad in ("early=no_such_field=1", "early=", "solder=pause_gc=0", "=pause_gc=0",
                "early=pause_gc"):
        with pytest.raises(ValueError):
            ct.parse_variant(bad)
    results = {"a": {"inductor": [4.0], "solder": [2.0], "early": [1.0]}}
    row = ct.table(results, ["inductor", "solder", "early"]).splitlines()[1].split()
    assert row[-2:] == ["0.50", "0.25"]


def test_a_variant_column_runs_solder_with_its_environment(monkeypatch):
    seen = []
    monkeypatch.setattr(ct, "run_in_fresh_process",
                        lambda case, backend, timeout, extra_env=None:
                        (seen.append((case, backend, extra_env)) or 1.0, ""))
    assert ct.main(["--cases", "a", "--reps", "1", "--backends", "solder",
                    "--variant", "early=compile_backward_early=1"]) == 0
    assert seen == [("a", "solder", None),
                    ("a", "solder", {"SOLDER_COMPILE_BACKWARD_EARLY": "1"})]


def test_variant_columns_run_for_the_variant_cases_only(monkeypatch, capsys):
    seen = []
    monkeypatch.setattr(ct, "run_in_fresh_process",
                        lambda case, backend, timeout, extra_env=None:
                        (seen.append((case, bool(extra_env))) or 1.0, ""))
    assert ct.main(["--cases", "a,b", "--reps", "1", "--backends", "solder",
                    "--variant", "child=compile_backward_in_child=1",
                    "--variant-cases", "b"]) == 0   # complete: a's missing column is not a failure
    assert seen == [("a", False), ("b", False), ("b", True)]
    rows = capsys.readouterr().out.splitlines()
    a_row = next(r for r in rows if r.startswith("a "))
    assert a_row.split()[-1] == "-" and "failed" not in a_row


def test_a_budget_stops_before_a_repetition_that_would_not_fit():
    now = [0.0]
    durations = {"inductor": 30.0, "solder": 10.0}
    logged = []

    def run_one(case, backend):
        now[0] += durations[backend]
        return durations[backend], ""
    # 100 s: a (40 s), b (80 s); then 20 s left < 2 runs of 30 s: stop, pairs complete
    results = ct.measure(["a", "b"], ["inductor", "solder"], 3, run_one, log=logged.append,
                         budget_s=100, clock=lambda: now[0])
    assert results == {"a": {"inductor": [30.0], "solder": [10.0]},
                       "b": {"inductor": [30.0], "solder": [10.0]}}
    assert any(s.startswith("stopped before a (repetition 2)") for s in logged)
