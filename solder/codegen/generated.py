"""What code generation hands to the runtime: each kernel's source, arguments and sizes, and the
wrapper module. Kept apart from the generators (``triton_kernel.py``, ``wrapper.py``, which need
sympy) so that running a cached graph or a loaded package imports no part of the compiler."""
from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class KernelSource:
    name: str
    source: str
    args: list          # ordered: ("ptr", buffer_name) | ("size", symbol_name) | ("numel", "x"/"r")
                        #          | ("seed", slot)
    is_reduction: bool
    persistent: bool
    xnumel: object
    rnumel: object
    int64: bool
    origins: list = field(default_factory=list)
    reduction_hint: str = "inner"   # "outer": rows are strided in memory (column reductions)
    even: bool = False  # every launch config tiles the sizes exactly: no bounds masks
    reload: bool = False  # a persistent kernel with a RELOAD constexpr (see _persistent_body)


@dataclass
class WrapperModule:
    source: str
    ops: list = field(default_factory=list)
    consts: list = field(default_factory=list)
