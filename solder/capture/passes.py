"""FX -> FX passes on the functional graphs, before lowering. Pure: each returns nothing and
edits the graph in place; none removes a node with an effect (``copy_`` into an input stays)."""
from __future__ import annotations

import torch.fx as fx


def prepare_graph(gm: fx.GraphModule) -> None:
    from .reinplace import reinplace_user_kernels
    remove_dead_code(gm)
    # last: the mutation calls it leaves look pure to FX's dead-code elimination
    reinplace_user_kernels(gm)


def remove_dead_code(gm: fx.GraphModule) -> None:
    # FX's own DCE keeps impure nodes (copy_ and other mutating ops), which is what we need
    gm.graph.eliminate_dead_code()
    gm.recompile()
