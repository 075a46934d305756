"""Index arithmetic: simplification with ranges, loop merging, unravel/recombine."""
import sympy

from solder.ir.indexing import (FloorDiv, ModIndex, index_symbol, merge_dims, simplify_index,
                                size_symbol, unravel)

i0, i1, i2, x = (index_symbol(n) for n in ("i0", "i1", "i2", "x"))


def test_floordiv_and_mod_vanish_with_ranges():
    r = {i0: 4, i1: 3, i2: 5}
    assert simplify_index(FloorDiv(15 * i0 + 5 * i1 + i2, 5), r) == 3 * i0 + i1
    assert simplify_index(ModIndex(15 * i0 + 5 * i1 + i2, 5), r) == i2


def test_floordiv_kept_when_range_unknown():
    e = simplify_index(FloorDiv(i0 + i1, 4), {i0: 8, i1: 8})
    assert e.has(FloorDiv)


def test_symbolic_divisor():
    s0 = size_symbol("s0")
    r = {i0: 4, i1: s0}
    assert simplify_index(FloorDiv(s0 * i0 + i1, s0), r) == i0
    assert simplify_index(ModIndex(s0 * i0 + i1, s0), r) == i1


def test_merge_contiguous_dims():
    sizes, vars_, subst = merge_dims([4, 3, 5], [15 * i0 + 5 * i1 + i2], [i0, i1, i2])
    assert sizes == [60] and len(vars_) == 1


def test_merge_keeps_transposed_dims_apart():
    sizes, _, _ = merge_dims([4, 3, 5], [i0 + 4 * i1 + 12 * i2], [i0, i1, i2])
    assert sizes == [4, 3, 5]


def test_merge_partial_and_size_one():
    sizes, _, subst = merge_dims([4, 1, 3, 5], [15 * i0 + 5 * i1 + i2],
                                 [i0, index_symbol("u"), i1, i2])
    assert sizes == [60]


def test_unravel_then_store_recombines():
    idx = unravel(x, [4, 3, 5])
    assert simplify_index(15 * idx[0] + 5 * idx[1] + idx[2], {x: 60}) == x
    s0 = size_symbol("s0")
    assert simplify_index(s0 * FloorDiv(x, s0) + ModIndex(x, s0), {x: 4 * s0}) == x


def test_constant_folding():
    assert FloorDiv(sympy.Integer(17), 5) == 3
    assert ModIndex(sympy.Integer(17), 5) == 2
    assert FloorDiv(FloorDiv(x, 3), 4) == FloorDiv(x, 12)


def test_kernel_printer_handles_pytorch_symbolic_size_functions():
    # sizes of symbolic shapes arrive with PyTorch's own sympy functions (seen: Mod(s50, 8) in a
    # GPT-2 attention graph on CUDA)
    import torch.utils._sympy.functions as F
    from solder.codegen.index_printer import Printer
    s = sympy.Symbol("s50", integer=True, positive=True)
    p = Printer({s: "ks0"})
    assert p(F.Mod(s, 8)) == "(ks0 % 8)"
    assert p(F.PythonMod(s, 8)) == "(ks0 % 8)"
    assert p(F.FloorDiv(s, 8)) == "(ks0 // 8)"
    assert p(3 * s + F.Mod(s, 8)) == "((3 * ks0) + (ks0 % 8))"
    # torch 2.11: GPT-2 with a symbolic sequence length (a size padded to a multiple of 8)
    padded = F.Max(1, s - F.Mod(s, 8) + 8)
    assert p(padded) == "tl.maximum(1, ((-1 * (ks0 % 8)) + ks0 + 8))"
    assert p(F.Min(s, 4, 2 * s)) == "tl.minimum(tl.minimum((2 * ks0), 4), ks0)"
    tl = type("tl", (), {"maximum": staticmethod(max), "minimum": staticmethod(min)})
    for value in range(0, 40, 3):   # the printed forms compute what sympy says
        env = {"ks0": value, "tl": tl}
        assert eval(p(F.Mod(s, 8)), env) == value % 8
        assert eval(p(F.FloorDiv(s, 8)), env) == value // 8
        assert eval(p(padded), env) == max(1, value - value % 8 + 8)
        assert eval(p(F.Min(s, 4, 2 * s)), env) == min(value, 4)


