"""Ahead-of-time packages: compile once, ship one file, load and run with no compiler in the loop.

    solder.aot.compile(model, (x,), "model.solder", dynamic_shapes={"x": {0: Dim("batch")}})
    run = solder.aot.load("model.solder")          # or load(path, state_dict=...)
    y = run(x)

    python -m solder aot inspect model.solder

See docs/ARCHITECTURE.md ("Ahead-of-time packages") for the format and what loading guarantees.
"""
from __future__ import annotations

from .build import AotError, compile
from .container import FORMAT, PackageError
from .inspect import describe
from .loaded import LoadedPackage, load
from .spec import PackageInputError

__all__ = ["compile", "load", "describe", "LoadedPackage", "AotError", "PackageError",
           "PackageInputError", "FORMAT"]
