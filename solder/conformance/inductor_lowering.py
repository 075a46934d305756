"""How inductor ran an op, read from the code it generated: the other column of the report.

The suite never imports inductor's modules. Inductor prints every wrapper it generates to its
``output_code`` artifact loggers; this module listens on those loggers while the op
compiles through ``torch.compile(backend="inductor")`` and reads the calls in the wrapper:

* fallback: the wrapper calls an ATen op (``torch.ops.aten.X`` / ``aten.X``) or an op of
  another namespace (a custom op such as ``torch.ops.torch_nn.X``);
* extern: no ATen call, but a library call (``extern_kernels.X``, ``torch.ops.mkldnn.X``, ...);
* lowered: only generated kernels (and views, allocations);
* not-captured: no wrapper was generated (Dynamo ran the op eagerly).

The same words as Solder's classification (explain.py), so the two columns compare.
"""
from __future__ import annotations

import contextlib
import logging
import re
from typing import Callable

import torch

# Inductor logs its wrapper (on a fresh compile and on an FX-graph-cache hit) through the
# loggers torch._logging made for the "output_code" artifact; they are found by that mark, so
# this module names no inductor module.
_ARTIFACT = "output_code"
_PREFIX = "Output code: \n"


def _output_code_loggers() -> list:
    return [log for log in logging.root.manager.loggerDict.values()
            if isinstance(log, logging.Logger) and getattr(log, "artifact_name", None) == _ARTIFACT]

_ATEN_CALL = re.compile(r"(?<![\w.])(?:torch\.ops\.)?aten\.(\w+)(?:\.\w+)?\(")
# an op of another namespace called from the wrapper (a custom op, torch_nn.*): also not a
# generated kernel; inductor's own helpers and the library namespaces are not fallbacks
_OTHER_OP_CALL = re.compile(r"(?<![\w.])torch\.ops\.(\w+)\.(\w+)(?:\.\w+)?\(")
_NOT_FALLBACK_NAMESPACES = {"aten", "inductor", "prims", "mkldnn", "mkl", "onednn", "_quantized"}
_EXTERN_CALL = re.compile(
    r"(?<![\w.])(?:extern_kernels\.(\w+)|torch\.ops\.(?:mkldnn|mkl|onednn|_quantized)\.(\w+))\(")


class _Collect(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.codes: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        if record.msg == _PREFIX + "%s" and record.args:
            self.codes.append(str(record.args[0]))


@contextlib.contextmanager
def generated_wrappers():
    """Collects the wrapper source of every graph inductor compiles inside the block."""
    handler = _Collect()
    saved = []
    for log in _output_code_loggers():
        saved.append((log, log.level, log.propagate))
        log.setLevel(logging.DEBUG)
        log.propagate = False  # ours only: nothing printed
        log.addHandler(handler)
    try:
        yield handler.codes
    finally:
        for log, level, propagate in saved:
            log.removeHandler(handler)
            log.setLevel(level)
            log.propagate = propagate


def calls_in(code: str) -> tuple[set[str], set[str]]:
    """(ATen ops called, library calls) in one wrapper; definitions and comments skipped."""
    aten, extern = set(), set()
    for line in code.splitlines():
        stripped = line.strip()
        if stripped.startswith(("#", "import ", "from ")):
            continue
        aten.update(m.group(1) for m in _ATEN_CALL.finditer(stripped))
        aten.update(f"{m.group(1)}.{m.group(2)}" for m in _OTHER_OP_CALL.finditer(stripped)
                    if m.group(1) not in _NOT_FALLBACK_NAMESPACES)
        extern.update(a or b for a, b in _EXTERN_CALL.findall(stripped))
    return aten, extern


def classify_codes(codes: list[str]) -> dict:
    """The op-table summary (same keys as explain.classify) of the wrappers of one op."""
    aten, extern = set(), set()
    for code in codes:
        a, e = calls_in(code)
        aten |= a
        extern |= e
    if aten:
        lowering = "fallback"
    elif extern:
        lowering = "extern"
    elif codes:
        lowering = "lowered"
    else:
        lowering = "not-captured"
    return {"lowering": lowering,
            "fallbacks": [{"op": name if "." in name else f"aten.{name}",
                           "reason": "op call in inductor's wrapper"} for name in sorted(aten)],
            "externs": sorted(extern)}


def classify(fn: Callable, args: tuple, kwargs: dict) -> dict:
    """Compile ``fn`` with inductor on these arguments (and its backward when an output needs
    a gradient), and classify what it generated."""
    from torch._dynamo.backends.registry import lookup_backend
    lookup_backend("inductor")   # loads inductor by its backend name: its loggers now exist
    torch._dynamo.reset()
    compiled = torch.compile(fn, backend="inductor", dynamic=False)
    with generated_wrappers() as codes:
        out = compiled(*args, **kwargs)
        grads = [o for o in _tensors(out) if o.requires_grad and o.is_floating_point()]
        if grads:
            torch.autograd.backward(sum(g.float().sum() for g in grads))
    return classify_codes(codes)


def _tensors(out) -> list:
    if isinstance(out, torch.Tensor):
        return [out]
    if isinstance(out, (tuple, list)):
        return [t for o in out for t in _tensors(o)]
    return []
