"""The ``decode`` case: a LLaMA-style decoder generating one token per call at batch 1, its KV
cache in module buffers written in place each step (``index_copy_`` at the step's position),
attention over the whole cache with the positions not yet written masked off. One timed call
is ``TOKENS`` steps (teacher-forced: the tokens are fixed, so every backend computes the same
thing); the per-token time is the call's over ``TOKENS``. Host-bound by design: each step is
a few hundred small launches, what CUDA graphs (``solder-ro``, ``inductor-ro``) are for."""
from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F

from solder.bench.cases import Case, Workload

TOKENS = 64


class _Block(torch.nn.Module):
    def __init__(self, d: int, heads: int, hidden: int, max_len: int):
        super().__init__()
        self.heads, self.hd = heads, d // heads
        self.norm1, self.norm2 = torch.nn.RMSNorm(d), torch.nn.RMSNorm(d)
        self.qkv = torch.nn.Linear(d, 3 * d, bias=False)
        self.out = torch.nn.Linear(d, d, bias=False)
        self.gate = torch.nn.Linear(d, hidden, bias=False)
        self.up = torch.nn.Linear(d, hidden, bias=False)
        self.down = torch.nn.Linear(hidden, d, bias=False)
        self.register_buffer("k_cache", torch.zeros(1, heads, max_len, d // heads))
        self.register_buffer("v_cache", torch.zeros(1, heads, max_len, d // heads))

    def forward(self, x, pos, mask):
        q, k, v = self.qkv(self.norm1(x)).view(1, 1, 3, self.heads, self.hd).unbind(2)
        self.k_cache.index_copy_(2, pos, k.transpose(1, 2))
        self.v_cache.index_copy_(2, pos, v.transpose(1, 2))
        a = F.scaled_dot_product_attention(q.transpose(1, 2), self.k_cache, self.v_cache,
                                           attn_mask=mask)
        x = x + self.out(a.transpose(1, 2).reshape(1, 1, -1))
        h = self.norm2(x)
        return x + self.down(F.silu(self.gate(h)) * self.up(h))


class DecodeModel(torch.nn.Module):
    def __init__(self, layers: int, d: int, heads: int, hidden: int, vocab: int, max_len: int):
        super().__init__()
        self.embed = torch.nn.Embedding(vocab, d)
        self.blocks = torch.nn.ModuleList(_Block(d, heads, hidden, max_len)
                                          for _ in range(layers))
        self.norm = torch.nn.RMSNorm(d)
        self.head = torch.nn.Linear(d, vocab, bias=False)
        self.register_buffer("positions", torch.arange(max_len))

    def forward(self, token, pos):
        mask = (self.positions <= pos).view(1, 1, 1, -1)   # the cache written so far
        x = self.embed(token)
        for block in self.blocks:
            x = block(x, pos, mask)
        return self.head(self.norm(x))

    def reset(self) -> None:
        for block in self.blocks:
            block.k_cache.zero_()
            block.v_cache.zero_()


@dataclass
class DecodeWorkload(Workload):
    model: torch.nn.Module = None
    tokens: tuple = ()
    positions: tuple = ()

    def step(self, f):
        """``TOKENS`` decode steps from an empty cache: the logits of every step."""
        self.model.reset()
        with torch.no_grad():
            return torch.cat([f(t, p) for t, p in zip(self.tokens, self.positions)], dim=1)


def decode(device, quick):
    if quick or device.type == "cpu":
        sizes = dict(layers=2, d=64, heads=4, hidden=128, vocab=256)
        tokens = 8
    else:
        sizes = dict(layers=12, d=768, heads=12, hidden=2048, vocab=32000)
        tokens = TOKENS
    torch.manual_seed(0)
    # (the integer positions buffer is moved, not cast)
    model = DecodeModel(max_len=tokens, **sizes).to(device=device, dtype=torch.bfloat16).eval()
    ids = torch.randint(0, sizes["vocab"], (tokens,), device=device)
    # one tensor per step, made once: the timed loop slices nothing
    toks = tuple(ids[t].view(1, 1).clone() for t in range(tokens))
    pos = tuple(torch.tensor([t], device=device) for t in range(tokens))
    from solder.bench.models import MODEL_TOLERANCE
    return DecodeWorkload(model, (), tolerance=MODEL_TOLERANCE, model=model, tokens=toks,
                          positions=pos)


DECODE_CASE = Case("decode", f"LLaMA-style decoder, 12 layers 768 wide, bf16, batch 1, KV cache in "
                   f"buffers written in place: {TOKENS} tokens per call", decode)
