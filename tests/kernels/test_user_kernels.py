"""User Triton kernels in compiled functions, on the CPU: kernel forms, grids, autotuning,
torch.library.triton_op through torch.compile, explain, solder_debug, lifetime, errors."""
import gc
import logging
import weakref

import pytest
import torch
import triton
import triton.language as tl

import solder
from solder.lower.graph import LoweringError
from solder.runtime.user_kernel import UserKernelError

from .user_kernel_support import (Compiled, add_one, add_one_kernel, compare, launch,
                                  scale_kernel, strided_args, who_holds,
                                  forget_traced_kernels)


def _r(*s):
    return torch.randn(*s)


# --- torch.library.triton_op through torch.compile -----------------------------------------------

@torch.library.triton_op("solder_test::add_one_into", mutates_args={"out"})
def add_one_into(x: torch.Tensor, out: torch.Tensor) -> None:
    add_one(x, out)


@torch.library.triton_op("solder_test::plus_one", mutates_args=())
def plus_one(x: torch.Tensor) -> torch.Tensor:
    out = torch.empty_like(x)
    add_one(x, out)
    return out


def _plus_one_backward(ctx, g):
    return g * 1


plus_one.register_autograd(_plus_one_backward)


def _run_both(fn, *args, backend="solder", dynamic=None, grad=False):
    eager = [a.detach().clone().requires_grad_(a.requires_grad) for a in args]
    mine = [a.detach().clone().requires_grad_(a.requires_grad) for a in args]
    ref = fn(*eager)
    out = torch.compile(fn, backend=backend, dynamic=dynamic, fullgraph=True)(*mine)
    torch.testing.assert_close(out, ref)
    for a, b in zip(mine, eager):
        torch.testing.assert_close(a.detach(), b.detach())
    if grad:
        ref.sum().backward()
        out.sum().backward()
        for a, b in zip(mine, eager):
            if a.requires_grad:
                torch.testing.assert_close(a.grad, b.grad)
    return out


@pytest.mark.parametrize("backend", ["solder", "solder_debug"])
def test_triton_op_mutating_a_graph_input(backend):
    def f(x, out):
        add_one_into(x.sin(), out)
        return out.cos() + 1
    _run_both(f, _r(8), _r(8), backend=backend)


@pytest.mark.parametrize("backend", ["solder", "solder_debug"])
def test_triton_op_with_register_autograd(backend):
    def f(x, w):
        return plus_one(x * w).sin()
    _run_both(f, _r(8).requires_grad_(), _r(8).requires_grad_(), backend=backend, grad=True)


def test_caller_passes_views_with_offset_and_strides():
    def f(x, out):
        add_one_into(x * 2, out)
        return out.sum()
    for make in (lambda b: b[2:10], lambda b: b.view(6, 2)[1:, 1][:5]):
        base = _r(12)
        eager, mine = base.clone(), base.clone()
        x = _r(len(make(base)))
        ref = f(x, make(eager))
        out = torch.compile(f, backend="solder")(x, make(mine))
        torch.testing.assert_close(out, ref)
        torch.testing.assert_close(mine, eager)     # the caller's base saw the update
        torch._dynamo.reset()


def test_triton_op_with_dynamic_shapes():
    def f(x):
        return plus_one(x * 2) + 1
    compiled = torch.compile(f, backend="solder", dynamic=True, fullgraph=True)
    for n in (8, 13, 21):
        x = _r(n)
        torch.testing.assert_close(compiled(x), f(x))


def test_explain_lists_writes_and_copies():
    def f(x, out):
        add_one_into(x * 2, out)
        y = plus_one(out)
        return y + 1
    report = solder.explain(f, _r(8), _r(8))
    lines = [u for g in report.graphs for u in g.user_kernels]
    assert len(lines) == 2
    assert all("add_one_kernel" in u and "writes out_ptr" in u for u in lines)
    assert any("in place (into graph input" in u for u in lines)
    assert "user kernel: add_one_kernel" in str(report)


def test_pointwise_work_around_the_kernel_fuses():
    def f(x, out):
        add_one_into((x * 2).sin(), out)
        return (out + 1).cos() * 3
    report = solder.explain(f, _r(8), _r(8))
    assert report.kernel_count == 2     # one kernel before the launch, one after; no copies
    assert not report.fallbacks


