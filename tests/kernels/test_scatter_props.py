"""Property tests: random sizes, strides, storage offsets and index tensors for each scatter op,
compared with eager (values, and the caller's tensors after in-place forms).

A few examples per property by default; ``--runslow`` runs many more."""
import itertools

import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from .helpers import assert_same, clone_args

QUICK = settings(max_examples=4, deadline=None, derandomize=True,
                 suppress_health_check=list(HealthCheck))
MANY = settings(max_examples=60, deadline=None, suppress_health_check=list(HealthCheck))
DTYPES = [torch.float32, torch.bfloat16, torch.int64]


def both(prop):
    """The property as a quick test and as a slow one with many examples. Each example seeds
    torch's generator from the drawn data, so the tensors are as reproducible as the draws."""
    def seeded(data):
        torch.manual_seed(data.draw(st.integers(0, 2**32 - 1), label="torch seed"))
        prop(data)
    seeded.__name__ = prop.__name__
    quick = QUICK(given(data=st.data())(seeded))
    slow = pytest.mark.slow(MANY(given(data=st.data())(seeded)))
    return quick, slow


def compare(fn, *args, **tol):
    torch._dynamo.reset()
    eager_args, solder_args = clone_args(args), clone_args(args)
    ref = fn(*eager_args)
    out = torch.compile(fn, backend="solder")(*solder_args)
    assert_same(out, ref, **tol)
    for a, b in zip(solder_args, eager_args):
        if isinstance(a, torch.Tensor):
            assert_same(a, b, **tol)


def values(shape, dtype):
    x = torch.randn(shape) * 4
    return x.to(dtype)


def draw_input(data, shape, dtype):
    """A tensor of ``shape`` laid out contiguous, permuted, sliced (offset) or expanded."""
    kind = data.draw(st.sampled_from(["contiguous", "permuted", "sliced", "expanded"]))
    if kind == "permuted" and len(shape) > 1:
        perm = data.draw(st.permutations(range(len(shape))))
        inv = [perm.index(d) for d in range(len(shape))]
        return values([shape[p] for p in perm], dtype).permute(inv)
    if kind == "sliced":
        big = values([n + 2 for n in shape], dtype)
        return big[tuple(slice(1, 1 + n) for n in shape)]
    if kind == "expanded" and shape and shape[0] > 1:
        return values([1] + list(shape[1:]), dtype).expand(*shape)
    return values(shape, dtype)


shapes = st.lists(st.integers(1, 5), min_size=1, max_size=3)


def _as_strided_scatter(data):
    shape = data.draw(shapes)
    numel = 1
    for n in shape:
        numel *= n
    dtype = data.draw(st.sampled_from(DTYPES))
    nd = data.draw(st.integers(1, 3))
    size = data.draw(st.lists(st.integers(1, 4), min_size=nd, max_size=nd))
    stride = data.draw(st.lists(st.integers(0, 6), min_size=nd, max_size=nd))
    span = sum((n - 1) * s for n, s in zip(size, stride))
    if span >= numel or any(n > 1 and s == 0 for n, s in zip(size, stride)):
        return  # out of range, or a stride-0 write (eager refuses it too)
    offset = data.draw(st.integers(0, numel - 1 - span))
    a, b = draw_input(data, shape, dtype), values(size, dtype)
    fn = lambda a, b: torch.as_strided_scatter(a * 2, b + 1, size, stride, offset)
    places = {}
    for j in itertools.product(*[range(n) for n in size]):
        places.setdefault(offset + sum(x * s for x, s in zip(j, stride)), []).append(j)
    if all(len(v) == 1 for v in places.values()):
        return compare(fn, a, b)
    # overlapping: where view elements share a place, any of them may win (as in eager)
    out = torch.compile(fn, backend="solder")(a.clone(), b.clone())
    exp = fn(a, b)
    flat_out = out.as_strided((numel,), (1,))  # the output is dense: storage order
    flat_base = exp.as_strided((numel,), (1,))
    src = b + 1
    for pos in range(numel):
        cands = [src[j] for j in places.get(pos, [])] or [flat_base[pos]]
        assert any(torch.equal(flat_out[pos], c.to(out.dtype)) for c in cands), pos


