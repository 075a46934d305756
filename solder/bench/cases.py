"""Benchmark cases. Each builds a Workload on a device: the function handed to torch.compile, its
random inputs, which leaves get gradients (a training step) and, for memory-bound cases, the
fewest bytes any implementation must move, from which achieved GB/s is computed.

Minimal bytes count each input element read once and each output element written once. For a
scatter, elements of the base that the scattered region overwrites need not be read, but only
where they fill whole 32-byte sectors: a strided region (every other element, one column of a
row) still costs a full read of the base.
"""
from __future__ import annotations

import importlib.util
from dataclasses import dataclass, field
from typing import Callable, Optional

import torch
import torch.nn.functional as F

# (rtol, atol as a fraction of max |expected|) per output dtype; see check_close.
DEFAULT_TOLERANCE = {
    torch.float32: (1e-4, 1e-5),
    torch.float16: (2e-3, 1e-3),
    torch.bfloat16: (1.6e-2, 1e-2),
}


@dataclass
class Workload:
    fn: Callable                     # what torch.compile wraps
    inputs: tuple                    # random (never zeros), on the benchmark device
    grad_leaves: tuple = ()          # non-empty: fn returns a loss; one call = forward + backward
    min_bytes: Optional[int] = None  # memory-bound cases: least bytes moved per call
    tolerance: Optional[tuple[float, float]] = None  # overrides DEFAULT_TOLERANCE

    def step(self, f: Callable):
        """One call of ``f`` (``fn`` itself or a compiled version) as the benchmark times it;
        returns the outputs to check: fn's result, or the loss and gradients."""
        if not self.grad_leaves:
            with torch.no_grad():
                return f(*self.inputs)
        for leaf in self.grad_leaves:
            leaf.grad = None
        loss = f(*self.inputs)
        loss.backward()
        return (loss.detach(),) + tuple(leaf.grad for leaf in self.grad_leaves)


@dataclass(frozen=True)
class Case:
    name: str
    description: str
    build: Callable[[torch.device, bool], Workload]  # (device, quick) -> Workload
    bytes_formula: str = ""                         # how min_bytes is counted; "" if not memory-bound
    needs: tuple[str, ...] = field(default=())      # packages; a case whose package is missing is skipped

    gpu_only: bool = False  # needs a GPU even as a smoke test

    def missing(self) -> list[str]:
        """What this machine lacks for the case, in words; empty when it can run."""
        out = [f"{p} (not installed)" for p in self.needs if importlib.util.find_spec(p) is None]
        if self.gpu_only and not torch.cuda.is_available():
            out.append("a GPU (Dynamo does not capture kernels run by Triton's interpreter)")
        return out


NEGLIGIBLE = 1e-4


def check_close(actual, expected, tolerance: Optional[tuple[float, float]] = None) -> None:
    """Raises AssertionError unless every tensor in ``actual`` matches ``expected`` (nested
    tuples/lists/dicts of tensors). The absolute tolerance scales with the largest expected
    magnitude of each tensor, so tiny gradients and large logits are judged alike; a tensor under
    NEGLIGIBLE of the largest one (the gradient of a bias that a normalization cancels: zero in
    exact arithmetic, rounding noise in bf16) is judged at that floor instead of its own noise."""
    got, want = _leaves(actual), _leaves(expected)
    if len(got) != len(want):
        raise AssertionError(f"{len(got)} outputs, expected {len(want)}")
    scales = [e.detach().abs().max().item() if isinstance(e, torch.Tensor) and e.numel()
              and e.is_floating_point() else 0.0 for e in want]
    floor = NEGLIGIBLE * max(scales, default=0.0)
    for i, (a, e) in enumerate(zip(got, want)):
        if not isinstance(e, torch.Tensor):  # None (a parameter without gradient), a number
            if a != e:
                raise AssertionError(f"output {i}: got {a!r}, expected {e!r}")
            continue
        rtol, atol_frac = tolerance or DEFAULT_TOLERANCE.get(e.dtype, (0.0, 0.0))
        scale = max(scales[i], floor) if e.is_floating_point() else 0.0
        try:
            torch.testing.assert_close(a, e, rtol=rtol, atol=atol_frac * scale)
        except (AssertionError, TypeError, ValueError) as err:
            raise AssertionError(f"output {i} {tuple(e.shape)} {e.dtype}: {err}") from None


