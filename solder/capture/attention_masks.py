"""Attention masks that say nothing: found in Dynamo's graph and dropped before AOTAutograd.

Models build their ``scaled_dot_product_attention`` masks from sizes alone (``transformers``'
masking utilities: ``arange``s compared and expanded). Eager looks at the values and passes no
mask when it allows everything, or ``is_causal=True`` when it is the causal one; traced, the
mask stays a tensor. A mask then keeps the fused kernels from running: ViT-B/16 (197 tokens: a
mask row is not 16-byte aligned) fell back to the math path, float32 ``bmm``s and a softmax,
1.8x eager's time; GPT-2's masked cuDNN attention took twice the unmasked causal kernel's time.

Here (in Dynamo's graphs before AOTAutograd, and in torch.export's before its decompositions) a
mask whose every input is a constant or the *sizes* of a graph input (``new_ones``,
``size``) is evaluated once at compile time, with the graph's static sizes (a graph with symbolic
sizes is left alone: its mask could differ at another size). A boolean mask that is all True, or
a float mask that is all zero, is dropped; one equal to the causal mask of ``is_causal=True``
(``ones(L, S).tril()``, top-left aligned) becomes ``is_causal=True``. Both are the same
computation by SDPA's definition, so results match eager's to the attention kernel's rounding
(eager made the same choice). Anything else is left as it was, and so is a mask that the graph
writes into in place after making it (``_written_in_place``) or whose constant would hold more
than ``MAX_BYTES``.
"""
from __future__ import annotations

import operator

import torch
import torch.fx as fx

SDPA = {torch._C._nn.scaled_dot_product_attention,
        torch.ops.aten.scaled_dot_product_attention.default}

# Ops whose result depends only on their inputs' values (no randomness, no state): a mask built
# from these and constants is a constant.
_PURE_FUNCTIONS = {
    torch.arange, torch.ones, torch.zeros, torch.full, torch.eye, torch.tril, torch.triu,
    torch.where, torch.logical_and, torch.logical_or, torch.logical_not, torch.logical_xor,
    torch.bitwise_and, torch.bitwise_or, torch.bitwise_not, torch.bitwise_xor,
    torch.eq, torch.ne, torch.lt, torch.le, torch.gt, torch.ge, torch.add, torch.sub, torch.mul,
    torch.neg, torch.diff, torch.cumsum, torch.unsqueeze, torch.reshape, torch.broadcast_to,
    torch.clamp, torch.minimum, torch.maximum, torch.cat, torch.stack, torch.any, torch.all,
    torch.masked_fill, torch.full_like, torch.ones_like, torch.zeros_like, torch.tensor,
    torch.scalar_tensor,
    operator.and_, operator.or_, operator.xor, operator.invert, operator.not_, operator.eq,
    operator.ne, operator.lt, operator.le, operator.gt, operator.ge, operator.add, operator.sub,
    operator.mul, operator.neg, operator.floordiv, operator.mod, operator.getitem,
}
_PURE_METHODS = {
    "expand", "expand_as", "unsqueeze", "squeeze", "view", "reshape", "to", "bool", "int", "long",
    "float", "half", "bfloat16", "double", "type_as", "contiguous", "clone", "transpose",
    "permute", "flatten", "repeat", "tril", "triu", "masked_fill", "all", "any", "eq", "ne", "lt",
    "le", "gt", "ge", "logical_and", "logical_or", "logical_not", "bitwise_and", "bitwise_or",
    "__getitem__", "cumsum", "diff", "add", "sub", "mul", "neg", "size", "dim",
    # operators called as methods (the GPU's transformers 5.17 writes ``a.__eq__(b)``)
    "__and__", "__or__", "__xor__", "__invert__", "__rand__", "__ror__", "__eq__", "__ne__",
    "__lt__", "__le__", "__gt__", "__ge__", "__add__", "__radd__", "__sub__", "__rsub__",
    "__mul__", "__rmul__", "__neg__", "__floordiv__", "__mod__",
}
# Ops that read only their first argument's sizes, dtype and device, never its values: they may
# take a graph input.
_SIZES_ONLY_FUNCTIONS = {torch.ones_like, torch.zeros_like, torch.full_like}
_SIZES_ONLY_METHODS = {"new_ones", "new_zeros", "new_full", "size", "dim"}

