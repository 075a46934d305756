"""What a user sees: explain reports, fallbacks with reasons, dumps, clear errors."""
import os

import pytest
import torch

import solder
from solder.runtime.launch import KernelCompileError

from .helpers import check


def test_unlowered_op_falls_back_and_is_listed():
    r = check(lambda x: torch.histc(x, bins=4) * 2, torch.randn(4, 6))   # no lowering
    ops = [f.op for f in r.fallbacks]
    assert any("histc" in op for op in ops)
    assert all(f.reason for f in r.fallbacks)
    assert "ATen fallback" in str(r)


def test_kernels_name_their_ops_and_source_lines():
    def f(x):
        return torch.exp(x) * 2
    r = solder.explain(f, torch.randn(8))
    k = r.graphs[0].kernels[0]
    assert "aten.exp" in k.ops and "aten.mul.Tensor" in k.ops
    assert "# fuses:" in k.source
    if "torch.exp(x) * 2" in r.graphs[0].fx_graph:  # the graph carries stack traces
        assert any("torch.exp(x) * 2" in s for s in k.source_lines), (k.source_lines,
                                                                       r.graphs[0].fx_graph)


def test_debug_dir_dumps_every_stage(tmp_path):
    solder.explain(lambda x: x.softmax(-1), torch.randn(4, 8), options={"debug_dir": str(tmp_path)})
    (graph_dir,) = list(tmp_path.iterdir())
    names = {p.name for p in graph_dir.iterdir()}
    assert {"fx_graph.txt", "ir.txt", "schedule.txt", "kernels.py", "wrapper.py"} <= names


def test_debug_dir_from_environment(tmp_path, monkeypatch):
    monkeypatch.setenv("SOLDER_DEBUG_DIR", str(tmp_path))
    torch.compile(lambda x: x + 1, backend="solder")(torch.randn(3))
    assert any(tmp_path.iterdir())


def test_kernel_failure_names_kernel_and_graph(monkeypatch):
    from solder.codegen import scalar_ops
    monkeypatch.setitem(scalar_ops.SCALAR_OPS, "exp", lambda a, d: f"tl.no_such_fn({a[0]})")
    with pytest.raises(Exception) as info:
        torch.compile(lambda x: torch.exp(x), backend="solder",
                      options={"cache": False})(torch.randn(4))
    text = str(info.value)
    assert "k0" in text and "graph" in text and "no_such_fn" in text


def test_input_with_other_strides_is_refused_not_misread():
    from solder.pipeline import CompileContext
    import torch._dynamo
    compiled = torch.compile(lambda x: x * 2, backend="solder")
    x = torch.randn(4, 4)
    compiled(x)
    # dynamo guards on strides, so a transposed input recompiles and stays right
    assert torch.equal(compiled(x.t()), x.t() * 2)


def test_solder_debug_backend_runs_graphs_eagerly():
    out = torch.compile(lambda x: x.softmax(-1) * 2, backend="solder_debug")(torch.randn(3, 5))
    assert out.shape == (3, 5)


def test_cpu_graph_with_the_native_target_off_runs_eagerly_and_says_so(monkeypatch):
    import solder.pipeline as P
    monkeypatch.setattr(P, "_interpreting", lambda: False)
    monkeypatch.setenv("SOLDER_CPU_CODEGEN", "0")
    x = torch.randn(4, device="cpu")
    r = solder.explain(lambda t: t.sin() * 2, x)
    assert r.kernel_count == 0
    assert any(f.op == "whole graph" and "cpu_codegen is off" in f.reason for f in r.fallbacks)
    out = torch.compile(lambda t: t.sin() * 2, backend="solder")(x)
    assert torch.allclose(out, x.sin() * 2)


def test_cpu_graph_left_to_aten_runs_as_dynamo_captured_it(monkeypatch):
    """Not AOTAutograd's decomposed graph op by op (gelu as nine ops): eager's own kernels,
    gradients through eager autograd."""
    import solder.pipeline as P
    monkeypatch.setattr(P, "_interpreting", lambda: False)
    monkeypatch.setenv("SOLDER_CPU_CODEGEN", "0")

    def fn(t):
        return torch.nn.functional.gelu(t * 2 + 1).softmax(-1).sum(-1)
    x = torch.randn(6, 8, device="cpu", requires_grad=True)
    r = solder.explain(fn, x.detach())
    assert [g.kind for g in r.graphs] == ["as captured"], [g.kind for g in r.graphs]
    assert "gelu" in r.graphs[0].fx_graph and "erf" not in r.graphs[0].fx_graph
    compiled = torch.compile(fn, backend="solder")
    compiled(x)
    with torch.autograd.profiler.profile() as prof:
        out = compiled(x)
    names = {e.name for e in prof.function_events}
    assert "aten::gelu" in names and "aten::erf" not in names, sorted(names)
    out.sum().backward()
    x2 = x.detach().clone().requires_grad_()
    fn(x2).sum().backward()
    assert torch.allclose(out, fn(x2)) and torch.allclose(x.grad, x2.grad)


@pytest.mark.parametrize("dtype", [torch.float8_e4m3fn, torch.float8_e5m2])
def test_float8_casts_run_in_aten_and_say_why(dtype):
    def fn(x):
        return (x * 2).to(dtype).to(torch.float32) + 1
    x = torch.randn(16)
    out = torch.compile(fn, backend="solder")(x)
    assert torch.equal(out, fn(x))
    report = solder.explain(fn, x)
    reasons = [f.reason for f in report.fallbacks]
    assert any(str(dtype) in why and "not lowered" in why for why in reasons), reasons
    assert report.kernel_count >= 1   # the multiply and the add are still generated