def _leaves(x) -> list:
    if isinstance(x, (tuple, list)):
        return [leaf for item in x for leaf in _leaves(item)]
    if isinstance(x, dict):
        return [leaf for key in sorted(x) for leaf in _leaves(x[key])]
    return [x]


def sized(device, quick: bool, toy, cpu, gpu):
    """A case's sizes: toys with --quick (kernels in Triton's interpreter), mid sizes on the
    CPU (``--device cpu``: eager's own CPU kernels and Solder's CPU path), full on a GPU."""
    if quick:
        return toy
    return cpu if device.type == "cpu" else gpu


def _randn(*shape, device, dtype=torch.float32):
    return torch.randn(*shape, device=device, dtype=dtype)


# ---- memory-bound cases ------------------------------------------------------------------------

def gelu_chain(device, quick):
    n = sized(device, quick, 2**12, 2**22, 2**27)
    x = _randn(n, device=device)
    return Workload(lambda x: torch.tanh(torch.sigmoid(F.gelu(x)) * 2), (x,), min_bytes=2 * 4 * n)


def layernorm(device, quick):
    m, n = sized(device, quick, (32, 256), (2048, 1024), (16384, 4096))
    x, w, b = _randn(m, n, device=device), _randn(n, device=device), _randn(n, device=device)
    return Workload(lambda x, w, b: F.layer_norm(x, (x.shape[-1],), w, b), (x, w, b),
                    min_bytes=4 * (2 * m * n + 2 * n))


def _rmsnorm_residual(x, res, w, eps: float = 1e-6):
    h = x + res
    y = (h.float() * torch.rsqrt(h.float().pow(2).mean(-1, keepdim=True) + eps)).to(x.dtype) * w
    return y, h


def _residual_rows(device, quick):
    """x, res (m x n) and a weight w (n), bf16: the inputs of the RMSNorm cases."""
    m, n = sized(device, quick, (32, 256), (2048, 1024), (16384, 4096))
    bf16 = torch.bfloat16
    x, res = _randn(m, n, device=device, dtype=bf16), _randn(m, n, device=device, dtype=bf16)
    return (x, res, _randn(n, device=device, dtype=bf16)), m, n


def rmsnorm_residual(device, quick):
    inputs, m, n = _residual_rows(device, quick)
    return Workload(_rmsnorm_residual, inputs, min_bytes=2 * (4 * m * n + n))


def softmax(device, quick):
    m, n = sized(device, quick, (32, 512), (2048, 2048), (16384, 8192))
    x = _randn(m, n, device=device, dtype=torch.bfloat16)
    return Workload(lambda x: x.softmax(-1, dtype=torch.float32).to(torch.bfloat16), (x,),
                    min_bytes=2 * 2 * m * n)


def cross_entropy(device, quick):
    n, v = sized(device, quick, (32, 512), (256, 8192), (8192, 32000))
    logits = _randn(n, v, device=device, dtype=torch.bfloat16).requires_grad_()
    target = torch.randint(0, v, (n,), device=device)
    return Workload(lambda logits, target: F.cross_entropy(logits, target), (logits, target),
                    grad_leaves=(logits,), min_bytes=2 * 2 * n * v + 8 * n)


