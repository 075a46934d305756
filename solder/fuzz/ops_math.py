"""Ops that compute: pointwise (casts and integer division included), reductions, norms and
softmax, library calls (matmul, convolution, attention) and the rest (sorts, scans, pooling,
constructors).

Rules kept here, for eager's undefined behaviour (docs/ARCHITECTURE.md, "Differential fuzzing"):
- an integer divisor is never zero: ``x // (d.remainder(5) + 1)``, a non-zero literal (eager
  raises on the CPU, a GPU's result is undefined);
- a float is made finite and small before it becomes an integer (``nan_to_num().clamp()``):
  casting NaN, inf or an out-of-range float to an integer type is undefined behaviour in C++;
- sorts are stable and top-k returns values only, of a detached operand: the order of ties is
  unspecified otherwise (and so is which tied element a top-k's gradient reaches);
- ``var``, ``std`` and ``var_mean`` take no infinities, and group and batch norms no infinite
  weight (``clamp(-1e4, 1e4)``): where an infinity sits decides whether eager's Welford mean
  is NaN or inf, and an infinite weight turns a normalized 0 (exact in one order of rounding,
  1e-8 in another) into NaN or inf;
- an ``rms_norm``'s input has no infinities (``clamp(-1e4, 1e4)``): eager's CUDA kernel makes
  a row holding one NaN throughout, its CPU kernel and the formula do not;
- no NaN's sign is read (``signbit`` and ``copysign``'s sign operand go through ``nan_to_num``):
  it is unspecified (x86's 0/0 sets it, CUDA's does not);
- the exact ``gelu`` takes no +inf (``clamp(max=1e4)``): eager's CPU kernel gives NaN for it
  in its vectorized loop and inf (the limit, Solder's answer) for a single element (fuzz seed
  1030223).
"""
from __future__ import annotations

import math

from .draw import Ctx, Draft, op, tup

UNARY_FLOAT = ("neg", "abs", "exp", "sin", "cos", "tanh", "sigmoid", "erf", "expm1", "floor",
               "ceil", "round", "trunc", "frac", "sign", "square", "reciprocal", "atan", "sinh",
               "exp2", "log", "sqrt", "rsqrt", "log1p", "log2", "asin", "acos", "lgamma",
               "erfinv", "logit", "signbit", "isnan", "isinf", "isfinite")
# ops outside their domain give NaN; most of the time the operand is moved into it
DOMAIN = {"log": ".abs()", "sqrt": ".abs()", "rsqrt": ".abs()", "log1p": ".abs()",
          "log2": ".abs()", "asin": ".clamp(-1, 1)", "acos": ".clamp(-1, 1)",
          "erfinv": ".clamp(-0.99, 0.99)", "logit": ".sigmoid()",
          # a NaN's sign is unspecified (x86's 0/0 sets it, CUDA's does not): never read
          "signbit": ".nan_to_num(0.0)"}
# NaN made 0, infinities kept (``nan_to_num(0.0)`` alone makes them +-3.4e38, whose statistics
# overflow differently in eager's kernels and Solder's)
NO_NAN = ".nan_to_num(0.0, float('inf'), float('-inf'))"
ACTIVATIONS = ("F.relu({x})", "F.gelu({x}.clamp(max=1e4))", "F.gelu({x}, approximate='tanh')",
               "F.silu({x})",
               "F.leaky_relu({x}, 0.1)", "F.softplus({x})", "F.hardtanh({x}" + NO_NAN + ")",
               "F.elu({x}" + NO_NAN + ")", "F.mish({x})", "F.hardswish({x}" + NO_NAN + ")",
               "F.logsigmoid({x})")
UNARY_INT = (("torch.neg({x})", "neg"), ("torch.abs({x})", "abs"), ("~{x}", "bitwise_not"),
             ("torch.sign({x})", "sign"), ("{x}.clamp(-3, 3)", "clamp"),
             ("torch.square({x})", "square"), ("{x}.clamp(min=0)", "clamp"))
