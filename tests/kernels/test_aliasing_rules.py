"""The mutation and aliasing rules of docs/ARCHITECTURE.md ("Mutation and aliasing"), each
against eager: old values read before a write, writes through aliases that ``contiguous()``,
``reshape()`` and ``detach()`` return, inputs that share memory, a write that reads what it
overwrites, in-place view ops on inputs."""
import pytest
import torch

import solder


def _clone_then_write(x):
    y = x.clone()
    x.mul_(2)
    return y


def _contiguous_alias_then_write(x):
    y = x.contiguous()      # x itself: y sees the write
    x.mul_(2)
    return y * 1


def _read_through_reshape_after_write(x):
    y = x.reshape(-1)
    x.add_(1)
    return y.sum(), y * 1


def _transposed_copy_then_row_write(x):
    y = x.t().clone()
    x[0] = 5
    return y


def _write_through_a_view_after_a_write(x):
    y = x[1:]
    x.add_(1)
    y.mul_(2)
    return x.sum()


def _write_reads_what_it_overwrites(x):
    x.copy_(x.flip(0))
    return x


def _shifted_self_assignment(x):
    x[1:] = x[:-1].clone()
    return x


def _detach_alias(x):
    y = x.detach()
    y.add_(1)
    return x * 1


def _transpose_in_place(x):
    x.t_()
    return x + 1


def _unsqueeze_in_place_then_write(x):
    x.unsqueeze_(0)
    x.add_(1)
    return x


ONE_INPUT = [_clone_then_write, _contiguous_alias_then_write, _read_through_reshape_after_write,
             _transposed_copy_then_row_write, _write_through_a_view_after_a_write,
             _write_reads_what_it_overwrites, _shifted_self_assignment, _detach_alias,
             _transpose_in_place, _unsqueeze_in_place_then_write]


def _compare(fn, make):
    eager_args, compiled_args = make(), make()
    ref = fn(*eager_args)
    out = torch.compile(fn, backend="solder")(*compiled_args)
    ref = ref if isinstance(ref, tuple) else (ref,)
    out = out if isinstance(out, tuple) else (out,)
    for o, r in zip(out, ref):
        assert o.shape == r.shape and torch.equal(o, r), (o, r)
    for a, b in zip(compiled_args, eager_args):
        assert a.shape == b.shape and torch.equal(a, b), (a, b)


@pytest.mark.parametrize("fn", ONE_INPUT, ids=lambda f: f.__name__.strip("_"))
def test_one_input(fn):
    _compare(fn, lambda: (torch.arange(6.0).view(2, 3) if "transpos" in fn.__name__
                          or "row" in fn.__name__ or "contiguous" in fn.__name__
                          else torch.arange(6.0),))


def _write_one_read_other(x, z):
    x.add_(1)
    return z * 2


def _write_other_read_one(x, z):
    z.mul_(3)
    return x + 1


@pytest.mark.parametrize("fn", [_write_one_read_other, _write_other_read_one],
                         ids=lambda f: f.__name__.strip("_"))
@pytest.mark.parametrize("share", ["same", "overlapping"])
def test_inputs_that_share_memory(fn, share):
    def make():
        b = torch.arange(6.0)
        return (b, b) if share == "same" else (b, b[1:4])
    _compare(fn, make)


def _view_read_after_in_place_pow(x):
    v = x.reshape(-1)            # a view: sees the write
    x.reshape(()).pow_(2)
    return v.roll(1, 0).roll(1)  # reads x through recomputed values


def _old_value_read_through_a_recomputed_value(x):
    y = x * 3                    # recomputed where read
    x.add_(1)
    return y.roll(1, 0) + 1


@pytest.mark.parametrize("fn,make", [
    (_view_read_after_in_place_pow, lambda: (torch.tensor(5),)),
    (_old_value_read_through_a_recomputed_value, lambda: (torch.arange(6.0),)),
], ids=["view_after_pow_", "old_value_recomputed"])
def test_a_write_comes_after_kernels_that_recompute_the_old_value(fn, make):
    _compare(fn, make)


