"""sort / topk / argsort along short rows: counting reductions and a gather, eager's order
(NaN largest; a stable order among ties where eager's is stable)."""
import pytest
import torch

import solder

from .helpers import check


def _rows():
    torch.manual_seed(0)
    x = torch.randn(3, 7, 5)
    x[0, 2, 1] = float("nan")
    x[1, 3, 2] = x[1, 4, 2]       # a tie along dim 1
    x[2, 0, 4] = float("-inf")
    return x


@pytest.mark.parametrize("fn", [
    lambda x: torch.sort(x, dim=1, stable=True),
    lambda x: torch.sort(x, dim=-1, stable=True, descending=True),
    lambda x: torch.argsort(x, dim=0, stable=True),
    lambda x: torch.topk(x * 2, 3, dim=1),
    lambda x: torch.topk(x, 2, dim=-1, largest=False),
], ids=["sort", "sort_descending", "argsort", "topk", "topk_smallest"])
def test_values_and_indices_match_eager(fn):
    report = check(fn, _rows())
    assert not report.fallbacks, report.fallbacks


def test_expert_routing_is_lowered_and_its_gradient_matches():
    logits = torch.randn(16, 8, requires_grad=True)

    def route(logits):
        weights, experts = torch.topk(logits.softmax(-1), 2)
        return weights / weights.sum(-1, keepdim=True), experts
    report = check(route, logits, grad=True)
    assert not report.fallbacks, report.fallbacks


def test_long_rows_fall_back_with_a_reason():
    report = check(lambda x: torch.sort(x), torch.randn(2, 2000))
    assert [f.op for f in report.fallbacks] == ["aten.sort"]
    assert "quadratic" in report.fallbacks[0].reason


def _check_selection(fn, x, dim, scale=1):
    """Values as eager's; an index is eager's on the CPU, and on the GPU any index of an equal
    element (CUDA's kernel picks one of several tied elements without a fixed rule)."""
    if x.device.type == "cpu":
        return check(fn, x)
    ref = fn(x.clone())
    torch._dynamo.reset()
    out = torch.compile(fn, backend="solder")(x.clone())
    torch.testing.assert_close(out.values, ref.values, equal_nan=True)
    idx = out.indices if out.indices.dim() == x.dim() else out.indices.unsqueeze(dim)
    picked = (x * scale).gather(dim, idx).reshape(out.values.shape)
    torch.testing.assert_close(picked, out.values, equal_nan=True)
    report = solder.explain(fn, x.clone())
    return report


@pytest.mark.parametrize("fn,dim,scale", [
    (lambda x: torch.kthvalue(x, 3, dim=1), 1, 1),
    (lambda x: torch.kthvalue(x, 5, dim=-1, keepdim=True), -1, 1),
    (lambda x: torch.median(x, dim=1), 1, 1),
    (lambda x: torch.median(x * 2, dim=0, keepdim=True), 0, 2),
], ids=["kthvalue", "kthvalue_keepdim", "median", "median_keepdim"])
def test_rank_selections_match_eager_nan_included(fn, dim, scale):
    x = _rows()
    x[2, 5, 3] = float("nan")     # a second NaN row/column for the median's NaN rule
    report = _check_selection(fn, x, dim, scale)
    assert not report.fallbacks, report.fallbacks


def test_median_of_integers():
    _check_selection(lambda x: torch.median(x, dim=-1), torch.randint(-5, 5, (4, 6)), -1)


def test_rows_of_one_element():
    x = torch.randn(4, 1)
    check(lambda x: (torch.sort(x, -1), torch.topk(x, 1), torch.median(x, -1),
                     torch.kthvalue(x, 1, -1, keepdim=True), torch.quantile(x, 0.3, dim=-1)), x)


def test_views_of_sorted_values_use_eager_strides():
    # quantile over dim 0 sorts a permuted input, then views the sorted values: the view's
    # strides are eager's for that output
    x = torch.randn(3, 5)
    check(lambda x: (torch.quantile(x, 0.5, dim=0), torch.sort(x.t(), -1).values.reshape(15)), x)


def test_nanmedian_skips_nan():
    # (a row of NaN only is left out: which index eager returns for it depends on the shape)
    nan = float("nan")
    x = torch.tensor([[1., nan, 0., nan, 2.], [nan, nan, 6., nan, nan], [3., 1., 2., 5., 4.],
                      [nan, 4., nan, 1., 7.]])
    report = check(lambda x: (torch.nanmedian(x, dim=1), torch.nanmedian(x.t(), 0, keepdim=True)), x)
    assert not report.fallbacks, report.fallbacks


@pytest.mark.parametrize("fn", [
    lambda x, b: torch.bucketize(x, b),
    lambda x, b: torch.bucketize(x * 1, b, right=True, out_int32=True),
    lambda x, b: torch.searchsorted(b, x, side="right"),
    lambda x, b: torch.searchsorted(torch.stack([b, b * 2]), x),
], ids=["bucketize", "bucketize_right_int32", "searchsorted_side", "searchsorted_rows"])
def test_searching_sorted_boundaries_matches_eager(fn):
    b = torch.tensor([1., 3., 5., 7.])
    x = torch.tensor([[0., 1., 2., 3.], [7., 8., float("nan"), float("-inf")]])
    report = check(fn, x, b)
    assert not report.fallbacks, report.fallbacks
