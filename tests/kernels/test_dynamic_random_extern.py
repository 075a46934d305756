"""Symbolic sizes, random numbers, library calls."""
import pytest
import torch
import torch.nn.functional as F

import solder

from .helpers import assert_same, check


def test_dynamic_sizes_compile_once():
    calls = []

    def f(x, y):
        return torch.softmax(x * 2, -1) + y.sum(), (x + 1)[:, 1:]
    counting = torch.compile(f, backend="solder", dynamic=True)
    for n in (3, 5, 9):
        x, y = torch.randn(n, 7), torch.randn(n)
        assert_same(counting(x, y), f(x, y))
    report = solder.explain(f, torch.randn(4, 7), torch.randn(4), dynamic=True)
    assert len(report.graphs) == 1
    assert report.kernel_count <= 3  # y.sum(); softmax with the add; the slice


def test_dynamic_after_shape_change_recompiles_once():
    import torch._dynamo
    torch._dynamo.reset()
    cnt = {"n": 0}

    def backend(gm, inputs, **kw):
        cnt["n"] += 1
        return solder.compile_backend(gm, inputs)
    cf = torch.compile(lambda x: x.sin().sum(0), backend=backend)
    for n in (4, 6, 8, 10):
        x = torch.randn(n, 5)
        assert_same(cf(x), x.sin().sum(0))
    assert cnt["n"] == 2  # static first, then one symbolic graph for every other size


def test_float_scalars_of_symbolic_sizes_are_computed_on_the_host():
    # SDPA's math path scales q and k by sqrt(1 / sqrt(head_dim)): with symbolic sizes that is a
    # float expression of a size, which the wrapper computes and passes to the kernel
    def f(q, k, v):
        return torch.ops.aten._scaled_dot_product_attention_math(q, k, v)[0]
    compiled = torch.compile(f, backend="solder", dynamic=True)
    for shape in ((2, 2, 7, 8), (1, 3, 5, 4)):
        q, k, v = (torch.randn(shape) for _ in range(3))
        assert_same(compiled(q, k, v), f(q, k, v))
    report = solder.explain(f, q, k, v, dynamic=True)
    wrapper = "\n".join(g.wrapper for g in report.graphs)
    assert "** 0.5" in wrapper, wrapper


def test_dropout_statistics_and_reproducibility():
    f = lambda x: F.dropout(x, 0.25, training=True)  # noqa: E731
    cf = torch.compile(f, backend="solder")
    x = torch.ones(128, 64)
    torch.manual_seed(1)
    a = cf(x)
    torch.manual_seed(1)
    b = cf(x)
    assert torch.equal(a, b)  # same seed, same numbers
    c = cf(x)
    assert not torch.equal(a, c)
    kept = (a != 0).float().mean().item()
    assert 0.72 < kept < 0.78
    assert set(a.unique().tolist()) <= {0.0, torch.tensor(1 / 0.75).item()}


def test_rand_randn_distribution():
    cf = torch.compile(lambda x: (torch.rand_like(x), torch.randn_like(x)), backend="solder")
    u, n = cf(torch.empty(256, 256))
    assert 0 <= u.min() and u.max() < 1 and abs(u.mean().item() - 0.5) < 0.01
    assert abs(n.mean().item()) < 0.02 and abs(n.std().item() - 1) < 0.02


def test_matmuls_are_library_calls_with_fused_epilogues():
    a, b, c = torch.randn(8, 16), torch.randn(16, 4), torch.randn(4)
    r = check(lambda x, y, z: torch.relu(x @ y + z) * 2, a, b, c, kernels=1)
    assert [e.op for e in r.externs] == ["aten.mm"] or len(r.externs) == 1
    check(lambda x, y: torch.bmm(x, y).sigmoid(), torch.randn(2, 4, 5), torch.randn(2, 5, 3),
          kernels=1)
    check(lambda x, y, z: torch.baddbmm(z, x, y) - 1, torch.randn(2, 4, 5), torch.randn(2, 5, 3),
          torch.randn(2, 4, 3))


def test_convolution_and_attention():
    x, w = torch.randn(2, 3, 8, 8), torch.randn(4, 3, 3, 3)
    r = check(lambda a, b: F.relu(F.conv2d(a, b, padding=1)) + 1, x, w, kernels=1,
              rtol=1e-4, atol=1e-4)
    assert len(r.externs) == 1
    q = torch.randn(1, 2, 8, 4)
    check(lambda a, b, c: F.scaled_dot_product_attention(a, b, c) * 2, q, q.clone(), q.clone(),
          rtol=1e-4, atol=1e-4)