def test_an_input_written_after_the_forward_read_it_still_has_a_gradient():
    # eager's where() saves only its condition, so writing x afterwards is fine; the compiled
    # forward must not save x itself (AOTAutograd writes x after the forward, and autograd
    # would refuse the backward)
    def fn(x):
        s = torch.softmax(x, 0)
        y = torch.where(x > 0, x, s)
        x.view_as(x)[...] = -1.5
        return y
    for shape in [(), (5,)]:
        leaf = torch.randn(shape, requires_grad=True)
        grads = []
        for f in (fn, torch.compile(fn, backend="solder")):
            leaf.grad = None
            x = leaf.clone()
            (f(x) * 3).sum().backward()
            grads.append((leaf.grad.clone(), x.detach().clone()))
            torch._dynamo.reset()
        torch.testing.assert_close(grads[1], grads[0])


@pytest.mark.parametrize("where", ["later_graph", "eager_code"])
@pytest.mark.parametrize("forward", [
    lambda x: torch.nn.functional.group_norm(x, 2),     # eager saves x's contiguous copy
    lambda x: torch.log_softmax(x.softmax(-1), -1),     # eager saves the two outputs
    lambda x: (x * 2) @ torch.ones(x.shape[-1], 3, device=x.device),   # eager saves x * 2
], ids=["group_norm_of_permuted", "softmax_chain", "scaled_matmul"])
def test_an_input_written_between_forward_and_backward_that_eager_did_not_save(forward, where):
    # fuzz seeds 190364, 191321: the partitioner saved the input itself and recomputed what
    # eager saved from it in the backward; a write into the input after the forward (in a
    # later graph, or in eager code) then made autograd refuse the backward
    def fn(x):
        y = forward(x)
        if where == "later_graph":
            torch._dynamo.graph_break()
            x[1:].clamp_(-0.5, 0.5)
        return y

    torch.manual_seed(0)
    leaf = torch.randn(5, 4, 2, requires_grad=True)
    grads = []
    for f in (fn, torch.compile(fn, backend="solder")):
        leaf.grad = None
        x = leaf.clone().permute(2, 1, 0)     # (2, 4, 5), not contiguous
        y = f(x)
        if where == "eager_code":
            x.mul_(3)
        (y * torch.arange(y.numel(), device=y.device).view(y.shape)).sum().backward()
        grads.append(leaf.grad.clone())
        torch._dynamo.reset()
    torch.testing.assert_close(grads[1], grads[0])


def test_a_leaf_that_requires_grad_is_recomputed_from_as_a_parameter_is():
    # a leaf that requires grad is written only under no_grad (as an optimizer writes): the
    # partitioner's choice stands, the backward recomputes the log-softmax from the logits
    # (a second logits-sized tensor kept from the forward otherwise); a non-leaf input keeps
    # eager's saved value
    import torch.nn.functional as F
    target = torch.randint(0, 16, (8,))

    def saved(logits):
        report = solder.explain(lambda t, y: F.cross_entropy(t, y), logits, target)
        fw = [g for g in report.graphs if g.kind == "forward"][0]
        (ret,) = [ln for ln in fw.fx_graph.splitlines() if ln.strip().startswith("return")]
        return ret
    leaf = torch.randn(8, 16, requires_grad=True)
    assert "primals_1" in saved(leaf), saved(leaf)
    assert "primals_1" not in saved(leaf.detach().clone().requires_grad_() * 1)
    for non_leaf in (False, True):
        grads = []
        for f in (lambda t, y: F.cross_entropy(t, y),
                  torch.compile(lambda t, y: F.cross_entropy(t, y), backend="solder")):
            leaf.grad = None
            f(leaf * 1 if non_leaf else leaf, target).backward()
            grads.append(leaf.grad.clone())
        torch.testing.assert_close(grads[1], grads[0])
        torch._dynamo.reset()


def _read_through_a_dtype_view_then_write_it(x):
    bits = x.view(torch.int32)          # a view ATen runs: another name for x's memory
    kept = bits.clamp(-3, 3)
    bits.neg_()
    masked = kept.masked_fill(kept > 0, 5)
    return torch.take_along_dim(masked, torch.tensor([0, 1, 0, 1], device=x.device).view(
        1, 2, 2, 1), 1)


def test_a_write_waits_for_reads_through_a_view_run_in_aten():
    _compare(_read_through_a_dtype_view_then_write_it,
             lambda: (torch.tensor([[[[-3.737911]]]]),))


def _swap_through_computed_values(a, b):
    v = (a * 2).sum()
    a.copy_(b)
    b.copy_(v)
    return ()


def _swap(a, b):
    t = a.clone()
    a.copy_(b)
    b.copy_(t)
    return ()


@pytest.mark.parametrize("fn", [_swap_through_computed_values, _swap],
                         ids=lambda f: f.__name__.strip("_"))
