"""User Triton kernels in a package: frozen at build time, launched from binaries at load time.

A compiled graph launches a user kernel through a ``UserKernelLauncher`` held among the wrapper's
constants (runtime/user_kernel.py): Triton's own ``kernel[grid](...)``, autotuner included. A
package cannot hold that object, so at build time the example run goes through a
``RecordingUserLauncher`` instead. It launches exactly as the JIT graph does, then writes down
what Triton settled on: the autotuner's chosen config, the values ``@triton.heuristics``
computed, every constexpr and default, which of the captured grids belongs to that config, and
the compiled binary (plus a generic one that runs for any sizes and alignment, as Solder's own
kernels get in binaries.py). ``PackagedUserKernel`` launches those binaries with no Triton
compiler, autotuner or user Python in the loop.

What cannot be frozen is refused when the package is built, naming the kernel:
  - a ``triton.Config`` with a ``pre_hook`` (user Python that runs before every launch);
  - ``@triton.heuristics`` when the package has symbolic sizes (its values are Python functions
    of the arguments; with fixed sizes they are fixed too, and are stored);
  - TMA descriptors, grids that are Python functions, and constexpr values that are not plain
    numbers, strings or None.
An autotuned kernel keeps the config chosen for the example inputs at every size: configs are
interchangeable by Triton's contract, only the speed may differ from eager's choice.
"""
from __future__ import annotations

from typing import Any

from .binaries import BinaryMissing, _binary, _done, generic_of, load_binary, spec_from_json, \
    spec_to_json
from ..runtime.launch import _specialization, _stream


class NotPackable(RuntimeError):
    """A user kernel launch that a package cannot reproduce; the message says why."""


def _layers(kernel):
    """(the autotune/heuristics wrappers, outermost first; the JITFunction under them)."""
    from triton.runtime.autotuner import Autotuner, Heuristics
    from triton.runtime.jit import JITFunction
    layers, k = [], kernel
    while not isinstance(k, JITFunction):
        if not isinstance(k, (Autotuner, Heuristics)):
            raise NotPackable(f"it is a {type(k).__name__}, not a @triton.jit function under "
                              "@triton.autotune / @triton.heuristics")
        layers.append(k)
        k = k.fn
    return layers, k


def check_packable(launcher, dynamic: bool) -> None:
    """Refuse, before anything runs, what a package could not reproduce."""
    from triton.runtime.autotuner import Autotuner, Heuristics
    where = launcher.where()
    try:
        layers, _ = _layers(launcher.kernel)
    except NotPackable as e:
        raise NotPackable(f"{where}: {e}") from None
    if launcher.tma:
        raise NotPackable(f"{where}: takes TMA descriptors ({', '.join(launcher.tma)}), which a "
                          "package does not rebuild yet")
    for layer in layers:
        if isinstance(layer, Autotuner) and any(c.pre_hook for c in layer.configs):
            raise NotPackable(f"{where}: a triton.Config has a pre_hook, Python that runs before "
                              "every launch; a package launches without Python")
        if isinstance(layer, Heuristics) and dynamic:
            raise NotPackable(f"{where}: @triton.heuristics computes {sorted(layer.values)} "
                              "from the arguments at every call; with symbolic sizes a "
                              "package cannot fix them (export with static shapes to store "
                              "the values for the example's sizes)")


class RecordingUserLauncher:
    """Launches like the wrapped ``UserKernelLauncher`` and keeps what a package needs."""

    def __init__(self, launcher):
        self.launcher = launcher
        self.entry: dict | None = None      # the plain-data part, once recorded
        self.exact: dict[tuple, Any] = {}   # (spec, per-call constexprs) -> CompiledKernel
        self.generic: dict[tuple, Any] = {}
        self.generic_failed: dict[tuple, str] = {}

    def __call__(self, grids, /, **kwargs):
        self.launcher(grids, **kwargs)
        self._record(grids, kwargs)

    def _record(self, grids, kwargs: dict) -> None:
        from triton.runtime.autotuner import Autotuner
        launcher = self.launcher
        where = launcher.where()
        layers, jit = _layers(launcher.kernel)
        named = {**kwargs, **launcher.const_args}
        chosen = None
        for layer in layers:   # outermost first, as Triton applies them
            if isinstance(layer, Autotuner):
                chosen = layer.best_config   # set by the launch that just ran
                named.update(chosen.all_kwargs())
            else:
                for name, heur in layer.values.items():
                    named[name] = heur(dict(named))
        params = list(jit.arg_names)
        for p in jit.params:
            if p.name not in named:
                if p.has_default:
                    named[p.name] = p.default
                else:
                    raise NotPackable(f"{where}: parameter {p.name} got no value")
        options = {k: v for k, v in named.items() if k not in params}
        constexprs = [p.name for p in jit.params if p.is_constexpr]
        per_call = [n for n in params if n in kwargs and n not in constexprs]
        call_constexprs = [n for n in params if n in kwargs and n in constexprs]
        frozen = {n: named[n] for n in params if n not in kwargs}
        grid_index = self._grid_index(grids, chosen, where)
        grid = grids[grid_index]
        if callable(grid):
            raise NotPackable(f"{where}: its grid is a Python function; a package needs a grid "
                              "of sizes")
        grid = _grid3(grid)
        values = [named[n] for n in params]
        spec = (_specialization([named[n] for n in per_call]),
                tuple(named[n] for n in call_constexprs))
        if spec not in self.exact:
            self.exact[spec] = _done(jit.warmup(*values, grid=grid, **options))
        widths = (generic_of(spec[0]), spec[1])
        if widths not in self.generic and widths not in self.generic_failed:
            try:
                self.generic[widths] = _done(self._generic(jit, per_call).warmup(
                    *values, grid=grid, **options))
            except Exception as e:  # noqa: BLE001 - the exact binary still runs; say why
                self.generic_failed[widths] = f"{type(e).__name__}: {str(e)[-300:]}"
        entry = {"label": launcher.label, "site": launcher.site, "params": params,
                 "per_call": per_call, "call_constexprs": call_constexprs,
                 "frozen": frozen, "grid_index": grid_index,
                 "config": dict(chosen.all_kwargs()) if chosen is not None else dict(options)}
        if self.entry is not None and (self.entry["frozen"] != frozen
                                       or self.entry["grid_index"] != grid_index):
            raise NotPackable(f"{where}: two launches at build time froze different values "
                              f"({self.entry['config']} against {entry['config']})")
        self.entry = entry

    def _grid_index(self, grids, chosen, where: str) -> int:
        if len(grids) == 1:
            return 0
        configs = self.launcher.config_kwargs or []
        for i, cfg in enumerate(configs):
            if chosen is not None and all(chosen.kwargs.get(k) == v for k, v in cfg.items()):
                return i
        raise NotPackable(f"{where}: no captured grid belongs to the chosen config {chosen}")

    def _generic(self, jit, names: list):
        from triton.runtime.jit import JITFunction
        if not hasattr(self, "_generic_fn"):
            # every per-call argument unspecialized: one binary for any sizes and alignment
            self._generic_fn = JITFunction(jit.fn, do_not_specialize=names,
                                           do_not_specialize_on_alignment=names,
                                           debug=jit.debug, noinline=jit.noinline)
        return self._generic_fn


