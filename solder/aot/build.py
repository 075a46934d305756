"""``solder.aot.compile``: export a program, compile it with Solder's pipeline, write a package.

The program goes through ``torch.export`` (with ``dynamic_shapes``), Solder's decomposition
table (``ExportedProgram.run_decompositions``), Solder's FX passes and ``compile_graph`` — the
same lowering, scheduling and codegen as ``torch.compile(backend="solder")``. What comes out is
stored as the whole-graph cache stores it (``runtime/graph_cache``: wrapper and kernel sources,
kernel fields, the wrapper's ATen ops by name and constants as tagged JSON), plus the spec, the
weights and, on a GPU, the kernel binaries of one run on the example inputs.
"""
from __future__ import annotations

import json
import logging
import time
from types import SimpleNamespace
from typing import Any, Optional

import torch

from .. import config as config_mod
from ..capture import attention_backends
from ..capture.attention_masks import simplify_attention_masks
from . import container, run_time_layouts, spec as spec_mod, tensors, versions
from .loaded import exec_wrapper

log = logging.getLogger("solder.aot")


class AotError(RuntimeError):
    """A program that cannot be packaged; the message says what and why."""


class _Fn(torch.nn.Module):
    """torch.export takes modules: a plain function becomes one with no weights."""

    def __init__(self, fn):
        super().__init__()
        self.fn = fn

    def forward(self, *args, **kwargs):
        return self.fn(*args, **kwargs)


def compile(model_or_fn, example_args, path, dynamic_shapes=None, weights: bool = True, *,
            example_kwargs: Optional[dict] = None, options: Optional[dict] = None,
            strict: bool = False) -> str:
    """Export ``model_or_fn`` on ``example_args``, compile it with Solder and write one package
    file at ``path``. ``weights=False`` leaves parameters and persistent buffers out (supply a
    state dict to ``load``). ``strict`` is torch.export's (True: capture through Dynamo).
    Returns ``str(path)``."""
    t0 = time.perf_counter()
    cfg = config_mod.resolve(options)
    module = model_or_fn if isinstance(model_or_fn, torch.nn.Module) else _Fn(model_or_fn)
    args = tuple(example_args) if isinstance(example_args, (tuple, list)) else (example_args,)
    if isinstance(module, _Fn) and dynamic_shapes is not None:
        dynamic_shapes = _fn_dynamic_shapes(model_or_fn, args, dynamic_shapes)
    with torch.no_grad():
        try:
            ep = torch.export.export(module, args, kwargs=example_kwargs or {},
                                     dynamic_shapes=dynamic_shapes, strict=strict)
        except Exception as e:  # noqa: BLE001 - export's errors are many; say where it failed
            raise AotError(f"torch.export could not capture the program: {type(e).__name__}: "
                           f"{e}") from e
        if cfg.simplify_attention_masks:   # before the decompositions take SDPA apart
            kept: list = []
            for line in simplify_attention_masks(ep.graph_module, kept) + kept:
                log.info("solder.aot: %s", line)
        with attention_backends.restricted(cfg.attention_backends):   # SDPA picks its kernel here
            ep = ep.run_decompositions(_decompositions(cfg))
        run_time_layouts.refresh(ep.graph_module)
    t_export = time.perf_counter()
    plan, stored_weights, constants = _graph_inputs(ep)
    outputs = _graph_outputs(ep)
    gm = ep.graph_module
    placeholders = [n for n in gm.graph.nodes if n.op == "placeholder"]
    user_in = [n.meta.get("val") for n, p in zip(placeholders, plan) if p["kind"] == "user"]
    # the layout the kernels read each weight in (channels_last convolution weights, say)
    metas = {p["name"]: n.meta.get("val") for n, p in zip(placeholders, plan) if p["kind"] != "user"}
    out_node = next(n for n in gm.graph.nodes if n.op == "output")
    out_vals = [a.meta.get("val") if isinstance(a, torch.fx.Node) else a
                for a in out_node.args[0]]
    user_out = [v for v, o in zip(out_vals, outputs) if o["kind"] == "user"]
    device = _device(user_in, stored_weights, constants)
    spec = spec_mod.from_exported(ep, user_in, user_out)

    compiled, report = _compile_graph(gm, placeholders, cfg, bool(spec["symbols"]))
    t_compile = time.perf_counter()
    files = _encode(compiled, report)
    members = {f"graph/{k}": v for k, v in files.items()}
    kernel_index, user_index = [], []
    if device.type == "cuda":
        values = {**stored_weights, **constants}
        leaves = _leaves(args, example_kwargs, len(user_in))
        graph_args = [leaves[p["index"]] if p["kind"] == "user" else values[p["name"]]
                      for p in plan]
        kernel_index, user_index = _record_binaries(compiled, cfg, graph_args, members)
    t_binaries = time.perf_counter()
    members["weights.safetensors"] = tensors.dumps(stored_weights) if weights else b""
    members["constants.safetensors"] = tensors.dumps(constants)
    members["binaries/index.json"] = json.dumps(kernel_index, sort_keys=True).encode()
    members["binaries/user_kernels.json"] = json.dumps(user_index, sort_keys=True).encode()
    info = {
        "built": versions.current(device, _interpreting()),
        "graph": compiled.name,
        "inputs": plan,
        "outputs": outputs,
        "spec": spec,
        "weights": {"stored": bool(weights),
                    "tensors": {k: _tensor_info(v, metas[k]) for k, v in stored_weights.items()}},
        "constants": {k: _tensor_info(v, metas[k]) for k, v in constants.items()},
        "kernels": [{"name": k.name, "ops": list(k.ops)} for k in report.kernels],
        "user_kernels": [str(u) for u in report.user_kernels],
        "externs": [c.op for c in report.externs],
        "fallbacks": [[c.op, c.reason] for c in report.fallbacks],
        "timings": {"export": t_export - t0, "compile": t_compile - t_export,
                    "binaries": t_binaries - t_compile},
    }
    members["package.json"] = json.dumps(info, indent=1, sort_keys=True).encode()
    container.write(path, members)
    return str(path)


