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
