"""check_indices: out-of-range index tensors raise as in eager (a fused reduction and an
asynchronous assert), by default; turned off, they read 0 / are skipped."""
import pytest
import torch
import torch.nn.functional as F

import solder

ON = {"check_indices": True}
OFF = {"check_indices": False}
T = lambda data: torch.tensor(data, device=torch.get_default_device())  # noqa: E731

CASES = {   # fn, an index out of range, an index in range (negative where eager wraps)
    "gather": (lambda x, i: torch.gather(x, 0, i), [[0, 1, 2, 5]], [[0, 1, 2, 4]]),
    "gather_negative": (lambda x, i: torch.gather(x, 0, i), [[0, -1, 2, 3]], [[0, 1, 2, 3]]),
    "index": (lambda x, i: x[i] * 2, [0, -6, 3], [0, -5, 4]),
    "index_select": (lambda x, i: x.index_select(1, i), [0, 4], [0, 3]),
    "embedding": (lambda x, i: F.embedding(i, x), [[1, 5]], [[1, 4]]),
    "index_put": (lambda x, i: x.index_put((i,), torch.ones(2, 4, device=x.device)), [1, 6],
                  [1, -5]),
    "scatter": (lambda x, i: x.scatter(0, i, 2.0), [[0, 9, 1, 1]], [[0, 4, 1, 1]]),
    "scatter_add": (lambda x, i: x.scatter_add(0, i, torch.ones_like(i, dtype=x.dtype)),
                    [[0, -1, 1, 1]], [[0, 4, 1, 1]]),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_out_of_range_raises_and_in_range_matches_eager(name):
    if torch.cuda.is_available():
        pytest.skip("on the GPU a failed check is a device-side assert, which ends the process")
    fn, bad, good = CASES[name]
    x = torch.randn(5, 4)
    compiled = torch.compile(fn, backend="solder", options=ON)
    torch.testing.assert_close(compiled(x, T(good)), fn(x, T(good)))
    with pytest.raises(RuntimeError, match="index out of range"):
        compiled(x, T(bad))


def test_the_check_fuses_into_the_gather_kernel_and_is_on_by_default():
    x, i = torch.randn(5, 4), T([[0, 1, 2, 3]])
    default = solder.explain(lambda x, i: torch.gather(x, 0, i) + 1, x, i)
    off = solder.explain(lambda x, i: torch.gather(x, 0, i) + 1, x, i, options=OFF)
    assert default.kernel_count == off.kernel_count == 1
    assert "index check" in default.graphs[0].wrapper
    assert "index check" not in off.graphs[0].wrapper
    assert not default.fallbacks


@pytest.mark.parametrize("name", ["index", "gather"])
def test_a_user_out_of_range_index_raises_by_default(name):
    # x[tensor([0, 7])] on a size-4 tensor: eager raises IndexError, so must Solder
    if torch.cuda.is_available():
        pytest.skip("on the GPU a failed check is a device-side assert, which ends the process")
    fn = {"index": lambda x, i: x[i], "gather": lambda x, i: torch.gather(x, 0, i)}[name]
    x, i = torch.randn(4), T([0, 7])
    with pytest.raises(Exception):
        fn(x, i)
    with pytest.raises(RuntimeError, match="index out of range"):
        torch.compile(fn, backend="solder")(x, i)


def test_off_an_out_of_range_gather_reads_zero():
    fn = lambda x, i: torch.gather(x, 0, i)  # noqa: E731
    out = torch.compile(fn, backend="solder", options=OFF)(torch.ones(4), T([0, 7]))
    assert out.tolist() == [1.0, 0.0]


def test_a_scatter_pays_one_reduction_kernel_for_its_check():
    def fn(a, b, i):
        return torch.index_put(a, (i,), b.abs())
    args = (torch.randn(4, 6), torch.randn(3, 6), T([0, 2, 3]))
    default = solder.explain(fn, *args)
    off = solder.explain(fn, *args, options=OFF)
    assert default.kernel_count == off.kernel_count + 1
    assert "index check" in default.graphs[0].wrapper


def test_a_backward_trusts_the_indices_the_forward_checked():
    # embedding's backward scatters into the weight's gradient through the forward's indices,
    # which the forward's gather checked: no second check
    w = torch.randn(10, 4, requires_grad=True)
    report = solder.explain(lambda w, i: F.embedding(i, w).sum(), w, T([[1, 9], [0, 3]]))
    forward = [g for g in report.graphs if g.kind == "forward"]
    backward = [g for g in report.graphs if g.kind == "backward"]
    assert "index check" in forward[0].wrapper
    assert "index check" not in backward[0].wrapper


@pytest.mark.parametrize("fn,checked", [
    (lambda x, i: x[i.clamp(0, 4)], False),
    (lambda x, i: x[i.abs() % 5], False),
    (lambda x, i: x[torch.where(i > 2, i.clamp(max=4), 0).clamp(min=-5)], False),
    (lambda x, i: x[i.clamp(0, 5)], True),        # 5 is out of range for a size-5 dim
    (lambda x, i: x[i + 1], True),
])
def test_indices_in_range_by_construction_are_not_checked(fn, checked):
    x, i = torch.randn(5), T([0, 3, 1, 2])
    report = solder.explain(fn, x, i)
    assert ("index check" in report.graphs[0].wrapper) == checked
    torch.testing.assert_close(torch.compile(fn, backend="solder")(x, T([0, 3, 7, -2]).clamp(
        -5, 3)), fn(x, T([0, 3, 7, -2]).clamp(-5, 3)))


@pytest.mark.parametrize("fn,x", [
    (lambda x, i: x[i], torch.zeros(1, 0)),
    (lambda x, i: torch.index_put(x, (i,), torch.zeros(1, 1, 0, device=x.device), True),
     torch.zeros(1, 1, 0)),
])
def test_an_index_that_moves_no_element_is_not_checked(fn, x):
    # eager checks an index where it reads or writes an element: none here
    i = T([5])
    if x.is_cuda and x.dim() == 3:
        pytest.skip("eager's CUDA index_put with accumulate checks the index on the device "
                    "(an assert that leaves the process's GPU context unusable)")
    ref = fn(x, i)
    out = torch.compile(fn, backend="solder")(x, i)
    assert out.shape == ref.shape
