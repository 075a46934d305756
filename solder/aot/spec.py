"""The input/output specification of a package, taken from ``torch.export``'s program, and the
checks a loaded package runs on every call.

A size is an integer or the name of a symbol declared through ``dynamic_shapes`` (export's
``Dim``), with the range export derived for it; an expression of symbols (``2*s0``) is stored as
text and checked once its symbols are bound. Each input is refused with a message naming it and
what was expected when its rank, dtype, device or a size differs, or a symbol's value leaves its
range or differs between two inputs. An input in another memory layout is copied into the one the
kernels were built for (a copy, never a wrong read).
"""
from __future__ import annotations

import json

import torch
import torch.utils._pytree as pytree


class PackageInputError(ValueError):
    """An argument the package cannot take; the message names it and the expectation."""


def _dtype_name(dt: torch.dtype) -> str:
    return str(dt).removeprefix("torch.")


def dtype_from_name(name: str) -> torch.dtype:
    dt = getattr(torch, name, None)
    if not isinstance(dt, torch.dtype):
        raise ValueError(f"unknown dtype {name!r}")
    return dt


def _size_text(v) -> str | int:
    if isinstance(v, torch.SymInt):
        e = v.node.expr
        return int(e) if e.is_Integer else str(e)
    return int(v)


def layout_of(meta: torch.Tensor) -> dict:
    """How an input must be laid out: contiguous, channels_last or explicit strides."""
    import sympy   # here and below, not at import: loading a package needs no sympy
    shape = [_size_text(s) for s in meta.shape]
    strides = [_size_text(s) for s in meta.stride()]
    exprs = [sympy.sympify(s) for s in shape]

    def dense(order):
        out, acc = [None] * len(exprs), sympy.Integer(1)
        for d in order:
            out[d] = acc
            acc = acc * exprs[d]
        return out

    actual = [sympy.sympify(s) for s in strides]
    rank = len(shape)
    if _same(actual, dense(range(rank - 1, -1, -1)), exprs):
        return {"layout": "contiguous"}
    if rank == 4 and _same(actual, dense([1, 3, 2, 0]), exprs):
        return {"layout": "channels_last"}
    return {"layout": "strides", "strides": [str(s) for s in strides]}


def _same(actual, expected, sizes) -> bool:
    # a dimension of size 1 may have any stride
    import sympy
    return all(s == 1 or sympy.simplify(a - e) == 0 for a, e, s in zip(actual, expected, sizes))


def tensor_entry(name: str, meta: torch.Tensor, with_layout: bool) -> dict:
    entry = {"name": name, "dtype": _dtype_name(meta.dtype), "device": str(meta.device),
             "shape": [_size_text(s) for s in meta.shape]}
    if with_layout:
        entry.update(layout_of(meta))
    return entry


def from_exported(ep, user_input_values: list, user_output_values: list) -> dict:
    """The spec of an exported program: user inputs and outputs in call order, symbol ranges,
    and the pytree structure of the call's arguments and results where it serializes."""
    sig = ep.graph_signature
    inputs = []
    for name, val in zip(sig.user_inputs, user_input_values):
        if isinstance(val, torch.Tensor):
            inputs.append(tensor_entry(name, val, True))
        elif isinstance(val, torch.SymInt):
            inputs.append({"name": name, "kind": "symint", "value": _size_text(val)})
        else:
            inputs.append({"name": name, "kind": "constant", "value": val})
    outputs = []
    for name, val in zip(sig.user_outputs, user_output_values):
        if isinstance(val, torch.Tensor):
            outputs.append(tensor_entry(name, val, False))
        else:
            outputs.append({"name": name, "kind": type(val).__name__})
    symbols = {}
    for sym, vr in ep.range_constraints.items():
        lo, hi = vr.lower, vr.upper
        symbols[str(sym)] = {"min": int(lo) if lo.is_finite else None,
                             "max": int(hi) if hi.is_finite else None}
    return {"inputs": inputs, "outputs": outputs, "symbols": symbols,
            "in_spec": _treespec(ep.call_spec.in_spec), "out_spec": _treespec(ep.call_spec.out_spec)}


def _treespec(spec):
    if spec is None:
        return None
    try:
        return pytree.treespec_dumps(spec)
    except Exception:  # noqa: BLE001 - a node type with no serialized name: flat results
        return None


def flatten_call(spec: dict, args: tuple, kwargs: dict) -> list:
    """The call's leaves in the exported order (checked against the exported structure)."""
    leaves, tree = pytree.tree_flatten((args, kwargs))
    if spec["in_spec"] is not None:
        want = pytree.treespec_loads(spec["in_spec"])
        if tree != want:
            raise PackageInputError(_mismatch(spec, args, kwargs, want))
    if len(leaves) != len(spec["inputs"]):
        raise PackageInputError(f"expected {len(spec['inputs'])} inputs "
                                f"({', '.join(i['name'] for i in spec['inputs'])}), got {len(leaves)}")
    return leaves


def _children(tree) -> list:
    # TreeSpec.children() in newer torch, the children_specs attribute in older ones
    method = getattr(tree, "children", None)
    return list(method()) if callable(method) else list(tree.children_specs)


def _mismatch(spec, args, kwargs, want) -> str:
    """Which argument differs from the exported call, in words."""
    names = [i["name"] for i in spec["inputs"]]
    try:
        arg_specs = _children(_children(want)[0])
    except (AttributeError, IndexError):
        return f"the arguments' structure differs from the exported call's ({len(names)} inputs)"
    if len(args) != len(arg_specs):
        return f"expected {len(arg_specs)} positional arguments, got {len(args)}"
    leaf = 0
    for i, (a, s) in enumerate(zip(args, arg_specs)):
        if pytree.tree_structure(a) != s:
            if s.num_leaves == 1 and s.num_children == 0:
                return f"input {names[leaf]}: expected a tensor, got {type(a).__name__}"
            return f"argument {i}: its structure differs from the exported call's"
        leaf += s.num_leaves
    return "keyword arguments differ from the exported call's"


