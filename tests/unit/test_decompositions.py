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