# ATen ops (torch.export's graphs) that read only their first argument's sizes, dtype and device
_SIZES_ONLY_ATEN = {"new_ones", "new_zeros", "new_full", "ones_like", "zeros_like", "full_like",
                    "sym_size"}


def _aten_kind(target):
    """'sizes', 'pure' (its result depends on its inputs' values alone) or None, for an ATen op:
    not mutating, not random, not uninitialized memory."""
    if not isinstance(target, torch._ops.OpOverload) or target.namespace not in ("aten", "prims"):
        return None
    name = target.overloadpacket.__name__
    if name in _SIZES_ONLY_ATEN:
        return "sizes"
    if (target._schema.is_mutable or torch.Tag.nondeterministic_seeded in target.tags
            or "empty" in name):
        return None
    return "pure"


# A constant is computed on the graph's device at compile time: one whose memory (an expanded
# view counts its base only; a packed-sequence check materializes [B, 1, L, S] booleans, 134 MB
# at 8 x 4096 tokens) would exceed this is left alone.
MAX_BYTES = 512 << 20


def _too_large(val) -> bool:
    try:
        return val.untyped_storage().nbytes() > MAX_BYTES
    except Exception:  # noqa: BLE001 - no storage to measure: by its elements
        return val.numel() * val.element_size() > MAX_BYTES


def simplify_attention_masks(gm: fx.GraphModule, kept: list | None = None) -> list[str]:
    """Drop or turn into ``is_causal`` the constant masks of SDPA calls in Dynamo's graph ``gm``;
    returns one line per rewrite (for ``solder.explain``). ``kept`` collects a line for each mask
    left as it was, with the reason."""
    done = []
    folded: dict[fx.Node, object] = {}
    why: dict[fx.Node, str] = {}
    constant: dict[fx.Node, object] = {}   # a mask's value, None where not a constant
    kinds: dict[tuple, object] = {}        # (mask, q's shape, k's shape): what _classify said
    for node in list(gm.graph.nodes):
        if node.op != "call_function" or node.target not in SDPA:
            continue
        mask = _arg(node, 3, "attn_mask")
        if not isinstance(mask, fx.Node) or _arg(node, 5, "is_causal") is True:
            continue
        if mask not in constant:   # each layer's call shares one mask: look at it once
            value = _fold(mask, folded, why)
            if value is not None:
                written = _written_in_place(mask)
                if written is not None:   # the graph changes it after the ops that made it
                    value = None
                    why[mask] = f"{written.name} writes into it in place"
            constant[mask] = value
        value = constant[mask]
        q, k = _meta(node.args[0]), _meta(node.args[1])
        kind = None
        if isinstance(value, torch.Tensor):
            shapes = (mask, tuple(getattr(q, "shape", ())), tuple(getattr(k, "shape", ())))
            if shapes not in kinds:
                kinds[shapes] = _classify(value, q, k)
            kind = kinds[shapes]
        if kind is None:
            if kept is not None:
                reason = why.get(mask) or "its values are neither all-allow nor causal"
                kept.append(f"attention mask {mask.name} of {node.name} kept: {reason}"
                            + _where(node))
            continue
        _set_arg(node, 3, "attn_mask", None)
        if kind == "causal":
            _set_arg(node, 5, "is_causal", True)
        done.append(f"attention mask {mask.name} of {node.name} is "
                    f"{'causal: is_causal=True' if kind == 'causal' else 'all-allow: dropped'}"
                    + _where(node))
    if done:
        _erase_unused(gm, folded)
        gm.recompile()
    return done


