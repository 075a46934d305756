"""Helpers the generated wrappers call at run time (injected into them as ``S``)."""
from __future__ import annotations

import torch


class InputLayoutError(RuntimeError):
    pass


def check_input(t, size, stride, name: str, graph: str, written: bool = False):
    """A compiled graph bakes in its inputs' sizes and strides. An input it only reads that
    arrives in other strides is copied into the compiled ones (a backward's saved tensor that
    eager keeps with gaps, say, where the forward stored it dense); anything else is refused
    rather than read or written at the wrong elements."""
    if tuple(t.shape) != tuple(size):
        raise InputLayoutError(f"{graph}: input {name} has size {tuple(t.shape)}, compiled for "
                               f"{tuple(size)}")
    if t.numel() > 1 and any(n != 1 and s != e for n, s, e in zip(size, t.stride(), stride)):
        if written:
            raise InputLayoutError(f"{graph}: input {name} has strides {t.stride()}, compiled "
                                   f"for {tuple(stride)}, and the graph writes into it")
        out = torch.empty_strided(tuple(size), tuple(stride), dtype=t.dtype, device=t.device)
        out.copy_(t)
        return out
    return t


def ensure_layout(t, size, stride):
    """A library call's result in the layout the graph was compiled for (copied if it differs;
    ATen kernels do not always produce the strides their meta functions promise)."""
    if not isinstance(t, torch.Tensor):
        return t
    if tuple(t.shape) == tuple(size) and (t.numel() <= 1 or all(
            n == 1 or s == e for n, s, e in zip(size, t.stride(), stride))):
        return t
    out = torch.empty_strided(tuple(size), tuple(stride), dtype=t.dtype, device=t.device)
    out.copy_(t)
    return out


def check_donated_inputs(graph: str) -> None:
    """Raises unless this backward runs once: it writes over saved tensors AOTAutograd donated
    (capture/donated_inputs.py), which a retained graph would read again. AOTAutograd checks
    the same before each backward while ``torch._functorch.config.donated_buffer`` is on; this
    holds if the flag was turned off after the graph compiled."""
    keep = getattr(torch._C._autograd, "_get_current_graph_task_keep_graph", None)
    if keep is not None and keep():
        raise RuntimeError(
            f"Solder: {graph} writes over the tensors its forward saved (AOTAutograd donated "
            "them), so it runs once per forward: call backward() without retain_graph=True or "
            "create_graph=True, or set torch._functorch.config.donated_buffer = False before "
            "compiling")


def _as_strided_by_increment(t, size, stride, offset_increment=0):
    return torch.as_strided(t, size, stride, t.storage_offset() + offset_increment)


# A view by size, strides and storage-offset increment. torch's C++ helper skips autograd's view
# bookkeeping (half the host time of as_strided); the wrappers only view tensors they pass on
# to library calls and kernels inside a compiled graph, where nothing records gradients.
_guards = getattr(getattr(torch._C, "_dynamo", None), "guards", None)
reinterpret = getattr(_guards, "_reinterpret_tensor", None) or _as_strided_by_increment


def draw_seeds(n: int, device) -> list[int]:
    """Seeds for the graph's random ops, drawn from torch's default generator: a given
    ``torch.manual_seed`` reproduces the same numbers (which differ from eager's stream)."""
    return torch.randint(0, 2**31 - 1, (n,), dtype=torch.int64).tolist()


# ATen ops that wrappers call, through torch's Python bindings: an OpOverload's ``__call__``
# adds about half a microsecond of host time to every call.
_aten = torch.ops.aten
FAST_CALLABLES = {
    _aten.mm.default: torch.mm, _aten.mm.out: torch.mm, _aten.bmm.default: torch.bmm,
    _aten.bmm.out: torch.bmm, _aten.addmm.default: torch.addmm,
    _aten.baddbmm.default: torch.baddbmm, _aten.convolution.default: torch.convolution,
}


def fast_callable(op):
    return FAST_CALLABLES.get(op, op)
