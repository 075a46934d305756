"""Rewrites of Dynamo's graph before AOTAutograd traces it, so that it can: the traced gradients
right, no data-dependent shapes, every in-place op one that functionalization knows.

- ``as_strided_scatter`` of an expanded input becomes one of ``input.clone()``: eager clones
  such an input first, and the meta functions keep its zero strides otherwise.
- ``as_strided_scatter``: eager's derivative formula is inverted (for x = arange(4.), y of size 2,
  ``as_strided_scatter(x, y, (2,), (2,))`` with upstream grad [1, 2, 3, 4] gives x.grad
  [1, 0, 3, 0] where the answer is [0, 2, 0, 4]), and AOTAutograd would trace that formula. On
  a dense input the call becomes ``out = a.clone(); out.as_strided(size, stride, offset -
  a.storage_offset()).copy_(b)``, whose gradient autograd derives from the view and the in-place
  copy. Functionalization turns it back into one ``as_strided_scatter`` for the forward. An
  input that overlaps itself or has gaps keeps them in eager's result; its call stays whole.
- ``index_put`` / ``index_put_`` / ``x[mask] = v`` with one boolean index: the backward of
  ``index_put`` indexes by the mask, a data-dependent shape (nonzero) that AOTAutograd cannot
  trace. Written as ``where`` (values broadcast over the selected elements) or ``masked_scatter``
  (values taken in order), the same result has shape-static gradients.
- The ``dim`` of a vector norm (``torch.linalg.vector_norm``, ``torch.linalg.norm``, ``torch.norm``,
  ``Tensor.norm``) is made non-negative: torch 2.11's meta function compares dims with
  ``d not in dim`` where every reduced dim has size 1, so ``dim=(-2, 1)`` of a (1, 1) tensor gave
  shape (1,) where eager's is (), and AOTAutograd's backward then expected a gradient of that
  shape (Solder's own decomposition fixes the forward's trace, not the metadata pass).
- An in-place op whose out-of-place twin lays its result out otherwise than the tensor it
  writes (``a.mT.masked_fill_(...)``: the twin's result is contiguous for the transposed view)
  becomes ``a.copy_(twin(a.clone(), ...))``: functionalization takes the written value for the
  tensor's new one, and reads after the write would see the twin's layout where eager's
  memory kept its own.
- A reshape that copies in eager (``reshape``, ``flatten``, ``ravel``, ``reshape_as``,
  ``contiguous`` of a tensor that cannot be viewed so) becomes an explicit contiguous clone
  first: AOTAutograd traces a mutated input that requires grad through a clone of it, dense
  where the input had gaps, and on the clone the same call was a view; a write through its
  result then reached the input (fuzz seed 452986: ``a[0].reshape(-1)[1:] += c`` of a sliced
  input). Decided by Dynamo's example values, which have eager's strides.
- ``polygamma_``: its schema takes ``(self, n)`` where ``polygamma`` takes ``(n, self)``, so
  functionalization does not recognise it as polygamma's in-place form and refuses it (as a
  custom op returning an alias). It becomes ``a.copy_(polygamma(n, a))``.
"""
from __future__ import annotations

import operator

import torch
import torch.fx as fx


def as_strided_scatter_from(a, b, size, stride, start):
    # ``a`` is dense (``_dense_start``): its clone has its strides, at offset 0. ``start`` is
    # the view's first element counted from ``a``'s, made relative from Dynamo's example value:
    # AOTAutograd traces a mutated input that requires grad through a clone of it (at offset
    # 0), where ``a.storage_offset()`` would not be the input's
    out = a.clone()
    out.as_strided(size, stride, start).copy_(b)
    return out


def expanded_as_strided_scatter(a, b, size, stride, storage_offset=None):
    # eager clones an input whose elements share memory into a fresh dense tensor (the view's
    # offset is then in the clone's storage; the clone keeps the order of the input's dims:
    # (12, 1, 3) for a (3, 4) transposed view expanded to (2, 3, 4)); said in the graph, the
    # meta functions agree (they keep the zero strides, and views of the result were read
    # through them)
    return torch.as_strided_scatter(a.clone(), b, size, stride, storage_offset)


def polygamma_(a, n):
    return a.copy_(torch.polygamma(n, a))


