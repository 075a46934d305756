"""Capture: Dynamo's graph through AOTAutograd into functional core-ATen forward/backward graphs.

AOTAutograd functionalizes the graph (in-place ops on inputs become ``copy_`` into the input at the
end, which Solder lowers to an in-place store), applies Solder's decomposition table and splits
training graphs with the min-cut partitioner (recompute cheap pointwise work in the backward
rather than save it). Each resulting graph goes to ``pipeline.compile_graph``.
"""
from __future__ import annotations

import contextlib
import functools
import gc

import torch
from torch._dynamo.backends.common import aot_autograd
from torch._functorch.partitioners import min_cut_rematerialization_partition

from ..ir.nodes import DONATED_INPUTS, PLAIN_OUTPUTS
from ..pipeline import CompileContext, child_answer, compile_graph
from ..runtime.forked_compile import ForkedWork, available as forked_compile_available
from .cse import eliminate_common_subexpressions
from .decompositions import solder_decompositions
from .donated_inputs import donated_inputs
from .empty_tangents import zero_empty_tangent_gradients
from .passes import prepare_graph
from .attention_backends import restricted as attention_backends_restricted
from .attention_masks import simplify_attention_masks
from .aot_logs import unprinted_unless_logged
from .before_autograd import rewrite_before_autograd
from .pool_offsets import save_pool_offsets
from .saved_values import keep_eagers_saved_values, save_mutated_inputs_by_value


@contextlib.contextmanager
def paused_gc(enabled: bool):
    """Python's cyclic collector off for the block (``Config.pause_gc``). A compile makes
    millions of short-lived objects, so collections run often, and each older-generation pass
    walks the whole heap (the model, the FX graphs, the fake tensors): measured on the CPU for
    an 8-layer LLaMA step, 0.3 s of a 2.6 s capture. Nested blocks leave it to the outermost."""
    if not enabled or not gc.isenabled():
        yield
        return
    gc.disable()
    try:
        yield
    finally:
        gc.enable()


def _start_compile_workers(config) -> None:
    """Worker processes start while the graph is captured, to be ready for its kernels
    (runtime/compile_workers.py)."""
    if config.compile_processes and torch.cuda.is_available():
        from ..runtime import compile_workers
        n = (compile_workers.default_processes() if config.compile_processes < 0
             else config.compile_processes)
        compile_workers.warm(n)


def outputs_without_grad():
    """The forward graph's output positions of user outputs that do not require grad.
    AOTAutograd regenerates an output that views another only where both require grad; the
    others reach the caller as the graph returns them, so a view among them must be a real
    view (fuzz seed 460140: an int output and its permute, which a later graph wrote through
    and AOTAutograd refused as inputs sharing memory without being views of each other). The
    forward returns the mutated inputs first, then the user outputs."""
    try:
        meta = torch._guards.TracingContext.try_get().fw_metadata
        first = meta.num_mutated_inp_runtime_indices
        return frozenset(first + i for i, info in enumerate(meta.output_info)
                         if not info.requires_grad)
    except Exception:  # noqa: BLE001 - then only outputs that can never require grad count
        return None


def _compiler(kind: str, ctx: CompileContext):
    def compile_fn(gm, example_inputs):
        # a backward graph compiles at the first backward, outside the backend call below
        with paused_gc(ctx.config.pause_gc):
            if kind == "forward":
                gm.meta[PLAIN_OUTPUTS] = outputs_without_grad()
            if kind == "backward":
                gm.meta[DONATED_INPUTS] = donated_inputs(gm)
            prepare_graph(gm)
            compiled = compile_graph(gm, example_inputs, kind, ctx)
        if ctx.config.cuda_graphs:
            from ..runtime import cuda_graphs
            report = ctx.graphs[-1] if ctx.graphs else None
            compiled = cuda_graphs.wrap(compiled, gm, kind, getattr(report, "name", kind),
                                        ctx.config, report)
        return compiled
    return compile_fn