def _grid3(grid) -> tuple:
    g = tuple(int(x) for x in grid)
    if not 1 <= len(g) <= 3:
        raise NotPackable(f"grid {g} has {len(g)} dimensions")
    return g + (1,) * (3 - len(g))


def export_user_kernel(const_index: int, rec: RecordingUserLauncher, members: dict,
                       encode) -> dict:
    """The package entry of one user kernel call site (``encode`` turns a frozen value into
    tagged JSON, raising for what is not plain data)."""
    if rec.entry is None:
        raise NotPackable(f"{rec.launcher.where()}: did not run on the example inputs, so "
                          "nothing was compiled for it")
    try:
        return _entry(const_index, rec, members, encode)
    except NotPackable as e:
        raise NotPackable(f"{rec.launcher.where()}: {e}") from None


def _entry(const_index: int, rec: RecordingUserLauncher, members: dict, encode) -> dict:
    e = rec.entry
    frozen = {k: encode(v) for k, v in e["frozen"].items()}
    binaries = [_binary(k, {}, {"spec": spec_to_json(s), "constexprs": encode(list(c))}, members)
                for (s, c), k in rec.exact.items()]
    binaries += [_binary(k, {}, {"generic": list(w), "constexprs": encode(list(c))}, members)
                 for (w, c), k in rec.generic.items()]
    return {"const": const_index, "label": e["label"], "site": e["site"],
            "params": e["params"], "per_call": e["per_call"],
            "call_constexprs": e["call_constexprs"],
            "frozen": frozen,
            "grid_index": e["grid_index"], "config": {k: encode(v) for k, v in e["config"].items()},
            "binaries": binaries,
            "generic_failed": [[list(w), why] for (w, _), why in rec.generic_failed.items()]}


class PackagedUserKernel:
    """One user kernel call site of a loaded package: the wrapper calls it as it calls a
    ``UserKernelLauncher`` (grids first, then the per-call arguments by name)."""

    def __init__(self, entry: dict, members: dict, tmpdir: str, decode):
        self.label, self.site = entry["label"], entry["site"]
        self.params = list(entry["params"])
        self.per_call = list(entry["per_call"])
        self.call_constexprs = list(entry["call_constexprs"])
        self.frozen = {k: decode(v) for k, v in entry["frozen"].items()}
        self.grid_index = int(entry["grid_index"])
        self.exact: dict[tuple, Any] = {}
        self.generic: dict[tuple, Any] = {}
        for b in entry["binaries"]:
            kernel = load_binary(b, members, tmpdir)
            consts = tuple(decode(b["constexprs"]))
            if "generic" in b:
                self.generic[(tuple(b["generic"]), consts)] = kernel
            else:
                self.exact[(spec_from_json(b["spec"]), consts)] = kernel
        self.fast: dict[tuple, Any] = {}

    def __call__(self, grids, /, **kwargs):
        named = {**self.frozen, **kwargs}
        spec = (_specialization([named[n] for n in self.per_call]),
                tuple(named[n] for n in self.call_constexprs))
        kernel = self.fast.get(spec)
        if kernel is None:
            kernel = self.exact.get(spec) or self.generic.get((generic_of(spec[0]), spec[1]))
            if kernel is None:
                raise BinaryMissing(
                    f"user Triton kernel {self.label} (called at {self.site}): no packaged binary "
                    f"for arguments specialized as {spec} (built for {sorted(map(str, self.exact))})"
                    "; rebuild the package with an example of these sizes")
            self.fast[spec] = kernel
        grid = grids[self.grid_index] if len(grids) > 1 else grids[0]
        g0, g1, g2 = _grid3(grid)
        if g0 * g1 * g2 == 0:
            return None
        kernel.run(g0, g1, g2, _stream(), kernel.function, kernel.packed_metadata, None, None,
                   None, *[named[n] for n in self.params])
        return None
