"""Library calls: matmul (cuBLAS), convolution (cuDNN) and attention (flash / memory-efficient /
cuDNN). The wrapper calls the ATen op on buffers; the pointwise work around a call is fused into
Solder's kernels that produce its inputs and consume its outputs."""
from __future__ import annotations

import torch

from .registry import Call, lowering

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


@lowering(*EXTERN_OPS)
def _extern(call: Call, *args, **kwargs):
    return call.graph.extern_call(call.node, call.node.target, args, kwargs, "extern")
