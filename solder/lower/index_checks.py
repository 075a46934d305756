"""Index tensors checked against the dimension they index (``check_indices`` setting).

On by default, as eager checks: each indexing op adds an ``all`` reduction over its index
tensor, fused into the op's kernel, and ``aten._assert_async`` on the result: an exception naming
the op on the CPU, a device-side assert on the GPU (as eager's own), no host synchronization.
``check_indices=False`` drops both: an out-of-range index then reads 0 in a gather and is skipped
by a scatter."""
from __future__ import annotations

import torch

from ..ir import expr as E
from ..ir.nodes import ExternBuffer
from .registry import Call, op_name
from .tensors import TensorValue, Virtual

aten = torch.ops.aten


def check_in_range(call: Call, index, n, negative_ok: bool) -> None:
    """Assert ``lo <= index < n`` for every element, lo = -n where the op wraps negative
    indices (advanced indexing) and 0 where eager rejects them (gather, scatter, ...)."""
    g = call.graph
    if not g.config.check_indices or not isinstance(index, TensorValue):
        return
    from .reductions import reduce
    lo = -n if negative_ok else 0
    i64 = torch.int64

    def inside(idx):
        v = E.cast(index.load(idx), i64)
        return E.call("logical_and",
                      E.call("ge", v, E.index_value(lo), dtype=torch.bool),
                      E.call("lt", v, E.index_value(n), dtype=torch.bool), dtype=torch.bool)

    flags = Virtual(index.size, torch.bool, call.device, inside)
    every = g.realize(reduce(call, flags, None, False, "all", out_dtype=torch.bool))
    what = op_name(call.node.target)
    msg = (f"{what}: index out of range (valid: {lo} <= index < {n}), in graph {g.graph_name} "
           f"(Solder's check_indices)")
    check = ExternBuffer(g.new_name(), None, op=aten._assert_async.msg,
                         args=(g.as_arg(every), msg), kind="check", reason=msg)
    check.origins = [what]
    g.add_buffer(check)
