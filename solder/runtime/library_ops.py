"""Operators of Solder's own that generated wrappers call, registered under ``torch.ops.solder``.

A wrapper's library calls are ATen operator overloads, resolved by name when a cached graph is
loaded (``runtime/graph_cache.py``); an operator of Solder's is one too, registered when this
module is imported (by the lowering that emits it, and by the cache before it resolves a name in
the ``solder`` namespace).

``solder::mm_padded_rows(a, b, n, chunk_rows)``: ``(a @ b)[:, :n]`` as a new contiguous tensor,
for a product whose rows of ``n`` elements are not 16-byte aligned (``lower/extern.py``'s padded
matmul, ``b`` already zero-padded to aligned rows). Computing the padded product whole and
copying it into eager's layout held both at once: GPT-2's logits (8x512x50257 bf16, 393 MiB)
twice at the inference peak. Here the product runs ``chunk_rows`` rows at a time into one
scratch block and each block is copied into the result, so the peak is the result and one
block.
"""
from __future__ import annotations

import torch

_LIB = torch.library.Library("solder", "FRAGMENT")
_LIB.define("mm_padded_rows(Tensor a, Tensor b, int n, int chunk_rows) -> Tensor")


def mm_padded_rows(a: torch.Tensor, b: torch.Tensor, n: int, chunk_rows: int) -> torch.Tensor:
    m, n_pad = a.shape[0], b.shape[1]
    out = a.new_empty((m, n))
    if m == 0:
        return out
    rows = max(1, min(chunk_rows, m))
    block = a.new_empty((rows, n_pad))
    for r0 in range(0, m, rows):
        r1 = min(m, r0 + rows)
        part = block[: r1 - r0]
        torch.mm(a[r0:r1], b, out=part)
        out[r0:r1].copy_(part[:, :n])
    return out


def _meta(a, b, n, chunk_rows):
    return a.new_empty((a.shape[0], n))


_LIB.impl("mm_padded_rows", mm_padded_rows, "CompositeExplicitAutograd")
_LIB.impl("mm_padded_rows", _meta, "Meta")

MM_PADDED_ROWS = torch.ops.solder.mm_padded_rows.default
