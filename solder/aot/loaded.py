"""``solder.aot.load``: a package file back as a callable, with no Triton compiler and no Solder
lowering in the loop.

Loading reads and checks the whole file (``container``), refuses a package built for somewhere
else (``versions``), rebuilds the wrapper module from its stored source and plain-data ops and
constants (``runtime/graph_cache.decode``), puts the weights on the device and then either loads
the GPU binaries (``binaries``) or, for a CPU package, imports the Triton source under Triton's
interpreter. A call checks its inputs against the spec, runs the wrapper, writes back buffer and
input mutations, and returns the results in the exported structure.
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import Optional

import torch

from . import container, spec as spec_mod, tensors, versions
from .container import PackageError


def exec_wrapper(wrapper, runners: dict, name: str):
    """The ``call(args)`` of a generated wrapper, given its kernel runners (as CompiledGraph
    binds it, with runners of our own choosing)."""
    from ..runtime.compiled import exec_wrapper as bind
    return bind(wrapper, runners, f"solder package {name}")


class LoadedPackage:
    """A loaded package: call it like the exported program."""

    def __init__(self, path, state_dict: Optional[dict] = None, options: Optional[dict] = None):
        self.path = str(path)
        _, members = container.read(path)
        try:
            self.info = json.loads(members["package.json"].decode())
            built = self.info["built"]
        except (KeyError, UnicodeDecodeError, json.JSONDecodeError, TypeError) as e:
            raise PackageError(f"{path}: unreadable package.json ({e})") from e
        versions.check(built, path)
        self.spec = self.info["spec"]
        if built["device"] == "cuda":
            self.device = torch.device("cuda", built["device_index"])
        else:
            self.device = torch.device("cpu")
        self._values = self._tensors(members, state_dict)
        self._call = self._runner(members, options)

    # -- loading --------------------------------------------------------------------------
    def _tensors(self, members, state_dict) -> dict:
        try:
            constants = tensors.loads(members["constants.safetensors"])
            stored = (tensors.loads(members["weights.safetensors"])
                      if self.info["weights"]["stored"] else {})
        except (ValueError, RuntimeError, KeyError) as e:
            raise PackageError(f"{self.path}: unreadable tensors ({type(e).__name__}: {e})") from e
        wanted = self.info["weights"]["tensors"]
        if state_dict is not None:
            stored = {**stored, **{k: v for k, v in state_dict.items() if k in wanted}}
        missing = sorted(set(wanted) - set(stored))
        if missing:
            shown = ", ".join(missing[:8]) + (f" and {len(missing) - 8} more" if len(missing) > 8 else "")
            raise PackageError(f"{self.path}: built without weights; the state dict lacks {shown}"
                               if not self.info["weights"]["stored"] else
                               f"{self.path}: weights missing: {shown}")
        values = {}
        for group, info in ((stored, wanted), (constants, self.info["constants"])):
            for name, want in info.items():
                t = group[name]
                if not isinstance(t, torch.Tensor):
                    raise PackageError(f"weight {name}: expected a tensor, got {type(t).__name__}")
                if str(t.dtype).removeprefix("torch.") != want["dtype"] or list(t.shape) != want["shape"]:
                    raise PackageError(
                        f"weight {name}: expected {want['dtype']} {tuple(want['shape'])}, got "
                        f"{str(t.dtype).removeprefix('torch.')} {tuple(t.shape)}")
                # stored dense; the kernels may read it in another layout (channels_last)
                values[name] = spec_mod.with_strides(
                    spec_mod.in_layout(t.detach().to(self.device), want, {}), want.get("strides"))
        return values

    def _runner(self, members, options):
        from .. import config as config_mod
        from ..runtime import graph_cache
        name = self.info["graph"]
        files = {k.removeprefix("graph/"): v for k, v in members.items() if k.startswith("graph/")}
        user_index = json.loads(members.get("binaries/user_kernels.json", b"[]").decode())
        objects = self._user_kernels(user_index, members)
        try:
            entry = graph_cache.decode(files, name, objects)
        except (KeyError, ValueError, AttributeError, TypeError) as e:
            raise PackageError(f"{self.path}: the stored graph does not rebuild "
                               f"({type(e).__name__}: {e})") from e
        cfg = config_mod.resolve(options)
        if self.device.type == "cpu":
            from ..runtime.compiled import CompiledGraph
            # Triton's interpreter runs the stored source; nothing is compiled
            compiled = CompiledGraph(name, entry.wrapper, entry.module_src, entry.kernels, cfg, None)
            self.kernel_runners = compiled.runners
            return compiled._call
        from .binaries import PackagedKernelRunner, binary_tmpdir
        index = json.loads(members["binaries/index.json"].decode())
        runners = {}
        with torch.cuda.device(self.device), binary_tmpdir() as tmp:
            for item in index:
                first = item["kernels"][0]
                runner = PackagedKernelRunner(entry.kernels[first], name, item, members, tmp)
                for i, k in enumerate(item["kernels"]):
                    runners[k] = runner if i == 0 else runner.for_call_site()
        absent = sorted(set(entry.kernels) - set(runners))
        if absent:
            raise PackageError(f"{self.path}: no binaries for kernels {absent}")
        self.kernel_runners = runners
        return exec_wrapper(entry.wrapper, runners, name)

    def _user_kernels(self, index: list, members: dict) -> list:
        """The wrapper's constants that stand for user kernels, by their place among them."""
        if not index:
            return []
        if self.device.type != "cuda":
            raise PackageError(f"{self.path}: user Triton kernels in a CPU package")
        from ..runtime.graph_cache import _dec
        from .binaries import binary_tmpdir
        from .user_kernels import PackagedUserKernel
        objects: list = [None] * (max(int(e["const"]) for e in index) + 1)
        try:
            with torch.cuda.device(self.device), binary_tmpdir() as tmp:
                for e in index:
                    objects[int(e["const"])] = PackagedUserKernel(e, members, tmp, _dec)
        except (KeyError, ValueError, TypeError) as e:
            raise PackageError(f"{self.path}: a user kernel entry does not rebuild "
                               f"({type(e).__name__}: {e})") from e
        return objects

    # -- calling --------------------------------------------------------------------------
    def __call__(self, *args, **kwargs):
        leaves = spec_mod.flatten_call(self.spec, args, kwargs)
        inputs, _ = spec_mod.check_inputs(self.spec, leaves, self.device)
        graph_args = [inputs[p["index"]] if p["kind"] == "user" else self._values[p["name"]]
                      for p in self.info["inputs"]]
        with torch.no_grad():
            outs = list(self._call(graph_args))
        results = []
        user_names = [e["name"] for e in self.spec["inputs"]]
        for o, value in zip(self.info["outputs"], outs):
            if o["kind"] == "user":
                results.append(value)
            elif o["kind"] == "buffer_mutation":
                self._values[o["name"]].copy_(value)
            else:  # the program wrote into one of its inputs
                leaves[user_names.index(o["name"])].copy_(value)
        return spec_mod.unflatten_results(self.spec, results)

    # -- what is inside -------------------------------------------------------------------
    @property
    def built(self) -> dict:
        return self.info["built"]

    def __repr__(self):
        b = self.built
        where = b["device"] + (f" {b['gpu_arch']}" if b["device"] == "cuda" else " (interpreter)")
        return (f"<solder package {Path(self.path).name}: {len(self.info['kernels'])} kernels, "
                f"{where}>")


def load(path, state_dict: Optional[dict] = None, options: Optional[dict] = None) -> LoadedPackage:
    """Load a package written by ``solder.aot.compile``; see ``LoadedPackage``."""
    return LoadedPackage(path, state_dict, options)
