"""Checks that a compiled kernel's launcher is its own, and rebuilds it where it is not.

Triton builds one small C module per launcher signature (``__triton_launcher``, cached on disk by
its source) and launches a kernel through its ``launch`` function. In long-lived processes among
many that share one Triton cache, a kernel was seen holding another kernel's launcher ("function
takes exactly 19 arguments (22 given)": a launcher of 6 parameters for a kernel of 9;
docs/fuzz-runs.md). A launcher of the right arity but the wrong argument types would not raise:
it would pass a 64-bit integer where the kernel reads 32 bits. So each launcher is checked once,
when its kernel is loaded:

- its arity against the kernel's signature (``launch()`` with no arguments raises a TypeError
  that says how many it takes), and
- the shared object its C function lives in (``dladdr``) against the file its module was loaded
  from: the dynamic loader hands back an object already loaded when a file looks like it
  (the same device and inode), whatever the path.

A launcher that fails either is rebuilt from its source into a file of its own and checked again.
"""
from __future__ import annotations

import ctypes
import os
import re
import tempfile
import threading
import types

from .. import logs


class LauncherMismatch(RuntimeError):
    pass


def check_and_repair(kernel, stats: dict | None = None) -> bool:
    """Checks ``kernel``'s launcher (a Triton ``CompiledKernel`` whose ``run`` is loaded) once;
    rebuilds it where it is another's. True where it was rebuilt."""
    run = getattr(kernel, "_run", None)
    launch = getattr(run, "launch", None)
    if launch is None or getattr(kernel, "_solder_launcher_ok", False):
        return False
    problem = launcher_problem(launch, expected_arity(kernel))
    if problem is None:
        kernel._solder_launcher_ok = True
        return False
    fresh = rebuild_launch(kernel)
    again = launcher_problem(fresh, expected_arity(kernel))
    if again is not None:
        raise LauncherMismatch(f"the launcher of Triton kernel {getattr(kernel, 'name', '?')} is "
                               f"not its own ({problem}), and rebuilt it still is not ({again})")
    run.launch = fresh
    kernel._solder_launcher_ok = True
    if stats is not None:
        stats["launchers_rebuilt"] = stats.get("launchers_rebuilt", 0) + 1
    logs.say_once(f"launcher {getattr(kernel, 'name', '?')}: {problem}",
                  "Solder: kernel %s held another kernel's launcher (%s); rebuilt it",
                  getattr(kernel, "name", "?"), problem)
    return True


def check_before_launch(fn, args, options: dict, stats: dict | None = None):
    """Compiles and loads the kernel that ``fn[grid](*args, **options)`` would launch, without
    launching it, and checks its launcher: a first launch through a wrong launcher of the right
    arity would be silently wrong. Errors other than a launcher that stays wrong are left to
    the launch, which reports them."""
    try:
        kernel = fn.warmup(*args, grid=(1,), **options)
        kernel.run  # noqa: B018 - the property loads the binary and builds the launcher
    except Exception:  # noqa: BLE001 - the launch compiles it again and reports
        return
    check_and_repair(kernel, stats)


def expected_arity(kernel) -> int | None:
    """The number of arguments the kernel's launcher takes: Triton's fixed launch arguments and
    one per kernel parameter (constexprs included, a tuple as one). None where it cannot be
    told (tensor descriptors expand into several)."""
    signature = getattr(getattr(kernel, "src", None), "signature", None)
    if not isinstance(signature, dict):
        return None
    if any(isinstance(t, str) and t.startswith("tensordesc") for t in signature.values()):
        return None
    try:
        from triton.backends.nvidia import driver
        base = len(driver._BASE_ARGS_FORMAT)
    except (ImportError, AttributeError):
        return None
    return base + len(signature)


_TAKES = re.compile(r"takes exactly (\d+) arguments?")


