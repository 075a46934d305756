"""Native CPU kernels: a graph's C++ translation unit compiled with the system's C++ compiler
into a shared library, cached on disk by the hash of its source (and the compiler's command),
loaded with ctypes; each kernel called through ``native_call``'s C entry point (a ctypes runner
where that cannot be built), which passes data pointers and sizes and raises eager's error
where the kernel set its error flag.

Toolchain: the C++ compiler in ``CXX`` (default ``g++``, else ``c++``/``clang++``) with
``-O3 -march=native -fopenmp``, and never ``-ffast-math`` (NaN, infinities and signed zeros are
eager's) nor contraction into fused multiply-adds (``-ffp-contract=off``: eager rounds the
product and the sum apart).
"""
from __future__ import annotations

import ctypes
import functools
import hashlib
import os
import shutil
import subprocess
import tempfile
import threading
from pathlib import Path
from typing import Optional

import torch

from . import native_call
from .cache import default_cache_dir

FLAGS = ["-O3", "-march=native", "-fopenmp", "-ffp-contract=off", "-fno-math-errno",
         "-shared", "-fPIC", "-std=c++17", "-w"]
_LOCK = threading.Lock()
_LOADED: dict = {}


def compiler() -> Optional[str]:
    """The C++ compiler's path, or None where there is none."""
    for name in ([os.environ["CXX"]] if os.environ.get("CXX") else []) + ["g++", "c++", "clang++"]:
        path = shutil.which(name)
        if path:
            return path
    return None


class NativeCompileError(RuntimeError):
    pass


def _machine() -> str:
    """The CPU's architecture and instruction-set flags (what -march=native compiles for)."""
    import platform
    flags = ""
    try:
        with open("/proc/cpuinfo") as f:
            flags = next((line for line in f if line.startswith(("flags", "Features"))), "")
    except OSError:
        pass
    return f"{platform.machine()} {flags.strip()}"


def build(source: str, cache_dir: Optional[str]) -> Path:
    """The shared library of ``source``, compiled once per source and compiler."""
    cxx = compiler()
    if cxx is None:
        raise NativeCompileError("no C++ compiler found (set CXX)")
    # -march=native: a library is for this machine's instruction set only (a cache folder
    # shared with another machine must not hand it one that faults there)
    key = hashlib.sha256("\0".join([cxx, _machine()] + FLAGS + [source]).encode()).hexdigest()[:32]
    folder = Path(cache_dir or default_cache_dir()) / "native"
    folder.mkdir(parents=True, exist_ok=True)
    lib = folder / f"k{key}.so"
    if lib.exists():
        return lib
    src = folder / f"k{key}.cpp"
    src.write_text(source)
    with tempfile.NamedTemporaryFile(dir=folder, suffix=".so", delete=False) as tmp:
        out = tmp.name
    done = subprocess.run([cxx, *FLAGS, str(src), "-o", out], capture_output=True, text=True)
    if done.returncode != 0:
        os.unlink(out)
        raise NativeCompileError(f"{cxx} failed on {src}:\n{done.stderr[-4000:]}")
    os.replace(out, lib)   # atomic: a concurrent build of the same source wrote the same bytes
    return lib


def load(source: str, cache_dir: Optional[str]):
    lib = build(source, cache_dir)
    with _LOCK:
        if lib not in _LOADED:
            _LOADED[lib] = ctypes.CDLL(str(lib))
        return _LOADED[lib]


class NativeKernelRunner:
    """Calls one C++ kernel: tensors as data pointers, sizes as int64."""

    def __init__(self, lib, src, graph_name: str):
        self.fn = getattr(lib, src.name)
        self.fn.restype = ctypes.c_int64
        self.fn.argtypes = [ctypes.c_void_p if kind == "ptr" else ctypes.c_int64
                            for kind, _ in src.args]
        self.name, self.graph_name = src.name, graph_name

    def __call__(self, *args):
        raw = [a.data_ptr() if isinstance(a, torch.Tensor) else int(a) for a in args]
        if self.fn(*raw):
            raise ZeroDivisionError("ZeroDivisionError")   # eager's message, for integer / 0


def runners(module_src: str, kernels: dict, cache_dir: Optional[str], graph_name: str) -> dict:
    """Each kernel's runner: ``native_call``'s C entry bound to the kernel's address (0.8 us a
    call), else a ctypes runner (3.5 us)."""
    lib = load(module_src, cache_dir)
    call = native_call.load(compiler(), Path(cache_dir or default_cache_dir()) / "native")
    out = {}
    for name, src in kernels.items():
        if call is not None and len(src.args) <= native_call.MAX_ARGS:
            address = ctypes.cast(getattr(lib, src.name), ctypes.c_void_p).value
            out[name] = functools.partial(call, address)
        else:
            out[name] = NativeKernelRunner(lib, src, graph_name)
    return out