def _bool_put(a, mask, first, values, accumulate):
    """``a`` with ``a[(slice(None),) * first + (mask,)] = values`` (or ``+=``)."""
    k = mask.dim()
    trailing = a.dim() - first - k
    values = torch.as_tensor(values, dtype=a.dtype, device=a.device)
    mask = mask.to(a.device)   # eager accepts a CPU mask for a CUDA tensor
    m = mask.reshape([1] * first + list(mask.shape) + [1] * trailing)
    count_dim = values.dim() - trailing - 1
    if count_dim < 0 or values.shape[count_dim] == 1:
        if count_dim >= 0:  # drop the broadcast count dim, stand the values over the mask dims
            shape = list(values.shape)
            values = values.reshape(shape[:count_dim] + [1] * k + shape[count_dim + 1:])
        new = a + values if accumulate else values.to(a.dtype)
        return torch.where(m, new, a)
    lead = [a.shape[d] for d in range(first)]
    full = values.expand(lead + [values.shape[count_dim]] + list(a.shape[first + k:]))
    m = m.expand(a.shape)
    if accumulate:
        return a + torch.zeros_like(a).masked_scatter(m, full)
    return a.masked_scatter(m, full)


def index_put(a, indices, values, accumulate=False):
    first, mask = _single_mask(indices)
    return _bool_put(a, mask, first, values, accumulate)


def index_put_(a, indices, values, accumulate=False):
    return a.copy_(index_put(a, indices, values, accumulate))


def setitem(a, key, value):
    first, mask = _single_mask(key if isinstance(key, tuple) else (key,))
    a.copy_(_bool_put(a, mask, first, value, False))


def _single_mask(indices):
    first = 0
    for k in indices:
        if k is None or (isinstance(k, slice) and k == slice(None)):
            first += 1
        else:
            return first, k
    raise ValueError("no boolean index")


def _non_negative_dims(node) -> bool:
    """Rewrites a norm call's negative ``dim`` (argument 2, or the keyword) in place."""
    x, dim = _meta(node.args[0]) if node.args else None, _arg(node, 2, "dim")
    if not isinstance(x, torch.Tensor) or x.dim() == 0:
        return False
    n = x.dim()
    if isinstance(dim, int) and not isinstance(dim, bool) and -n <= dim < 0:
        new = dim + n
    elif isinstance(dim, (list, tuple)) and any(isinstance(d, int) and -n <= d < 0 for d in dim):
        new = type(dim)(d + n if isinstance(d, int) and -n <= d < 0 else d for d in dim)
    else:
        return False
    if len(node.args) > 2:
        node.args = node.args[:2] + (new,) + node.args[3:]
    else:
        node.kwargs = {**node.kwargs, "dim": new}
    return True


def _meta(x):
    if isinstance(x, fx.Node):
        return x.meta.get("example_value", x.meta.get("val"))
    return x


def _mask_index(indices) -> bool:
    """One boolean tensor among full slices / Nones, nothing else."""
    if not isinstance(indices, (list, tuple)):
        indices = (indices,)
    tensors = [_meta(k) for k in indices if not (k is None or k == slice(None))]
    return (len(tensors) == 1 and isinstance(tensors[0], torch.Tensor)
            and tensors[0].dtype == torch.bool)


_AS_STRIDED_SCATTER = {torch.as_strided_scatter, torch.ops.aten.as_strided_scatter.default,
                       torch.ops.aten.as_strided_scatter}
_NORMS = {torch.linalg.vector_norm, torch.linalg.norm, torch.norm,
          torch.ops.aten.linalg_vector_norm.default, torch.ops.aten.linalg_norm.default}
_POLYGAMMA_ = {torch.Tensor.polygamma_, torch.ops.aten.polygamma_.default}
_INDEX_PUT = {torch.index_put: index_put, torch.index_put_: index_put_,
              torch.ops.aten.index_put.default: index_put,
              torch.ops.aten.index_put_.default: index_put_}


