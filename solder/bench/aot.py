"""Ahead-of-time packages against inductor's, on a GPU.

    python -m solder.bench.aot --model gpt2 --out DIR        # GPT-2 124M bf16, batch 8x512
    python -m solder.bench.aot --model resnet50 --out DIR    # fp16 channels_last, batch 64
    python -m solder.bench.aot --model gpt2 --out DIR --quick   # toy sizes: a smoke test
    python -m solder.bench.aot --model resnet50 --profile       # JIT against package, profiled

For the model it builds Solder's package (``solder.aot.compile``) and inductor's
(``aoti_compile_and_package``), then measures, each in fresh processes:

- *first result*: from just before the process is spawned to the first output on the host
  (Python start, imports, package load, weights to the GPU, first call, synchronize);
- *steady state*: median time per call of eager, Solder's JIT (``torch.compile(backend=
  "solder")``), Solder's package and inductor's package, with each one's largest error against
  eager relative to the output's largest magnitude.

It prints a table and writes ``DIR/aot_<model>.json``. Everything inductor runs in its own
processes through ``scripts/bench_aot_inductor.py`` (this module never imports inductor's package).
Each phase of the run is one subprocess of this module (``--phase``), so no process measures
after another one warmed it up.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

from ..cli_help import Parser

ROOT = Path(__file__).resolve().parents[2]
if __name__ == "__main__" and sys.path and Path(sys.path[0]).resolve() == Path(__file__).parent:
    sys.path.pop(0)  # run as a script: this folder's profile.py must not shadow the stdlib's
INDUCTOR_SCRIPT = ROOT / "scripts" / "bench_aot_inductor.py"


# ---------------------------------------------------------------------------------------------
# Models (shared with the inductor script)


def make_model(name: str, quick: bool):
    """(module, example input) on the GPU, deterministic: every process builds the same."""
    import torch
    torch.manual_seed(0)
    if name == "gpt2":
        from transformers import GPT2Config, GPT2LMHeadModel

        if quick:
            config = GPT2Config(n_layer=2, n_embd=64, n_head=4, vocab_size=512, n_positions=128)
            batch, seq = 2, 64
        else:
            config = GPT2Config()  # 124M: 12 layers, 768 wide, 12 heads, vocab 50257
            batch, seq = 8, 512
        model = Logits(GPT2LMHeadModel(config)).to("cuda", torch.bfloat16).eval()
        return model, (make_input(name, quick, config.vocab_size, batch, seq),)
    if name == "resnet50":
        import torchvision
        model = torchvision.models.resnet50(weights=None)
        model = model.to("cuda", torch.float16).to(memory_format=torch.channels_last).eval()
        return model, (make_input(name, quick),)
    raise SystemExit(f"unknown model {name!r}: gpt2 or resnet50")


def make_input(name: str, quick: bool, vocab: int = 0, batch: int = 0, seq: int = 0):
    import torch
    g = torch.Generator(device="cuda").manual_seed(1)
    if name == "gpt2":
        if not vocab:
            vocab, batch, seq = (512, 2, 64) if quick else (50257, 8, 512)
        return torch.randint(0, vocab, (batch, seq), device="cuda", generator=g)
    batch, size = (2, 64) if quick else (64, 224)
    x = torch.randn(batch, 3, size, size, device="cuda", generator=g, dtype=torch.float16)
    return x.to(memory_format=torch.channels_last)


def _logits_class():
    import torch

    class Logits(torch.nn.Module):
        def __init__(self, model):
            super().__init__()
            self.model = model

        def forward(self, ids):
            return self.model(input_ids=ids, use_cache=False).logits
    return Logits


def Logits(model):  # noqa: N802 - reads as the class it builds
    """GPT-2 returning its logits only (one tensor: both packages return the same thing)."""
    return _logits_class()(model)


def time_ms(fn, *args, min_rep_s: float = 0.05, reps: int = 7) -> float:
    """Median milliseconds per call, host included (a package call is Python plus launches)."""
    import torch
    for _ in range(3):
        fn(*args)
    torch.cuda.synchronize()
    t = time.perf_counter()
    fn(*args)
    torch.cuda.synchronize()
    one = max(time.perf_counter() - t, 1e-6)
    n = max(1, min(1000, int(min_rep_s / one)))
    out = []
    for _ in range(reps):
        torch.cuda.synchronize()
        t = time.perf_counter()
        for _ in range(n):
            fn(*args)
        torch.cuda.synchronize()
        out.append((time.perf_counter() - t) / n * 1e3)
    return statistics.median(out)


def rel_error(out, ref) -> float:
    import torch
    if isinstance(out, (tuple, list)):
        out = out[0]
    if isinstance(ref, (tuple, list)):
        ref = ref[0]
    out, ref = out.float(), ref.float()
    return float((out - ref).abs().max() / ref.abs().max().clamp_min(1e-12))


def emit(data: dict) -> None:
    print("RESULT " + json.dumps(data), flush=True)


# ---------------------------------------------------------------------------------------------
# Phases (each runs in its own process)


def phase_build(args) -> dict:
    import solder.aot
    model, inputs = make_model(args.model, args.quick)
    t = time.perf_counter()
    solder.aot.compile(model, inputs, args.package)
    return {"build_s": time.perf_counter() - t, "bytes": os.path.getsize(args.package)}


def phase_cold(args) -> dict:
    t_start = time.time()
    import torch

    import solder.aot
    t_imported = time.time()
    run = solder.aot.load(args.package)
    t_loaded = time.time()
    x = make_input(args.model, args.quick)
    out = run(x)
    out = out[0] if isinstance(out, (tuple, list)) else out
    out.sum().item()  # the first result, on the host
    torch.cuda.synchronize()
    t_end = time.time()
    return {"t_end": t_end, "import_s": t_imported - t_start, "load_s": t_loaded - t_imported,
            "first_call_s": t_end - t_loaded}


def phase_steady(args) -> dict:
    import torch

    import solder.aot
    model, inputs = make_model(args.model, args.quick)
    with torch.no_grad():
        ref = model(*inputs)
        eager_ms = time_ms(model, *inputs)
        jit = torch.compile(model, backend="solder")
        t = time.perf_counter()
        jit_out = jit(*inputs)
        jit_compile_s = time.perf_counter() - t
        jit_ms = time_ms(jit, *inputs)
        run = solder.aot.load(args.package)
        pkg_out = run(*inputs)
        pkg_ms = time_ms(run, *inputs)
    return {"eager_ms": eager_ms, "solder_jit_ms": jit_ms, "solder_jit_compile_s": jit_compile_s,
            "solder_package_ms": pkg_ms, "solder_jit_error": rel_error(jit_out, ref),
            "solder_package_error": rel_error(pkg_out, ref)}


def phase_profile(args) -> dict:
    """Where the JIT's and the package's steady-state time goes (GPU kernels against host),
    printed; in one process, in both orders, so an order effect shows too. Then the copies each
    makes to put a library call's result into the layout its graph was compiled for, and the
    first convolutions of each wrapper with the layouts they were compiled for."""
    from collections import Counter

    import torch

    import solder
    import solder.aot
    from solder.bench.profile import breakdown
    from solder.runtime import graph_cache, support
    model, inputs = make_model(args.model, args.quick)
    wrappers = {}
    decode = graph_cache.decode

    def keep_source(*a, **k):
        entry = decode(*a, **k)
        wrappers["package"] = entry.wrapper.source
        return entry
    graph_cache.decode = keep_source
    with torch.no_grad():
        jit = torch.compile(model, backend="solder")
        jit(*inputs)
        run = solder.aot.load(args.package)
        run(*inputs)
        for label, fn in (("package", run), ("JIT", jit), ("package again", run),
                          ("eager", model)):
            breakdown(f"{args.model} {label}", lambda fn=fn: fn(*inputs), top=12,
                      count_slow_launches=label != "eager")
        copies: Counter = Counter()
        ensure = support.ensure_layout

        def counting(t, size, stride):
            out = ensure(t, size, stride)
            if out is not t:
                copies[(tuple(t.shape), tuple(t.stride()), tuple(stride))] += 1
            return out
        support.ensure_layout = counting
        for label, fn in (("JIT", jit), ("package", run)):
            copies.clear()
            fn(*inputs)
            print(f"{label}: {sum(copies.values())} library results copied into the compiled "
                  f"layout per call; most common (shape, strides, compiled strides):")
            for key, n in copies.most_common(5):
                print(f"  {n} x {key}")
        support.ensure_layout = ensure
        graph_cache.decode = decode
        wrappers["JIT"] = solder.explain(model, *inputs).graphs[0].wrapper
    for label, src in wrappers.items():
        lines = [ln.strip() for ln in src.splitlines()
                 if any(w in ln for w in ("convolution", "ensure_layout", "empty_strided"))]
        print(f"{label} wrapper, first convolutions and buffers:\n  " + "\n  ".join(lines[:12]))
    return {}


PHASES = {"build": phase_build, "cold": phase_cold, "steady": phase_steady,
          "profile": phase_profile}


# ---------------------------------------------------------------------------------------------
# The driver


def _spawn(cmd: list, timeout: float) -> tuple[dict, float]:
    """Run one phase; (its RESULT, time.time() just before it was spawned)."""
    t0 = time.time()
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout,
                       env=dict(os.environ, PYTHONPATH=os.pathsep.join(
                           p for p in (str(ROOT), os.environ.get("PYTHONPATH")) if p)))
    # progress on stderr: a run cut short still shows which phases finished, and how fast
    print(f"[{Path(cmd[1]).stem} {cmd[3]}] rc {r.returncode} in {time.time() - t0:.1f} s",
          file=sys.stderr, flush=True)
    for line in r.stdout.splitlines():
        if line.startswith("RESULT "):
            return json.loads(line[len("RESULT "):]), t0
    err = r.stderr
    crash = err.find("Fatal Python error")  # a segfault: faulthandler's traceback comes first
    shown = err[crash:crash + 3000] if crash >= 0 else err[-3000:]
    raise RuntimeError(f"phase {cmd[2:]} failed (rc {r.returncode}): {shown}\n"
                       f"stdout: {r.stdout[-1000:]}")


def _solder(phase, args, package) -> list:
    # run as a script, not -m: the measured process imports solder only when it loads
    cmd = [sys.executable, str(Path(__file__).resolve()), "--phase", phase, "--model", args.model,
           "--package", str(package)]
    return cmd + (["--quick"] if args.quick else [])


def _inductor(phase, args, package) -> list:
    cmd = [sys.executable, str(INDUCTOR_SCRIPT), "--phase", phase, "--model", args.model,
           "--package", str(package)]
    return cmd + (["--quick"] if args.quick else [])


def _try(results: dict, key: str, fn):
    try:
        results[key] = fn()
    except Exception as e:  # noqa: BLE001 - one side failing still reports the other
        results[key] = {"error": f"{type(e).__name__}: {str(e)[:4000]}"}
        print(f"[{key}] failed: {results[key]['error'][:2000]}", file=sys.stderr)


def run_all(args) -> dict:
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    ours, theirs = out / f"{args.model}.solder", out / f"{args.model}.pt2"
    res: dict = {"model": args.model, "quick": args.quick}
    t = args.timeout
    sides = [(side, make, pkg) for side, make, pkg in
             (("solder", _solder, ours), ("inductor", _inductor, theirs)) if side in args.sides]
    for side, make, pkg in sides:
        _try(res, f"{side}_build", lambda make=make, pkg=pkg: _spawn(make("build", args, pkg), t)[0])
    for side, make, pkg in sides:
        if "error" in res[f"{side}_build"]:
            continue

        def cold(make=make, pkg=pkg):
            runs = []
            for _ in range(args.cold_reps):
                r, t0 = _spawn(make("cold", args, pkg), t)
                r["first_result_s"] = r.pop("t_end") - t0
                runs.append(r)
            return {"runs": runs,
                    "median_first_result_s": statistics.median(r["first_result_s"] for r in runs)}
        _try(res, f"{side}_cold", cold)
        _try(res, f"{side}_steady", lambda make=make, pkg=pkg: _spawn(make("steady", args, pkg), t)[0])
    res["versions"] = _versions()
    (out / f"aot_{args.model}.json").write_text(json.dumps(res, indent=1))
    print(table(res))
    return res


def _versions() -> dict:
    code = ("import json, torch, triton; print(json.dumps({'torch': torch.__version__, "
            "'triton': triton.__version__, 'gpu': torch.cuda.get_device_name()}))")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    return json.loads(r.stdout) if r.returncode == 0 else {"error": r.stderr[-500:]}


def table(res: dict) -> str:
    def get(key, field, fmt="{:.3f}"):
        v = res.get(key, {}).get(field)
        return fmt.format(v) if isinstance(v, (int, float)) else "-"
    lines = [f"{res['model']}{' (quick)' if res['quick'] else ''} on "
             f"{res.get('versions', {}).get('gpu', '?')}",
             "| | build s | package MB | first result s | steady ms | error vs eager |",
             "|---|---|---|---|---|---|"]
    for side in ("solder", "inductor"):
        mb = res.get(f"{side}_build", {}).get("bytes")
        lines.append(f"| {side} package | {get(side + '_build', 'build_s', '{:.1f}')} | "
                     f"{mb / 2**20:.1f} | " if mb else f"| {side} package | - | - | ")
        lines[-1] += (f"{get(side + '_cold', 'median_first_result_s')} | "
                      f"{get(side + '_steady', side + '_package_ms')} | "
                      f"{get(side + '_steady', side + '_package_error', '{:.2e}')} |")
    lines.append(f"| solder JIT | {get('solder_steady', 'solder_jit_compile_s', '{:.1f}')} | - | - "
                 f"| {get('solder_steady', 'solder_jit_ms')} | "
                 f"{get('solder_steady', 'solder_jit_error', '{:.2e}')} |")
    lines.append(f"| eager | - | - | - | {get('solder_steady', 'eager_ms')} | 0 |")
    for side in ("solder", "inductor"):
        runs = res.get(f"{side}_cold", {}).get("runs")
        if runs:
            r = runs[len(runs) // 2]
            lines.append(f"{side} first result, one run: import {r['import_s']:.2f} s, load "
                         f"{r['load_s']:.2f} s, first call {r['first_call_s']:.2f} s")
    return "\n".join(lines)


def main(argv=None) -> int:
    p = Parser(prog="python -m solder.bench.aot", description=__doc__,
               formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--model", choices=["gpt2", "resnet50"], required=True)
    p.add_argument("--out", default="aot_bench")
    p.add_argument("--quick", action="store_true", help="toy sizes (a smoke test)")
    p.add_argument("--cold-reps", type=int, default=3, help="fresh processes per package")
    p.add_argument("--sides", default="solder,inductor",
                   help="whose packages to build and time (inductor's loader crashed on the "
                        "H200's torch 2.11: docs/perf-notes.md)")
    p.add_argument("--timeout", type=float, default=600, help="seconds per phase")
    p.add_argument("--profile", action="store_true",
                   help="only build Solder's package, then print where the JIT's and the "
                        "package's steady-state time goes (GPU kernels, host), in one process")
    p.add_argument("--phase", choices=sorted(PHASES), help=argparse.SUPPRESS)
    p.add_argument("--package", help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    args.sides = [x.strip() for x in args.sides.split(",") if x.strip()]
    if not args.sides or set(args.sides) - {"solder", "inductor"}:
        p.error(f"--sides takes solder and/or inductor, not {args.sides}")
    if args.phase:
        import faulthandler
        faulthandler.enable()  # a crash in a driver or library still says where
        emit(PHASES[args.phase](args))
        return 0
    if args.profile:
        Path(args.out).mkdir(parents=True, exist_ok=True)
        package = Path(args.out) / f"{args.model}.solder"
        _spawn(_solder("build", args, package), args.timeout)
        return subprocess.run(_solder("profile", args, package), timeout=args.timeout).returncode
    run_all(args)
    return 0


if __name__ == "__main__":
    sys.exit(main())
