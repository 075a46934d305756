"""capture/pool_offsets.py reads a max pool's window arguments in every form ATen takes."""
import torch
from torch.fx import Graph

from solder.capture.pool_offsets import _args

aten = torch.ops.aten


def test_window_arguments_in_every_form_aten_takes():
    g = Graph()
    x = g.placeholder("x")
    cases = [
        ((x, [3, 3], [2, 2], [1, 1]), {}, ([3, 3], [2, 2], [1, 1], [1, 1])),
        ((x, [3], [], 1), {}, ([3, 3], [3, 3], [1, 1], [1, 1])),   # empty stride: the kernel
        ((x, [3, 2]), {"padding": [1, 0], "dilation": 2}, ([3, 2], [3, 2], [1, 0], [2, 2])),
        ((x, [2, 2], [2, 2], [0, 0], [1, 1], True), {}, ([2, 2], [2, 2], [0, 0], [1, 1])),
    ]
    for args, kwargs, want in cases:
        node = g.call_function(aten.max_pool2d_with_indices.default, args, kwargs)
        assert _args(node)[0] is x
        assert _args(node)[1:] == want
