"""Solder's decomposition table: what AOTAutograd rewrites into simpler ATen ops while tracing.

Core ATen's table, plus the composite ops (softmax, norms, dropout, embedding backward, ...) whose
parts Solder fuses better than a library kernel runs the whole, plus Solder's own for ops PyTorch
leaves whole (``put``: an ``index_put`` into the flattened tensor; ``index_reduce``: a
``scatter_reduce``; the backwards of the max pools with indices (2-D, 3-D, adaptive): a
``scatter_add``; ``replication_pad*d_backward``: ``index_add``s; ``addbmm``: a ``bmm`` and a
sum; ``grid_sampler_3d`` and both samplers' backwards: gathers and scatters, in
``grid_sample.py``). Ops kept whole are those that
lower to library calls (matmul, convolution, attention) or that Solder lowers directly.
"""
from __future__ import annotations

import torch
from torch._decomp import core_aten_decompositions, get_decompositions
from torch._prims_common import (compute_elementwise_output_logical_to_physical_perm,
                                  make_channels_last_strides_for, make_contiguous_strides_for,
                                  suggest_memory_format)

from .grid_sample import grid_sampler_3d, grid_sampler_backward
from .ranges import linspace

aten = torch.ops.aten

# decomposed on top of core ATen's table
EXTRA = [
    aten._softmax, aten._log_softmax, aten._softmax_backward_data,
    aten._log_softmax_backward_data, aten.native_layer_norm, aten.native_layer_norm_backward,
    aten.native_dropout, aten.native_dropout_backward, aten.embedding_dense_backward,
    aten.gelu, aten.gelu_backward, aten.silu, aten.silu_backward, aten.var_mean, aten.var,
    aten.std, aten.std_mean, aten.logsumexp, aten.rms_norm,
    aten.nll_loss_forward, aten.nll_loss_backward,
    aten.mse_loss, aten.mse_loss_backward, aten.hardswish, aten.hardsigmoid, aten.mish,
    aten.sigmoid_backward, aten.tanh_backward, aten.threshold_backward, aten.addcmul,
    aten.addcdiv, aten.lerp, aten.native_group_norm, aten.native_group_norm_backward,
    aten.native_batch_norm, aten._native_batch_norm_legit_functional,
    aten._native_batch_norm_legit_no_training, aten._native_batch_norm_legit,
    aten.native_batch_norm_backward,
    aten.leaky_relu, aten.leaky_relu_backward, aten.elu, aten.elu_backward, aten.softplus,
    aten.softplus_backward, aten.log_sigmoid_forward, aten.log_sigmoid_backward,
    # pointwise, reductions, gathers and copies of views in PyTorch's registered tables
    aten.linalg_vector_norm, aten.hardtanh, aten.dist, aten.addmv,
    aten.ldexp.Tensor, aten.as_strided_copy, aten.narrow_copy, aten.permute_copy,
    aten.view_copy, aten.unbind_copy.int, aten._adaptive_avg_pool2d,
    aten._batch_norm_with_update_functional,
    aten.batch_norm_backward, aten.exponential,
    aten.grid_sampler_2d,  # gathers and arithmetic (its backward: grid_sample.py)
    aten.adaptive_max_pool2d,  # global or evenly dividing windows: a max pool (else kept whole)
    aten.tril_indices, aten.triu_indices,  # closed forms over an arange (float64 sqrt)
]

# kept whole: they are library calls, or Solder lowers them itself
KEEP = [
    aten.addmm, aten.mm, aten.bmm, aten.baddbmm, aten.convolution,
    aten.convolution_backward, aten._scaled_dot_product_flash_attention,
    aten._scaled_dot_product_efficient_attention, aten._scaled_dot_product_cudnn_attention,
    aten.select_scatter,  # a region scatter (solder/lower/scatter.py), like slice_scatter
    aten.max_pool2d_with_indices, aten.max_pool3d_with_indices,  # read their windows in place
                                                                   # (solder/lower/pooling.py)
    aten._scaled_dot_product_flash_attention_for_cpu,
    aten._scaled_dot_product_flash_attention_for_cpu_backward,
]


