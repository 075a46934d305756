"""Library calls: matmul (cuBLAS), convolution (cuDNN) and attention (flash / memory-efficient /
cuDNN). The wrapper calls the ATen op on buffers; the pointwise work around a call is fused into
Solder's kernels that produce its inputs and consume its outputs."""
from __future__ import annotations

import sympy
import torch

from ..ir import expr as E
from ..ir.nodes import BufferArg, ExternBuffer, Layout
from .registry import Call, lowering
from .tensors import Stored, TensorValue

aten = torch.ops.aten

EXTERN_OPS = [
    aten.mm.default, aten.bmm.default, aten.addmm.default, aten.baddbmm.default,
    aten.convolution.default, aten.convolution_backward.default,
    aten._scaled_dot_product_flash_attention.default,
    aten._scaled_dot_product_flash_attention_backward.default,
    aten._scaled_dot_product_efficient_attention.default,
    aten._scaled_dot_product_efficient_attention_backward.default,
    aten._scaled_dot_product_cudnn_attention.default,
    aten._scaled_dot_product_cudnn_attention_backward.default,
    aten._scaled_dot_product_flash_attention_for_cpu.default,
    aten._scaled_dot_product_flash_attention_for_cpu_backward.default,
]


# Library calls that can write into storage the wrapper hands them (a dead buffer of the same
# size, see codegen/memory_plan.py) instead of allocating their result.
OUT_VARIANTS = {aten.mm.default: aten.mm.out, aten.bmm.default: aten.bmm.out}

def _interpreting() -> bool:
    # under Triton's interpreter the CPU runs the same lowering as the GPU, so tests see it
    from ..codegen.scalar_ops import interpreting
    return interpreting()


def _aligned_columns(b: TensorValue, align: int) -> bool:
    """Whether ``b`` is in memory column by column with 16-byte-aligned columns."""
    if not isinstance(b, Stored):
        return False
    stride = b.layout.stride
    return stride[0] == 1 and stride[1] % align == 0 and b.layout.offset % align == 0


@lowering(*EXTERN_OPS)
def _extern(call: Call, *args, **kwargs):
    if call.node.target is aten.mm.default:
        padded = _padded_mm(call, *args)
        if padded is not None:
            return padded
    return call.graph.extern_call(call.node, call.node.target, args, kwargs, "extern")


def _padded_mm(call: Call, a: TensorValue, b: TensorValue):
    """``a @ b`` whose result rows are not 16-byte aligned (a vocabulary of 50257, say) sends
    cuBLAS to its slowest kernels: the result's row stride decides it, whatever the layout of
    ``b``. Multiply by ``b`` padded with zero columns instead and view the result without
    them. On an H200, GPT-2's LM head (``x @ w.t()``, 4096x768 by 768x50257, bf16) took 3.33
    ms unpadded (an align-1 CUTLASS kernel) and 0.47 ms padded. When ``b`` is the transpose of
    aligned rows (that LM head), the pad copies ``w``'s rows as they are stored, with zero
    rows after them, and the product reads its transpose: no transposing copy."""
    g = call.graph
    threshold = g.config.pad_mm_min_elements
    if threshold < 0 or (call.device.type != "cuda" and not _interpreting()):
        return None
    try:
        m, k, n = int(a.size[0]), int(a.size[1]), int(b.size[1])
    except TypeError:
        return None
    align = 16 // call.dtype.itemsize
    if n % align == 0 or m * n < threshold:
        return None
    n_pad = (n + align - 1) // align * align
    K, N, N_PAD = sympy.Integer(k), sympy.Integer(n), sympy.Integer(n_pad)
    inside = lambda idx: E.call("lt", E.index_value(idx[1]), E.index_value(N),  # noqa: E731
                                dtype=torch.bool)
    # the pad keeps b's order in memory: column-major b (w.t()) is padded as w's rows are stored
    stride = [sympy.Integer(1), K] if _aligned_columns(b, align) else None
    bp = g.compute([K, N_PAD], b.dtype, b.device,
                   lambda idx: E.call("where", inside(idx), E.with_mask(b.load(idx), inside(idx)),
                                      E.const(0, b.dtype), dtype=b.dtype), stride=stride)
    layout = Layout((sympy.Integer(m), sympy.Integer(n_pad)), (sympy.Integer(n_pad), sympy.Integer(1)),
                    sympy.Integer(0), call.dtype, call.device)
    out = ExternBuffer(g.new_name(), layout, op=aten.mm.default,
                       args=(g.as_arg(a), g.as_arg(bp)), kind="extern")
    g.add_buffer(out)
    return Stored(out.name, layout).view([sympy.Integer(m), sympy.Integer(n)],
                                         [sympy.Integer(n_pad), sympy.Integer(1)], 0)
