"""The differential fuzzer over a fixed budget of seeds (Triton's interpreter on the CPU, two
worker processes, about two minutes on a 2-core machine), and larger budgets: slow, and on
the GPU."""
import json
import re

import pytest

from solder.fuzz.cli import main

FORWARD_SEEDS = "0:200"
GRAD_SEEDS = "0:150"

# What AOTAutograd itself raises on programs eager runs (found by running aot_eager as the
# backend; Solder, which captures through AOTAutograd, raises the same and the fuzzer counts
# them as explained by the control):
AOT_AUTOGRAD_ERRORS = {
    # the group_norm backward decomposition divides by the group's element count, 0 for an
    # empty input
    "group_norm of an empty input": r"ZeroDivisionError: float division by zero",
    # autograd's version check on a tensor the compiled forward saved and then wrote in
    # place (a write into an input or a view of one, applied after the graph), and its view
    # check on a view of a multi-output view op whose base is written
    "saved tensor written by the graph's own input mutation":
        r"one of the variables needed for gradient computation has been modified by an inplace",
    "view of a multi-output view op written through its base":
        r"is a view and its base or another view of its base has been modified inplace",
    # the joint graph is traced for every float output, eager needed no floor_divide derivative
    "floor_divide's missing derivative": r"derivative for aten::floor_divide is not implemented",
    # an input written in place through views of a view of it (`v1 = a1.unflatten(-1, (2,
    # -1))`, `v1.diagonal()[..., 0] = 3`, `v1.transpose(0, -1).scatter_add_(...)`): the
    # runtime wrapper's replay of the views fails (seed 167 since 0681b6b; Solder runs it)
    "views of an input replayed after writes through them":
        r"Cannot view a tensor with shape .* and strides .* as a tensor with shape",
}

# ... and what AOTAutograd gets wrong: a write into a 0-d float64 input is lost (`a0.mul_(2)`,
# `a0.copy_(1e-3)`: the input keeps its value and the graph reads the old one; Dynamo alone,
# backend "eager", keeps it)
AOT_AUTOGRAD_WRONG = {
    "write into a 0-d float64 input lost": r"^input a\d after the call: .*\(torch.float64, shape \(\)\)",
}

# The CI seeds all pass at 202781f (forward seeds 80 and 91, gradient seeds 30, 133, 142 and
# 143 failed before the fixes of cf9b5c6 to 202781f). What larger budgets still find:
OPEN_CLASSES = ("open classes (issue 37): a comparison of two float64 values equal up to the "
                "last bit of a transcendental function (x <= logit(sigmoid(x))) tips the other "
                "way; the min-cut partitioner saves a graph input for the backward that a later "
                "graph writes in place, and autograd's version check raises (inductor too; "
                "eager saved something else); GPU-only differences still being minimized")


def fuzz(tmp_path, *args):
    report = tmp_path / "report.json"
    code = main([*args, "--jobs", "2", "--no-minimize", "--out", str(tmp_path / "found"),
                 "--json", str(report), "-q"])
    with open(report) as f:
        got = json.load(f)
    return code, got


def _failures(report):
    return [f"seed {r['seed']}: {r['kind']}: {r['error'] or r['detail'][:300]}"
            for r in report["programs"] if r["kind"] in ("wrong", "error", "timeout", "crash")]


def _check_control(report):
    c = report["counts"]
    assert c["crash"] == 0 and c["timeout"] == 0, _failures(report)
    known = {"error": (AOT_AUTOGRAD_ERRORS, "error"), "wrong": (AOT_AUTOGRAD_WRONG, "detail")}
    unexplained = [r for r in report["programs"] if r["kind"] in known and not any(
        re.search(p, r[known[r["kind"]][1]]) for p in known[r["kind"]][0].values())]
    assert not unexplained, _failures(report)


def test_aot_eager_finds_nothing(tmp_path):
    """The control: the same seeds through AOTAutograd alone. Anything here is the
    generator's, the comparator's or AOTAutograd's fault, never Solder's."""
    _, fwd = fuzz(tmp_path, "--seeds", FORWARD_SEEDS, "--backend", "aot_eager", "--device", "cpu")
    _check_control(fwd)
    assert fwd["counts"]["programs"] == 200 and fwd["counts"]["pass"] >= 190
    _, grad = fuzz(tmp_path, "--seeds", GRAD_SEEDS, "--grad", "--backend", "aot_eager",
                   "--device", "cpu")
    _check_control(grad)


def test_solder_forward(tmp_path):
    code, report = fuzz(tmp_path, "--seeds", FORWARD_SEEDS, "--device", "cpu")
    assert code == 0, _failures(report)


def test_solder_gradients(tmp_path):
    code, report = fuzz(tmp_path, "--seeds", GRAD_SEEDS, "--grad", "--device", "cpu")
    assert code == 0, _failures(report)


@pytest.mark.slow
@pytest.mark.xfail(strict=False, reason=OPEN_CLASSES)
def test_solder_larger_budget(tmp_path):
    code, fwd = fuzz(tmp_path, "--seeds", "1000:2000", "--device", "cpu")
    code_grad, grad = fuzz(tmp_path, "--seeds", "1000:1600", "--grad", "--device", "cpu")
    assert code == 0 and code_grad == 0, _failures(fwd) + _failures(grad)


@pytest.mark.gpu
@pytest.mark.xfail(strict=False, reason=OPEN_CLASSES)
def test_solder_on_the_gpu(tmp_path):
    code, fwd = fuzz(tmp_path, "--seeds", "0:2000", "--device", "cuda")
    code_grad, grad = fuzz(tmp_path, "--seeds", "0:1000", "--grad", "--device", "cuda")
    assert code == 0 and code_grad == 0, _failures(fwd) + _failures(grad)


def test_show_prints_the_program(capsys):
    assert main(["--show", "3"]) == 0
    text = capsys.readouterr().out
    assert "def fn(" in text and "def make_inputs(" in text
    compile(text, "<shown>", "exec")
