"""A compiled graph: its wrapper module and kernel runners, called with the graph's inputs."""
from __future__ import annotations

import time

import torch

from ..codegen.generated import KernelSource
from . import support
from .launch import KernelRunner, load_module


class CompiledGraph:
    def __init__(self, name: str, wrapper, module_src: str, kernels: dict[str, KernelSource],
                 config, dump_path, stats: dict | None = None, native: bool = False):
        # AOTAutograd passes the inputs as one list; an instance attribute survives the
        # functools.wraps of Dynamo's disable() around backward graphs
        self._boxed_call = True
        self.name = name
        self.wrapper_source = wrapper.source
        self.kernel_source = module_src
        # what the graph was built from, for ahead-of-time packages (solder.aot)
        self.wrapper = wrapper
        self.kernels = dict(kernels)
        runners = {}
        if kernels and native:   # C++ kernels (runtime/native.py)
            from . import native as native_kernels
            runners = native_kernels.runners(module_src, kernels, config.cache_dir, name)
            if stats is not None:
                stats["kernels"] = stats["distinct_kernels"] = len(kernels)
        elif kernels:
            mod = load_module(module_src, config.cache_dir, stem=name)
            by_fn = {}
            if stats is not None:
                stats["kernels"] = len(kernels)
                stats["distinct_kernels"] = len({id(getattr(mod, k)) for k in kernels})
            for kname, src in kernels.items():
                fn = getattr(mod, kname)
                if id(fn) not in by_fn:  # kernels with identical code share launch tuning
                    by_fn[id(fn)] = KernelRunner(fn, src, name, dump_path, config.autotune, stats)
                    runners[kname] = by_fn[id(fn)]
                else:
                    runners[kname] = by_fn[id(fn)].for_call_site()
        self._call = exec_wrapper(wrapper, runners, f"solder {name}")
        self.runners = runners
        # run once, in order, after the first call that returns (the graph cache stores the
        # graph then; the compile log reports Triton's and the tuner's share)
        self.after_first_call: list = []
        # run once, in order, before the first call (waiting for the kernels that compile in
        # the background: runtime/precompile.py)
        self.before_first_call: list = []
        if stats is not None:   # the first call's wall seconds, waits, launches and tuning in
            self._time_first_call(stats)

    def _time_first_call(self, stats: dict) -> None:
        started = []

        def done():
            if started:   # (not where the hooks were run by hand, without a call)
                stats["first_call_wall"] = time.perf_counter() - started[0]
        self.before_first_call.append(lambda: started.append(time.perf_counter()))
        self.after_first_call.append(done)

    def ready(self) -> None:
        """Wait for what must be done before the graph first runs; then it never waits again."""
        if self.before_first_call:
            hooks, self.before_first_call = self.before_first_call, []
            for hook in hooks:
                hook()

    def __call__(self, *args):
        # boxed (one list, as AOTAutograd calls forward graphs) or plain positional arguments
        args = args[0] if len(args) == 1 and isinstance(args[0], list) else list(args)
        if self.before_first_call:
            self.ready()
        out = list(self._call(args))
        if self.after_first_call:
            hooks, self.after_first_call = self.after_first_call, []
            for hook in hooks:
                hook()
        return out


def exec_wrapper(wrapper, runners: dict, label: str):
    """The ``call(args)`` of a generated wrapper module, bound to its kernel runners and the
    names it uses (see codegen/wrapper.py); shared by JIT graphs and loaded packages."""
    namespace = {"K": runners, "OPS": [support.fast_callable(op) for op in wrapper.ops],
                 "CONSTS": wrapper.consts, "S": support, "R": support.reinterpret,
                 "torch": torch}
    exec(compile(wrapper.source, f"<{label} wrapper>", "exec"), namespace)
    return namespace["call"]
