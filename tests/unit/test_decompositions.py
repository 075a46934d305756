"""Solder's own decomposition helpers, checked against eager on the CPU."""
import pytest
import torch


@pytest.mark.parametrize("make", [
    lambda: torch.randn(4, 4)[:, ::2].t(),                        # transposed, dense
    lambda: torch.randn(10, 2)[::2].permute(1, 0),                # permuted, not dense
    lambda: torch.randn(2, 4, 5, 3).permute(0, 3, 1, 2),          # channels-last
    lambda: torch.randn(3, 1).expand(3, 4),                       # expanded
    lambda: torch.randn(2, 3, 4).permute(2, 0, 1)[:, :, 1:],      # permuted, sliced
    lambda: torch.randn(0, 3).t(),                                # empty
    lambda: torch.randn(1, 2, 4).unfold(-1, 3, 1),                # overlapping (seed 452677)
    lambda: torch.randn(2, 2, 1).permute(1, 0, 2),                # size-1 dim (seed 452683)
    lambda: torch.randn(1, 6, 2, 2)[:, ::2].permute(0, 1, 3, 2),  # seed 454155
    lambda: torch.randn(2, 1, 2, 2).permute(1, 2, 0, 3),          # seed 454290
])
def test_a_cuda_batch_norm_result_takes_empty_likes_layout(make):
    # CUDA's batch norms lay the result out as ``empty_like(input)`` (fuzz seeds 451958,
    # 452421 on an H100); the CPU's in the input's suggested memory format
    from solder.capture.decompositions import _in_layout_of
    like = make()
    t = torch.randn(like.shape)
    got = _in_layout_of(t, like)
    assert got.stride() == torch.empty_like(like).stride()
    assert torch.equal(got, t)


@pytest.mark.parametrize("training", [True, False])
def test_the_cuda_layout_rule_traces_into_a_functional_graph(monkeypatch, training):
    # the copy into CUDA's layout happens inside a decomposition, under AOTAutograd's
    # functionalization: an in-place copy_ there is refused (fuzz seed 483290); the CUDA rule is
    # made the CPU's here so that the copy is traced on this machine
    from solder.capture import decompositions
    monkeypatch.setattr(decompositions, "_lays_out_as_empty_like", lambda device: True)

    def fn(a, w):
        return torch.nn.functional.batch_norm(a, torch.zeros(3), torch.ones(3), w, None,
                                              training=training) * 2

    base = torch.randn(4, 6)
    a = base[:, ::2]                              # (4, 3), strides (6, 2): gaps
    w = torch.randn(3, requires_grad=True)
    out = torch.compile(fn, backend="solder")(a, w)
    ref = fn(a, w)
    torch.testing.assert_close(out, ref)
    assert out.stride() == torch.empty_like(a).stride()     # CUDA's rule: (3, 1) here
    out.sum().backward()
    torch._dynamo.reset()


def test_a_layout_copy_inside_a_decomposition_is_functional():
    # a decomposition runs below AOTAutograd's functionalization: its copy into a tensor of
    # another layout must be the functional aten.copy (an in-place copy_ there was refused,
    # fuzz seed 483290)
    from torch._dynamo.backends.common import aot_autograd

    from solder.capture.decompositions import _laid_out
    aten = torch.ops.aten

    def cos_transposed(x):
        return _laid_out(aten.sin.default(x + 1.5707963267948966), (1, x.shape[0]))

    backend = aot_autograd(fw_compiler=lambda gm, _: gm,
                           decompositions={aten.cos.default: cos_transposed})
    x = torch.randn(3, 4, requires_grad=True)
    out = torch.compile(lambda x: torch.cos(x) * 2, backend=backend)(x)
    torch.testing.assert_close(out, torch.cos(x) * 2)
    assert out.stride() == (1, 3)
    out.sum().backward()
    torch._dynamo.reset()


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
@pytest.mark.parametrize("shape,dim", [((64, 7), -1), ((3, 5, 40), 2), ((40,), 0),
                                       ((64, 7), 0), ((3, 5, 40), 1)])
