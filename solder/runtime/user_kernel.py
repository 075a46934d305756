"""Launching a user-written Triton kernel from a generated wrapper.

The wrapper calls a ``UserKernelLauncher`` with the grid(s) evaluated for this call and the
kernel's tensor and size arguments; the launcher adds the constant arguments and launches through
Triton itself (``kernel[grid](...)``), so ``@triton.autotune`` (configs, key, restore_value,
reset_to_zero, prune_configs_by) and ``@triton.heuristics`` behave exactly as in eager code.
"""
from __future__ import annotations

from typing import Any, Callable, Optional, Sequence


class UserKernelError(RuntimeError):
    """A user Triton kernel that cannot be compiled, launched or honoured; names the kernel and
    the line of user code that called it."""


class UserKernelLauncher:
    """One call site of a user kernel in one compiled graph. Holds the kernel and its constant
    arguments (and nothing global: deleting the compiled graph frees them)."""

    def __init__(self, kernel, label: str, site: str, graph_name: str, const_args: dict,
                 config_kwargs: Optional[list], tma: Optional[dict] = None):
        self.kernel = kernel
        self.label = label
        self.site = site
        self.graph_name = graph_name
        self.const_args = dict(const_args)
        # per autotune config, the kwargs that select its grid (None: one grid for all)
        self.config_kwargs = config_kwargs
        self.tma = dict(tma or {})
        self.arg_names = list(getattr(kernel, "arg_names", None) or [])

    def where(self) -> str:
        site = f", called at {self.site}" if self.site else ""
        return f"user Triton kernel {self.label}{site} (graph {self.graph_name})"

    def __call__(self, grids: Sequence[Any], /, **kwargs):  # kernels may name a param "grids"
        grid = grids[0] if len(grids) == 1 else self._grid_by_config(grids)
        if callable(grid):
            grid = self._checked(grid)
        args = {**kwargs, **self.const_args}
        for name, meta in self.tma.items():
            args[name] = _descriptor(args[name], meta, self)
        # leading parameters positionally: Triton's hooks (restore_value, reset_to_zero) and
        # autotune keys look arguments up by position
        positional = []
        for name in self.arg_names:
            if name not in args:
                break
            positional.append(args.pop(name))
        try:
            self.kernel[grid](*positional, **args)
        except UserKernelError:
            raise
        except Exception as e:
            raise UserKernelError(f"{self.where()} failed to compile or launch: "
                                  f"{type(e).__name__}: {e}") from e
        return None

    def _checked(self, grid_fn) -> Callable:
        def grid(meta):
            g = grid_fn(meta)
            if isinstance(g, (tuple, list)) and len(g) > 3:
                raise UserKernelError(f"{self.where()}: grid {tuple(g)} has {len(g)} dimensions; "
                                      "Triton grids have at most 3")
            return g
        return grid

    def _grid_by_config(self, grids) -> Callable:
        configs = self.config_kwargs or []

        def pick(meta):
            for cfg, g in zip(configs, grids):
                if all(k in meta and meta[k] == v for k, v in cfg.items()):
                    return g
            raise UserKernelError(
                f"{self.where()}: the autotuner chose a config ({_shown(meta, configs)}) that "
                "was not among the configs seen when the graph was captured; Solder cannot "
                "pick its grid")
        return pick


def _shown(meta, configs) -> str:
    keys = sorted({k for c in configs for k in c})
    return ", ".join(f"{k}={meta.get(k)!r}" for k in keys) or "no tuned kwargs"


def _descriptor(t, meta, launcher: UserKernelLauncher):
    kind, data = meta
    if kind != "stable":
        raise UserKernelError(f"{launcher.where()}: experimental TMA descriptors are not supported")
    from triton.tools.tensor_descriptor import TensorDescriptor
    (block_shape,) = data
    return TensorDescriptor.from_tensor(t, list(block_shape))
