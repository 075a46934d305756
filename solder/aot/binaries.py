"""GPU kernel binaries in a package: recorded when the package is built, launched when it is loaded.

At build time the graph runs once on the example inputs through ``RecordingRunner``s: each
launch compiles as usual (Triton JIT, Solder's launch configs), and for every (config,
specialization) seen the runner keeps Triton's compiled kernel and also compiles a *generic*
variant of it (no specialization of integers or pointer alignment), which runs correctly for any
sizes and any alignment. Both go into the package as Triton's own cubin + metadata JSON, with the
argument signature the launcher needs.

At load time ``PackagedKernelRunner`` rebuilds Triton's ``CompiledKernel`` objects from those
bytes (no Triton compiler: only the driver loads the cubin) and launches them exactly as Solder's
JIT runner does after its first launch. A call whose specialization was not seen at build time
(another size class, an unaligned view) runs the generic binary of the same config; a size bucket
never seen takes the config of the nearest one seen (every config is correct for every size the
kernel's masks allow). Triton's host-side launcher stub (C, one per argument signature) is still
built by Triton on first use on a machine whose Triton cache lacks it: that needs a C compiler,
not the Triton compiler.
"""
from __future__ import annotations

import hashlib
import json
import os
import tempfile
from types import SimpleNamespace
from typing import Any

import torch

from ..codegen.launch_configs import COMPILE_OPTIONS
from ..runtime.launch import KernelRunner, _next_pow2, _specialization, _stream


class BinaryMissing(RuntimeError):
    """A packaged kernel has no binary for this launch (should not happen: generic variants
    cover every specialization)."""


_TYPES = {"float": float, "int": int, "bool": bool, "NoneType": type(None), "str": str}


def spec_to_json(spec: tuple) -> list:
    return [list(s) if isinstance(s, tuple) else (s.__name__ if isinstance(s, type) else s)
            for s in spec]


def spec_from_json(data: list) -> tuple:
    out = []
    for s in data:
        if isinstance(s, list):
            out.append(tuple(s))
        elif isinstance(s, str):
            if s not in _TYPES:
                raise ValueError(f"unknown argument type {s!r} in a kernel specialization")
            out.append(_TYPES[s])
        else:
            out.append(s)
    return tuple(out)


def generic_of(spec: tuple) -> tuple:
    """What a generic binary still depends on: each integer's width (i32 or i64) and each
    pointer's dtype (a tensor's entry is (dtype, aligned), an integer's (is 1, multiple of
    16, fits 32 bits))."""
    return tuple((s[2] if len(s) == 3 else s[0]) if isinstance(s, tuple) else None
                 for s in spec)


def config_key(cfg: dict) -> tuple:
    return tuple(sorted(cfg.items()))


# ---------------------------------------------------------------------------------------------
# Build time


