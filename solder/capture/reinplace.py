"""Reinplacing of user Triton kernel calls: drop the clones that functionalization adds.

AOTAutograd turns a kernel launch into ``triton_kernel_wrapper_functional``: clone the arguments in
``tensors_to_clone``, run the kernel on the clones, return them; later readers use the returned
clones, a view's result is put back into its base with ``select_scatter``/``slice_scatter``/...,
and a graph input gets its new value through a ``copy_`` at the end. This pass rewrites each such
node into ``triton_kernel_wrapper_mutation`` (the kernel writes its arguments where they are)
wherever nothing reads the old value afterwards, and hands the kernel an explicit
``user_kernel_arg_clone`` of an argument where something does. Write-backs that become no-ops go.

Which arguments a kernel writes comes from ``kernel_mutation.analyze_kernel_writes``; where it
cannot decide, every tensor argument counts as written (one warning per kernel).

The rewritten graph still runs op by op (``solder_debug``); it is in program order from the kernel
on: a node after the launch that uses an argument sees its new value. Lowering relies on that.
"""
from __future__ import annotations

import operator
import warnings
from typing import Any, Optional

import sympy
import torch
import torch.fx as fx
from torch._higher_order_ops.triton_kernel_wrap import (kernel_side_table,
                                                        triton_kernel_wrapper_functional,
                                                        triton_kernel_wrapper_mutation)

from .kernel_mutation import analyze_kernel_writes, unwrap_kernel

aten = torch.ops.aten
FUNCTIONAL = triton_kernel_wrapper_functional
MUTATION = triton_kernel_wrapper_mutation
INFO = "solder_user_kernel"   # node.meta key: what the pass decided, for reports

# a scatter that puts a view's new value back into its base <-> that view
_SCATTERS = {
    aten.select_scatter.default: aten.select.int,
    aten.slice_scatter.default: aten.slice.Tensor,
    aten.diagonal_scatter.default: aten.diagonal.default,
    aten.as_strided_scatter.default: aten.as_strided.default,
}
# ops that use a tensor argument's metadata only, not its values
_META_ONLY = {
    aten.sym_size.int, aten.sym_stride.int, aten.sym_numel.default,
    aten.sym_storage_offset.default, aten.empty_like.default, aten.new_empty.default,
    aten.new_empty_strided.default, aten.zeros_like.default, aten.ones_like.default,
    aten.full_like.default, aten.new_zeros.default, aten.new_ones.default, aten.new_full.default,
}

# fresh storage with unspecified contents: a copy of it is a new allocation
EMPTY_OPS = {aten.empty.memory_format, aten.empty_like.default, aten.empty_strided.default,
             aten.empty_permuted.default, aten.new_empty.default, aten.new_empty_strided.default}

_WARNED: set = set()


def user_kernel_arg_clone(x: torch.Tensor) -> torch.Tensor:
    """A copy of ``x`` with its sizes and strides and the whole storage span it covers (what
    functionalization's clone of a kernel argument hands the kernel)."""
    flat = torch.as_strided(x, (storage_span(x.size(), x.stride()),), (1,), x.storage_offset())
    return torch.as_strided(flat.clone(), x.size(), x.stride(), 0)


@fx.node.has_side_effect
def user_kernel_input_write(dst: torch.Tensor, src: torch.Tensor) -> torch.Tensor:
    """``dst.copy_(src)`` into a graph input a user kernel has written in place earlier in the
    graph (lowered as a store into that kernel's result, which is the input's storage)."""
    return dst.copy_(src)


_COPIES = {aten.copy_.default, user_kernel_input_write}


def storage_span(size, stride):
    """Elements from the first to the last one a strided layout reaches."""
    if any(isinstance(n, int) and n == 0 for n in size):
        return 0
    return 1 + sum((n - 1) * abs(s) for n, s in zip(size, stride))


def kernel_label(kernel) -> str:
    """``name (file:line)`` of the kernel's ``def``, through autotune/heuristics wrappers."""
    try:
        fn = unwrap_kernel(kernel).fn
    except (TypeError, AttributeError):
        return getattr(kernel, "__name__", type(kernel).__name__)
    code = getattr(fn, "__code__", None)
    name = getattr(fn, "__name__", "?")
    if code is None:
        return name
    return f"{name} ({code.co_filename.rsplit('/', 1)[-1]}:{code.co_firstlineno})"