def test_two_inputs_written_from_each_others_old_values(fn):
    # each write would wait for the other's read of its old value: one new value is
    # computed into a temporary first
    _compare(fn, lambda: (torch.tensor(1.5), torch.tensor(3.0)))
    _compare(fn, lambda: (torch.arange(4.0), torch.arange(4.0) * -1))


def _old_value_read_after_a_reduction_in_the_writers_kernel(a0, a1, a2):
    v2 = torch.nn.functional.leaky_relu(a0, 0.1)
    v3 = torch.argsort(a2, dim=0, stable=True)   # a reduction: what reads it runs later
    v5 = v3 - v2                                 # in the same kernel as the write below
    a0[..., 1:].copy_(-1.5).narrow(0, 0, 1).lerp_(a1, 0.5)
    return (v5,)


def test_a_write_runs_after_reads_that_wait_for_a_reduction_in_its_kernel():
    _compare(_old_value_read_after_a_reduction_in_the_writers_kernel,
             lambda: (torch.tensor([0.5, -1.0, 2.0, 3.0]), torch.tensor([0.7]),
                      torch.tensor([3, 1, 2, 0])))


@pytest.mark.parametrize("make", [
    lambda y: torch.stack([y, y], 0),          # a cat, viewed with the new axis
    lambda y: y.repeat(2, 1),                  # a copy, merged by a view
    lambda y: y.t().reshape(-1),               # a reshape that copies
    lambda y: torch.cat([y, y])[2:],           # a slice of a buffer the graph made
], ids=["stack", "repeat", "reshape", "slice"])
def test_an_output_of_a_new_buffer_may_be_written_in_place_by_a_later_graph(make):
    # eager's result is a fresh tensor; the compiled graph's output is a view of a buffer it
    # allocated, and had it been an autograd view made inside AOTAutograd's function, the
    # in-place write after the graph break would raise
    def fn(x):
        v = make(x.sin())
        torch._dynamo.graph_break()
        v.add_(1)
        return v * 2

    x = torch.randn(3, 4, dtype=torch.float64, requires_grad=True)
    out = torch.compile(fn, backend="solder")(x)
    ref = fn(x)
    torch.testing.assert_close(out, ref)
    grad, = torch.autograd.grad(out.sum(), x)
    want, = torch.autograd.grad(ref.sum(), x)
    torch.testing.assert_close(grad, want)


def test_an_output_viewing_another_output_is_its_view_and_a_later_graph_may_write_it():
    # seed 185121: graph one returns v2 and v3 = v2.view(-1) (inference: AOTAutograd passes
    # such outputs through as they are); graph two takes v2 and a select of v3 and writes v2.
    # As a storage-sharing tensor without ._base, v3's select made AOTAutograd refuse graph two
    # ("mixed autograd ._base states"); as eager's view of v2 it is one base and its view
    def fn(a0, a1, a2):
        v2 = torch.sign(a0)
        v3 = v2.view(-1)
        v6 = v3[a1.remainder(1)]    # a 0-d index tensor: Dynamo breaks the graph here
        v2[...] = 5
        return v2 + 0, torch.logical_or(v6, a2)

    def inputs():
        return torch.tensor(3), torch.tensor(2), torch.tensor(0)

    out = torch.compile(fn, backend="solder")(*inputs())
    ref = fn(*inputs())
    for o, r in zip(out, ref):
        assert torch.equal(o, r)

    def views(x):
        v = x.sin()
        return v.view(-1), v
    flat, whole = torch.compile(views, backend="solder")(torch.randn(2, 3))
    assert flat._base is whole


