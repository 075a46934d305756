"""AOTAutograd's graph printing, skipped when no log will show it.

For its logs AOTAutograd prints the joint graph and the forward and backward graphs to strings
(with strides and devices) at every training compile, whether or not a log is enabled: 0.13 s
of an 8-layer LLaMA step's capture on the CPU, and it grows with the model. Only its own
``AOTConfig.enable_log`` turns that off, and ``aot_module_simplified`` (what Dynamo's
``aot_autograd`` backends call) always leaves it on. So while Solder's capture runs, the
``AOTConfig`` that AOTAutograd constructs gets ``enable_log=False`` unless its graph logs are
on (``TORCH_LOGS=aot_graphs`` / ``aot_joint_graph``, ``torch._logging.set_logs``) or a
structured trace is being written (``TORCH_TRACE``, ``TORCH_COMPILE_DEBUG``). The flag gates
logging only. Where torch builds its config elsewhere or names things otherwise, nothing is
changed.
"""
from __future__ import annotations

import contextlib
import logging
import os

_GRAPH_LOGGERS = ("aot_graphs_log", "aot_joint_log")


def graph_logs_wanted() -> bool:
    """Whether a log or a structured trace would show AOTAutograd's graph printouts (True
    where this torch does not say)."""
    if os.environ.get("TORCH_TRACE") or os.environ.get("TORCH_COMPILE_DEBUG"):
        return True
    try:
        from torch._functorch._aot_autograd import graph_compile
    except ImportError:
        return True
    for name in _GRAPH_LOGGERS:
        logger = getattr(graph_compile, name, None)
        if not isinstance(logger, logging.Logger) or logger.isEnabledFor(logging.DEBUG):
            return True
    return False


@contextlib.contextmanager
def unprinted_unless_logged():
    """The block's AOTAutograd compiles skip printing graphs that no log shows."""
    from torch._functorch import aot_autograd
    real = getattr(aot_autograd, "AOTConfig", None)
    if "enable_log" not in getattr(real, "__dataclass_fields__", {}) or graph_logs_wanted():
        yield
        return

    def quiet_config(*args, **kwargs):
        if not args:   # always keywords in the torch versions seen; positional: left alone
            kwargs.setdefault("enable_log", False)
        return real(*args, **kwargs)
    aot_autograd.AOTConfig = quiet_config
    try:
        yield
    finally:
        aot_autograd.AOTConfig = real
