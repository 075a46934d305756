"""User Triton kernels inside compiled graphs: eager semantics and the copies kept, on the CPU.

The matrix of the issue: (1) the kernel mutates a graph input, (2) a view of a graph input,
(3) the graph returns a view or alias of a mutated argument, (4) the same tensor is passed as two
arguments; each under (a) an inference graph, (b) a training graph whose kernel arguments do not
require grad, (c) a training graph whose kernel arguments require grad (the kernel inside a
torch.autograd.Function). Every case runs with ``solder`` and with ``solder_debug``.
"""
import pytest
import torch

from .user_kernel_support import (add_one, compare, functional_launch, launch,
                                  neighbor_sum_kernel, opaque_kernel, strided_args,
                                  add_one_kernel)


def neighbor_sum(x, out):
    launch(neighbor_sum_kernel, (1,), x, out, x.numel(), BLOCK=16)


# --- (a) inference -------------------------------------------------------------------------------

def a1_input(x, out):
    add_one(x * 2, out)
    return out * 3


def a2_view_of_input(x, out):
    add_one(x * 2, out[:, 1])
    return out.sum(1)


def a3_returns_aliases(x, out):
    y = torch.empty_like(x)
    add_one(x, y)
    add_one(y, out)
    return y[2:], y.view(2, 4), out, out[1:]


def a4_same_tensor_twice(x):
    y = x * 2
    neighbor_sum(y, y)
    return y, y[::2]


def a4_input_twice(x):
    neighbor_sum(x, x)
    return x * 1


# --- (b) training; the kernel's arguments do not require grad -----------------------------------

def b1_input(x, w, out):
    add_one(x, out)
    return (w * out).sum(), w * 2


def b2_view_of_input(x, w, out):
    add_one(x * 2, out[:, 1])
    return (w * out[:, 1]).sum(), out.sum()


def b3_returns_aliases(x, w):
    y = torch.empty_like(x)
    add_one(x, y)
    return y[2:] * w[2:], y.view(2, 4), y


def b4_same_tensor_twice(x, w):
    y = x * 2
    neighbor_sum(y, y)
    return (y * w).sum(), y


# --- (c) training; the kernel's arguments require grad -------------------------------------------

class AddOneTrack(torch.autograd.Function):
    """y = x + 1, and ``stats`` (no grad) updated in place, like running statistics."""
    @staticmethod
    def forward(ctx, x, stats):
        y = torch.empty_like(x)
        add_one(x, y)
        add_one(x, stats)
        return y

    @staticmethod
    def backward(ctx, g):
        return g, None


class AddOneInPlace(torch.autograd.Function):
    """x += 1 with the kernel reading and writing the same tensor."""
    @staticmethod
    def forward(ctx, x):
        add_one(x, x)
        ctx.mark_dirty(x)
        return x

    @staticmethod
    def backward(ctx, g):
        return g


