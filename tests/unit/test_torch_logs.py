"""Solder's log through PyTorch's: ``TORCH_LOGS=solder`` and PyTorch's artifact names show
the compile lines, generated code, kernels and ATen fallbacks; nothing shows unasked; a CPU
graph compiled to C++ is unsaid, and one left to ATen (the native target off, or no C++
compiler) is said once. Each case runs in a fresh process,
since torch reads ``TORCH_LOGS`` when it is imported."""
import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

PROGRAM = """
import torch, solder
device = "cuda" if torch.cuda.is_available() and not {cpu} else "cpu"
f = torch.compile(lambda x: (x.sin() * 2).sum(-1) + torch.linalg.det(x), backend="solder")
f(torch.randn(4, 4, device=device))
g = torch.compile(lambda x: x.cos() + 1, backend="solder")
g(torch.randn(5, device=device))
print("ran")
"""


def _run(env_changes, cpu=False, interpret=True):
    env = {k: v for k, v in os.environ.items() if k not in ("TORCH_LOGS", "TORCH_TRACE")}
    env.update({"SOLDER_CACHE": "0", "PYTHONPATH": ROOT, **env_changes})
    if not interpret:
        env.pop("TRITON_INTERPRET", None)
    r = subprocess.run([sys.executable, "-c", PROGRAM.format(cpu=cpu)], env=env, cwd=ROOT,
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0 and "ran" in r.stdout, r.stderr[-3000:]
    return r.stderr


def test_torch_logs_show_solders_log_and_artifacts(tmp_path):
    err = _run({"TORCH_LOGS": "+solder,output_code,schedule,perf_hints",
                "TORCH_TRACE": str(tmp_path)})
    lines = err.splitlines()
    # +solder: the debug lines too (torch's format marks DEBUG with V)
    assert any(ln.startswith("V") and "graph0_inference: " in ln and "FX nodes" in ln
               for ln in lines), err[-3000:]
    # the compile line, at INFO (torch's format starts a line with its level's letter)
    compiled = [ln for ln in lines if "solder: graph" in ln and "kernels" in ln]
    assert len(compiled) == 2 and all(ln.startswith("I") for ln in compiled), err[-3000:]
    assert "1 ATen fallbacks" in compiled[0]
    assert "@triton.jit" in err and "def call(" in err          # output_code
    assert "[__schedule]" in err and "k0: x=" in err             # schedule
    assert "aten._linalg_det runs in ATen: no lowering" in err   # perf_hints
    trace = "".join(p.read_text() for p in tmp_path.iterdir())
    for name in ("output_code", "schedule", "perf_hints"):
        assert f"solder_graph0_inference_{name}" in trace, name


def test_nothing_is_said_unasked():
    err = _run({})
    assert "solder" not in err.lower(), err[-3000:]


def test_a_cpu_graph_compiled_to_cpp_is_unsaid():
    err = _run({"SOLDER_CPU_CODEGEN": "1"}, cpu=True, interpret=False)
    assert "solder" not in err.lower(), err[-3000:]


def test_a_cpu_graph_left_to_aten_is_said_once_with_the_reason(tmp_path):
    err = _run({}, cpu=True, interpret=False)
    said = [ln for ln in err.splitlines() if "runs in ATen, not compiled" in ln]
    assert len(said) == 1 and said[0].startswith("W"), err[-3000:]
    assert "cpu_codegen is off" in said[0] and "TRITON_INTERPRET=1" in said[0]
    # no C++ compiler on the PATH (and CXX naming none): the same, with that reason
    err = _run({"SOLDER_CPU_CODEGEN": "1", "CXX": "", "PATH": str(tmp_path)}, cpu=True,
               interpret=False)
    said = [ln for ln in err.splitlines() if "runs in ATen, not compiled" in ln]
    assert len(said) == 1 and "no C++ compiler was found" in said[0], err[-3000:]
