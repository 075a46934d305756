"""On a GPU: a loaded package launches the binaries it carries. A fresh process, with empty
Solder and Triton caches and Triton's compiler and JIT replaced by functions that raise, loads the
package and matches eager — at the exported sizes and at other sizes in the declared range (the
generic binaries)."""
import pytest
import torch

import solder.aot as aot
from solder.aot import tensors

from .helpers import MLP, run_without_compiler

pytestmark = pytest.mark.gpu

LOAD_AND_COMPARE = '''
path, kind, weights = sys.argv[1:4]
state = tensors.loads(open(weights, "rb").read())
if kind == "mlp":
    from tests.aot.helpers import MLP
    model = MLP()
    sizes = [(4, 16), (7, 16), (32, 16), (2, 16)]
    make = lambda s: torch.randn(*s, device="cuda")
else:
    from tests.aot.test_gpt2 import tiny_gpt2
    model = tiny_gpt2()
    sizes = [(2, 16), (5, 16)]
    make = lambda s: torch.randint(0, 128, s, device="cuda")
model.load_state_dict(state)
model = model.eval().cuda()
run = aot.load(path)
for s in sizes:
    x = make(s)
    with torch.no_grad():
        out, ref = run(x), model(x)
    torch.testing.assert_close(out, ref, rtol=1e-4, atol=1e-4)
print("OK", len(run.kernel_runners))
'''


def _run_without_compiler(path, kind, model, tmp_path):
    weights = tmp_path / "state.safetensors"
    weights.write_bytes(tensors.dumps(model.state_dict()))
    run_without_compiler(LOAD_AND_COMPARE, path, kind, weights)


def test_mlp_package_runs_without_the_triton_compiler(tmp_path):
    torch.manual_seed(0)
    model = MLP().eval().cuda()
    batch = torch.export.Dim("batch", min=2, max=32)
    path = aot.compile(model, (torch.randn(4, 16, device="cuda"),), tmp_path / "mlp.solder",
                       dynamic_shapes=({0: batch},))
    _run_without_compiler(path, "mlp", model, tmp_path)


def test_gpt2_package_runs_without_the_triton_compiler(tmp_path):
    pytest.importorskip("transformers")
    from .test_gpt2 import tiny_gpt2
    torch.manual_seed(0)
    model = tiny_gpt2().cuda()
    batch = torch.export.Dim("batch", min=1, max=8)
    ids = torch.randint(0, 128, (2, 16), device="cuda")
    path = aot.compile(model, (ids,), tmp_path / "gpt2.solder", dynamic_shapes=({0: batch},))
    _run_without_compiler(path, "gpt2", model, tmp_path)


def test_bf16_package_matches_jit(tmp_path):
    """The package's results are the JIT-compiled model's (bf16 rounding apart)."""
    torch.manual_seed(0)
    model = MLP().eval().cuda().bfloat16()
    x = torch.randn(8, 16, device="cuda", dtype=torch.bfloat16)
    path = aot.compile(model, (x,), tmp_path / "bf16.solder")
    jit = torch.compile(model, backend="solder")
    with torch.no_grad():
        out, ref = aot.load(path)(x), jit(x)
    for k in ref:
        torch.testing.assert_close(out[k], ref[k])