class RecordingRunner(KernelRunner):
    """Solder's JIT runner, keeping every compiled kernel it launches plus a generic variant."""

    def __init__(self, fn, src, graph_name: str, autotune: bool, stats: dict):
        super().__init__(fn, src, graph_name, None, autotune, stats)
        self.recorded: dict[tuple, Any] = {}   # (config key, spec) -> CompiledKernel
        self.generic: dict[tuple, Any] = {}    # (config key, int widths) -> CompiledKernel
        self.generic_failed: dict[tuple, str] = {}
        self._generic_fns: dict = {}  # shared with the runners of the other call sites

    def _launch(self, cfg, args, xnumel, key=None):
        super()._launch(cfg, args, xnumel, key)
        if key is None:  # a tuning candidate, not the chosen config
            return
        spec = _specialization(args)
        ck = config_key(cfg)
        grid = ((xnumel + cfg["XBLOCK"] - 1) // cfg["XBLOCK"],)
        if (ck, spec) not in self.recorded:
            # the JIT's in-memory cache hands back what the launch just compiled
            self.recorded[(ck, spec)] = _done(self.fn.warmup(*args, grid=grid, **cfg, **COMPILE_OPTIONS))
        widths = generic_of(spec)
        if (ck, widths) not in self.generic and (ck, widths) not in self.generic_failed:
            try:
                kernel = _done(self._generic(cfg).warmup(*args, grid=grid, **cfg, **COMPILE_OPTIONS))
            except Exception as e:  # noqa: BLE001 - the exact binaries still run; say why
                self.generic_failed[(ck, widths)] = f"{type(e).__name__}: {str(e)[-300:]}"
            else:
                self.generic[(ck, widths)] = kernel

    def _generic(self, cfg):
        if "fn" not in self._generic_fns:
            import triton
            # every runtime argument; constexprs (the block sizes in cfg) stay constants
            names = [p.name for p in self.fn.params
                     if not p.is_constexpr and p.name not in cfg]
            self._generic_fns["fn"] = triton.jit(self.fn.fn, do_not_specialize=names,
                                                 do_not_specialize_on_alignment=names)
        return self._generic_fns["fn"]


def _done(kernel):
    # Triton may hand back a future when it compiles asynchronously
    return kernel.result() if hasattr(kernel, "result") else kernel


def export_binaries(kernel_names: list[str], runner: RecordingRunner, members: dict) -> dict:
    """The package entry of one kernel function (shared by ``kernel_names``); binaries go into
    ``members`` under names made from their content hash."""
    binaries = []
    for (ck, spec), kernel in runner.recorded.items():
        binaries.append(_binary(kernel, dict(ck), {"spec": spec_to_json(spec)}, members))
    for (ck, widths), kernel in runner.generic.items():
        binaries.append(_binary(kernel, dict(ck), {"generic": list(widths)}, members))
    return {"kernels": kernel_names, "is_reduction": runner.src.is_reduction,
            "configs": [[list(k), cfg] for k, cfg in runner.configs.items()],
            "binaries": binaries,
            # without a generic binary, only the sizes and alignments seen at build time run
            "generic_failed": [[dict(ck), list(w), why]
                               for (ck, w), why in runner.generic_failed.items()]}


def _binary(kernel, cfg: dict, match: dict, members: dict) -> dict:
    files = {}
    for fname, p in kernel.metadata_group.items():
        ext = fname.rsplit(".", 1)[-1]
        if ext in ("json", "cubin"):
            data = open(p, "rb").read()
            member = f"binaries/{hashlib.sha256(data).hexdigest()[:24]}.{ext}"
            members[member] = data
            files[ext] = member
    if set(files) != {"json", "cubin"}:
        raise RuntimeError(f"Triton kernel {kernel.name}: no cubin/metadata among "
                           f"{sorted(kernel.metadata_group)}")
    src = kernel.src
    return {"config": cfg, **match, "files": files, "name": kernel.name, "hash": kernel.hash,
            "arg_names": list(src.fn.arg_names),
            "signature": [[k, v] for k, v in src.signature.items()],
            "constants": [[list(k), v] for k, v in src.constants.items()]}


# ---------------------------------------------------------------------------------------------
# Load time


def load_binary(entry: dict, members: dict, tmpdir: str):
    """Triton's CompiledKernel for one packaged binary, its module loaded on the current GPU."""
    from triton.compiler.compiler import CompiledKernel
    group = {}
    for ext, member in entry["files"].items():
        p = os.path.join(tmpdir, f"{entry['hash'][:16]}_{entry['name']}.{ext}")
        with open(p, "wb") as f:
            f.write(members[member])
        group[os.path.basename(p)] = p
    src = SimpleNamespace(
        signature={k: v for k, v in entry["signature"]},
        constants={tuple(k): v for k, v in entry["constants"]},
        fn=SimpleNamespace(arg_names=list(entry["arg_names"])))
    kernel = CompiledKernel(src, group, entry["hash"])
    kernel.run  # noqa: B018 - loads the cubin and the launcher now, not on the first call
    return kernel


class PackagedKernelRunner(KernelRunner):
    """Launches a packaged kernel's binaries; never calls Triton's JIT."""

    def __init__(self, src, graph_name: str, entry: dict, members: dict, tmpdir: str):
        super().__init__(None, src, graph_name, None, autotune=False)
        self.configs = {tuple(k): cfg for k, cfg in entry["configs"]}
        self.exact: dict[tuple, Any] = {}
        self.generic: dict[tuple, Any] = {}
        for b in entry["binaries"]:
            kernel = load_binary(b, members, tmpdir)
            ck = config_key(b["config"])
            if "generic" in b:
                self.generic[(ck, tuple(b["generic"]))] = kernel
            else:
                self.exact[(ck, spec_from_json(b["spec"]))] = kernel
        if not self.configs:
            raise BinaryMissing(f"kernel {src.name}: the package holds no launch config")

    def _choose(self, args, xnumel, rnumel):
        # a size bucket never seen at build time: the config of the nearest one seen
        want = (_next_pow2(xnumel), _next_pow2(rnumel))

        def distance(k):
            return abs(k[0].bit_length() - want[0].bit_length()) + \
                abs(k[1].bit_length() - want[1].bit_length())
        return self.configs[min(self.configs, key=distance)]

    def _launch(self, cfg, args, xnumel, key=None):
        spec = _specialization(args)
        kernel = self.fast.get((key, spec))
        if kernel is None:
            ck = config_key(cfg)
            kernel = self.exact.get((ck, spec)) or self.generic.get((ck, generic_of(spec)))
            if kernel is None:
                raise BinaryMissing(
                    f"kernel {self.src.name} of {self.graph_name}: no packaged binary for config "
                    f"{cfg} and argument specialization {spec} (the package has binaries for "
                    f"{sorted(map(str, self.exact))} and generic ones for "
                    f"{sorted(map(str, self.generic))}); rebuild it with an example of these sizes")
            self.fast[(key, spec)] = kernel
        grid0 = (xnumel + cfg["XBLOCK"] - 1) // cfg["XBLOCK"]
        kernel.run(grid0, 1, 1, _stream(), kernel.function, kernel.packed_metadata, None,
                   None, None, *args, *self._constexprs(cfg))


def binary_tmpdir() -> tempfile.TemporaryDirectory:
    return tempfile.TemporaryDirectory(prefix="solder-aot-")


def dumps(index: list) -> bytes:
    return json.dumps(index, indent=1, sort_keys=True).encode()

