"""Tests of the conformance harness itself, with stock backends (fast; no Solder needed).

A suite that cannot fail proves nothing: these check that it passes a correct backend
(aot_eager), and catches a backend that is slightly wrong in values, in gradients, in the
distribution of a random op, or too slow; and that the expected-failure list behaves strictly.
"""
from __future__ import annotations

import json
import time

import pytest
import torch

from solder.conformance import cli, compare, expected, samples
from solder.conformance.results import (FAILED, PASSED, XFAILED, XPASSED, CaseResult,
                                        SampleResult)
from solder.conformance.runner import RunConfig, run_case, run_op
from solder.conformance.selection import all_opinfos

OPS = all_opinfos()


def scaled_backend(factor: float):
    """A wrong backend: every floating output of every graph is multiplied by ``factor``."""
    def backend(gm, example_inputs):
        def run(*args):
            outs = gm(*args)
            return type(outs)(o * factor if isinstance(o, torch.Tensor) and o.is_floating_point()
                              else o for o in outs)
        return run
    return backend


def slow_backend(gm, example_inputs):
    time.sleep(3)
    return gm


def test_correct_backend_passes_every_kind():
    result = run_op(OPS["add"], RunConfig(backend="aot_eager", samples=2))
    assert [c.kind for c in result.cases] == ["forward", "inplace", "gradient"]
    assert all(c.status == PASSED for c in result.cases), [c.first_failure() for c in result.cases]
    assert all(s.graphs == 1 for c in result.cases for s in c.samples if s.status == PASSED)


@pytest.mark.parametrize("kind", ["forward", "inplace", "gradient"])
def test_wrong_values_fail(kind):
    case = run_case(OPS["mul"], "float32", kind, RunConfig(backend=scaled_backend(1.001),
                                                           samples=1))
    assert case.status == FAILED
    assert "not close" in case.first_failure()
    assert "sample 0" in case.first_failure()


def test_random_op_is_compared_by_distribution():
    # dropout's samples 0 and 1 have p=0 (deterministic: compared by value); sample 2 has p=0.5
    config = RunConfig(backend="aot_eager", samples=3)
    good = run_case(OPS["nn.functional.dropout"], "float32", "forward", config)
    assert good.status == PASSED, good.first_failure()
    assert [s.check for s in good.samples] == ["values", "values", "distribution"]
    assert all(s.graphs == 1 for s in good.samples)  # really compiled, not run eagerly
    bad = run_case(OPS["nn.functional.dropout"], "float32", "forward",
                   RunConfig(backend=scaled_backend(3.0), samples=3))
    assert [s.status for s in bad.samples] == [FAILED] * 3
    assert "another distribution" in bad.samples[2].message


def test_uninitialized_output_is_compared_by_metadata():
    case = run_case(OPS["empty_like"], "float32", "forward", RunConfig(backend="aot_eager",
                                                                       samples=2))
    assert case.status == PASSED
    assert {s.check for s in case.samples} == {"metadata"}


def test_graph_breaks_are_counted():
    case = run_case(OPS["nonzero"], "float32", "forward", RunConfig(backend="aot_eager",
                                                                   samples=1))
    assert case.status == PASSED
    assert case.samples[0].graphs == 0  # data-dependent output shape: Dynamo runs it eagerly


def test_non_tensor_outputs():
    for name in ("item", "broadcast_shapes", "equal"):
        case = run_case(OPS[name], "float32", "forward", RunConfig(backend="aot_eager",
                                                                  samples=2))
        assert case.status == PASSED, (name, case.first_failure())


def test_time_limit():
    case = run_case(OPS["abs"], "float32", "forward", RunConfig(backend=slow_backend,
                                                               samples=1, timeout_s=0.5))
    assert case.status == FAILED
    assert "timed out" in case.first_failure()


def test_compare_nested_results():
    nan = float("nan")
    t = torch.tensor([1.0, nan])
    assert compare.compare((t, [3, "x"]), (t.clone(), [3, "x"]), how="values", op_name="op",
                           kind="forward") is None
    msg = compare.compare((t, [4]), (t, [3]), how="values", op_name="op", kind="forward")
    assert msg.startswith("output[1][0]: expected 3, got 4")
    msg = compare.compare(t.double(), t, how="values", op_name="op", kind="forward")
    assert "dtype differs" in msg
    assert compare.compare(torch.tensor([7]), torch.tensor([8]), how="values", op_name="op",
                           kind="forward")  # integers are exact
    assert compare.compare(1.0 + 1e-7, 1.0, how="values", op_name="op", kind="forward") is None


def test_ks_statistic():
    g = torch.Generator().manual_seed(0)
    a, b = torch.randn(4000, generator=g), torch.randn(4000, generator=g)
    assert compare.distribution_mismatch(a, b) is None
    assert compare.distribution_mismatch(a + 0.3, b) is not None
    assert compare.ks_statistic(torch.zeros(3).double(), torch.ones(3).double()) == 1.0