def test_a_multi_output_view_of_an_input_is_its_view_in_a_training_graph():
    # seed 274809: AOTAutograd regenerates an output that views an input, except one made by a
    # multi-output view op (unbind, split): that one is the compiled graph's own. As a
    # storage-sharing tensor without ._base, a later graph that took it and the input, and
    # wrote the input, was refused ("non-differentiable view input mutations")
    def first(a0):
        return a0.unbind(-1)[0], a0.split(1)[1], a0 * 2

    leaf = torch.randn(2, requires_grad=True)
    a0 = leaf.clone()
    u, s, _ = torch.compile(first, backend="solder")(a0)
    assert u._base is a0 and s._base is a0

    def fn(a0, a1):
        v0 = a0.unbind(-1)[0]
        v1 = a0 * 3
        torch._dynamo.graph_break()   # v0 goes to the next graph beside a0
        v3 = torch.scatter(a1, -1, torch.tensor([0], device=a1.device), v0.expand(1,))
        a0.transpose(0, -1).add_(1e-3)
        return v1 * 1, v3 * 1

    def inputs():
        g = torch.Generator().manual_seed(0)
        dev = torch.get_default_device()   # (a CPU generator draws on the CPU)
        leaves = [torch.randn(1, generator=g, device="cpu").to(dev).requires_grad_()
                  for _ in range(2)]
        return leaves, [x.clone() for x in leaves]

    (la, ins_c), (lb, ins_e) = inputs(), inputs()
    out = torch.compile(fn, backend="solder")(*ins_c)
    ref = fn(*ins_e)
    for o, r in zip(list(out) + ins_c, list(ref) + ins_e):
        torch.testing.assert_close(o, r)
    got = torch.autograd.grad(sum(o.sum() for o in out), la)
    want = torch.autograd.grad(sum(r.sum() for r in ref), lb)
    for g, w in zip(got, want):
        torch.testing.assert_close(g, w)


def test_a_multi_output_view_of_an_input_at_an_offset_keeps_its_place():
    base = torch.randn(8, requires_grad=True)
    a0 = base.clone()[3:7]          # storage offset 3
    u, s, _ = torch.compile(lambda a: (a.unbind(-1)[2], a.split(2)[1], a * 2),
                            backend="solder")(a0)
    assert u._base is a0._base and u.storage_offset() == 5 and torch.equal(u, a0[2])
    assert s._base is a0._base and s.storage_offset() == 5 and torch.equal(s, a0[2:])


def _masked_fill_through_transpose(a):
    a.mT.masked_fill_(a.mT > 0, 0.5)     # seed 233802: a written input, then read
    return a * 2


def _index_add_through_transpose(a):
    v = torch.nn.functional.pad(a * 3, (0, 2))
    v.mT.index_add_(0, torch.tensor([1], device=a.device),
                    torch.ones(1, v.shape[-2], device=a.device))   # seed 271975
    return v + 1


def _scatter_through_t(a):
    a.t().scatter_(0, torch.tensor([[1, 0, 0]], device=a.device),
                   torch.full((1, 3), 0.5, device=a.device))   # seed 441439
    return torch.div(torch.ones(3, 2, device=a.device), a, rounding_mode="floor")


@pytest.mark.parametrize("fn", [_masked_fill_through_transpose, _index_add_through_transpose,
                                _scatter_through_t])
def test_a_tensor_written_through_a_view_keeps_its_layout_for_later_reads(fn):
    # eager's in-place write leaves the tensor's memory as it was; the out-of-place op
    # functionalization puts in its place lays its result out as it likes (contiguous for the
    # transposed view), and the tensor regenerated from it, and what is computed from it, came
    # out transposed
    x = torch.randn(3, 2)
    out = torch.compile(fn, backend="solder")(x.clone())
    ref = fn(x.clone())
    torch.testing.assert_close(out, ref)
    assert out.stride() == ref.stride()


@pytest.mark.parametrize("write", [
    lambda a: a.mT.logical_not_(),                 # seeds 311064, 312400
    lambda a: a[:, ::2].logical_not_(),            # seed 311160
    lambda a: a.unbind(1)[1][1:].logical_not_(),   # seed 311907: a multi-output view
], ids=["transposed", "strided", "unbind"])
def test_an_in_place_op_of_another_result_dtype_keeps_eagers_autograd(write):
    # logical_not_ of a float tensor writes 0 and 1 and has no derivative; the layout rewrite
    # above, whose copy_ has one, must leave it alone (the gradient came out 0 where eager's is
    # NaN, and autograd refused the copy into a multi-output view that eager writes)
    def fn(a):
        write(a)
        return a * 2

    leaf = torch.randn(4, 3, requires_grad=True)
    outs = []
    for f in (fn, torch.compile(fn, backend="solder")):
        leaf.grad = None
        a = leaf.clone()
        out = f(a)
        out.sum().backward()
        outs.append((out.detach(), leaf.grad.clone()))
        torch._dynamo.reset()
    torch.testing.assert_close(outs[1], outs[0], equal_nan=True)