def unflatten_results(spec: dict, flat: list):
    if spec["out_spec"] is None:
        return tuple(flat)
    return pytree.tree_unflatten(flat, pytree.treespec_loads(spec["out_spec"]))


def check_inputs(spec: dict, leaves: list, device: torch.device) -> tuple[list, dict]:
    """(inputs as the kernels need them, symbol bindings); raises PackageInputError."""
    bound: dict[str, int] = {}
    exprs = []   # (input, dim, expression) checked once every symbol is bound
    out = []
    for entry, x in zip(spec["inputs"], leaves):
        name = entry["name"]
        kind = entry.get("kind", "tensor")
        if kind != "tensor":
            if kind == "constant" and x != entry["value"]:
                raise PackageInputError(f"input {name}: exported as the constant "
                                        f"{entry['value']!r}, got {x!r}")
            if kind == "symint":
                if not isinstance(x, int):
                    raise PackageInputError(f"input {name}: expected an int, got {type(x).__name__}")
                _bind(spec, bound, entry["value"], x, f"input {name}")
            out.append(x)
            continue
        if not isinstance(x, torch.Tensor):
            raise PackageInputError(f"input {name}: expected a tensor, got {type(x).__name__}")
        want_dtype = entry["dtype"]
        if _dtype_name(x.dtype) != want_dtype:
            raise PackageInputError(f"input {name}: expected dtype {want_dtype}, got "
                                    f"{_dtype_name(x.dtype)}")
        if x.device != device:
            raise PackageInputError(f"input {name}: expected a tensor on {device}, got one on "
                                    f"{x.device}")
        shape = entry["shape"]
        if x.dim() != len(shape):
            raise PackageInputError(f"input {name}: expected {len(shape)} dimensions "
                                    f"{_shown(shape)}, got {x.dim()} {tuple(x.shape)}")
        for d, (want, got) in enumerate(zip(shape, x.shape)):
            if isinstance(want, int):
                if got != want:
                    raise PackageInputError(f"input {name}: dimension {d} must be {want} "
                                            f"{_shown(shape)}, got {got} {tuple(x.shape)}")
            elif want in spec["symbols"] or _is_symbol(want):
                _bind(spec, bound, want, int(got), f"input {name} dimension {d}")
            else:
                exprs.append((name, d, want, int(got)))
        out.append(in_layout(x, entry, bound))
    for name, d, expr, got in exprs:
        import sympy
        value = sympy.sympify(expr).subs({sympy.Symbol(k): v for k, v in bound.items()})
        if value.is_Integer and int(value) != got:
            raise PackageInputError(f"input {name}: dimension {d} must be {expr} = {int(value)}, "
                                    f"got {got}")
    return out, bound


def _is_symbol(text) -> bool:
    return isinstance(text, str) and text.isidentifier()


def _bind(spec, bound, sym: str, value: int, where: str):
    rng = spec["symbols"].get(sym, {"min": None, "max": None})
    lo, hi = rng["min"], rng["max"]
    if (lo is not None and value < lo) or (hi is not None and value > hi):
        raise PackageInputError(f"{where}: size {value} is outside the declared range of {sym} "
                                f"[{lo if lo is not None else '-inf'}, "
                                f"{hi if hi is not None else 'inf'}]")
    if sym in bound and bound[sym] != value:
        raise PackageInputError(f"{where}: size {value} differs from {sym} = {bound[sym]} "
                                "bound by an earlier input (exported as the same size)")
    bound[sym] = value


def _shown(shape) -> str:
    return "(" + ", ".join(str(s) for s in shape) + ")"


def in_layout(x: torch.Tensor, entry: dict, bound: dict) -> torch.Tensor:
    layout = entry.get("layout", "contiguous")
    if layout == "contiguous":
        return x if x.is_contiguous() else x.contiguous()
    if layout == "channels_last":
        fmt = torch.channels_last
        return x if x.is_contiguous(memory_format=fmt) else x.contiguous(memory_format=fmt)
    import sympy
    subs = {sympy.Symbol(k): v for k, v in bound.items()}
    strides = tuple(int(sympy.sympify(s).subs(subs)) for s in entry["strides"])
    if all(n == 1 or s == w for n, s, w in zip(x.shape, x.stride(), strides)):
        return x
    y = torch.empty_strided(tuple(x.shape), strides, dtype=x.dtype, device=x.device)
    y.copy_(x)
    return y


def with_strides(x: torch.Tensor, strides) -> torch.Tensor:
    """``x`` with exactly these strides (size-1 dimensions too), copied if it has others. Strides
    that do not cover the tensor's elements once each (an expanded weight) are not recreated:
    copying into overlapping memory would be wrong, and ``in_layout`` already gave a dense one."""
    if strides is None or tuple(x.stride()) == tuple(strides) or not _dense(x.shape, strides):
        return x
    y = torch.empty_strided(tuple(x.shape), tuple(strides), dtype=x.dtype, device=x.device)
    y.copy_(x)
    return y


def _dense(shape, strides) -> bool:
    """Whether ``strides`` lay ``shape`` out with no gaps and no overlap, in some dim order."""
    expected = 1
    for size, stride in sorted((d for d in zip(shape, strides) if d[0] != 1), key=lambda d: d[1]):
        if stride != expected:
            return False
        expected *= size
    return True


def dumps(spec: dict) -> str:
    return json.dumps(spec, indent=1, sort_keys=True)
