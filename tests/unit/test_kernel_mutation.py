"""Mutation analysis of user Triton kernels (solder/capture/kernel_mutation.py).

The analysis reads source only, so these tests pass with interpreted kernels (no GPU) and with
real JITFunctions (GPU machine); the test that runs kernels uses the interpreter or CUDA.
tests/conftest.py sets TRITON_INTERPRET=1 where there is no GPU (never here: on a GPU machine it
would turn every kernel the process defines afterwards, Solder's included, into an interpreted one).
"""
import gc
import importlib.util
import sys
import textwrap
import time
import weakref

import pytest
import torch
import triton
import triton.language as tl
from triton import language as lang
from triton.language import atomic_add as tl_atomic_add
from triton.language import store as tl_store
from triton.language.extra import libdevice

from solder.capture import kernel_mutation as km
from solder.capture.kernel_mutation import (KernelWrites, analyze_kernel_writes,
                                            describe_writes, unwrap_kernel)

# --- kernels: precise results ---------------------------------------------------------------


@triton.jit
def add_kernel(x_ptr, y_ptr, out_ptr, n_elements, BLOCK: tl.constexpr):
    pid = tl.program_id(axis=0)
    offs = pid * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n_elements
    x = tl.load(x_ptr + offs, mask=mask)
    y = tl.load(y_ptr + offs, mask=mask)
    tl.store(out_ptr + offs, x + y, mask=mask)