def test_convolution_bias_is_added_in_the_consumer_kernel():
    # the library call runs without its bias; the add fuses into the kernel reading the result
    x = torch.randn(2, 3, 8, 8).to(memory_format=torch.channels_last)
    w, b = torch.randn(6, 3, 3, 3), torch.randn(6)

    def f(a, w, b):
        y = F.conv2d(a, w, b, padding=1)
        return F.layer_norm(y.permute(0, 2, 3, 1), (6,)).permute(0, 3, 1, 2) * 2
    r = check(f, x, w, b, max_kernels=2, rtol=1e-4, atol=1e-4)   # LayerNorm's statistics, its output
    assert len(r.externs) == 1 and not r.fallbacks
    assert all("aten.convolution" in k.ops for k in r.graphs[0].kernels)   # the bias, fused
    (call,) = [line for line in r.graphs[0].wrapper.splitlines() if "convolution" in line]
    assert ", None, " in call, call   # no bias handed to the library
    # grouped (depthwise) convolution with bias, and its gradients
    xd = torch.randn(2, 4, 6, 6, requires_grad=True)
    wd, bd = torch.randn(4, 1, 3, 3, requires_grad=True), torch.randn(4, requires_grad=True)
    check(lambda a, w, b: F.gelu(F.conv2d(a, w, b, padding=1, groups=4)), xd, wd, bd, grad=True,
          rtol=1e-4, atol=1e-4)


PAD_ALWAYS = {"pad_mm_min_elements": 1}


def _padded(f, *args, exact=True):
    """``f`` compiled with every unaligned matmul padded: its outputs against eager's (values
    to the bit where ``exact``, and strides), and its explain report."""
    out = torch.compile(f, backend="solder", options=PAD_ALWAYS)(*args)
    ref = f(*args)
    if exact:
        assert_same(out, ref)
    else:
        torch.testing.assert_close(out, ref)
    for o, r in zip(*((out, ref) if isinstance(ref, tuple) else ((out,), (ref,)))):
        assert o.stride() == r.stride()
    return solder.explain(f, *args, options=PAD_ALWAYS)


def test_padded_matmul_keeps_eager_values_through_views():
    # rows of 13 floats are not 16-byte aligned, so the product is computed into 16-wide rows;
    # the views after it (eager's strides) must still read the right values
    def f(x, w):
        logits = (x.view(10, 8) @ w).view(2, 5, 13)
        return logits, logits[:, 1:, 3:].float() * 2, logits.transpose(0, 1).sum(-1)
    report = _padded(f, torch.randn(2, 5, 8), torch.randn(8, 13))
    assert "(10, 16)" in report.graphs[0].wrapper, report.graphs[0].wrapper   # it was padded
    assert not report.fallbacks


def test_an_lm_head_pads_the_weight_rows_as_they_are_stored():
    # x @ w.t() with 13 outputs per row: the result's rows must be padded (cuBLAS's kernels
    # for unaligned result rows are ~7x slower); the pad copies w's rows in storage order and
    # the product reads its transpose, rather than a transposing copy of w
    def f(x, w):
        return (x @ w.t()).view(2, 5, 13)
    report = _padded(f, torch.randn(10, 8), torch.randn(13, 8))
    wrapper = report.graphs[0].wrapper
    # w padded to 16 rows in its own order: the padded b is [8, 16] column-major
    assert "empty_strided((8, 16), (1, 8)" in wrapper, wrapper
    (pad,) = [k for k in report.graphs[0].kernels if "aten.mm" in k.ops]
    assert "tl.load(ptr0 + (xindex)" in pad.source, pad.source   # read in storage order
    assert len(report.externs) == 1 and not report.fallbacks


def test_a_padded_product_that_only_leaves_the_graph_runs_in_blocks_of_rows():
    # the logits of an LM head, returned: the padded product whole and its copy into eager's
    # layout were both alive (GPT-2's 393 MiB logits twice at the inference peak); now the
    # product runs in blocks of rows into one scratch block, each copied into the result
    def f(x, w):
        return (x @ w.t()).view(4, 5, 13)
    wrapper = _padded(f, torch.randn(20, 8), torch.randn(13, 8), exact=False).graphs[0].wrapper
    assert "(20, 16)" not in wrapper, wrapper        # no whole padded product
    assert "OPS[0](arg1, buf0, 13, 3)" in wrapper, wrapper   # 20 rows in blocks of 3