def _fn_dynamic_shapes(fn, args, shapes):
    """A function's dynamic_shapes (per argument, by position or by name) as ``_Fn.forward``'s
    (one entry for its ``*args``)."""
    if isinstance(shapes, dict):
        import inspect
        names = list(inspect.signature(fn).parameters)[:len(args)]
        unknown = set(shapes) - set(names)
        if unknown:
            raise AotError(f"dynamic_shapes names {sorted(unknown)}, which are not among the "
                           f"function's positional parameters {names}")
        shapes = [shapes.get(n) for n in names]
    return {"args": tuple(shapes)}


def _interpreting() -> bool:
    from ..codegen.scalar_ops import interpreting
    return interpreting()


def _decompositions(cfg):
    from ..capture.decompositions import solder_decompositions
    return solder_decompositions() if cfg.decompose else {}


def _graph_inputs(ep):
    """Per graph input what feeds it, and the tensors the package stores: state-dict entries
    (parameters, persistent buffers) and constants (non-persistent buffers, lifted tensors)."""
    plan, stored, constants = [], {}, {}
    user = 0
    for s in ep.graph_signature.input_specs:
        kind = s.kind.name
        if kind == "USER_INPUT":
            plan.append({"kind": "user", "index": user, "name": s.arg.name})
            user += 1
        elif kind == "PARAMETER" or (kind == "BUFFER" and s.persistent):
            stored[s.target] = ep.state_dict[s.target]
            plan.append({"kind": "weight", "name": s.target})
        elif kind in ("BUFFER", "CONSTANT_TENSOR"):
            value = ep.constants[s.target]
            if not isinstance(value, torch.Tensor):
                raise AotError(f"constant input {s.target} is a {type(value).__name__}, not a "
                               "tensor: packages hold tensors only")
            constants[s.target] = value
            plan.append({"kind": "constant", "name": s.target})
        else:
            raise AotError(f"graph input {s.arg.name} is a {kind} input: packages take "
                           "parameters, buffers, tensor constants and user inputs only")
    return plan, stored, constants


def _graph_outputs(ep) -> list[dict]:
    outputs = []
    for s in ep.graph_signature.output_specs:
        kind = s.kind.name
        if kind == "USER_OUTPUT":
            outputs.append({"kind": "user"})
        elif kind == "BUFFER_MUTATION":
            outputs.append({"kind": "buffer_mutation", "name": s.target})
        elif kind == "USER_INPUT_MUTATION":
            outputs.append({"kind": "input_mutation", "name": s.target})
        else:
            raise AotError(f"graph output {s.arg} is a {kind} output: packages are for "
                           "inference (no gradients, losses or effect tokens)")
    return outputs


def _device(user_in, stored, constants) -> torch.device:
    devices = {v.device for v in list(user_in) + list(stored.values()) + list(constants.values())
               if isinstance(v, torch.Tensor)}
    devices = {torch.device("cuda", torch.cuda.current_device()) if d.type == "cuda" and
               d.index is None else d for d in devices}
    if len(devices) != 1:
        raise AotError(f"the program's tensors are on {sorted(map(str, devices)) or 'no device'}: "
                       "a package runs on one device")
    (device,) = devices
    if device.type not in ("cuda", "cpu"):
        raise AotError(f"tensors on {device}: packages run on CUDA GPUs (or the CPU interpreter)")
    return device


