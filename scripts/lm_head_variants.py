"""GPU micro-benchmark: GPT-2's LM head (4096x768 @ 768x50257, bf16) three ways, to choose how
Solder lowers a matmul whose result rows are not 16-byte aligned. Times by CUDA events, median
of 50 after warm-up."""
import torch

torch.manual_seed(0)
x = torch.randn(4096, 768, device="cuda", dtype=torch.bfloat16)
w = torch.randn(50257, 768, device="cuda", dtype=torch.bfloat16)


def timed(f, n=50):
    for _ in range(5):
        f()
    times = []
    for _ in range(n):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        f()
        b.record()
        b.synchronize()
        times.append(a.elapsed_time(b))
    return sorted(times)[n // 2]


wt_contig = w.t().contiguous()
wp = torch.zeros(50264, 768, device="cuda", dtype=torch.bfloat16)
wp[:50257] = w
ref = x @ w.t()
cases = {
    "x @ w.t() (eager)": lambda: x @ w.t(),
    "x @ w.t().contiguous(), copy included": lambda: x @ w.t().contiguous(),
    "x @ wt_contig (copy done)": lambda: x @ wt_contig,
    "padded: x @ wp.t(), view [:, :50257]": lambda: (x @ wp.t())[:, :50257],
    "padded + contiguous copy of the view": lambda: (x @ wp.t())[:, :50257].contiguous(),
}
for name, f in cases.items():
    out = f()
    err = float((out.float() - ref.float()).abs().max())
    print(f"{name:42s} {timed(f):7.3f} ms  out stride {out.stride()}  max diff {err:.3g}")