def test_a_padded_product_read_again_is_computed_whole():
    # the logits also feed a softmax: the kernel reads the padded product in place
    def f(x, w):
        logits = x @ w.t()
        return logits, logits.softmax(-1)
    wrapper = _padded(f, torch.randn(20, 8), torch.randn(13, 8)).graphs[0].wrapper
    assert "(20, 16)" in wrapper, wrapper


@pytest.mark.parametrize("m,chunk", [(7, 3), (6, 3), (5, 8), (0, 2)])
def test_mm_padded_rows_is_the_product_without_its_pad(m, chunk):
    from solder.runtime.library_ops import MM_PADDED_ROWS
    a, b = torch.randn(m, 8), torch.randn(8, 16)
    b[:, 13:] = 0
    got = MM_PADDED_ROWS(a, b, 13, chunk)
    want = torch.cat([a[r:r + chunk] @ b for r in range(0, m, chunk)])[:, :13] if m else \
        torch.empty(0, 13)
    assert got.shape == (m, 13) and got.is_contiguous()
    assert torch.equal(got, want)


@pytest.mark.gpu
def test_returned_lm_head_logits_peak_at_the_logits_and_one_block():
    # GPT-2-sized vocabulary (50257, rows of 100514 bytes): the call's peak above what was
    # allocated before it is the logits, one eighth of them and the zero-padded weight, not
    # twice the logits
    x = torch.randn(4096, 768, device="cuda", dtype=torch.bfloat16)
    w = torch.randn(50257, 768, device="cuda", dtype=torch.bfloat16)
    f = torch.compile(lambda x, w: (x @ w.t()).view(8, 512, 50257), backend="solder")
    ref = (x @ w.t()).view(8, 512, 50257)
    torch.testing.assert_close(f(x, w), ref, rtol=2e-2, atol=2e-2)
    logits = ref.numel() * ref.element_size()
    del ref
    torch.cuda.synchronize()
    torch.cuda.reset_peak_memory_stats()
    before = torch.cuda.memory_allocated()
    out = f(x, w)
    torch.cuda.synchronize()
    peak = torch.cuda.max_memory_allocated() - before
    assert out.stride() == (512 * 50257, 50257, 1)
    padded_weight = 768 * 50264 * 2
    assert peak <= logits * 9 // 8 + padded_weight + (4 << 20), (peak, logits)
    assert peak < 2 * logits


def _draw(fn, *args):
    torch._dynamo.reset()
    report = solder.explain(fn, *args)
    assert not report.fallbacks, report.fallbacks
    return torch.compile(fn, backend="solder")(*args)


def test_random_distributions_are_lowered_with_the_right_laws():
    x = torch.empty(64, 64)
    u = _draw(lambda x: torch.empty_like(x).uniform_(-2, 5), x)
    assert u.min() >= -2 and u.max() < 5 and abs(u.mean() - 1.5) < 0.2
    n = _draw(lambda x: torch.empty_like(x).normal_(2, 3), x)
    assert abs(n.mean() - 2) < 0.2 and abs(n.std() - 3) < 0.2
    m = _draw(lambda mean, std: torch.normal(mean, std), torch.full((64, 64), -1.0),
              torch.full((64, 64), 0.5))
    assert abs(m.mean() + 1) < 0.05 and abs(m.std() - 0.5) < 0.05
    ln = _draw(lambda x: torch.empty_like(x).log_normal_(0.5, 0.25), x)
    assert (ln > 0).all() and abs(ln.log().mean() - 0.5) < 0.03
    c = _draw(lambda x: torch.empty_like(x).cauchy_(1, 2), x)
    assert abs(c.median() - 1) < 0.2
    assert abs(((c - 1).abs() < 2).float().mean() - 0.5) < 0.05   # half within sigma of median
    g = _draw(lambda x: torch.empty_like(x).geometric_(0.3), x)
    assert (g >= 1).all() and torch.equal(g, g.round()) and abs(g.mean() - 1 / 0.3) < 0.3
    r = _draw(lambda x: torch.randint(3, 10, (64, 64), device=x.device) + x.to(torch.int64), x.zero_())
    assert r.dtype == torch.int64 and r.min() == 3 and r.max() == 9
    counts = torch.bincount(r.flatten() - 3)
    assert counts.min() > 4096 / 7 * 0.8                               # every value, evenly
    e = _draw(lambda x: torch.empty_like(x.t()).fill_(2) + x.t(), x)   # empty_permuted
    assert torch.equal(e, torch.full((64, 64), 2.0))