def _put(self, index, source, accumulate=False):
    """``put``: a scatter into ``self`` read as one flat row-major array (negative indices from
    the end), written as the ``index_put`` Solder fuses; ``take``'s gradient is one. Laid out
    as eager's (a clone of ``self`` in its own format, written in place: a permuted input's
    result is permuted too; fuzz seed 901169)."""
    flat = self.reshape(-1)
    idx = index.reshape(-1)
    idx = torch.where(idx < 0, idx + flat.numel(), idx)
    out = aten.index_put(flat, [idx], source.reshape(-1), accumulate).reshape(self.shape)
    return _in_layout_of(out, self)


def _index_reduce(self, dim, index, source, reduce, include_self=True):
    """``index_reduce``: ``scatter_reduce`` with the index repeated across ``source`` (the same
    result for every reduce mode and ``include_self``)."""
    if source.dim() == 0:   # 0-d: one element, as a 1-d tensor of one
        out = _index_reduce(self.reshape(1), 0, index.reshape(1), source.reshape(1), reduce,
                            include_self)
        return out.reshape(self.shape)
    dim = dim % source.dim()
    shape = [1] * source.dim()
    shape[dim] = -1
    idx = index.reshape(shape).expand(source.shape)
    return aten.scatter_reduce.two(self, dim, idx, source, reduce, include_self=include_self)


def _scatter_to_plane(grad, input, indices, spatial: int):
    """Each output's gradient added at the input position its index names within its plane
    (a ``scatter_add``: windows may overlap): the gradient of every max pool with indices."""
    plane = 1
    for n in input.shape[-spatial:]:
        plane *= n
    g = grad.reshape(*grad.shape[:-spatial], -1)
    i = indices.reshape(*indices.shape[:-spatial], -1)
    out = grad.new_zeros(*input.shape[:-spatial], plane).scatter_add(-1, i, g)
    return out.reshape(input.shape)


def _adaptive_max_pool_backward(spatial: int):
    return lambda grad, input, indices: _scatter_to_plane(grad, input, indices, spatial)


def _pool_indices_backward(spatial: int):
    def backward(grad, input, kernel_size, stride, padding, dilation, ceil_mode, indices):
        return _scatter_to_plane(grad, input, indices, spatial)
    return backward


_ADDBMM_UNROLLED = 32   # batches added one at a time, in eager's order, up to this many


def _addbmm(self, batch1, batch2, beta=1, alpha=1):
    """beta * self + alpha * the sum over the batch of batch1 @ batch2 (``self`` is not read
    when beta is 0, as ATen's: NaN in it does not propagate). Eager adds one batch's product
    at a time into its result (an ``addmm_`` each, the first scaling ``self``): up to
    ``_ADDBMM_UNROLLED`` batches so does this, in that order (a sum over the batch first, then
    ``self``, was 1.7e-5 off a result of 0.05 on an OpInfo sample)."""
    products = aten.bmm(batch1, batch2)
    n = batch1.shape[0]
    if isinstance(n, int) and 0 < n <= _ADDBMM_UNROLLED:
        total = None if beta == 0 else (self * beta if beta != 1 else self)
        for b in range(n):
            term = products[b] * alpha if alpha != 1 else products[b]
            total = term if total is None else total + term
        shape = (batch1.shape[1], batch2.shape[2])
        return total.expand(shape).clone() if tuple(total.shape) != shape else total
    total = products.sum(0)
    if alpha != 1:
        total = total * alpha
    if beta == 0:
        return total.expand(self.shape).clone() if total.shape != self.shape else total
    return (self * beta if beta != 1 else self) + total


def _replication_pad_backward(spatial: int):
    def backward(grad_output, self, padding):
        """Each input element gathers the gradients of the output positions whose clamped source
        it is: per padded dimension (last first) an ``index_add`` of the output along it,
        indexed by the clamped position (negative padding crops: the same clamp)."""
        g = grad_output
        for k in range(spatial):
            dim = g.dim() - 1 - k
            before = padding[2 * k]
            size = self.shape[dim]
            src = torch.arange(g.shape[dim], device=g.device) - before
            src = src.clamp(0, size - 1)
            shape = list(g.shape)
            shape[dim] = size
            g = g.new_zeros(shape).index_add(dim, src, g)
        return g
    return backward


