"""Comparing what a compiled op returned with what eager returned.

Every check returns ``None`` when the two agree and otherwise a one-paragraph message that says
where they differ (``output[1]``, ``input 'weight' after the call``, ...). Three strengths:

* ``values``: tensors with ``torch.testing.assert_close`` (NaNs equal; tolerances below), other
  Python values with ``==`` (floats with the same tolerances).
* ``distribution``: for ops with randomness: shape, dtype and device must match, and the values
  must look drawn from the same distribution (a two-sample Kolmogorov-Smirnov test on the
  finite values, plus the fraction of NaN/inf).
* ``metadata``: for ops whose output is uninitialized memory (``empty``): shape, dtype, device.

Two second looks before a ``values`` difference counts as a failure: indices of tied values
(``tied_indices_agree``), and float16/bfloat16 results (float32 too for the ops in
``FLOAT32_SECOND_LOOK``) at least as close as eager's to a float64 run of the op
(``no_less_accurate``).
"""
from __future__ import annotations

import math
from typing import Any, Optional

import torch

# Default (rtol, atol) per dtype: those of torch.testing.assert_close. The issue fixes float32 at
# rtol 1.3e-5 / atol 1.5e-5; integers and bools must match exactly.
DEFAULT_TOLERANCES = {
    torch.float64: (1e-7, 1e-7),
    torch.float32: (1.3e-5, 1.5e-5),
    torch.float16: (1e-3, 1e-5),
    torch.bfloat16: (1.6e-2, 1e-5),
    torch.complex64: (1.3e-6, 1e-5),
    torch.complex128: (1e-7, 1e-7),
}

# Looser tolerances for single ops, keyed by (op name, dtype name, kind), where kind is
# "forward", "inplace" or "gradient" (None matches every kind). Every entry must say why the
# default is too tight for a correct compiler; a wrong result is an expected failure instead.
TOLERANCE_OVERRIDES: dict[tuple[str, str, Optional[str]], tuple[float, float, str]] = {
    # The OpInfo's "output" is a random tensor, not a softmax, so grad * out - out * sum(grad *
    # out) cancels float32 terms of up to ~10^3 and the float32 rounding of those terms shows in
    # a small result; ATen's CUDA kernel and a fused kernel round them differently (9e-5 apart
    # in float16 on the H200). PyTorch's own inductor OpInfo tests allow the same for float16.
    ("_softmax_backward_data", "float16", None): (2e-3, 8e-3, "cancellation of float32 terms"),
    ("_softmax_backward_data", "bfloat16", None): (1.6e-2, 8e-3, "cancellation of float32 terms"),
    # Its gradient sums up to 25 products of elements up to 9 in magnitude per entry (one rank-1
    # update per reflector): float32 reassociation moves a sum of that size by up to ~1e-4; the
    # H200 run differed from eager's CUDA path by 5e-5 (3e-5 relative).
    ("linalg.householder_product", "float32", "gradient"): (1e-4, 2e-4,
                                                            "float32 reassociation of long sums"),
}

# Ops whose index output is ambiguous when the input has ties (equal values along the reduced
# dimension): any index of an equal element is right, and eager's own choice is unspecified (its
# CPU and CUDA kernels pick differently). For these the values must match exactly and each index
# must point at an element equal to its value. Entry: (position of ``dim`` among the sample's
# args, whether the indices keep the dimension unless ``keepdim`` says otherwise, position of
# ``keepdim`` among the args or None).
TIE_AMBIGUOUS_INDICES = {
    "topk": (1, True, None),       # topk(input, k, dim=-1, largest, sorted)
    "kthvalue": (1, False, 2),     # kthvalue(input, k, dim=-1, keepdim=False)
}