DTYPES = ("float32", "float16", "bfloat16", "float64", "int32", "int64", "bool")


@op("pointwise", 5)
def draw_unary(c: Ctx):
    x = c.pick()
    if x is None:
        return None
    if x.floating:
        if c.chance(0.3):
            form = c.rng.choice(ACTIVATIONS)
            return Draft(form.format(x=x.name), form.split("(")[0].removeprefix("F."))
        name = c.rng.choice(UNARY_FLOAT)
        arg = x.name + (DOMAIN.get(name, "") if c.chance(0.7) or name == "signbit" else "")
        return Draft(f"torch.{name}({arg})", name)
    if x.boolean:
        return Draft(c.rng.choice((f"~{x.name}", f"torch.logical_not({x.name})")), "logical_not")
    form, name = c.rng.choice(UNARY_INT)
    return Draft(form.format(x=x.name), name)


@op("pointwise", 10)
def draw_binary(c: Ctx):
    x = c.pick()
    if x is None:
        return None
    y = c.partner(x)
    kind = c.rng.choice(("arith", "arith", "arith", "div", "intdiv", "minmax", "compare",
                         "logical", "float2", "where", "ternary"))
    if kind == "arith":
        form = c.rng.choice(("{x} + {y}", "{x} - {y}", "{x} * {y}", "torch.add({x}, {y}, alpha=2)",
                             "torch.sub({x}, {y}, alpha=-1)", "torch.mul({y}, {x})"))
        return Draft(form.format(x=x.name, y=y), "arith")
    if kind == "div":
        return Draft(f"{x.name} / {y}", "true_divide")
    if kind == "intdiv":
        d = c.divisor(y, x)
        form = c.rng.choice(("{x} // {d}", "torch.div({x}, {d}, rounding_mode='floor')",
                             "torch.div({x}, {d}, rounding_mode='trunc')",
                             "torch.remainder({x}, {d})", "torch.fmod({x}, {d})", "{x} % {d}"))
        name = "floor_divide" if "//" in form or "floor" in form else "div_trunc" if "trunc" in form \
            else "remainder" if "%" in form or "remainder" in form else "fmod"
        return Draft(form.format(x=x.name, d=d), name)
    if kind == "minmax":
        fn = c.rng.choice(("maximum", "minimum", "fmax", "fmin"))
        if y[0].isdigit() or y[0] == "-" or y in ("True", "False"):
            y = c.const((), x)
        if fn == "copysign":   # the sign of a NaN is unspecified: never copied
            y = f"{y}.nan_to_num(0.0)" if y[0].isalpha() else y
        return Draft(f"torch.{fn}({x.name}, {y})", fn)
    if kind == "compare":
        sym = c.rng.choice(("<", "<=", ">", ">=", "==", "!="))
        return Draft(f"{x.name} {sym} {y}", "compare")
    if kind == "logical":
        if x.floating or c.chance(0.5):
            fn = c.rng.choice(("logical_and", "logical_or", "logical_xor"))
            return Draft(f"torch.{fn}({x.name}, {y})", fn)
        sym = c.rng.choice(("&", "|", "^"))
        return Draft(f"{x.name} {sym} {y}", "bitwise")
    if kind == "float2":
        if not x.floating:
            return None
        fn = c.rng.choice(("atan2", "copysign", "hypot", "logaddexp", "xlogy", "pow", "lerp"))
        if fn == "pow":
            e = c.rng.choice(("2", "3", "0.5", "-1", y))
            return Draft(f"torch.pow({x.name}, {e})", "pow")
        if fn == "lerp":
            other = c.operand(x.shape, x)
            return Draft(f"torch.lerp({x.name}, {other}, {c.rng.choice(('0.25', '0.5', '1.5'))})",
                         "lerp")
        if y[0].isdigit() or y[0] == "-" or y in ("True", "False"):
            y = c.const((), x)
        if fn == "copysign":   # the sign of a NaN is unspecified: never copied
            y = f"{y}.nan_to_num(0.0)" if y[0].isalpha() else y
        return Draft(f"torch.{fn}({x.name}, {y})", fn)
    if kind == "where":
        cond = c.pick(lambda v: v.boolean and v.numel <= 256)
        cond_text = cond.name if cond is not None and c.chance(0.6) else f"{x.name} > 0"
        return Draft(f"torch.where({cond_text}, {x.name}, {y})", "where")
    # ternary
    z = c.partner(x)
    fn = c.rng.choice(("addcmul", "addcdiv", "clamp"))
    if fn == "clamp":
        # (no NaN clamped: eager's CPU gradient at a NaN is the upstream gradient in its scalar
        # loop and 0 in its vectorized one; hardtanh's operand the same)
        arg = f"{x.name}{NO_NAN}" if x.floating else x.name
        return Draft(f"torch.clamp({arg}, min={y})", "clamp_tensor")
    if not (y[0].isalpha() and z[0].isalpha()):
        return None
    return Draft(f"torch.{fn}({x.name}, {y}, {z}, value={c.rng.choice(('0.5', '-2', '1'))})", fn)