def _trilinear(i1, i2, i3, expand1, expand2, expand3, sumdim, unroll_dim=1):
    """``bilinear``'s core: the three operands broadcast against each other (each unsqueezed
    at its ``expand`` dims), multiplied and summed over ``sumdim``: one fused reduction."""
    for t, dims in ((0, expand1), (1, expand2), (2, expand3)):
        for d in sorted(dims):
            if t == 0:
                i1 = i1.unsqueeze(d)
            elif t == 1:
                i2 = i2.unsqueeze(d)
            else:
                i3 = i3.unsqueeze(d)
    product = i1 * i2 * i3
    return product.sum(list(sumdim)) if len(sumdim) else product


def _scalar_as(value, dtype: torch.dtype):
    """A Python scalar the way ATen converts it to ``dtype`` (``Scalar::to<scalar_t>``): to
    bool by truth, to an integer by truncation toward zero (PyTorch's reference decompositions
    refuse such a scalar where eager runs)."""
    if dtype == torch.bool:
        return bool(value)
    if not (dtype.is_floating_point or dtype.is_complex):
        return int(value)
    return value


def _addcmul(self, tensor1, tensor2, *, value=1):
    """``self + value * tensor1 * tensor2`` in the promoted dtype, ``value`` converted to it
    as ATen does (an integer tensor with ``value=0.5`` adds nothing)."""
    from torch._prims_common import ELEMENTWISE_TYPE_PROMOTION_KIND, elementwise_dtypes
    _, dtype = elementwise_dtypes(self, tensor1, tensor2,
                                  type_promotion_kind=ELEMENTWISE_TYPE_PROMOTION_KIND.DEFAULT)
    value = _scalar_as(value, dtype)
    # ATen computes a half type's addcmul in float32 and rounds once
    comp = torch.float32 if dtype in (torch.float16, torch.bfloat16) else dtype
    t1, t2 = tensor1.to(comp), tensor2.to(comp)
    return (self.to(comp) + value * t1 * t2).to(dtype)


def _xlogy_scalar_other(self, other):
    """``xlogy(x, 0.0123)``: the scalar in x's floating dtype, as ATen's kernel reads it (a
    bfloat16 x takes the log of 0.01232...)."""
    dtype = self.dtype if self.dtype.is_floating_point else torch.get_default_dtype()
    return aten.xlogy.Tensor(self, torch.scalar_tensor(other, dtype=dtype, device=self.device))


def _index_add(x, dim, index, source, *, alpha=1):
    """An accumulating ``index_put`` along ``dim``; ``alpha`` converted to ``x``'s dtype as
    ATen does (a bool tensor ORs in ``source`` where ``alpha`` is true; an integer one
    truncates it), and ``source`` kept in ``x``'s dtype (``bool * 2`` would be int64)."""
    dim = dim % max(x.dim(), 1)
    a = _scalar_as(alpha, x.dtype)
    if x.dtype == torch.bool:
        if not a:
            source = torch.zeros_like(source)
    elif a != 1:
        source = source * a
    source = source.to(x.dtype)
    if x.dim() == 0:
        out = aten.index_put(x.reshape(1), [index.reshape(-1)], source.reshape(-1), True)
        return out.reshape(())
    if source.dim() == 0:
        source = source.reshape(1)
    return aten.index_put(x, [None] * dim + [index.reshape(-1)], source, True).contiguous()


