"""``scripts/replay_kernels.py``: every Solder kernel launch of a script recorded (module text,
config, storages before and after), then replayed in Triton's interpreter and compared; a
launch whose recorded results are not what its source computes is named with its elements."""
import os
import subprocess
import sys
from pathlib import Path

import torch

REPO = Path(__file__).resolve().parents[2]
PROGRAM = """
import torch
import solder  # noqa: F401
def fn(a, b):
    return (torch.select_scatter(a * 2, b.sigmoid(), 1, 1) + 1).sum(-1), a.t() // 3
print(torch.compile(fn, backend="solder")(torch.randn(5, 4), torch.randn(5))[1].shape)
"""


def _tool(tmp_path, *args):
    env = dict(os.environ, TRITON_INTERPRET="1", PYTHONPATH=str(REPO), SOLDER_CACHE="0")
    return subprocess.run([sys.executable, str(REPO / "scripts" / "replay_kernels.py"), *args],
                          env=env, cwd=tmp_path, capture_output=True, text=True, timeout=600)


def test_recorded_launches_replay_the_same_and_a_changed_result_is_named(tmp_path):
    (tmp_path / "prog.py").write_text(PROGRAM)
    rec = _tool(tmp_path, "record", "prog.py", "--out", "launches")
    assert rec.returncode == 0, rec.stderr[-3000:]
    assert "recorded 2 launches" in rec.stdout
    same = _tool(tmp_path, "replay", "launches")
    assert same.returncode == 0, same.stdout + same.stderr[-3000:]
    assert same.stdout.count(": same") == 2 and "0 launches differ" in same.stdout

    # what a miscompiled kernel leaves: one element of the first launch's result changed
    path = tmp_path / "launches" / "launch0000.pt"
    launch = torch.load(path, weights_only=False)
    out = next(i for i, (b, a) in enumerate(zip(launch["before"], launch["after"]))
               if a is not None and not torch.equal(b["bytes"], a["bytes"]))
    raw = launch["after"][out]["bytes"]
    values = torch.empty(0, dtype=launch["after"][out]["dtype"]).set_(
        raw.untyped_storage(), 0, (raw.numel() // 4,), (1,))
    values[3] += 1.0
    torch.save(launch, path)
    differ = _tool(tmp_path, "replay", "launches")
    assert differ.returncode == 1
    assert "launch0000.pt: graph0_inference k0" in differ.stdout and "DIFFERS" in differ.stdout
    assert f"argument {out}: 1 of " in differ.stdout and "first at [3]" in differ.stdout
    assert "1 launches differ" in differ.stdout


def test_a_launch_runs_alone_as_recorded_and_compilers_asks_for_a_gpu(tmp_path):
    # `_launch` (what `compilers` runs once per way of compiling, each in its own process)
    # leaves, in the interpreter, what the recorded launch left; `compilers` itself compiles for
    # a GPU and says so where there is none
    (tmp_path / "prog.py").write_text(PROGRAM)
    assert _tool(tmp_path, "record", "prog.py", "--out", "launches").returncode == 0
    path = tmp_path / "launches" / "launch0000.pt"
    one = _tool(tmp_path, "_launch", str(path), str(tmp_path / "after.pt"))
    assert one.returncode == 0, one.stderr[-3000:]
    after = torch.load(tmp_path / "after.pt", weights_only=False)
    rec = torch.load(path, weights_only=False)
    written = [i for i, (b, a) in enumerate(zip(rec["before"], rec["after"]))
               if a is not None and not torch.equal(b["bytes"], a["bytes"])]
    assert written
    for i in written:
        want = rec["after"][i]
        flat = torch.empty(0, dtype=want["dtype"]).set_(
            want["bytes"].untyped_storage(), 0, (after[i].numel(),), (1,))
        torch.testing.assert_close(after[i], flat)
    if not torch.cuda.is_available():
        gpu = _tool(tmp_path, "compilers", "launches")
        assert gpu.returncode == 2 and "needs a GPU" in gpu.stdout