def test_a_half_log_softmax_rounds_as_eagers_cpu_kernel(dtype, shape, dim):
    # over the last dim eager's CPU kernel rounds the row's sum of exponentials and its log to
    # the input's dtype ([-2, 5] in bfloat16: [-7, 0], not [-7, -0.000911]; fuzz seed 531837);
    # over other dims it does not (there a sum in another order may round an element the
    # other way: compared within the dtype's tolerance)
    g = torch.Generator().manual_seed(0)
    x = (torch.randn(shape, generator=g, device="cpu") * 4).to(dtype)   # the CPU's kernel
    got = torch.compile(lambda x: torch.log_softmax(x, dim), backend="solder")(x)
    if dim % len(shape) == len(shape) - 1:
        assert torch.equal(got, torch.log_softmax(x, dim))
    else:
        torch.testing.assert_close(got, torch.log_softmax(x, dim))
    if dtype == torch.bfloat16 and len(shape) == 1:
        pair = torch.tensor([-2.0, 5.0], dtype=dtype, device="cpu")
        assert torch.compile(lambda x: torch.log_softmax(x, -1) == 0,
                             backend="solder")(pair).tolist() == [False, True]


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_a_half_log_softmax_on_cuda_is_eagers(dtype):
    # the CPU kernel's roundings (above) are the CPU's: on CUDA, PyTorch's decomposition
    g = torch.Generator().manual_seed(0)
    x = (torch.randn(64, 300, generator=g, device="cpu") * 4).to(dtype).cuda()
    got = torch.compile(lambda x: torch.log_softmax(x, -1), backend="solder")(x)
    torch.testing.assert_close(got, torch.log_softmax(x, -1))
    pair = torch.tensor([-2.0, 5.0], dtype=dtype, device="cuda")
    is_zero = torch.compile(lambda x: torch.log_softmax(x, -1) == 0, backend="solder")
    assert is_zero(pair).tolist() == (torch.log_softmax(pair, -1) == 0).tolist()


def test_a_constant_groups_norm_is_eagers_to_the_bit():
    # fuzz seed 533279: a group of two equal values (variance 0): eager's rstd is 1 / sqrt(eps)
    # in float64 (316.22775 where float32's rsqrt gives 316.22778) and its output one fused
    # multiply-add x * a + b; PyTorch's decomposition put the second channel a unit off -0.25,
    # on the other side of a clamp's bound, and the clamp's gradient mask flipped
    # (CPU tensors: eager's CUDA kernel rounds otherwise, a unit off at times; the formula is
    # within tolerance there, not to the bit: H100, torch 2.11.0+cu130, 2026-12-07)
    x = torch.full((1, 2, 1), 1.2567737102508545, device="cpu")
    w = torch.linspace(0.25, 3.0, 2, device="cpu")
    b = torch.linspace(-2.0, -0.25, 2, device="cpu")

    def fn(x):
        return torch.nn.functional.group_norm(x, 1, w, b).clamp(min=-0.25) >= -0.25
    eager = torch.ops.aten.native_group_norm(x, w, b, 1, 2, 1, 1, 1e-5)
    from solder.capture.decompositions import _native_group_norm
    for got, want in zip(_native_group_norm(x, w, b, 1, 2, 1, 1, 1e-5), eager):
        assert torch.equal(got, want)
    assert torch.equal(torch.compile(fn, backend="solder")(x), fn(x))


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
@pytest.mark.parametrize("channels_last", [False, True])
def test_a_half_group_norm_is_eagers_to_the_bit(dtype, channels_last):
    # in float32 the statistics are summed in another order than eager's CPU kernel (a unit
    # apart at times); rounded to a half dtype the output is eager's. (CPU only: eager's CUDA
    # kernel differs by a unit of bfloat16 in some elements and takes no channels-last input;
    # the GPU fuzz runs compare it within tolerance: H100, torch 2.11.0+cu130, 2026-12-07)
    g = torch.Generator().manual_seed(0)
    here = "cpu"
    x = torch.randn(2, 6, 4, 4, generator=g, device="cpu").to(here, dtype)
    if channels_last:
        x = x.contiguous(memory_format=torch.channels_last)
    w, b = (torch.randn(6, generator=g, device="cpu").to(here, dtype) for _ in range(2))
    from solder.capture.decompositions import _native_group_norm
    got = _native_group_norm(x, w, b, 2, 6, 16, 3, 1e-5)
    want = torch.ops.aten.native_group_norm(x, w, b, 2, 6, 16, 3, 1e-5)
    assert torch.equal(got[0], want[0]) and got[0].stride() == want[0].stride()


