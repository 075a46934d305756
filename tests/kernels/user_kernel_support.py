"""Support for the user-kernel tests on the CPU (Triton's interpreter).

Dynamo does not capture calls to interpreted kernels, so these tests put the kernel call into the
graph the way Dynamo would: ``launch`` evaluates the grid per autotune config, splits constants from
graph arguments and calls ``triton_kernel_wrapper_mutation``; in eager code (real tensors) it
launches the kernel directly. Functions using ``launch`` are compiled through ``compile_fn``
(AOTAutograd + Solder on a one-node Dynamo-like graph), or through ``torch.compile`` when the launch
sits inside a ``torch.library.triton_op``.
"""
from __future__ import annotations

import inspect

import torch
import torch.fx as fx
import triton
import triton.language as tl
from torch._higher_order_ops.triton_kernel_wrap import (kernel_side_table,
                                                        triton_kernel_wrapper_mutation)
from torch._subclasses.fake_tensor import FakeTensor
from torch._subclasses.functional_tensor import FunctionalTensor

from solder.backend import backend_for, solder_debug_backend
from solder.pipeline import CompileContext
from solder import config as config_mod

# --- kernels -------------------------------------------------------------------------------------


@triton.jit
def add_one_kernel(x_ptr, out_ptr, n, sx, so, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    tl.store(out_ptr + offs * so, tl.load(x_ptr + offs * sx, mask=m) + 1, mask=m)


@triton.jit
def scale_kernel(x_ptr, out_ptr, n, alpha, BLOCK: tl.constexpr, SQUARE: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    x = tl.load(x_ptr + offs, mask=m)
    if SQUARE:
        x = x * x
    tl.store(out_ptr + offs, x * alpha, mask=m)


@triton.jit
def neighbor_sum_kernel(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    """out[i] = x[i] + x[i + 1 mod n]: reads elements it does not write (aliasing matters)."""
    offs = tl.arange(0, BLOCK)
    m = offs < n
    a = tl.load(x_ptr + offs, mask=m)
    b = tl.load(x_ptr + (offs + 1) % n, mask=m)
    tl.store(out_ptr + offs, a + b, mask=m)


@triton.jit
def opaque_kernel(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    # a pointer made by a cast: the mutation analysis cannot trace it, so it gives up
    dst = out_ptr.to(tl.pointer_type(out_ptr.dtype.element_ty))
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    tl.store(dst + offs, tl.load(x_ptr + offs, mask=m) * 3, mask=m)


def strided_args(x, out):
    return dict(n=x.numel(), sx=x.stride(0), so=out.stride(0))


# --- launching like Dynamo -----------------------------------------------------------------------

def _tracing(tensors) -> bool:
    return any(isinstance(t, (FakeTensor, FunctionalTensor)) for t in tensors) or \
        torch.fx.experimental.proxy_tensor.get_proxy_mode() is not None


def launch(kernel, grid, *args, **kwargs):
    """``kernel[grid](*args, **kwargs)`` in eager code; the mutation op while being traced (with
    one grid per autotune config, as Dynamo does)."""
    named = dict(zip(kernel.arg_names, args))
    named.update(kwargs)
    tensors = [v for v in named.values() if isinstance(v, torch.Tensor)]
    if not _tracing(tensors):
        kernel[grid](*args, **kwargs)
        return
    configs = [c.kwargs for c in kernel.configs] if hasattr(kernel, "configs") else [{}]
    grids = []
    for cfg in configs:
        g = grid(_meta(kernel, {**named, **cfg})) if callable(grid) else grid
        if isinstance(g, tuple) and len(g) < 3:
            g = g + (1,) * (3 - len(g))
        grids.append(g)
    # like torch.library.wrap_triton: what FX can hold goes into the graph, the rest aside
    graph_args = {k: v for k, v in named.items() if isinstance(v, fx.node.base_types)}
    consts = {k: v for k, v in named.items() if k not in graph_args}
    triton_kernel_wrapper_mutation(
        kernel_idx=kernel_side_table.add_kernel(kernel),
        constant_args_idx=kernel_side_table.add_constant_args(consts),
        grid=grids, tma_descriptor_metadata={}, kwargs=graph_args)


def _meta(kernel, meta):
    """What a grid function sees: the arguments, the config, and heuristics' values."""
    from triton.runtime.autotuner import Autotuner, Heuristics
    k = kernel
    while isinstance(k, (Autotuner, Heuristics)):
        for name, fn in getattr(k, "values", {}).items():
            meta[name] = fn(meta)
        k = k.fn
    return meta


def add_one(x, out, block=16):
    # the interpreter hands grid functions scalar arguments as its own tensors: read n from here
    n = x.numel()
    launch(add_one_kernel, lambda meta: (triton.cdiv(n, meta["BLOCK"]),), x, out,
           **strided_args(x, out), BLOCK=block)


# --- compiling -----------------------------------------------------------------------------------

def as_graph_module(fn) -> fx.GraphModule:
    """A one-node graph calling ``fn``, returning a tuple (what AOTAutograd wants from Dynamo)."""
    n = len(inspect.signature(fn).parameters)

    def user_fn(*xs):
        out = fn(*xs)
        return out if isinstance(out, tuple) else (out,)
    g = fx.Graph()
    xs = [g.placeholder(f"x{i}") for i in range(n)]
    g.output(g.call_function(user_fn, tuple(xs)))
    return fx.GraphModule(torch.nn.Module(), g)


class Compiled:
    """``fn`` compiled by Solder through AOTAutograd, with the reports of its graphs."""

    def __init__(self, fn, args, options=None, debug=False):
        self.ctx = CompileContext(config_mod.resolve(options or {}))
        gm = as_graph_module(fn)
        if debug:
            self.fn = solder_debug_backend(gm, list(args), dict(options or {}))
        else:
            self.fn = backend_for(options or {}, self.ctx)(gm, list(args))

    def __call__(self, *args):
        out = self.fn(*args)
        return out[0] if len(out) == 1 else tuple(out)

    @property
    def user_kernels(self) -> list:
        return [u for g in self.ctx.graphs for u in g.user_kernels]

    def wrapper(self) -> str:
        return "\n".join(g.wrapper for g in self.ctx.graphs)


def clone_args(args):
    return [a.detach().clone().requires_grad_(a.requires_grad) if isinstance(a, torch.Tensor)
            else a for a in args]


def compare(fn, *args, grad=False, debug=False, options=None):
    """Run ``fn`` eagerly and compiled; outputs, the caller's tensors afterwards and (``grad``)
    input gradients must match. Returns the compiled function."""
    eager_args, run_args = clone_args(args), clone_args(args)
    ref = fn(*eager_args)
    compiled = Compiled(fn, clone_args(args), options=options, debug=debug)
    out = compiled(*run_args)
    assert_close_tree(out, ref)
    for a, b in zip(run_args, eager_args):
        if isinstance(a, torch.Tensor):
            torch.testing.assert_close(a.detach(), b.detach())
    if grad:
        outs = [o for o in _flat(out) if o.requires_grad]
        refs = [o for o in _flat(ref) if o.requires_grad]
        assert len(outs) == len(refs) and refs
        seeds = [torch.randn_like(r) for r in refs]
        torch.autograd.backward(refs, seeds)
        torch.autograd.backward(outs, seeds)
        for a, b in zip(run_args, eager_args):
            if isinstance(a, torch.Tensor) and a.requires_grad:
                torch.testing.assert_close(a.grad, b.grad)
    return compiled


def _flat(x):
    if isinstance(x, (list, tuple)):
        for y in x:
            yield from _flat(y)
    elif isinstance(x, torch.Tensor):
        yield x


def assert_close_tree(out, ref):
    if isinstance(ref, (list, tuple)):
        assert isinstance(out, (list, tuple)) and len(out) == len(ref)
        for o, r in zip(out, ref):
            assert_close_tree(o, r)
    else:
        torch.testing.assert_close(out, ref)


def functional_launch(kernel, grid, tensors_to_clone, **kwargs):
    """A graph that already is functional (as torch.export or a user may write it): the kernel
    runs on clones of ``tensors_to_clone``, which are returned."""
    from torch._higher_order_ops.triton_kernel_wrap import triton_kernel_wrapper_functional
    graph_args = {k: v for k, v in kwargs.items() if isinstance(v, fx.node.base_types)}
    consts = {k: v for k, v in kwargs.items() if k not in graph_args}
    return triton_kernel_wrapper_functional(
        kernel_idx=kernel_side_table.add_kernel(kernel),
        constant_args_idx=kernel_side_table.add_constant_args(consts),
        grid=[tuple(grid) + (1,) * (3 - len(grid))], tma_descriptor_metadata={},
        kwargs=graph_args, tensors_to_clone=list(tensors_to_clone))


def who_holds(obj, depth=3) -> str:
    """What keeps ``obj`` alive, a few levels up (for the message of a failed lifetime test)."""
    import gc
    lines, frontier, seen = [], [obj], {id(obj)}
    for level in range(depth):
        nxt = []
        for o in frontier:
            for r in gc.get_referrers(o):
                if id(r) in seen or r is frontier or r is nxt or type(r).__name__ == "frame":
                    continue
                seen.add(id(r))
                desc = type(r).__qualname__
                if isinstance(r, dict):
                    desc += f" keys={list(r)[:6]}"
                mod = getattr(type(r), "__module__", "")
                lines.append(f"{'  ' * level}{mod}.{desc}")
                nxt.append(r)
        frontier = nxt[:12]
    return "\n".join(lines[:60])


def forget_traced_kernels():
    """Empty PyTorch's registry of the kernels Dynamo traced (torch._dynamo.reset does not, in
    torch 2.11, and its tables may live on the class): what stays alive after this is Solder's."""
    from torch._higher_order_ops.triton_kernel_wrap import kernel_side_table
    kernel_side_table.reset_table()
    for owner in (kernel_side_table, type(kernel_side_table)):
        for attr in ("id_to_kernel", "kernel_to_id", "constant_args"):
            table = vars(owner).get(attr)
            if isinstance(table, dict):
                table.clear()