def test_atoms_that_differ_by_rounding_are_one_distribution():
    # a gradient taking two values, one of them rounded differently by the compiled code
    g = torch.Generator().manual_seed(1)
    coin = torch.rand(256, generator=g) < 0.5
    eager = torch.where(coin, torch.tensor(-1.5707964), torch.tensor(0.25))
    compiled = torch.where(coin, torch.tensor(-1.5707963), torch.tensor(0.25))
    assert compare.ks_statistic(compiled.double(), eager.double()) > 0.4  # the plain statistic
    assert compare.distribution_mismatch(compiled, eager) is None
    shifted = torch.where(coin, torch.tensor(-1.6), torch.tensor(0.25))   # a real difference
    assert compare.distribution_mismatch(shifted, eager) is not None


def test_copy_args_keeps_layout_and_aliasing():
    base = torch.randn(6, 8)
    view = base.t()[1:]
    sample = OPS["add"].sample_inputs("cpu", torch.float32)
    sample = next(iter(sample))
    sample.input, sample.args = view, (base,)
    (a, b), _ = samples.copy_args(sample)
    assert a.stride() == view.stride() and a.storage_offset() == view.storage_offset()
    assert torch.equal(a, view) and a.untyped_storage().data_ptr() == b.untyped_storage().data_ptr()
    assert a.untyped_storage().data_ptr() != base.untyped_storage().data_ptr()


def test_expected_failures_are_strict(tmp_path):
    listed = {("mul", "float32", "forward"): "known bug"}
    failing = CaseResult("mul", "float32", "forward", error="boom")
    passing = CaseResult("mul", "float32", "forward",
                         samples=[SampleResult(index=0, status=PASSED)])
    failing.apply_expected(listed)
    passing.apply_expected(listed)
    assert (failing.outcome, passing.outcome) == (XFAILED, XPASSED)
    new_failure = CaseResult("abs", "float32", "gradient", error="wrong   values\nhere")
    entries = expected.regenerate(listed, [passing, new_failure])
    assert entries == {("abs", "float32", "gradient"): "wrong values here"}
    path = tmp_path / "x.txt"
    expected.write(path, {**entries, ("mul", "float32", "forward"): "known bug"}, "b", "cpu")
    assert expected.load(path) == {("abs", "float32", "gradient"): "wrong values here",
                                   ("mul", "float32", "forward"): "known bug"}


def test_listed_cases_run_past_the_sample_limit_until_they_fail():
    listed = frozenset({("mul", "float32", "forward")})
    fixed = run_case(OPS["mul"], "float32", "forward",
                     RunConfig(backend="aot_eager", samples=1, expected_failures=listed))
    all_samples = len(list(OPS["mul"].sample_inputs("cpu", torch.float32)))
    assert len(fixed.samples) == all_samples > 1 and fixed.status == PASSED  # truly fixed
    still_broken = run_case(OPS["mul"], "float32", "forward",
                            RunConfig(backend=scaled_backend(1.001), samples=1,
                                      expected_failures=listed))
    assert len(still_broken.samples) == 1 and still_broken.status == FAILED


def test_cli_counts_json_and_rewrites_the_list(tmp_path, capsys):
    out, xfail = tmp_path / "out.json", tmp_path / "xfail.txt"
    xfail.write_text("abs float32 forward listed but fine\n")
    argv = ["--backend", "aot_eager", "--device", "cpu", "--ops", "abs,sum", "--samples", "1",
            "--no-grad", "--json", str(out), "--expected-failures", str(xfail)]
    assert cli.main(argv) == 1  # the listed case passes: strict
    printed = capsys.readouterr().out
    assert "unexpectedly-passed 1" in printed
    table = json.loads(out.read_text())
    assert [row["op"] for row in table["ops"]] == ["abs", "sum"]
    assert table["summary"]["cases"]["passed"] == 2
    assert cli.main(argv + ["--write-expected-failures"]) == 0
    assert expected.load(xfail) == {}
    assert cli.main(argv) == 0


def test_cli_parallel_jobs(tmp_path):
    out = tmp_path / "out.json"
    argv = ["--backend", "aot_eager", "--device", "cpu", "--ops", "abs,neg,sum", "--samples",
            "1", "--jobs", "2", "-q", "--json", str(out),
            "--expected-failures", str(tmp_path / "none.txt")]
    assert cli.main(argv) == 0
    table = json.loads(out.read_text())
    assert [row["op"] for row in table["ops"]] == ["abs", "neg", "sum"]
    assert all(row["outcome"] == "passed" for row in table["ops"])


def test_a_run_past_its_deadline_reports_what_ran_and_names_the_rest(tmp_path, capsys):
    out = tmp_path / "out.json"
    argv = ["--backend", "aot_eager", "--device", "cpu", "--ops", "abs,neg,sum", "--samples",
            "1", "--no-grad", "--jobs", "1", "-q", "--json", str(out), "--deadline", "0.001",
            "--expected-failures", str(tmp_path / "none.txt")]
    assert cli.main(argv) == 1   # incomplete: not a pass
    table = json.loads(out.read_text())
    assert table["not_run"] and len(table["not_run"]) + len(table["ops"]) == 3
    assert "ops not run (past the --deadline" in capsys.readouterr().out
    at = argv.index("--jobs")
    assert cli.main(argv[:at] + argv[at + 2:]) == 2   # a deadline needs worker processes


