"""Which of a backward graph's inputs its code may write over: the saved tensors AOTAutograd
donates.

AOTAutograd lists the saved tensors that alias no input or output of the step
(``fw_metadata.bw_donated_idxs``, on the tracing context while the backward compiles), and it
refuses ``backward(retain_graph=True)`` or ``create_graph=True`` for a graph that has them:
the backward runs once, and it is the last holder of those tensors. A buffer of the backward
may then take over such an input's storage, as inductor's backward does: an 8-layer LLaMA
step's logits gradient, (4096, 32000) bf16, written over the saved logits, 250 MiB less at
its peak (docs/perf-notes.md). AOTAutograd does not check two saved tensors against each
other, so an input that shares its storage with another input of the backward is not donated
here. The names go into ``gm.meta[ir.nodes.DONATED_INPUTS]`` (capture/aot.py).
"""
from __future__ import annotations

import torch
from torch.multiprocessing.reductions import StorageWeakRef


def donated_inputs(gm: torch.fx.GraphModule) -> frozenset:
    """The names of ``gm``'s placeholders that AOTAutograd donated and that share their
    storage with no other placeholder."""
    ctx = torch._guards.TracingContext.try_get()
    meta = getattr(ctx, "fw_metadata", None) if ctx is not None else None
    idxs = getattr(meta, "bw_donated_idxs", None) if meta is not None else None
    if not idxs or not torch._functorch.config.donated_buffer:
        return frozenset()
    placeholders = list(gm.graph.find_nodes(op="placeholder"))
    storages: dict = {}
    for node in placeholders:
        val = node.meta.get("val")
        if isinstance(val, torch.Tensor) and val.layout == torch.strided:
            ref = StorageWeakRef(val.untyped_storage())
            storages[ref] = storages.get(ref, 0) + 1
    out = set()
    for i in idxs:
        if not 0 <= i < len(placeholders):
            continue
        val = placeholders[i].meta.get("val")
        if not isinstance(val, torch.Tensor) or val.layout != torch.strided:
            continue
        if storages.get(StorageWeakRef(val.untyped_storage()), 0) == 1:
            out.add(placeholders[i].name)
    return frozenset(out)
