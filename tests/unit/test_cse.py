"""Solder's CSE on the joint graph (capture/cse.py): merges what is provably the same value, and
a training compile no longer imports TorchInductor through the partitioner's own CSE."""
import operator
import subprocess
import sys
import textwrap

import torch
import torch.fx as fx
from torch.fx.experimental.proxy_tensor import make_fx

from solder.capture.cse import eliminate_common_subexpressions

aten = torch.ops.aten


def _calls(gm, target=None):
    return [n for n in gm.graph.nodes if n.op == "call_function"
            and (target is None or n.target == target)]


def _cse(fn, *args):
    gm = make_fx(fn)(*args)
    removed = eliminate_common_subexpressions(gm.graph)
    gm.graph.lint()
    gm.recompile()
    return gm, removed


def test_duplicates_are_merged_and_results_kept():
    def f(w, x):
        a = x @ w.t()
        b = x @ w.t()             # the same transpose and matmul again
        return ((a + b).sum(),)
    w, x = torch.randn(4, 3), torch.randn(2, 3)
    gm, removed = _cse(f, w, x)
    assert removed == 2
    assert len(_calls(gm, aten.t.default)) == 1 and len(_calls(gm, aten.mm.default)) == 1
    torch.testing.assert_close(gm(w, x)[0], f(w, x)[0])


def test_argument_types_tell_calls_apart():
    # 2 and 2.0 and True compare equal in Python, but they are different op arguments
    def f(x):
        return (aten.add.Tensor(x, 2), aten.add.Tensor(x, 2.0), aten.add.Tensor(x, True))
    gm, removed = _cse(f, torch.arange(3))
    assert removed == 0
    assert [o.dtype for o in gm(torch.arange(3))] == [torch.int64, torch.float32, torch.int64]


def test_random_and_uninitialized_values_are_never_merged():
    def f(x):
        r1, r2 = torch.rand_like(x), torch.rand_like(x)
        e1, e2 = torch.empty_like(x), torch.empty_like(x)
        return (r1 + r2, e1, e2)
    gm, removed = _cse(f, torch.ones(3))
    assert removed == 0
    assert len(_calls(gm, aten.rand_like.default)) == 2


def test_a_mutation_separates_values_computed_before_and_after_it():
    def f(x, y):
        a = x * 2
        x.add_(y)                 # x changes: x * 2 after this is another value
        b = x * 2
        return (a, b)
    x, y = torch.ones(3), torch.ones(3)
    gm, removed = _cse(f, x.clone(), y)
    assert removed == 0
    a, b = gm(x.clone(), y)
    assert a.tolist() == [2.0] * 3 and b.tolist() == [4.0] * 3


def test_outputs_that_are_distinct_tensors_stay_distinct():
    def f(x):
        return (x.view(6), x.view(6), (x + 1).sum())   # two views of an input, returned
    gm, removed = _cse(f, torch.ones(2, 3))
    assert removed == 0
    a, b, _ = gm(torch.ones(2, 3))
    assert a is not b


def test_results_of_a_merged_multi_output_op_are_merged_through_getitem():
    def f(x, w, b):
        y1 = aten.native_layer_norm.default(x, [4], w, b, 1e-5)
        y2 = aten.native_layer_norm.default(x, [4], w, b, 1e-5)
        return ((y1[0] * y2[0]).sum(),)
    args = torch.randn(3, 4), torch.randn(4), torch.randn(4)
    gm, removed = _cse(f, *args)
    assert len(_calls(gm, aten.native_layer_norm.default)) == 1
    # make_fx takes all three results of each call: the second call's three getitems go too
    assert len(_calls(gm, operator.getitem)) == 3
    assert removed == 4
    torch.testing.assert_close(gm(*args)[0], f(*args)[0])


def test_ops_outside_aten_and_prims_are_left_alone():
    lib = torch.library.Library("solder_test_cse", "DEF")   # noqa: F841 - kept alive below
    lib.define("bump(Tensor x) -> Tensor")
    lib.impl("bump", lambda x: x + 1, "CompositeExplicitAutograd")
    g = fx.Graph()
    x = g.placeholder("x")
    a = g.call_function(torch.ops.solder_test_cse.bump.default, (x,))
    b = g.call_function(torch.ops.solder_test_cse.bump.default, (x,))
    g.output((a, b))
    assert eliminate_common_subexpressions(g) == 0


def test_a_training_compile_imports_no_torch_inductor():
    # the partitioner's own CSE imported TorchInductor's pattern matcher (~180 modules)
    code = """
        import os, sys
        os.environ["TRITON_INTERPRET"] = "1"
        import torch, solder
        lin = torch.nn.Linear(8, 8)
        f = torch.compile(lambda x: torch.nn.functional.gelu(lin(x)).sum(), backend="solder")
        f(torch.randn(4, 8)).backward()
        assert lin.weight.grad is not None
        print("inductor modules:", sorted(m for m in sys.modules if m.startswith("torch._inductor")
                                         and not m.startswith(("torch._inductor.inductor_prims",
                                                               "torch._inductor.config",
                                                               "torch._inductor.custom_graph_pass"))))
    """
    out = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True,
                         text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    assert "torch._inductor.pattern_matcher" not in out.stdout, out.stdout[-2000:]