@op("cast", 1)
def draw_cast(c: Ctx):
    x = c.pick()
    if x is None:
        return None
    dt = c.rng.choice([d for d in DTYPES if f"torch.{d}" != str(x.dtype)])
    src = x.name
    if x.floating and dt.startswith("int"):
        # NaN, inf and out-of-range floats have no defined integer value
        src = f"{x.name}.nan_to_num(0.0).clamp(-1000, 1000)"
    form = c.rng.choice((".to(torch.{dt})", ".to(torch.{dt})", ".type(torch.{dt})"))
    if not x.floating and dt in ("float32", "float64", "float16") and c.chance(0.3):
        form = {"float32": ".float()", "float64": ".double()", "float16": ".half()"}[dt]
    return Draft(src + form.format(dt=dt), f"to_{dt}")


@op("cast", 1)
def draw_type_as(c: Ctx):
    x, y = c.pick(), c.pick()
    if x is None or y.dtype == x.dtype or (x.floating and not y.floating):
        return None
    return Draft(f"{x.name}.type_as({y.name})", "type_as")


def _dims(c: Ctx, x, nonempty=False):
    """None (all), a dim, or a tuple of dims."""
    if x.rank == 0 or c.chance(0.25):
        return None
    d = c.dim(x, nonempty)
    if d is None:
        return None
    if x.rank >= 2 and c.chance(0.3):
        others = [e for e in range(x.rank) if e != d % x.rank and (not nonempty or x.shape[e])]
        if others:
            return (d, c.rng.choice(others))
    return d


def _dim_args(dims, keep: bool) -> str:
    if dims is None:
        return ""
    return f"{dims}, keepdim=True" if keep else f"{dims}"


