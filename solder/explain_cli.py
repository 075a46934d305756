"""``python -m solder explain TARGET``: compile a function with Solder, run it once, print the report.

TARGET is ``path/to/script.py:name`` or ``package.module:name``. Two ways to give the inputs:

* ``--args EXPR``: ``name`` is the function to compile and EXPR, a Python expression evaluated
  with ``torch`` and the script's globals in scope, gives its arguments
  (``--args "torch.randn(8, 16), 2"``; one argument needs no trailing comma);
* no ``--args``: ``name`` is called with no arguments and returns ``(fn, args)`` or
  ``(fn, args, kwargs)``; ``fn`` is then compiled and called on them.

The report is ``solder.explain``'s: per graph, the generated kernels and the ATen ops each
fuses, library calls, ATen fallbacks with their reasons, compile times. ``--grad`` makes every
floating-point tensor argument require grad, so the backward graph is compiled and reported
too; ``--source`` also prints the kernels' Triton source. Without a GPU, kernels run in
Triton's interpreter (``TRITON_INTERPRET=1`` is set). Exit status: 0, or 1 when loading,
compiling or running failed (the error is printed), 2 for a bad command line.
"""
from __future__ import annotations

import argparse
import ast
import importlib
import importlib.util
import os
import sys
import traceback
from typing import Any, Callable, Optional

from .interpreter import use_triton_interpreter_without_gpu
from .cli_help import Parser


def build_parser() -> argparse.ArgumentParser:
    p = Parser(prog="python -m solder explain", description=__doc__,
               formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("target", help="path/to/script.py:name or package.module:name")
    p.add_argument("--args", dest="args_expr", default=None, metavar="EXPR",
                   help="the arguments, as a Python expression (torch is in scope); without "
                        "it, TARGET is a factory returning (fn, args) or (fn, args, kwargs)")
    p.add_argument("--grad", action="store_true",
                   help="floating-point tensor arguments require grad: report the backward too")
    p.add_argument("--dynamic", action="store_true", help="compile with dynamic shapes")
    p.add_argument("--option", action="append", default=[], metavar="KEY=VALUE",
                   help="a Solder option (repeatable), VALUE a Python literal: "
                        "--option persistent_reduction_max=256")
    p.add_argument("--seed", type=int, default=0, help="torch.manual_seed before building the "
                   "arguments (default 0)")
    p.add_argument("--source", action="store_true", help="also print the kernels' source")
    return p


class UsageError(Exception):
    """A bad target, argument expression or option: exit status 2."""


def main(argv: Optional[list[str]] = None) -> int:
    args = build_parser().parse_args(argv)
    use_triton_interpreter_without_gpu("explain", argv)
    import torch
    import solder
    try:
        options = parse_options(args.option)
        torch.manual_seed(args.seed)
        fn, fargs, fkwargs = load_target(args.target, args.args_expr)
    except UsageError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    if args.grad:
        fargs, fkwargs = _requiring_grad(fargs), _requiring_grad(fkwargs)
    try:
        report = solder.explain(fn, *fargs, options=options or None,
                                dynamic=True if args.dynamic else None, **fkwargs)
    except Exception:  # noqa: BLE001 - the user's function or the compiler failed: say how
        traceback.print_exc()
        print(f"error: compiling or running {args.target} failed (traceback above)",
              file=sys.stderr)
        return 1
    print(report)
    if args.source:
        print("\n# ---- generated kernels ----\n")
        print(report.source())
    return 0


def parse_options(items: list[str]) -> dict:
    options = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise UsageError(f"--option wants KEY=VALUE, got {item!r}")
        try:
            options[key.strip()] = ast.literal_eval(value.strip())
        except (ValueError, SyntaxError):
            options[key.strip()] = value.strip()  # a bare word: a string
    if options:
        from . import config as config_mod
        try:
            config_mod.resolve(options)
        except Exception as err:  # noqa: BLE001 - an unknown key or a bad value
            raise UsageError(f"bad --option: {err}") from err
    return options


def load_target(target: str, args_expr: Optional[str]) -> tuple[Callable, tuple, dict]:
    """``(fn, args, kwargs)`` for a TARGET and an optional argument expression."""
    where, sep, name = target.rpartition(":")
    if not sep or not where or not name:
        raise UsageError(f"TARGET must be path/to/script.py:name or module:name, got {target!r}")
    namespace = _load_namespace(where)
    obj = namespace
    for part in name.split("."):
        if not hasattr(obj, part):
            raise UsageError(f"{where} has no {name!r}")
        obj = getattr(obj, part)
    if not callable(obj):
        raise UsageError(f"{target} is not callable")
    if args_expr is not None:
        scope = {"torch": _torch(), **vars(namespace)}
        try:
            value = eval(args_expr, scope)  # noqa: S307 - the user's own expression, by design
        except Exception as err:  # noqa: BLE001
            raise UsageError(f"--args {args_expr!r} failed: {type(err).__name__}: {err}") from err
        return obj, (value if isinstance(value, tuple) else (value,)), {}
    try:
        made = obj()
    except Exception as err:  # noqa: BLE001
        raise UsageError(f"calling {target}() to get (fn, args) failed: "
                         f"{type(err).__name__}: {err}") from err
    return _unpack_factory_result(target, made)


def _unpack_factory_result(target: str, made: Any) -> tuple[Callable, tuple, dict]:
    if isinstance(made, tuple) and len(made) in (2, 3) and callable(made[0]):
        fn, fargs = made[0], made[1]
        fkwargs = made[2] if len(made) == 3 else {}
        if not isinstance(fargs, (tuple, list)) or not isinstance(fkwargs, dict):
            raise UsageError(f"{target}() must return (fn, args) or (fn, args, kwargs) with "
                             f"args a tuple or list and kwargs a dict")
        return fn, tuple(fargs), dict(fkwargs)
    raise UsageError(f"{target}() returned {type(made).__name__}; without --args it must "
                     f"return (fn, args) or (fn, args, kwargs)")


def _load_namespace(where: str):
    if where.endswith(".py") or os.sep in where or "/" in where:
        path = os.path.abspath(where)
        if not os.path.isfile(path):
            raise UsageError(f"no such script: {where}")
        folder = os.path.dirname(path)
        if folder not in sys.path:
            sys.path.insert(0, folder)  # the script's own imports, as `python script.py` has
        module_name = "__solder_explain_" + os.path.splitext(os.path.basename(path))[0]
        spec = importlib.util.spec_from_file_location(module_name, path)
        module = importlib.util.module_from_spec(spec)
        sys.modules[module_name] = module
        try:
            spec.loader.exec_module(module)
        except Exception as err:  # noqa: BLE001
            raise UsageError(f"running {where} failed: {type(err).__name__}: {err}") from err
        return module
    try:
        return importlib.import_module(where)
    except ImportError as err:
        raise UsageError(f"cannot import {where}: {err}") from err


def _requiring_grad(value):
    torch = _torch()
    if isinstance(value, torch.Tensor) and (value.is_floating_point() or value.is_complex()):
        return value.detach().requires_grad_(True)
    if isinstance(value, (list, tuple)):
        return type(value)(_requiring_grad(v) for v in value)
    if isinstance(value, dict):
        return {k: _requiring_grad(v) for k, v in value.items()}
    return value


def _torch():
    import torch
    return torch


