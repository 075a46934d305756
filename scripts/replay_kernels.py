"""Which generated kernel computes something else on the GPU than in Triton's interpreter.

A program the fuzzer finds wrong on a GPU and right in the interpreter (its kernels' text the
same on both) is a kernel that compiles to something other than its source says. This finds
the kernel and the elements:

    # on the GPU: run a script (a fuzz finding, or any program compiled with Solder) and record
    # every Solder kernel launch: the kernel's module text, its launch config, and the whole
    # storage under each tensor argument before and after the launch
    python scripts/replay_kernels.py record FINDING.py --out DIR [-- ARGS...]
    # anywhere: run each recorded launch again in Triton's interpreter on the storage it had
    # before, and compare with what the GPU left after it
    python scripts/replay_kernels.py replay DIR

    # on the GPU: which compiles of a launch's kernel give the interpreter's values: as
    # Triton compiles it, ptxas at -O0, -O1 and -O2, LLVM at O1 (no vectorizers), LLVM's
    # optimizations off
    python scripts/replay_kernels.py compilers DIR [--launch launch0000.pt ...]

Replay prints one line per launch (graph, kernel, config, verdict) and, for a launch whose
results differ, the first differing elements of each argument (flat positions in its storage).
Floating values are compared with a tolerance (the interpreter's libm is not libdevice);
integers and booleans exactly. ``compilers`` prints, per launch, each compile's verdict against
the interpreter: where ptxas -O0 is right and Triton's compile is not, ptxas's optimizer is
what differs (fuzz seed 780169, docs/fuzz-runs.md).
"""
from __future__ import annotations

import argparse
import os
import runpy
import sys


def record(script: str, out: str, argv: list[str]) -> int:
    import torch

    from solder.runtime import launch

    os.makedirs(out, exist_ok=True)
    original = launch.KernelRunner.__call__
    count = [0]

    def snapshot(a):
        if not isinstance(a, torch.Tensor):
            return a
        # the whole storage, as bytes, copied (on the CPU .cpu() would be the storage itself)
        raw = torch.empty(0, dtype=torch.uint8, device=a.device).set_(a.untyped_storage())
        return {"bytes": raw.clone().cpu(), "dtype": a.dtype,
                "offset": a.storage_offset(), "size": tuple(a.shape), "stride": a.stride()}

    def recording(self, *args):
        before = [snapshot(a) for a in args]
        original(self, *args)
        if torch.cuda.is_available():
            torch.cuda.synchronize()
        after = [snapshot(a) if isinstance(a, torch.Tensor) else None for a in args]
        if self.src.is_reduction:
            xnumel, rnumel = int(args[-2]), int(args[-1])
        else:
            xnumel, rnumel = int(args[-1]), 1
        cfg = self.configs.get((launch._next_pow2(xnumel), launch._next_pow2(rnumel)))
        module = self.fn.fn.__code__.co_filename
        torch.save({"graph": self.graph_name, "kernel": self.fn.fn.__name__,
                    "module": open(module).read(), "config": cfg, "xnumel": xnumel,
                    "before": before, "after": after},
                   os.path.join(out, f"launch{count[0]:04d}.pt"))
        count[0] += 1

    launch.KernelRunner.__call__ = recording
    sys.argv = [script] + argv
    try:
        runpy.run_path(script, run_name="__main__")
    except SystemExit:
        pass
    finally:
        launch.KernelRunner.__call__ = original
    print(f"recorded {count[0]} launches in {out}")
    return 0


def _storage_views(rec_args, device=None):
    """The recorded arguments rebuilt: each tensor over a copy of its whole storage."""
    import torch
    out = []
    for s in rec_args:
        if not isinstance(s, dict):
            out.append(s)
            continue
        t = torch.empty(0, dtype=s["dtype"]).set_(s["bytes"].clone().untyped_storage(),
                                                  s["offset"], s["size"], s["stride"])
        out.append(t.to(device) if device else t)
    return out