@triton.jit
def softmax_kernel(out_ptr, in_ptr, in_stride, out_stride, n_cols, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    row_start = in_ptr + row * in_stride
    cols = tl.arange(0, BLOCK)
    x = tl.load(row_start + cols, mask=cols < n_cols, other=-float("inf"))
    x = x - tl.max(x, axis=0)
    num = tl.exp(x)
    y = num / tl.sum(num, axis=0)
    out_row = out_ptr + row * out_stride
    tl.store(out_row + cols, y.to(out_ptr.dtype.element_ty), mask=cols < n_cols)


@triton.jit
def rmsnorm_kernel(x_ptr, w_ptr, y_ptr, rstd_ptr, stride, n_cols, eps, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    x_ptr += row * stride
    y_ptr += row * stride
    cols = tl.arange(0, BLOCK)
    mask = cols < n_cols
    x = tl.load(x_ptr + cols, mask=mask, other=0.0).to(tl.float32)
    var = tl.sum(x * x, axis=0) / n_cols
    rstd = 1 / tl.sqrt(var + eps)
    tl.store(rstd_ptr + row, rstd)
    w = tl.load(w_ptr + cols, mask=mask)
    tl.store(y_ptr + cols, x * rstd * w, mask=mask)


@triton.jit
def matmul_kernel(a_ptr, b_ptr, c_ptr, M, N, K, stride_am, stride_ak, stride_bk, stride_bn,
                  stride_cm, stride_cn, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
                  BLOCK_K: tl.constexpr):
    pid_m = tl.program_id(0)
    pid_n = tl.program_id(1)
    offs_m = (pid_m * BLOCK_M + tl.arange(0, BLOCK_M)) % M
    offs_n = (pid_n * BLOCK_N + tl.arange(0, BLOCK_N)) % N
    offs_k = tl.arange(0, BLOCK_K)
    a_ptrs = a_ptr + (offs_m[:, None] * stride_am + offs_k[None, :] * stride_ak)
    b_ptrs = b_ptr + (offs_k[:, None] * stride_bk + offs_n[None, :] * stride_bn)
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k in range(0, tl.cdiv(K, BLOCK_K)):
        a = tl.load(a_ptrs, mask=offs_k[None, :] < K - k * BLOCK_K, other=0.0)
        b = tl.load(b_ptrs, mask=offs_k[:, None] < K - k * BLOCK_K, other=0.0)
        acc = tl.dot(a, b, acc)
        a_ptrs += BLOCK_K * stride_ak
        b_ptrs += BLOCK_K * stride_bk
    c_ptrs = c_ptr + stride_cm * offs_m[:, None] + stride_cn * offs_n[None, :]
    tl.store(c_ptrs, acc.to(tl.float16), mask=(offs_m[:, None] < M) & (offs_n[None, :] < N))


@triton.jit
def scatter_add_kernel(idx_ptr, src_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    idx = tl.load(idx_ptr + offs, mask=mask, other=0)
    tl.atomic_add(out_ptr + idx, tl.load(src_ptr + offs, mask=mask), mask=mask)


@triton.jit
def all_atomics_kernel(a, b, c, d, e, f, g, h, ro_ptr):
    v = tl.load(ro_ptr)
    tl.atomic_max(a, v)
    tl.atomic_min(b + 1, v)
    tl.atomic_and(c, 1)
    tl.atomic_or(d, 1)
    tl.atomic_xor(e, 1)
    old = tl.atomic_xchg(f, v)
    tl.atomic_cas(g, 0, old)
    (h + 2 - 1).atomic_add(v)


@triton.jit
def block_ptr_kernel(in_ptr, out_ptr, M, N, stride_m, BM: tl.constexpr, BN: tl.constexpr,
                     TILES: tl.constexpr):
    src = tl.make_block_ptr(base=in_ptr, shape=(M, N), strides=(stride_m, 1), offsets=(0, 0),
                            block_shape=(BM, BN), order=(1, 0))
    dst = tl.make_block_ptr(out_ptr, (M, N), (stride_m, 1), (0, 0), (BM, BN), (1, 0))
    for _ in range(TILES):
        tile = tl.load(src, boundary_check=(0, 1))
        tl.store(dst, tile * 2, boundary_check=(0, 1))
        src = tl.advance(src, (0, BN))
        dst = dst.advance((0, BN))


@triton.jit
def tensor_desc_kernel(in_ptr, out_ptr, acc_ptr, M, N, BM: tl.constexpr, BN: tl.constexpr):
    d_in = tl.make_tensor_descriptor(in_ptr, shape=[M, N], strides=[N, 1], block_shape=[BM, BN])
    d_out = tl.make_tensor_descriptor(base=out_ptr, shape=[M, N], strides=[N, 1],
                                      block_shape=[BM, BN])
    d_acc = tl.make_tensor_descriptor(acc_ptr, [M, N], [N, 1], [BM, BN])
    x = d_in.load([0, 0])
    d_out.store([0, 0], x)
    d_acc.atomic_add([0, 0], x)


@triton.jit
def host_desc_kernel(in_desc, out_desc, other_desc, BM: tl.constexpr):
    x = in_desc.load([tl.program_id(0) * BM, 0])
    out_desc.store([tl.program_id(0) * BM, 0], x)
    tl.store_tensor_descriptor(other_desc, [0, 0], x)


@triton.jit
def _store_helper(dst, values, offs, mask):
    tl.store(dst + offs, values, mask=mask)


@triton.jit
def _row_pointer(base, row, stride):
    return base + row * stride


@triton.jit
def _nested_helper(p, q, offs):
    _store_helper(q, tl.load(p + offs), offs, offs < 4)


@triton.jit
def _store_first(t, v):
    tl.store(t[0], v)


@triton.jit
def _two_pointers(p, q):
    return p + 1, q


@triton.jit
def tuple_helper_kernel(x_ptr, y_ptr, out_ptr, out2_ptr, out3_ptr, ro_ptr):
    v = tl.load(ro_ptr)
    _store_first((out_ptr, out2_ptr), v)     # either element may be the first
    _store_first((out3_ptr,) * 2, v)
    a, b = _two_pointers(x_ptr, y_ptr)       # unpacking a call result: both may be either
    tl.store(a, v)


@triton.jit
def helper_kernel(x_ptr, out_ptr, out2_ptr, out3_ptr, stride, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    x = tl.load(_row_pointer(x_ptr, 0, stride) + offs)
    _store_helper(out_ptr, x, offs, offs < BLOCK)                  # positional
    _store_helper(values=x, mask=None, offs=offs, dst=out2_ptr)    # keywords
    _nested_helper(x_ptr, _row_pointer(out3_ptr, 1, stride), offs)


@triton.jit
def alias_kernel(x_ptr, y_ptr, out_ptr, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    p = x_ptr + offs
    v = tl.load(p)
    p = out_ptr + offs          # reassigned: x_ptr is only read
    alias = p
    tl.store(alias, v)
    a, b = out_ptr, y_ptr       # tuple unpacking binds pairwise
    tl.store(a + offs, tl.load(b + offs))


@triton.jit
def alias_union_kernel(x_ptr, y_ptr, z_ptr, w_ptr, r_ptr, flag, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    if flag > 0:
        p = x_ptr
    else:
        p = y_ptr
    tl.store(p + offs, tl.load(r_ptr + offs))           # either branch
    q = tl.where(offs < 2, z_ptr + offs, p + offs)
    tl.store(q, 1.0)
    t = (w_ptr + offs) if flag > 1 else (x_ptr + offs)
    tl.store(t, 2.0)


@triton.jit
def loop_carried_kernel(a_ptr, b_ptr, c_ptr, d_ptr, ro_ptr, n: tl.constexpr,
                        BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    v = tl.load(ro_ptr + offs)
    p = a_ptr
    for i in range(n):
        tl.store(p + offs, v)       # a_ptr first, b_ptr on later iterations
        p = b_ptr
    q = c_ptr
    i = 0
    while i < n:
        if i == 2:
            q = d_ptr
            break                    # d_ptr only reaches the store through the break
        q = c_ptr
        i += 1
    tl.store(q + offs, v)


@triton.jit
def continue_kernel(a_ptr, b_ptr, ro_ptr, n):
    r = a_ptr
    for i in range(n):
        tl.store(r, tl.load(ro_ptr))   # b_ptr arrives only through the continue
        if i == 0:
            r = b_ptr
            continue
        r = a_ptr


@triton.jit
def swap_kernel(a_ptr, b_ptr, ro_ptr, n):
    x, y = a_ptr, ro_ptr
    for _ in range(n):
        x, y = y, x                 # y's origins reach x on the second pass
    tl.store(x, 0.0)
    tl.store(b_ptr, tl.load(y))


@triton.jit
def alias_import_kernel(x_ptr, a_ptr, b_ptr, c_ptr, d_ptr):
    v = lang.load(x_ptr)
    lang.store(a_ptr, v)
    tl_store(b_ptr, v)
    tl_atomic_add(c_ptr, v)
    triton.language.store(d_ptr, v)


@triton.jit
def read_only_kernel(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    s = tl.sum(tl.load(x_ptr + offs) + tl.load(y_ptr + offs), axis=0)
    tl.device_assert(s == s)


@triton.jit
def _combine(a, b):
    return a + b


@triton.jit
def reduce_kernel(x_ptr, out_ptr, BLOCK: tl.constexpr):
    x = tl.load(x_ptr + tl.arange(0, BLOCK))
    tl.store(out_ptr, tl.reduce(x, 0, _combine))


@triton.jit
def tuple_kernel(ptrs, ro_ptr, out_ptr):
    v = tl.load(ro_ptr)
    tl.store(ptrs[0], v)
    for p in (out_ptr, out_ptr + 1):
        tl.store(p, v)


@triton.jit
def libdevice_kernel(x_ptr, y_ptr, eps, OUT_DTYPE: tl.constexpr):
    x = tl.load(x_ptr)
    y = libdevice.rsqrt(x + eps)                   # `eps` may be anything; math stays data
    tl.store(y_ptr, y.to(OUT_DTYPE))               # a cast of unknown dtype, stored as a value


@triton.jit
def tuple_repeat_kernel(x_ptr, ro_ptr):
    t = (x_ptr,) * 2                               # tuple * constexpr keeps its pointers
    tl.store(t[1], tl.load(ro_ptr))


@triton.jit
def int_offset_kernel(out_ptr, start, ro_ptr):
    # `start` could be the pointer and `out_ptr` the integer: source alone cannot tell.
    tl.store(out_ptr + start, tl.load(ro_ptr + 1))


@triton.jit
def for_else_kernel(a_ptr, b_ptr, ro_ptr, n):
    p = ro_ptr
    for i in range(n):
        if i == 3:
            continue
        p = a_ptr
    else:
        tl.store(p, 1.0)                           # ro_ptr when n == 0
    tl.store(b_ptr, tl.load(ro_ptr))


# --- kernels the analysis must give up on ----------------------------------------------------


@triton.jit
def inline_asm_kernel(x_ptr, y_ptr):
    x = tl.load(x_ptr)
    y = tl.inline_asm_elementwise("mov.b32 $0, $1;", "=r,r", [x], dtype=tl.int32, is_pure=True,
                                  pack=1)
    tl.store(y_ptr, y)


@triton.jit
def int_to_pointer_kernel(addrs_ptr, x_ptr):
    addr = tl.load(addrs_ptr)
    p = addr.to(tl.pointer_type(tl.float32))
    tl.store(p, tl.load(x_ptr))


@triton.jit
def unresolved_callee_kernel(x_ptr):
    not_defined_anywhere(x_ptr)  # noqa: F821


def _plain_python(p):
    return p


@triton.jit
def plain_callee_kernel(x_ptr):
    tl.store(_plain_python(x_ptr), 1.0)


@triton.jit
def getattr_kernel(x_ptr, y_ptr):
    f = getattr(x_ptr, "store")
    f(tl.load(y_ptr))


@triton.jit
def container_kernel(x_ptr, y_ptr):
    ptrs = [y_ptr]
    ptrs.append(x_ptr)
    tl.store(ptrs[1], 1.0)


@triton.jit
def subscript_store_kernel(x_ptr, y_ptr):
    t = (y_ptr, y_ptr)
    t[0] = x_ptr
    tl.store(t[0], 1.0)


@triton.jit
def unknown_method_kernel(x_ptr):
    q = x_ptr.some_future_method(3)
    tl.store(q, 1.0)


@triton.jit
def exec_kernel(x_ptr):
    exec("pass")
    tl.store(x_ptr, 1.0)


@triton.jit
def _recursive_helper(p, n):
    if n > 0:
        _recursive_helper(p, n - 1)
    tl.store(p, 1.0)


@triton.jit
def recursive_kernel(x_ptr, y_ptr):
    _recursive_helper(x_ptr, 3)


@triton.jit
def writes_via_unanalyzable_helper(x_ptr, y_ptr):
    inline_asm_kernel(x_ptr, y_ptr)


@triton.jit
def _writing_combine(a, b):
    tl.store(a, b)
    return a + b


@triton.jit
def writing_combine_kernel(x_ptr, y_ptr):
    tl.store(y_ptr, tl.reduce(tl.load(x_ptr + tl.arange(0, 4)), 0, _writing_combine))


@triton.jit
def lambda_kernel(x_ptr):
    f = lambda p: p  # noqa: E731
    tl.store(f(x_ptr), 1.0)


# --- tests ------------------------------------------------------------------------------------

PRECISE = [
    (add_kernel, {"out_ptr"}),
    (softmax_kernel, {"out_ptr"}),
    (rmsnorm_kernel, {"y_ptr", "rstd_ptr"}),
    (matmul_kernel, {"c_ptr"}),
    (scatter_add_kernel, {"out_ptr"}),
    (all_atomics_kernel, set("abcdefgh")),
    (block_ptr_kernel, {"out_ptr"}),
    (tensor_desc_kernel, {"out_ptr", "acc_ptr"}),
    (host_desc_kernel, {"out_desc", "other_desc"}),
    (helper_kernel, {"out_ptr", "out2_ptr", "out3_ptr"}),
    (tuple_helper_kernel, {"out_ptr", "out2_ptr", "out3_ptr", "x_ptr", "y_ptr"}),
    (alias_kernel, {"out_ptr"}),
    (alias_union_kernel, {"x_ptr", "y_ptr", "z_ptr", "w_ptr"}),
    (loop_carried_kernel, {"a_ptr", "b_ptr", "c_ptr", "d_ptr"}),
    (swap_kernel, {"a_ptr", "b_ptr", "ro_ptr"}),
    (continue_kernel, {"a_ptr", "b_ptr"}),
    (alias_import_kernel, {"a_ptr", "b_ptr", "c_ptr", "d_ptr"}),
    (read_only_kernel, set()),
    (reduce_kernel, {"out_ptr"}),
    (tuple_kernel, {"ptrs", "out_ptr"}),
    # A parameter added to a pointer may itself be the pointer: both count.
    (_store_helper, {"dst", "offs"}),
    (_nested_helper, {"q", "offs"}),
    (libdevice_kernel, {"y_ptr"}),
    (tuple_repeat_kernel, {"x_ptr"}),
    (int_offset_kernel, {"out_ptr", "start"}),
    (for_else_kernel, {"a_ptr", "b_ptr", "ro_ptr"}),
]


@pytest.mark.parametrize("kernel,expected", PRECISE, ids=[k.fn.__name__ for k, _ in PRECISE])
def test_precise_writes(kernel, expected):
    w = analyze_kernel_writes(kernel)
    assert w.certain, w.reason
    assert w.reason == ""
    assert w.written == frozenset(expected)


GIVE_UP = [
    (inline_asm_kernel, "inline assembly"),
    (int_to_pointer_kernel, "cast"),
    (unresolved_callee_kernel, "not_defined_anywhere"),
    (plain_callee_kernel, "_plain_python"),
    (getattr_kernel, "getattr"),
    (container_kernel, "append"),
    (subscript_store_kernel, "container"),
    (unknown_method_kernel, "some_future_method"),
    (exec_kernel, "exec"),
    (recursive_kernel, "recursive"),
    (writes_via_unanalyzable_helper, "inline assembly"),
    (writing_combine_kernel, "_writing_combine"),
    (lambda_kernel, "Lambda"),
]


@pytest.mark.parametrize("kernel,words", GIVE_UP, ids=[k.fn.__name__ for k, _ in GIVE_UP])
def test_gives_up(kernel, words):
    w = analyze_kernel_writes(kernel)
    assert not w.certain
    params = set(kernel.fn.__code__.co_varnames[:kernel.fn.__code__.co_argcount])
    assert w.written == frozenset(params)       # uncertain: every parameter counts as written
    assert kernel.fn.__name__ in w.reason and words in w.reason, w.reason
    assert "may write every tensor argument" in describe_writes(kernel)


def test_source_not_available():
    ns = {"tl": tl}
    exec("def made_by_exec(x_ptr):\n    tl.store(x_ptr, 1.0)\n", ns)
    try:
        kernel = triton.jit(ns["made_by_exec"])
    except Exception:   # JITFunction itself needs the source
        pytest.skip("this triton refuses kernels without source")
    w = analyze_kernel_writes(kernel)
    assert not w.certain and "source not available" in w.reason
    assert w.written == {"x_ptr"}


def test_autotune_and_heuristics_wrapping():
    wrapped = triton.heuristics({"BLOCK": lambda args: 64})(
        triton.autotune(configs=[triton.Config({}, num_warps=4)], key=["n_elements"])(
            triton.jit(add_kernel.fn)))
    assert unwrap_kernel(wrapped).fn is add_kernel.fn
    assert analyze_kernel_writes(wrapped) == KernelWrites(frozenset({"out_ptr"}), True, "")
    assert unwrap_kernel(add_kernel) is add_kernel


def test_real_jit_function_object():
    # What the GPU machine gets from @triton.jit; constructing one needs no GPU.
    from triton.runtime.jit import JITFunction
    jf = JITFunction(rmsnorm_kernel.fn)
    assert analyze_kernel_writes(jf).written == {"y_ptr", "rstd_ptr"}
    jf2 = JITFunction(helper_kernel.fn)
    assert analyze_kernel_writes(jf2).written == {"out_ptr", "out2_ptr", "out3_ptr"}


def test_patched_jit_source_is_reanalyzed():
    from triton.runtime.jit import JITFunction
    jf = JITFunction(add_kernel.fn)
    assert analyze_kernel_writes(jf).written == {"out_ptr"}
    jf._unsafe_update_src(jf.src.replace("tl.store(out_ptr + offs", "tl.store(x_ptr + offs"))
    assert analyze_kernel_writes(jf).written == {"x_ptr"}


def test_kernel_side_table():
    from torch._higher_order_ops.triton_kernel_wrap import kernel_side_table
    idx = kernel_side_table.add_kernel(matmul_kernel)
    assert analyze_kernel_writes(kernel_side_table.get_kernel(idx)).written == {"c_ptr"}


def test_not_a_kernel():
    w = analyze_kernel_writes(lambda x: x)
    assert not w.certain and "not a Triton kernel" in w.reason
    with pytest.raises(TypeError):
        unwrap_kernel(42)


def test_describe_writes():
    assert describe_writes(add_kernel) == "add_kernel writes out_ptr"
    assert describe_writes(read_only_kernel) == "read_only_kernel writes nothing"
    assert describe_writes(rmsnorm_kernel) == "rmsnorm_kernel writes rstd_ptr, y_ptr"


def _make_local_kernel():
    @triton.jit
    def local_kernel(src, dst, BLOCK: tl.constexpr):
        offs = tl.arange(0, BLOCK)
        tl.store(dst + offs, tl.load(src + offs))
    return local_kernel


def test_kernel_defined_inside_function_is_cached_weakly():
    k = _make_local_kernel()
    assert analyze_kernel_writes(k) == KernelWrites(frozenset({"dst"}), True, "")
    fn = k.fn
    assert fn in km._CACHE
    ref_fn, ref_kernel = weakref.ref(fn), weakref.ref(k)
    del k, fn
    gc.collect()
    assert ref_fn() is None and ref_kernel() is None


def test_closure_callee():
    @triton.jit
    def local_helper(p):
        tl.atomic_add(p, 1)

    @triton.jit
    def uses_closure(a_ptr, b_ptr):
        local_helper(b_ptr)
        tl.load(a_ptr)

    assert analyze_kernel_writes(uses_closure) == KernelWrites(frozenset({"b_ptr"}), True, "")


def test_fast_enough():
    for k in (matmul_kernel, helper_kernel, loop_carried_kernel):
        for f in (k.fn, _store_helper.fn, _row_pointer.fn, _nested_helper.fn):
            km._CACHE.pop(f, None)
        t = time.perf_counter()
        analyze_kernel_writes(k)
        assert time.perf_counter() - t < 0.010, k.fn.__name__


# --- running kernels: what they modify must be within `written` -------------------------------

def _device():
    if isinstance(add_kernel, triton.runtime.jit.JITFunction):
        if not torch.cuda.is_available():
            pytest.skip("compiled Triton kernels need a GPU (or TRITON_INTERPRET=1)")
        return "cuda"
    return "cpu"


def _modified(before, after):
    return {name for name in before if not torch.equal(before[name], after[name])}


def _run_and_check(kernel, grid, tensors, scalars):
    before = {k: v.clone() for k, v in tensors.items()}
    kernel[grid](**tensors, **scalars)
    changed = _modified(before, tensors)
    written = analyze_kernel_writes(kernel)
    assert written.certain
    assert changed <= written.written
    return changed, written.written


def test_running_kernels_modify_only_written_args():
    dev = _device()
    r = lambda *s: torch.randn(*s, device=dev)  # noqa: E731
    changed, written = _run_and_check(
        add_kernel, (2,), dict(x_ptr=r(16), y_ptr=r(16), out_ptr=r(16)),
        dict(n_elements=16, BLOCK=8))
    assert changed == written == {"out_ptr"}

    changed, written = _run_and_check(
        rmsnorm_kernel, (4,), dict(x_ptr=r(4, 8), w_ptr=r(8), y_ptr=r(4, 8), rstd_ptr=r(4)),
        dict(stride=8, n_cols=8, eps=1e-6, BLOCK=8))
    assert changed == written == {"y_ptr", "rstd_ptr"}

    changed, written = _run_and_check(
        scatter_add_kernel, (1,),
        dict(idx_ptr=torch.tensor([0, 2, 2, 1], device=dev), src_ptr=r(4), out_ptr=r(3)),
        dict(n=4, BLOCK=4))
    assert changed == written == {"out_ptr"}

    changed, written = _run_and_check(
        helper_kernel, (1,), dict(x_ptr=r(8), out_ptr=r(4), out2_ptr=r(4), out3_ptr=r(8)),
        dict(stride=4, BLOCK=4))
    assert changed == written == {"out_ptr", "out2_ptr", "out3_ptr"}

    changed, written = _run_and_check(
        block_ptr_kernel, (1,), dict(in_ptr=r(4, 8), out_ptr=r(4, 8)),
        dict(M=4, N=8, stride_m=8, BM=4, BN=4, TILES=2))
    assert changed == written == {"out_ptr"}

    if dev == "cuda":
        return   # Triton's compiler rejects `break` (its interpreter runs it): the rest is CPU-only
    changed, written = _run_and_check(
        loop_carried_kernel, (1,),
        dict(a_ptr=r(4), b_ptr=r(4), c_ptr=r(4), d_ptr=r(4), ro_ptr=r(4)), dict(n=3, BLOCK=4))
    assert changed == {"a_ptr", "b_ptr", "d_ptr"} and changed <= written


# --- soundness fuzz: random pointer shuffling, run, compare ----------------------------------

def _random_kernel_source(rnd, n_stmts, loop_exits=True):
    lines = ["    offs = tl.arange(0, 4)", "    v = tl.load(src_ptr + offs)",
             "    p0 = a_ptr", "    p1 = b_ptr", "    p2 = c_ptr"]
    blocks = []   # kinds of the open blocks ("for" / "if")
    for _ in range(n_stmts):
        i, j, k = rnd.randrange(3), rnd.randrange(3), rnd.randrange(3)
        pad = "    " * (len(blocks) + 1)
        choice = rnd.randrange(8)
        if choice == 0:
            lines.append(f"{pad}p{i} = p{j}")
        elif choice == 1:
            lines.append(f"{pad}p{i}, p{j} = p{j}, p{i}")
        elif choice == 2:
            lines.append(f"{pad}p{i} = tl.where(flag > {k}, p{j}, p{k})")
        elif choice == 3:
            lines.append(f"{pad}p{i} = p{j} if flag == {k} else p{i}")
        elif choice == 4:
            lines.append(f"{pad}tl.store(p{i} + offs, v)")
        elif choice == 5 and "for" in blocks and loop_exits:
            lines.append(f"{pad}if flag == {k}:")
            lines.append(f"{pad}    {rnd.choice(['break', 'continue'])}")
        elif choice == 6 and len(blocks) < 3:
            kind = rnd.choice(["for", "if"])
            lines.append(f"{pad}for it in range(TRIPS):" if kind == "for"
                         else f"{pad}if flag > {k}:")
            lines.append(f"{pad}    v = v + 1.0")
            blocks.append(kind)
        elif blocks:
            blocks.pop()
    lines.append(f"    tl.store(p{rnd.randrange(3)} + offs, v)")
    return ("def fuzz_kernel(a_ptr, b_ptr, c_ptr, src_ptr, flag, TRIPS: tl.constexpr):\n"
            + "\n".join(lines) + "\n")


def test_fuzz_soundness(tmp_path):
    import random
    dev = _device()
    rnd = random.Random(1234)
    # each case compiles 4 kernels on a GPU, whose compiler rejects break/continue
    for case in range(120 if dev == "cpu" else 8):
        path = tmp_path / f"fuzz_{case}.py"
        path.write_text("import triton\nimport triton.language as tl\n\n@triton.jit\n"
                        + _random_kernel_source(rnd, 16, loop_exits=dev == "cpu"))
        spec = importlib.util.spec_from_file_location(f"_solder_fuzz_{case}", path)
        mod = importlib.util.module_from_spec(spec)
        sys.modules[spec.name] = mod
        try:
            spec.loader.exec_module(mod)
            w = analyze_kernel_writes(mod.fuzz_kernel)
            assert w.certain, w.reason
            for flag in range(4):
                t = {n: torch.randn(4, device=dev)
                     for n in ("a_ptr", "b_ptr", "c_ptr", "src_ptr")}
                before = {n: x.clone() for n, x in t.items()}
                mod.fuzz_kernel[(1,)](**t, flag=flag, TRIPS=flag)
                changed = _modified(before, t)
                assert changed <= w.written, (path.read_text(), flag, changed, w.written)
            assert "src_ptr" not in w.written
        finally:
            del sys.modules[spec.name]
