"""``scripts/cpu_compile_stages.py``, the CPU harness for a model's compile stages: it compiles,
stops at the first call, reports every graph's stages, and a second process starts warm."""
import os
import re
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def _run(tmp_path, *args):
    env = dict(os.environ, TRITON_INTERPRET="1", PYTHONPATH=str(REPO), SOLDER_CACHE="1",
               SOLDER_CACHE_DIR=str(tmp_path / "cache"))
    p = subprocess.run([sys.executable, str(REPO / "scripts" / "cpu_compile_stages.py"), *args],
                       env=env, cwd=tmp_path, capture_output=True, text=True, timeout=600)
    assert p.returncode == 0, p.stderr[-3000:]
    return p.stdout


def test_a_training_step_reports_both_graphs_stages(tmp_path):
    out = _run(tmp_path, "llama_train", "--quick")
    assert re.search(r"llama_train rep 0: [0-9.]+ s to the first call; solder own [0-9.]+", out)
    assert re.findall(r"graph\d+_(\w+):", out) == ["forward", "backward"]
    for stage in ("lower=", "schedule=", "codegen=", "cpu_lower_schedule_codegen=", "cache=miss"):
        assert out.count(stage) >= 2, (stage, out)


def test_stored_entries_start_the_next_process_warm(tmp_path):
    _run(tmp_path, "gpt2", "--quick", "--store")
    out = _run(tmp_path, "gpt2", "--quick")
    (line,) = re.findall(r"graph\d+_inference: .*", out)
    assert "cache=hit" in line and "lower=" not in line