class NeighborSum(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        out = torch.empty_like(x)
        neighbor_sum(x, out)
        return out

    @staticmethod
    def backward(ctx, g):
        # g[j] + g[j - 1], by the same kernel: a launch in the backward graph
        out = torch.empty_like(g)
        neighbor_sum(torch.roll(g, 1), out)
        return out


def c1_input(x, stats):
    return AddOneTrack.apply(x * 2, stats) * 3


def c2_view_of_input(x, stats):
    return AddOneTrack.apply(x * 2, stats[:, 1]).sin()


def c3_returns_aliases(x):
    y = NeighborSum.apply(x)
    z = AddOneInPlace.apply(x * 2)
    return y[2:], y.view(2, 4), z[1:], z.view(4, 2)


def c4_same_tensor_twice(x):
    z = AddOneInPlace.apply(x.sin())
    return z * 2, z[::2]


def _r(*s):
    return torch.randn(*s)


def _g(*s):
    return torch.randn(*s, requires_grad=True)


CASES = {
    "a1": (a1_input, lambda: [_r(8), _r(8)], False),
    "a2": (a2_view_of_input, lambda: [_r(8), _r(8, 2)], False),
    "a3": (a3_returns_aliases, lambda: [_r(8), _r(8)], False),
    "a4": (a4_same_tensor_twice, lambda: [_r(8)], False),
    "a4_input": (a4_input_twice, lambda: [_r(8)], False),
    "b1": (b1_input, lambda: [_r(8), _g(8), _r(8)], True),
    "b2": (b2_view_of_input, lambda: [_r(8), _g(8), _r(8, 2)], True),
    "b3": (b3_returns_aliases, lambda: [_r(8), _g(8)], True),
    "b4": (b4_same_tensor_twice, lambda: [_r(8), _g(8)], True),
    "c1": (c1_input, lambda: [_g(8), _r(8)], True),
    "c2": (c2_view_of_input, lambda: [_g(8), _r(8, 2)], True),
    "c3": (c3_returns_aliases, lambda: [_g(8)], True),
    "c4": (c4_same_tensor_twice, lambda: [_g(8)], True),
}


@pytest.mark.parametrize("debug", [False, True], ids=["solder", "solder_debug"])
@pytest.mark.parametrize("case", sorted(CASES))
def test_matrix(case, debug):
    fn, make_args, grad = CASES[case]
    torch.manual_seed(0)
    compiled = compare(fn, *make_args(), grad=grad, debug=debug)
    if debug:
        return
    assert compiled.user_kernels, "the kernel did not reach Solder's wrapper"
    for g in compiled.ctx.graphs:
        for r in g.user_kernels:
            if g.kind != "backward":
                # eager semantics need no copy of any argument in these programs
                assert "clone kept" not in r, r
            else:
                # c3: the partitioner saved the forward's ``empty`` for the backward's
                # empty_like (CSE merged them); a saved tensor may serve another backward
                # (retain_graph), so the kernel gets a copy of it
                assert "clone kept" not in r or "graph input" in r, r


def test_inference_graph_under_no_grad():
    with torch.no_grad():
        compiled = compare(b1_input, _r(8), _g(8), _r(8))
    assert [g.kind for g in compiled.ctx.graphs] == ["inference"]


def test_graph_input_written_in_place_has_no_copy_back():
    compiled = compare(a1_input, _r(8), _r(8))
    src = compiled.wrapper()
    assert "out_ptr=arg1" in src          # the kernel writes the caller's tensor itself
    assert src.count("K[") == 2           # x * 2 before, out * 3 after: no copy, no copy-back


def test_view_of_input_scatters_nothing_back():
    compiled = compare(a2_view_of_input, _r(8), _r(8, 2))
    src = compiled.wrapper()
    assert "out_ptr=R(arg1, (8,), (2,)" in src
    assert src.count("K[") == 2


def test_fresh_empty_output_is_only_allocated():
    def f(x):
        out = torch.empty_like(x)
        add_one(x, out)
        return out
    src = compare(f, _r(8)).wrapper()
    assert "K[" not in src                # neither filled nor copied


# --- copies that semantics need ------------------------------------------------------------------

def test_argument_read_again_later_keeps_its_clone():
    """A functional graph (as torch.export writes it) that reads the input after the kernel."""
    def f(x, out):
        r = functional_launch(add_one_kernel, (1,), ["out_ptr"], x_ptr=x, out_ptr=out,
                              BLOCK=16, **strided_args(x, out))
        return r["out_ptr"], out * 1
    compiled = compare(f, _r(8), _r(8))
    (report,) = compiled.user_kernels
    assert "out_ptr: clone kept" in report and "reads the old value" in report


def test_same_tensor_twice_with_old_value_read_shares_one_clone():
    def f(x):
        y = x * 2
        r = functional_launch(neighbor_sum_kernel, (1,), ["x_ptr", "out_ptr"], x_ptr=y,
                              out_ptr=y, n=8, BLOCK=16)
        return r["out_ptr"], y + 1
    compiled = compare(f, _r(8))
    (report,) = compiled.user_kernels
    assert "clone kept" in report
    fx_graph = compiled.ctx.graphs[0].fx_graph
    assert fx_graph.count("user_kernel_arg_clone(") == 1   # one tensor to the kernel, as in eager


def test_input_the_caller_sees_updated_and_also_reads_keeps_its_clone():
    def f(x, out):
        r = functional_launch(add_one_kernel, (1,), ["out_ptr"], x_ptr=x, out_ptr=out,
                              BLOCK=16, **strided_args(x, out))
        before = out.sum()
        out.copy_(r["out_ptr"])
        return before
    compiled = compare(f, _r(8), _r(8))
    (report,) = compiled.user_kernels
    assert "clone kept" in report


def test_uncertain_analysis_counts_every_argument_written_and_warns_once():
    import solder.capture.reinplace as reinplace
    reinplace._WARNED.discard(reinplace.kernel_label(opaque_kernel))

    def f(x, out):
        r = functional_launch(opaque_kernel, (1,), ["out_ptr"], x_ptr=x, out_ptr=out, n=8,
                              BLOCK=16)
        return r["out_ptr"] + x
    with pytest.warns(UserWarning, match="cannot tell which arguments") as caught:
        compiled = compare(f, _r(8), _r(8))
        compare(f, _r(8), _r(8))
    assert sum("opaque_kernel" in str(w.message) for w in caught) == 1
    (report,) = compiled.user_kernels
    assert "analysis uncertain" in report
    assert "x_ptr: clone kept" in report      # counted as written, and read again after


# --- ordering around in-place writes -------------------------------------------------------------

def test_value_computed_before_the_launch_keeps_the_old_contents():
    def f(x, out):
        before = out * 3            # pointwise, lazily computed in Solder: must run first
        add_one(x, out)
        return before + out, before
    compiled = compare(f, _r(8), _r(8))
    assert all("clone kept" not in r for r in compiled.user_kernels)


def test_two_views_of_one_tensor_as_two_arguments():
    def f(x, out):
        add_one(out[:, 0], out[:, 1])       # reads one column, writes the other, in place
        add_one(x, out[:, 0])
        return out.sum(0)
    compiled = compare(f, _r(8), _r(8, 2))
    assert all("clone kept" not in r for r in compiled.user_kernels)


def test_unreinplaced_functional_calls_lower_too(monkeypatch):
    """Without the capture pass, the functional op is lowered as it stands: a copy per written
    tensor (one for a tensor passed twice), the launch on the copies."""
    import solder.capture.reinplace as reinplace
    monkeypatch.setattr(reinplace, "reinplace_user_kernels", lambda gm: False)
    for fn, args in [(a1_input, [_r(8), _r(8)]), (a2_view_of_input, [_r(8), _r(8, 2)]),
                     (a3_returns_aliases, [_r(8), _r(8)]), (a4_same_tensor_twice, [_r(8)])]:
        compiled = compare(fn, *args)
        assert all("clone kept: functional call not reinplaced" in r
                   for r in compiled.user_kernels)


# --- several writes to one tensor ----------------------------------------------------------------

def s1_two_kernels_one_input(x, out):
    add_one(x, out)
    a = out * 2
    add_one(out, out)
    return a, out


def s2_views_read_between(x, out):
    v = out[2:6]
    add_one(x[:4], v)
    b = out.sum()
    add_one(v, out[:4])
    return b, v * 1, out


def s3_snapshot_between(x):
    y = x * 2
    add_one(x, y)
    z = y * 1
    add_one(y, y)
    return z, y


def s4_overwritten_after(x, out):
    add_one(x, out)
    out.add_(1)                 # the input's final value comes from an ordinary op
    add_one(out, x)
    return x * 1


def s5_empty_written_twice(x):
    buf = torch.empty(8)
    add_one(x, buf)
    r1 = buf * 1
    add_one(r1, buf)
    return r1, buf


def s6_clones_between(x, out):
    a = out.clone()
    add_one(x, out)
    b = out.clone()
    neighbor_sum(b, out)
    return a, b, out


SEQUENCES = [s1_two_kernels_one_input, s2_views_read_between, s3_snapshot_between,
             s4_overwritten_after, s5_empty_written_twice, s6_clones_between]


@pytest.mark.parametrize("debug", [False, True], ids=["solder", "solder_debug"])
@pytest.mark.parametrize("fn", SEQUENCES, ids=[f.__name__ for f in SEQUENCES])
def test_several_writes_keep_program_order(fn, debug):
    args = [_r(8), _r(8)][:fn.__code__.co_argcount]
    compiled = compare(fn, *args, debug=debug)
    if not debug:
        assert all("clone kept" not in r for r in compiled.user_kernels), compiled.user_kernels