def _flat(t):
    """The whole storage under ``t`` (a tensor, or a recorded one), flat, on the CPU."""
    import torch
    if isinstance(t, dict):
        dtype, raw = t["dtype"], t["bytes"]
    else:
        dtype = t.dtype
        raw = torch.empty(0, dtype=torch.uint8, device=t.device).set_(t.untyped_storage()).cpu()
    n = raw.numel() // torch.empty(0, dtype=dtype).element_size()
    return torch.empty(0, dtype=dtype).set_(raw.clone().untyped_storage(), 0, (n,), (1,))


def _load_kernel(rec, tmp, modules):
    import importlib.util
    text = rec["module"]
    if text not in modules:
        path = os.path.join(tmp, f"kernels{len(modules)}.py")
        with open(path, "w") as f:
            f.write(text)
        spec = importlib.util.spec_from_file_location(f"replayed{len(modules)}", path)
        mod = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(mod)
        modules[text] = mod
    return getattr(modules[text], rec["kernel"])


def _run_launch(rec, tmp, modules, device=None):
    """Launch a recorded kernel again on copies of its storages; the arguments after it."""
    fn = _load_kernel(rec, tmp, modules)
    cfg = {k: v for k, v in (rec["config"] or {}).items()
           if k in ("XBLOCK", "RBLOCK", "RELOAD", "num_warps")}
    args = _storage_views(rec["before"], device)
    fn[((rec["xnumel"] + cfg["XBLOCK"] - 1) // cfg["XBLOCK"],)](*args, **cfg)
    return args


def _differences(got_args, want_args, label_got, label_want):
    import torch
    notes = []
    for i, (a, want) in enumerate(zip(got_args, want_args)):
        if want is None or not isinstance(a, (torch.Tensor, dict)):
            continue
        got, ref = _flat(a), _flat(want)
        if got.dtype.is_floating_point:
            bad = ~torch.isclose(got.double(), ref.double(), rtol=1e-5, atol=1e-6, equal_nan=True)
        else:
            bad = got != ref
        if bad.any():
            where = bad.nonzero().flatten()[:8].tolist()
            notes.append(f"  argument {i}: {int(bad.sum())} of {bad.numel()} elements differ,"
                         f" first at {where}: {label_got} {got[where].tolist()}, "
                         f"{label_want} {ref[where].tolist()}")
    return notes


def replay(folder: str) -> int:
    os.environ["TRITON_INTERPRET"] = "1"   # before triton is imported
    import tempfile

    import torch

    modules: dict = {}
    tmp = tempfile.mkdtemp(prefix="solder-replay-")
    differing = 0
    for name in sorted(os.listdir(folder)):
        if not name.endswith(".pt"):
            continue
        rec = torch.load(os.path.join(folder, name), weights_only=False)
        args = _run_launch(rec, tmp, modules)
        notes = _differences(args, rec.get("after", rec.get("gpu_after")), "interpreter", "GPU")
        verdict = "DIFFERS" if notes else "same"
        print(f"{name}: {rec['graph']} {rec['kernel']} {rec['config']}: {verdict}")
        for line in notes:
            print(line)
        differing += bool(notes)
    print(f"{differing} launches differ")
    return 1 if differing else 0


# how ``compilers`` compiles a launch's kernel: (environment, LLVM optimization level or None)
COMPILERS = {
    "as Triton compiles it": ({}, None),
    "ptxas -O0": ({"DISABLE_PTXAS_OPT": "1"}, None),
    # (PTXAS_OPTIONS is Triton's: the ``ptx_options`` every kernel's compile passes to ptxas)
    "ptxas -O1": ({"PTXAS_OPTIONS": "--opt-level 1"}, None),
    "ptxas -O2": ({"PTXAS_OPTIONS": "--opt-level 2"}, None),
    "LLVM at O1": ({}, "OPTIMIZE_O1"),
    "LLVM off": ({"DISABLE_LLVM_OPT": "1"}, None),
}


def launch_once(path: str, out: str, llvm_level: str | None) -> int:
    """One recorded launch, compiled afresh (a cache of its own) as the environment says (or
    in the interpreter with TRITON_INTERPRET=1); the arguments after it saved to ``out``."""
    import tempfile
    os.environ["TRITON_CACHE_DIR"] = tempfile.mkdtemp(prefix="solder-replay-cache-")
    import torch
    if llvm_level:
        import triton.backends.nvidia.compiler as nvidia
        llvm = nvidia.llvm
        optimize = llvm.optimize_module
        shim = type(llvm)("llvm_at_another_level")
        for k in dir(llvm):
            if not k.startswith("__"):
                setattr(shim, k, getattr(llvm, k))
        shim.optimize_module = lambda mod, _level, *a, **k: optimize(mod, getattr(llvm, llvm_level))
        nvidia.llvm = shim
    rec = torch.load(path, weights_only=False)
    interp = os.environ.get("TRITON_INTERPRET") == "1"
    args = _run_launch(rec, tempfile.mkdtemp(prefix="solder-replay-"), {},
                       None if interp else "cuda")
    if not interp:
        torch.cuda.synchronize()
    torch.save([_flat(a) if isinstance(a, torch.Tensor) else None for a in args], out)
    return 0


def compilers(folder: str, names: list[str]) -> int:
    import subprocess
    import tempfile

    import torch
    if not torch.cuda.is_available():
        print("compilers: needs a GPU (it compiles each kernel for it several ways)")
        return 2
    tmp = tempfile.mkdtemp(prefix="solder-compilers-")
    base = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}

    def run(path, env, level, label):
        out = os.path.join(tmp, f"{label.replace(' ', '_')}.pt")
        cmd = [sys.executable, os.path.abspath(__file__), "_launch", path, out]
        cmd += ["--llvm", level] if level else []
        r = subprocess.run(cmd, env={**base, **env}, capture_output=True, text=True, timeout=600)
        if r.returncode != 0:
            return None, r.stderr.strip().splitlines()[-1:] or ["failed"]
        return torch.load(out, weights_only=False), None

    for name in sorted(names or [n for n in os.listdir(folder) if n.endswith(".pt")]):
        path = os.path.join(folder, name)
        ref, err = run(path, {"TRITON_INTERPRET": "1"}, None, "interpreter")
        if ref is None:
            print(f"{name}: the interpreter failed: {err[0]}")
            continue
        print(f"{name}:")
        for label, (env, level) in COMPILERS.items():
            got, err = run(path, env, level, label)
            if got is None:
                print(f"  {label}: failed to compile or launch: {err[0]}")
                continue
            notes = _differences(got, ref, "GPU", "interpreter")
            print(f"  {label}: {'DIFFERS' if notes else 'as the interpreter'}")
            for line in notes:
                print("  " + line)
    return 0


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="mode", required=True)
    r = sub.add_parser("record", help="run a script, recording every Solder kernel launch")
    r.add_argument("script")
    r.add_argument("--out", required=True)
    r.add_argument("args", nargs="*", help="the script's own arguments (after --)")
    q = sub.add_parser("replay", help="replay recorded launches in Triton's interpreter")
    q.add_argument("folder")
    c = sub.add_parser("compilers", help="on a GPU: each launch's kernel compiled several ways, "
                       "against the interpreter")
    c.add_argument("folder")
    c.add_argument("--launch", action="append", default=[], help="a recorded launch's file name")
    one = sub.add_parser("_launch")   # (one compile and launch, in its own process)
    one.add_argument("path")
    one.add_argument("out")
    one.add_argument("--llvm")
    a = p.parse_args()
    if a.mode == "record":
        return record(a.script, a.out, a.args)
    if a.mode == "compilers":
        return compilers(a.folder, a.launch)
    if a.mode == "_launch":
        return launch_once(a.path, a.out, a.llvm)
    return replay(a.folder)


if __name__ == "__main__":
    sys.exit(main())