@pytest.mark.parametrize("make", [
    lambda: torch.randn(1, 2, 4, 1).permute(0, 2, 1, 3),     # channels-last contiguous (540728)
    lambda: torch.randn(2, 2, 1, 1),                          # contiguous and channels-last
    lambda: torch.randn(2, 4, 4, 1).permute(0, 3, 1, 2),      # (2, 1, 4, 4): both again
    lambda: torch.randn(2, 3, 4, 5).permute(0, 2, 1, 3),      # neither: suggested format
    lambda: torch.randn(2, 3, 4, 5, 2).permute(0, 4, 1, 2, 3),  # channels-last-3d
    lambda: torch.randn(5, 3).t(),                            # 2-d
])
@pytest.mark.parametrize("training", [True, False])
def test_a_cpu_batch_norm_result_has_eagers_strides_size_1_dims_included(make, training):
    # eager's CPU batch norm: contiguous for a contiguous input, channels-last for a
    # channels-last contiguous one, else the suggested format, with that format's own strides
    # (a later stack picks its layout by the size-1 dims' strides too: seed 540522)
    x = make()
    c = x.shape[1]
    w, b = torch.randn(c), torch.randn(c)

    def fn(x):
        return torch.nn.functional.batch_norm(x, torch.zeros(c), torch.ones(c), w, b,
                                              training=training)
    got, want = torch.compile(fn, backend="solder")(x), fn(x)
    torch.testing.assert_close(got, want)
    assert got.stride() == want.stride()


def test_a_group_norm_without_weight_and_bias_is_eagers_formula():
    # without weight and bias eager's kernel computes (x - mean) * rstd, not the fused form:
    # a constant group is 0, where x * rstd - mean * rstd is the rounding error of the product
    # (seed 552677: an rms_norm of such a row amplified it to 0.0058)
    from solder.capture.decompositions import _native_group_norm
    x = torch.full((2, 4, 3), 1.2567737102508545)
    y, _, _ = _native_group_norm(x, None, None, 2, 4, 3, 2, 1e-5)
    assert torch.equal(y, torch.ops.aten.native_group_norm(x, None, None, 2, 4, 3, 2, 1e-5)[0])
    assert bool((y == 0).all())


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
@pytest.mark.parametrize("affine", [False, True])
def test_a_half_cpu_layer_norm_is_eagers_to_the_bit(dtype, affine):
    # eager's CPU kernel: x * rstd + (-rstd * mean) as one fused multiply-add, so a constant
    # row of 10000 in float16 is 0.082, not 0 (fuzz seed 591323); with weight and bias a
    # second one
    g = torch.Generator().manual_seed(0)
    x = (torch.randn(6, 2, 7, generator=g, device="cpu") * 3 + 1).to(dtype)
    x[0] = 10000.0
    w, b = ((torch.randn(2, 7, generator=g, device="cpu").to(dtype) if affine else None)
            for _ in range(2))

    def fn(x):
        return torch.nn.functional.layer_norm(x, (2, 7), w, b, eps=1e-5)
    got = torch.compile(fn, backend="solder")(x)
    assert torch.equal(got, fn(x))
    assert affine or bool((fn(x)[0] != 0).all())   # the rounding error eager keeps