def kernel_writes(kernel, tensor_keys) -> tuple[frozenset, bool, str]:
    """(written tensor arguments, certain, why not). Uncertain: every tensor argument, warned
    once per kernel."""
    w = analyze_kernel_writes(kernel)
    keys = frozenset(tensor_keys)
    if w.certain:
        return frozenset(w.written) & keys, True, ""
    label = kernel_label(kernel)
    if label not in _WARNED:
        _WARNED.add(label)
        warnings.warn(f"Solder cannot tell which arguments the Triton kernel {label} writes "
                      f"({w.reason}); it treats every tensor argument as written, which costs "
                      "copies", stacklevel=2)
    return keys, False, w.reason


# --- aliasing -----------------------------------------------------------------------------------

def _storages(val) -> set:
    if isinstance(val, torch.Tensor):
        try:
            return {val.untyped_storage()._cdata}
        except Exception:
            return set()
    if isinstance(val, (list, tuple)):
        out = set()
        for v in val:
            out |= _storages(v)
        return out
    return set()


def _first_node(n: fx.Node) -> Optional[fx.Node]:
    return next((a for a in n.args if isinstance(a, fx.Node)), None)


def _view_nodes(graph: fx.Graph) -> set:
    """Nodes whose result shares storage with their first tensor argument (views, ``copy_``'s
    result, items of ``split``), from the FakeTensor metadata before any rewrite."""
    views = set()
    for n in graph.nodes:
        if n.op != "call_function":
            continue
        a = _first_node(n)
        if a is None:
            continue
        mine, theirs = _storages(n.meta.get("val")), _storages(a.meta.get("val"))
        if mine and mine <= theirs and (isinstance(a.meta.get("val"), torch.Tensor) or a in views):
            views.add(n)
    return views


def _root(n: fx.Node, views: set) -> fx.Node:
    while n in views:
        n = _first_node(n)
    return n


def _inputs(n: fx.Node) -> list:
    return list(n.all_input_nodes)


def _sym(x):
    return x.node.expr if isinstance(x, torch.SymInt) else sympy.Integer(int(x))


def _same_region(a, b) -> bool:
    """Same sizes, strides and storage offset (statically: no guards are added)."""
    if not (isinstance(a, torch.Tensor) and isinstance(b, torch.Tensor)) or a.dim() != b.dim():
        return False
    pairs = list(zip(a.size(), b.size())) + list(zip(a.stride(), b.stride()))
    pairs.append((a.storage_offset(), b.storage_offset()))
    return all(sympy.expand(_sym(x) - _sym(y)) == 0 for x, y in pairs)


def _fake_mode(graph: fx.Graph):
    for n in graph.nodes:
        v = n.meta.get("val")
        mode = getattr(v, "fake_mode", None)
        if mode is not None:
            return mode
    return None


def _run_on_vals(n: fx.Node, vals: dict):
    def val(a):
        return vals.get(a, a.meta.get("val")) if isinstance(a, fx.Node) else a
    args = fx.node.map_aggregate(n.args, val)
    kwargs = fx.node.map_aggregate(n.kwargs, val)
    return n.target(*args, **kwargs)


# --- the pass -----------------------------------------------------------------------------------

def reinplace_user_kernels(gm: fx.GraphModule) -> bool:
    """Rewrite every functional user-kernel node; True if the graph changed."""
    graph = gm.graph
    hops = [n for n in graph.nodes if n.op == "call_function" and n.target is FUNCTIONAL]
    if not hops:
        return False
    mode = _fake_mode(graph)
    if mode is None:
        return False  # no metadata to reason about aliasing: leave the clones
    views = _view_nodes(graph)
    changed = False
    with mode:
        for h in hops:
            changed |= _pass_through(graph, h, views)
        if changed:
            _refresh_views(graph, views)
        for h in hops:
            if _rewrite(graph, h, views):
                changed = True
                _refresh_views(graph, views)  # later kernels reason on the rewired views
        changed |= _drop_self_copies(graph)
    if changed:
        graph.lint()
        gm.recompile()
    return changed


def _written(h: fx.Node) -> tuple:
    fx_kwargs = h.kwargs["kwargs"]
    keys = [k for k, v in fx_kwargs.items()
            if isinstance(v, fx.Node) and isinstance(v.meta.get("val"), torch.Tensor)]
    kernel = kernel_side_table.get_kernel(h.kwargs["kernel_idx"])
    return (kernel, keys) + kernel_writes(kernel, keys)