def _where(node) -> str:
    """`` (file.py:line)`` of the call, from Dynamo's stack trace: the innermost frame outside
    torch itself (a default-device context, say, adds frames of torch's own)."""
    frames = [line.strip() for line in node.meta.get("stack_trace", "").splitlines()
              if line.strip().startswith("File ")]
    for line in reversed(frames):
        parts = line.split('"')
        if len(parts) >= 3 and "/torch/" not in parts[1]:
            num = parts[2].split(",")[1].replace("line", "").strip()
            return f" ({parts[1].rsplit('/', 1)[-1]}:{num})"
    return ""


def _classify(mask: torch.Tensor, q, k):
    """'none' (allows everything), 'causal' (SDPA's is_causal mask) or None."""
    if not isinstance(q, torch.Tensor) or not isinstance(k, torch.Tensor) or q.dim() < 2:
        return None
    L, S = q.shape[-2], k.shape[-2]
    scores = tuple(q.shape[:-1]) + (S,)
    try:   # the mask must not widen the output (math attention would broadcast it in)
        if tuple(torch.broadcast_shapes(mask.shape, scores)) != scores:
            return None
    except RuntimeError:
        return None
    if mask.dtype == torch.bool:
        allow = mask
    elif mask.is_floating_point():
        if not bool(((mask == 0) | (mask == float("-inf"))).all()):
            return None   # an additive bias, not a mask
        allow = mask == 0
    else:
        return None
    if bool(allow.all()):
        return "none"
    causal = torch.ones(L, S, dtype=torch.bool, device=mask.device).tril()
    if allow.shape[-2:] == (L, S) and bool((allow == causal).all()):
        return "causal"
    return None


def _fold(node, folded: dict, why: dict):
    """``node``'s value if it is a compile-time constant, else None (``why[node]`` says why)."""
    if node in folded:
        return folded[node]
    folded[node] = None   # while in progress (and for good, if not constant)

    def no(reason):
        why[node] = reason
        return None
    val = _meta(node)
    if isinstance(val, torch.Tensor) and _symbolic(val):
        return no(f"{node.name} has symbolic sizes")
    if isinstance(val, torch.Tensor) and _too_large(val):
        return no(f"{node.name} is too large to compute at compile time")
    if node.op == "call_function":
        aten = _aten_kind(node.target)
        sizes_only = node.target in _SIZES_ONLY_FUNCTIONS or aten == "sizes"
        if node.target not in _PURE_FUNCTIONS and not sizes_only and aten is None:
            return no(f"it depends on {node.name} = {_name(node.target)}(...)")
    elif node.op == "call_method":
        sizes_only = node.target in _SIZES_ONLY_METHODS
        if node.target not in _PURE_METHODS and not sizes_only:
            return no(f"it depends on {node.name} = .{node.target}(...)")
    else:
        return no(f"it depends on the values of {node.name} ({node.op})")
    failed = []

    def value(a, first):
        if not isinstance(a, fx.Node):
            return a
        v = _fold(a, folded, why)
        if v is None and first and sizes_only:
            v = _stand_in(a)   # only its sizes, dtype and device are read
        if v is None:
            failed.append(a)
        return v
    args = [fx.node.map_aggregate(a, lambda x, first=(i == 0): value(x, first))
            for i, a in enumerate(node.args)]
    kwargs = {k: fx.node.map_aggregate(v, lambda x: value(x, False))
              for k, v in node.kwargs.items()}
    if failed:
        return no(why.get(failed[0], f"it depends on {failed[0].name}"))
    try:
        with _real_tensors(), torch.no_grad():
            if node.op == "call_method":
                out = getattr(args[0], node.target)(*args[1:], **kwargs)
            else:
                out = node.target(*args, **kwargs)
    except Exception as e:  # noqa: BLE001 - not foldable after all; the graph keeps it
        return no(f"computing {node.name} at compile time failed ({type(e).__name__}: {e})")
    folded[node] = out
    return out


_IN_PLACE_FUNCTIONS = {operator.setitem, operator.iand, operator.ior, operator.ixor,
                       operator.iadd, operator.isub, operator.imul}
_IN_PLACE_DUNDERS = {"__setitem__", "__iand__", "__ior__", "__ixor__", "__iadd__", "__isub__",
                     "__imul__"}