# Ops whose eager float32 kernels lose digits that a float64 computation keeps, so a compiled
# kernel that computes in float64 differs from eager by more than float32's tolerance while
# being closer to the exact value: next to the poles at the negative integers, eager's
# trigamma (polygamma order 1, digamma's gradient) reflects through sin(pi * x) with pi * x
# rounded to float32 first, relative errors of 2e-5 and more; the higher orders and lgamma's
# second derivative share the formula. Their float32 results get the float16/bfloat16 second
# look (``no_less_accurate``). Likewise the orthogonal polynomials: eager evaluates
# cos((n + 1/2) acos(x)) / cos(acos(x) / 2) and the recurrences in float32 (shifted Chebyshev V
# of order 12 at x = 0.016: 5e-5 off, where a float64 evaluation rounded once is exact).
# Matched by op name prefix.
FLOAT32_SECOND_LOOK = ("digamma", "polygamma", "special.polygamma", "mvlgamma", "lgamma",
                       "special.chebyshev_polynomial", "special.shifted_chebyshev_polynomial",
                       "special.hermite_polynomial", "special.laguerre_polynomial",
                       "special.legendre_polynomial")


def second_look_dtypes(op_name: str) -> frozenset:
    """The dtypes whose differing results are compared with a float64 run of the op."""
    low = {torch.float16, torch.bfloat16}
    if op_name.startswith(FLOAT32_SECOND_LOOK):
        low.add(torch.float32)
    return frozenset(low)


# Kolmogorov-Smirnov critical constant: c * sqrt((n+m)/(n*m)); c = 2.5 is a false-alarm
# probability of about 7e-6 per compared tensor, so a full run of the suite stays quiet.
_KS_CONSTANT = 2.5


def tolerance(op_name: str, dtype: torch.dtype, kind: str) -> tuple[float, float]:
    """(rtol, atol) for a tensor of ``dtype`` produced by ``op_name`` in a ``kind`` check."""
    name = str(dtype).removeprefix("torch.")
    for key in ((op_name, name, kind), (op_name, name, None)):
        if key in TOLERANCE_OVERRIDES:
            rtol, atol, _why = TOLERANCE_OVERRIDES[key]
            return rtol, atol
    return DEFAULT_TOLERANCES.get(dtype, (0.0, 0.0))


def compare(actual: Any, expected: Any, *, how: str, op_name: str, kind: str,
            where: str = "output") -> Optional[str]:
    """Compare two (nested) results; ``how`` is "values", "distribution" or "metadata"."""
    if isinstance(expected, torch.Tensor) or isinstance(actual, torch.Tensor):
        if not (isinstance(expected, torch.Tensor) and isinstance(actual, torch.Tensor)):
            return f"{where}: expected {_kind_of(expected)}, got {_kind_of(actual)}"
        return _compare_tensors(actual, expected, how, op_name, kind, where)
    if isinstance(expected, (list, tuple)):
        if type(actual) is not type(expected):
            return f"{where}: expected {_kind_of(expected)}, got {_kind_of(actual)}"
        if len(actual) != len(expected):
            return f"{where}: expected {len(expected)} items, got {len(actual)}"
        for i, (a, e) in enumerate(zip(actual, expected)):
            msg = compare(a, e, how=how, op_name=op_name, kind=kind, where=f"{where}[{i}]")
            if msg:
                return msg
        return None
    if isinstance(expected, dict):
        if not isinstance(actual, dict) or actual.keys() != expected.keys():
            return f"{where}: expected dict with keys {sorted(expected)}, got {_kind_of(actual)}"
        for k in expected:
            msg = compare(actual[k], expected[k], how=how, op_name=op_name, kind=kind,
                          where=f"{where}[{k!r}]" if where else str(k))
            if msg:
                return msg
        return None
    return _compare_scalars(actual, expected, how, op_name, kind, where)


def _compare_scalars(actual, expected, how, op_name, kind, where) -> Optional[str]:
    if isinstance(expected, float) and isinstance(actual, (float, int)):
        if how != "values" or (math.isnan(expected) and math.isnan(actual)):
            return None
        rtol, atol = tolerance(op_name, torch.float32, kind)
        if abs(actual - expected) <= atol + rtol * abs(expected) or actual == expected:
            return None
        return f"{where}: expected {expected!r}, got {actual!r}"
    if type(actual) is not type(expected):
        return f"{where}: expected {_kind_of(expected)}, got {_kind_of(actual)}"
    if actual != expected:  # ints, bools, strings, sizes, dtypes: exact in every mode
        return f"{where}: expected {expected!r}, got {actual!r}"
    return None


