"""Whole-graph cache: a second compile of the same graph (same inputs, versions and settings),
in this process or another, skips lowering, scheduling and codegen and rebuilds the
``CompiledGraph`` from what the first one stored in the ``DiskCache``.

An entry holds three files: ``wrapper.py`` (the wrapper source), ``kernels.py`` (the kernel
module source) and ``meta.json`` (each kernel's runtime fields, the wrapper's ATen ops by
qualified name, its constants in a small tagged encoding, and the ``GraphReport`` content). Nothing
read back is unpickled or evaluated except the two sources, which run exactly as freshly generated
ones do; ``DiskCache`` hands them back only after checking every checksum against the key.

A graph is not cached when it cannot be rebuilt from plain data: user Triton kernels (the
launch refers to a kernel object and a side-table index, not to code), higher-order ops,
``get_attr`` nodes (the attribute's value is not in the graph's code), tensors or other objects
among the wrapper's constants, and wrapper calls to anything but an ``OpOverload``.

Triton's own binary cache is left where Triton puts it (``TRITON_CACHE_DIR`` or ~/.triton):
pointing it elsewhere means setting a process-wide environment variable or knob, which would move
the cache of every other Triton user in the process too.
"""
from __future__ import annotations

import dataclasses
import hashlib
import json
import logging
import re
from typing import Any

import torch

from ..codegen.launch_configs import is_launch_config
from ..codegen.generated import KernelSource
from .precompile import decode_jobs, encode_jobs

log = logging.getLogger("solder")

# Bump when the files of an entry change meaning; it is part of every key.
FORMAT = 1
# Settings that do not change generated code. Every other field is keyed, so a new setting is
# keyed until someone says otherwise (a needless miss rather than a wrong hit).
_NOT_CODE = frozenset({"debug_dir", "cache", "cache_dir", "autotune", "log_compile",
                       "debug_eager", "compile_threads", "overlap_compile", "pause_gc",
                       "compile_processes", "compile_backward_early",
                       "compile_backward_in_child"})


class Uncacheable(Exception):
    """This graph is compiled normally and not stored; the message says why."""


# ---------------------------------------------------------------------------------------------
# The key


def graph_key(gm, kind: str, config, interpreting: bool) -> str:
    """The cache key of compiling ``gm``; raises Uncacheable."""
    from .cache import make_key
    cuda = None
    for node in gm.graph.nodes:
        if node.op == "get_attr":
            raise Uncacheable("the graph holds attributes (constants)")
        if isinstance(node.target, torch._ops.HigherOrderOperator):
            raise Uncacheable(f"higher-order op {node.target.name()}")
        cuda = cuda or _cuda_device(node.meta.get("val"))
    settings = tuple(sorted((f.name, getattr(config, f.name))
                            for f in dataclasses.fields(config) if f.name not in _NOT_CODE))
    capability = tuple(torch.cuda.get_device_capability(cuda)) if cuda is not None else None
    return make_key("solder-graph", FORMAT, kind, repr(_description(gm)), config.codegen_key(),
                    settings, bool(interpreting), capability)


def fingerprint(gm) -> str:
    """A hash of everything lowering reads from ``gm`` (``_description``). A forked child's
    code is used only for a graph with its fingerprint. The donated inputs are left out: the
    child lowers the backward before AOTAutograd names them, and code that writes over none
    of them is right for a graph that allows it (it only holds more memory)."""
    return hashlib.sha256(repr(_description(gm, donated=False)).encode()).hexdigest()


def _description(gm, donated: bool = True) -> tuple:
    """What lowering reads from ``gm``, as plain data whose ``repr`` is the same in every
    process: each node's name, kind, target and arguments (other nodes by name), its example
    value and its source lines (which kernel comments quote), and the graph's own metadata.
    Read off the nodes rather than printed as the graph's code: an 8-layer LLaMA step's two
    graphs took 33 ms to print on the CPU, 5 ms to describe this way."""
    from ..ir.nodes import DONATED_INPUTS, PLAIN_OUTPUTS
    from ..provenance import source_of
    nodes = tuple((node.name, node.op, _target(node.target), _arg(node.args), _arg(node.kwargs),
                   _meta(node.meta.get("val")), tuple(source_of(node)))
                  for node in gm.graph.nodes)
    # and what the graph module carries beside its nodes: which outputs the caller gets as
    # they are (a view among them is returned as a real view: the same nodes make another
    # wrapper when an input's requires_grad differs)
    plain = gm.meta.get(PLAIN_OUTPUTS)
    # and which inputs a backward may write over (AOTAutograd's donated saved tensors)
    out = nodes + ((PLAIN_OUTPUTS, None if plain is None else tuple(sorted(plain))),)
    if donated:
        out += ((DONATED_INPUTS, tuple(sorted(gm.meta.get(DONATED_INPUTS, ())))),)
    return out


