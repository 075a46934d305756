"""The minimizer, on synthetic failures; and the program edits it is made of."""
from solder.fuzz.generate import eager_runs, generate, value_types
from solder.fuzz.minimize import minimize
from solder.fuzz.program import Program, Stmt
from solder.fuzz.run import EAGER_REJECTED, ERROR, PASS, WRONG, Outcome


def _numel(p):
    return p.size()[3]


def _failing_when(pred, category="value", label="output 0"):
    """A check that fails (the same way every time) when pred(program, grad) holds and eager
    runs the program, as the worker's check does."""
    calls = []

    def check(program, grad):
        calls.append(program)
        if eager_runs(program, grad) is not None:
            return Outcome(EAGER_REJECTED)
        if pred(program, grad):
            return Outcome(WRONG, "x", diffs=[(label, category, "x")])
        return Outcome(PASS)
    return check, calls


def _seed_with(op):
    for seed in range(400):
        p = generate(seed).program
        if op in p.ops() and len(p.stmts) >= 6:
            return p
    raise AssertionError(f"no seed draws {op}")


def test_shrinks_to_the_statement_that_fails():
    program = _seed_with("index_add")
    check, calls = _failing_when(lambda p, g: "index_add" in p.ops())
    failure = check(program, True)
    got = minimize(program, failure, True, check, max_checks=300)
    assert got.outcome.kind == WRONG and "index_add" in got.program.ops()
    assert len(got.program.stmts) <= 2 < len(program.stmts)
    assert got.grad is False                   # the failure is in the forward: no backward
    # smaller in the minimizer's order (statements first: an input may grow where a removed
    # statement had made a later one's operand from it)
    assert got.program.size() < program.size()
    assert got.checks == len(calls) - 1 <= 300


def test_shrinks_dimensions_and_plainness_while_it_fails():
    program = _seed_with("sum")
    big = max(sum(s for s in i.shape) for i in program.inputs)

    def fails(p, g):
        return "sum" in p.ops()
    check, _ = _failing_when(fails)
    got = minimize(program, check(program, False), False, check, max_checks=400)
    assert all(not i.layout and i.values == "normal" for i in got.program.inputs)
    assert all(s <= 1 for i in got.program.inputs for s in i.shape) or big <= 1


def test_keeps_a_different_failure_out():
    program = _seed_with("index_add")
    # fails with an error only while a cast is there, wrong otherwise: never the same failure
    # after the cast is gone, so the cast stays

    def check(p, g):
        if eager_runs(p, g) is not None:
            return Outcome(EAGER_REJECTED)
        if any(s.family == "cast" for s in p.stmts):
            return Outcome(ERROR, error="Boom: here")
        return Outcome(WRONG, diffs=[("output 0", "value", "x")])
    if not any(s.family == "cast" for s in program.stmts):
        program.stmts.insert(0, Stmt("v90 = a0.to(torch.float64)", "v90", "to_float64", "cast"))
    got = minimize(program, check(program, False), False, check, max_checks=200)
    assert got.outcome.kind == ERROR and any(s.family == "cast" for s in got.program.stmts)


def test_budget_is_kept():
    program = _seed_with("index_add")
    check, calls = _failing_when(lambda p, g: True)
    got = minimize(program, check(program, False), False, check, max_checks=3)
    assert got.checks == 3 and len(calls) == 4


def test_edits():
    p = Program(0, generate(5).program.inputs[:1], [
        Stmt("v0 = a0 + 1", "v0"), Stmt("v1 = v0 * 2", "v1"), Stmt("v2 = a0 - 1", "v2"),
        Stmt("v3 = v1 + v2", "v3")], ["v1", "v3"])
    assert [s.target for s in p.without_stmts({0}).stmts] == ["v2"]
    assert p.without_stmts({0}).outputs == []
    q = p.promoted(1, (2,), "float32")
    assert [s.code for s in q.stmts] == ["v0 = a0 + 1", "v2 = a0 - 1", "v3 = a1 + v2"]
    assert q.outputs == ["a1", "v3"] and q.inputs[-1].name == "a1"
    r = Program.from_json(q.to_json()).without_input("a0")
    assert [i.name for i in r.inputs] == ["a0"]
    assert r.stmts[-1].code == "v3 = a0 + v2"
    types = value_types(generate(5).program)
    assert all(isinstance(shape, tuple) for shape, _ in types.values())
