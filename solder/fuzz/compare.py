# The verdict on a compiled run against eager: which observed values differ, and why.
#
# Self-contained on purpose: standalone scripts written by `python -m solder fuzz` inline this
# file's text, so it imports nothing but torch and uses no `from __future__`.
#
# What counts as the same (docs/ARCHITECTURE.md, "Differential fuzzing"):
# - values within a tolerance by dtype, NaN where eager has NaN, integers and bools exactly;
# - a float value is held to the tolerance of the lowest floating precision the program
#   computes in (its PRECISION), when that is looser than its own dtype's: a float32 gradient
#   gathered through float16 ops carries float16's rounding, and a compiler may keep float32
#   between float16 ops where eager rounds after each;
# - a float64 reference run (the same program on its inputs widened to float64) excuses eager's
#   own rounding: a compiled float no more than 3 times as far from it as eager's (plus the
#   tolerance) is not wrong (two valid evaluation orders round by about as much, and "no
#   farther than eager" would fail half of the values where rounding dominates), nor an
#   integer or bool equal to it (a comparison or a floor that eager's low precision tipped).
#   Where eager gave inf or NaN and the reference a number, the compiled value must be within
#   |reference| + 1 of it. A GPU program without random ops also runs in eager on the CPU: its
#   distance from the reference counts as eager's too where it is larger (two kernels of
#   eager's, both valid: a gradient through a norm of a constant row is a rounding residue
#   times 1/sqrt(eps), tiny in one and 1e-4 in the other);
# - dtypes and shapes exactly; the strides of an output that is a view of an input or that is
#   dense (no gaps, no overlap: eager's layout of a new tensor, which Solder keeps), except
#   along dims of size 1 and for outputs of fewer than two elements (not observable); an
#   output with gaps or overlap that is not a view of an input has strides eager's autograd
#   and kernels choose case by case, not compared; an output that is a view of an input must
#   be one in the compiled run too (same input, same storage offset), and one that is not
#   must not be (neither for an output without elements);
# - eager run again on inputs perturbed by two units of the program's lowest precision tells
#   whether a value is ill-conditioned: a compiled float within 3 times eager's largest move
#   over the tensor passes, and an integer or bool equal to the perturbed run's (a flipped
#   comparison);
# - random values (LAWS) by their law: range, mean, spread, fraction of zeros for dropout;
# - gradients: eager's, or the right one where eager's derivative is wrong: as_strided_scatter's
#   input gradient, recomputed with a correct as_strided_scatter (see execute.py), with that
#   run's own float64 reference and rounding-noise runs (eager's measure its wrong gradient);
# - an input's gradient that eager leaves None matches zeros, and the other way around;
# - a gradient element that is NaN or infinite in eager and in the reference may be either in
#   the compiled run: a backward that sums infinities gives inf or NaN by its order of terms,
#   and eager's own kernels differ (layer_norm's CPU backward gives NaN where its CUDA formula,
#   which PyTorch's decomposition follows, gives -inf: fuzz seed 194179).
import math

import torch

TOL = {torch.float64: (1e-7, 1e-9), torch.float32: (1e-4, 1e-5),
       torch.float16: (5e-3, 1e-3), torch.bfloat16: (4e-2, 1e-2)}


