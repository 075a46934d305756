"""Where an FX node came from in the user's program: ``file.py:line code``, read from the stack
trace Dynamo records on each node. Kernels, library calls and fallbacks carry it into the
generated code and ``solder.explain``; the graph cache hashes it (a changed line is a changed
graph's report). A leaf module, shared by lowering and the runtime."""
from __future__ import annotations

import functools
import os
import re

import torch


_FRAME = re.compile(r'File "([^"]+)", line (\d+), in (\S+)\n\s*(.*)')


@functools.lru_cache(maxsize=None)
def _library_dirs() -> tuple[str, ...]:
    import triton
    return tuple(os.path.dirname(m.__file__) + os.sep for m in (torch, triton))


def source_of(node) -> list[str]:
    """The user's line an op came from: the innermost frame outside torch and triton (a
    default-device context or a torch function override adds frames of their own)."""
    trace = node.meta.get("stack_trace")
    if not trace:
        return []
    return list(_source_of_trace(trace))


@functools.lru_cache(maxsize=4096)   # a model's repeated layers share their stack traces
def _source_of_trace(trace: str) -> tuple:
    frames = _FRAME.findall(trace)
    user = [f for f in frames if not f[0].startswith(_library_dirs())]
    if not (user or frames):
        return ()
    path, line, fn, code = (user or frames)[-1]
    return (f"{path.rsplit('/', 1)[-1]}:{line} {code.strip()}",)
