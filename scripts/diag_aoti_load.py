"""Why inductor's ``aoti_load_package`` crashes on the lent GPU machine (issue 7's comparison).

Builds one tiny package with ``aoti_compile_and_package`` and loads it in fresh processes in
several ways, each reporting its exit code and the end of its output (a crash's faulthandler
trace included). Kept outside ``solder/``: it imports inductor.

    python scripts/diag_aoti_load.py [--model tiny|gpt2-quick]
"""
from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import textwrap

# the one-layer model both builds export, on the GPU, with its example input
MODEL = """
import faulthandler, sys; faulthandler.enable()
import torch, torch._inductor
class M(torch.nn.Module):
    def __init__(self):
        super().__init__(); self.lin = torch.nn.Linear(64, 64)
    def forward(self, x):
        return torch.relu(self.lin(x)) * 2
torch.manual_seed(0)
m = M().cuda().eval(); x = torch.randn(8, 64, device="cuda")
"""

BUILD = MODEL + """
with torch.no_grad():
    ep = torch.export.export(m, (x,))
    path = torch._inductor.aoti_compile_and_package(ep, package_path=sys.argv[1])
print("built", path)
"""

LOADS = {
    "aoti_load_package": "run = torch._inductor.aoti_load_package(p)",
    "load_single_threaded": "run = torch._inductor.aoti_load_package(p, run_single_threaded=True)",
    "loader_direct": "l = torch._C._aoti.AOTIModelPackageLoader(p, 'model', False, 1, -1)\n"
                     "run = lambda x: l.run([x])",
    "after_cuda_init": "torch.cuda.init(); torch.zeros(1, device='cuda')\n"
                       "run = torch._inductor.aoti_load_package(p)",
}

# inductor's older path: a bare shared library (no package) loaded by a runner, not by
# AOTIModelPackageLoader: tells whether the crash is in the package loader or in the model
SO_PATH = MODEL + """
with torch.no_grad():
    ep = torch.export.export(m, (x,))
    so = torch._inductor.aot_compile(ep.module(), (x,))
print("built", so, flush=True)
runner = torch._C._aoti.AOTIModelContainerRunnerCuda(so, 1, "cuda")
print("loaded", flush=True)
out = runner.run([x])
torch.cuda.synchronize(); print("ran", tuple(out[0].shape), flush=True)
"""

RUN = """
import faulthandler, sys; faulthandler.enable()
import torch, torch._inductor
p = sys.argv[1]
print("loading", flush=True)
{load}
print("loaded", flush=True)
x = torch.randn(8, 64, device="cuda")
out = run(x)
out = out[0] if isinstance(out, (list, tuple)) else out
torch.cuda.synchronize(); print("ran", tuple(out.shape), flush=True)
"""


def _py(code: str, *args: str, timeout: int = 300) -> tuple[int, str]:
    r = subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True,
                       timeout=timeout)
    return r.returncode, (r.stdout + r.stderr)[-1500:]


def main() -> int:
    d = tempfile.mkdtemp()
    pkg = os.path.join(d, "tiny.pt2")
    rc, out = _py(BUILD, pkg)
    print(f"== build rc={rc}\n{out}")
    if rc:
        return 1
    for name, load in LOADS.items():
        rc, out = _py(RUN.format(load=load), pkg, timeout=120)
        print(f"== {name} rc={rc}\n{textwrap.indent(out, '  ')}", flush=True)
    rc, out = _py(SO_PATH, timeout=300)
    print(f"== shared library without a package rc={rc}\n{textwrap.indent(out, '  ')}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