def _index_fill(x, dim, index, value):
    """``value`` stored at ``index`` along ``dim``: an ``index_put`` with the index in ``dim``'s
    place, ``value`` converted to ``x``'s dtype as ATen does. PyTorch's own decomposition (in
    torch 2.11) clones into an ``empty_permuted`` with a ``copy_``, which AOTAutograd then
    refuses as a mutation in a functional graph. Strides: those of ``x``'s clone, as
    eager's (``x``'s where it is dense, dense in its order of dims where it has gaps)."""
    torch._check(index.dim() <= 1,
                 lambda: f"Index should have dimension 1 or 0 (got {index.dim()})")
    if isinstance(value, torch.Tensor):
        torch._check(value.dim() == 0, lambda: "Only supports 0-dimensional value tensor. "
                     f"Got a tensor with {value.dim()} dimensions.")
        fill = value.to(device=x.device, dtype=x.dtype)
    else:
        fill = torch.scalar_tensor(value, dtype=x.dtype, device=x.device)
    if x.dim() == 0:
        return aten.index_put(x.reshape(1), [index.reshape(-1)], fill).reshape(()).clone()
    dim = dim % x.dim()
    # index_put's result is a clone that keeps x's order of dims, as eager's index_fill (a
    # clone of x, then the fill) does, gaps and overlap included; PyTorch's meta function
    # promises a contiguous result for those instead, which eager does not give (fuzz seeds
    # 418348, 418512). The strides of x's size-1 dims too, as the clone keeps them (473779)
    return _in_layout_of(aten.index_put(x, [None] * dim + [index.reshape(-1)], fill), x)


def _vector_norm(x, ord=2, dim=None, keepdim=False, *, dtype=None):
    """PyTorch's decomposition with ``dim`` made non-negative first: torch 2.11's compares
    dims with ``d not in dim`` when every reduced dim has size 1, so ``dim=-1`` of a (1,)
    tensor kept the dim (shape (1,) where eager's is ())."""
    if dim is not None:
        n = x.dim()
        dims = [dim] if isinstance(dim, int) else list(dim)
        dim = [d + n if n and -n <= d < 0 else d for d in dims]
    return _TORCH_VECTOR_NORM(x, ord, dim, keepdim, dtype=dtype)


def _moments(x, dim, correction, keepdim):
    """Variance and mean over ``dim``, two passes over ``x`` shifted by its first element
    along the reduced dims. Eager's Welford updates give a constant row a variance of exactly
    0 and its value as the mean; the plain two-pass (PyTorch's decomposition) rounds ``sum / n``
    away from the value, and the variance comes out tiny but not 0: a layer norm of a constant
    row off its bias, ``1 / var`` finite where eager's is inf. Shifted, a constant row is 0
    throughout, and an infinite element makes the mean NaN, as Welford's does (a single
    element is its own mean, infinite or not)."""
    n_dims = x.dim()
    dims = list(range(n_dims)) if dim is None or (not isinstance(dim, int) and len(dim) == 0) \
        else [d % max(n_dims, 1) for d in ([dim] if isinstance(dim, int) else dim)]
    corr = 1 if correction is None else correction
    low = x.dtype in (torch.float16, torch.bfloat16)
    xf = x.to(torch.float32) if low else x
    n = 1
    for d in dims:
        n = n * (x.shape[d] if n_dims else 1)
    if n_dims and not _known(n == 0) and not _known(n == 1):
        first = tuple(slice(0, 1) if d in dims else slice(None) for d in range(n_dims))
        shift = xf[first]
    else:
        shift = None
    dev = xf - shift if shift is not None else xf
    mean_dev = torch.sum(dev, dims, keepdim=True) / n
    var = torch.sum((dev - mean_dev) ** 2, dims, keepdim=keepdim) / torch.sym_max(n - corr, 0)
    mean = mean_dev + shift if shift is not None else mean_dev
    if shift is not None:
        # a row holding an infinity: Welford's mean is NaN wherever the infinity is followed
        # by another update (always across CUDA's partial rows), not the sum's +-inf
        mean = torch.where(torch.isinf(mean_dev), float("nan"), mean)
    if not keepdim:
        mean = mean.squeeze(dims) if dims else mean
    return var, mean     # (in float32 for half inputs: a std takes its root before rounding)


def _rounded(x, *values):
    """Values computed in float32 for a half-precision ``x``, rounded to its dtype."""
    if x.dtype in (torch.float16, torch.bfloat16):
        return tuple(v.to(x.dtype) for v in values)
    return values


def _known(cond) -> bool:
    """A size condition known to hold (False where a symbolic size leaves it open)."""
    try:
        from torch.fx.experimental.symbolic_shapes import guard_or_false
        return guard_or_false(cond)
    except ImportError:
        return bool(cond)