def _pass_through(graph: fx.Graph, h: fx.Node, views: set) -> bool:
    """A returned argument the kernel does not write (through it or through an alias of it) is
    the argument itself: later users, including other kernels, see that."""
    _, _, written, _, _ = _written(h)
    fx_kwargs = h.kwargs["kwargs"]
    written_roots = {_root(fx_kwargs[k], views) for k in written}
    changed = False
    for u in list(h.users):
        if u.target is operator.getitem and u.args[1] not in written \
                and _root(fx_kwargs[u.args[1]], views) not in written_roots:
            u.replace_all_uses_with(fx_kwargs[u.args[1]])
            graph.erase_node(u)
            changed = True
    return changed


def _rewrite(graph: fx.Graph, h: fx.Node, views: set) -> bool:
    kw = h.kwargs
    fx_kwargs = kw["kwargs"]
    results: dict[str, list] = {}
    for u in h.users:
        if u.target is not operator.getitem:
            return False  # an unexpected use of the result dict: leave it functional
        results.setdefault(u.args[1], []).append(u)
    kernel, tensor_keys, written, certain, reason = _written(h)
    classes: dict[fx.Node, list] = {}
    for k in tensor_keys:
        classes.setdefault(_root(fx_kwargs[k], views), []).append(k)
    decisions, replace, to_clone = {}, {}, []
    for root, keys in classes.items():
        wkeys = [k for k in keys if k in written]
        if not wkeys:
            continue
        ok, why, consumed = _may_write_in_place(graph, h, root, keys, results, views)
        for k in wkeys:
            decisions[k] = ("in place" + (f" (into graph input {root.name})"
                                          if root.op == "placeholder" else "")
                            if ok else f"clone kept: {why}")
            if not ok and fx_kwargs[k] not in to_clone:
                to_clone.append(fx_kwargs[k])
        replace.update(consumed)
    fresh = {a for a in to_clone if _untouched_empty(graph, h, a, views)}
    for k, a in fx_kwargs.items():
        if a in fresh and k in decisions:
            why = decisions[k].split(": ", 1)[-1]
            decisions[k] = f"a new empty tensor, no copy ({why}; {a.name} holds nothing yet)"
    with graph.inserting_before(h):
        clones = {}
        for a in to_clone:
            if a in fresh:
                v = a.meta["val"]
                c = graph.call_function(aten.empty_strided.default, (list(v.size()), list(v.stride())),
                                        {"dtype": v.dtype, "device": v.device})
                c.meta["val"] = torch.empty_strided(v.size(), v.stride(), dtype=v.dtype,
                                                    device=v.device)
            else:
                c = graph.call_function(user_kernel_arg_clone, (a,))
                c.meta["val"] = user_kernel_arg_clone(a.meta["val"])
            c.meta.update(_site_meta(h))
            clones[a] = c
        new_kwargs = {k: clones.get(v, v) if isinstance(v, fx.Node) else v
                      for k, v in fx_kwargs.items()}
        m = graph.call_function(MUTATION, (), {
            "kernel_idx": kw["kernel_idx"], "constant_args_idx": kw["constant_args_idx"],
            "grid": kw["grid"], "tma_descriptor_metadata": kw["tma_descriptor_metadata"],
            "kwargs": new_kwargs})
    m.meta.update(_site_meta(h))
    m.meta["val"] = None
    m.meta[INFO] = {"label": kernel_label(kernel), "written": sorted(written),
                    "certain": certain, "reason": reason, "decisions": decisions}
    for k, gets in results.items():
        for g in gets:
            g.replace_all_uses_with(new_kwargs[k])
            graph.erase_node(g)
    for n in [n for n in graph.nodes if n in replace]:
        if replace[n] is n:      # a final copy_ into the input: a store into the same storage
            n.target = user_kernel_input_write
            continue
        n.replace_all_uses_with(replace[n])
        graph.erase_node(n)
    graph.erase_node(h)
    return True


def _untouched_empty(graph, h, a, views) -> bool:
    """``a`` views an ``empty`` nothing has written yet (and has static sizes): copying its
    unspecified contents is allocating new ones."""
    root = _root(a, views)
    v = a.meta["val"]
    if root.op != "call_function" or root.target not in EMPTY_OPS or not all(
            isinstance(x, int) for x in (*v.size(), *v.stride())):
        return False
    for n in graph.nodes:
        if n is h:
            return True
        if n.op != "call_function":
            continue
        if n.target is MUTATION and any(_root(x, views) is root
                                        for x in n.kwargs["kwargs"].values()
                                        if isinstance(x, fx.Node)):
            return False
        schema = getattr(n.target, "_schema", None)
        if schema is not None and schema.is_mutable and any(
                _root(x, views) is root for x in n.all_input_nodes):
            return False
    return True


def _site_meta(h: fx.Node) -> dict:
    return {k: h.meta[k] for k in ("stack_trace", "nn_module_stack", "source_fn_stack")
            if k in h.meta}