@pytest.mark.parametrize("call", [
    lambda v: v.reshape(-1), lambda v: v.flatten(), lambda v: torch.reshape(v, (-1,)),
    lambda v: v.ravel(), lambda v: v.contiguous().view(-1),
], ids=["reshape", "flatten", "torch.reshape", "ravel", "contiguous"])
def test_a_reshape_that_copies_in_eager_copies_when_its_input_requires_grad(call):
    # fuzz seed 452986: AOTAutograd traces a written input that requires grad through a dense
    # clone of it; on the clone, the reshape of the sliced input's row was a view, and the write
    # through it reached the input, which eager's copy never does
    def fn(a):
        v = a[0].sigmoid_()
        call(v)[1:] += 1.0
        return a * 2

    leaf = torch.randn(1, 3, 5, requires_grad=True)
    outs = []
    for f in (fn, torch.compile(fn, backend="solder")):
        leaf.grad = None
        a = leaf.clone()[:, :, 1::2]
        out = f(a)
        out.sum().backward()
        outs.append((out.detach(), a.detach(), leaf.grad.clone()))
        torch._dynamo.reset()
    torch.testing.assert_close(outs[1], outs[0])


@pytest.mark.parametrize("dtype", [torch.int32, torch.float32])
def test_a_view_of_an_output_without_grad_is_its_view_after_a_training_graph(dtype):
    # fuzz seed 460140: AOTAutograd regenerates an output that views another only where both
    # require grad; ours, a view without autograd's bookkeeping, reached the next graph, which
    # writes one of the two, as two inputs sharing memory but not views of each other
    def fn(x, w):
        v = x.abs()
        vt = v.t()
        y = w * 2
        torch._dynamo.graph_break()
        v.diagonal().copy_(5)     # (the second graph is a training graph too)
        return y * w, vt * 1

    x = torch.randint(-8, 9, (3, 3)).to(dtype)
    w = torch.randn(3, requires_grad=True)
    ref = fn(x, w)
    out = torch.compile(fn, backend="solder")(x, w)
    torch.testing.assert_close(out, ref)
    out[0].sum().backward()
    torch.testing.assert_close(w.grad, 4 * w.detach())


def test_a_value_returned_twice_is_one_tensor_for_the_next_graph():
    # fuzz seed 730308: a graph returned one view twice (``v1`` and ``v1.contiguous()``, the
    # stack at a graph break) as two tensors on one storage that were not views of each other;
    # the next graph writes one of them, and AOTAutograd refused the two inputs (there an
    # as_strided_scatter read ``s``, whose eager backward is wrong: s * 2 + 1 here)
    def fn(a0, a1):
        v1 = a0.repeat(1)
        s = v1.contiguous()
        torch._dynamo.graph_break()
        v2 = s * 2 + 1
        v1.reshape(-1).add_(a1)
        return v2 * 2, v1 * 3
    grads = []
    for f in (fn, torch.compile(fn, backend="solder")):
        a0 = torch.tensor([0.5, -1.0, 2.0], requires_grad=True)
        a1 = torch.tensor([0.25], requires_grad=True)
        outs = f(a0, a1)
        sum(o.sum() for o in outs).backward()
        grads.append([o.detach() for o in outs] + [a0.grad, a1.grad])
    torch.testing.assert_close(grads[1], grads[0])


@pytest.mark.parametrize("write", [
    lambda e, v: e.diagonal().copy_(v),          # fuzz seed 995506
    lambda e, v: e.select(0, 0).copy_(v),
    lambda e, v: e[:1, :, 2:5].fill_(1),
], ids=["diagonal", "select", "slice"])
@pytest.mark.parametrize("dtype", [torch.bool, torch.float32, torch.int32])
def test_a_write_through_a_view_of_an_expanded_input_writes_what_the_program_wrote(write, dtype):
    # functionalized, the write goes back through the expanded view: two elements per place,
    # the written one and an old copy; the old one must not win (capture/overlapping_writes.py)
    def fn(a, v):
        e = a.expand(2, -1, 6)
        torch._dynamo.graph_break()   # the next graph gets the expanded view as an input
        before = a.clone()
        write(e, v)
        return before

    torch.manual_seed(0)
    a = (torch.randn(1, 6) > 0).to(dtype)
    v = torch.tensor([True]).to(dtype)
    for _ in range(2):
        ref_a, got_a = a.clone(), a.clone()
        ref = fn(ref_a, v)
        got = torch.compile(fn, backend="solder")(got_a, v)
        torch._dynamo.reset()
        assert torch.equal(got, ref) and torch.equal(got_a, ref_a), (got_a, ref_a)
        a = (1 - a.int()).to(dtype)
