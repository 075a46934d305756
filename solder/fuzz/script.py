"""A failing program as a standalone script: ``python FILE [backend]`` runs eager, the float64
reference and the backend, prints eager against compiled, and exits 0 when they match, 1 when
the backend raised where eager ran, 2 when a value differs.

The script needs only torch (and Solder, for the solder backend): it carries the program's text
and the text of ``execute.py`` and ``compare.py``, so it judges exactly as the fuzzer did.
``DEV`` at its top picks the device ('cpu' runs generated kernels in Triton's interpreter).
"""
from __future__ import annotations

import os
from pathlib import Path

from .execute import CORRECTED_OPS
from .program import Program
from .run import Outcome

HERE = Path(__file__).parent

MAIN = '''

CORRECTED_EAGER = {uses_ass!r}   # eager's known wrong values put right (execute.py)


def main(backend):
    try:
        import solder  # noqa: F401  (registers the backend when Solder is on the path, not installed)
    except ImportError:
        pass
    args = (fn, make_inputs, LAWS, RNG_SEED)
    eager = run(*args, grad=GRAD)
    attach_meta_strides(eager, fn, make_inputs, RNG_SEED)
    try:
        ref = run(*args, up=True, grad=GRAD)
    except Exception:
        ref = None
    try:
        jittered = run(*args, grad=GRAD, jitter=jitter_of(PRECISION))
    except Exception:
        jittered = None
    try:
        noisy = [run(*args, grad=GRAD, noise=k) for k in NOISE_RUNS]
    except Exception:
        noisy = None
    other = run_on_cpu(*args, grad=GRAD)   # (a GPU program without random ops)
    fixed = None
    if CORRECTED_EAGER:
        try:
            fixed = run_corrected(*args, grad=GRAD)
        except Exception:
            fixed = None
    try:
        comp = run(*args, backend=backend, grad=GRAD)
    except Exception:
        traceback.print_exc()
        print(f"ERROR: {{backend}} raised where eager ran")
        return 1
    torch.set_printoptions(precision=6)
    for e, c in zip(eager, comp):
        print(f"--- {{e.label}}\\neager:    {{e.tensor}}\\ncompiled: {{c.tensor}}")
    bad = verdict(eager, comp, ref, fixed, PRECISION, jittered, other, noisy)
    if any(category == "stride" for _, category, _ in bad):
        attach_decomposed_strides(eager, fn, make_inputs, RNG_SEED)
        bad = verdict(eager, comp, ref, fixed, PRECISION, jittered, other, noisy)
    for label, category, why in bad:
        print(f"DIFFERS {{label}} ({{category}}): {{why}}")
    print(f"WRONG under {{backend}}" if bad else f"match under {{backend}}")
    return 2 if bad else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1] if len(sys.argv) > 1 else "solder"))
'''


def script_text(program: Program, outcome: Outcome, device: str, grad: bool, backend: str,
                found: str, filename: str) -> str:
    what = outcome.detail if outcome.kind != "error" else outcome.error
    what = " ".join(what.split())[:400]
    head = [
        f"# Found by `python -m solder fuzz` ({found}): {outcome.kind} under {backend}: {what}",
        f"# Run: python {filename} [backend]   (default solder; aot_eager and inductor are "
        "controls).",
        "# Exit 0: matches eager; 1: the backend raised where eager ran; 2: a value differs.",
        # an error's last frames as the fuzzer saw them: one that does not come back when the
        # script runs alone (state left by earlier programs in the worker) is still traceable
        *(["# The error's last frames, as raised in the fuzzer's worker:"]
          + ["#   " + line for line in (outcome.detail or "").strip().splitlines()[-40:]]
          if outcome.kind == "error" and outcome.detail else []),
        "import os",
        "import sys",
        "import traceback",
        "",
        f"DEV = {device!r}",
        f"GRAD = {grad!r}",
        'if DEV == "cpu":',
        '    os.environ.setdefault("TRITON_INTERPRET", "1")',
        "",
        "import torch  # noqa: E402",
        "import torch.nn.functional as F  # noqa: E402",
        "",
    ]
    parts = ["\n".join(head), _module_text("execute.py"), program.source(),
             _module_text("compare.py"),
             MAIN.format(uses_ass=any(op in program.source() for op in CORRECTED_OPS))]
    return "\n\n".join(p.strip("\n") for p in parts) + "\n"


def _module_text(name: str) -> str:
    return (HERE / name).read_text()


def write_script(out_dir: str, name: str, text: str) -> str:
    os.makedirs(out_dir, exist_ok=True)
    path = os.path.join(out_dir, name)
    with open(path, "w") as f:
        f.write(text)
    return path
