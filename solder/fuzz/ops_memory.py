"""Ops that move data: views, cat/pad/flip, the view-scatter family, gathers, in-place writes
into inputs and views of them, and random numbers.

Rules kept here (docs/ARCHITECTURE.md, "Differential fuzzing"):
- every index is in range (eager raises; Solder does not check by default);
- no in-place write goes into a tensor whose elements share memory (an expanded input): eager
  writes them in some order, undefined;
- no in-place write reads an operand that shares memory with what it writes (eager's result
  then depends on the order it reads and writes the elements);
- a write that does not accumulate never sends two values to one element (``scatter``,
  ``index_copy``, ``index_put`` and ``x[idx] = v`` get distinct indices): which one lands is
  unspecified in eager;
- a random op's value is never an operand of a later op: Solder's random stream differs from
  eager's by design, so its values are compared by their law (``LAWS``), never element-wise.
"""
from __future__ import annotations

from .draw import MAX_NUMEL, Ctx, Draft, Var, broadcasts, op, tup


def _reshape(c: Ctx, shape: tuple) -> str:
    """A shape with the same number of elements."""
    r = len(shape)
    kind = c.rng.choice(("flat", "merge", "split", "one"))
    if kind == "merge" and r >= 2:
        i = c.rng.randrange(r - 1)
        new = shape[:i] + (shape[i] * shape[i + 1],) + shape[i + 2:]
    elif kind == "split" and r >= 1:
        i = c.rng.randrange(r)
        divs = [a for a in (2, 3) if shape[i] and shape[i] % a == 0]
        if not divs:
            return "(-1,)"
        a = c.rng.choice(divs)
        new = shape[:i] + (a, shape[i] // a) + shape[i + 1:]
    elif kind == "one":
        i = c.rng.randint(0, r)
        new = shape[:i] + (1,) + shape[i:]
    else:
        return "(-1,)"
    if new and 0 not in new and c.chance(0.3):
        j = c.rng.randrange(len(new))
        new = new[:j] + (-1,) + new[j + 1:]
    return tup(new) if new else "()"


@op("view", 12)
def draw_view(c: Ctx):
    x = c.pick()
    if x is None:
        return None
    r, n = x.rank, x.name
    kinds = ["reshape", "view", "unsqueeze", "squeeze", "flatten", "expand", "index_none"]
    if r >= 1:
        kinds += ["narrow", "slice", "select", "unfold", "chunk", "unbind", "movedim"]
    if r >= 2:
        kinds += ["permute", "transpose", "mT", "diagonal", "unflatten"]
    if r <= 2:
        kinds.append("t")
    kinds += ["as_strided", "bitcast"]
    kind = c.rng.choice(kinds)
    d = c.dim(x) if r else 0
    size = x.shape[d] if r else 1
    if kind in ("reshape", "view"):
        return Draft(f"{n}.{kind}{_reshape(c, x.shape)}", kind)
    if kind == "unsqueeze":
        return Draft(f"{n}.unsqueeze({c.rng.randint(-r - 1, r)})", kind)
    if kind == "squeeze":
        ones = [i for i, s in enumerate(x.shape) if s == 1]
        return Draft(f"{n}.squeeze({c.rng.choice(ones) if ones and c.chance(0.7) else ''})", kind)
    if kind == "flatten":
        start = c.rng.randint(0, max(0, r - 1))
        return Draft(f"{n}.flatten({start})", kind)
    if kind == "expand":
        new = tuple(3 if s == 1 and c.chance(0.7) else (-1 if c.chance(0.3) else s) for s in x.shape)
        if c.chance(0.4) or not any(s == 1 for s in x.shape):
            new = (2,) + new
        return Draft(f"{n}.expand{tup(new)}", kind)
    if kind == "index_none":
        return Draft(c.rng.choice((f"{n}[None]", f"{n}[..., None]")), "unsqueeze")
    if kind == "narrow":
        start = c.rng.randint(0, size)
        return Draft(f"{n}.narrow({d}, {start}, {c.rng.randint(0, size - start)})", kind)
    if kind == "slice":
        start = c.rng.choice(("", "1", "-2", "2"))
        stop = c.rng.choice(("", "", "-1", "3"))
        step = c.rng.choice(("", "", ":2", ":3"))
        lead = ":, " * (d % r) if c.chance(0.7) else "..., " + ":, " * (r - 1 - d % r)
        if lead.startswith("..."):
            return Draft(f"{n}[..., {start}:{stop}{step}{', :' * (r - 1 - d % r)}]", "slice")
        return Draft(f"{n}[{lead}{start}:{stop}{step}]", "slice")
    if kind == "select":
        if size == 0:
            return None
        i = c.rng.randrange(size) - (size if c.chance(0.3) else 0)
        return Draft(c.rng.choice((f"{n}.select({d}, {i})", f"{n}[{':, ' * (d % r)}{i}]")), kind)
    if kind == "unfold":
        sz = c.rng.randint(1, max(1, min(3, size)))
        return Draft(f"{n}.unfold({d}, {sz}, {c.rng.randint(1, 2)})", kind)
    if kind == "chunk":
        k = c.rng.randint(1, 3)
        return Draft(c.rng.choice((f"{n}.chunk({k}, {d})[0]", f"{n}.split({k}, {d})[-1]")), "split")
    if kind == "unbind":
        if size == 0:
            return None
        return Draft(f"{n}.unbind({d})[{c.rng.randrange(size)}]", kind)
    if kind == "movedim":
        return Draft(f"{n}.movedim({d}, {c.rng.randrange(r)})", kind)
    if kind == "permute":
        perm = list(range(r))
        c.rng.shuffle(perm)
        return Draft(f"{n}.permute{tup(perm)}", kind)
    if kind == "transpose":
        return Draft(f"{n}.transpose({c.rng.randrange(r)}, {c.rng.randrange(r)})", kind)
    if kind == "mT":
        return Draft(f"{n}.mT", kind)
    if kind == "t":
        return Draft(f"{n}.t()", kind)
    if kind == "diagonal":
        off = c.rng.choice((0, 0, 1, -1))
        d2 = c.rng.choice([e for e in range(r) if e != d % r])
        return Draft(f"{n}.diagonal({off}, {d}, {d2})", kind)
    if kind == "unflatten":
        divs = [a for a in (2, 3) if size and size % a == 0]
        if not divs:
            return None
        return Draft(f"{n}.unflatten({d}, ({c.rng.choice(divs)}, -1))", kind)
    if kind == "as_strided":
        total = x.numel
        if total < 2:
            return None
        a = c.rng.randint(1, min(3, total))
        st = c.rng.randint(1, max(1, (total - 1) // max(1, a - 1))) if a > 1 else 1
        return Draft(f"{n}.contiguous().as_strided(({a},), ({st},))", kind)
    pairs = {"float32": "int32", "int32": "float32", "float64": "int64", "int64": "float64",
             "float16": "bfloat16", "bfloat16": "float16"}
    other = pairs.get(str(x.dtype).removeprefix("torch."))
    if other is None:
        return None
    return Draft(f"{n}.view(torch.{other})", "view_dtype")


def _like_except(c: Ctx, x, d: int) -> str:
    """Something to concatenate with x along d: a variable of the same shape elsewhere, or a
    view of x."""
    def fits(v):
        return v.rank == x.rank and all(v.shape[i] == x.shape[i] for i in range(x.rank) if i != d)
    v = c.pick(fits)
    if v is not None and c.chance(0.6):
        return v.name
    size = x.shape[d]
    return c.rng.choice((f"{x.name}.flip({d})", f"{x.name}.narrow({d}, 0, {min(size, 1)})"))


@op("catpad", 6)
def draw_catpad(c: Ctx):
    x = c.pick()
    if x is None:
        return None
    kinds = ["pad", "pad", "flip", "roll", "repeat"]
    if x.rank >= 1:
        kinds += ["cat", "cat", "stack"]
    if x.rank >= 2:
        kinds += ["rot90", "pad_mode"]
    kind = c.rng.choice(kinds)
    n, r = x.name, x.rank
    d = c.dim(x) if r else 0
    if kind == "cat":
        parts = [n, _like_except(c, x, d % r)]
        if c.chance(0.3):
            parts.append(_like_except(c, x, d % r))
        return Draft(f"torch.cat([{', '.join(parts)}], dim={d})", "cat")
    if kind == "stack":
        same = c.pick(lambda v: v.shape == x.shape)
        other = same.name if same is not None else f"{n} * 2"
        return Draft(f"torch.stack([{n}, {other}], {c.rng.randint(-r - 1, r)})", "stack")
    if kind in ("pad", "pad_mode"):
        k = c.rng.randint(1, max(1, min(r, 2)))
        pads = tuple(c.rng.choice((0, 1, 2, -1)) for _ in range(2 * k))
        if kind == "pad_mode":
            mode = c.rng.choice(("reflect", "replicate", "circular"))
            pads = tuple(abs(p) for p in pads)
            return Draft(f"F.pad({n}, {tup(pads)}, mode={mode!r})", f"pad_{mode}")
        return Draft(f"F.pad({n}, {tup(pads)}, value={c.scalar(x)})", "pad")
    if kind == "flip":
        dims = tuple(sorted(c.rng.sample(range(r), c.rng.randint(1, r)))) if r else ()
        return Draft(f"{n}.flip{tup(dims) if dims else '(())'}", "flip")
    if kind == "roll":
        if r and c.chance(0.7):
            return Draft(f"{n}.roll({c.rng.choice((1, -1, 2))}, {d})", "roll")
        return Draft(f"{n}.roll({c.rng.choice((1, 3))})", "roll")
    if kind == "repeat":
        reps = tuple(c.rng.choice((1, 1, 2)) for _ in range(r + c.rng.choice((0, 1))))
        return Draft(f"{n}.repeat{tup(reps) if reps else '(())'}", "repeat")
    return Draft(f"torch.rot90({n}, {c.rng.choice((1, 2, -1))}, (0, {r - 1}))", "rot90")


def _slice_params(c: Ctx, size: int):
    start = c.rng.randint(0, size)
    end = c.rng.choice((None, size, c.rng.randint(start, size)))
    step = c.rng.choice((1, 1, 2, 3))
    count = len(range(start, size if end is None else end, step))
    return start, end, step, count


def _scatter_index(c: Ctx, x, d: int, unique: bool):
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
        return Draft(f"torch.as_strided_scatter({n}, {src}, ({a},), ({st},), {off})", kind)
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
    got = _scatter_index(c, x, dd, unique=kind == "scatter")
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
        got = _scatter_index(c, x, dd, unique=False)
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


TARGET_VIEWS = ("", "", "[1:]", "[..., 1:]", "[..., 1:].mT", "[:, ::2]", "[0]", "[..., -1]",
                ".t()", ".mT", ".diagonal()", ".view(-1)", ".reshape(-1)", ".contiguous()",
                ".unsqueeze(0)", ".transpose(0, -1)", ".narrow(0, 0, 1)", ".view_as({b})",
                ".reshape({shape})")
METHODS = ("mul_({y})", "add_({y})", "add_({y}, alpha=2)", "sub_({y})", "div_({y})",
           "clamp_(-0.5, 0.5)", "fill_({s})", "zero_()", "copy_({y})", "copy_({y})", "neg_()",
           "abs_()", "sigmoid_()", "pow_(2)", "floor_()", "masked_fill_({m}, {s})",
           "lerp_({y}, 0.5)", "addcmul_({y}, {y})", "exp_()", "clamp_min_(0)", "remainder_({d})",
           "logical_not_()", "relu_()", "index_add_({i})", "index_fill_({i})", "scatter_({i})",
           "index_put_({i})", "tanh_()")


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
    if form.startswith("index_put_"):
        acc = c.chance(0.5)
        idx = c.indices(size, c.rng.randint(1, 3), unique=not acc)
        vals = c.operand((len(idx),) + target.shape[1:], target)
        return f"({c.index_tensor(idx)},), {vals}, accumulate={acc}"
    got = _scatter_index(c, target, 0, unique=True)
    if got is None:
        return None
    flat, shape = got
    return f"0, {c.index_tensor(flat, shape)}, {c.operand(shape, target)}"


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
