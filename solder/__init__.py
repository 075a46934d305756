"""Solder: a compiler for PyTorch programs.

    torch.compile(model, backend="solder")           # registered through an entry point
    torch.compile(model, backend=solder.backend, options={"debug_dir": "dump"})
    print(solder.explain(fn, *args))                  # kernels, library calls, fallbacks
"""
from __future__ import annotations

__version__ = "0.1.0"

from .backend import solder_backend as backend  # noqa: E402
from .backend import solder_debug_backend as debug_backend  # noqa: E402
from .config import Config  # noqa: E402
from .explain import Report, explain  # noqa: E402

__all__ = ["backend", "debug_backend", "explain", "Report", "Config", "__version__"]


def _register_backends() -> None:
    """Make backend="solder" work when solder is on the path without being installed (the
    entry point covers installed copies)."""
    from torch._dynamo.backends.registry import _BACKENDS, register_backend
    if "solder" not in _BACKENDS:
        register_backend(backend, name="solder")
    if "solder_debug" not in _BACKENDS:
        register_backend(debug_backend, name="solder_debug")


_register_backends()
