"""On the GPU, a warm compiled graph launches its kernels through the compiled launcher directly:
no launch goes through Triton's Python launcher once every kernel has run once."""
import pytest
import torch

from solder.runtime import launch

pytestmark = pytest.mark.gpu


def test_steady_state_launches_skip_tritons_python_launcher():
    def f(x, w):
        h = torch.nn.functional.layer_norm(x, (x.shape[-1],)) * w[0]
        return (h.relu() @ w.t()).softmax(-1), h.sum(0)
    x, w = torch.randn(64, 128, device="cuda"), torch.randn(128, 128, device="cuda")
    compiled = torch.compile(f, backend="solder")
    for _ in range(3):
        compiled(x, w)
    before = launch.SLOW_LAUNCHES
    for _ in range(10):
        out = compiled(x, w)
    torch.cuda.synchronize()
    assert launch.SLOW_LAUNCHES == before, "launches went through Triton's Python launcher"
    for a, b in zip(out, f(x, w)):
        torch.testing.assert_close(a, b, rtol=1e-4, atol=1e-4)