def _compare_tensors(actual, expected, how, op_name, kind, where) -> Optional[str]:
    meta = _metadata_mismatch(actual, expected)
    if meta:
        return f"{where}: {meta}"
    if how == "metadata":
        return None
    if how == "distribution":
        msg = distribution_mismatch(actual, expected)
        return f"{where}: {msg}" if msg else None
    rtol, atol = tolerance(op_name, expected.dtype, kind)
    try:
        torch.testing.assert_close(actual.detach(), expected.detach(), rtol=rtol, atol=atol,
                                   equal_nan=True, check_device=True, check_dtype=True,
                                   check_layout=True, check_stride=False)
    except AssertionError as err:
        return f"{where}: {_squeeze(str(err))}"
    return None


def _metadata_mismatch(actual: torch.Tensor, expected: torch.Tensor) -> Optional[str]:
    for attr in ("shape", "dtype", "device", "layout"):
        a, e = getattr(actual, attr), getattr(expected, attr)
        if a != e:
            return f"{attr} differs: expected {e}, got {a}"
    return None


def compare_pooled(actual_runs: list, expected_runs: list, *, op_name: str,
                   kind: str) -> Optional[str]:
    """Random ops: runs with seeds 0..k-1 on each side; the first pair must agree in structure
    and metadata, and each tensor's values, pooled over the runs, in distribution."""
    msg = compare(actual_runs[0], expected_runs[0], how="metadata", op_name=op_name, kind=kind,
                  where="")
    if msg:
        return msg
    actual = _pool(actual_runs)
    for where, expected in _pool(expected_runs).items():
        msg = distribution_mismatch(actual[where], expected)
        if msg:
            return f"{where}: {msg} (values pooled over {len(actual_runs)} seeds)"
    return None


def _pool(runs: list) -> dict[str, torch.Tensor]:
    pooled: dict[str, list] = {}
    for run in runs:
        for where, t in _tensor_leaves(run, ""):
            pooled.setdefault(where, []).append(t.detach().reshape(-1))
    return {where: torch.cat(parts) for where, parts in pooled.items()}


def _tensor_leaves(value: Any, where: str):
    if isinstance(value, torch.Tensor):
        yield where, value
    elif isinstance(value, (list, tuple)):
        for i, v in enumerate(value):
            yield from _tensor_leaves(v, f"{where}[{i}]")
    elif isinstance(value, dict):
        for k, v in value.items():
            yield from _tensor_leaves(v, f"{where}[{k!r}]" if where else str(k))


def distribution_mismatch(actual: torch.Tensor, expected: torch.Tensor) -> Optional[str]:
    """None when the values of two same-shape tensors look drawn from one distribution."""
    a = _as_float64(actual)
    e = _as_float64(expected)
    if a.numel() == 0:
        return None
    crit = _KS_CONSTANT * math.sqrt(2.0 / a.numel())
    for label, pick in (("NaN", torch.isnan), ("+inf", torch.isposinf), ("-inf", torch.isneginf)):
        fa, fe = pick(a).double().mean().item(), pick(e).double().mean().item()
        if abs(fa - fe) > crit:
            return f"fraction of {label} differs: expected {fe:.3g}, got {fa:.3g}"
    a, e = a[torch.isfinite(a)], e[torch.isfinite(e)]
    if a.numel() == 0 or e.numel() == 0:
        return None
    # values within the dtype's tolerance count as equal: a distribution with atoms (a
    # gradient that takes a few values) must not fail on the rounding of an atom
    rtol, atol = DEFAULT_TOLERANCES.get(expected.dtype, (0.0, 0.0))
    d = ks_statistic(a, e, rtol, atol)
    bound = _KS_CONSTANT * math.sqrt((a.numel() + e.numel()) / (a.numel() * e.numel()))
    if d > bound:
        return (f"values look drawn from another distribution: Kolmogorov-Smirnov distance "
                f"{d:.3g} > {bound:.3g} (expected mean {e.mean().item():.4g} std "
                f"{_std(e):.4g}, got mean {a.mean().item():.4g} std {_std(a):.4g})")
    return None


