"""GPU diagnostic: which part of Solder's adaptive_avg_pool3d backward kernel (upsampling
(3, 4, 5) -> (5, 6, 7)) goes wrong on the GPU when Triton's interpreter gets it right. On CUDA
that lowering now declines (lower/pooling.py), so the kernel is generated in a child process on
the CPU (Triton's interpreter: same source) and its textual variants run here on the GPU."""
import glob
import importlib.util
import os
import re
import subprocess
import sys
import tempfile

import torch
import triton

dump = tempfile.mkdtemp()
CHILD = """
import torch, torch.nn.functional as F, solder
x = torch.randn(2, 3, 3, 4, 5, requires_grad=True)
y = torch.compile(lambda t: F.adaptive_avg_pool3d(t, (5, 6, 7)), backend="solder")(x)
y.sum().backward()
"""
subprocess.run([sys.executable, "-c", CHILD], check=True, env={
    **os.environ, "TRITON_INTERPRET": "1", "SOLDER_DEBUG_DIR": dump, "CUDA_VISIBLE_DEVICES": ""})
src = open(glob.glob(f"{dump}/*backward/kernels.py")[0]).read()
torch.manual_seed(0)
x = torch.randn(2, 3, 3, 4, 5, device="cuda")
g = torch.randn(2, 3, 5, 6, 7, device="cuda")
ref = torch.ops.aten._adaptive_avg_pool3d_backward(g, x)

variants = {
    "as generated": lambda s: s,
    "bools not compared with 0": lambda s: re.sub(r"\((t\d+) != 0\)", r"\1", s),
    "no int64 casts": lambda s: s.replace(".to(tl.int64)", ""),
    "int64 xindex": lambda s: s.replace("xindex = xoffset + tl.arange(0, XBLOCK)",
                                        "xindex = (xoffset + tl.arange(0, XBLOCK)).to(tl.int64)"),
    "where without division": lambda s: re.sub(r"= \((t\d+) / (t\d+)\)", r"= (\1 / tl.maximum(\2, 1.0))", s),
}
for name, edit in variants.items():
    text = edit(src)
    path = os.path.join(tempfile.mkdtemp(), "k.py")
    open(path, "w").write(text)
    spec = importlib.util.spec_from_file_location(f"k_{abs(hash(name))}", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    # num_warps 16 at XBLOCK 512: one element per thread, so no second layout (the suspect:
    # loads in the 4-per-thread layout under masks converted from the 1-per-thread one; see
    # scripts/ttgir_layouts.py, which shows that without a GPU)
    for xb, warps in ((32, 4), (512, 4), (512, 16)):
        out = torch.empty_like(ref)
        compiled = mod.k0[(triton.cdiv(360, xb),)](g, out, 360, XBLOCK=xb, num_warps=warps)
        if name == "as generated" and warps == 4 and os.environ.get("OUT"):   # the IR, to read off the device
            for stage in ("ttgir", "llir"):
                with open(os.path.join(os.environ["OUT"], f"pool3d_bwd_x{xb}.{stage}"), "w") as f:
                    f.write(compiled.asm[stage])
        torch.cuda.synchronize()
        bad = ~torch.isclose(out, ref, atol=1e-5, rtol=1e-5)
        print(f"{name:28s} XBLOCK={xb:<4d} warps={warps:<3d} wrong {int(bad.sum()):3d} nan {int(out.isnan().sum()):3d}",
              "first", bad.nonzero()[:3].tolist())
sys.stdout.flush()
