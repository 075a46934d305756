"""In-place writes into inputs, views of inputs and intermediate values; random numbers.

Rules kept here (docs/ARCHITECTURE.md, "Differential fuzzing"):
- no in-place write goes into a tensor whose elements share memory (an expanded input): eager
  writes them in some order, undefined; nor into an input whose elements do, nor through an
  as_strided view (torch.compile refuses both);
- no in-place write reads an operand that shares memory with what it writes (eager's result
  then depends on the order it reads and writes the elements);
- ``x[idx] = v`` and ``index_put_`` without accumulate get distinct indices;
- a random op's value is never an operand of a later op: Solder's random stream differs from
  eager's by design, so its values are compared by their law (``LAWS``), never element-wise.
"""
from __future__ import annotations

from .draw import MAX_NUMEL, Ctx, Draft, Var, op, tup
from .ops_indexing import scatter_index


TARGET_VIEWS = ("", "", "[1:]", "[..., 1:]", "[..., 1:].mT", "[:, ::2]", "[0]", "[..., -1]",
                ".t()", ".mT", ".diagonal()", ".view(-1)", ".reshape(-1)", ".contiguous()",
                ".unsqueeze(0)", ".transpose(0, -1)", ".narrow(0, 0, 1)", ".view_as({b})",
                ".reshape({shape})")
METHODS = ("mul_({y})", "add_({y})", "add_({y}, alpha=2)", "sub_({y})", "div_({y})",
           "clamp_(-0.5, 0.5)", "fill_({s})", "zero_()", "copy_({y})", "copy_({y})", "neg_()",
           "abs_()", "sigmoid_()", "pow_(2)", "floor_()", "masked_fill_({m}, {s})",
           "lerp_({y}, 0.5)", "addcmul_({y}, {y})", "exp_()", "clamp_min_(0)", "remainder_({d})",
           "logical_not_()", "relu_()", "index_add_({i})", "index_fill_({i})", "scatter_({i})",
           "index_put_({i})", "tanh_()", "scatter_add_({i})", "scatter_reduce_({i})",
           "index_copy_({i})", "index_reduce_({i})", "put_({i})", "masked_scatter_({m}, {o})")


@op("inplace", 14)
def draw_inplace(c: Ctx):
    base = c.pick(lambda v: v.of_input and v.writable) if c.chance(0.7) else \
        c.pick(lambda v: v.writable)
    if base is None:
        return None
    view = c.rng.choice(TARGET_VIEWS).format(b=base.name, shape=tup(base.shape) if base.shape
                                             else "()")
    t = base.name + view
    meta = c.meta(t)
    if meta is None or not c.writable(t):
        return None
    # the target's shape under its base's name: constants then read "dtype=a0.dtype"
    target = Var(base.name, meta.shape, meta.dtype, True)
    c.read = []
    draft = _write(c, t, target)
    if draft is None or c.reads_from(draft.code, t):
        return None
    return draft


def _write(c: Ctx, t: str, target):
    kind = c.rng.choice(("method", "method", "method", "setitem"))
    if kind == "setitem":
        return _setitem(c, t, target)
    form = c.rng.choice(METHODS)
    y = c.partner(target, into=True,
                  pred=lambda v: target.floating or not v.floating)
    fields = {"y": y, "s": c.scalar(target), "d": c.divisor(y, target),
              "m": f"{t} > 0" if not target.boolean else f"~{t}"}
    if "{o}" in form:   # masked_scatter_'s source: as many elements as the target, or more
        fields["o"] = c.operand(target.shape, target)
    if "{i}" in form:
        if target.rank == 0 or target.shape[0] == 0:
            return None
        fields["i"] = _indexed_write_args(c, form, target, t)
        if fields["i"] is None:
            return None
    code = f"{t}.{form.format(**fields)}"
    name = form.split("(")[0]
    if c.chance(0.25):
        return Draft(code, name)
    return Draft(code, name, assign=False)