def _may_write_in_place(graph, h, root, keys, results, views):
    """Whether the kernel may write the storage of ``root`` (through arguments ``keys``) where it
    is: nothing after the launch reads the old value, and a graph input's update is written back
    by the graph itself. Returns (ok, why not, {write-back node: what replaces it})."""
    nodes = list(graph.nodes)
    start = nodes.index(h) + 1
    members = {n for n in nodes if _root(n, views) is root}
    dtypes = {n.meta["val"].dtype for n in members if isinstance(n.meta.get("val"), torch.Tensor)}
    if len(dtypes) > 1:
        return False, f"{root.name} is also seen with another dtype", {}
    fx_kwargs = h.kwargs["kwargs"]
    new: dict[fx.Node, fx.Node] = {}      # node after the launch -> node standing for it
    vals: dict[fx.Node, Any] = {}         # its value's layout in the argument's storage
    for k in keys:
        for g in results.get(k, ()):
            new[g] = fx_kwargs[k]
            vals[g] = fx_kwargs[k].meta["val"]
    consumed, wrote_back = {}, False
    for n in nodes[start:]:
        if n in new:
            continue
        ins = _inputs(n)
        if not any(a in members or a in new for a in ins):
            continue
        back = _write_back(n, members, new, vals)
        if back is not None:
            new[n] = consumed[n] = back
            vals[n] = vals.get(back, back.meta["val"])
            wrote_back |= n.target in _COPIES and _root(back, views) is root
            continue
        if n.op == "call_function" and n.target in _COPIES and len(n.args) == 2 \
                and n.args[0] is root and root.op == "placeholder" \
                and all(u.op == "output" for u in n.users):
            # the input's final value (AOTAutograd's epilogue) overwrites what the kernel left
            src = n.args[1]
            if src in members and src not in new:
                return False, f"{n.name} reads the old value of {src.name}", {}
            wrote_back = True
            new[n] = consumed[n] = n      # stays, as a store into the kernel's result
            vals[n] = root.meta["val"]
            continue
        if n in views and _first_node(n) in new:
            new[n] = n        # a view of the new value
            try:
                vals[n] = _run_on_vals(n, vals)
            except Exception:
                pass
            continue
        if n in members and n in views:
            continue          # a view under an old name: its users are checked
        if n.op == "call_function" and n.target in _META_ONLY:
            continue
        old = [a for a in ins if a in members and a not in new]
        if old:
            what = "the graph output" if n.op == "output" else n.name
            return False, f"{what} reads the old value of {old[0].name}", {}
    if root.op == "placeholder" and not wrote_back:
        return False, f"graph input {root.name} is not updated by this graph", {}
    return True, "", consumed


def _write_back(n, members, new, vals) -> Optional[fx.Node]:
    """The node ``n`` becomes once the kernel writes in place, if ``n`` only puts the kernel's
    result back where it already is: a scatter of a view's result into its base, or the final
    ``copy_`` of an input's result into the input."""
    if n.op != "call_function" or len(n.args) < 2:
        return None
    base, src = n.args[0], n.args[1]
    if not (isinstance(base, fx.Node) and isinstance(src, fx.Node)) or src not in new:
        return None
    if base not in members and base not in new:
        return None
    target = new.get(base, base)
    tval = vals.get(base, base.meta.get("val"))
    if n.target in _SCATTERS:
        try:
            region = _SCATTERS[n.target](tval, *n.args[2:], **n.kwargs)
        except Exception:
            return None
        return target if _same_region(region, vals.get(src)) else None
    if n.target in _COPIES and len(n.args) == 2:
        return target if _same_region(tval, vals.get(src)) else None
    return None


def _drop_self_copies(graph: fx.Graph) -> bool:
    """``copy_(x, x)``: what is left of writing back a result the kernel did not change."""
    changed = False
    for n in list(graph.nodes):
        if n.op == "call_function" and n.target in _COPIES and len(n.args) == 2 \
                and n.args[0] is n.args[1]:
            n.replace_all_uses_with(n.args[0])
            graph.erase_node(n)
            changed = True
    return changed


def _refresh_views(graph: fx.Graph, views: set):
    """Views whose base changed get metadata on the new base (lowering reads storage identity
    from it)."""
    for n in graph.nodes:
        if n not in views:
            continue
        a = _first_node(n)
        if a is None or _storages(n.meta.get("val")) <= _storages(a.meta.get("val")):
            continue
        try:
            n.meta["val"] = _run_on_vals(n, {})
        except Exception:
            pass