def test_remembered_simplifications_depend_on_the_extents():
    # simplify_index remembers results per (expression, extents of its symbols): the same
    # expression under other extents is simplified anew, not answered from memory
    x = index_symbol("x")
    e = FloorDiv(x, 8)
    assert simplify_index(e, {x: 8}) == 0          # x < 8: always 0
    assert simplify_index(e, {x: 16}) == e         # x < 16: stays
    assert simplify_index(e, {x: 8}) == 0
    assert simplify_index(ModIndex(x, 8), {x: 8, index_symbol("unused"): 3}) == x


def test_remembered_merges_hand_out_fresh_lists():
    # merge_dims remembers its answers; a caller changing the lists it got must not change
    # what the next caller gets
    i0, i1 = index_symbol("i0"), index_symbol("i1")
    first = merge_dims([4, 8], [8 * i0 + i1], [i0, i1])
    first[0].append(99)
    first[2][i1] = 5
    again = merge_dims([4, 8], [8 * i0 + i1], [i0, i1])
    assert again[0] == [32] and again[1] == [i1] and again[2] == {i0: 0}


def test_a_memo_forgets_everything_past_its_limit():
    from solder.ir.indexing import Memo
    calls = []
    memo = Memo(limit=2)
    ask = lambda k: memo.get(k, lambda: calls.append(k) or k * 10)  # noqa: E731
    assert [ask(1), ask(1), ask(2)] == [10, 10, 20] and calls == [1, 2]
    ask(3)                         # full: forgets 1 and 2, keeps 3
    ask(1)
    assert calls == [1, 2, 3, 1]


def test_sizes_bound_themselves():
    # a size symbol's value bounds it: 16*s*j + 16*k + m < 64*s for j < 3, k < s, m < 16
    s, j, k, m = size_symbol("s"), index_symbol("j"), index_symbol("k"), index_symbol("m")
    e = FloorDiv(16 * s * j + 16 * k + m, 64 * s)
    assert simplify_index(e, {j: 3, k: s, m: 16}) == 0


def test_divisor_factor_divides_out():
    # a cat's flat index over symbolic rows: (192*r + x) // (192*s) == r // s for x < 192
    s, r = size_symbol("s"), index_symbol("r")
    assert simplify_index(FloorDiv(192 * r + x, 192 * s), {x: 192, r: 4 * s}) == FloorDiv(r, s)
    assert simplify_index(ModIndex(192 * r + x, 192 * s), {x: 192, r: 4 * s}) == \
        192 * ModIndex(r, s) + x
    # a factor the terms share with an integer divisor: (64*i + x) // 192 == i // 3, x < 64
    assert simplify_index(FloorDiv(64 * i0 + x, 192), {i0: 9, x: 64}) == FloorDiv(i0, 3)
    # ... not when the rest may reach the factor
    assert simplify_index(FloorDiv(192 * r + x, 192 * s), {x: 193, r: 4 * s}).has(x)


def test_divided_out_then_recombined():
    # the views around a dynamic cat's backward: the quotient and remainder of the row index
    # by the sequence length join again into the row index
    s, r = size_symbol("s"), index_symbol("r")
    e = 64 * ModIndex(r, s) + 64 * s * FloorDiv(192 * r + x, 192 * s) + x
    assert simplify_index(e, {x: 64, r: 4 * s}) == 64 * r + x


def test_divided_out_values_match():
    from solder.ir.indexing import evaluate_int
    s, r = size_symbol("s"), index_symbol("r")
    cases = [(FloorDiv(192 * r + x, 192 * s), {x: 192, r: 4 * s}),
             (ModIndex(192 * r + x, 192 * s), {x: 192, r: 4 * s}),
             (FloorDiv(64 * r + x, 192), {x: 64, r: 4 * s}),
             (ModIndex(64 * r + x, 192 * s), {x: 64, r: 4 * s})]
    for e, ranges in cases:
        simple = simplify_index(e, ranges)
        for sv in (1, 3, 5):
            for rv in range(0, 4 * sv, 3):
                for xv in range(0, int(ranges[x]), 7):
                    env = {s: sv, r: rv, x: xv}
                    assert evaluate_int(e, env) == evaluate_int(simple, env), (e, simple, env)


