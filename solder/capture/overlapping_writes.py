"""A write through a view of a self-overlapping view writes only what the program wrote.

``x.expand(2, -1, 6).diagonal().copy_(v)`` writes ``v`` into ``x``. Functionalized, it reads::

    e = as_strided(x, [2, 1, 6], [0, 6, 1])              # the expanded view
    s = diagonal_scatter(e, v)                           # the view with the write applied
    x2 = as_strided_scatter(x, s, [2, 1, 6], [0, 6, 1])  # written back through the view

The write-back puts two elements of ``s`` in one place of ``x``: the written one and an unwritten
copy of the old value, and which lands last is not defined (AOTAutograd's own eager run of such
a graph refuses it; Solder's kernels kept an old value in some of those places, fuzz seed
995506). What the program wrote is the inner view (here the diagonal of ``e``, a view of ``x``
that does not overlap itself): the write-back becomes ``as_strided_scatter`` of ``v`` through
that view alone.
"""
from __future__ import annotations

import torch
import torch.fx as fx

aten = torch.ops.aten

# a scatter op and the view op it writes through (same arguments after the source)
_SCATTER_VIEWS = {aten.diagonal_scatter.default: aten.diagonal.default,
                  aten.select_scatter.default: aten.select.int,
                  aten.slice_scatter.default: aten.slice.Tensor,
                  aten.as_strided_scatter.default: aten.as_strided.default}


def write_only_what_was_written(gm: fx.GraphModule) -> int:
    """Rewrite each write-back through a self-overlapping view; the number rewritten."""
    changed = 0
    for node in list(gm.graph.nodes):
        if node.target is not aten.as_strided_scatter.default or len(node.args) < 4:
            continue
        base, inner = node.args[0], node.args[1]
        view_args = tuple(node.args[2:]) + tuple(node.kwargs.values())
        if not (isinstance(inner, fx.Node) and inner.target in _SCATTER_VIEWS):
            continue
        viewed = inner.args[0]
        if not (isinstance(viewed, fx.Node) and viewed.target is aten.as_strided.default
                and viewed.args[0] is base and tuple(viewed.args[1:]) + tuple(
                    viewed.kwargs.values()) == view_args):
            continue
        outer = viewed.meta.get("val")
        if outer is None or _non_overlapping(outer) is not False:
            continue   # well defined as it is (or symbolic: left alone)
        written = _written_view(inner, outer)
        if written is None or _non_overlapping(written) is not True:
            continue
        with gm.graph.inserting_before(node):
            new = gm.graph.call_function(
                aten.as_strided_scatter.default,
                (base, inner.args[1], list(written.shape), list(written.stride()),
                 written.storage_offset()))
        new.meta.update(node.meta)
        node.replace_all_uses_with(new)
        gm.graph.erase_node(node)
        changed += 1
    return changed


def _written_view(scatter: fx.Node, outer):
    """The scatter's region as a view of the base's storage: its view op applied to the
    outer view's FakeTensor (whose strides and offset are the base storage's)."""
    view = _SCATTER_VIEWS[scatter.target]
    args = [a.meta.get("val") if isinstance(a, fx.Node) else a for a in scatter.args[2:]]
    fake_mode = getattr(outer, "fake_mode", None)
    if fake_mode is None or any(a is None for a in args):
        return None
    try:
        with fake_mode:
            return view(outer, *args, **scatter.kwargs)
    except Exception:  # noqa: BLE001 - a form not understood: the graph is left as it was
        return None


def _non_overlapping(t):
    """True where no two elements of ``t`` share a place, False where two do, None where its
    sizes or strides are symbolic."""
    if not all(isinstance(v, int) for v in (*t.shape, *t.stride())):
        return None
    dims = sorted((abs(s), n) for n, s in zip(t.shape, t.stride()) if n > 1)
    expected = None
    for s, n in dims:
        if s == 0 or (expected is not None and s < expected):
            return False
        expected = s * n
    return True
