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

Replay prints one line per launch (graph, kernel, config, verdict) and, for a launch whose
results differ, the first differing elements of each argument (flat positions in its storage).
Floating values are compared with a tolerance (the interpreter's libm is not libdevice);
integers and booleans exactly.
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


def replay(folder: str) -> int:
    os.environ["TRITON_INTERPRET"] = "1"   # before triton is imported
    import importlib.util
    import tempfile

    import torch

    def storage(s):
        return s["bytes"].untyped_storage()

    def rebuild(s):
        if not isinstance(s, dict):
            return s
        t = torch.empty(0, dtype=s["dtype"])
        t.set_(storage(s), s["offset"], s["size"], s["stride"])
        return t

    def flat(s):
        n = storage(s).nbytes() // torch.empty(0, dtype=s["dtype"]).element_size()
        return torch.empty(0, dtype=s["dtype"]).set_(storage(s), 0, (n,), (1,))

    modules: dict = {}
    tmp = tempfile.mkdtemp(prefix="solder-replay-")
    differing = 0
    for name in sorted(os.listdir(folder)):
        if not name.endswith(".pt"):
            continue
        rec = torch.load(os.path.join(folder, name), weights_only=False)
        text = rec["module"]
        if text not in modules:
            path = os.path.join(tmp, f"kernels{len(modules)}.py")
            with open(path, "w") as f:
                f.write(text)
            spec = importlib.util.spec_from_file_location(f"replayed{len(modules)}", path)
            mod = importlib.util.module_from_spec(spec)
            spec.loader.exec_module(mod)
            modules[text] = mod
        fn = getattr(modules[text], rec["kernel"])
        cfg = {k: v for k, v in (rec["config"] or {}).items() if k in ("XBLOCK", "RBLOCK", "RELOAD")}
        args = [rebuild(s) for s in rec["before"]]
        fn[((rec["xnumel"] + cfg["XBLOCK"] - 1) // cfg["XBLOCK"],)](*args, **cfg)
        notes = []
        for i, (a, want) in enumerate(zip(rec["before"], rec["after"])):
            if want is None:
                continue
            got, ref = flat(a), flat(want)
            if got.dtype.is_floating_point:
                bad = ~torch.isclose(got.double(), ref.double(), rtol=1e-5, atol=1e-6,
                                     equal_nan=True)
            else:
                bad = got != ref
            if bad.any():
                where = bad.nonzero().flatten()[:8].tolist()
                notes.append(f"  argument {i}: {int(bad.sum())} of {bad.numel()} elements differ,"
                             f" first at {where}: interpreter {got[where].tolist()}, "
                             f"GPU {ref[where].tolist()}")
        verdict = "DIFFERS" if notes else "same"
        print(f"{name}: {rec['graph']} {rec['kernel']} {rec['config']}: {verdict}")
        for line in notes:
            print(line)
        differing += bool(notes)
    print(f"{differing} launches differ")
    return 1 if differing else 0


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
    a = p.parse_args()
    if a.mode == "record":
        return record(a.script, a.out, a.args)
    return replay(a.folder)


if __name__ == "__main__":
    sys.exit(main())
