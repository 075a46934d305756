"""One C entry point that calls any native kernel: ``call(address, *args)``.

A kernel called through ctypes costs about 3.5 us of host time (a Python runner that reads each
tensor's data pointer, then ctypes converting every argument); a small model's forward calls
tens of kernels of a few microseconds of work each, and that overhead was most of the gap to
inductor on them. This module is a CPython extension, built once per compiler and Python version
and cached beside the kernels, with one function: ``call(address, *args)`` reads each argument
as an integer or, for a tensor, its ``data_ptr()``, calls the kernel at ``address`` with them
(GIL released), and raises eager's ``ZeroDivisionError`` where the kernel set its error flag.
About 0.8 us a call; ``functools.partial(call, address)`` is the kernel's runner.

Every kernel takes pointers and ``int64_t`` sizes and returns ``int64_t``: on the 64-bit ABIs
(x86-64 System V, AArch64) both kinds of argument travel alike in integer registers and on the
stack, so the kernel is called through a pointer of type ``int64_t (*)(int64_t, ...)`` of its
arity (what ctypes itself does through libffi). Where the extension cannot be built (no Python
headers), ``load()`` returns None and kernels are called through ctypes.
"""
from __future__ import annotations

import ctypes
import functools
import hashlib
import importlib.machinery
import importlib.util
import os
import subprocess
import sys
import sysconfig
import tempfile
import threading
from pathlib import Path
from typing import Optional

MAX_ARGS = 64   # kernels with more arguments are called through ctypes
_LOCK = threading.Lock()
_MODULE: dict = {}
_FOR: dict = {}   # (compiler, cache folder) -> load()'s answer


@functools.lru_cache(maxsize=None)
def source() -> str:
    params = lambda n: ", ".join(["i64"] * n)   # noqa: E731
    cases = "\n".join(
        f"    case {n}: err = ((i64 (*)({params(n)}))fn)"
        f"({', '.join(f'a[{i}]' for i in range(n))}); break;" for n in range(1, MAX_ARGS + 1))
    return f'''// Solder: calls a native kernel by its address (runtime/native_call.py)
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <cstdint>
typedef int64_t i64;

static PyObject* data_ptr_name = nullptr;

static PyObject* call(PyObject*, PyObject* const* args, Py_ssize_t nargs) {{
    if (nargs < 2 || nargs > {MAX_ARGS} + 1) {{
        PyErr_SetString(PyExc_TypeError, "call(address, *args): 1 to {MAX_ARGS} kernel arguments");
        return nullptr;
    }}
    void* fn = PyLong_AsVoidPtr(args[0]);
    i64 a[{MAX_ARGS}];
    for (Py_ssize_t i = 1; i < nargs; ++i) {{
        PyObject* x = args[i];
        if (PyLong_Check(x)) {{
            a[i - 1] = PyLong_AsLongLong(x);
        }} else {{   // a tensor: its data pointer (else an integer-like object's value)
            PyObject* p = PyObject_CallMethodNoArgs(x, data_ptr_name);
            if (p == nullptr) {{
                PyErr_Clear();
                p = PyNumber_Index(x);
                if (p == nullptr) return nullptr;
                a[i - 1] = PyLong_AsLongLong(p);
            }} else {{
                a[i - 1] = (i64)(intptr_t)PyLong_AsVoidPtr(p);
            }}
            Py_DECREF(p);
        }}
    }}
    if (PyErr_Occurred()) return nullptr;
    i64 err = 0;
    Py_BEGIN_ALLOW_THREADS
    switch (nargs - 1) {{
{cases}
    }}
    Py_END_ALLOW_THREADS
    if (err) {{   // an integer division by zero: eager's error and message
        PyErr_SetString(PyExc_ZeroDivisionError, "ZeroDivisionError");
        return nullptr;
    }}
    Py_RETURN_NONE;
}}

static PyMethodDef methods[] = {{
    {{"call", (PyCFunction)(void (*)(void))call, METH_FASTCALL,
     "call(address, *args): the native kernel at address, with integers and tensors' data"}},
    {{nullptr, nullptr, 0, nullptr}}}};
static struct PyModuleDef module = {{PyModuleDef_HEAD_INIT, "solder_native_call", nullptr, -1,
                                     methods}};

PyMODINIT_FUNC PyInit_solder_native_call(void) {{
    data_ptr_name = PyUnicode_InternFromString("data_ptr");
    return data_ptr_name ? PyModule_Create(&module) : nullptr;
}}
'''


def load(cxx: str, cache_dir: Path):
    """The ``call`` function, built into ``cache_dir`` once; None where it cannot be built.
    (Asked once per compiled graph: after the first, an answer from memory.)"""
    known = _FOR.get((cxx, str(cache_dir)), _FOR)
    if known is not _FOR:
        return known
    _FOR[(cxx, str(cache_dir))] = found = _load(cxx, cache_dir)
    return found


def _load(cxx: str, cache_dir: Path):
    include = sysconfig.get_paths().get("include")
    if ctypes.sizeof(ctypes.c_void_p) != 8 or not include or not os.path.exists(os.path.join(include, "Python.h")):
        return None
    src = source()
    key = hashlib.sha256("\0".join([cxx, sys.version, include, src]).encode()).hexdigest()[:24]
    with _LOCK:
        if key in _MODULE:
            return _MODULE[key]
        lib = cache_dir / f"call-{key}{importlib.machinery.EXTENSION_SUFFIXES[0]}"
        if not lib.exists():
            cache_dir.mkdir(parents=True, exist_ok=True)
            cpp = cache_dir / f"call-{key}.cpp"
            cpp.write_text(src)
            with tempfile.NamedTemporaryFile(dir=cache_dir, suffix=".so", delete=False) as tmp:
                out = tmp.name
            done = subprocess.run([cxx, "-O2", "-shared", "-fPIC", "-std=c++17", "-w",
                                   f"-I{include}", str(cpp), "-o", out],
                                  capture_output=True, text=True)
            if done.returncode != 0:
                os.unlink(out)
                _MODULE[key] = None
                return None
            os.replace(out, lib)
        loader = importlib.machinery.ExtensionFileLoader("solder_native_call", str(lib))
        spec = importlib.util.spec_from_loader("solder_native_call", loader)
        module = importlib.util.module_from_spec(spec)
        loader.exec_module(module)
        _MODULE[key] = module.call
        return module.call