# --- kernel forms, grids, arguments --------------------------------------------------------------

def test_constexpr_and_scalar_arguments():
    def f(x):
        out = torch.empty_like(x)
        launch(scale_kernel, (1,), x, out, x.numel(), 2.5, BLOCK=16, SQUARE=True)
        out2 = torch.empty_like(x)
        launch(scale_kernel, (1,), out, out2, x.numel(), -1.0, BLOCK=16, SQUARE=False)
        return out2
    compare(f, _r(8))


@pytest.mark.parametrize("grid_form", ["tuple", "closure", "lambda", "2d lambda"])
def test_grid_forms(grid_form):
    block = 4

    def f(x):
        n = x.numel()
        out = torch.empty_like(x)
        grid = {"tuple": (triton.cdiv(n, block),),
                "closure": (lambda meta: (triton.cdiv(n, block),)),
                "lambda": (lambda meta: (triton.cdiv(n, meta["BLOCK"]),)),
                "2d lambda": (lambda meta: (triton.cdiv(n, meta["BLOCK"]), 1))}[grid_form]
        launch(add_one_kernel, grid, x, out, **strided_args(x, out), BLOCK=block)
        return out
    compare(f, _r(10))


def test_kernel_defined_inside_the_compiled_function():
    def f(x):
        @triton.jit
        def twice(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
            offs = tl.arange(0, BLOCK)
            tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=offs < n) * 2, mask=offs < n)
        out = torch.empty_like(x)
        launch(twice, (1,), x, out, x.numel(), BLOCK=16)
        return out + 1
    compare(f, _r(8))


# --- autotune and heuristics ---------------------------------------------------------------------

def _last_config_wins():
    """A do_bench for the interpreter (which has no timer): each config in turn is faster."""
    state = {"t": 100.0}

    def bench(kernel_call, quantiles=None):
        kernel_call()
        state["t"] -= 1
        return [state["t"]] * 3
    return bench


def _accumulate_kernel(**autotune):
    @triton.autotune(configs=[triton.Config({"BLOCK": 4}), triton.Config({"BLOCK": 8})],
                     key=["n"], do_bench=_last_config_wins(), **autotune)
    @triton.jit
    def accumulate(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
        offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        m = offs < n
        tl.store(out_ptr + offs, tl.load(out_ptr + offs, mask=m) + tl.load(x_ptr + offs, mask=m),
                 mask=m)
    return accumulate


@pytest.mark.parametrize("feature", ["plain", "reset_to_zero", "restore_value"])
def test_autotune_grid_per_config_and_hooks(feature):
    kernel = _accumulate_kernel(**({"reset_to_zero": ["out_ptr"]} if feature == "reset_to_zero"
                                   else {"restore_value": ["out_ptr"]}
                                   if feature == "restore_value" else {}))

    def f(x, out):
        n = x.numel()
        launch(kernel, lambda meta: (triton.cdiv(n, meta["BLOCK"]),), x, out, n)
        return out * 1
    x, out = _r(16), _r(16)
    ref_out = out.clone()
    ref = f(x, ref_out)
    kernel.cache.clear()        # the compiled run tunes again, with the same hooks
    compiled = Compiled(f, [x, out.clone()])
    mine = out.clone()
    kernel.cache.clear()
    torch.testing.assert_close(compiled(x, mine), ref)
    torch.testing.assert_close(mine, ref_out)
    assert kernel.best_config.kwargs["BLOCK"] == 8     # the second grid was used
    if feature == "plain":      # tuning ran the kernel on the real output: as in eager
        assert not torch.allclose(ref_out, out + x)
    else:
        torch.testing.assert_close(mine, x if feature == "reset_to_zero" else out + x)


def test_autotune_prune_configs_by_and_heuristics():
    @triton.autotune(configs=[triton.Config({"BLOCK": 2}), triton.Config({"BLOCK": 4}),
                              triton.Config({"BLOCK": 8})], key=["n"],
                     prune_configs_by={"early_config_prune": lambda cfgs, nargs, **kw: cfgs[1:]},
                     do_bench=_last_config_wins())
    @triton.heuristics({"EVEN": lambda args: args["n"] % args["BLOCK"] == 0})
    @triton.jit
    def kernel(x_ptr, out_ptr, n, BLOCK: tl.constexpr, EVEN: tl.constexpr):
        offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        if EVEN:
            tl.store(out_ptr + offs, tl.load(x_ptr + offs) + 1)
        else:
            tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=offs < n) + 1, mask=offs < n)

    def f(x):
        out = torch.empty_like(x)
        n = x.numel()
        launch(kernel, lambda meta: (triton.cdiv(n, meta["BLOCK"]),), x, out, n)
        return out
    compare(f, _r(12))