def _slice_select_diagonal(data):
    shape = data.draw(st.lists(st.integers(1, 5), min_size=2, max_size=3))
    dtype = data.draw(st.sampled_from(DTYPES))
    a = draw_input(data, shape, dtype)
    op = data.draw(st.sampled_from(["slice", "select", "diagonal", "nested"]))
    dim = data.draw(st.integers(0, len(shape) - 1))
    n = shape[dim]
    if op == "slice":
        start = data.draw(st.integers(-n, n))
        end = data.draw(st.integers(-n, n + 2))
        step = data.draw(st.integers(1, 3))
        src = a[(slice(None),) * dim + (slice(start, end, step),)]
        b = values(src.shape, dtype)
        fn = lambda a, b: torch.slice_scatter(a + 1, b * 2, dim, start, end, step)
    elif op == "select":
        index = data.draw(st.integers(-n, n - 1))
        b = values(a.select(dim, index).shape, dtype)
        fn = lambda a, b: torch.select_scatter(a + 1, b * 2, dim, index)
    elif op == "diagonal":
        d2 = data.draw(st.sampled_from([d for d in range(len(shape)) if d != dim]))
        offset = data.draw(st.integers(-shape[dim], shape[d2]))
        b = values(a.diagonal(offset, dim, d2).shape, dtype)
        fn = lambda a, b: torch.diagonal_scatter(a + 1, b * 2, offset, dim, d2)
    else:  # a select_scatter inside a slice_scatter on one base: one pass
        index = data.draw(st.integers(0, n - 1))
        other = (dim + 1) % len(shape)
        start = data.draw(st.integers(0, shape[other] - 1))
        inner = a.narrow(other, start, shape[other] - start)
        b = values(inner.select(dim, index).shape, dtype)

        def fn(a, b):
            view = a.narrow(other, start, shape[other] - start)
            return torch.slice_scatter(a, torch.select_scatter(view, b, dim, index), other, start)
    compare(fn, a, b)


def _index_put(data):
    shape = data.draw(st.lists(st.integers(1, 5), min_size=1, max_size=3))
    dtype = data.draw(st.sampled_from(DTYPES))
    accumulate = data.draw(st.booleans())
    a = draw_input(data, shape, dtype)
    nidx = data.draw(st.integers(1, len(shape)))
    dims = sorted(data.draw(st.permutations(range(len(shape))))[:nidx])
    count = data.draw(st.integers(1, 6))
    if accumulate:  # duplicates accumulate
        idx = [torch.tensor(data.draw(st.lists(st.integers(-shape[d], shape[d] - 1),
                                               min_size=count, max_size=count))) for d in dims]
    else:  # unique places: with duplicates eager's winner is unspecified
        places = list(itertools.product(*[range(shape[d]) for d in dims]))
        chosen = data.draw(st.lists(st.sampled_from(places), min_size=1, max_size=count,
                                    unique=True))
        idx = [torch.tensor([p[k] for p in chosen]) for k in range(len(dims))]
    key = [None] * len(shape)
    for d, t in zip(dims, idx):
        key[d] = t
    probe = torch.empty(shape)
    sel = probe[tuple(slice(None) if k is None else k for k in key)]
    vshape = list(sel.shape)
    if data.draw(st.booleans()) and vshape:  # broadcast values over leading dims
        vshape = vshape[data.draw(st.integers(0, len(vshape))):]
        if len(vshape) < len(sel.shape):
            vshape = [1] * data.draw(st.integers(0, 1)) + vshape
    b = values(vshape, dtype)

    def fn(a, b, *idx):
        k = [None] * len(shape)
        for d, t in zip(dims, idx):
            k[d] = t
        return torch.ops.aten.index_put.default(a * 1, k, b, accumulate)
    compare(fn, a, b, *idx)