def value_differs(e, c, r=None, floor=None, j=None, a=None, nonfinite_any=False):
    """Why compiled tensor c is not eager's e, or None; r: the float64 reference (or None);
    floor: the lowest floating precision the program computes in (a float value is held to
    that dtype's tolerance when it is looser than its own); j: eager's value on inputs
    perturbed by a few units of that precision (or None); a: eager's value on the other
    device (or None); nonfinite_any: an element non-finite in e and r may be any non-finite
    value in c (a gradient)."""
    if e is None or c is None:
        z = c if e is None else e
        return None if z is None or not z.bool().any() else "None against a nonzero tensor"
    if e.dtype != c.dtype:
        return f"dtype {e.dtype} against {c.dtype}"
    if e.shape != c.shape:
        return f"shape {tuple(e.shape)} against {tuple(c.shape)}"
    if e.numel() == 0:
        return None
    e, c = e.detach().cpu(), c.detach().cpu()
    rtol, atol = TOL.get(e.dtype, (0.0, 0.0))
    if e.is_floating_point() and floor in TOL:
        rtol, atol = max(rtol, TOL[floor][0]), max(atol, TOL[floor][1])
    ed, cd = e.double(), c.double()
    if e.is_floating_point():
        near = ed.isfinite() & ((ed - cd).abs() <= atol + rtol * ed.abs())
        ok = (ed == cd) | (ed.isnan() & cd.isnan()) | near
    else:
        ok = e == c
    if nonfinite_any and e.is_floating_point() and r is not None and \
            tuple(r.shape) == tuple(e.shape):
        ok |= ~ed.isfinite() & ~cd.isfinite() & ~r.detach().cpu().double().isfinite()
    if not bool(ok.all()) and r is not None and tuple(r.shape) == tuple(e.shape):
        rd = r.detach().cpu().double()
        if e.is_floating_point():
            err_e = torch.minimum(_error(ed, rd), rd.abs().nan_to_num(0.0) + 1)
            if a is not None and tuple(a.shape) == tuple(e.shape) and a.dtype == e.dtype:
                ad = a.detach().cpu().double()
                err_e = torch.maximum(err_e, torch.minimum(_error(ad, rd),
                                                           rd.abs().nan_to_num(0.0) + 1))
            err_c = _error(cd, rd)
            ok |= err_c <= 3 * err_e + atol + rtol * rd.abs().nan_to_num(0.0)
        else:
            ok |= cd == rd
        if not bool(ok.all()) and (e.dtype in LOW or floor in LOW) and e.is_floating_point():
            ok |= _rms_close(ed, cd, rd, rtol, atol)
    for jt in (j if isinstance(j, (list, tuple)) else [j]):
        if bool(ok.all()) or jt is None or tuple(jt.shape) != tuple(e.shape):
            continue
        jd = jt.detach().cpu().double()
        if e.is_floating_point():
            # where eager itself moves when its inputs, or its intermediate roundings, move by
            # a unit of rounding, the tensor is ill-conditioned (a norm over a group without
            # variance: 1/sqrt(eps)); where the noise lands differs from run to run, so the
            # largest move over the tensor is the scale: a compiled value within 3 times it of
            # eager's is as good as eager's (an element that becomes inf or NaN when moved is
            # not judged)
            sens = _error(jd, ed)
            finite = sens.isfinite()
            scale = sens[finite].max() if bool(finite.any()) else 0.0
            ok |= ~finite | (_error(cd, ed) <= 3 * scale)
        else:
            ok |= cd == jd
    if bool(ok.all()):
        return None
    at = tuple((~ok).nonzero()[0].tolist())
    return (f"{int((~ok).sum())}/{e.numel()} elements differ ({e.dtype}, shape "
            f"{tuple(e.shape)}), first at {list(at)}: eager {ed[at].item()!r}, compiled "
            f"{cd[at].item()!r}" + ("" if r is None else f", float64 reference "
                                    f"{r.detach().cpu().double()[at].item()!r}"))


LOW = (torch.float16, torch.bfloat16)


def _rms_close(ed, cd, rd, rtol, atol):
    """float16 and bfloat16, as a whole: where a sum cancels (a gradient gathered from several
    uses), an element's rounding error is relative to the terms, not to the result, and two
    valid orders of the same low-precision sums differ by more than any elementwise tolerance.
    The compiled tensor passes when its non-finite values are where eager's or the reference's
    are and its root-mean-square error against the reference is within eager's plus the
    tolerance of the reference's root mean square."""
    finite = rd.isfinite() & ed.isfinite()
    if not bool((cd.isfinite() | ~finite).all()) or not bool(finite.any()):
        return False
    r, e, c = rd[finite], ed[finite], cd[finite]
    rms = r.pow(2).mean().sqrt()
    err_e = (e - r).pow(2).mean().sqrt()
    err_c = (c - r).pow(2).mean().sqrt()
    return bool(err_c <= err_e + rtol * rms + atol)


