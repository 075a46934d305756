"""Ops that index: the view-scatter family and gathers.

Rules kept here (docs/ARCHITECTURE.md, "Differential fuzzing"):
- every index is in range (eager raises; Solder does not check by default);
- a scatter that does not accumulate never sends two values to one element (``scatter``,
  ``index_copy``, ``index_put``): which one lands is unspecified in eager;
- no view scatter into a base whose elements share memory (eager writes the region through
  the overlap: undefined), and an ``as_strided_scatter`` into an input, a view of one, or a
  computed value made contiguous (its positions are in the base's storage, whose layout eager's
  kernels and the meta functions may choose differently).
"""
from __future__ import annotations

from .draw import Ctx, Draft, broadcasts, op, overlaps


def _slice_params(c: Ctx, size: int):
    start = c.rng.randint(0, size)
    end = c.rng.choice((None, size, c.rng.randint(start, size)))
    step = c.rng.choice((1, 1, 2, 3))
    count = len(range(start, size if end is None else end, step))
    return start, end, step, count


def scatter_index(c: Ctx, x, d: int, unique: bool):
    """An index for scatter/gather along d, as a flat list of literals, and its shape: at most
    x's size outside d; with unique, distinct along d within each column (the positions that
    share every other coordinate), so no two values land on one element."""
    if x.shape[d] == 0:
        return None
    shape = tuple(c.rng.randint(1, x.shape[d]) if e == d else
                  c.rng.randint(min(1, x.shape[e]), x.shape[e]) for e in range(x.rank))
    n = 1
    for s in shape:
        n *= s
    if n > 48:
        return None
    strides = [1] * x.rank
    for e in range(x.rank - 2, -1, -1):
        strides[e] = strides[e + 1] * shape[e + 1]
    columns, flat = {}, []
    for pos in range(n):
        coords = [(pos // strides[e]) % shape[e] for e in range(x.rank)]
        key = tuple(coords[:d] + coords[d + 1:])
        if key not in columns:
            columns[key] = c.indices(x.shape[d], shape[d], unique, negative=False)
        flat.append(columns[key][coords[d]])
    return flat, shape


@op("scatter", 11)
def draw_scatter(c: Ctx):
    x = c.pick(lambda v: v.rank >= 1)
    if x is None:
        return None
    n, r = x.name, x.rank
    d = c.dim(x)
    dd = d % r
    size = x.shape[dd]
    kind = c.rng.choice(("slice_scatter", "select_scatter", "diagonal_scatter",
                         "as_strided_scatter", "index_put", "index_add", "index_copy",
                         "index_fill", "scatter", "scatter_value", "scatter_add",
                         "scatter_reduce", "masked_fill", "masked_fill"))
    value = c.ns.get(n)
    if kind.endswith("_scatter") and value is not None and overlaps(value):
        # eager clones the base keeping its overlapping strides (an unfold) and writes the
        # region through them: which write lands is undefined
        return None
    if kind == "slice_scatter":
        start, end, step, count = _slice_params(c, size)
        src = c.operand(x.shape[:dd] + (count,) + x.shape[dd + 1:], x)
        return Draft(f"torch.slice_scatter({n}, {src}, {d}, {start}, {end}, {step})", kind)
    if kind == "select_scatter":
        if size == 0:
            return None
        src = c.operand(x.shape[:dd] + x.shape[dd + 1:], x)
        return Draft(f"torch.select_scatter({n}, {src}, {d}, {c.rng.randrange(-size, size)})", kind)
    if kind == "diagonal_scatter":
        if r < 2:
            return None
        d2 = c.rng.choice([e for e in range(r) if e != dd])
        off = c.rng.choice((0, 0, 1, -1))
        diag = c.meta(f"{n}.diagonal({off}, {dd}, {d2})")
        if diag is None:
            return None
        return Draft(f"torch.diagonal_scatter({n}, {c.operand(diag.shape, x)}, {off}, {dd}, {d2})",
                     kind)
    if kind == "as_strided_scatter":
        total = x.numel
        if total < 2:
            return None
        a = c.rng.randint(1, min(3, total))
        st = c.rng.randint(1, max(1, (total - 1) // max(1, a - 1))) if a > 1 else 1
        off = c.rng.randint(0, total - 1 - (a - 1) * st)
        src = c.operand((a,), x)
        # the view's positions are in the base's storage: a computed base's layout is eager's
        # kernel's choice, which the meta functions torch.compile traces with may not share (a
        # roll of a channels-last batch norm: channels-last in eager, contiguous in the trace;
        # a batch norm of a permuted input the other way round, seed 167327), so a computed
        # base is made contiguous first, in both
        base = n if x.of_input else f"{n}.contiguous()"
        # the offset is absolute in x's storage: counted from x's own first element, so the
        # view stays among x's elements (one that reaches outside them gets a gradient from
        # eager that is wrong, and one from any compiler that depends on where autograd's
        # gradient tensor starts in its storage)
        return Draft(f"torch.as_strided_scatter({base}, {src}, ({a},), ({st},), "
                     f"{base}.storage_offset() + {off})", kind)
    if kind in ("index_put", "index_add", "index_copy", "index_fill"):
        if size == 0:
            return None
        accumulate = kind == "index_put" and c.chance(0.5)
        unique = kind in ("index_copy", "index_put") and not accumulate
        idx = c.indices(size, c.rng.randint(1, 4), unique, negative=kind == "index_put")
        it = c.index_tensor(idx)
        if kind == "index_put":
            vals = c.operand((len(idx),) + x.shape[1:], x) if c.chance(0.7) else c.const((), x)
            return Draft(f"torch.index_put({n}, ({it},), {vals}, accumulate={accumulate})", kind)
        if kind == "index_fill":
            return Draft(f"torch.index_fill({n}, {d}, {it}, {c.scalar(x)})", kind)
        src = c.operand(x.shape[:dd] + (len(idx),) + x.shape[dd + 1:], x)
        if kind == "index_add":
            alpha = c.rng.choice(("", "", ", alpha=2", ", alpha=-1"))
            return Draft(f"torch.index_add({n}, {d}, {it}, {src}{alpha})", kind)
        return Draft(f"torch.index_copy({n}, {d}, {it}, {src})", kind)
    if kind == "masked_fill":
        mask = c.pick(lambda v: v.boolean and broadcasts(v.shape, x.shape) == x.shape)
        mask_text = mask.name if mask is not None and c.chance(0.6) else f"{n} > 0" \
            if not x.boolean else f"~{n}"
        value = c.scalar(x) if c.chance(0.7) else c.const((), x)
        return Draft(f"{n}.masked_fill({mask_text}, {value})", kind)
    got = scatter_index(c, x, dd, unique=kind == "scatter")
    if got is None:
        return None
    flat, shape = got
    it = c.index_tensor(flat, shape)
    if kind == "scatter_value":
        return Draft(f"torch.scatter({n}, {d}, {it}, {c.scalar(x)})", "scatter")
    src = c.operand(shape, x)
    if kind == "scatter":
        return Draft(f"torch.scatter({n}, {d}, {it}, {src})", kind)
    if kind == "scatter_add":
        return Draft(f"torch.scatter_add({n}, {d}, {it}, {src})", kind)
    red = c.rng.choice(("sum", "prod", "mean", "amax", "amin"))
    inc = c.rng.choice(("True", "False"))
    return Draft(f"torch.scatter_reduce({n}, {d}, {it}, {src}, {red!r}, include_self={inc})",
                 kind)


@op("gather", 7)
def draw_gather(c: Ctx):
    x = c.pick(lambda v: v.rank >= 1 and v.numel > 0)
    if x is None:
        return None
    n, r = x.name, x.rank
    d = c.dim(x, nonempty=True)
    dd = d % r
    size = x.shape[dd]
    kind = c.rng.choice(("getitem", "getitem", "index_select", "gather", "take",
                         "take_along_dim", "embedding", "computed"))
    idx = c.indices(size, c.rng.randint(1, 4), unique=False)
    it = c.index_tensor(idx)
    if kind == "getitem":
        if r >= 2 and c.chance(0.3):
            idx2 = c.indices(x.shape[1], len(idx), unique=False)
            if not idx2:
                return None
            return Draft(f"{n}[{it}, {c.index_tensor(idx2)}]", "index")
        return Draft(f"{n}[{':, ' * dd}{it}]", "index")
    if kind == "index_select":
        return Draft(f"torch.index_select({n}, {d}, {c.index_tensor([i % size for i in idx])})",
                     kind)
    if kind in ("gather", "take_along_dim"):
        got = scatter_index(c, x, dd, unique=False)
        if got is None:
            return None
        flat, shape = got
        gi = c.index_tensor(flat, shape)
        if kind == "gather":
            return Draft(f"torch.gather({n}, {d}, {gi})", kind)
        return Draft(f"torch.take_along_dim({n}, {gi}, {d})", kind)
    if kind == "take":
        flat = [c.rng.randrange(-x.numel, x.numel) for _ in range(c.rng.randint(1, 5))]
        return Draft(f"torch.take({n}, {c.index_tensor(flat)})", kind)
    if kind == "embedding":
        if r != 2 or not x.floating:
            return None
        return Draft(f"F.embedding({c.index_tensor([i % size for i in idx])}, {n})", kind)
    # indices computed from an integer value of the program
    ints = c.pick(lambda v: v.integer and v.numel <= 16)
    if ints is None:
        return None
    return Draft(f"{n}[{':, ' * dd}{ints.name}.remainder({size})]", "index_computed")
