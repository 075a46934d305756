"""FX -> FX passes on the functional graphs, before lowering. Pure: each returns nothing and
edits the graph in place; none removes a node with an effect (``copy_`` into an input stays)."""
from __future__ import annotations

import torch.fx as fx


def prepare_graph(gm: fx.GraphModule) -> None:
    from .overlapping_writes import write_only_what_was_written
    from .reinplace import reinplace_user_kernels
    write_only_what_was_written(gm)
    remove_dead_code(gm)
    # last: the mutation calls it leaves look pure to FX's dead-code elimination
    reinplace_user_kernels(gm)


def remove_dead_code(gm: fx.GraphModule) -> None:
    # FX's own DCE keeps impure nodes (copy_ and other mutating ops); an op that returns nothing
    # is there for its effect too (linalg's error checks: a graph without effect tokens, as
    # torch 2.11 traces them, has them as plain calls)
    try:
        changed = gm.graph.eliminate_dead_code(is_impure_node=_has_effect)
    except TypeError:   # a torch without the argument: keep such ops by hand
        changed = False
        for node in reversed(list(gm.graph.nodes)):
            if node.op == "call_function" and not node.users and not _has_effect(node):
                gm.graph.erase_node(node)
                changed = True
    if changed:   # the Python code again (0.04 s for a LLaMA step's backward), only if it moved
        gm.recompile()


def _has_effect(node: fx.Node) -> bool:
    if node.is_impure():
        return True
    schema = getattr(node.target, "_schema", None)
    return node.op == "call_function" and schema is not None and not schema.returns
