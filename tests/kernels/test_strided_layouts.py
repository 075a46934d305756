"""Layouts that are not dense: inputs that overlap themselves (``unfold``), have gaps
(``x[::2]``) or start at a storage offset. ``as_strided_scatter`` works on its input's storage
(its result keeps the input's layout, and the view's offset is absolute), and a training graph
saves such tensors for its backward in eager's layout."""
import pytest
import torch

from .helpers import check


def _full(n, like):
    return torch.full((n,), -1, dtype=like.dtype, device=like.device)


CASES = {
    # view offset absolute in the storage of an input that starts at element 1
    "offset": lambda a: torch.as_strided_scatter((a * 1)[1:], _full(2, a), (2,), (2,), 3),
    "offset_of_input": lambda a: torch.as_strided_scatter(a[1:], _full(2, a), (2,), (2,), 3),
    # an input that overlaps itself: eager writes every element at a written position
    "overlapping": lambda a: torch.as_strided_scatter((a * 1).unfold(0, 5, 2), _full(2, a),
                                                      (2,), (1,), 2),
    "overlapping_offset": lambda a: torch.as_strided_scatter((a * 1)[1:].unfold(0, 4, 2),
                                                             _full(2, a), (2,), (1,), 3),
    # an input with gaps: positions between its elements are written to nothing
    "gaps": lambda a: torch.as_strided_scatter((a * 1).view(2, 4)[:, ::2], _full(2, a),
                                               (2,), (1,), 0),
    "gaps_offset": lambda a: torch.as_strided_scatter((a * 1).view(2, 4)[:, 1::2], _full(1, a),
                                                      (1,), (1,), 3),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_as_strided_scatter_on_the_input_storage(case):
    check(CASES[case], torch.arange(8))


def test_as_strided_scatter_offset_gradient():
    # eager's own gradient of as_strided_scatter is inverted (it keeps the input's gradient
    # where the view wrote, zero elsewhere): the reference is the same write as a view's copy_
    def fn(a, b):
        return torch.as_strided_scatter(a[2:], b, (3,), (2,), 3) * 2

    def reference(a, b):
        out = a[2:].clone()
        out.as_strided((3,), (2,), 1).copy_(b)   # offset 3 in a's storage is 1 in the clone's
        return out * 2
    a, b = torch.randn(10), torch.randn(3)
    g = torch.randn(8)
    grads = []
    for f in (reference, torch.compile(fn, backend="solder")):
        x, y = a.clone().requires_grad_(), b.clone().requires_grad_()
        out = f(x, y)
        out.backward(g)
        grads.append((out.detach(), x.grad, y.grad))
    for got, want in zip(grads[1], grads[0]):
        torch.testing.assert_close(got, want)
    assert grads[1][1][[3, 5, 7]].eq(0).all() and grads[1][1][[2, 4, 6, 8, 9]].ne(0).all()


def test_a_saved_tensor_with_gaps_reaches_the_backward_in_its_layout():
    # diagonal_scatter of a strided input keeps the input's strides (22, 2); the backward
    # reads the saved result through them
    def fn(a0, a1):
        v0 = torch.diagonal_scatter(a0, a1.expand((4,)), -1, 1, 0)
        return torch.nn.functional.hardswish(v0)
    base = torch.randn(16, 11, requires_grad=True)
    check(lambda b, s: fn(b[0:16:2, 0:10:2], s), base, torch.randn((), requires_grad=True),
          grad=True)


def test_slice_scatter_of_a_strided_input_feeds_a_backward():
    def fn(b, s):
        a = b[::2, 1::2]
        return torch.atan2(torch.slice_scatter(a, s, 1, 1, 3), a + 1)
    check(fn, torch.randn(8, 9, requires_grad=True), torch.randn(4, 2, requires_grad=True),
          grad=True)


def test_as_strided_scatter_of_an_expanded_input_is_over_a_clone():
    # eager clones an input that certainly overlaps itself (a zero stride) rather than keep
    # its storage: the view's positions are the clone's
    def fn(a):
        return torch.as_strided_scatter(a.expand(6, 2), _full(3, a), (3,), (5,), 1)
    check(fn, torch.tensor([1.0]))


@pytest.mark.parametrize("start,rows", [(-2, 1), (-7, 4), (-3, 4)])
def test_a_slice_that_starts_before_the_first_row_and_its_gradient(start, rows):
    # x[-7::3] of 4 rows starts at row 0, as does the slice_scatter of its gradient
    def fn(a):
        return a[start::3] * 2
    check(fn, torch.randn(rows, 5, requires_grad=True), grad=True)
    check(lambda g: torch.ops.aten.slice_scatter(torch.zeros(rows, 5, device=g.device), g, 0,
                                                 start, 2 ** 63 - 1, 3),
          torch.ones(len(range(rows)[start::3]), 5))


@pytest.mark.parametrize("shape,reps", [((2, 1), (1, 1, 2)), ((2, 3), (2, 2)), ((3,), (2, 1, 3))])
def test_repeat_is_contiguous_as_in_eager(shape, reps):
    x = torch.randn(shape, requires_grad=True)
    check(lambda t: t.repeat(*reps), x, grad=True)
    out = torch.compile(lambda t: t.repeat(*reps), backend="solder")(x.detach())
    assert out.is_contiguous() and out.stride() == x.detach().repeat(*reps).stride()


@pytest.mark.parametrize("size,stride", [((2,), (6,)), ((2,), (3,)), ((3,), (1,))])
def test_a_view_of_the_as_strided_scatter_of_an_expanded_input(size, stride):
    # the view read the result through the zero strides that the meta functions keep for an
    # expanded input, where eager scatters into a contiguous clone
    def fn(a, b):
        return torch.as_strided_scatter(a.expand(2, 2, 2, 1), b, size, stride, 0).mT
    check(fn, torch.tensor([[[[1.0], [2.0]]]]), torch.tensor([-2.0, -0.25, 7.0])[:size[0]])


def test_the_as_strided_scatter_of_an_expanded_transposed_input_keeps_its_dims_order():
    # eager's clone of a (3, 4) transposed view expanded to (2, 3, 4) has strides (12, 1, 3)
    a = torch.arange(24).reshape(8, 3)[::2].permute(1, 0)
    fn = lambda a: torch.as_strided_scatter(a.expand(2, 3, 4), torch.arange(-1, 2, device=a.device),  # noqa: E731
                                            (3,), (5,), 12)
    out = torch.compile(fn, backend="solder")(a)
    assert torch.equal(out, fn(a)) and out.stride() == fn(a).stride()



@pytest.mark.parametrize("make", [
    lambda: torch.randint(-8, 9, (4, 1, 4))[:, :, ::2].permute(2, 0, 1),          # gaps
    lambda: torch.randn(3, 2, 1, 1).permute(3, 1, 0, 2).expand(3, -1, 3, -1),    # overlap
], ids=["gaps", "expanded"])
def test_index_fill_of_a_non_dense_input_keeps_eagers_layout(make):
    # fuzz seeds 418348, 418512: eager clones the input keeping its order of dims, then
    # fills; PyTorch's meta function promises a contiguous result, which eager does not give
    def fn(a0, index):
        return torch.index_fill(a0, 2 if a0.dim() == 4 else -2, index, 5)

    a0 = make()
    index = torch.tensor([0, 1])
    out = torch.compile(fn, backend="solder")(a0, index)
    ref = fn(a0, index)
    assert torch.equal(out, ref)
    assert out.stride() == ref.stride()


@pytest.mark.parametrize("training", [True, False])
def test_batch_norm_of_a_transposed_input_is_laid_out_as_eager(training):
    # fuzz seed 271053: eager's kernels lay the result out in the input's suggested memory
    # format (contiguous here), the decomposition kept the input's transposed strides, and a
    # later .view(-1) of it (after a graph break: Dynamo fakeifies the real result) raised.
    # On CUDA eager's kernels keep the input's layout (empty_like): there it is the view that
    # eager's own result refuses
    def fn(a, w):
        out = torch.nn.functional.batch_norm(a, torch.zeros(2, device=a.device),
                                             torch.ones(2, device=a.device), w, None,
                                             training=training)
        return out, out * 2

    a = torch.randn(4, 4)[:, ::2].permute(1, 0).contiguous().t()    # (4, 2), strides (1, 4)
    w = torch.randn(2)
    out = torch.compile(fn, backend="solder")(a, w)
    ref = fn(a, w)
    for o, r in zip(out, ref):
        torch.testing.assert_close(o, r)
        assert o.stride() == r.stride()
    assert out[0].is_contiguous() == ref[0].is_contiguous()
    if ref[0].is_contiguous():
        assert out[0].view(-1).shape == (8,)


def test_index_fill_keeps_the_strides_of_its_inputs_size_1_dims():
    # fuzz seed 473779: eager's index_fill clones its input, size-1 dims' strides and all; a
    # stack of the result then picks its layout by them (contiguous here, channels-last-3d for
    # the strides the decomposition gave)
    def fn(a):
        v = torch.index_fill(a, -2, torch.tensor([0, 0], device=a.device), -0.25)
        return v, torch.stack([v, v], -3)

    a = torch.randn(2, 1, 2, 1).permute(3, 2, 1, 0)     # (1, 2, 1, 2), strides (1, 1, 2, 2)
    out = torch.compile(fn, backend="solder")(a)
    ref = fn(a)
    for o, r in zip(out, ref):
        torch.testing.assert_close(o, r)
        assert o.stride() == r.stride()
