"""On a GPU: user Triton kernels inside a package. Plain, autotuned (with a grid that depends on
the chosen config) and heuristics kernels, a kernel that writes into its input, symbolic sizes
(the generic binary), a fresh process with Triton's compiler and JIT disabled, and the refusals
(config pre_hook, heuristics with symbolic sizes). Under the interpreter torch.export cannot
capture a user kernel at all, so every test here needs the GPU."""
import pytest
import torch

import solder.aot as aot
from solder.aot import tensors

from .helpers import run_without_compiler

pytestmark = pytest.mark.gpu

if torch.cuda.is_available():
    import triton
    import triton.language as tl

    @triton.jit
    def scale_add(x_ptr, y_ptr, out_ptr, n, alpha, BLOCK: tl.constexpr):
        i = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        m = i < n
        tl.store(out_ptr + i, tl.load(x_ptr + i, mask=m) * alpha + tl.load(y_ptr + i, mask=m),
                 mask=m)

    @triton.autotune(configs=[triton.Config({"BLOCK": 64}, num_warps=2),
                              triton.Config({"BLOCK": 256}, num_warps=4)], key=["n"])
    @triton.jit
    def tuned_square(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
        i = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        m = i < n
        v = tl.load(x_ptr + i, mask=m)
        tl.store(out_ptr + i, v * v, mask=m)

    @triton.jit
    def add_one_inplace(x_ptr, n, BLOCK: tl.constexpr):
        i = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        m = i < n
        tl.store(x_ptr + i, tl.load(x_ptr + i, mask=m) + 1, mask=m)

    @triton.heuristics({"BLOCK": lambda args: triton.next_power_of_2(args["n"])})
    @triton.jit
    def one_block_neg(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
        i = tl.arange(0, BLOCK)
        m = i < n
        tl.store(out_ptr + i, -tl.load(x_ptr + i, mask=m), mask=m)

    @triton.autotune(configs=[triton.Config({"BLOCK": 64}, pre_hook=lambda nargs: None)],
                     key=["n"])
    @triton.jit
    def hooked_copy(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
        i = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        tl.store(out_ptr + i, tl.load(x_ptr + i, mask=i < n), mask=i < n)


def mixed(x, y):
    """Solder's own kernels around two user kernels (one autotuned, grid from its config)."""
    h = torch.relu(x) + 1
    out = torch.empty_like(h)
    n = h.numel()
    scale_add[(triton.cdiv(n, 128),)](h, y, out, n, 0.5, BLOCK=128)
    sq = torch.empty_like(out)
    tuned_square[lambda meta: (triton.cdiv(n, meta["BLOCK"]),)](out, sq, n)
    return sq.sum(dim=-1), sq * 2


def test_plain_and_autotuned_kernels_package_and_match_eager(tmp_path):
    torch.manual_seed(0)
    x, y = torch.randn(4, 100, device="cuda"), torch.randn(4, 100, device="cuda")
    rows = torch.export.Dim("rows", min=2, max=64)
    path = aot.compile(mixed, (x, y), tmp_path / "mixed.solder",
                       dynamic_shapes=({0: rows}, {0: rows}), strict=True)
    run = aot.load(path)
    assert len(run.info["user_kernels"]) == 2
    for r in (4, 7, 33):   # 700 and 3300 elements are not multiples of 16: the generic binaries
        x, y = torch.randn(r, 100, device="cuda"), torch.randn(r, 100, device="cuda")
        for o, e in zip(run(x, y), mixed(x, y)):
            torch.testing.assert_close(o, e)
    text = aot.describe(path)
    assert "user Triton kernels: 2" in text and "tuned_square" in text and "BLOCK=" in text


def inplace(x):
    add_one_inplace[(triton.cdiv(x.numel(), 64),)](x, x.numel(), BLOCK=64)
    return x.sum()


def test_a_kernel_that_writes_its_input_writes_it_after_loading(tmp_path):
    x = torch.randn(8, 16, device="cuda")
    path = aot.compile(inplace, (x.clone(),), tmp_path / "inplace.solder", strict=True)
    run = aot.load(path)
    a, b = x.clone(), x.clone()
    out, ref = run(a), inplace(b)
    torch.testing.assert_close(a, b)
    torch.testing.assert_close(out, ref)


def negate(x):
    out = torch.empty_like(x)
    one_block_neg[(1,)](x, out, x.numel())
    return out + 1


def test_heuristics_are_stored_for_fixed_sizes_and_refused_for_symbolic_ones(tmp_path):
    x = torch.randn(100, device="cuda")
    path = aot.compile(negate, (x,), tmp_path / "neg.solder", strict=True)
    torch.testing.assert_close(aot.load(path)(x), negate(x))
    n = torch.export.Dim("n", min=2, max=512)
    # torch.export itself specializes on what the heuristic computed (a guard that violates the
    # declared range); Solder's own refusal (tests/unit/test_aot_user_kernel_freeze.py) backs it
    with pytest.raises(aot.AotError, match="heuristics.*symbolic sizes|Constraints violated"):
        aot.compile(negate, (x,), tmp_path / "neg2.solder", dynamic_shapes=({0: n},),
                    strict=True)


def hooked(x):
    out = torch.empty_like(x)
    hooked_copy[lambda meta: (triton.cdiv(x.numel(), meta["BLOCK"]),)](x, out, x.numel())
    return out


def test_a_config_pre_hook_is_refused(tmp_path):
    # Dynamo refuses config pre_hooks while capturing; Solder's own check names the kernel
    # (tests/unit/test_aot_user_kernel_freeze.py) should a capture ever let one through
    with pytest.raises(aot.AotError, match="pre_hook"):
        aot.compile(hooked, (torch.randn(64, device="cuda"),), tmp_path / "h.solder",
                    strict=True)


LOAD_AND_COMPARE = '''
path, data = sys.argv[1:3]
t = {k: v.cuda() for k, v in tensors.loads(open(data, "rb").read()).items()}
run = aot.load(path)
for r in ("4", "9"):
    out = run(t["x" + r], t["y" + r])
    torch.testing.assert_close(out[0], t["sum" + r])
    torch.testing.assert_close(out[1], t["sq" + r])
print("OK")
'''


def test_user_kernel_package_runs_without_the_triton_compiler(tmp_path):
    torch.manual_seed(0)
    rows = torch.export.Dim("rows", min=2, max=64)
    ex = (torch.randn(4, 100, device="cuda"), torch.randn(4, 100, device="cuda"))
    path = aot.compile(mixed, ex, tmp_path / "mixed.solder",
                       dynamic_shapes=({0: rows}, {0: rows}), strict=True)
    data = {}
    for r in (4, 9):
        x, y = torch.randn(r, 100, device="cuda"), torch.randn(r, 100, device="cuda")
        s, q = mixed(x, y)
        data.update({f"x{r}": x, f"y{r}": y, f"sum{r}": s, f"sq{r}": q})
    (tmp_path / "data.safetensors").write_bytes(tensors.dumps(data))
    run_without_compiler(LOAD_AND_COMPARE, path, tmp_path / "data.safetensors")
