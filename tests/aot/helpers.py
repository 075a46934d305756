"""Small programs and package surgery shared by the package tests."""
import json
import os
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

import torch

from solder.aot import container


class MLP(torch.nn.Module):
    """Linear -> LayerNorm -> GELU -> Linear, with a non-persistent buffer (a constant that a
    package stores even without weights) and two results in a dict."""

    def __init__(self):
        super().__init__()
        self.l1 = torch.nn.Linear(16, 32)
        self.ln = torch.nn.LayerNorm(32)
        self.l2 = torch.nn.Linear(32, 8)
        self.register_buffer("scale", torch.tensor(0.5), persistent=False)

    def forward(self, x):
        h = torch.nn.functional.gelu(self.ln(self.l1(x)))
        return {"y": self.l2(h) * self.scale, "total": x.sum(dim=1)}


def members_of(path) -> dict:
    with zipfile.ZipFile(path) as z:
        return {n: z.read(n) for n in z.namelist()}


def rewrite(path, out, change_info=None, change_member=None):
    """A copy of a package with package.json edited (manifest rebuilt: a consistent package
    built elsewhere) or with one member's bytes replaced (old manifest kept: tampering)."""
    members = members_of(path)
    manifest = members.pop(container.MANIFEST)
    if change_info is not None:
        info = json.loads(members["package.json"])
        change_info(info)
        members["package.json"] = json.dumps(info).encode()
        container.write(out, members)
        return out
    name, data = change_member
    members[name] = data
    with zipfile.ZipFile(out, "w") as z:
        z.writestr(container.MANIFEST, manifest)
        for n, d in members.items():
            z.writestr(n, d)
    return out


ROOT = Path(__file__).resolve().parents[2]

# The start of a script that loads a package in a process where Triton's compiler and JIT raise
NO_COMPILER = '''
import sys, torch, triton, triton.compiler.compiler as cc, triton.runtime.jit as jit
def refuse(*a, **k):
    raise AssertionError("the Triton compiler was called")
triton.compile = cc.compile = refuse
jit.JITFunction.run = refuse
jit.JITFunction.warmup = refuse
import solder.aot as aot
from solder.aot import tensors
'''


def run_without_compiler(script: str, *args) -> None:
    """Run ``NO_COMPILER + script`` in a fresh process with empty Solder and Triton caches; it
    must print OK."""
    env = dict(os.environ, PYTHONPATH=str(ROOT), SOLDER_CACHE_DIR=tempfile.mkdtemp(),
               TRITON_CACHE_DIR=tempfile.mkdtemp())
    env.pop("TRITON_INTERPRET", None)
    r = subprocess.run([sys.executable, "-c", NO_COMPILER + script, *map(str, args)],
                       cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)
    assert r.returncode == 0 and "OK" in r.stdout, r.stdout + r.stderr
