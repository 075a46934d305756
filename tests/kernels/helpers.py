"""Shared checks for kernel tests: compile with Solder, compare with eager."""
from __future__ import annotations

import torch

import solder


def tolerances(dtype):
    if dtype in (torch.float16,):
        return dict(rtol=2e-3, atol=2e-3)
    if dtype == torch.bfloat16:
        return dict(rtol=1.6e-2, atol=1.6e-2)
    if dtype == torch.float64:
        return dict(rtol=1e-7, atol=1e-7)
    return dict(rtol=1.3e-5, atol=1.5e-5)


def assert_same(out, ref, **tol):
    if isinstance(ref, (list, tuple)):
        assert isinstance(out, (list, tuple)) and len(out) == len(ref)
        for o, r in zip(out, ref):
            assert_same(o, r, **tol)
        return
    if isinstance(ref, torch.Tensor):
        assert isinstance(out, torch.Tensor), f"expected a tensor, got {type(out)}"
        assert out.shape == ref.shape, f"shape {out.shape} != {ref.shape}"
        assert out.dtype == ref.dtype, f"dtype {out.dtype} != {ref.dtype}"
        t = dict(tolerances(ref.dtype))
        t.update(tol)
        torch.testing.assert_close(out, ref, equal_nan=True, **t)
        return
    assert out == ref


def clone_args(args):
    return [a.detach().clone().requires_grad_(a.requires_grad) if isinstance(a, torch.Tensor)
            else a for a in args]


def check(fn, *args, kernels=None, max_kernels=None, grad=False, dynamic=False, **tol):
    """Compile ``fn`` with Solder; compare outputs, mutated inputs and (with ``grad``) input
    gradients against eager. Returns the explain report."""
    eager_args, solder_args = clone_args(args), clone_args(args)
    ref = fn(*eager_args)
    # the report (kernel counts, sources) shows the ops' own kernels: the index check (on by
    # default; one reduction kernel where it does not fuse) is tested in test_index_checks.py.
    # The values are compared with the default settings, check included.
    counting = {"check_indices": False}
    report = solder.explain(fn, *solder_args, dynamic=dynamic, options=counting) \
        if not grad else None
    torch._dynamo.reset()
    run_args = clone_args(args)
    compiled = torch.compile(fn, backend="solder", dynamic=dynamic)
    out = compiled(*run_args)
    assert_same(out, ref, **tol)
    for a, b in zip(run_args, eager_args):
        if isinstance(a, torch.Tensor):
            assert_same(a.detach(), b.detach(), **tol)  # in-place updates of inputs
    if grad:
        outs = [o for o in (out if isinstance(out, (list, tuple)) else [out])
                if isinstance(o, torch.Tensor) and o.requires_grad]
        refs = [o for o in (ref if isinstance(ref, (list, tuple)) else [ref])
                if isinstance(o, torch.Tensor) and o.requires_grad]
        gens = [torch.randn_like(o) for o in refs]
        torch.autograd.backward(refs, gens)
        torch.autograd.backward(outs, gens)
        for a, b in zip(run_args, eager_args):
            if isinstance(a, torch.Tensor) and a.requires_grad:
                assert_same(a.grad, b.grad, **tol)
        report = solder.explain(fn, *clone_args(args), options=counting)
    if kernels is not None:
        assert report.kernel_count == kernels, _why(report, kernels)
    if max_kernels is not None:
        assert report.kernel_count <= max_kernels, _why(report, max_kernels)
    return report


def _why(report, expected):
    return f"expected {expected} kernel(s), got:\n{report}"