def test_shards_split_the_ops_without_overlap(tmp_path):
    ops = [f"op{i}" for i in range(7)]
    parts = [cli.shard(ops, f"{i}/3") for i in (1, 2, 3)]
    assert sorted(sum(parts, [])) == sorted(ops) and parts[0] == ["op0", "op3", "op6"]
    assert cli.shard(ops, None) == ops
    for bad in ("0/3", "4/3", "1-3", "a/b"):
        with pytest.raises(ValueError):
            cli.shard(ops, bad)
    out = tmp_path / "out.json"
    argv = ["--backend", "aot_eager", "--device", "cpu", "--ops", "abs,neg,sum", "--samples",
            "1", "--no-grad", "-q", "--shard", "2/2", "--json", str(out),
            "--expected-failures", str(tmp_path / "none.txt")]
    assert cli.main(argv) == 0
    assert [row["op"] for row in json.loads(out.read_text())["ops"]] == ["neg"]
    argv[argv.index("2/2")] = "3/2"
    assert cli.main(argv) == 2   # a bad spec is a usage error


def test_a_gradient_routed_to_another_tied_element_agrees_and_a_wrong_one_does_not():
    import types

    from solder.conformance import compare as cmp
    x = torch.tensor([[5.0, 5.0, 3.0], [1.0, 2.0, 2.0]], dtype=torch.bfloat16)
    sample = types.SimpleNamespace(input=x, args=(1,), kwargs={})   # topk(x, 1), dim -1
    eager = {"gradient": [torch.tensor([[0.5, 0, 0], [0, 0.25, 0]], dtype=torch.bfloat16)]}
    other_tie = {"gradient": [torch.tensor([[0, 0.5, 0], [0, 0, 0.25]], dtype=torch.bfloat16)]}
    not_a_tie = {"gradient": [torch.tensor([[0, 0, 0.5], [0, 0.25, 0]], dtype=torch.bfloat16)]}
    assert cmp.tied_gradients_agree(other_tie, eager, "topk", sample)
    assert not cmp.tied_gradients_agree(not_a_tie, eager, "topk", sample)
    assert not cmp.tied_gradients_agree(other_tie, eager, "sort", sample)   # not a listed op
    # kthvalue reduces the dimension its second argument names
    col = types.SimpleNamespace(input=x.t().contiguous(), args=(1, 0), kwargs={})
    t = {k: [v[0].t().contiguous()] for k, v in (("gradient", other_tie["gradient"]),)}
    assert cmp.tied_gradients_agree(t, {"gradient": [eager["gradient"][0].t().contiguous()]},
                                    "kthvalue", col)


def test_merged_shards_count_as_the_whole_run(tmp_path):
    from solder.conformance import merge
    base = ["--backend", "aot_eager", "--device", "cpu", "--ops", "abs,neg,sum,exp",
            "--samples", "1", "-q", "--expected-failures", str(tmp_path / "none.txt")]
    for part in ("1/2", "2/2", None):
        out = tmp_path / f"{part or 'all'}.json".replace("/", "of")
        assert cli.main(base + (["--shard", part] if part else []) + ["--json", str(out)]) == 0
    parts = [json.loads((tmp_path / f"{p}.json").read_text()) for p in ("1of2", "2of2")]
    whole = json.loads((tmp_path / "all.json").read_text())
    merged = merge.merge(parts)
    assert [r["op"] for r in merged["ops"]] == [r["op"] for r in whole["ops"]]
    assert merged["summary"] == whole["summary"] and merged["not_run"] == []
    with pytest.raises(merge.MergeError, match="op abs is in part 1 and part 2"):
        merge.merge([parts[0], parts[0]])
    with pytest.raises(merge.MergeError, match="differ in samples"):
        merge.merge([parts[0], {**parts[1], "samples": 2}])
    out = tmp_path / "merged.json"
    assert merge.main([str(tmp_path / "1of2.json"), str(tmp_path / "2of2.json"),
                       "--json", str(out)]) == 0
    assert json.loads(out.read_text())["summary"] == whole["summary"]


def test_uninitialized_outputs_are_known_without_the_opinfo_flag():
    # torch 2.11's OpInfo has no has_nondeterministic_output: the suite falls back to its list
    import types

    from solder.conformance import runner
    from solder.conformance.selection import all_opinfos
    flagged = {n for n, o in all_opinfos().items()
               if getattr(o, "has_nondeterministic_output", False)}
    if flagged:   # where PyTorch has the flag, the list says the same
        assert flagged == runner.UNINITIALIZED_OUTPUT_OPS
    bare = types.SimpleNamespace()
    assert runner._uninitialized_output(bare, "empty_like")
    assert not runner._uninitialized_output(bare, "add")
