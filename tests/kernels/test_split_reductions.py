"""Long reductions into few outputs run in two steps (lower/split_reductions.py): partial
results over chunks of the reduced elements, then their reduction; eager's values either way."""
import torch
import torch.nn.functional as F

import solder

from .helpers import check


def _partials_shape(report):
    # the first step's buffer is allocated by the wrapper as (S, *outputs)
    return [line for line in report.graphs[0].wrapper.splitlines() if "empty_strided" in line]


def test_column_sums_split_into_partials():
    x, y = torch.randn(4096, 16), torch.randn(4096, 16)
    r = check(lambda a, b: ((a * b).sum(0), (a * 2).amax(0)), x, y, kernels=2,
              rtol=1e-4, atol=1e-4)   # both partial steps in one kernel, both finals in one
    assert any("(16, 16)" in line for line in _partials_shape(r)), _partials_shape(r)


def test_a_whole_tensor_sum_splits_and_half_precision_accumulates_in_float32():
    x = torch.randn(1 << 17).to(torch.bfloat16)
    # a sum of 2^17 terms of size ~3: rounded to bfloat16 in the end, whatever the order
    r = check(lambda a: (a * 3).sum(), x, kernels=2, rtol=1e-2, atol=4.0)
    assert any("(128,)" in line and "float32" in line for line in _partials_shape(r)), \
        _partials_shape(r)


def test_short_reductions_and_many_outputs_stay_one_kernel():
    check(lambda a: a.sum(0), torch.randn(1024, 64), kernels=1, rtol=1e-4, atol=1e-4)
    check(lambda a: a.sum(1), torch.randn(512, 8192), kernels=1, rtol=1e-4, atol=1e-4)
    # a loss's mean over 8192 tokens: one program reads little, a second kernel would cost more
    check(lambda a: a.mean(), torch.randn(8192), kernels=1, rtol=1e-4, atol=1e-4)


def test_the_option_turns_it_off():
    f = lambda a: a.sum(0)   # noqa: E731
    x = torch.randn(4096, 16)
    assert solder.explain(f, x, options={"split_reductions": False}).kernel_count == 1
    assert solder.explain(f, x).kernel_count == 2


def test_layer_norm_weight_gradients_over_many_tokens():
    # the weight and bias gradients are column sums over the 4096 tokens
    x = torch.randn(4096, 16, requires_grad=True)
    w, b = torch.randn(16, requires_grad=True), torch.randn(16, requires_grad=True)
    check(lambda a, w, b: F.layer_norm(a, (16,), w, b), x, w, b, grad=True,
          rtol=1e-4, atol=1e-3)


def test_symbolic_sizes_are_not_split():
    f = lambda a: a.sum(0)   # noqa: E731
    r = solder.explain(f, torch.randn(4096, 16), dynamic=True)
    assert r.kernel_count == 1


def test_several_reduced_dims_and_keepdim():
    # the reduced index is unravelled over (4, 1024); keepdim keeps the output's shape
    x = torch.randn(4, 1024, 4)
    r = check(lambda a: (a.sum((0, 1), keepdim=True), a.amin((0, 1))), x, kernels=2,
              rtol=1e-4, atol=1e-3)
    assert any("(16, 1, 1, 4)" in line for line in _partials_shape(r)), _partials_shape(r)
    # argmax is not split (its partial results would need their indices too)
    assert solder.explain(lambda a: a.argmax(0), torch.randn(4096, 4)).kernel_count == 1
