"""Solder: a compiler for PyTorch programs.

    torch.compile(model, backend="solder")           # registered through an entry point
    torch.compile(model, backend=solder.compile_backend, options={"debug_dir": "dump"})
    print(solder.explain(fn, *args))                  # kernels, library calls, fallbacks

``solder.backend`` is the module that defines the backends (``import solder.backend``);
the backend functions are ``solder.compile_backend`` and ``solder.debug_backend``.
"""
from __future__ import annotations

__version__ = "0.1.0"

from .backend import solder_backend as compile_backend  # noqa: E402
from .backend import solder_debug_backend as debug_backend  # noqa: E402
from .config import Config  # noqa: E402
from .explain import Report, explain  # noqa: E402
from . import logs  # noqa: E402

__all__ = ["compile_backend", "debug_backend", "explain", "Report", "Config", "__version__"]


def _register_backends() -> None:
    """Make backend="solder" work when solder is on the path without being installed. An
    installed copy is found through its entry point, and importing Dynamo (about a second)
    just to register would make every ``import solder`` pay for it."""
    import sys
    if "torch._dynamo" not in sys.modules and _installed_entry_points():
        return
    from torch._dynamo.backends.registry import _BACKENDS, register_backend
    if "solder" not in _BACKENDS:
        register_backend(compile_backend, name="solder")
    if "solder_debug" not in _BACKENDS:
        register_backend(debug_backend, name="solder_debug")


def _installed_entry_points() -> bool:
    from importlib.metadata import entry_points
    try:
        found = {e.name: e.value for e in entry_points(group="torch_dynamo_backends")}
    except Exception:   # broken metadata: register by hand
        return False
    return (found.get("solder") == "solder.backend:solder_backend"
            and found.get("solder_debug") == "solder.backend:solder_debug_backend")


_register_backends()
logs.register()