def _compile_graph(gm, placeholders, cfg, dynamic: bool):
    from ..capture.passes import prepare_graph
    from ..pipeline import CompileContext, compile_graph
    from ..runtime.compiled import CompiledGraph
    prepare_graph(gm)
    ctx = CompileContext(cfg)
    ctx.started = time.perf_counter()
    compiled = compile_graph(gm, [n.meta.get("val") for n in placeholders], "inference", ctx)
    report = ctx.graphs[-1]
    if not isinstance(compiled, CompiledGraph):
        why = "; ".join(f"{c.op}: {c.reason}" for c in report.fallbacks) or "it ran eagerly"
        raise AotError(f"Solder did not compile the exported graph ({why})")
    from ..runtime.user_kernel import UserKernelLauncher
    from .user_kernels import NotPackable, check_packable
    for c in compiled.wrapper.consts:
        if isinstance(c, UserKernelLauncher):
            try:
                check_packable(c, dynamic)
            except NotPackable as e:
                raise AotError(f"cannot package {e}") from None
    return compiled, report


def _encode(compiled, report) -> dict:
    from ..runtime import graph_cache
    from ..runtime.user_kernel import UserKernelLauncher
    # user kernel launchers are stored by their place among the wrapper's constants
    # (binaries/user_kernels.json says what each one launches)
    places = {id(c): i for i, c in enumerate(compiled.wrapper.consts)
              if isinstance(c, UserKernelLauncher)}
    stand_in = SimpleNamespace(user_kernel_reports=[], buffers=[])
    try:
        return graph_cache.encode(compiled.name, compiled.wrapper, compiled.kernel_source,
                                  compiled.kernels, report, stand_in,
                                  objects=lambda v: places.get(id(v)))
    except graph_cache.Uncacheable as e:
        raise AotError(f"the compiled graph cannot be stored as plain data: {e}") from e


def _leaves(args, kwargs, count: int) -> list:
    import torch.utils._pytree as pytree
    leaves = pytree.tree_leaves((args, kwargs or {}))
    if len(leaves) != count:
        raise AotError(f"the example call has {len(leaves)} leaves but the exported graph takes "
                       f"{count} user inputs: packages take tensor arguments only")
    return leaves


def _record_binaries(compiled, cfg, graph_args: list, members: dict) -> tuple[list, list]:
    """Run the graph once through recording runners (Solder's kernels) and recording launchers
    (user kernels); the binaries they keep go into the package. Returns both indexes."""
    from ..codegen.generated import WrapperModule
    from ..runtime import graph_cache
    from ..runtime.launch import load_module
    from ..runtime.user_kernel import UserKernelLauncher
    from .binaries import RecordingRunner, export_binaries
    from .user_kernels import NotPackable, RecordingUserLauncher, export_user_kernel
    compiled.ready()   # the kernels compiling in the background: the recording runs reuse them
    by_fn: dict[int, Any] = {}
    names: dict[int, list] = {}
    runners = {}
    if compiled.kernels:
        mod = load_module(compiled.kernel_source, cfg.cache_dir, stem=compiled.name)
        for kname, src in compiled.kernels.items():
            fn = getattr(mod, kname)
            if id(fn) not in by_fn:
                by_fn[id(fn)] = RecordingRunner(fn, src, compiled.name, cfg.autotune, {})
                names[id(fn)] = []
                runners[kname] = by_fn[id(fn)]
            else:
                runners[kname] = by_fn[id(fn)].for_call_site()
            names[id(fn)].append(kname)
    consts = list(compiled.wrapper.consts)
    recorders = {i: RecordingUserLauncher(c) for i, c in enumerate(consts)
                 if isinstance(c, UserKernelLauncher)}
    consts = [recorders.get(i, c) for i, c in enumerate(consts)]
    wrapper = WrapperModule(compiled.wrapper.source, compiled.wrapper.ops, consts)
    call = exec_wrapper(wrapper, runners, compiled.name)
    try:
        with torch.no_grad():
            call(list(graph_args))
        torch.cuda.synchronize()
        user_index = [export_user_kernel(i, rec, members, _plain(graph_cache._enc))
                      for i, rec in recorders.items()]
    except NotPackable as e:
        raise AotError(f"cannot package {e}") from None
    kernel_index = [export_binaries(names[key], runner, members) for key, runner in by_fn.items()]
    return kernel_index, user_index


def _plain(enc):
    """``enc`` with its refusal as NotPackable (a frozen user-kernel value must be plain data)."""
    from ..runtime.graph_cache import Uncacheable
    from .user_kernels import NotPackable

    def plain(v):
        try:
            return enc(v)
        except Uncacheable as e:
            raise NotPackable(f"a user kernel's constant argument: {e}") from None
    return plain


def _tensor_info(t: torch.Tensor, meta) -> dict:
    info = {"dtype": str(t.dtype).removeprefix("torch."), "shape": list(t.shape)}
    if isinstance(meta, torch.Tensor):
        info.update(spec_mod.layout_of(meta))
        if all(isinstance(x, int) for x in meta.stride()):
            # exact, size-1 dims included: a 1x1 convolution weight is both contiguous and
            # channels_last by its sizes, and the library picks its algorithm (and the layout
            # of its result) by these strides
            info["strides"] = list(meta.stride())
    return info