def _target(t) -> str:
    if isinstance(t, str):   # a placeholder's or output's name, a method, an attribute path
        return t
    if isinstance(t, (torch._ops.OpOverload, torch._ops.OpOverloadPacket)):
        return str(t)        # "aten.mm.default"
    module, name = getattr(t, "__module__", None), getattr(t, "__qualname__", None)
    if isinstance(module, str) and isinstance(name, str) and "<" not in name:
        return f"{module}.{name}"   # operator.getitem, a function of a module
    raise Uncacheable(f"a node calls {t!r}, which has no name that is the same in every process")


_PLAIN = (bool, int, float, complex, str, type(None))
_NAMED = (torch.dtype, torch.device, torch.layout, torch.memory_format)


def _arg(a) -> Any:
    """A node's argument as plain data: other nodes by name, torch's enums by their names."""
    if isinstance(a, _PLAIN):
        return a
    if isinstance(a, torch.fx.Node):
        return ("node", a.name)
    if isinstance(a, tuple):
        return tuple(map(_arg, a))
    if isinstance(a, list):   # told apart from a tuple, as the printed code would
        return ("list", tuple(map(_arg, a)))
    if isinstance(a, dict):
        return tuple((k, _arg(v)) for k, v in a.items())
    if isinstance(a, _NAMED):
        return (type(a).__name__, str(a))
    if isinstance(a, slice):
        return ("slice", _arg(a.start), _arg(a.stop), _arg(a.step))
    if isinstance(a, (torch.SymInt, torch.SymFloat, torch.SymBool)):
        return (type(a).__name__, str(a.node.expr))
    raise Uncacheable(f"a node's argument is a {type(a).__name__}")


def _meta(v) -> Any:
    """What lowering reads from a node's example value, as plain keyable data."""
    if isinstance(v, torch.Tensor):
        try:
            return ("T", str(v.dtype), str(v.device), str(v.layout), tuple(map(str, v.shape)),
                    tuple(map(str, v.stride())), str(v.storage_offset()))
        except (RuntimeError, NotImplementedError) as e:  # sparse, nested: no strides
            raise Uncacheable(f"a {v.layout} tensor") from e
    if isinstance(v, (torch.SymInt, torch.SymFloat, torch.SymBool)):
        return ("S", type(v).__name__, str(v.node.expr))
    if v is None or isinstance(v, (bool, int, float, str)):
        return ("P", v)
    if isinstance(v, (list, tuple)):
        return ("L", tuple(_meta(x) for x in v))
    raise Uncacheable(f"a node's example value is a {type(v).__name__}")


def _cuda_device(v):
    if isinstance(v, torch.Tensor) and v.device.type == "cuda":
        return v.device
    if isinstance(v, (list, tuple)):
        return next((d for d in map(_cuda_device, v) if d is not None), None)
    return None


# ---------------------------------------------------------------------------------------------
# Storing


def encode(name: str, wrapper, module_src: str, kernels: dict, report, graph,
           objects=None) -> dict:
    """The entry's files; raises Uncacheable. ``objects`` (packages only) gives constants that
    are not plain data an index of the caller's: ``objects(value)`` -> int or None."""
    from ..ir.nodes import UserKernelCall
    if getattr(graph, "user_kernel_reports", None) or any(
            isinstance(b, UserKernelCall) for b in graph.buffers):
        raise Uncacheable("user Triton kernel")
    meta = {
        "name": name,
        "kernels": [_kernel_fields(k) for k in kernels.values()],
        "ops": [_op_name(op) for op in wrapper.ops],
        "consts": [_enc(c, objects) for c in wrapper.consts],
        "report": {
            "kernels": [[k.name, k.source, list(k.ops), list(k.source_lines)]
                        for k in report.kernels],
            "externs": [[c.op, c.reason] for c in report.externs],
            "fallbacks": [[c.op, c.reason] for c in report.fallbacks],
            "user_kernels": [str(u) for u in report.user_kernels],
        },
    }
    return {"wrapper.py": wrapper.source.encode(), "kernels.py": module_src.encode(),
            "meta.json": json.dumps(meta, sort_keys=True).encode()}