def _writes_into(user: fx.Node, node: fx.Node) -> bool:
    """Whether ``user`` may write into ``node``'s tensor (its first argument of an in-place op,
    a setitem's target, an ``out=``, a mutable argument of an ATen op)."""
    target, first = user.target, user.args[0] if user.args else None
    if user.op == "call_method":
        in_place = (target.endswith("_") and not target.endswith("__")) or target in _IN_PLACE_DUNDERS
        return in_place and first is node
    if user.op != "call_function":
        return False
    if user.kwargs.get("out") is node:
        return True
    if isinstance(target, torch._ops.OpOverload):
        schema_args = target._schema.arguments
        for i, a in enumerate(user.args):
            if a is node and i < len(schema_args) and schema_args[i].alias_info is not None \
                    and schema_args[i].alias_info.is_write:
                return True
        return False
    if target in _IN_PLACE_FUNCTIONS:
        return first is node
    if target in _PURE_FUNCTIONS:   # operator.and_ & co. are not in-place
        return False
    name = getattr(target, "__name__", "")   # torch.relu_, torch.Tensor.add_ as functions
    return name.endswith("_") and not name.endswith("__") and first is node


def _storages(node) -> set | None:
    """The storages of a node's tensor value(s), None if unknown."""
    from torch.multiprocessing.reductions import StorageWeakRef
    val = _meta(node)
    vals = val if isinstance(val, (list, tuple)) else [val]
    if not vals or not all(isinstance(v, torch.Tensor) for v in vals):
        return None
    try:
        return {StorageWeakRef(v.untyped_storage()).cdata for v in vals}
    except Exception:  # noqa: BLE001 - no storage to compare: assume it may alias
        return None


def _written_in_place(mask: fx.Node):
    """A node that may write into the mask or into anything it was computed from: Dynamo's
    graph passes SDPA the tensor that ``m.tril_()`` or ``m[:, -1] = False`` wrote into, not the
    write. Follows every user that shares a storage with one of them (views, ``to`` of the same
    dtype; unknown storage counts as shared). None when there is none."""
    made_of, todo = set(), [mask]
    while todo:   # the mask and everything it is computed from
        n = todo.pop()
        if n not in made_of:
            made_of.add(n)
            todo += list(n.all_input_nodes)
    seen, todo = set(), list(made_of)
    while todo:
        n = todo.pop()
        if n in seen:
            continue
        seen.add(n)
        mine = _storages(n)
        for user in n.users:
            if _writes_into(user, n):
                return user
            if user.op == "output" or (user.op == "call_function" and user.target in SDPA):
                continue
            theirs = _storages(user)
            if mine is None or theirs is None or mine & theirs:
                todo.append(user)
    return None


def _name(target) -> str:
    return getattr(target, "__name__", None) or str(target)


def _stand_in(node):
    val = _meta(node)
    if not isinstance(val, torch.Tensor) or _symbolic(val):
        return None
    with _real_tensors():
        return torch.empty_strided(tuple(val.shape), tuple(val.stride()), dtype=val.dtype,
                                   device=val.device)


def _real_tensors():
    from torch._subclasses.fake_tensor import unset_fake_temporarily
    return unset_fake_temporarily()


def _symbolic(t: torch.Tensor) -> bool:
    return any(not isinstance(s, int) for s in t.shape)


def _meta(x):
    if isinstance(x, fx.Node):
        return x.meta.get("example_value", x.meta.get("val"))
    return x


def _arg(node, i, name):
    if len(node.args) > i:
        return node.args[i]
    return node.kwargs.get(name)


def _set_arg(node, i, name, value):
    if len(node.args) > i:
        args = list(node.args)
        args[i] = value
        node.args = tuple(args)
    else:
        node.kwargs = {**node.kwargs, name: value}


def _erase_unused(gm: fx.GraphModule, folded: dict) -> None:
    # only nodes this pass evaluated (pure by the tables above) are candidates
    for node in reversed(list(gm.graph.nodes)):
        if node in folded and folded[node] is not None and not node.users:
            gm.graph.erase_node(node)
