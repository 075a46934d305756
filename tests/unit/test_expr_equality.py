"""Value DAG equality (ir/expr.py): structural, and linear in the DAG's size even when children
are shared (a running maximum references the previous maximum twice)."""
import torch

from solder.ir import expr as E


def _running_max(n: int, last: float = 0.0):
    best = E.const(float("-inf"), torch.float32)
    for k in range(n):
        v = E.const(float(k) if k < n - 1 else last, torch.float32)
        take = E.call("gt", v, best, dtype=torch.bool)
        best = E.call("where", take, v, best, dtype=torch.float32)
    return best


def test_equal_dags_built_twice_compare_equal_at_depth_64():
    # built separately: no shared objects between the two, 2^64 paths through each
    assert _running_max(64) == _running_max(64)
    assert hash(_running_max(64)) == hash(_running_max(64))


def test_dags_that_differ_deep_inside_compare_unequal():
    assert _running_max(64, last=1.0) != _running_max(64, last=2.0)
    assert E.const(1, torch.int64) != E.const(1, torch.int32)


def test_an_equal_value_made_again_is_the_same_object():
    # hash-consing: looking a value up among emitted ones is then comparing two objects
    assert _running_max(64) is _running_max(64)
    a = E.call("add", E.const(1.0, torch.float32), E.const(2.0, torch.float32),
               dtype=torch.float32)
    assert E.call("add", E.const(1.0, torch.float32), E.const(2.0, torch.float32),
                  dtype=torch.float32) is a
    # what compared unequal stays apart: dtype, -0.0 against 0.0, and each distinct NaN bit
    # pattern written the same way compares equal (as it did: floats are keyed by repr)
    assert E.const(0.0, torch.float32) is not E.const(-0.0, torch.float32)
    assert E.const(1, torch.int64) is not E.const(1, torch.int32)
    assert E.const(float("nan"), torch.float32) is E.const(float("nan"), torch.float32)


def test_a_value_nothing_holds_is_forgotten():
    import gc
    before = len(E._MADE)
    v = E.const(123456.5, torch.float64)
    assert len(E._MADE) == before + 1
    del v
    gc.collect()
    assert len(E._MADE) == before