def as_strided_scatter(device, quick):
    n = sized(device, quick, 2**12, 2**22, 2**26)
    a, b = _randn(n, device=device), _randn(n // 2, device=device)
    fn = lambda a, b: torch.as_strided_scatter(a * 8 + 10, b * 2 - 4,  # noqa: E731
                                               size=(a.numel() // 2,), stride=(2,))
    return Workload(fn, (a, b), min_bytes=4 * (n + n // 2 + n))


def slice_scatter(device, quick):
    r, c = sized(device, quick, (64, 64), (2048, 2048), (8192, 8192))
    a, b = _randn(r, c, device=device), _randn(r, c // 2, device=device)
    fn = lambda a, b: torch.slice_scatter(a * 3 + 1, b.sigmoid(), dim=1,  # noqa: E731
                                          start=c // 4, end=c // 4 + c // 2)
    return Workload(fn, (a, b), min_bytes=4 * (r * c // 2 + r * c // 2 + r * c))


def select_scatter(device, quick):
    r, c = sized(device, quick, (256, 16), (2**16, 64), (2**20, 64))
    a, b = _randn(r, c, device=device), _randn(r, device=device)
    fn = lambda a, b: torch.select_scatter(a * 2 + 1, b.sigmoid(), dim=1, index=7)  # noqa: E731
    return Workload(fn, (a, b), min_bytes=4 * (r * c + r + r * c))


def index_put(device, quick):
    r, c = sized(device, quick, (256, 16), (2**16, 64), (2**20, 64))
    m = r // 4
    a, v = _randn(r, c, device=device), _randn(m, c, device=device)
    idx = torch.randperm(r, device=device)[:m]  # distinct rows: the result is deterministic
    fn = lambda a, idx, v: torch.index_put(a * 2 - 1, (idx,), v + 1)  # noqa: E731
    return Workload(fn, (a, idx, v), min_bytes=4 * ((r - m) * c + m * c + r * c) + 8 * m)


def user_rmsnorm(device, quick):
    from solder.bench.user_kernels import residual_rmsnorm_gelu
    inputs, m, n = _residual_rows(device, quick)
    # the kernel is a boundary: h and y go through memory once each way
    return Workload(residual_rmsnorm_gelu, inputs, min_bytes=2 * (7 * m * n + n))


MEMORY_CASES = [
    Case("gelu_chain", "tanh(sigmoid(gelu(x)) * 2), x fp32 2**27", gelu_chain,
         "read x + write y: 2 * 4n"),
    Case("layernorm", "F.layer_norm 16384x4096 fp32 with weight and bias", layernorm,
         "read x + write y + read w, b: 4 * (2mn + 2n)"),
    Case("rmsnorm_residual", "h = x + res; y = rmsnorm(h) * w; returns y, h; bf16 16384x4096",
         rmsnorm_residual, "read x, res + write y, h + read w: 2 * (4mn + n)"),
    Case("softmax", "x.softmax(-1, dtype=fp32).to(bf16), 16384x8192 bf16", softmax,
         "read x + write y: 2 * 2mn"),
    Case("cross_entropy", "F.cross_entropy forward + backward, 8192x32000 bf16 logits",
         cross_entropy, "read logits + write grad + read targets: 2 * 2nv + 8n"),
    Case("as_strided_scatter", "as_strided_scatter(a*8+10, b*2-4, (n/2,), (2,)), n = 2**26 fp32",
         as_strided_scatter, "read a (strided region: whole) + read b + write out: 4 * 2.5n"),
    Case("slice_scatter", "slice_scatter(a*3+1, sigmoid(b), dim=1, middle half), 8192x8192 fp32",
         slice_scatter, "read a outside the slice + read b + write out: 4 * (rc/2 + rc/2 + rc)"),
    Case("select_scatter", "select_scatter(a*2+1, sigmoid(b), dim=1, index=7), 2**20x64 fp32",
         select_scatter, "read a (one column: whole rows) + read b + write out: 4 * (2rc + r)"),
    Case("index_put", "index_put(a*2-1, (idx,), v+1), a 2**20x64 fp32, 2**18 distinct rows",
         index_put, "read a outside the rows + read v + read idx + write out: "
         "4 * ((r-m)c + mc + rc) + 8m"),
    Case("user_rmsnorm", "h = x + res; user Triton RMSNorm kernel into empty_like; gelu(y) * 2; "
         "bf16 16384x4096", user_rmsnorm,
         "read x, res, w + write h + read h + write y + read y + write out: 2 * (7mn + n)",
         needs=("triton",), gpu_only=True),
]


def all_cases() -> list[Case]:
    from solder.bench.decode import DECODE_CASE
    from solder.bench.models import MODEL_CASES
    return MEMORY_CASES + MODEL_CASES + [DECODE_CASE]