def ks_statistic(a: torch.Tensor, b: torch.Tensor, rtol: float = 0.0,
                 atol: float = 0.0) -> float:
    """Largest gap between the empirical CDFs of two 1-D float64 samples, each CDF compared
    with the other's taken up to ``rtol * |x| + atol`` further (0, 0: the two-sample
    Kolmogorov-Smirnov statistic)."""
    a, b = torch.sort(a).values, torch.sort(b).values
    points = torch.cat([a, b])
    reach = points + rtol * points.abs() + atol

    def cdf(sample, at):
        return torch.searchsorted(sample, at, right=True).double() / sample.numel()
    return max((cdf(a, points) - cdf(b, reach)).max().item(),
               (cdf(b, points) - cdf(a, reach)).max().item())


def _as_float64(t: torch.Tensor) -> torch.Tensor:
    t = t.detach().cpu()
    if t.is_complex():
        t = torch.view_as_real(t)
    return t.reshape(-1).to(torch.float64)


def _std(t: torch.Tensor) -> float:
    return t.std().item() if t.numel() > 1 else 0.0


def _kind_of(value: Any) -> str:
    if isinstance(value, torch.Tensor):
        return f"Tensor{tuple(value.shape)} {value.dtype}"
    return type(value).__name__


def _squeeze(text: str, limit: int = 600) -> str:
    text = " ".join(line.strip() for line in text.strip().splitlines() if line.strip())
    return text if len(text) <= limit else text[: limit - 3] + "..."


def tied_indices_agree(actual: dict, expected: dict, op_name: str, sample) -> bool:
    """For a ``TIE_AMBIGUOUS_INDICES`` op whose indices differ from eager's: True when everything
    else matches and every returned index points at an element equal to its value."""
    if op_name not in TIE_AMBIGUOUS_INDICES or not isinstance(actual.get("output"), tuple):
        return False
    out = actual["output"]
    (values, idx), (_, e_idx) = out, expected["output"]
    same_rest = dict(actual, output=type(out)((values, e_idx)))   # a torch.return_types tuple
    if compare(same_rest, expected, how="values", op_name=op_name, kind="forward", where=""):
        return False
    dim_at, keeps, keepdim_at = TIE_AMBIGUOUS_INDICES[op_name]
    args, kwargs = list(sample.args), dict(sample.kwargs)
    dim = args[dim_at] if len(args) > dim_at else kwargs.get("dim", -1)
    keepdim = keeps
    if keepdim_at is not None:
        keepdim = args[keepdim_at] if len(args) > keepdim_at else kwargs.get("keepdim", False)
    x = sample.input
    if x.dim() == 0:
        return bool(torch.equal(idx, e_idx))
    dim = dim % x.dim()
    if not keepdim:
        idx, values = idx.unsqueeze(dim), values.unsqueeze(dim)
    if idx.dtype != torch.int64 or ((idx < 0) | (idx >= x.shape[dim])).any():
        return False
    picked = torch.gather(x, dim, idx)
    return bool(torch.equal(picked, values.to(picked.dtype)))


