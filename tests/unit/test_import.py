"""Importing solder is light, and the backend name works from the entry point alone."""
import os
import subprocess
import sys
import textwrap

import pytest


def _run(code: str, env: dict | None = None) -> str:
    out = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True,
                         text=True, timeout=300,
                         env=None if env is None else {**os.environ, **env})
    assert out.returncode == 0, out.stderr[-2000:]
    return out.stdout


def _installed() -> bool:
    import solder
    return solder._installed_entry_points()


# Installed, solder's backends are found through their entry point; on the path alone (as on a
# machine where nothing can be installed: PYTHONPATH=.), ``import solder`` registers them through
# Dynamo, which imports Dynamo and with it sympy.
_NEEDS_INSTALL = pytest.mark.skipif(not _installed(), reason="solder is on the path, not "
                                    "installed: import registers the backends through Dynamo")


@_NEEDS_INSTALL
def test_import_does_not_load_dynamo_and_the_entry_point_finds_the_backend():
    out = _run("""
        import sys, torch
        import solder
        print("dynamo loaded:", "torch._dynamo" in sys.modules)
        f = torch.compile(lambda x: x * 2 + 1, backend="solder")
        print("result ok:", bool((f(torch.ones(4)) == 3).all()))
    """)
    assert "dynamo loaded: False" in out
    assert "result ok: True" in out


def test_backends_registered_when_dynamo_is_already_loaded():
    out = _run("""
        import torch._dynamo
        from torch._dynamo.backends.registry import _BACKENDS
        import solder
        print(sorted(n for n in ("solder", "solder_debug") if n in _BACKENDS))
    """)
    assert "['solder', 'solder_debug']" in out


def test_python_dash_m_solder_lists_its_commands():
    out = subprocess.run([sys.executable, "-m", "solder", "--help"], capture_output=True,
                         text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    for command in ("demo", "bench", "conformance", "explain", "cache", "aot"):
        assert f"  {command}" in out.stdout


def _torch_imports_sympy() -> bool:
    # some torch versions (2.11) import sympy themselves: then solder cannot be the one that does
    return "True" in _run("import sys, torch; print('sympy' in sys.modules)")


@_NEEDS_INSTALL
def test_import_loads_no_sympy():
    # sympy is the compiler's (index math, code generation): importing solder does not need it
    if _torch_imports_sympy():
        pytest.skip("this torch imports sympy itself")
    out = _run("""
        import sys, torch
        import solder
        print("sympy loaded:", "sympy" in sys.modules)
    """)
    assert "sympy loaded: False" in out


@_NEEDS_INSTALL
def test_loading_and_running_a_package_imports_no_part_of_the_compiler(tmp_path):
    # a serving process loads the package and launches its kernels: no sympy, no Dynamo
    path = tmp_path / "lin.solder"
    cpu = {"TRITON_INTERPRET": "1"}   # CPU tensors, also on a GPU host
    _run(f"""
        import torch, solder.aot
        m = torch.nn.Sequential(torch.nn.Linear(8, 8), torch.nn.GELU())
        solder.aot.compile(m, (torch.randn(4, 8),), {str(path)!r})
    """, cpu)
    out = _run(f"""
        import sys, torch
        already = {{m for m in ("sympy", "torch._dynamo") if m in sys.modules}}
        import solder.aot
        run = solder.aot.load({str(path)!r})
        out = run(torch.randn(4, 8))
        print("loaded:", [m for m in ("sympy", "torch._dynamo") if m in sys.modules
                          and m not in already])
    """, cpu)
    assert "loaded: []" in out, out