def _error(x, ref):
    """|x - ref| elementwise, 0 where equal (infinities and NaN included), inf where only one
    of them is NaN."""
    err = (x - ref).abs()
    same = (x == ref) | (x.isnan() & ref.isnan())
    return torch.where(same, torch.zeros_like(err), err.nan_to_num(nan=math.inf))


def law_differs(law, c, e, floor=None):
    """Why a random value c does not follow its law, or None; e: eager's value of it; floor:
    the program's lowest floating precision (a dropout's kept values are held to its
    tolerance, as every other value is)."""
    kind, n = law[0], c.numel()
    if n == 0:
        return None
    x = c.detach().cpu().double()
    mean = x.mean().item()
    if kind in ("uniform", "normal") and not bool(x.isfinite().all()):
        return f"{kind}: non-finite values"
    if kind == "uniform":
        lo, hi = law[1], law[2]
        if x.min().item() < lo or x.max().item() > hi:
            return f"uniform({lo}, {hi}): values in [{x.min().item()}, {x.max().item()}]"
        if abs(mean - (lo + hi) / 2) > 5 * (hi - lo) / math.sqrt(12 * n) + 1e-6:
            return f"uniform({lo}, {hi}): mean {mean} of {n} values"
        return _all_equal(x, kind)
    if kind == "normal":
        m, s = law[1], law[2]
        if abs(mean - m) > 5 * s / math.sqrt(n) + 1e-6:
            return f"normal({m}, {s}): mean {mean} of {n} values"
        if n >= 16 and not 0.4 * s <= x.std().item() <= 1.8 * s:
            return f"normal({m}, {s}): standard deviation {x.std().item()} of {n} values"
        return _all_equal(x, kind)
    if kind == "randint":
        lo, hi = law[1], law[2]
        if c.is_floating_point() or x.min().item() < lo or x.max().item() >= hi:
            return f"randint({lo}, {hi}): values in [{x.min().item()}, {x.max().item()}]"
        return None
    if kind == "bernoulli":
        p = law[1]
        if not bool(((x == 0) | (x == 1)).all()):
            return "bernoulli: values other than 0 and 1"
        if abs(mean - p) > 5 * math.sqrt(p * (1 - p) / n) + 1 / n:
            return f"bernoulli({p}): mean {mean} of {n} values"
        return None
    if kind == "perm":
        if not torch.equal(x.sort().values, torch.arange(law[1], dtype=torch.float64)):
            return f"randperm({law[1]}): not a permutation"
        return None
    if kind == "dropout":
        p = law[1]
        y = e.detach().cpu().double()
        zc, ze = int((x == 0).sum()), int((y == 0).sum())
        if abs(zc - ze) > 5 * math.sqrt(2 * n * p * (1 - p)) + 1:
            return f"dropout(p={p}): {zc} zeros of {n} against eager's {ze}"
        # an infinite input is inf where kept and NaN where dropped (inf * 0): the positions
        # differ between the two streams, so NaN in either says nothing
        kept = (x != 0) & (y != 0) & ~x.isnan() & ~y.isnan()
        # kept values computed in float32 and cast to float64 carry float32's rounding (fuzz
        # seed 760323: a layer norm's 1-ulp difference judged at float64's tolerance)
        return value_differs(e.detach().cpu()[kept], c.detach().cpu()[kept], floor=floor)
    return f"unknown law {law!r}"


def _all_equal(x, kind):
    if x.numel() >= 8 and bool((x == x.reshape(-1)[0]).all()):
        return f"{kind}: all {x.numel()} values equal"
    return None