def tied_gradients_agree(actual: dict, expected: dict, op_name: str, sample) -> bool:
    """For a ``TIE_AMBIGUOUS_INDICES`` op whose input gradient differs from eager's: True when,
    within each slice along the reduced dimension, every group of equal input values received
    the same total gradient. Eager and a compiler may pick different elements among ties (both
    right, as the forward check accepts); each picked element takes the gradient of the output
    it became, so only the totals over a group of ties are determined."""
    if op_name not in TIE_AMBIGUOUS_INDICES:
        return False
    grads, e_grads = actual.get("gradient"), expected.get("gradient")
    x = sample.input
    if not (isinstance(grads, list) and isinstance(e_grads, list) and len(grads) == len(e_grads)
            == 1 and isinstance(x, torch.Tensor) and x.dim() > 0):
        return False
    g, e = grads[0], e_grads[0]
    if g.shape != x.shape or e.shape != x.shape or g.dtype != e.dtype:
        return False
    dim_at = TIE_AMBIGUOUS_INDICES[op_name][0]
    args, kwargs = list(sample.args), dict(sample.kwargs)
    dim = (args[dim_at] if len(args) > dim_at else kwargs.get("dim", -1)) % x.dim()
    n = x.shape[dim]
    if n > 4096:   # the pairwise comparison below is n x n per slice
        return False
    rows = x.detach().movedim(dim, -1).reshape(-1, n).cpu()
    tied = (rows.unsqueeze(-1) == rows.unsqueeze(-2)).double()   # [slices, n, n]

    def totals(t):   # per element: the total gradient of its group of ties, summed in float64
        flat = t.detach().movedim(dim, -1).reshape(-1, n, 1).double().cpu()
        return (tied @ flat).squeeze(-1).to(t.dtype)
    return compare(totals(g), totals(e), how="values", op_name=op_name, kind="gradient",
                   where="") is None


# How much further from the float64 result than eager a float16/bfloat16 result may be: its
# root-mean-square error at most this many times eager's, plus a floor of one rounding of the
# result (the dtype's epsilon times the result's RMS): eager's fused CPU kernels round once where
# the decomposed op rounds after each step, as eager's own decomposition would.
ACCURACY_MULTIPLIER = 2.0


def no_less_accurate(actual: Any, expected: Any, reference: Any, *, op_name: str,
                     kind: str) -> bool:
    """True when ``actual`` differs from eager's ``expected`` only in low-precision floating
    tensors, and in each of them is about as close to ``reference`` (the op run in float64) as
    eager is: compiled code that keeps float32 where eager rounds to float16 at every step is
    more accurate, not wrong. Everything else (integers, shapes, NaN positions) must match."""
    a_leaves, e_leaves, r_leaves = (list(_leaves(x)) for x in (actual, expected, reference))
    if not (len(a_leaves) == len(e_leaves) == len(r_leaves)):
        return False
    for a, e, r in zip(a_leaves, e_leaves, r_leaves):
        if isinstance(e, torch.Tensor) and e.dtype in second_look_dtypes(op_name):
            if not (isinstance(a, torch.Tensor) and isinstance(r, torch.Tensor)) or \
                    _metadata_mismatch(a, e) or a.shape != r.shape:
                return False
            if not _as_accurate(a.detach(), e.detach(), r.detach(), e.dtype):
                return False
        elif compare(a, e, how="values", op_name=op_name, kind=kind, where=""):
            return False
    return True


def _as_accurate(a, e, r, dtype) -> bool:
    a, e, r = a.double().cpu(), e.double().cpu(), r.double().cpu()
    rtol = DEFAULT_TOLERANCES[dtype][0]
    # where eager is NaN or infinite: the same, unless the exact result is finite (eager
    # overflowed, as float16 sums do) and the compiled one is finite and close to it
    special = ~torch.isfinite(e)
    same = (torch.isnan(a) & torch.isnan(e)) | (a == e)
    rescued = torch.isfinite(r) & torch.isfinite(a) & ((a - r).abs() <= rtol * r.abs() + 1e-5)
    if not bool((same | rescued)[special].all()) or bool((torch.isnan(a) & ~special).any()):
        return False
    ok = torch.isfinite(r) & ~special
    if not bool(torch.isfinite(a[ok]).all()):
        return False
    if not bool(ok.any()):
        return True
    a, e, r = a[ok], e[ok], r[ok]
    rms = lambda t: float(t.pow(2).mean().sqrt())  # noqa: E731
    floor = torch.finfo(dtype).eps * rms(r) + 1e-7   # one more rounding of the result
    return rms(a - r) <= ACCURACY_MULTIPLIER * rms(e - r) + floor


def _leaves(value: Any):
    """Tensors and plain values inside nested lists, tuples and dicts, in order."""
    if isinstance(value, (list, tuple)):
        for v in value:
            yield from _leaves(v)
    elif isinstance(value, dict):
        for k in value:
            yield from _leaves(value[k])
    else:
        yield value