def rewrite_before_autograd(gm: fx.GraphModule) -> bool:
    """Rewrite the calls above in Dynamo's graph; True if anything changed."""
    changed = False
    for node in list(gm.graph.nodes):
        repl = None
        if (node.op == "call_function" and node.target in _NORMS) or (
                node.op == "call_method" and node.target == "norm"):
            changed |= _non_negative_dims(node)
        elif (node.op == "call_function" and node.target in _AS_STRIDED_SCATTER) or (
                node.op == "call_method" and node.target == "as_strided_scatter"):
            start = _dense_start(node)
            if start is not None:
                a, b, size, stride = (_arg(node, i, n) for i, n in
                                      enumerate(("input", "src", "size", "stride")))
                node.args, node.kwargs = (a, b, size, stride, start), {}
                repl = as_strided_scatter_from
            elif _expanded(node):
                repl = expanded_as_strided_scatter
        elif (node.op == "call_method" and node.target == "polygamma_") or (
                node.op == "call_function" and node.target in _POLYGAMMA_):
            repl = polygamma_
        elif node.op == "call_function" and node.target in _INDEX_PUT:
            repl = _INDEX_PUT[node.target] if _mask_index(_arg(node, 1, "indices")) else None
        elif node.op == "call_method" and node.target in ("index_put", "index_put_"):
            if _mask_index(_arg(node, 1, "indices")):
                repl = index_put if node.target == "index_put" else index_put_
        elif _copies_in_eager(node):
            repl = _copied(node.target if node.op == "call_method" else
                           _VIEW_OR_COPY_FUNCTIONS[node.target])
        elif _written_in_another_layout(node):
            repl = _in_self_layout(_inplace_base_name(node))
        elif node.op == "call_function" and node.target is operator.setitem:
            value = _meta(node.args[2])
            if _mask_index(node.args[1]) and isinstance(value, (torch.Tensor, int, float, bool)):
                repl = setitem
        if repl is not None:
            node.target, node.op = repl, "call_function"
            changed = True
    if changed:
        gm.recompile()
    return changed


_VIEW_OR_COPY_METHODS = {"reshape", "reshape_as", "flatten", "ravel", "contiguous"}
_VIEW_OR_COPY_FUNCTIONS = {torch.reshape: "reshape", torch.flatten: "flatten", torch.ravel: "ravel"}
_COPIED: dict = {}


def _copies_in_eager(node) -> bool:
    """A view-or-copy call whose result, in eager (Dynamo's example values), is a copy."""
    if not ((node.op == "call_method" and node.target in _VIEW_OR_COPY_METHODS) or
            (node.op == "call_function" and node.target in _VIEW_OR_COPY_FUNCTIONS)):
        return False
    self, out = (_meta(node.args[0]) if node.args else None), _meta(node)
    return (isinstance(self, torch.Tensor) and isinstance(out, torch.Tensor)
            and not torch._C._is_alias_of(out, self))


def _copied(method: str):
    fn = _COPIED.get(method)
    if fn is None:
        def fn(self, *args, **kwargs):
            # eager's copy: a contiguous clone (in the asked format, for contiguous()), then
            # the call on it, a view of the clone
            if method == "contiguous":
                return self.clone(memory_format=kwargs.get(
                    "memory_format", args[0] if args else torch.contiguous_format))
            return getattr(self.clone(memory_format=torch.contiguous_format), method)(
                *args, **kwargs)
        fn.__name__ = f"{method}_by_copy"
        _COPIED[method] = fn
    return fn


# In-place Tensor methods whose out-of-place twin computes the same values: a write into a
# tensor through an in-place op keeps its memory (eager), but functionalization takes the
# twin's result as the tensor's new value, laid out as the twin lays it out, and a read after
# the write (or the base regenerated from a written view) then has another layout. Written as
# ``self.copy_(twin(self.clone(), ...))`` the new value has self's layout (``copy``'s result is
# laid out as its destination). Only where the layouts differ: elsewhere the graph is left as
# it was.
_NOT_VALUE_WRITES = {"copy_", "set_", "resize_", "resize_as_", "requires_grad_", "detach_",
                     "share_memory_", "retain_grad_", "record_stream_", "rename_", "refine_names_",
                     "align_to_", "as_strided_", "squeeze_", "unsqueeze_", "t_", "transpose_",
                     "swapdims_", "swapaxes_", "fill_", "zero_", "uniform_", "normal_",
                     "random_", "bernoulli_", "exponential_", "geometric_", "log_normal_",
                     "cauchy_", "index_put_", "apply_", "map_", "map2_"}
_INPLACE_OPERATORS = {operator.iadd: "add", operator.isub: "sub", operator.imul: "mul",
                      operator.itruediv: "div"}
_IN_SELF_LAYOUT: dict = {}


