"""A training graph's backward lowered in a forked child while the forward compiles
(``compile_backward_in_child``, runtime/forked_compile.py): the same code as compiled here, used
only for the graph the child compiled, and any trouble with the child means compiling here."""
import os
import time

import pytest
import torch
import torch._dynamo

import solder
import solder.capture.aot as aot
from solder.backend import backend_for
from solder.config import Config
from solder.pipeline import CompileContext
from solder.runtime import forked_compile
from solder.runtime.forked_compile import ForkedWork

pytestmark = pytest.mark.skipif(not forked_compile.available(), reason="needs os.fork (Linux)")


def step(x, w, b):
    h = torch.tanh(x @ w + b)
    return (h * h.sigmoid()).sum(-1).mean()


def run(device, **options):
    """One compiled step with ``options``; (report per graph, loss, gradients)."""
    torch._dynamo.reset()
    torch.manual_seed(0)
    x = torch.randn(6, 8, device=device)
    w = torch.randn(8, 16, device=device, requires_grad=True)
    b = torch.randn(16, device=device, requires_grad=True)
    ctx = CompileContext(Config().replace(cache=False, **options))
    loss = torch.compile(step, backend=backend_for(None, ctx))(x, w, b)
    loss.backward()
    return ctx.graphs, loss.detach(), (w.grad, b.grad)


def generated(report):
    return ([(k.name, k.source, list(k.ops), list(k.source_lines)) for k in report.kernels],
            report.wrapper.replace(report.name, "GRAPH"),
            [(c.op, c.reason) for c in report.externs], [(c.op, c.reason) for c in report.fallbacks])


def test_the_child_compiles_the_backward_and_its_code_is_what_this_process_makes(device):
    # (the child lowers the backward before AOTAutograd names the saved tensors it donates,
    # so its code writes over none of them: it is this process's code without donation)
    with torch._functorch.config.patch(donated_buffer=False):
        here, loss, grads = run(device)
    child, loss_c, grads_c = run(device, compile_backward_in_child=True)
    assert [g.kind for g in child] == ["forward", "backward"]
    fw, bw = child
    t = bw.timings
    assert isinstance(t["child_wait"], float) and "lower" not in t, t   # lowered in the child
    assert {"in_child_lower", "in_child_schedule", "in_child_codegen"} <= set(t)
    assert "lower" in fw.timings and "child_wait" not in fw.timings     # the forward: here
    assert generated(bw) == generated(here[1])
    torch.testing.assert_close(loss_c, loss)
    for a, e in zip(grads_c, grads):
        torch.testing.assert_close(a, e)


def test_without_the_setting_or_the_early_backward_no_child_starts(device, monkeypatch):
    started = []
    real = ForkedWork.start
    monkeypatch.setattr(ForkedWork, "start", classmethod(
        lambda cls, work: started.append(1) or real.__func__(cls, work)))
    run(device)
    run(device, compile_backward_in_child=True, compile_backward_early=False)
    assert started == []
    graphs, _, _ = run(device, compile_backward_in_child=True)
    assert started == [1] and "child_wait" in graphs[1].timings


def _reason(graphs) -> str:
    bw = graphs[1]
    assert "lower" in bw.timings and "child_wait" not in bw.timings   # compiled here
    return bw.timings["child"]


def test_a_child_that_fails_means_compiling_here(device, monkeypatch):
    def boom(bw, config):
        raise RuntimeError("boom in the child")
    monkeypatch.setattr(aot, "_child_compile", boom)
    graphs, loss, grads = run(device, compile_backward_in_child=True)
    assert "RuntimeError: boom in the child" in _reason(graphs)
    _, loss_here, grads_here = run(device)
    torch.testing.assert_close(loss, loss_here)
    torch.testing.assert_close(grads[0], grads_here[0])


def test_code_for_another_graph_is_not_used(device, monkeypatch):
    real = aot._child_compile

    def other_graph(bw, config):   # the child compiles a changed copy: gradients negated
        out = next(n for n in bw.graph.nodes if n.op == "output")
        grads = list(out.args[0])
        with bw.graph.inserting_before(out):
            for i, g in enumerate(grads):
                if g is not None:
                    grads[i] = bw.graph.call_function(torch.ops.aten.neg.default, (g,))
                    grads[i].meta["val"] = g.meta["val"]
        out.args = (tuple(grads),)
        return real(bw, config)
    monkeypatch.setattr(aot, "_child_compile", other_graph)
    graphs, _, grads = run(device, compile_backward_in_child=True)
    assert "changed the backward graph" in _reason(graphs)
    _, _, grads_here = run(device)
    torch.testing.assert_close(grads[0], grads_here[0])   # not the child's negated ones


