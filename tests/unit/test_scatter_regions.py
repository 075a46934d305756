"""The inverse of a view's region (solder/lower/regions.py), checked by brute force.

Index arithmetic is evaluated the way generated code does it (integer division truncates toward
zero), so an expression that divides a negative number inside the region fails here.
"""
import itertools
import random

import pytest
import sympy
import torch

from solder.ir import expr as E
from solder.ir.indexing import FloorDiv, ModIndex
from solder.lower.regions import (PositionRegion, Region, diagonal_region, select_region,
                                  slice_region, strided_region)


def _c_div(a, b):
    q = abs(a) // abs(b)
    return q if (a >= 0) == (b > 0) else -q


def ev(e, env):
    e = sympy.sympify(e)
    if e.is_Integer:
        return int(e)
    if e.is_Symbol:
        return env[e]
    if isinstance(e, FloorDiv):
        return _c_div(ev(e.args[0], env), ev(e.args[1], env))
    if isinstance(e, ModIndex):
        a, b = ev(e.args[0], env), ev(e.args[1], env)
        return a - b * _c_div(a, b)
    if e.is_Add:
        return sum(ev(a, env) for a in e.args)
    if e.is_Mul:
        out = 1
        for a in e.args:
            out *= ev(a, env)
        return out
    raise NotImplementedError(e)


def ev_value(v, env):
    if v.op == "index":
        return ev(v.args[0], env)
    if v.op == "const":
        return v.args[0]
    name, *args = v.args
    a = [ev_value(x, env) for x in args]
    return {"eq": lambda x, y: x == y, "ge": lambda x, y: x >= y, "le": lambda x, y: x <= y,
            "lt": lambda x, y: x < y, "logical_and": lambda x, y: x and y}[name](*a)


def brute(base_size, base_stride, size, stride, offset):
    """storage position -> view index, for a view of a dense base."""
    out = {}
    for j in itertools.product(*[range(n) for n in size]):
        pos = offset + sum(a * b for a, b in zip(j, stride))
        out.setdefault(pos, j)
    return out


def check_region(region, base_size, base_stride, expect):
    syms = [sympy.Symbol(f"i{k}", integer=True, nonnegative=True) for k in range(len(base_size))]
    inside, j = region.inverse(syms)
    for idx in itertools.product(*[range(n) for n in base_size]):
        env = dict(zip(syms, idx))
        pos = sum(a * b for a, b in zip(idx, base_stride))
        got = True if inside is None else ev_value(inside, env)
        assert got == (pos in expect), (idx, pos)
        if got:
            assert tuple(ev(x, env) for x in j) == expect[pos], (idx, pos)


def dense_strides(size, perm):
    strides, acc = [0] * len(size), 1
    for d in reversed(perm):
        strides[d] = acc
        acc *= size[d]
    return strides


def random_view(rng, base_size, base_stride):
    numel = 1
    for n in base_size:
        numel *= n
    nd = rng.randint(1, 3)
    size = [rng.randint(1, 4) for _ in range(nd)]
    stride = [rng.randint(0, 7) for _ in range(nd)]
    span = sum((n - 1) * s for n, s in zip(size, stride))
    if span >= numel:
        return None
    offset = rng.randint(0, numel - 1 - span)
    return size, stride, offset


@pytest.mark.parametrize("seed", range(40))
def test_strided_region_matches_brute_force(seed):
    rng = random.Random(seed)
    base_size = [rng.randint(1, 5) for _ in range(rng.randint(1, 3))]
    perm = list(range(len(base_size)))
    rng.shuffle(perm)
    base_stride = dense_strides(base_size, perm)
    view = random_view(rng, base_size, base_stride)
    if view is None:
        return
    size, stride, offset = view
    expect = brute(base_size, base_stride, size, stride, offset)
    region = strided_region(base_size, base_stride, size, stride, offset)
    overlapping = len(expect) < max(1, len(list(itertools.product(*[range(n) for n in size]))))
    if region is None:
        assert overlapping or any(s == 0 for n, s in zip(size, stride) if n > 1), view
        return
    assert not overlapping
    check_region(region, base_size, base_stride, expect)


def test_position_region_offset_not_a_multiple():
    # (6*i + j - 1) // 2 must not become 3*i + (j - 1) // 2: j - 1 < 0 at j == 0
    r = PositionRegion([4, 6], [6, 1], [11], [2], 1)
    check_region(r, [4, 6], [6, 1], brute([4, 6], [6, 1], [11], [2], 1))


def test_per_dim_region_for_sliced_rows_and_columns():
    r = strided_region([4, 3], [3, 1], [2, 2], [3, 1], 1)
    assert isinstance(r, Region)
    check_region(r, [4, 3], [3, 1], brute([4, 3], [3, 1], [2, 2], [3, 1], 1))


def test_slice_select_diagonal_regions():
    base = [4, 6]
    check_region(slice_region(base, 1, 1, 5, 2, 2), base, [6, 1], brute(base, [6, 1], [4, 2], [6, 2], 1))
    check_region(select_region(base, 0, 2), base, [6, 1], brute(base, [6, 1], [6], [1], 12))
    check_region(diagonal_region(base, 1, 0, 1, 4), base, [6, 1], brute(base, [6, 1], [4], [7], 1))
    check_region(diagonal_region(base, -1, 0, 1, 3), base, [6, 1], brute(base, [6, 1], [3], [7], 6))


def test_region_covering_everything_has_no_predicate():
    r = slice_region([3, 4], 1, 0, 4, 1, 4)
    inside, j = r.inverse([sympy.Symbol("a"), sympy.Symbol("b")])
    assert inside is None


def test_overlapping_view_has_no_region():
    assert strided_region([6], [1], [2, 3], [1, 1], 0) is None
    assert strided_region([6], [1], [3], [0], 0) is None


def test_bind_indirect_attaches_bindings_and_refuses_index_values():
    s = E.indirect_symbol(E.const(3, torch.int64))
    v = E.call("add", E.load("buf", 2 * s + 1, torch.float32), E.const(1.0, torch.float32),
               dtype=torch.float32)
    bound = E.bind_indirect(v, ((s, E.const(3, torch.int64)),))
    (ld,) = E.loads_of(bound)
    assert ld.args[3] == ((s, E.const(3, torch.int64)),)
    assert E.bind_indirect(E.index_value(s), ((s, E.const(3, torch.int64)),)) is None