def _kernel_fields(k: KernelSource) -> dict:
    return {"name": k.name, "source": k.source, "args": [list(a) for a in k.args],
            "is_reduction": k.is_reduction, "persistent": k.persistent, "int64": k.int64,
            "xnumel": str(k.xnumel), "rnumel": str(k.rnumel), "origins": list(k.origins),
            "reduction_hint": k.reduction_hint, "even": k.even, "reload": k.reload}


def _op_name(op) -> str:
    if not isinstance(op, torch._ops.OpOverload):
        raise Uncacheable(f"wrapper calls {op!r}, not an ATen operator overload")
    qual = f"{op._schema.name}.{op._schema.overload_name or 'default'}"
    if _resolve_op(qual) is not op:
        raise Uncacheable(f"operator {qual} does not resolve by name")
    return qual


def _resolve_op(qual: str):
    namespace, rest = qual.split("::", 1)
    if namespace == "solder":     # Solder's own operators are registered on import
        from . import library_ops  # noqa: F401
    packet, overload = rest.rsplit(".", 1)
    op = getattr(getattr(getattr(torch.ops, namespace), packet), overload)
    if not isinstance(op, torch._ops.OpOverload):
        raise ValueError(f"{qual} is not an operator overload")
    return op


# Constants: tagged JSON lists. Only plain values and torch's enum-like objects, which
# resolve by name to the very same object.
_TORCH_ENUMS = {"dtype": torch.dtype, "device": torch.device,
                "memory_format": torch.memory_format, "layout": torch.layout}


def _enc(v, objects=None) -> list:
    if objects is not None:
        index = objects(v)
        if index is not None:
            return ["object", index]
    if v is None:
        return ["none"]
    if isinstance(v, bool):
        return ["bool", v]
    if isinstance(v, int):
        return ["int", v]
    if isinstance(v, float):
        return ["float", v.hex()]  # exact, and keeps nan/inf/-0.0
    if isinstance(v, str):
        return ["str", v]
    if isinstance(v, (list, tuple)) and type(v) in (list, tuple):
        return [type(v).__name__, [_enc(x, objects) for x in v]]
    if isinstance(v, torch.device):
        return ["device", str(v)]
    for tag, cls in _TORCH_ENUMS.items():
        if tag != "device" and isinstance(v, cls):
            return [tag, str(v).removeprefix("torch.")]
    raise Uncacheable(f"the wrapper holds a {type(v).__name__} constant")


def _dec(x, objects=None):
    tag = x[0]
    if tag == "object":
        if objects is None or not isinstance(x[1], int) or not 0 <= x[1] < len(objects):
            raise ValueError(f"constant refers to object {x[1]!r}, which is not among the "
                             f"{len(objects or [])} given")
        return objects[x[1]]
    if tag == "none":
        return None
    if tag in ("bool", "int", "str"):
        value = x[1]
        if type(value) is not {"bool": bool, "int": int, "str": str}[tag]:
            raise ValueError(f"bad {tag} constant")
        return value
    if tag == "float":
        return float.fromhex(x[1])
    if tag in ("list", "tuple"):
        items = [_dec(i, objects) for i in x[1]]
        return items if tag == "list" else tuple(items)
    if tag == "device":
        return torch.device(x[1])
    if tag in _TORCH_ENUMS:
        value = getattr(torch, x[1])
        if not isinstance(value, _TORCH_ENUMS[tag]):
            raise ValueError(f"torch.{x[1]} is not a {tag}")
        return value
    raise ValueError(f"unknown constant tag {tag!r}")


# ---------------------------------------------------------------------------------------------
# Loading


@dataclasses.dataclass
class Entry:
    wrapper: Any            # WrapperModule
    module_src: str
    kernels: dict           # name -> KernelSource
    report: dict
    launch_configs: dict = dataclasses.field(default_factory=dict)  # name -> [[x, r, cfg]]
    precompile: dict = dataclasses.field(default_factory=dict)      # runtime/precompile.py


def decode(files: dict, name: str, objects: list | None = None) -> Entry:
    """Rebuild what ``CompiledGraph`` needs; raises ValueError (and friends) on a bad entry.
    ``objects`` are what ``encode``'s ``objects`` indexed (packages only)."""
    from ..codegen.generated import WrapperModule
    meta = json.loads(files["meta.json"].decode())
    old = meta["name"]
    # the wrapper names its graph (header, input-check messages): give it this compile's name
    source = re.sub(rf"\b{re.escape(old)}\b", name, files["wrapper.py"].decode())
    kernels = {}
    for f in meta["kernels"]:
        kernels[f["name"]] = KernelSource(
            name=f["name"], source=f["source"], args=[tuple(a) for a in f["args"]],
            is_reduction=bool(f["is_reduction"]), persistent=bool(f["persistent"]),
            xnumel=_size(f["xnumel"]), rnumel=_size(f["rnumel"]), int64=bool(f["int64"]),
            origins=list(f["origins"]), reduction_hint=f["reduction_hint"],
            even=bool(f.get("even", False)), reload=bool(f.get("reload", False)))
    wrapper = WrapperModule(source, [_resolve_op(q) for q in meta["ops"]],
                            [_dec(c, objects) for c in meta["consts"]])
    report = dict(meta["report"])
    report["wrapper"] = source
    return Entry(wrapper, files["kernels.py"].decode(), kernels, report,
                 dict(meta.get("launch_configs", {})), dict(meta.get("precompile", {})))


