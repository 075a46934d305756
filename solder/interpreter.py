"""Running generated kernels on the CPU: Triton's interpreter, switched on for a command.

Triton reads TRITON_INTERPRET once, when it is imported, and importing solder may already have
imported it (through Dynamo): the ``python -m solder`` program then starts again with the
variable set; a program of the user's gets a warning instead."""
from __future__ import annotations

import os
import sys
from typing import Optional


def use_triton_interpreter(command: str, argv: Optional[list[str]]) -> None:
    """Turn the interpreter on for ``python -m solder <command> <argv>`` (restarting it if
    Triton was imported already). A no-op when the variable is set."""
    if "TRITON_INTERPRET" in os.environ:
        return
    os.environ["TRITON_INTERPRET"] = "1"
    if "triton" not in sys.modules:
        return
    main_spec = getattr(sys.modules.get("__main__"), "__spec__", None)
    if getattr(main_spec, "name", None) == "solder.__main__":
        rest = list(sys.argv[1:] if argv is None else [command, *argv])
        sys.stdout.flush()
        os.execv(sys.executable, [sys.executable, "-m", "solder", *rest])
    print("warning: triton was imported before TRITON_INTERPRET=1 could be set; generated "
          "kernels may not run on the CPU (set it in the environment)", file=sys.stderr)


def use_triton_interpreter_without_gpu(command: str, argv: Optional[list[str]]) -> None:
    """The same, only on a machine without a GPU."""
    if "TRITON_INTERPRET" in os.environ:
        return
    import torch
    if not torch.cuda.is_available():
        use_triton_interpreter(command, argv)
