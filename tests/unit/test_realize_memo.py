"""The lowering's memo of realized values (lower/graph.py ``realize``)."""
import torch
from torch.fx.experimental.proxy_tensor import make_fx
from solder import config
from solder.codegen.target import triton_target
from solder.lower.graph import GraphLowering
from solder.ir.values import Virtual, VirtualView, Stored


def test_a_realized_value_is_remembered_only_while_it_lives():
    # realize() remembers each value it stored by the value's id; a transient view realized and
    # dropped must not hand its buffer to a later value that Python put at the same address
    gm = make_fx(lambda x: x + 1, tracing_mode="fake")(torch.randn(4, 4))
    g = GraphLowering(gm, "inference", config.resolve(None), "g", triton_target())
    buffers = []
    for k in range(50):
        base = Virtual([4, 4], torch.float32, torch.device("cpu"), lambda idx, k=k: k)
        view = VirtualView(base, [4, 4], [4, 1], 0)   # the whole value: stored as its base
        out = g.realize(view)
        assert isinstance(out, Stored)
        buffers.append(out.buffer)
        del base, view, out
    # fifty different values, fifty buffers (not one handed out again for a reused address)
    assert len(set(buffers)) == 50