def _size(text: str):
    # numels are only printed on a hit, never evaluated: integers come back as integers,
    # symbolic ones as their text (no sympy: loading a cached graph or a package needs none)
    return int(text) if re.fullmatch(r"-?\d+", text) else text


def fill_report(report, data: dict) -> None:
    from ..reports import CallReport, KernelReport
    report.kernels = [KernelReport(n, s, list(ops), list(lines))
                      for n, s, ops, lines in data["kernels"]]
    report.externs = [CallReport(op, reason) for op, reason in data["externs"]]
    report.fallbacks = [CallReport(op, reason) for op, reason in data["fallbacks"]]
    report.user_kernels = list(data["user_kernels"])
    report.wrapper = data["wrapper"]


# ---------------------------------------------------------------------------------------------
# What compile_graph calls


def prepare(gm, kind: str, config, interpreting: bool):
    """(cache, key, state) before lowering; cache and key are None when nothing is cached, and
    state is what the report's ``timings["cache"]`` says: "miss", "off" or "skip (why)"."""
    from .cache import cache_from_config
    cache = cache_from_config(config)
    if cache is None or not cache.enabled:
        return None, None, "off"
    try:
        return cache, graph_key(gm, kind, config, interpreting), "miss"
    except Uncacheable as e:
        return None, None, f"skip ({e})"


def load(cache, key: str, name: str, config, report):
    """(the ``CompiledGraph`` stored under ``key``, with ``report`` filled in; its precompile
    jobs and device), or None on a miss.
    An entry that does not rebuild is a miss too: compiling again gives the right graph."""
    from .compiled import CompiledGraph
    files = cache.get(key)
    if files is None:
        return None
    try:
        entry = decode(files, name)
        compiled = CompiledGraph(name, entry.wrapper, entry.module_src, entry.kernels, config,
                                 None, report.timings)
        _restore_launch_configs(compiled, entry.launch_configs)
        precompile = decode_jobs(entry.precompile, compiled) if entry.precompile else ([], None)
    except Exception as e:  # noqa: BLE001 - any failure means: compile it instead
        log.warning("solder: cached graph %s did not load (%s: %s); compiling it again",
                    key[:12], type(e).__name__, e)
        return None
    fill_report(report, entry.report)
    return compiled, precompile


def store_after_first_call(compiled, cache, key: str, files: dict, precompile=None) -> str:
    """Arrange for the entry (``encode``'s files) to be written once the graph has run: a
    kernel that fails to compile or launch is never cached. Returns the report's cache state."""
    compiled.after_first_call.append(lambda: cache.put(
        key, with_launch_configs(files, compiled, precompile)))
    return "miss"


def with_launch_configs(files: dict, compiled, precompile=None) -> dict:
    """The entry with the launch configs its first call chose (tuned ones included), so that a
    later process tunes nothing, and the compile jobs of those configs (``precompile``: the
    graph's jobs and device), so that it loads their binaries in parallel."""
    meta = json.loads(files["meta.json"].decode())
    meta["launch_configs"] = {
        name: [[x, r, cfg] for (x, r), cfg in sorted(runner.configs.items())]
        for name, runner in compiled.runners.items()}
    if precompile is not None and precompile[0]:
        meta["precompile"] = encode_jobs(precompile[0], compiled, precompile[1])
    return {**files, "meta.json": json.dumps(meta, sort_keys=True).encode()}


def _restore_launch_configs(compiled, stored: dict) -> None:
    for name, entries in stored.items():
        runner = compiled.runners.get(name)
        if runner is None:
            raise ValueError(f"launch configs for an unknown kernel {name!r}")
        for x, r, cfg in entries:
            if not (isinstance(x, int) and isinstance(r, int) and is_launch_config(cfg)):
                raise ValueError(f"bad launch config for {name}")
            runner.configs.setdefault((x, r), cfg)
