"""Kernel provenance: each kernel names the user lines of the ops it computes.

A value that a graph returns, or saves for the backward, is stored after its own op was lowered
(by a later op, or at the graph's output): it must still be named after the line that computed
it, not after the op being lowered when it was stored."""
import inspect

import torch
import torch.nn as nn
import torch.nn.functional as F

import solder


class Block(nn.Module):
    """A pre-norm transformer block, one kind of op per line."""

    def __init__(self, dim=32, heads=2):
        super().__init__()
        self.heads = heads
        self.norm1, self.norm2 = nn.LayerNorm(dim), nn.LayerNorm(dim)
        self.qkv, self.proj = nn.Linear(dim, 3 * dim), nn.Linear(dim, dim)
        self.up, self.down = nn.Linear(dim, 2 * dim), nn.Linear(2 * dim, dim)

    def forward(self, x):
        b, t, d = x.shape
        h = self.norm1(x)
        q, k, v = self.qkv(h).view(b, t, 3, self.heads, d // self.heads).permute(2, 0, 3, 1, 4)
        a = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        a = self.proj(a.transpose(1, 2).reshape(b, t, d))
        x = x + a
        h = self.norm2(x)
        h = F.gelu(self.up(h))
        return x + self.down(h)


def _line(text):
    """``file:line code`` of the line of Block.forward holding ``text``, as kernels quote it."""
    lines, first = inspect.getsourcelines(Block.forward)
    hits = [i for i, s in enumerate(lines) if text in s]
    assert len(hits) == 1, text
    return f"{__file__.rsplit('/', 1)[-1]}:{first + hits[0]} {lines[hits[0]].strip()}"


def _kernels(device):
    torch.manual_seed(0)
    model = Block().to(device)
    x = torch.randn(2, 8, 32, device=device, requires_grad=True)
    torch._dynamo.reset()
    report = solder.explain(model, x)
    assert [g.kind for g in report.graphs] == ["forward", "backward"]
    return report.graphs[0].kernels, report.graphs[1].kernels


def test_forward_kernels_name_their_own_lines(device):
    forward, _ = _kernels(device)
    norm1, norm2 = _line("self.norm1(x)"), _line("self.norm2(x)")
    residual1, residual2 = _line("x = x + a"), _line("return x + self.down(h)")
    attention = _line("scaled_dot_product_attention")
    gelu = _line("F.gelu")
    assert forward and all(k.source_lines for k in forward)
    for k in forward:
        # attention is a library call: no generated kernel computes anything of its line
        assert attention not in k.source_lines, (k.name, k.ops, k.source_lines)
    norms = [k for k in forward if any("rsqrt" in op for op in k.ops)]
    assert len(norms) == 2
    # the LayerNorms (whose statistics the backward saves) each name their own line
    assert [norm1 in k.source_lines for k in norms] == [True, False]
    assert [norm2 in k.source_lines for k in norms] == [False, True]
    assert any(gelu in k.source_lines and k.source_lines[0] == gelu for k in forward)
    # the graph's output: the second residual add, which recomputes the first (inlined)
    adds = [k for k in forward if k.ops == ["aten.add.Tensor"]]
    assert len(adds) == 1
    assert adds[0].source_lines[0] == residual2
    assert set(adds[0].source_lines) <= {residual1, residual2}


def test_backward_kernels_name_forward_lines(device):
    _, backward = _kernels(device)
    block = {_line(t) for t in ("self.norm1(x)", "self.qkv(h)", "self.proj(a",
                                "x = x + a", "self.norm2(x)", "F.gelu", "return x +")}
    assert backward
    for k in backward:
        assert k.source_lines and set(k.source_lines) <= block, (k.name, k.ops, k.source_lines)
    # each LayerNorm's backward names its line
    for norm in (_line("self.norm1(x)"), _line("self.norm2(x)")):
        assert any(norm in k.source_lines and any("sum" in op for op in k.ops)
                   for k in backward), norm