def launcher_problem(launch, arity: int | None) -> str | None:
    """Why ``launch`` is not the launcher of a kernel taking ``arity`` arguments, or None."""
    if arity is not None:
        taken = launch_arity(launch)
        if taken is not None and taken != arity:
            return f"it takes {taken} arguments, the kernel's {arity}"
    loaded, code = module_file(launch), code_file(launch)
    if loaded and code and not _same_file(loaded, code):
        return f"its module was loaded from {loaded} but its code is {code}'s"
    return None


def launch_arity(launch) -> int | None:
    """How many arguments a launcher's ``launch`` takes: called with none, it raises before it
    touches anything ("function takes exactly N arguments (0 given)")."""
    try:
        launch()
    except TypeError as e:
        m = _TAKES.search(str(e))
        return int(m.group(1)) if m else None
    except Exception:  # noqa: BLE001 - some other launcher: nothing to tell
        return None
    return None


def module_file(fn) -> str | None:
    """The file the module of a builtin function was loaded from."""
    module = getattr(fn, "__self__", None)
    return getattr(module, "__file__", None) if isinstance(module, types.ModuleType) else None


class _DlInfo(ctypes.Structure):
    _fields_ = [("dli_fname", ctypes.c_char_p), ("dli_fbase", ctypes.c_void_p),
                ("dli_sname", ctypes.c_char_p), ("dli_saddr", ctypes.c_void_p)]


_dladdr = None
_dladdr_lock = threading.Lock()


def code_file(fn) -> str | None:
    """The shared object that holds a builtin function's C code, as the dynamic loader names
    it; None where it cannot be told (not a C function, no ``dladdr``, another object layout)."""
    if not isinstance(fn, types.BuiltinFunctionType):
        return None
    global _dladdr
    with _dladdr_lock:
        if _dladdr is None:
            try:
                _dladdr = ctypes.CDLL(None).dladdr
                _dladdr.argtypes = [ctypes.c_void_p, ctypes.POINTER(_DlInfo)]
                _dladdr.restype = ctypes.c_int
            except (OSError, AttributeError):
                _dladdr = False
    if not _dladdr:
        return None
    word = ctypes.sizeof(ctypes.c_void_p)
    try:
        # a C function object: the object header (reference count, type), then its PyMethodDef,
        # whose first fields are the name and the C function; the name read back says the
        # layout is the one assumed
        method_def = ctypes.c_void_p.from_address(id(fn) + 2 * word).value
        if not method_def or ctypes.c_char_p.from_address(method_def).value != \
                fn.__name__.encode():
            return None
        c_function = ctypes.c_void_p.from_address(method_def + word).value
    except (ValueError, OSError):
        return None
    info = _DlInfo()
    if not c_function or not _dladdr(c_function, ctypes.byref(info)) or not info.dli_fname:
        return None
    return os.fsdecode(info.dli_fname)


def _same_file(a: str, b: str) -> bool:
    return os.path.realpath(a) == os.path.realpath(b)


_own_dir = None


def rebuild_launch(kernel):
    """A fresh ``launch`` for the kernel: its launcher's C source, compiled into a directory of
    this process's own and loaded from there (a new file, which no loaded object looks like)."""
    global _own_dir
    from triton.backends.nvidia import driver
    from triton.runtime import build
    src = kernel.src
    constants = getattr(src, "constants", None) or {}
    # as Triton's CudaLauncher reads them: constants by parameter index
    constants = {((src.fn.arg_names.index(k),) if isinstance(k, str) else k): v
                 for k, v in constants.items()}
    c_source = driver.make_launcher(constants, dict(src.signature),
                                    getattr(kernel.metadata, "tensordesc_meta", None))
    with _dladdr_lock:
        if _own_dir is None:
            _own_dir = tempfile.mkdtemp(prefix="solder-launchers-")
    where = tempfile.mkdtemp(dir=_own_dir)
    c_path = os.path.join(where, "__triton_launcher.c")
    with open(c_path, "w") as f:
        f.write(c_source)
    so = build._build("__triton_launcher", c_path, where, driver.library_dirs(),
                      driver.include_dirs, driver.libraries, [])
    return build._load_module_from_path("__triton_launcher", so).launch
