"""Lowering, scheduling and code generation leave no reference cycles behind: what a compile
made is freed as soon as it is dropped, not left to Python's cycle collector, whose pass over
it was on the compile's critical path (a self-calling closure, or a lowering's index function
holding the graph that holds it, made each compile's whole IR cyclic garbage)."""
import gc

import torch
from torch.fx.experimental.proxy_tensor import make_fx

from solder.capture.decompositions import solder_decompositions
from solder.config import Config
from solder.pipeline import GraphReport, generate_code


def _program(x, w, idx, src):
    y = torch.nn.functional.gelu(x @ w) ** 2              # extern mm, pointwise, pow by scalar
    z = torch.softmax(y, dim=-1).sum(0)                   # reductions
    s = torch.zeros(8).index_put((idx,), src, accumulate=True)   # a scatter
    v = torch.special.erf(x[1:, ::2]).mean()              # views, a special function
    return z + s, v, torch.cumsum(y, 1)


def _garbage_after(gm) -> list:
    gc.collect()
    was_enabled = gc.isenabled()
    gc.disable()
    gc.set_debug(gc.DEBUG_SAVEALL)
    try:
        out = generate_code(gm, "inference", Config(), "cycles", GraphReport("cycles", "inference"))
        del out
        gc.collect()
        return list(gc.garbage)
    finally:
        gc.set_debug(0)
        gc.garbage.clear()
        if was_enabled:
            gc.enable()


def test_generated_code_leaves_no_cyclic_garbage():
    args = (torch.randn(6, 8), torch.randn(8, 8), torch.tensor([1, 3, 3]), torch.randn(3))
    gm = make_fx(_program, decomposition_table=solder_decompositions())(*args)
    _garbage_after(gm)   # first use: caches fill (kept on purpose, not garbage)
    garbage = _garbage_after(gm)
    kinds = sorted({f"{type(o).__module__}.{type(o).__qualname__}" for o in garbage})
    assert not garbage, f"{len(garbage)} objects in reference cycles: {kinds[:20]}"
