"""Inductor's side of ``python -m solder.bench.aot``: build, cold-start and steady-state phases for
inductor's AOT package (``torch._inductor.aoti_compile_and_package`` / ``aoti_load_package``).

Kept outside ``solder/`` (which never imports torch._inductor); run by the driver in its own
processes with the same protocol (one ``RESULT {json}`` line per phase) and the same models.
"""
from __future__ import annotations

import faulthandler
import os
import sys
import time
from pathlib import Path


def _bench_module():
    # loaded from its file, not as solder.bench.aot: importing the solder package (and its
    # backend registration) would add Solder's import time to inductor's first result
    import importlib.util
    path = Path(__file__).resolve().parents[1] / "solder" / "bench" / "aot.py"
    spec = importlib.util.spec_from_file_location("solder_bench_aot", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


_B = _bench_module()
emit, make_input, make_model, rel_error, time_ms = (
    _B.emit, _B.make_input, _B.make_model, _B.rel_error, _B.time_ms)


def phase_build(args) -> dict:
    import torch
    model, inputs = make_model(args.model, args.quick)
    t = time.perf_counter()
    with torch.no_grad():
        ep = torch.export.export(model, inputs)
        torch._inductor.aoti_compile_and_package(ep, package_path=args.package)
    return {"build_s": time.perf_counter() - t, "bytes": os.path.getsize(args.package)}


def phase_cold(args) -> dict:
    t_start = time.time()
    import torch
    import torch._inductor
    t_imported = time.time()
    run = torch._inductor.aoti_load_package(args.package)
    t_loaded = time.time()
    x = make_input(args.model, args.quick)
    out = run(x)
    out = out[0] if isinstance(out, (tuple, list)) else out
    out.sum().item()
    torch.cuda.synchronize()
    t_end = time.time()
    return {"t_end": t_end, "import_s": t_imported - t_start, "load_s": t_loaded - t_imported,
            "first_call_s": t_end - t_loaded}


def phase_steady(args) -> dict:
    import torch
    import torch._inductor
    model, inputs = make_model(args.model, args.quick)
    with torch.no_grad():
        ref = model(*inputs)
        run = torch._inductor.aoti_load_package(args.package)
        out = run(*inputs)
        ms = time_ms(run, *inputs)
    return {"inductor_package_ms": ms, "inductor_package_error": rel_error(out, ref)}


def main() -> int:
    import argparse
    faulthandler.enable()  # a crash inside the loaded library still says where
    p = argparse.ArgumentParser()
    p.add_argument("--phase", choices=["build", "cold", "steady"], required=True)
    p.add_argument("--model", required=True)
    p.add_argument("--package", required=True)
    p.add_argument("--quick", action="store_true")
    args = p.parse_args()
    emit({"build": phase_build, "cold": phase_cold, "steady": phase_steady}[args.phase](args))
    return 0


if __name__ == "__main__":
    sys.exit(main())
