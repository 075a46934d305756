"""The ``torch.compile`` backends: ``backend="solder"`` and ``backend="solder_debug"``.

Both are registered through the ``torch_dynamo_backends`` entry point, so they work with no import
of solder. ``solder_debug`` runs the same captured and decomposed graphs op by op through ATen: if
it gives the right answer and ``solder`` does not, the bug is in lowering or codegen.
"""
from __future__ import annotations

from typing import Optional

from . import config as config_mod
from .pipeline import CompileContext


def solder_backend(gm, example_inputs, options: Optional[dict] = None, _ctx=None, **kwargs):
    options = dict(options or {})
    options.update(kwargs.pop("options", {}) or {})
    cfg = config_mod.resolve(options)
    ctx = _ctx or CompileContext(cfg)
    import time
    ctx.started = time.perf_counter()
    ctx.started_cpu = time.thread_time()
    from .capture.aot import make_aot_backend
    return make_aot_backend(ctx)(gm, example_inputs)


def solder_debug_backend(gm, example_inputs, options: Optional[dict] = None, **kwargs):
    options = dict(options or {})
    options["debug_eager"] = True
    return solder_backend(gm, example_inputs, options)


def backend_for(options: Optional[dict] = None, ctx: Optional[CompileContext] = None):
    """A backend callable bound to a compile context (explain uses this to collect reports)."""
    def backend(gm, example_inputs, **kwargs):
        return solder_backend(gm, example_inputs, options, _ctx=ctx)
    return backend