def verdict(eager, comp, ref=None, fixed=None, floor=None, jittered=None, other=None,
            noisy=None):
    """[(label, category, why)] for each observed value of the compiled run (comp) that is not
    eager's. Each argument is a list of execute.Observed; ref: the float64 reference run;
    fixed: eager with as_strided_scatter's gradient right (None when the program has none);
    floor: the program's lowest floating precision (its PRECISION); jittered: eager on
    inputs perturbed by a few units of that precision; other: eager on the other device;
    noisy: eager with its intermediate roundings perturbed (execute.RoundingNoise), one run or
    a list of runs."""
    if [o.label for o in eager] != [o.label for o in comp]:
        return [("values", "structure", f"eager gave {[o.label for o in eager]}, compiled "
                 f"{[o.label for o in comp]}")]
    refs = {o.label: o for o in ref} if ref else {}
    fixes = {o.label: o for o in fixed} if fixed else {}
    jits: dict = {}
    noisy_runs = noisy if noisy and isinstance(noisy[0], list) else [noisy]
    for run in [jittered] + noisy_runs:
        for o in run or []:
            jits.setdefault(o.label, []).append(o)
    others = {o.label: o for o in other} if other else {}
    bad = []
    for e, c in zip(eager, comp):
        found = _differs(e, c, refs.get(e.label), floor, jits.get(e.label),
                         others.get(e.label))
        if found and found[0] == "value" and e.label in fixes:
            fix = fixes[e.label]
            if _differs(fix, c, fix.ref, floor, fix.noisy or None) is None:
                found = None
        if found:
            bad.append((e.label,) + found)
    return bad


def _differs(e, c, r, floor, j, a=None):
    """(category, why) or None, for one observed value; j: the perturbed runs' Observed (a
    list, or one)."""
    if e.tensor is not None and c.tensor is not None:
        if e.tensor.dtype != c.tensor.dtype:
            return ("dtype", f"dtype {e.tensor.dtype} against {c.tensor.dtype}")
        if e.tensor.shape != c.tensor.shape:
            return ("shape", f"shape {tuple(e.tensor.shape)} against {tuple(c.tensor.shape)}")
        if e.label.startswith("output"):
            why = _layout_differs(e, c)
            if why:
                return why
    if e.requires_grad != c.requires_grad:
        return ("requires_grad", f"requires_grad {e.requires_grad} against {c.requires_grad}")
    if e.law is not None and c.tensor is not None:
        why = law_differs(e.law, c.tensor, e.tensor, floor)
        return ("law", why) if why else None
    js = [x.tensor for x in (j if isinstance(j, list) else [j]) if x is not None]
    why = value_differs(e.tensor, c.tensor, None if r is None else r.tensor, floor,
                        js or None, None if a is None else a.tensor,
                        nonfinite_any=e.label.startswith("gradient"))
    return ("value", why) if why else None


def _layout_differs(e, c):
    if e.tensor.numel() == 0:
        return None     # nothing can be read or written through it (eager's dropout of an
        #                 empty tensor returns the tensor itself)
    if e.alias != c.alias:
        return ("alias", f"eager's output is {_alias_text(e.alias)}, the compiled one "
                         f"{_alias_text(c.alias)}")
    if e.alias is not None and e.offset != c.offset:
        return ("alias", f"storage offset {e.offset} against {c.offset} in {e.alias}'s storage")
    if e.tensor.numel() < 2 or (e.alias is None and not _dense(e.strides, e.tensor.shape)):
        return None
    shape = e.tensor.shape
    se = [s for s, n in zip(e.strides, shape) if n > 1]
    sc = [s for s, n in zip(c.strides, shape) if n > 1]
    if se != sc:
        metas = [[s for s, n in zip(m, shape) if n > 1] for m in e.meta_strides]
        if sc in metas and e.alias is None:
            return None     # the strides PyTorch's meta functions promise (execute.py)
        return ("stride", f"strides {e.strides} against {c.strides} (shape {tuple(shape)})")
    return None


def _dense(strides, shape):
    """Whether the elements fill a block of memory without gaps or overlap (in some order of
    the dims); dims of size 1 do not count."""
    dims = sorted((abs(s), n) for s, n in zip(strides, shape) if n > 1)
    expected = 1
    for s, n in dims:
        if s != expected:
            return False
        expected *= n
    return True


def _alias_text(alias):
    return "a new tensor" if alias is None else f"a view of input {alias}"