class _CInt(int):
    """An integer with the generated code's semantics: ``//`` and ``%`` truncate (C, Triton),
    and a negative dividend is recorded (Triton's compiler misjudged such divisions)."""
    negative = []

    def __add__(self, o): return _CInt(int(self) + int(o))
    __radd__ = __add__
    def __sub__(self, o): return _CInt(int(self) - int(o))
    def __rsub__(self, o): return _CInt(int(o) - int(self))
    def __mul__(self, o): return _CInt(int(self) * int(o))
    __rmul__ = __mul__

    def __floordiv__(self, o):
        if int(self) < 0:
            _CInt.negative.append(int(self))
        q = abs(int(self)) // abs(int(o))
        return _CInt(q if (int(self) < 0) == (int(o) < 0) else -q)

    def __mod__(self, o):
        if int(self) < 0:
            _CInt.negative.append(int(self))
        return _CInt(int(self) - int(o) * int(self.__floordiv__(o)))


def test_a_division_of_a_possibly_negative_position_is_printed_as_a_floor_of_a_non_negative_one():
    # a view's position read through its base is negative in the lanes its mask drops
    # ((rindex - 18) // 42: a circular pad's piece, fuzz seed 780169): printed lifted by a
    # multiple of the divisor, it has the IR's floor value under truncating division, and no
    # division in the generated code sees a negative dividend
    from solder.codegen.index_printer import Printer
    from solder.codegen.cpp.kernel import CppPrinter
    from solder.ir.indexing import FloorDiv, ModIndex
    r = sympy.Symbol("rindex", integer=True, nonnegative=True)
    exprs = [FloorDiv(r - 18, 42), ModIndex(FloorDiv(r, 6) - 3, 7), FloorDiv(3 * r - 4, 3),
             FloorDiv(r, 6) + ModIndex(r + 5, 7), 3 * FloorDiv(2 * ModIndex(FloorDiv(r, 6) - 3, 7)
                                                            + ModIndex(r, 6) - 7, 6)]
    for printer, env in ((Printer({r: "rindex"}), {}), (CppPrinter({r: "rindex"}), {"int64_t": _CInt})):
        for e in exprs:
            text = printer(e).replace(" / ", " // ")   # C++'s integer division
            for v in range(90):
                _CInt.negative.clear()
                got = eval(text, {**env, "rindex": _CInt(v)})
                want = int(e.subs(r, v).replace(FloorDiv, lambda a, b: a // b)
                           .replace(ModIndex, lambda a, b: a % b))
                assert int(got) == want, (text, v)
                assert not _CInt.negative, (text, v, _CInt.negative)


def test_nested_remainders_by_a_multiple_reduce_to_one():
    # a circular pad's wrapped positions: ((((y % 6) + 16) % 6 + 2) % 6) % 2 is y % 2
    from solder.ir.indexing import FloorDiv, ModIndex
    y = sympy.Symbol("y", integer=True, nonnegative=True)
    assert ModIndex(ModIndex(y, 6) + 16, 6) == ModIndex(y + 4, 6)
    assert ModIndex(ModIndex(ModIndex(ModIndex(y, 6) + 16, 6) + 2, 6), 2) == ModIndex(y, 2)
    assert ModIndex(ModIndex(y, 4) + 1, 6) == ModIndex(ModIndex(y, 4) + 1, 6)   # 6 does not divide 4
    assert ModIndex(FloorDiv(y, 6) + 4, 7) == ModIndex(FloorDiv(y, 6) + 4, 7)  # nothing to reduce
    z = sympy.Symbol("z", integer=True)   # of unknown sign: the constant kept
    assert ModIndex(z + 20, 6) == ModIndex(z + 20, 6)
