"""Modules, parameters and buffers, training graphs (forward + backward), no_grad, aliasing."""
import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F

import solder

from .helpers import assert_same, check


class Block(nn.Module):
    def __init__(self, d=32, heads=4):
        super().__init__()
        self.ln1, self.ln2 = nn.LayerNorm(d), nn.LayerNorm(d)
        self.qkv, self.proj = nn.Linear(d, 3 * d), nn.Linear(d, d)
        self.fc1, self.fc2 = nn.Linear(d, 4 * d), nn.Linear(4 * d, d)
        self.heads = heads
        self.register_buffer("scale", torch.tensor(1.0))

    def forward(self, x):
        b, t, d = x.shape
        q, k, v = self.qkv(self.ln1(x)).split(d, -1)
        q, k, v = (z.view(b, t, self.heads, -1).transpose(1, 2) for z in (q, k, v))
        a = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        x = x + self.proj(a.transpose(1, 2).reshape(b, t, d)) * self.scale
        return x + self.fc2(F.gelu(self.fc1(self.ln2(x))))


def _grads(model):
    return [p.grad for p in model.parameters()]


def test_transformer_block_forward_backward():
    torch.manual_seed(0)
    model = Block()
    x = torch.randn(2, 8, 32, requires_grad=True)
    ref = model(x)
    ref.sum().backward()
    ref_grads, ref_xg = _grads(model), x.grad
    model.zero_grad()
    x2 = x.detach().clone().requires_grad_()
    out = torch.compile(model, backend="solder")(x2)
    out.sum().backward()
    assert_same(out, ref, rtol=1e-4, atol=1e-4)
    assert_same(x2.grad, ref_xg, rtol=1e-4, atol=1e-4)
    for g, r in zip(_grads(model), ref_grads):
        assert_same(g, r, rtol=1e-4, atol=1e-4)


def test_explain_reports_forward_and_backward_graphs():
    model = Block()
    report = solder.explain(model, torch.randn(2, 8, 32, requires_grad=True))
    kinds = [g.kind for g in report.graphs]
    assert kinds == ["forward", "backward"]
    assert report.kernel_count >= 4
    assert any("mm" in e.op for g in report.graphs for e in g.externs)
    assert "kernel" in str(report)


def test_no_grad_region_is_an_inference_graph():
    model = Block()
    with torch.no_grad():
        report = solder.explain(model, torch.randn(2, 8, 32))
        out = torch.compile(model, backend="solder")(torch.ones(2, 8, 32))
    assert [g.kind for g in report.graphs] == ["inference"]
    assert_same(out, model(torch.ones(2, 8, 32)), rtol=1e-4, atol=1e-4)


def test_several_outputs_and_outputs_aliasing_each_other():
    def f(x):
        y = x * 2
        return y, y.view(-1), y[1], x.t()
    x = torch.randn(4, 3, requires_grad=True)
    check(f, x, grad=True)
    out = torch.compile(f, backend="solder")(torch.randn(4, 3))
    assert out[1].data_ptr() == out[0].data_ptr()


def test_buffers_mutated_in_forward():
    class Counter(nn.Module):
        def __init__(self):
            super().__init__()
            self.register_buffer("running", torch.zeros(4))

        def forward(self, x):
            self.running.add_(x.mean(0))
            return x * 2

    m, ref_m = Counter(), Counter()
    x = torch.randn(3, 4)
    out = torch.compile(m, backend="solder")(x)
    ref = ref_m(x)
    assert_same(out, ref)
    assert_same(m.running, ref_m.running)


def test_mixed_precision_linear_backward():
    check(lambda x, w: F.silu(x @ w).float().sum(-1), torch.randn(8, 16, dtype=torch.bfloat16,
                                                              requires_grad=True),
          torch.randn(16, 8, dtype=torch.bfloat16, requires_grad=True), grad=True, rtol=2e-2,
          atol=2e-2)


@pytest.mark.parametrize("early", [False, True])
def test_backward_compiles_at_capture_when_asked(early, monkeypatch):
    import solder.capture.aot as aot
    kinds = []
    real = aot.compile_graph

    def recording(gm, example_inputs, kind, ctx):
        kinds.append(kind)
        return real(gm, example_inputs, kind, ctx)
    monkeypatch.setattr(aot, "compile_graph", recording)
    torch._dynamo.reset()
    w = torch.randn(8, 8, requires_grad=True)
    x = torch.randn(4, 8)
    f = torch.compile(lambda a, b: torch.tanh(a @ b).sum(), backend="solder",
                      options={"compile_backward_early": early})
    loss = f(x, w)
    assert kinds == (["forward", "backward"] if early else ["forward"])
    loss.backward()
    assert kinds == ["forward", "backward"]
    w2 = w.detach().clone().requires_grad_()
    torch.tanh(x @ w2).sum().backward()
    assert_same(w.grad, w2.grad)


def test_a_conv_batch_norm_step_saves_low_precision_conv_outputs_not_float32_intermediates():
    # the forward saved x.float() - mean of each batch norm (float32) where the bf16 convolution
    # output, from which the backward recomputes it, is half the bytes: the rule that keeps
    # what eager saves from a graph input (capture/saved_values.py) marked values computed
    # after a convolution too, which the partitioner never recomputes from the input
    torch.manual_seed(0)
    net = nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.BatchNorm2d(8), nn.ReLU(),
                        nn.Conv2d(8, 8, 3, padding=1), nn.BatchNorm2d(8), nn.ReLU())
    kind = "cuda" if torch.cuda.is_available() else "cpu"
    net = net.to(kind)
    x = torch.randn(2, 3, 16, 16, device=kind)

    def step(x):
        with torch.autocast(kind, dtype=torch.bfloat16):
            return net(x).float().sum()

    saved = []

    def pack(t):
        saved.append((tuple(t.shape), t.dtype))
        return t

    loss = torch.compile(step, backend="solder")
    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        out = loss(x)
    out.backward()
    activations = [dtype for shape, dtype in saved if shape == (2, 8, 16, 16)]
    assert activations and torch.float32 not in activations, saved
    # (the gradients are bf16's: they differ from eager's by rounding, as much as before)
    assert all(p.grad is not None and p.grad.isfinite().all() for p in net.parameters())
