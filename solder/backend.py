"""The ``torch.compile`` backends: ``backend="solder"`` and ``backend="solder_debug"``.

Both are registered through the ``torch_dynamo_backends`` entry point, so they work with no import
of solder. ``solder_debug`` runs the same captured and decomposed graphs op by op through ATen: if
it gives the right answer and ``solder`` does not, the bug is in lowering or codegen.
"""
from __future__ import annotations

from typing import Optional

from . import config as config_mod
from .pipeline import CompileContext


# torch.compile's modes, and what Solder does with each
MODES = {
    "default": None,
    # (turns cuda_graphs on: inference graphs replay as CUDA graphs, runtime/cuda_graphs.py)
    "reduce-overhead": None,
    "max-autotune": "Solder tunes its reduction kernels' launch configs in every mode and has no "
                    "matmul templates yet: compiled as mode='default'",
    "max-autotune-no-cudagraphs": "Solder tunes its reduction kernels' launch configs in every mode "
                                  "and has no matmul templates yet: compiled as mode='default'",
}
_modes_noted: set = set()


def check_mode(mode) -> None:
    """An unknown ``mode=`` is an error; a known one that Solder does not honour yet is said
    once per process in the log rather than ignored silently."""
    if mode is None:
        return
    if mode not in MODES:
        raise ValueError(f"torch.compile(backend='solder', mode={mode!r}): unknown mode; "
                         f"Solder knows {sorted(MODES)}")
    if MODES[mode] and mode not in _modes_noted:
        _modes_noted.add(mode)
        import logging
        logging.getLogger("solder").warning("mode=%r: %s", mode, MODES[mode])


def solder_backend(gm, example_inputs, options: Optional[dict] = None, _ctx=None, **kwargs):
    options = dict(options or {})
    options.update(kwargs.pop("options", {}) or {})
    mode = kwargs.pop("mode", None)
    check_mode(mode)
    if mode == "reduce-overhead":
        options.setdefault("cuda_graphs", True)
    cfg = config_mod.resolve(options)
    ctx = _ctx or CompileContext(cfg)
    import time
    ctx.started = time.perf_counter()
    ctx.started_cpu = time.thread_time()
    from .pipeline import run_as_captured_on_cpu
    as_captured = run_as_captured_on_cpu(gm, ctx)
    if as_captured is not None:
        return as_captured
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