def _scatter(data):
    shape = data.draw(st.lists(st.integers(1, 4), min_size=1, max_size=3))
    dtype = data.draw(st.sampled_from(DTYPES))
    dim = data.draw(st.integers(0, len(shape) - 1))
    reduce = data.draw(st.sampled_from([None, "sum", "mean", "amax", "amin"]))
    include_self = data.draw(st.booleans())
    if reduce == "mean" and dtype == torch.bfloat16:
        dtype = torch.float32  # eager divides in bfloat16; close, not equal
    a = draw_input(data, shape, dtype)
    ishape = [data.draw(st.integers(1, n)) for n in shape]
    if reduce is None:  # unique places along dim
        ishape[dim] = data.draw(st.integers(1, shape[dim]))
        rows = [torch.randperm(shape[dim])[:ishape[dim]] for _ in range(max(1, _numel(ishape) // ishape[dim]))]
        index = torch.stack(rows, -1).reshape([ishape[dim]] + [n for d, n in enumerate(ishape) if d != dim])
        index = index.movedim(0, dim).contiguous()
    else:
        index = torch.randint(0, shape[dim], ishape)
    src = values([n + data.draw(st.integers(0, 1)) for n in ishape], dtype)
    if reduce is None:
        fn = lambda a, i, s: torch.scatter(a + 1, dim, i, s * 2)
    else:
        fn = lambda a, i, s: torch.scatter_reduce(a + 1, dim, i, s * 2, reduce, include_self=include_self)
    compare(fn, a, index, src)


def _numel(shape):
    out = 1
    for n in shape:
        out *= n
    return out


def _index_ops(data):
    shape = data.draw(st.lists(st.integers(1, 5), min_size=1, max_size=3))
    dtype = data.draw(st.sampled_from(DTYPES))
    dim = data.draw(st.integers(0, len(shape) - 1))
    a = draw_input(data, shape, dtype)
    op = data.draw(st.sampled_from(["index_copy", "index_add", "masked_scatter", "gather",
                                    "index_select"]))
    n = shape[dim]
    if op == "index_copy":
        k = data.draw(st.integers(1, n))
        index = torch.randperm(n)[:k]
        src = values(shape[:dim] + [k] + shape[dim + 1:], dtype)
        compare(lambda a, i, s: (a + 1).index_copy(dim, i, s), a, index, src)
    elif op == "index_add":
        k = data.draw(st.integers(1, 6))
        index = torch.randint(0, n, (k,))
        src = values(shape[:dim] + [k] + shape[dim + 1:], dtype)
        # eager rounds a bf16 slot after each of its (up to k) additions; Solder adds in fp32
        # and rounds once: allow one bf16 rounding per term
        tol = dict(rtol=1.6e-2 * k, atol=1.6e-2 * k) if dtype == torch.bfloat16 else {}
        compare(lambda a, i, s: (a + 1).index_add(dim, i, s, alpha=2), a, index, src, **tol)
    elif op == "masked_scatter":
        mask = torch.rand(shape[data.draw(st.integers(0, len(shape) - 1)):]) > 0.5
        src = values([_numel(shape) + data.draw(st.integers(0, 2))], dtype)
        compare(lambda a, m, s: (a + 1).masked_scatter(m, s), a, mask, src)
    elif op == "gather":
        ishape = [data.draw(st.integers(1, m)) for m in shape]
        ishape[dim] = data.draw(st.integers(1, 6))
        index = torch.randint(-n, n, ishape) % n
        compare(lambda a, i: torch.gather(a * 2, dim, i), a, index)
    else:
        index = torch.randint(0, n, (data.draw(st.integers(1, 6)),))
        compare(lambda a, i: torch.index_select(a * 2, dim, i), a, index)


def _inplace_through_views(data):
    shape = data.draw(st.lists(st.integers(1, 5), min_size=2, max_size=3))
    dtype = data.draw(st.sampled_from(DTYPES))
    x = draw_input(data, shape, dtype).contiguous() if data.draw(st.booleans()) else \
        values(shape, dtype)
    if data.draw(st.booleans()):  # a non-contiguous input
        x = values([shape[1], shape[0]] + shape[2:], dtype).transpose(0, 1)
    key = []
    for n in shape:
        kind = data.draw(st.sampled_from(["all", "index", "slice"]))
        if kind == "index":
            key.append(data.draw(st.integers(-n, n - 1)))
        elif kind == "slice":
            start = data.draw(st.integers(0, n - 1))
            key.append(slice(start, data.draw(st.integers(start + 1, n)), data.draw(st.integers(1, 2))))
        else:
            key.append(slice(None))
    key = tuple(key)
    y = values(x[key].shape, dtype)
    op = data.draw(st.sampled_from(["set", "mul_", "diag"]))

    def fn(x, y):
        if op == "set":
            x[key] = y
        elif op == "mul_":
            x[key].mul_(2)
        else:
            x.diagonal(0, 0, 1).copy_(torch.ones_like(x.diagonal(0, 0, 1)) * 3)
    compare(fn, x, y)


test_as_strided_scatter, test_as_strided_scatter_many = both(_as_strided_scatter)
test_slice_select_diagonal, test_slice_select_diagonal_many = both(_slice_select_diagonal)
test_index_put, test_index_put_many = both(_index_put)
test_scatter, test_scatter_many = both(_scatter)
test_index_ops, test_index_ops_many = both(_index_ops)
test_inplace_through_views, test_inplace_through_views_many = both(_inplace_through_views)