def _partition(ctx: CompileContext, joint, joint_inputs, **kwargs):
    # Solder's own CSE, then the partitioner's turned off: it would import TorchInductor's
    # pattern matcher at the process's first training compile (capture/cse.py)
    eliminate_common_subexpressions(joint.graph)
    save_pool_offsets(joint, kwargs.get("num_fwd_outputs"))
    keep_eagers_saved_values(joint, kwargs.get("num_fwd_outputs"), ctx.leaf_inputs,
                             ctx.input_count)
    joint.recompile()
    with torch._functorch.config.patch(cse=False):
        fw, bw = min_cut_rematerialization_partition(joint, joint_inputs, compiler="inductor",
                                                     **kwargs)
    save_mutated_inputs_by_value(fw, kwargs.get("num_fwd_outputs"))
    zero_empty_tangent_gradients(bw)
    # AOTAutograd also partitions the bodies of higher-order ops with this function, before
    # the graph that holds them: the last partition's backward is the one compiled next
    if ctx.backward_child is not None:
        ctx.backward_child.discard()
        ctx.backward_child = None
    if _backward_in_child(ctx.config, bw):
        ctx.backward_child = ForkedWork.start(lambda: _child_compile(bw, ctx.config))
    return fw, bw


def _backward_in_child(config, bw) -> bool:
    """Whether to lower the backward in a forked child (``compile_backward_in_child``): only
    where the backward compiles right after the forward, and only graphs whose lowering runs
    no device code (a constant's value is read from the GPU), that cache as plain data and
    whose sizes are all static (with symbolic ones, lowering may add guards to Dynamo's shape
    environment, and the child's copy of it is thrown away)."""
    if not (config.compile_backward_in_child and config.compile_backward_early
            and not config.debug_dir and not config.debug_eager and forked_compile_available()):
        return False
    return not any(n.op == "get_attr" or isinstance(n.target, torch._ops.HigherOrderOperator)
                   or _symbolic(n.meta.get("val")) for n in bw.graph.nodes)


def _symbolic(v) -> bool:
    if isinstance(v, (torch.SymInt, torch.SymFloat, torch.SymBool)):
        return True
    if isinstance(v, torch.Tensor):
        return any(isinstance(d, torch.SymInt)
                   for d in (*v.shape, *v.stride(), v.storage_offset()))
    if isinstance(v, (list, tuple)):
        return any(_symbolic(x) for x in v)
    return False


def _child_compile(bw, config) -> dict:
    """In the child: what ``compile_fn`` does to the backward, up to its generated code."""
    prepare_graph(bw)
    return child_answer(bw, "backward", config)


@functools.lru_cache(maxsize=1)
def _decomps():
    return solder_decompositions()


def make_aot_backend(ctx: CompileContext):
    decomps = _decomps() if ctx.config.decompose else {}
    backend = aot_autograd(
        fw_compiler=_compiler("forward", ctx),
        bw_compiler=_compiler("backward", ctx),
        inference_compiler=_compiler("inference", ctx),
        decompositions=decomps,
        partition_fn=functools.partial(_partition, ctx),
        keep_inference_input_mutations=True,
    )

    def compile_fn(gm, example_inputs):
        _start_compile_workers(ctx.config)
        ctx.input_count = len(example_inputs)
        ctx.leaf_inputs = frozenset(i for i, t in enumerate(example_inputs)
                                    if isinstance(t, torch.Tensor) and t.requires_grad
                                    and t.is_leaf)
        rewrite_before_autograd(gm)  # gradients right, shapes static, every in-place op functional
        if ctx.config.simplify_attention_masks:
            ctx.rewrites.extend(simplify_attention_masks(gm, kept=ctx.notes))
        # Effect tokens (with_effects around side-effectful ops such as linalg's error checks)
        # become ops inside the graphs (_make_token/_sink_tokens), not graph inputs that
        # AOTAutograd passes as None at run time.
        patches = {"unlift_effect_tokens": True}
        if ctx.config.compile_backward_early and hasattr(
                torch._functorch.config, "force_non_lazy_backward_lowering"):
            patches["force_non_lazy_backward_lowering"] = True
        with torch._functorch.config.patch(**patches), paused_gc(ctx.config.pause_gc), \
                attention_backends_restricted(ctx.config.attention_backends), \
                unprinted_unless_logged():
            return backend(gm, example_inputs)
    return compile_fn