def _real_only(overload, own, theirs):
    """Solder's decomposition for real tensors, PyTorch's for complex ones; for each overload
    (``unbiased`` is a correction of 1 or 0)."""
    name = overload._overloadname

    def decompose(x, *args, **kwargs):
        if x.is_complex():
            return theirs(x, *args, **kwargs)
        if name == "default":         # (x, unbiased=True)
            unbiased = args[0] if args else kwargs.get("unbiased", True)
            return own(x, None, int(unbiased), False)
        if name == "dim":             # (x, dim, unbiased=True, keepdim=False)
            params = dict(zip(("dim", "unbiased", "keepdim"), args), **kwargs)
            return own(x, params.get("dim"), int(params.get("unbiased", True)),
                       params.get("keepdim", False))
        dim = args[0] if args else kwargs.get("dim")   # correction: (x, dim=None, *, ...)
        return own(x, dim, kwargs.get("correction"), kwargs.get("keepdim", False))
    return decompose


def _var_mean(x, dim, correction, keepdim):
    return _rounded(x, *_moments(x, dim, correction, keepdim))


def _var(x, dim, correction, keepdim):
    return _rounded(x, _moments(x, dim, correction, keepdim)[0])[0]


def _std(x, dim, correction, keepdim):
    # the root in float32: a float16 variance of 5e7 is inf, its std 7071
    return _rounded(x, torch.sqrt(_moments(x, dim, correction, keepdim)[0]))[0]


def _std_mean(x, dim, correction, keepdim):
    var, mean = _moments(x, dim, correction, keepdim)
    return _rounded(x, torch.sqrt(var), mean)


def _log_softmax(x, dim, half_to_float):
    """Eager's CPU kernel for a float16/bfloat16 log_softmax over the last dim rounds the row's
    sum of exponentials and its log to the input's dtype before the subtraction (its scratch
    row is of that dtype): [-2, 5] in bfloat16 gives [-7, 0], where the sum in float32 gives
    [-7, -0.000911] (fuzz seed 531837; every element of random rows matches this formula).
    Over other dims, on other devices and in float32, PyTorch's decomposition (no rounding)."""
    nd = max(x.dim(), 1)
    if (x.device.type != "cpu" or half_to_float or x.dtype not in (torch.float16, torch.bfloat16)
            or dim % nd != nd - 1 or x.numel() == 0):
        return _PYTORCH_LOG_SOFTMAX(x, dim, half_to_float)
    xf = x.contiguous().to(torch.float32)
    shifted = xf - torch.amax(xf, dim, keepdim=True)
    row_sum = torch.sum(torch.exp(shifted), dim, keepdim=True).to(x.dtype).to(torch.float32)
    log_sum = torch.log(row_sum).to(x.dtype).to(torch.float32)
    return (shifted - log_sum).to(x.dtype)


_PYTORCH_LOG_SOFTMAX = get_decompositions([aten._log_softmax])[aten._log_softmax.default]


