"""FX passes before lowering keep every op that has an effect."""
import pytest
import torch
from torch.fx.experimental.proxy_tensor import make_fx

from solder.capture.passes import prepare_graph
from solder.config import Config
from solder.pipeline import CompileContext, compile_graph

# An op that returns nothing and only raises: like linalg's error checks where a torch (2.11)
# traces them without effect tokens, FX's dead-code elimination alone would drop it.
_LIB = torch.library.Library("solder_test_passes", "DEF")
_LIB.define("check_positive(Tensor x) -> ()")


def _check_positive(x):
    if bool((x <= 0).any()):
        raise ValueError("check_positive: a value is not positive")


_LIB.impl("check_positive", _check_positive, "CPU")
_LIB.impl("check_positive", lambda x: None, "Meta")


def _checked_inverse(m):
    torch.ops.solder_test_passes.check_positive(m)
    unused = m.sin()  # noqa: F841  (dead: removed)
    return (1 / m,)   # graph outputs are a tuple, as AOTAutograd makes them


def test_an_op_that_returns_nothing_survives_dead_code_removal_and_runs():
    # the op has a CPU kernel only: the graph runs on the CPU on every machine
    cpu = dict(device="cpu")
    gm = make_fx(_checked_inverse)(torch.ones(3, **cpu))
    prepare_graph(gm)
    targets = [n.target for n in gm.graph.nodes if n.op == "call_function"]
    assert torch.ops.solder_test_passes.check_positive.default in targets
    assert torch.ops.aten.sin.default not in targets
    compiled = compile_graph(gm, [torch.ones(3, **cpu)], "inference", CompileContext(Config()))
    torch.testing.assert_close(compiled([torch.full((3,), 2.0, **cpu)])[0], torch.full((3,), 0.5, **cpu))
    with pytest.raises(ValueError, match="not positive"):
        compiled([torch.tensor([1.0, -1.0, 2.0], **cpu)])


def _no_dead_code(m):
    return (m.sin() * 2,)


def test_dead_code_removal_regenerates_python_only_when_it_removed_a_node(monkeypatch):
    calls, patched = [], set()

    def counted(gm):
        # make_fx may hand back a lazily recompiling subclass (torch 2.11): patch the class
        # the graph module really has, once
        if type(gm) not in patched:
            patched.add(type(gm))
            real = type(gm).recompile
            monkeypatch.setattr(type(gm), "recompile",
                                lambda self: calls.append(1) or real(self))
        return gm
    clean = counted(make_fx(_no_dead_code)(torch.ones(3, device="cpu")))
    calls.clear()
    prepare_graph(clean)
    assert calls == []
    dirty = counted(make_fx(_checked_inverse)(torch.ones(3, device="cpu")))   # (a CPU-only op)
    calls.clear()
    prepare_graph(dirty)
    assert calls == [1]
    assert "sin" not in dirty.code   # the regenerated forward matches the graph


def test_the_report_prints_its_graph_when_first_read(monkeypatch):
    printed = []
    real = torch.fx.GraphModule.print_readable
    monkeypatch.setattr(torch.fx.GraphModule, "print_readable",
                        lambda self, *a, **k: printed.append(1) or real(self, *a, **k))
    ctx = CompileContext(Config())
    gm = make_fx(_no_dead_code)(torch.ones(3))
    compile_graph(gm, [torch.ones(3)], "inference", ctx)
    assert printed == []
    text = ctx.graphs[0].fx_graph
    assert "torch.ops.aten.sin.default" in text and printed == [1]
    assert ctx.graphs[0].fx_graph is text and printed == [1]   # printed once
