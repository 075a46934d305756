"""``python -m solder demo``: a transformer block compiled forward and backward.

Prints the kernels Solder generated, checks outputs and gradients against eager, and on a GPU
times eager, inductor and Solder side by side.
"""
from __future__ import annotations

import os
import sys
import time

import torch
import torch.nn as nn
import torch.nn.functional as F

from .cli_help import Parser


class TransformerBlock(nn.Module):
    def __init__(self, dim: int, heads: int):
        super().__init__()
        self.heads = heads
        self.norm1, self.norm2 = nn.LayerNorm(dim), nn.LayerNorm(dim)
        self.qkv, self.out = nn.Linear(dim, 3 * dim), nn.Linear(dim, dim)
        self.up, self.down = nn.Linear(dim, 4 * dim), nn.Linear(4 * dim, dim)

    def forward(self, x):
        b, t, d = x.shape
        q, k, v = self.qkv(self.norm1(x)).split(d, dim=-1)
        q, k, v = (z.view(b, t, self.heads, d // self.heads).transpose(1, 2) for z in (q, k, v))
        a = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        x = x + self.out(a.transpose(1, 2).reshape(b, t, d))
        return x + self.down(F.gelu(self.up(self.norm2(x)), approximate="tanh"))


def main(argv=None) -> int:
    p = Parser(prog="python -m solder demo", description=__doc__)
    p.add_argument("--show-source", action="store_true", help="print every kernel's Triton source")
    args = p.parse_args(argv)
    import solder

    cuda = torch.cuda.is_available()
    device = "cuda" if cuda else "cpu"
    dtype = torch.bfloat16 if cuda else torch.float32
    dim, heads, batch, seq = (1024, 16, 8, 512) if cuda else (64, 4, 2, 16)
    if not cuda:
        print("no GPU: kernels run through Triton's interpreter on the CPU (small sizes)")
    torch.manual_seed(0)
    model = TransformerBlock(dim, heads).to(device, dtype)
    x = torch.randn(batch, seq, dim, device=device, dtype=dtype, requires_grad=True)

    t0 = time.perf_counter()
    report = solder.explain(model, x)
    print(f"compiled in {time.perf_counter() - t0:.2f} s\n")
    print(report)
    if args.show_source:
        print("\n" + report.source())

    # check forward and backward against eager
    ref = model(x)
    ref.float().square().mean().backward()
    ref_grads = [p.grad.clone() for p in model.parameters()] + [x.grad.clone()]
    model.zero_grad()
    x.grad = None
    torch._dynamo.reset()
    compiled = torch.compile(model, backend="solder")
    out = compiled(x)
    out.float().square().mean().backward()
    grads = [p.grad for p in model.parameters()] + [x.grad]
    tol = dict(rtol=2e-2, atol=2e-2) if dtype == torch.bfloat16 else dict(rtol=1e-4, atol=1e-4)
    torch.testing.assert_close(out, ref, **tol)
    for g, r in zip(grads, ref_grads):
        torch.testing.assert_close(g, r, **tol)
    print(f"\noutputs and {len(grads)} gradients match eager")

    if cuda:
        _time_backends(model, x)
    return 0


def _time_backends(model, x):
    from triton.testing import do_bench

    def step(fn):
        def run():
            out = fn(x)
            out.float().square().mean().backward()
        return run

    rows = []
    for name in ("eager", "inductor", "solder"):
        torch._dynamo.reset()
        fn = model if name == "eager" else torch.compile(model, backend=name)
        step(fn)()  # compile and warm up
        torch.cuda.synchronize()
        ms = do_bench(step(fn), warmup=25, rep=200, return_mode="median")
        rows.append((name, ms))
    base = rows[0][1]
    print("\nforward + backward, median of repeated runs:")
    for name, ms in rows:
        print(f"  {name:<9} {ms:8.3f} ms   {base / ms:5.2f}x eager")


if __name__ == "__main__":
    sys.exit(main())