@op("reduction", 10)
def draw_reduce(c: Ctx):
    x = c.pick()
    if x is None:
        return None
    name = c.rng.choice(("sum", "sum", "mean", "prod", "amax", "amin", "max", "min", "argmax",
                         "argmin", "any", "all", "var", "std", "logsumexp", "norm",
                         "count_nonzero", "nansum", "sum_dtype", "var_mean", "aminmax"))
    keep = c.chance(0.3)
    dims = _dims(c, x, nonempty=name in ("amax", "amin", "max", "min", "argmax", "argmin", "aminmax"))
    single = dims if not isinstance(dims, tuple) else dims[0]
    args = _dim_args(dims, keep)
    n = x.name
    if name == "sum_dtype":
        dt = c.rng.choice(("float32", "float64", "int64"))
        return Draft(f"{n}.sum({args + ', ' if args else ''}dtype=torch.{dt})", "sum")
    if name in ("mean", "var", "std", "logsumexp", "nansum", "var_mean") and not x.floating:
        return None
    if name in ("prod", "max", "min", "argmax", "argmin", "aminmax") and isinstance(dims, tuple):
        dims, args = single, _dim_args(single, keep)
    if name in ("max", "min"):
        if dims is None:
            return Draft(f"torch.{name}({n})", name)
        return Draft(f"{n}.{name}({args}).{c.rng.choice(('values', 'indices'))}", name + "_dim")
    if name == "aminmax":
        return Draft(f"torch.aminmax({n}{', dim=' + str(dims) if dims is not None else ''})"
                     f"[{c.rng.randrange(2)}]", name)
    if name in ("var", "std", "var_mean"):
        # no infinities: where one sits decides whether eager's Welford mean is NaN or inf
        # (and its order of updates differs between devices)
        n = f"{n}.clamp(-1e4, 1e4)"
    if name in ("var", "std"):
        corr = c.rng.choice((0, 1))
        return Draft(f"{n}.{name}({args + ', ' if args else ''}correction={corr})", name)
    if name == "var_mean":
        return Draft(f"torch.var_mean({n}{', ' + args if args else ''})[{c.rng.randrange(2)}]", name)
    if name == "logsumexp":
        dims = single if single is not None else 0
        if x.rank == 0:
            dims = ()
        return Draft(f"torch.logsumexp({n}, {dims})", name)
    if name == "norm":
        if not x.floating:
            return None
        order = c.rng.choice(("2", "1", "float('inf')", "3"))
        dim_text = f", dim={dims}" if dims is not None else ""
        return Draft(f"torch.linalg.vector_norm({n}, {order}{dim_text})", "vector_norm")
    if name == "count_nonzero":
        return Draft(f"{n}.count_nonzero({single if single is not None else ''})", name)
    return Draft(f"{n}.{name}({args})", name)


@op("norm", 3)
def draw_softmax(c: Ctx):
    x = c.pick(lambda v: v.floating)
    if x is None:
        return None
    d = c.dim(x) if x.rank else 0
    form = c.rng.choice(("torch.softmax({x}, {d})", "torch.log_softmax({x}, {d})",
                         "F.softmax({x}, {d}, dtype=torch.float32)", "{x}.softmax({d})",
                         "F.normalize({x}, dim={d})"))
    if "normalize" in form and x.rank == 0:
        return None
    return Draft(form.format(x=x.name, d=d), form.split("(")[0].split(".")[-1])