def _native_group_norm(input, weight, bias, batch, channels, inner, groups, eps):
    """The statistics as PyTorch's decomposition has them, but on the CPU ``rstd = 1 / sqrt(var
    + eps)`` in float64 as eager's kernel computes it (``rsqrt`` in float32 is a unit off for a
    constant group: 316.22778 against eager's 316.22775); and the output as eager computes it
    (CPU and CUDA): ``a = rstd * weight`` and ``b = bias - a * mean`` per channel, then one fused
    multiply-add ``x * a + b`` per element; without weight and bias ``(x - mean) * rstd``, as
    eager's kernel has it (a constant group is then exactly 0, seed 552677). PyTorch's
    ``(x - mean) * rstd * weight + bias`` rounds elsewhere (one unit apart on 375 of 1200
    random elements given eager's statistics, none with these formulas), and a constant
    group's output a unit off a clamp's bound flipped the clamp's gradient mask (seed 533279)."""
    torch._check(input.ndim >= 2, lambda: "group_norm expects at least 2 dimensions")
    torch._check(channels % groups == 0,
                 lambda: f"group_norm: {channels} channels in {groups} groups")
    acc = torch.float64 if input.dtype == torch.float64 else torch.float32
    per_group = [batch, groups, channels // groups, inner]
    var, mean = torch.var_mean(input.to(acc).reshape(per_group), dim=[2, 3], unbiased=False,
                               keepdim=True)
    if input.device.type == "cpu":
        rstd = (1 / torch.sqrt(var.to(torch.float64) + eps)).to(acc)
    else:   # (CUDA's kernel: rsqrt in its accumulation type)
        rstd = torch.rsqrt(var + eps)
    stats = (mean.to(input.dtype).reshape(batch, groups),
             rstd.to(input.dtype).reshape(batch, groups))
    if weight is None and bias is None:
        y = (input.to(acc).reshape(per_group) - mean) * rstd
        return (y.reshape(input.shape).to(input.dtype), *stats)
    a = rstd.expand(batch, groups, channels // groups, 1)
    if weight is not None:
        a = a * weight.to(acc).reshape(1, groups, channels // groups, 1)
    if bias is not None:
        b = _fused_multiply_add(-a, mean, bias.to(acc).reshape(1, groups, channels // groups, 1))
    else:
        b = -a * mean
    per_channel = [batch, channels] + [1] * (input.dim() - 2)
    y = _fused_multiply_add(input.to(acc), a.reshape(per_channel), b.reshape(per_channel))
    return (y.to(input.dtype), *stats)


_PYTORCH_LAYER_NORM = get_decompositions([aten.native_layer_norm])[aten.native_layer_norm.default]


def _native_layer_norm(input, normalized_shape, weight, bias, eps):
    """On the CPU in float16/bfloat16, eager's kernel: ``rstd = 1 / sqrt(var + eps)`` in
    float32, then one fused multiply-add ``x * rstd + (-rstd * mean)`` (a constant row of 10000
    in float16 is 0.082 there, the product's rounding error, where ``(x - mean) * rstd`` is 0:
    fuzz seed 591323), then ``* weight + bias`` (every element of random and constant rows
    matches, given eager's statistics). Elsewhere PyTorch's decomposition: eager's float32 CPU
    kernel computes ``(x - mean) * rstd`` too (its weight and bias in one fused multiply-add,
    a unit apart at most), and CUDA's kernel computes in float32 with rsqrt."""
    if input.device.type != "cpu" or input.dtype not in (torch.float16, torch.bfloat16) \
            or input.numel() == 0:
        return _PYTORCH_LAYER_NORM(input, normalized_shape, weight, bias, eps)
    torch._check(len(normalized_shape) >= 1 and input.dim() >= len(normalized_shape)
                 and tuple(input.shape[input.dim() - len(normalized_shape):])
                 == tuple(normalized_shape),
                 lambda: f"layer_norm: normalized_shape {list(normalized_shape)} against input "
                         f"of size {list(input.shape)}")
    dims = list(range(input.dim() - len(normalized_shape), input.dim()))
    x = input.contiguous().to(torch.float32)
    var, mean = torch.var_mean(x, dim=dims, unbiased=False, keepdim=True)
    rstd = 1 / torch.sqrt(var + eps)
    y = _fused_multiply_add(x, rstd, -rstd * mean)
    if weight is not None:
        y = y * weight.to(torch.float32)
    if bias is not None:
        y = y + bias.to(torch.float32)
    return y.to(input.dtype), mean.to(input.dtype), rstd.to(input.dtype)


def _fused_multiply_add(p, q, s):
    """p * q + s rounded once, as a compiler's fma gives it: in float64 for float32 values (the
    product is exact there; the sum's double rounding differs from one rounding only at ties
    of a tie), with the split products of ``ranges._fma`` for float64."""
    if p.dtype == torch.float64:
        from .ranges import _fma
        return _fma(p, q, s)
    wide = torch.float64
    return (p.to(wide) * q.to(wide) + s.to(wide)).to(p.dtype)


def _repeat(self, repeats):
    """Each dim tiled ``r`` times: a view with a size-``r`` axis before each dim, expanded and
    copied contiguously, then merged. Eager's result is contiguous; PyTorch's decomposition
    copies the expanded axes in another order and permutes them, which leaves a transposed
    layout where eager's is contiguous (``x.repeat(1, 1, 2)`` of a (2, 1) tensor)."""
    reps = list(repeats)
    lead = len(reps) - self.dim()
    x = self.reshape([1] * lead + list(self.shape))
    interleaved, tiled, out = [], [], []
    for r, n in zip(reps, x.shape):
        interleaved += [1, n]
        tiled += [r, n]
        out.append(r * n)
    return x.reshape(interleaved).expand(tiled).clone(
        memory_format=torch.contiguous_format).reshape(out)


def _in_input_format(decomposition, batch_norm=False):
    """``decomposition`` with its result (or its first result) laid out as eager's kernels lay
    it out. Eager's adaptive average pool and batch norms on the CPU follow the input's
    suggested memory format (channels-last in, channels-last out; contiguous for a transposed
    input); the CUDA batch norms keep the input's layout (a transposed input gives a transposed
    result: ``empty_like``'s rule; fuzz seeds 451958, 452421 on an H100). PyTorch's
    decompositions do neither (the mean of gathered windows is contiguous, fuzz seed 271025; a
    batch norm's arithmetic keeps a transposed input's strides even where eager's CPU kernel
    does not, and a later ``.view(-1)`` of it raised, seed 271053). A copy only where the
    layouts differ."""
    def in_input_format(input, *args, **kwargs):
        out = decomposition(input, *args, **kwargs)
        first = out[0] if isinstance(out, (tuple, list)) else out
        if batch_norm and _lays_out_as_empty_like(input.device):
            first = _in_layout_of(first, input)
        else:
            # eager's kernels allocate the result with empty_like(input, fmt): the format's
            # own strides, size-1 dims' too (a later stack or cat picks its layout by them,
            # seed 540522)
            fmt = _cpu_batch_norm_format(input) if batch_norm else suggest_memory_format(input)
            strides = _strides_of_format(first.shape, fmt)
            if tuple(first.stride()) == strides:
                return out
            first = _laid_out(first, strides)
        return (first, *out[1:]) if isinstance(out, (tuple, list)) else first
    return in_input_format


def _cpu_batch_norm_format(t) -> torch.memory_format:
    """The memory format of eager's CPU batch norm result: contiguous for a contiguous input,
    channels-last for a channels-last contiguous one (both, where size-1 dims make both true:
    contiguous), else the input's suggested format (seed 540728: (1, 4, 2, 1) with strides
    (8, 1, 4, 1) is channels-last to the kernel, contiguous to ``suggest_memory_format``). With
    the format's own strides this matched every result of 5700 random permuted and sliced 4-d
    and 5-d inputs, size-1 dims' strides included, in training and eval."""
    if t.dim() not in (4, 5) or t.is_contiguous():
        return torch.contiguous_format
    channels_last = torch.channels_last if t.dim() == 4 else torch.channels_last_3d
    if t.is_contiguous(memory_format=channels_last):
        return channels_last
    return suggest_memory_format(t)


def _strides_of_format(shape, fmt) -> tuple:
    """The strides ``empty_like(x, memory_format=fmt)`` gives (size-1 dims' included)."""
    if fmt == torch.contiguous_format:
        return tuple(make_contiguous_strides_for(shape))
    return tuple(make_channels_last_strides_for(shape))


def _lays_out_as_empty_like(device) -> bool:
    """Whether eager's batch norms on ``device`` lay their result out as ``empty_like``."""
    return device.type == "cuda"


def _in_layout_of(t, like):
    """``t`` laid out as ``torch.empty_like(like)`` would be: ``like``'s dimension order,
    densely (``t`` itself where it already is): ``like``'s own strides where it is dense
    and does not overlap itself."""
    dims, step, dense = sorted((s, n) for n, s in zip(like.shape, like.stride()) if n != 1), 1, True
    for stride, size in dims:
        dense, step = dense and stride == step, step * size
    if dense:
        return _laid_out(t, like.stride())
    got = compute_elementwise_output_logical_to_physical_perm(like)
    order = tuple(got[0] if isinstance(got, tuple) and isinstance(got[0], (list, tuple))
                  else got)   # (torch 2.13 returns the order and a flag)
    target, step = [0] * like.dim(), 1
    for d in reversed(order):   # innermost first
        target[d] = step
        step = step * max(like.shape[d], 1)
    return _laid_out(t, target)


def _laid_out(t, strides):
    if tuple(t.stride()) == tuple(strides):
        return t
    if t.numel() == 0 or all(n == 1 or a == b for n, a, b in zip(t.shape, t.stride(), strides)):
        # only the strides of size-1 dims differ (or there are no elements): the same
        # addresses, a view. They are seen: a later cat or stack picks its layout by them
        # (fuzz seed 473779)
        return t.as_strided(t.shape, strides)
    # aten.copy, not copy_: a decomposition's in-place copy into a fresh tensor is a mutation
    # AOTAutograd refuses in a functional graph (fuzz seed 483290); copy's result is laid out
    # as its destination
    return aten.copy(t.new_empty_strided(t.shape, strides), t)


_TORCH_VECTOR_NORM = get_decompositions([aten.linalg_vector_norm])[aten.linalg_vector_norm.default]
_MOMENTS = {getattr(packet, name): (own, get_decompositions([packet])[getattr(packet, name)])
            for packet, own in ((aten.var_mean, _var_mean), (aten.var, _var),
                                (aten.std, _std), (aten.std_mean, _std_mean))
            for name in ("default", "dim", "correction")}

# Solder's own decompositions: ops PyTorch's tables leave whole (or get wrong)
OWN = {aten.put.default: _put, aten.addcmul.default: _addcmul, aten.repeat.default: _repeat,
       aten._log_softmax.default: _log_softmax,
       aten.native_group_norm.default: _native_group_norm,
       aten.native_layer_norm.default: _native_layer_norm,
       aten.xlogy.Scalar_Other: _xlogy_scalar_other,
       aten.index_add.default: _index_add,
       aten.linalg_vector_norm.default: _vector_norm,
       **{op: _real_only(op, own, theirs) for op, (own, theirs) in _MOMENTS.items()},
       aten.index_fill.int_Scalar: _index_fill, aten.index_fill.int_Tensor: _index_fill,
       aten.index_reduce.default: _index_reduce, aten.linspace.default: linspace,
       aten.adaptive_max_pool2d_backward.default: _adaptive_max_pool_backward(2),
       aten.adaptive_max_pool3d_backward.default: _adaptive_max_pool_backward(3),
       aten.max_pool2d_with_indices_backward.default: _pool_indices_backward(2),
       aten.max_pool3d_with_indices_backward.default: _pool_indices_backward(3),
       aten.addbmm.default: _addbmm, aten._trilinear.default: _trilinear,
       aten.grid_sampler_3d.default: grid_sampler_3d,
       aten.grid_sampler_2d_backward.default: grid_sampler_backward,
       aten.grid_sampler_3d_backward.default: grid_sampler_backward,
       aten.replication_pad1d_backward.default: _replication_pad_backward(1),
       aten.replication_pad2d_backward.default: _replication_pad_backward(2),
       aten.replication_pad3d_backward.default: _replication_pad_backward(3)}


# decompositions whose result takes eager's layout (``_in_input_format``)
_BATCH_NORMS = (aten.native_batch_norm.default, aten._native_batch_norm_legit_functional.default,
                aten._native_batch_norm_legit_no_training.default,
                aten._native_batch_norm_legit.default, aten._native_batch_norm_legit.no_stats,
                aten._batch_norm_with_update_functional.default)
_IN_INPUT_FORMAT = (aten._adaptive_avg_pool2d.default, *_BATCH_NORMS)


def solder_decompositions() -> dict:
    table = dict(core_aten_decompositions())
    table.update(get_decompositions(EXTRA))
    table.update(OWN)
    for op in _IN_INPUT_FORMAT:
        if op in table:
            table[op] = _in_input_format(table[op], batch_norm=op in _BATCH_NORMS)
    for packet in KEEP:
        for name in packet.overloads():
            table.pop(getattr(packet, name), None)
    return table
