"""Library calls: matmul (cuBLAS), convolution (cuDNN) and attention (flash / memory-efficient /
cuDNN). The wrapper calls the ATen op on buffers; the pointwise work around a call is fused into
Solder's kernels that produce its inputs and consume its outputs."""
from __future__ import annotations

import sympy
import torch

from ..ir import expr as E
from ..ir.nodes import BufferArg, ExternBuffer, Layout
from .registry import Call, lowering
from ..ir.values import Stored, TensorValue, Virtual

aten = torch.ops.aten

# CUDA attention kernels read their operands with a unit stride along the last dimension, and
# the memory-efficient and cuDNN ones read the bias in 16-byte-aligned rows: "(*bias): last
# dimension must be contiguous" otherwise. Eager's SDPA pads the bias before the call; a view
# Solder folds (an expand of a [B, H, L, 1] mask, a slice of a pad) can lose that layout.
CUDA_ATTENTION_OPS = {
    aten._scaled_dot_product_flash_attention.default,
    aten._scaled_dot_product_flash_attention_backward.default,
    aten._scaled_dot_product_efficient_attention.default,
    aten._scaled_dot_product_efficient_attention_backward.default,
    aten._scaled_dot_product_cudnn_attention.default,
    aten._scaled_dot_product_cudnn_attention_backward.default,
}
BIAS_ALIGN = 16   # elements: 16 bytes or more for every dtype

EXTERN_OPS = [
    aten.mm.default, aten.bmm.default, aten.addmm.default, aten.baddbmm.default,
    aten.convolution.default, aten.convolution_backward.default,
    *sorted(CUDA_ATTENTION_OPS, key=str),
    aten._scaled_dot_product_flash_attention_for_cpu.default,
    aten._scaled_dot_product_flash_attention_for_cpu_backward.default,
]


# Library calls that can write into storage the wrapper hands them (a dead buffer of the same
# size, see codegen/memory_plan.py) instead of allocating their result.
OUT_VARIANTS = {aten.mm.default: aten.mm.out, aten.bmm.default: aten.bmm.out}

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
    on_gpu = call.graph.target.lowers_as_gpu(call.device)
    if call.node.target is aten.convolution.default and on_gpu and len(args) == 9 \
            and not kwargs and isinstance(args[2], TensorValue):
        return _convolution_then_bias(call, *args)
    if call.node.target in CUDA_ATTENTION_OPS and on_gpu:
        args, kwargs = _attention_operands(call, args, kwargs)
    return call.graph.extern_call(call.node, call.node.target, args, kwargs, "extern")


def _convolution_then_bias(call: Call, x, w, bias, *rest):
    """cuDNN's convolution without its bias, and the bias added in Solder's kernel that reads
    the result (a LayerNorm, a residual add). Eager does the same two steps on CUDA, the add as
    a separate ATen kernel: rounded convolution result plus bias, in float32, rounded once.
    ConvNeXt-tiny on the H200 spent 0.44 ms of its 4.3 ms in 22 such adds."""
    out = call.graph.extern_call(call.node, call.node.target, (x, w, None, *rest), {}, "extern")
    dtype = call.dtype
    comp = torch.float32 if dtype in (torch.float16, torch.bfloat16) else dtype

    def fn(idx):
        total = E.call("add", E.cast(out.load(idx), comp), E.cast(bias.load([idx[1]]), comp),
                       dtype=comp)
        return E.cast(total, dtype)
    return Virtual(call.size, dtype, call.device, fn, stride=call.stride)


def _attention_operands(call: Call, args, kwargs):
    """Every tensor operand with a unit last stride; the bias also in aligned rows."""
    names = [a.name for a in call.node.target._schema.arguments]

    def fix(name, v):
        if not isinstance(v, TensorValue):
            return v
        return _aligned_bias(call, v) if name == "attn_bias" else _unit_last_stride(call, v)
    args = tuple(fix(n, v) for n, v in zip(names, args))
    return args, {k: fix(k, v) for k, v in kwargs.items()}


def _unit_last_stride(call: Call, v: TensorValue) -> TensorValue:
    s = call.graph.realize(v)
    if not s.size or _is_one(s.size[-1]) or s.layout.stride[-1] == 1:
        return s
    return call.graph.compute(s.size, s.dtype, s.device, s.load)