def _inplace_base_name(node):
    if node.op == "call_function":
        return _INPLACE_OPERATORS.get(node.target)
    if node.op != "call_method" or not isinstance(node.target, str):
        return None
    name = node.target
    if not name.endswith("_") or name.startswith("_") or name in _NOT_VALUE_WRITES:
        return None
    return name[:-1] if callable(getattr(torch.Tensor, name[:-1], None)) else None


def _in_self_layout(base: str):
    fn = _IN_SELF_LAYOUT.get(base)
    if fn is None:
        def fn(self, *args, **kwargs):
            # (the twin of a clone: a twin that saves its input for the backward must not
            # save the tensor the copy then overwrites, which autograd would refuse)
            return self.copy_(getattr(self.clone(), base)(*args, **kwargs))
        fn.__name__ = f"{base}_in_self_layout"
        _IN_SELF_LAYOUT[base] = fn
    return fn


def _written_in_another_layout(node) -> bool:
    """Whether an in-place op's out-of-place twin lays its result out otherwise than self."""
    base = _inplace_base_name(node)
    if base is None or not node.args:
        return False
    self, out = _meta(node.args[0]), _meta(node)
    if not (isinstance(self, torch.Tensor) and isinstance(out, torch.Tensor)
            and getattr(self, "fake_mode", None) is not None and self.dim() >= 2):
        return False
    if _symbolic_layout(self) or tuple(out.shape) != tuple(self.shape) or \
            tuple(out.stride()) != tuple(self.stride()):
        return False   # (an in-place view op, or sizes only known at run time)
    args = [_meta(a) for a in node.args[1:]]
    kwargs = {k: _meta(v) for k, v in node.kwargs.items()}
    if any(isinstance(a, fx.Node) for a in (*args, *kwargs.values())):
        return False   # (an argument without an example value: a list of nodes, say)
    try:
        with self.fake_mode:
            twin = getattr(self, base)(*args, **kwargs)
    except Exception:  # noqa: BLE001 - the write is left as it is
        return False
    if not isinstance(twin, torch.Tensor) or tuple(twin.shape) != tuple(self.shape) or \
            twin.dtype != self.dtype:
        # (a twin of another dtype, ``logical_not`` of a float tensor, is not the in-place
        # op's autograd: eager's in-place logical op has no derivative, a copy_ has one)
        return False
    return any(n > 1 and a != b for n, a, b in zip(self.shape, self.stride(), twin.stride()))


def _symbolic_layout(t) -> bool:
    return any(isinstance(d, torch.SymInt) for d in (*t.shape, *t.stride()))


def _dense_start(node):
    """The view's start relative to the input's first element, where the rewrite computes what
    ``as_strided_scatter`` does (else None). Eager's result has the
    input's exact layout, and the view's storage offset is absolute in the input's storage: an
    input that overlaps itself (an ``unfold``) or has gaps keeps those in the result, which a
    clone does not, so such calls stay whole (eager refuses their gradient anyway); so does a
    view that reaches outside the input's own elements."""
    a = _meta(node.args[0])
    if not isinstance(a, torch.Tensor) or not _is_dense(a):
        return None
    size, stride = _meta(_arg(node, 2, "size")), _meta(_arg(node, 3, "stride"))
    offset = _meta(_arg(node, 4, "storage_offset"))
    try:
        start = (int(offset) if offset is not None else a.storage_offset()) - a.storage_offset()
        last = start + sum((int(n) - 1) * int(s) for n, s in zip(size, stride) if int(n) > 0)
        ok = start >= 0 and last < a.numel() and min(stride, default=0) >= 0
    except (TypeError, ValueError):   # symbolic: Solder's lowering takes the call as it is
        return None
    return int(start) if ok else None


def _expanded(node) -> bool:
    a = _meta(node.args[0])
    return isinstance(a, torch.Tensor) and any(
        n != 1 and s == 0 for n, s in zip(a.shape, a.stride()))


def _is_dense(t: torch.Tensor) -> bool:
    dims = sorted((int(s), int(n)) for n, s in zip(t.shape, t.stride()) if int(n) != 1)
    expected = 1
    for s, n in dims:
        if s != expected:
            return False
        expected *= n
    return True


def _arg(node, i, name):
    return node.args[i] if len(node.args) > i else node.kwargs.get(name)
