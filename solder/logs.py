"""Solder's log, through PyTorch's logging (``torch._logging``), as inductor's is.

    TORCH_LOGS=solder         Solder's log at INFO: one line per compiled graph once it has run
                              (stage times, kernel counts, ATen fallbacks, cache), and notes
    TORCH_LOGS=+solder        ... and at DEBUG
    TORCH_LOGS=output_code    each graph's generated code: the Triton kernels and the wrapper
    TORCH_LOGS=schedule       each graph's kernels: the buffers each one computes and stores
    TORCH_LOGS=perf_hints     each op that runs in ATen, with the reason it was not lowered
    TORCH_TRACE=dir           the same three as artifacts of the structured trace (tlparse)

The artifact names are PyTorch's own (inductor writes to them too): ``import torch`` checks
``TORCH_LOGS`` against the names registered by then, before Solder is imported, so on torch
2.11 to 2.13 only PyTorch's names and module names (``solder``) are accepted there.
"""
from __future__ import annotations

import logging
import os

log = logging.getLogger("solder")
# the per-graph compile line: ``log_compile`` sets this one to INFO without touching the rest
compile_log = logging.getLogger("solder.compile")

_artifacts: dict = {}
_said: set = set()


def register() -> None:
    """Make ``solder`` one of torch's logs: its handler and format, and the levels that
    ``TORCH_LOGS`` or ``torch._logging.set_logs`` give it. A no-op where torch's logging lacks
    what is used here."""
    if _mentions_solder(os.environ.get("TORCH_LOGS", "")):
        return   # torch registers it itself, as a module name, while it parses TORCH_LOGS
    try:
        from torch._logging import _internal as tl
        if "solder" in tl.log_registry.get_log_qnames():
            return
        tl.register_log("solder", "solder")
        # what torch's _init_logs does for each of its logs, for this one only: running it
        # again would reset levels a program set on torch's loggers by hand
        level = tl.log_state.log_qname_to_level.get("solder", logging.NOTSET)
        log.setLevel(level)
        log.propagate = False
        tl._clear_handlers(log)
        tl._setup_handlers(logging.StreamHandler, log)
        out = os.environ.get("TORCH_LOGS_OUT")
        if out:
            tl._setup_handlers(lambda: logging.FileHandler(out), log)
    except Exception:  # noqa: BLE001 - logging must never stop a compile: Python's defaults
        pass


def _mentions_solder(settings: str) -> bool:
    names = (n.strip().lstrip("+-") for n in settings.split(","))
    return any(n == "solder" or n.startswith("solder.") for n in names)


def artifact(name: str) -> logging.Logger:
    """torch's artifact logger ``name`` under Solder's log (a plain child where torch lacks
    the name)."""
    got = _artifacts.get(name)
    if got is None:
        try:
            from torch._logging import getArtifactLogger
            got = getArtifactLogger("solder.logs", name)
        except Exception:  # noqa: BLE001
            got = logging.getLogger(f"solder.{name}")
        _artifacts[name] = got
    return got


def emit(name: str, graph: str, text_fn) -> None:
    """Artifact ``name`` of ``graph`` to its torch artifact log and to the structured trace;
    ``text_fn`` runs only where one of them shows it."""
    logger = artifact(name)
    text = None
    if logger.isEnabledFor(logging.DEBUG):
        text = text_fn()
        logger.debug("%s %s:\n%s", graph, name, text)
    try:
        from torch._logging import trace_structured
    except ImportError:
        return
    trace_structured("artifact",
                     metadata_fn=lambda: {"name": f"solder_{graph}_{name}", "encoding": "string"},
                     payload_fn=lambda: text if text is not None else text_fn())


def info(logger: logging.Logger, message: str, always: bool = False) -> None:
    """``message`` at INFO; with ``always``, whatever the logger's level (an option asked for
    it), without changing the level for anything else."""
    if logger.isEnabledFor(logging.INFO):
        logger.info(message)
    elif always and not logger.disabled:
        logger.handle(logger.makeRecord(logger.name, logging.INFO, __file__, 0, message, (),
                                        None))


def say_once(key: str, message: str, *args) -> None:
    """A warning a process needs once (the first compile that meets it), not per graph."""
    if key in _said:
        return
    _said.add(key)
    log.warning(message, *args, stacklevel=2)