def test_a_stuck_child_is_given_up_on(device, monkeypatch):
    monkeypatch.setattr(forked_compile, "STALL_S", 0.5)
    monkeypatch.setattr(aot, "_child_compile", lambda bw, config: time.sleep(60) or {})
    t0 = time.perf_counter()
    graphs, _, _ = run(device, compile_backward_in_child=True)
    assert "used no CPU" in _reason(graphs)
    assert time.perf_counter() - t0 < 30


def test_the_backward_is_cached_and_hits_after_a_child_compiled_it(device, tmp_path):
    options = {"cache_dir": str(tmp_path), "compile_backward_in_child": True}
    for want in ("miss", "hit"):
        torch._dynamo.reset()
        ctx = CompileContext(Config().replace(**options))
        w = torch.randn(8, 16, device=device, requires_grad=True)
        loss = torch.compile(step, backend=backend_for(None, ctx))(
            torch.randn(6, 8, device=device), w, torch.zeros(16, device=device))
        loss.backward()   # the entry is written after the first call
        assert [g.timings["cache"] for g in ctx.graphs] == [want, want]
    assert "child_wait" not in ctx.graphs[1].timings   # a hit: the child was not asked


def test_forked_work_answers_reports_errors_and_exits_without_answer():
    assert ForkedWork.start(lambda: {"pid": os.getpid()}).answer()["pid"] != os.getpid()
    failing = ForkedWork.start(lambda: 1 / 0)
    assert failing.answer() is None and "ZeroDivisionError" in failing.reason
    silent = ForkedWork.start(lambda: os._exit(3))
    assert silent.answer() is None and "no answer" in silent.reason
    slow = ForkedWork.start(lambda: time.sleep(60) or {})
    slow.discard()   # stopped and reaped: no child left behind
    with pytest.raises(ChildProcessError):
        os.waitpid(slow.pid, os.WNOHANG)


def test_an_answer_arrives_on_a_descriptor_past_1024():
    # select.select cannot wait on descriptors >= 1024; a large training process has that many
    import resource
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard != resource.RLIM_INFINITY and hard < 1200:
        pytest.skip("cannot open 1100 descriptors here")
    resource.setrlimit(resource.RLIMIT_NOFILE, (max(soft, 1200), hard))
    null = os.open(os.devnull, os.O_RDONLY)
    held = [null] + [os.dup(null) for _ in range(1100)]
    try:
        work = ForkedWork.start(lambda: {"ok": True})
        assert work.done_fd >= 1024
        assert work.answer() == {"ok": True}
    finally:
        for fd in held:
            os.close(fd)
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))


def test_no_child_for_symbolic_sizes(device, monkeypatch):
    # lowering may add guards to Dynamo's shape environment; a child's copy would lose them
    started = []
    real = ForkedWork.start
    monkeypatch.setattr(ForkedWork, "start", classmethod(
        lambda cls, work: started.append(1) or real.__func__(cls, work)))
    torch._dynamo.reset()
    ctx = CompileContext(Config().replace(cache=False, compile_backward_in_child=True))
    f = torch.compile(step, backend=backend_for(None, ctx), dynamic=True)
    for rows in (6, 9):
        w = torch.randn(8, 16, device=device, requires_grad=True)
        x = torch.randn(rows, 8, device=device)
        f(x, w, torch.zeros(16, device=device)).backward()
        w2 = w.detach().clone().requires_grad_()
        step(x, w2, torch.zeros(16, device=device)).backward()
        torch.testing.assert_close(w.grad, w2.grad)
    assert started == [] and ctx.graphs and "lower" in ctx.graphs[-1].timings


def test_a_child_cannot_stop_its_parents_other_child():
    # each child holds a copy of the parent's handles; discarding one there must not kill the
    # parent's child
    first = ForkedWork.start(lambda: time.sleep(0.5) or {"first": True})
    second = ForkedWork.start(lambda: first.discard() or {"second": True})
    assert second.answer() == {"second": True}
    assert first.answer() == {"first": True}
