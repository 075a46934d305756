"""float16/bfloat16 results that differ from eager's pass when they are about as close as
eager's to a float64 run of the op (compare.no_less_accurate); everything else must match."""
import torch

from solder.conformance.compare import no_less_accurate


def _check(actual, expected, reference):
    return no_less_accurate(actual, expected, reference, op_name="op", kind="forward")


def test_a_result_closer_to_the_exact_one_passes_and_a_worse_one_does_not():
    exact = torch.linspace(-3, 3, 64, dtype=torch.float64) * 1.0001
    eager = (exact.half() + 0.002).half()               # eager off by a few ulps
    better = exact.half()                               # one rounding of the exact result
    worse = (exact + 0.05).half()
    assert _check(better, eager, exact)
    assert not _check(worse, eager, exact)


def test_integers_and_nan_positions_must_match_exactly():
    exact = torch.ones(4, dtype=torch.float64)
    out = {"output": (exact.half(), torch.tensor([1, 2]))}
    assert _check(out, {"output": (exact.half(), torch.tensor([1, 2]))},
                  {"output": (exact, torch.tensor([1, 2]))})
    assert not _check(out, {"output": (exact.half(), torch.tensor([1, 3]))},
                      {"output": (exact, torch.tensor([1, 3]))})
    nan = torch.tensor([float("nan"), 1.0], dtype=torch.float64)
    assert not _check(torch.tensor([0.0, 1.0]).half(), nan.half(), nan)


def test_where_eager_overflows_a_finite_result_close_to_the_exact_one_passes():
    exact = torch.tensor([70000.0, 1.0], dtype=torch.float64)   # above float16's largest
    eager = torch.tensor([float("inf"), 1.0]).half()
    # float16's largest finite value is not close to 70000: no rescue
    assert not _check(torch.tensor([65504.0, 1.0]).half(), eager, exact)
    # a compiled result that keeps float32 where eager overflowed, stored as bfloat16
    eager_bf = torch.tensor([float("inf"), 1.0]).bfloat16()
    assert _check(exact.bfloat16(), eager_bf, exact)
    assert not _check(torch.tensor([1.0, 1.0]).bfloat16(), eager_bf, exact)


def test_float32_gets_the_second_look_only_for_listed_ops():
    # eager's float32 trigamma next to a pole (pi * x rounded to float32 before sin) against a
    # kernel that computes in float64: the compiled result is the closer one
    exact = torch.tensor([1377.0506125661411, 2.0, 3.0], dtype=torch.float64)
    eager = torch.tensor([1377.1, 2.0, 3.0])   # 3.6e-5 off: outside float32 tolerance
    compiled = exact.float()
    assert no_less_accurate(compiled, eager, exact, op_name="polygamma.polygamma_n_1",
                            kind="forward")
    assert not no_less_accurate(compiled, eager, exact, op_name="add", kind="forward")
    worse = torch.tensor([1377.25, 2.0, 3.0])
    assert not no_less_accurate(worse, eager, exact, op_name="polygamma.polygamma_n_1",
                                kind="forward")
