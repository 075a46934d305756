"""What a training graph's forward saves for its backward, kept to eager's semantics.

The min-cut partitioner saves whatever is cheapest: often a graph input itself, from which the
backward recomputes the value eager's autograd saved (the contiguous copy under a
``group_norm`` of a permuted input, ``x * 2`` under a matmul). Saved as it is, that input is
checked by autograd's version counter: a program that writes it in place after the forward and
before the backward (later in the graph, in a later graph after a break, or in eager code) gets
"modified by an inplace operation" where eager, which saved a value of its own, runs. Two rules:

- an input the graph itself writes in place, saved as it is, is saved as a copy
  (``save_mutated_inputs_by_value``, after the partition);
- a value computed from an input that is not a parameter or buffer, and that eager's autograd
  does not save itself, which eager saves (the backward reads it), is saved, never recomputed
  from that input (``keep_eagers_saved_values``, before the partition). An input eager saves
  (``input_ids`` under an embedding, the target of a loss) a later write breaks eager's
  backward too: the partitioner keeps its choice there, and so model steps save what they
  saved before. Parameters and buffers keep the partitioner's choice: they are not
  written between a forward and its backward by a training loop, and recomputing from them
  (a low-precision copy of a weight) is where the saving is. So do the other leaves that
  require grad (``w = torch.randn(..., requires_grad=True)``, a parameter in all but name):
  autograd lets them be written only under ``no_grad``, as an optimizer does. Saving what
  eager saves from such a leaf cost the cross-entropy bench case (its logits a leaf) a
  second 8192x32000 bf16 tensor at its peak and 1 GB more traffic per call (2026-12-07). A
  later call with a non-leaf in that place, written in place between its forward and
  backward, gets autograd's "modified by an inplace operation" error, as under inductor,
  never a wrong value.
"""
from __future__ import annotations

import operator
import sys

import torch
from torch._functorch.partitioners import get_default_op_list
from torch.fx import GraphModule, Node

aten = torch.ops.aten


def _caller_fw_metadata():
    """AOTAutograd's metadata for the graph being partitioned (the partitioner is not handed
    it: read from a caller's frame); None where it cannot be found."""
    frame = sys._getframe(2)
    while frame is not None:
        meta = frame.f_locals.get("fw_metadata")
        if getattr(meta, "input_info", None) is not None:
            return meta
        frame = frame.f_back
    return None


def keep_eagers_saved_values(joint: GraphModule, num_fwd_outputs, leaves=frozenset(),
                             input_count=None) -> int:
    """Mark MUST_SAVE each forward value the backward reads that is computed (not only viewed)
    from a graph input that is not a parameter or buffer and that the backward does not read
    itself; the number marked. Measured on tiny GPT-2, BERT and ViT training steps (CPU,
    2026-12-06): the bytes their forwards save changed by 0, +1.3% (BERT's float attention
    mask, which eager's attention saves) and 0. Forward values
    are those the forward's outputs are computed from; the backward is the rest (what it
    computes from forward values alone, ``exp`` of a saved ``log_softmax``, included)."""
    from torch.utils.checkpoint import CheckpointPolicy
    meta = _caller_fw_metadata()
    if meta is None or num_fwd_outputs is None:
        return 0
    static = set(getattr(meta, "static_input_indices", None) or [])
    primals = [n for n in joint.graph.nodes if n.op == "placeholder"
               and n.name.startswith("primals_")]
    if input_count == len(primals):   # (the graph's inputs, as Dynamo handed them over)
        static |= set(leaves)
    forward = forward_nodes(joint, num_fwd_outputs)

    def read_by_backward(n):
        return any(u not in forward and u.op != "output" for u in n.users)
    # an input eager's autograd saves (the backward reads it, or a view of it) may be saved as
    # it is: a write into it after the forward breaks eager's backward too. The others are
    # at risk: what eager saved from them is saved, not recomputed from them
    views_of: dict = {}
    for n in joint.graph.nodes:
        if n.op == "call_function" and n in forward and _is_view(n) and n.all_input_nodes:
            root = views_of.get(n.all_input_nodes[0], n.all_input_nodes[0])
            views_of[n] = root
    eager_saves = {views_of.get(n, n) for n in joint.graph.nodes if read_by_backward(n)}
    state = {p: "input" for i, p in enumerate(primals)
             if i not in static and p not in eager_saves}
    # the partitioner never recomputes an op off its allowlist (a convolution, a matmul): such
    # a value is saved, and what is computed from it is recomputed from the saved value, never
    # from the input. Marking those too saved a ResNet's float32 batch-norm intermediates in
    # place of its bf16 convolution outputs (1.5x inductor's peak in training, 2026-12-07)
    recomputable = get_default_op_list().is_recomputable
    marked = 0
    for n in joint.graph.nodes:
        if n.op != "call_function" or n not in forward:
            continue
        if not (_is_view(n) or recomputable(n)):
            continue
        kinds = {state.get(a) for a in n.all_input_nodes}
        if "computed" in kinds or ("input" in kinds and not _is_view(n)):
            state[n] = "computed"
        elif "input" in kinds:
            state[n] = "input"
        if state.get(n) == "computed" and read_by_backward(n) and n.meta.get("recompute") is None:
            n.meta["recompute"] = CheckpointPolicy.MUST_SAVE
            marked += 1
    return marked


def forward_nodes(joint: GraphModule, num_fwd_outputs: int) -> set:
    """The joint graph's nodes that its forward outputs are computed from."""
    forward: set = set()
    stack = [a for a in joint.graph.output_node().args[0][:num_fwd_outputs] if isinstance(a, Node)]
    while stack:
        n = stack.pop()
        if n not in forward:
            forward.add(n)
            stack.extend(n.all_input_nodes)
    return forward


def _is_view(n: Node) -> bool:
    target = n.target
    if target is operator.getitem:
        return False
    schema = getattr(target, "_schema", None)
    return bool(schema and schema.returns and schema.returns[0].alias_info is not None
                and not schema.returns[0].alias_info.is_write)


def save_mutated_inputs_by_value(fw: GraphModule, num_fwd_outputs) -> None:
    """A forward that saves for the backward an input the program writes in place saves a
    copy of it instead. The partitioner may save such an input as it is (the backward needs its
    value before the write); AOTAutograd then applies the write to that same tensor after the
    forward, and autograd refuses the backward ("modified by an inplace operation"), where
    eager saved what it needed before the write."""
    meta = _caller_fw_metadata()
    if meta is None or num_fwd_outputs is None:
        return
    mutated = {i for i, x in enumerate(meta.input_info) if getattr(x, "mutates_data", False)}
    if not mutated:
        return
    placeholders = [n for n in fw.graph.nodes if n.op == "placeholder"]
    out = fw.graph.output_node()
    results = list(out.args[0])
    changed = False
    for k in range(num_fwd_outputs, len(results)):
        node = results[k]
        if not (isinstance(node, Node) and node.op == "placeholder"
                and node.name.startswith("primals_")):
            continue
        if placeholders.index(node) not in mutated:
            continue
        with fw.graph.inserting_after(placeholders[-1]):
            copy = fw.graph.call_function(aten.clone.default, (node,))
        copy.meta.update(node.meta)
        results[k] = copy
        changed = True
    if changed:
        out.args = (tuple(results),) + tuple(out.args[1:])
        fw.recompile()