@op("norm", 4)
def draw_norm_layer(c: Ctx):
    x = c.pick(lambda v: v.floating and v.rank >= 1)
    if x is None:
        return None
    kind = c.rng.choice(("layer_norm", "rms_norm", "batch_norm", "group_norm"))
    aff = c.chance(0.6)
    if kind in ("layer_norm", "rms_norm"):
        k = c.rng.randint(1, min(2, x.rank))
        shape = x.shape[-k:]
        if kind == "layer_norm" and math.prod(shape) == 1:
            # no row of one element: eager's CPU kernel normalizes it to a rounding away from
            # 0 (bfloat16, seed 172466), Solder's to 0 exactly, and a normalize then makes that
            # +-1 against 0 (the group norm rule below)
            return None
        w = c.operand(shape, x) if aff else "None"
        if kind == "rms_norm":
            # no infinities: eager's CUDA kernel gives a row holding one NaN throughout, its
            # CPU kernel (and the formula) 0 for the row's finite elements
            return Draft(f"F.rms_norm({x.name}.clamp(-1e4, 1e4), {tup(shape)}, {w}, eps=1e-6)",
                         kind)
        # (a weight comes with a bias: without one, a constant row's 0 times a negative weight
        # is -0.0 in eager's CUDA kernel and in Solder, +0.0 in eager's CPU kernel, which
        # computes x * scale + shift)
        b = c.operand(shape, x) if aff else "None"
        return Draft(f"F.layer_norm({x.name}, {tup(shape)}, {w}, {b}, eps=1e-5)", kind)
    if x.rank < 2:
        return None
    ch = x.shape[1]
    # (finite affine operands: an infinite weight turns a normalized 0, exact in one order of
    # rounding and 1e-8 in another, into NaN in one and inf in the other)
    w = f"{c.operand((ch,), x)}.clamp(-1e4, 1e4)" if aff else "None"
    b = c.operand((ch,), x) if aff else "None"
    if kind == "batch_norm":
        # eager's CPU backward of batch_norm reads an expanded (zero-stride) weight wrongly
        # (the input's gradient of a (4, 3) input off by 1.5): its affine operands are dense
        w, b = (f"{t}.contiguous()" if ".expand" in t else t for t in (w, b))
        return Draft(f"F.batch_norm({x.name}, None, None, {w}, {b}, training=True)", kind)
    # no group of one element: eager's CPU kernel normalizes it to a rounding away from 0
    # (float64 too), Solder's to 0 exactly, and a cast to an integer makes that a whole unit
    spatial = 1
    for n in x.shape[2:]:
        spatial *= n
    groups = [g for g in (1, 2, 3) if ch and ch % g == 0 and (ch // g) * spatial != 1]
    if not groups:
        return None
    return Draft(f"F.group_norm({x.name}, {c.rng.choice(groups)}, {w}, {b})", kind)


@op("library", 3)
def draw_matmul(c: Ctx):
    x = c.pick(lambda v: v.floating and v.rank >= 1)
    if x is None:
        return None
    k = x.shape[-1]
    form = c.rng.choice(("self", "var", "const", "linear"))
    if form == "self" and x.rank >= 2:
        fn = "torch.bmm" if x.rank == 3 and c.chance(0.5) else "torch.matmul"
        return Draft(f"{fn}({x.name}, {x.name}.mT)", fn.split(".")[1])
    if form == "var":
        y = c.pick(lambda v: v.floating and v.rank in (1, 2) and v.shape[0] == k and v.name != x.name)
        if y is not None:
            other = y.name if y.dtype == x.dtype else f"{y.name}.to({x.name}.dtype)"
            return Draft(f"{x.name} @ {other}", "matmul")
    n = c.rng.choice((1, 2, 3))
    if form == "linear":
        w = c.operand((n, k), x)
        b = c.operand((n,), x) if c.chance(0.5) else "None"
        return Draft(f"F.linear({x.name}, {w}, {b})", "linear")
    return Draft(f"{x.name} @ {c.operand((k, n), x)}", "matmul")


@op("library", 1)
def draw_conv(c: Ctx):
    x = c.pick(lambda v: v.floating and v.rank in (3, 4) and 0 not in v.shape)
    if x is None:
        return None
    cin, h, w = x.shape[-3:]
    kh, kw = c.rng.randint(1, min(3, h + 2)), c.rng.randint(1, min(3, w + 2))
    pad, stride = c.rng.choice((0, 1)), c.rng.choice((1, 2))
    weight = c.operand((c.rng.randint(1, 3), cin, kh, kw), x)
    return Draft(f"F.conv2d({x.name}, {weight}, padding={pad}, stride={stride})", "conv2d")


@op("library", 1)
def draw_attention(c: Ctx):
    x = c.pick(lambda v: v.floating and v.rank in (3, 4) and 0 not in v.shape)
    if x is None:
        return None
    causal = c.rng.choice(("True", "False"))
    return Draft(f"F.scaled_dot_product_attention({x.name}, {x.name}, {x.name}, "
                 f"is_causal={causal})", "sdpa")


@op("misc", 3)
def draw_sort(c: Ctx):
    x = c.pick(lambda v: v.rank >= 1 and not v.boolean)
    if x is None:
        return None
    d = c.dim(x)
    kind = c.rng.choice(("sort", "argsort", "topk"))
    # the order of float keys that are equal up to rounding is rounding's choice (a group norm
    # of constant rows: exact ties in Solder, a unit apart in eager; seed 178848): indices
    # sort keys rounded to three decimals, on which both agree but at a rounding boundary
    key = f"{x.name}.round(decimals=3)" if x.floating else x.name
    if kind == "sort":
        desc = c.rng.choice(("True", "False"))
        part = c.rng.choice(("values", "indices"))
        src = key if part == "indices" else x.name
        return Draft(f"torch.sort({src}, dim={d}, descending={desc}, stable=True).{part}", "sort")
    if kind == "argsort":
        return Draft(f"torch.argsort({key}, dim={d}, stable=True)", "argsort")
    size = x.shape[d]
    if size == 0:
        return None
    k = c.rng.randint(1, min(size, 4))
    largest = c.rng.choice(("True", "False"))
    # (no gradient through topk: which of two tied elements it takes, and so which one gets
    # the gradient, is unspecified)
    src = f"{x.name}.detach()" if x.floating else x.name
    return Draft(f"torch.topk({src}, {k}, dim={d}, largest={largest}).values", "topk")


@op("misc", 3)
def draw_scan(c: Ctx):
    x = c.pick(lambda v: v.rank >= 1)
    if x is None:
        return None
    d = c.dim(x)
    form, name = c.rng.choice((("{x}.cumsum({d})", "cumsum"), ("torch.cumprod({x}, {d})", "cumprod"),
                               ("torch.cummax({x}, {d}).values", "cummax"),
                               ("torch.cummin({x}, {d}).indices", "cummin"),
                               ("torch.logcumsumexp({x}, {d})", "logcumsumexp")))
    if name == "logcumsumexp" and not x.floating:
        return None
    return Draft(form.format(x=x.name, d=d), name)


@op("misc", 2)
def draw_pool(c: Ctx):
    x = c.pick(lambda v: v.floating and v.rank in (3, 4) and 0 not in v.shape)
    if x is None:
        return None
    h, w = x.shape[-2:]
    k = c.rng.randint(1, max(1, min(3, h, w)))
    stride = c.rng.choice((1, 2))
    pad = c.rng.choice((0,) if k < 2 else (0, 1))
    form = c.rng.choice((f"F.max_pool2d({{x}}, {k}, {stride}, {pad})",
                         f"F.avg_pool2d({{x}}, {k}, {stride}, {pad})",
                         "F.adaptive_avg_pool2d({x}, (1, 2))",
                         f"F.max_pool1d({{x}}, {k}, {stride})"))
    return Draft(form.format(x=x.name), form.split("(")[0].removeprefix("F."))


@op("misc", 2)
def draw_triangle(c: Ctx):
    x = c.pick(lambda v: v.rank >= 2)
    if x is None:
        return None
    fn = c.rng.choice(("tril", "triu"))
    return Draft(f"torch.{fn}({x.name}, {c.rng.choice((0, 1, -1))})", fn)


@op("misc", 2)
def draw_constructor(c: Ctx):
    x = c.pick()
    if x is None:
        return None
    forms = [("torch.zeros_like({x})", "zeros_like"), ("torch.ones_like({x})", "ones_like"),
             ("torch.full_like({x}, {s})", "full_like"), ("{x}.clone()", "clone"),
             ("{x}.new_zeros({shape})", "new_zeros")]
    if x.rank >= 1 and x.shape[-1] > 0:
        forms.append((f"torch.arange({x.shape[-1]}, device=DEV) * {{x}}", "arange"))
        forms.append((f"torch.eye({x.shape[-1]}, dtype={{x}}.dtype, device=DEV)", "eye"))
    form, name = c.rng.choice(forms)
    shape = tup(x.shape[:1] + (2,)) if x.rank else "(2,)"
    return Draft(form.format(x=x.name, s=c.scalar(x), shape=shape), name)
