"""Kernels a GPU once computed wrong, kept as recorded launches (`scripts/replay_kernels.py
record`): the kernel's module text, its config and its arguments' storages before the launch,
with what Triton's interpreter leaves after it. Each is pinned to its text, whatever Solder's
code generator emits today."""
import importlib.util
import os
import tempfile
from pathlib import Path

import pytest
import torch

from solder.codegen.launch_configs import COMPILE_OPTIONS

DATA = Path(__file__).resolve().parents[1] / "data"
TOOL = Path(__file__).resolve().parents[2] / "scripts" / "replay_kernels.py"


def _tool():
    spec = importlib.util.spec_from_file_location("replay_kernels", TOOL)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _launch(rec, device):
    """The recorded kernel launched as Solder launches it (its compile options) on copies of
    the recorded storages; each argument's whole storage after it, flat, on the CPU."""
    tool = _tool()
    fn = tool._load_kernel(rec, tempfile.mkdtemp(prefix="solder-recorded-"), {})
    cfg = {k: v for k, v in rec["config"].items() if k in ("XBLOCK", "RBLOCK", "RELOAD", "num_warps")}
    args = tool._storage_views(rec["before"], device)
    fn[((rec["xnumel"] + cfg["XBLOCK"] - 1) // cfg["XBLOCK"],)](*args, **cfg, **COMPILE_OPTIONS)
    return [tool._flat(a) if isinstance(a, torch.Tensor) else None for a in args]


def _assert_same(got, want):
    for i, (g, w) in enumerate(zip(got, want)):
        if w is not None:
            torch.testing.assert_close(g, w, rtol=1e-5, atol=1e-6, equal_nan=True,
                                       msg=lambda m: f"argument {i}: {m}")


def test_the_interpreter_computes_what_was_recorded_for_seed_780169s_pad_kernel():
    # the reference the GPU test holds the compiled kernel to
    if os.environ.get("TRITON_INTERPRET") != "1":
        pytest.skip("Triton's interpreter is not on")
    rec = torch.load(DATA / "seed780169_pad_kernel_launch.pt", weights_only=False)
    _assert_same(_launch(rec, None), rec["interpreter_after"])


@pytest.mark.skipif(not torch.cuda.is_available() or os.environ.get("TRITON_INTERPRET") == "1",
                    reason="compiles the kernel for a GPU")
@pytest.mark.xfail(strict=True, reason="ptxas at -O1 to -O3 miscompiles this kernel (docs/fuzz-runs.md, "
                                       "seed 780169); strict, so that a fix shows here")
def test_seed_780169s_pad_kernel_compiled_for_the_gpu_computes_its_source():
    rec = torch.load(DATA / "seed780169_pad_kernel_launch.pt", weights_only=False)
    _assert_same(_launch(rec, "cuda"), rec["interpreter_after"])
