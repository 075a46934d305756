"""Host time and GPU time of each fused attention kernel at the benchmark models' shapes.

The LLaMA step and GPT-2 are host-bound under both compilers on the H200 (session 12: LLaMA
12.6 ms of host per step for 8.5 ms of GPU). SDPA's kernels differ in host time per call, not
only in GPU time; this measures both for cudnn, flash and efficient (forward, and forward +
backward for the training shape), and an `aten.mm` of the same width for scale. The answer
decides Solder's `attention_backends` default.

    PYTHONPATH=. python3 scripts/sdpa_host_cost.py
"""
import time

import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel

SHAPES = {"gpt2 (8, 12, 512, 64) fwd": ((8, 12, 512, 64), False),
          "llama (4, 16, 1024, 64) fwd+bwd": ((4, 16, 1024, 64), True)}
BACKENDS = {"cudnn": SDPBackend.CUDNN_ATTENTION, "flash": SDPBackend.FLASH_ATTENTION,
            "efficient": SDPBackend.EFFICIENT_ATTENTION}


def measure(fn, n=200):
    for _ in range(10):
        fn()
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    for _ in range(n):
        fn()
    host = (time.perf_counter() - t0) / n
    torch.cuda.synchronize()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    for _ in range(n):
        fn()
    end.record()
    torch.cuda.synchronize()
    return host * 1e6, start.elapsed_time(end) / n


def main():
    print(f"{'case':34} {'backend':10} {'host us':>9} {'wall ms':>9}")
    for label, (shape, backward) in SHAPES.items():
        q, k, v = (torch.randn(shape, device="cuda", dtype=torch.bfloat16,
                               requires_grad=backward) for _ in range(3))
        g = torch.randn(shape, device="cuda", dtype=torch.bfloat16)
        for name, backend in BACKENDS.items():
            def step():
                with sdpa_kernel([backend]):
                    out = F.scaled_dot_product_attention(q, k, v, is_causal=True)
                if backward:
                    torch.autograd.grad(out, (q, k, v), g)
            try:
                host, wall = measure(step, 50 if backward else 200)
            except RuntimeError as e:
                print(f"{label:34} {name:10} unavailable: {str(e).splitlines()[0][:60]}")
                continue
            print(f"{label:34} {name:10} {host:9.1f} {wall:9.3f}")
    a = torch.randn(4096, 1024, device="cuda", dtype=torch.bfloat16)
    b = torch.randn(1024, 1024, device="cuda", dtype=torch.bfloat16)
    host, wall = measure(lambda: a @ b)
    print(f"{'mm 4096x1024 @ 1024x1024':34} {'cublas':10} {host:9.1f} {wall:9.3f}")


if __name__ == "__main__":
    main()
