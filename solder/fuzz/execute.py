# Running a fuzz program: fresh inputs, one call of fn (eager or compiled), then everything the
# call left observable, labelled: outputs, the inputs afterwards, the storage under view inputs
# and, with grad, the gradients of the floating inputs.
#
# Self-contained on purpose: standalone scripts written by `python -m solder fuzz` inline this
# file's text, so it imports nothing but torch and uses no `from __future__`.
import contextlib
import math

import torch
import torch.utils._python_dispatch


def _values(seed, shape, dtype, kind, dev, up=False):
    """An input's values, from its own generator on the CPU (the same on every machine). up: a
    floating tensor is made in its dtype, then widened to float64 (the reference run)."""
    g = torch.Generator().manual_seed(seed)
    if dtype == torch.bool:
        t = torch.rand(shape, generator=g, dtype=torch.float64) < 0.5
    elif not dtype.is_floating_point:
        t = torch.randint(-8, 9, shape, generator=g).to(dtype)
    else:
        t = torch.randn(shape, generator=g, dtype=torch.float64)
        if kind == "special" and t.numel():
            flat = t.view(-1)
            where = torch.randint(0, flat.numel(), (max(1, flat.numel() // 4),), generator=g)
            special = torch.tensor([math.inf, -math.inf, math.nan, 0.0, -0.0, 1e4],
                                   dtype=torch.float64)
            flat[where] = special[torch.randint(0, 6, where.shape, generator=g)]
        t = t.to(dtype)
        if up:
            t = t.to(torch.float64)
    return t.to(dev)


def _leaf(b, leaves, name):
    """A floating input's base becomes a leaf that requires grad; the program gets a clone of
    it, so that in-place writes into the input are allowed."""
    if not b.is_floating_point():
        return b
    b.requires_grad_()
    leaves.append((name, b))
    return b.clone()


_EAGER_AS_STRIDED_SCATTER = torch.as_strided_scatter


def _as_strided_scatter_by_copy(input, src, size, stride, storage_offset=None):
    # the offset is absolute in input's storage; the clone starts at 0. A view that reaches
    # outside the input's own elements, or an input that is not dense (its clone would not
    # keep its layout), keeps eager's call: Solder keeps eager's derivative for those too
    offset = input.storage_offset() if storage_offset is None else storage_offset
    start = offset - input.storage_offset()
    last = start + sum((n - 1) * s for n, s in zip(size, stride) if n > 0)
    dims = sorted((s, n) for n, s in zip(input.shape, input.stride()) if n != 1)
    dense, expected = True, 1
    for s, n in dims:
        dense, expected = dense and s == expected, expected * n
    if not (dense and start >= 0 and last < input.numel() and min(stride, default=0) >= 0):
        return _EAGER_AS_STRIDED_SCATTER(input, src, size, stride, storage_offset)
    out = input.clone()
    out.as_strided(size, stride, start).copy_(src)
    return out


@contextlib.contextmanager
def correct_as_strided_scatter():
    """Eager as_strided_scatter, with its input's gradient right: eager's derivative zeroes the
    wrong elements (x = arange(4), size (2,), stride (2,), upstream [1, 2, 3, 4]: eager gives
    [1, 0, 3, 0], the right gradient is [0, 2, 0, 4]), and its source's gradient reads the
    upstream gradient at the absolute offset, wrong for an input that starts at an offset
    (x[1:4], offset 1: eager reads upstream[1:3] where src landed at [0:2]). Only for eager
    reference runs."""
    saved = torch.as_strided_scatter
    torch.as_strided_scatter = _as_strided_scatter_by_copy
    try:
        yield
    finally:
        torch.as_strided_scatter = saved


def _batch_norm_as_cuda_computes(input, running_mean=None, running_var=None, weight=None,
                                 bias=None, training=False, momentum=0.1, eps=1e-5):
    """Batch norm as eager's CUDA kernel computes it, on a contiguous input: Welford's
    statistics (exact for a constant channel: here a mean shifted by the channel's first
    element, then a two-pass variance) and ``(x - mean) * invstd * weight + bias``. Eager's CPU
    kernel computes ``x * alpha + beta`` instead, which leaves a rounding residue on a
    constant channel where this gives 0 (a later ``> 0`` then tips: fuzz seed 231415)."""
    x = input.contiguous()
    comp = torch.float32 if x.dtype in (torch.float16, torch.bfloat16) else x.dtype
    xc = x.to(comp)
    dims = [0] + list(range(2, x.dim()))
    shape = [1, -1] + [1] * (x.dim() - 2)
    if training:
        verify = getattr(torch.nn.functional, "_verify_batch_size", None)
        if verify is not None:
            verify(x.size())
        first = xc.transpose(0, 1).reshape(x.shape[1], -1)[:, :1].view(shape)
        mean = first + (xc - first).mean(dims, keepdim=True)
        var = (xc - mean).square().mean(dims, keepdim=True)
        if running_mean is not None or running_var is not None:
            n = x.numel() // max(x.shape[1], 1)
            m = 0.1 if momentum is None else momentum
            with torch.no_grad():
                if running_mean is not None:
                    running_mean.mul_(1 - m).add_(mean.reshape(-1).to(running_mean.dtype) * m)
                if running_var is not None:
                    unbiased = var.reshape(-1) * (n / max(n - 1, 1))
                    running_var.mul_(1 - m).add_(unbiased.to(running_var.dtype) * m)
    else:
        mean, var = running_mean.to(comp).view(shape), running_var.to(comp).view(shape)
    out = (xc - mean) * torch.rsqrt(var + eps)
    if weight is not None:
        out = out * weight.to(comp).view(shape)
    if bias is not None:
        out = out + bias.to(comp).view(shape)
    return out.to(x.dtype)


_BATCH_NORM = torch.nn.functional.batch_norm


# ops whose eager gradient corrected_eager puts right: a program naming one runs it too
CORRECTED_OPS = ("as_strided_scatter", "batch_norm")


@contextlib.contextmanager
def corrected_eager():
    """Eager with its known wrong gradients put right, and its CPU batch norm computed as its
    CUDA kernel does, for a second eager run whose values are accepted too:
    ``as_strided_scatter``'s gradient (``correct_as_strided_scatter``), and ``batch_norm``
    (``_batch_norm_as_cuda_computes``): on a contiguous input, since eager's CPU backward gets
    a non-contiguous input's gradient wrong (a (1, 4, 2, 1) input permuted from (1, 1, 2, 4):
    its gradient differs from the contiguous input's, and finite differences agree with the
    latter), and exact on a constant channel."""
    with correct_as_strided_scatter():
        torch.nn.functional.batch_norm = _batch_norm_as_cuda_computes
        try:
            yield
        finally:
            torch.nn.functional.batch_norm = _BATCH_NORM


def run_corrected(fn, make_inputs, laws, rng_seed, grad=False):
    """Eager under ``corrected_eager``, in the program's dtypes, each observed value carrying
    the same value computed in float64 as its ``ref``: where eager's own gradient is wrong the
    float64 reference of the comparison is too, and a low-precision gradient summed from
    cancelling terms is judged against the corrected float64 one. Each also carries the
    corrected runs with rounding noise (``noisy``): eager's noisy runs measure the sensitivity
    of eager's wrong gradient, not of the right one (fuzz seed 1001662: the wrong gradient
    into a batch norm over a constant channel is zero there, the right one is amplified by
    1/sqrt(eps) and rounded)."""
    with corrected_eager():
        fixed = run(fn, make_inputs, laws, rng_seed, grad=grad)
        try:
            up = run(fn, make_inputs, laws, rng_seed, up=True, grad=grad)
        except Exception:  # noqa: BLE001 - then the fixed run is compared without it
            up = None
        try:
            noisy = [run(fn, make_inputs, laws, rng_seed, grad=grad, noise=k)
                     for k in NOISE_RUNS]
        except Exception:  # noqa: BLE001 - then its rounding noise excuses nothing
            noisy = []
    for o, u in zip(fixed, up or []):
        if o.label == u.label:
            o.ref = u
    for run_ in noisy:
        for o, n in zip(fixed, run_):
            if o.label == n.label:
                o.noisy.append(n)
    return fixed


# names whose calls draw random numbers: a program with one draws other numbers on the CPU
_RANDOM_NAMES = frozenset({"rand", "randn", "randint", "randperm", "rand_like", "randn_like",
                           "randint_like", "bernoulli", "bernoulli_", "dropout", "dropout1d",
                           "dropout2d", "dropout3d", "alpha_dropout", "feature_alpha_dropout",
                           "uniform_", "normal_", "normal", "exponential_", "geometric_",
                           "log_normal_", "cauchy_", "random_", "multinomial", "poisson",
                           "rrelu", "rrelu_", "gumbel_softmax"})


def run_on_cpu(fn, make_inputs, laws, rng_seed, grad=False):
    """Eager on the CPU, for a program of the GPU that draws no random numbers (else None):
    a second valid eager run, with kernels of their own (the verdict's ``other``). The
    program reads its device from its module's ``DEV`` at each call."""
    g = fn.__globals__
    if laws or _RANDOM_NAMES & set(fn.__code__.co_names) or g.get("DEV") == "cpu":
        return None
    saved = g["DEV"]
    g["DEV"] = "cpu"
    try:
        return run(fn, make_inputs, laws, rng_seed, grad=grad)
    except Exception:  # noqa: BLE001 - eager on the CPU refuses it: no second run
        return None
    finally:
        g["DEV"] = saved


class Observed:
    """One observable value after a call: a tensor (or None: an unused input's gradient)."""
    __slots__ = ("label", "tensor", "requires_grad", "strides", "offset", "alias", "law",
                 "meta_strides", "ref", "noisy")

    def __init__(self, label, t, alias=None, law=None):
        self.label = label
        self.tensor = None if t is None else t.detach()
        self.requires_grad = t is not None and t.requires_grad
        self.strides = None if t is None else tuple(t.stride())
        self.offset = None if t is None else t.storage_offset()
        self.alias, self.law = alias, law
        self.meta_strides = []      # what PyTorch's meta functions predict (attach_meta_strides)
        self.ref = None             # the same value in float64 (run_corrected's runs)
        self.noisy = []             # the same with rounding noise (run_corrected's runs)


def _storage_of(t):
    s = t.untyped_storage()
    return s.data_ptr() if s.nbytes() else None


def jitter_of(dtype):
    """The relative perturbation of the inputs for eager's sensitivity: two units of the
    program's lowest floating precision."""
    return 2 * torch.finfo(dtype).eps


def _jitter(ins, bases, rel):
    """Every floating input scaled elementwise by 1 + rel * u, u uniform in [-1, 1] from a
    fixed generator (a view input through its base)."""
    g = torch.Generator().manual_seed(20261206)
    seen = set()
    with torch.no_grad():
        for t in [b for _, b in bases] + list(ins):
            ptr = t.untyped_storage().data_ptr()
            if not t.is_floating_point() or not t.numel() or ptr in seen:
                continue
            seen.add(ptr)
            u = torch.rand(t.shape, generator=g, dtype=torch.float64) * 2 - 1
            t.copy_(t.double() * (1 + rel * u.to(t.device)))


def run(fn, make_inputs, laws, rng_seed, backend=None, up=False, grad=False, jitter=0.0,
        backward=True, noise=False):
    """Call fn once on fresh inputs (eager when backend is None) and return [Observed].
    laws: {output position: law} for the outputs of random ops (compared by law, left out of
    the gradient's loss); jitter: inputs perturbed by this relative amount (eager's own
    sensitivity, for the comparison); backward=False: with grad, inputs that require
    gradients but no backward (what the forward alone gives); noise: every rounding result
    of eager's ops moved by up to a unit of its dtype's rounding (``RoundingNoise``; 1, 2, ...:
    the generator's seed; "down" or "up": every one moved that way; "alternate": up, down, up,
    ... in each result's element order)."""
    # the reference run computes in float64 throughout: floats its inputs widened, and the
    # floats that integers promote to (``a / b`` of int64 inputs) float64 too, not float32
    saved_dtype = torch.get_default_dtype()
    if up:
        torch.set_default_dtype(torch.float64)
    try:
        if noise:
            pattern = noise if noise in RoundingNoise.PATTERNS else None
            with RoundingNoise(20261206 + (0 if pattern else int(noise)), pattern):
                return _run(fn, make_inputs, laws, rng_seed, backend, up, grad, jitter, backward)
        return _run(fn, make_inputs, laws, rng_seed, backend, up, grad, jitter, backward)
    finally:
        torch.set_default_dtype(saved_dtype)


# ops whose results are exact (copies, selections, sign changes): no rounding to move
_EXACT_OPS = frozenset({
    "clone", "_to_copy", "copy", "cat", "stack", "index", "index_select", "gather", "where",
    "neg", "abs", "maximum", "minimum", "max", "min", "amax", "amin", "sort", "topk", "flip",
    "roll", "constant_pad_nd", "slice_scatter", "select_scatter", "diagonal_scatter",
    "as_strided_scatter", "index_put", "index_copy", "scatter", "masked_fill", "fill",
    "zeros_like", "ones_like", "full_like", "empty_like", "relu", "hardtanh", "clamp",
    "clamp_min", "clamp_max", "sign", "floor", "ceil", "trunc", "round", "repeat",
    "nan_to_num", "tril", "triu", "masked_scatter", "take", "index_fill", "fmax", "fmin",
    "cummax", "cummin", "kthvalue", "median", "mode", "unique_consecutive", "lift_fresh_copy",
    "alias", "detach", "t", "permute", "expand"})


# the rounding-noise runs a differing program's verdict weighs (``run``'s noise): two random
# draws (one alone underestimates the move now and then), every rounding moved down, then up
# (a sum of many cancels random moves), and neighbours moved apart (ties broken the other way)
NOISE_RUNS = (1, 2, "down", "up", "alternate")


class RoundingNoise(torch.utils._python_dispatch.TorchDispatchMode):
    """Eager with every rounding result of an op (a new floating tensor computed from tensors,
    not a view or an exact copy) moved by a unit of its dtype's rounding up, down or not at
    all, from a fixed generator: how far eager's own value moves when its intermediate roundings
    move. A normalization of a nearly constant row (a hypot of a large sum) amplifies rounding
    by a thousand; perturbing the inputs leaves such a row as it was (seed 171111)."""

    # "down", "up": every rounding moved the same way (a sum of softmax's outputs, eager's 1.0,
    # moved down, truncates to 0 as a compiled 0.99999994 does: fuzz seed 444225); random
    # moves cancel in such a sum as often as not. "alternate": neighbours moved apart, which
    # breaks ties between equal elements the other way (argmin of two equal row sums of a
    # softmax, eager's first, a compiled run's second: fuzz seed 460913); random moves leave
    # a tie as it was or break it eager's way four times in nine with two runs
    PATTERNS = ("down", "up", "alternate")

    def __init__(self, seed=20261206, pattern=None):
        super().__init__()
        self.g = torch.Generator().manual_seed(seed)
        self.pattern = pattern

    def _units(self, shape):
        if self.pattern in ("down", "up"):
            return torch.full(shape, -1.0 if self.pattern == "down" else 1.0,
                              dtype=torch.float64)
        if self.pattern == "alternate":
            n = math.prod(shape)
            return (1.0 - 2.0 * (torch.arange(n, dtype=torch.float64) % 2)).reshape(shape)
        return torch.randint(-1, 2, shape, generator=self.g).to(torch.float64)

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        out = func(*args, **kwargs)
        schema = func._schema
        if (schema.is_mutable or any(r.alias_info is not None for r in schema.returns)
                or func.overloadpacket.__name__.rstrip("_") in _EXACT_OPS
                or not any(isinstance(a, torch.Tensor)
                           for a in list(args) + list(kwargs.values()))):
            return out
        for t in out if isinstance(out, (tuple, list)) else [out]:
            if isinstance(t, torch.Tensor) and t.is_floating_point() and t.numel():
                # a whole unit up, down or none: a fraction of one would round back to the
                # value in float16 and bfloat16 (where a unit decides a rounding boundary)
                u = self._units(t.shape)
                rel = torch.finfo(t.dtype).eps
                t.copy_(t.double() * (1 + rel * u.to(t.device)))
        return out


def _run(fn, make_inputs, laws, rng_seed, backend, up, grad, jitter, backward):
    ins, bases, leaves = make_inputs(up, grad)
    if jitter:
        _jitter(ins, bases, jitter)
    names = [f"a{i}" for i in range(len(ins))]
    if backend is not None:
        fn = torch.compile(fn, backend=backend)
    torch.manual_seed(rng_seed)
    outs = tuple(fn(*ins))
    storages = {}
    for name, t in list(zip(names, ins)) + bases:
        if _storage_of(t) is not None:
            storages.setdefault(_storage_of(t), name)
    res = [Observed(f"output {k}", t, storages.get(_storage_of(t)), laws.get(k))
           for k, t in enumerate(outs)]
    res += [Observed(f"input {n} after the call", t) for n, t in zip(names, ins)]
    res += [Observed(f"storage under {n} after the call", b) for n, b in bases]
    if grad and leaves and backward:
        tensors = list(outs) + list(ins) + [b for _, b in bases]
        terms = []
        for k, (o, t) in enumerate(zip(res, tensors)):
            if o.requires_grad and o.law is None and t.numel():
                w = torch.randn(t.shape, generator=torch.Generator().manual_seed(1000 + k),
                                dtype=torch.float64)
                terms.append((t.double() * w.to(t.device)).sum())
        if terms:
            grads = torch.autograd.grad(sum(terms), [b for _, b in leaves], allow_unused=True)
            res += [Observed(f"gradient of {n}", g) for (n, _), g in zip(leaves, grads)]
    return res


def attach_meta_strides(observed, fn, make_inputs, rng_seed):
    """Each output's strides as PyTorch's meta functions predict them (fn run on fake tensors),
    onto eager's observed outputs. torch.compile traces with these functions and a backward
    graph is traced against their strides; for some ops they differ from what eager's kernels
    return (batch_norm of a permuted input, a sum of a contiguous and a permuted tensor), and a
    compiled output with the predicted strides is not wrong. A program whose shapes depend on
    its data (an index read from a 0-d tensor) runs on fake tensors that carry their real
    values, as Dynamo traces it (a data-dependent size becomes the value it has)."""
    from torch._dispatch.python import enable_python_dispatcher
    # twice: with the C++ meta kernels, and with the Python dispatcher on, as Dynamo traces;
    # there some ops take their Python reference's strides (``logical_xor`` of a permuted and
    # a broadcast input: (1, 1, 2) where the C++ kernel gives (4, 2, 1))
    for dispatcher in (contextlib.nullcontext, enable_python_dispatcher):
        for with_values in (False, True):
            try:
                strides = _fake_strides(fn, make_inputs, rng_seed, dispatcher, with_values)
            except Exception:  # noqa: BLE001 - then eager's strides are the only ones accepted
                continue
            _attach(observed, strides)
            break


def _fake_strides(fn, make_inputs, rng_seed, dispatcher, with_values: bool) -> list:
    import logging

    import torch._functorch.config as functorch_config
    from torch._subclasses.fake_tensor import FakeTensorMode
    from torch.fx.experimental.symbolic_shapes import ShapeEnv
    ins, _, _ = make_inputs(False, False)
    shapes_log = logging.getLogger("torch.fx.experimental.symbolic_shapes")
    level = shapes_log.level
    with functorch_config.patch(fake_tensor_propagate_real_tensors=with_values):
        # (values are carried only with a shape environment, which also names every
        # data-dependent size it meets: a warning each, said by this process's logger)
        mode = FakeTensorMode(shape_env=ShapeEnv() if with_values else None)
        mode.cache_enabled = False      # its cache does not key on the dispatcher
        shapes_log.setLevel(logging.ERROR)
        try:
            with dispatcher(), mode:
                fakes = [mode.from_tensor(t, static_shapes=True) for t in ins]
                torch.manual_seed(rng_seed)
                outs = tuple(fn(*fakes))
        finally:
            shapes_log.setLevel(level)
    return [tuple(int(s) for s in t.stride()) if isinstance(t, torch.Tensor) else None
            for t in outs]


def attach_decomposed_strides(observed, fn, make_inputs, rng_seed):
    """The same through core ATen's decompositions, as torch.compile traces (make_fx on fake
    tensors): a decomposed op's meta strides can differ again (``stack`` of channels-last
    values: ``cat`` of views whose size-1 dims carry other strides than eager's)."""
    from torch._decomp import core_aten_decompositions
    from torch.fx.experimental.proxy_tensor import make_fx
    try:
        ins, _, _ = make_inputs(False, False)
        torch.manual_seed(rng_seed)
        gm = make_fx(lambda *a: tuple(fn(*a)), decomposition_table=core_aten_decompositions(),
                     tracing_mode="fake")(*[t.clone() for t in ins])
        vals = [n.meta.get("val") for n in gm.graph.output_node().args[0]]
        strides = [tuple(v.stride()) if isinstance(v, torch.Tensor) else None for v in vals]
    except Exception:  # noqa: BLE001 - then the other strides are the only ones accepted
        return
    _attach(observed, strides)


def _attach(observed, strides):
    for o in observed:
        if o.label.startswith("output "):
            k = int(o.label.split(" ")[1])
            if k < len(strides) and strides[k] is not None:
                o.meta_strides.append(strides[k])