def _indexed_write_args(c: Ctx, form: str, target, t: str):
    size = target.shape[0]
    if form.startswith("index_add_"):
        idx = c.indices(size, c.rng.randint(1, 3), unique=False)
        return f"0, {c.index_tensor(idx)}, {c.operand((len(idx),) + target.shape[1:], target)}"
    if form.startswith("index_fill_"):
        idx = c.indices(size, c.rng.randint(1, 3), unique=False)
        return f"0, {c.index_tensor(idx)}, {c.scalar(target)}"
    if form.startswith("index_copy_"):   # distinct rows: repeated ones are unordered in eager
        idx = c.indices(size, c.rng.randint(1, 3), unique=True, negative=False)
        return f"0, {c.index_tensor(idx)}, {c.operand((len(idx),) + target.shape[1:], target)}"
    if form.startswith("index_reduce_"):
        idx = c.indices(size, c.rng.randint(1, 3), unique=False, negative=False)
        reduce = c.rng.choice(("prod", "mean", "amax", "amin"))
        return (f"0, {c.index_tensor(idx)}, {c.operand((len(idx),) + target.shape[1:], target)}, "
                f"{reduce!r}, include_self={c.chance(0.5)}")
    if form.startswith("put_"):   # positions in the flattened target, negative ones wrap
        acc = c.chance(0.5)
        n = 1
        for d in target.shape:
            n *= d
        idx = c.indices(n, c.rng.randint(1, 4), unique=not acc)
        return f"{c.index_tensor(idx)}, {c.operand((len(idx),), target)}, accumulate={acc}"
    if form.startswith("index_put_"):
        acc = c.chance(0.5)
        idx = c.indices(size, c.rng.randint(1, 3), unique=not acc)
        vals = c.operand((len(idx),) + target.shape[1:], target)
        return f"({c.index_tensor(idx)},), {vals}, accumulate={acc}"
    # (scatter_ gets distinct indices; the reducing forms accumulate)
    got = scatter_index(c, target, 0, unique=form.startswith("scatter_("))
    if got is None:
        return None
    flat, shape = got
    args = f"0, {c.index_tensor(flat, shape)}, {c.operand(shape, target)}"
    if form.startswith("scatter_reduce_"):
        reduce = c.rng.choice(("sum", "mean", "amax", "amin", "prod"))
        args += f", {reduce!r}, include_self={c.chance(0.5)}"
    return args


def _setitem(c: Ctx, t: str, target):
    r = target.rank
    kind = c.rng.choice(("index", "slice_iadd", "select", "mask", "all"))
    if kind == "index" and r >= 1 and target.shape[0]:
        idx = c.indices(target.shape[0], c.rng.randint(1, 3), unique=True)
        value = c.scalar(target) if c.chance(0.4) else c.operand((len(idx),) + target.shape[1:],
                                                                 target)
        return Draft(f"{t}[{c.index_tensor(idx)}] = {value}", "setitem_index", assign=False)
    if kind == "slice_iadd" and r >= 1:
        region = c.meta(f"{t}[1:]")
        if region is None:
            return None
        return Draft(f"{t}[1:] += {c.operand(region.shape, target)}", "slice_iadd", assign=False)
    if kind == "select" and r >= 1 and target.shape[-1]:
        return Draft(f"{t}[..., 0] = {c.scalar(target)}", "setitem_select", assign=False)
    if kind == "mask":
        mask = f"{t} > 0" if not target.boolean else f"~{t}"
        return Draft(f"{t}[{mask}] = {c.scalar(target)}", "setitem_mask", assign=False)
    return Draft(f"{t}[...] = {c.operand(target.shape, target)}", "setitem_all", assign=False)


@op("random", 3)
def draw_random(c: Ctx):
    x = c.pick(lambda v: v.numel <= MAX_NUMEL)
    if x is None:
        return None
    shape = tup(x.shape) if x.shape else "()"
    kind = c.rng.choice(("rand_like", "randn_like", "rand", "randint", "uniform", "normal",
                         "dropout", "bernoulli", "randperm"))
    if kind in ("rand_like", "randn_like", "dropout") and not x.floating:
        kind = "rand"
    if kind == "rand_like":
        return Draft(f"torch.rand_like({x.name})", kind, law=("uniform", 0.0, 1.0))
    if kind == "randn_like":
        return Draft(f"torch.randn_like({x.name})", kind, law=("normal", 0.0, 1.0))
    if kind == "rand":
        return Draft(f"torch.rand({shape}, device=DEV)", kind, law=("uniform", 0.0, 1.0))
    if kind == "randint":
        lo, hi = c.rng.choice(((0, 2), (-3, 4), (0, 10)))
        return Draft(f"torch.randint({lo}, {hi}, {shape}, device=DEV)", kind,
                     law=("randint", lo, hi))
    if kind == "uniform":
        lo, hi = c.rng.choice(((-2.0, 3.0), (0.0, 1.0), (5.0, 6.0)))
        return Draft(f"torch.empty({shape}, device=DEV).uniform_({lo}, {hi})", kind,
                     law=("uniform", lo, hi))
    if kind == "normal":
        m, s = c.rng.choice(((0.0, 1.0), (2.0, 0.5), (-1.0, 3.0)))
        return Draft(f"torch.empty({shape}, device=DEV).normal_({m}, {s})", kind,
                     law=("normal", m, s))
    if kind == "dropout":
        p = c.rng.choice((0.25, 0.5, 0.75))
        return Draft(f"F.dropout({x.name}, p={p})", kind, law=("dropout", p))
    if kind == "bernoulli":
        p = c.rng.choice((0.25, 0.5, 0.9))
        return Draft(f"torch.bernoulli(torch.full({shape}, {p}, device=DEV))", kind,
                     law=("bernoulli", p))
    k = c.rng.randint(1, 8)
    return Draft(f"torch.randperm({k}, device=DEV)", kind, law=("perm", k))