def test_heuristics_alone():
    @triton.heuristics({"BLOCK": lambda args: triton.next_power_of_2(args["n"])})
    @triton.jit
    def kernel(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
        offs = tl.arange(0, BLOCK)
        tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=offs < n) * 2, mask=offs < n)

    def f(x):
        out = torch.empty_like(x)
        launch(kernel, (1,), x, out, x.numel())
        return out
    compare(f, _r(11))


# --- lifetime ------------------------------------------------------------------------------------

def test_deleting_the_compiled_function_frees_kernel_and_grid():
    def make():
        held = torch.randn(64)          # a tensor the grid function holds

        @triton.jit
        def inner(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
            offs = tl.arange(0, BLOCK)
            tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=offs < n) + 1, mask=offs < n)

        def grid(meta):
            return (1 + 0 * held.numel(),)

        def f(x):
            out = torch.empty_like(x)
            launch(inner, grid, x, out, x.numel(), BLOCK=16)
            return out
        return f, weakref.ref(inner), weakref.ref(grid), weakref.ref(held)

    # Under the interpreter PyTorch's own mutation analysis fails and logs the error with its
    # traceback; pytest's log capture would keep that traceback (and the kernel in its frames)
    # alive past the test. Keep that logger quiet here so only Solder's references count.
    noisy = logging.getLogger("torch._dynamo")
    was_disabled, noisy.disabled = noisy.disabled, True
    try:
        f, *refs = make()
        compiled = Compiled(f, [_r(8)])
        compiled(_r(8))
        del f, compiled
    finally:
        noisy.disabled = was_disabled
    torch._dynamo.reset()
    forget_traced_kernels()
    gc.collect()
    alive = [r() for r in refs]
    assert alive == [None, None, None], "\n".join(who_holds(a) for a in alive if a is not None)


# --- errors --------------------------------------------------------------------------------------

def test_grid_with_four_dimensions_is_refused_with_kernel_and_site():
    def f(x):
        out = torch.empty_like(x)
        launch(add_one_kernel, (1, 1, 1, 1), x, out, **strided_args(x, out), BLOCK=16)
        return out
    with pytest.raises(LoweringError, match=r"add_one_kernel \(user_kernel_support.py:\d+\), "
                                            r"called at .*4 dimensions"):
        Compiled(f, [_r(8)])


def test_autotune_feature_solder_cannot_honour():
    kernel = _accumulate_kernel(reset_to_zero=["not_an_argument"])

    def f(x, out):
        launch(kernel, lambda meta: (triton.cdiv(8, meta["BLOCK"]),), x, out, 8)
        return out
    with pytest.raises(LoweringError, match="accumulate.*reset_to_zero.*not_an_argument.*cannot "
                                            "honour"):
        Compiled(f, [_r(8), _r(8)])


@pytest.mark.filterwarnings("ignore:Solder cannot tell")
def test_kernel_that_fails_to_compile_names_kernel_and_call_site():
    @triton.jit
    def broken(x_ptr, out_ptr, BLOCK: tl.constexpr):
        offs = tl.arange(0, BLOCK)
        tl.store(out_ptr + offs, tl.no_such_function(tl.load(x_ptr + offs)))

    @torch.library.triton_op("solder_test::broken", mutates_args=())
    def broken_op(x: torch.Tensor) -> torch.Tensor:
        out = torch.empty_like(x)
        launch(broken, (1,), x, out, BLOCK=8)
        return out

    def f(x):
        return broken_op(x * 2)     # the call site the error names
    with pytest.raises(UserKernelError) as info:
        torch.compile(f, backend="solder", fullgraph=True)(_r(8))
    text = str(info.value)
    assert "broken (test_user_kernels.py:" in text
    assert "broken_op(x * 2)" in text and "failed to compile or launch" in text
    assert "no_such_function" in text