def _aligned_bias(call: Call, v: TensorValue) -> TensorValue:
    """The bias as ``v`` if its layout is fit, else a copy whose rows are padded to
    ``BIAS_ALIGN`` elements; leading dimensions ``v`` broadcasts (stride 0) stay broadcast, so
    a [1, 1, L, S] mask expanded over batch and heads is stored once, not per head."""
    g = call.graph
    size = list(v.size)
    if isinstance(v, Stored):
        stride = list(v.layout.stride)
        if _fit_bias(size, stride, v.layout.offset):
            return v
    else:   # not in memory yet: stored once, straight into the padded layout
        stride = list(v.stride)
    broadcast = [i for i, (n, st) in enumerate(zip(size[:-1], stride[:-1]))
                 if st == 0 and not _is_one(n)]   # the last dimension is read with stride 1
    stored = [sympy.Integer(1) if i in broadcast else n for i, n in enumerate(size)]
    last = stored[-1]
    padded = last
    if isinstance(last, sympy.Integer) and int(last) % BIAS_ALIGN:
        padded = sympy.Integer(-(-int(last) // BIAS_ALIGN) * BIAS_ALIGN)
    full = stored[:-1] + [padded]
    if padded == last:
        body = v.load
    else:
        inside = lambda idx: E.call("lt", E.index_value(idx[-1]),  # noqa: E731
                                    E.index_value(last), dtype=torch.bool)
        body = lambda idx: E.call("where", inside(idx),  # noqa: E731
                                  E.with_mask(v.load(idx), inside(idx)),
                                  E.const(0, v.dtype), dtype=v.dtype)
    buf = g.compute(full, v.dtype, v.device, body)
    strides = list(buf.layout.stride)
    view_strides = [sympy.Integer(0) if i in broadcast else st for i, st in enumerate(strides)]
    return buf.view(size, view_strides, 0)


def _fit_bias(size, stride, offset) -> bool:
    if size and not _is_one(size[-1]) and stride[-1] != 1:
        return False
    if not (isinstance(offset, sympy.Integer) and int(offset) % BIAS_ALIGN == 0):
        return False
    for n, st in zip(size[:-1], stride[:-1]):
        if _is_one(n) or st == 0:
            continue
        if not (isinstance(st, sympy.Integer) and int(st) % BIAS_ALIGN == 0):
            return False
    return True


def _is_one(n) -> bool:
    return isinstance(n, (int, sympy.Integer)) and int(n) <= 1


# A padded product that only leaves the graph is computed in this many blocks of rows: the
# scratch block is an eighth of the result (GPT-2's logits: 49 MiB beside 393)
PADDED_OUTPUT_BLOCKS = 8
_RESHAPES = {aten.view.default, aten._unsafe_view.default, aten.reshape.default}


def _only_returned(node) -> bool:
    """Whether ``node``'s value reaches nothing but the graph's outputs (through reshapes)."""
    users = list(node.users)
    if not users:
        return False
    for u in users:
        if u.op == "output":
            continue
        if u.op != "call_function" or u.target not in _RESHAPES or not _only_returned(u):
            return False
    return True


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
    if threshold < 0 or not call.graph.target.lowers_as_gpu(call.device):
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
    if _only_returned(call.node):
        # eager's layout is what leaves the graph: the product in blocks of rows, each copied
        # into the result, rather than whole and then copied (both alive at once)
        from ..runtime.library_ops import MM_PADDED_ROWS
        layout = Layout((sympy.Integer(m), N), (N, sympy.Integer(1)), sympy.Integer(0),
                        call.dtype, call.device)
        chunk = -(-m // PADDED_OUTPUT_BLOCKS)
        out = ExternBuffer(g.new_name(), layout, op=MM_PADDED_ROWS,
                           args=(g.as_arg(a), g.as_arg(bp), n, chunk), kind="extern")
        g.add_buffer(out)
        return Stored(out.name, layout)
    layout = Layout((sympy.Integer(m), sympy.Integer(n_pad)), (sympy.Integer(n_pad), sympy.Integer(1)),
                    sympy.Integer(0), call.dtype, call.device)
    out = ExternBuffer(g.new_name(), layout, op=aten.mm.default,
                       args=(g.as_arg(a), g.as_arg(bp)), kind="extern")
    g.add_buffer(out)
    return Stored(out.name, layout).view([sympy.Integer(m), sympy.Integer(n)],
                                         [sympy.Integer(n_pad), sympy.Integer(1)], 0)