def test_addbmm_adds_the_batches_in_eagers_order():
    # eager adds one batch's product at a time into beta * self (an addmm_ each): 1e8 - 1e8,
    # then + 1, is 1 in float32; the products summed over the batch first lose the 1
    here = torch.get_default_device()
    self = torch.tensor([[1e8]], device=here)
    b1 = torch.tensor([[[-1e4]], [[1.0]]], device=here)
    b2 = torch.tensor([[[1e4]], [[1.0]]], device=here)
    fn = torch.compile(lambda s, x, y: torch.addbmm(s, x, y), backend="solder")
    assert fn(self, b1, b2).tolist() == torch.addbmm(self, b1, b2).tolist() == [[1.0]]
    scaled = torch.compile(lambda s, x, y: torch.addbmm(s, x, y, beta=0.5, alpha=2),
                           backend="solder")
    assert torch.equal(scaled(self, b1, b2), torch.addbmm(self, b1, b2, beta=0.5, alpha=2))


def test_an_integer_linspace_as_cudas_kernel_computes_it():
    # ATen's CUDA kernel takes an integer linspace's step and elements in float, its CPU kernel
    # in double: recorded on an H100 (torch 2.11.0+cu130, 2026-12-07), the int64
    # linspace(1000, -1000, 301) is the CPU's plus one at 99, 102, ..., 147 and minus one at
    # 153, 156, ..., 201 (340 where the CPU has 339)
    from solder.capture.ranges import linspace_as_on
    cpu = torch.linspace(1000, -1000, 301, dtype=torch.int64, device="cpu")
    cuda = cpu.clone()
    cuda[99:148:3] += 1
    cuda[153:202:3] -= 1
    for dtype in (torch.int64, torch.int32):
        got = linspace_as_on("cuda", 1000, -1000, 301, dtype=dtype, device="cpu")
        assert got.dtype == dtype and torch.equal(got, cuda.to(dtype))
        assert torch.equal(linspace_as_on("cpu", 1000, -1000, 301, dtype=dtype, device="cpu"),
                           cpu.to(dtype))


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.int64])
def test_linspaces_step_divides_by_a_tensor(dtype):
    # ATen's kernels divide for the step on the host, correctly rounded; a division by a Python
    # number lowers on CUDA as ATen's CUDA kernel divides, times its reciprocal, and every
    # element of a float32 linspace(-2.0, -0.25, 16) moved by the step's last bit on an H100
    from torch.fx.experimental.proxy_tensor import make_fx
    from solder.capture.ranges import linspace_as_on
    g = make_fx(lambda: linspace_as_on("cuda", -2.0, -0.25, 16, dtype=dtype, device="cpu"))()
    (div,) = [n for n in g.graph.nodes if n.op == "call_function" and "div" in str(n.target)]
    assert all(isinstance(a, torch.fx.Node) for a in div.args), div.args


@pytest.mark.parametrize("make", [
    lambda: torch.randn(3, 4).t(),                        # permuted, dense
    lambda: torch.randn(4, 6)[:, ::2],                    # gaps
    lambda: torch.randn(2, 3, 4).permute(2, 0, 1),        # 3-d permuted
])
@pytest.mark.parametrize("accumulate", [False, True])
def test_put_and_put_into_a_permuted_input_keep_eagers_layout(make, accumulate):
    # eager's put clones its input in the input's own format and writes in place; the
    # decomposition (a flat index_put) was contiguous: the result of a product with it, and
    # anything laid out after it, took the wrong strides (fuzz seed 901169)
    def fn(x, v):
        y = torch.put(x, torch.tensor([1, -2, 3]), v, accumulate=accumulate)
        x.put_(torch.tensor([0, 4]), v[:2] * 2, accumulate=accumulate)
        return y, y * 3, x * 1
    torch.manual_seed(0)
    x, v = make(), torch.randn(3)
    torch.manual_seed(0)
    ref_x = make()     # the same values and layout
    ref = fn(ref_x, v)
    out = torch.compile(fn, backend="solder")(x, v)
    for o, r in zip(out, ref):
        torch.testing.assert_close(o, r)
        assert o.stride() == r.stride(), (o.stride(), r.stride())
    torch.testing.assert_close(x, ref_x)
    torch._dynamo.reset()
