"""CUDA graphs: a compiled graph (inference, forward, backward) recorded once per input size
and replayed
(``mode="reduce-overhead"``, ``cuda_graphs=True``, ``SOLDER_CUDA_GRAPHS=1``).

A replay issues every kernel, library call and user Triton kernel of the graph in one launch, so
the host's time per call stops bounding it. What a replay must keep from eager's semantics, and
how:

- **Inputs.** Parameters and buffers (AOTAutograd's static inputs) are read and written where
  they are: the graph was recorded on their addresses, which are checked at each call (an
  address that changed records again; one that changes every call declines). Every other input
  is copied into a buffer of the recording before the replay, and copied back after it when
  the graph writes it in place.
- **Outputs.** The memory a replay writes is the recording's, overwritten by the next replay:
  outputs are copied out of it after each replay, one copy per storage, so that outputs which
  alias each other still do (AOTAutograd regenerates views from them). An output on a
  parameter's or buffer's memory is returned as it is; one on an input's copy is rebased onto
  the input itself. A caller that keeps an output across calls never reads overwritten memory.
- **Sizes.** A graph with symbolic sizes records one CUDA graph per distinct set of sizes,
  at most ``cuda_graph_sizes`` of them; beyond that the least recently used is dropped.
- **Training graphs** (unless ``cuda_graph_training`` is off). A forward's values saved for its backward are handed out as new tensors
  on the recording's memory, not copied; before the forward replays, none of the last
  replay's may still be held (a backward not run yet), else the call runs without the graph.
  The backward reads them where the forward left them, or runs without the graph.
- **What declines** (runs as without CUDA graphs, the reason in ``solder.explain``): a graph
  with a CPU tensor, one whose random ops draw their seeds on the host (a replay would repeat
  the numbers), one with an op that synchronizes with the host, one whose recording fails.

All recordings of a device share one memory pool: their working memory is never handed out
(outputs are copies, and a forward's saved values stay allocated to its recording), so graphs
replayed one after another on a stream may reuse it. Replays go on the current stream.
"""
from __future__ import annotations

import collections
import contextlib
from typing import Any, Callable, Optional

import torch
import torch.fx as fx

from .support import reinterpret

aten = torch.ops.aten

# ops that wait for the device to know a size or a value on the host: not capturable
HOST_SYNC_OPS = frozenset({
    aten._local_scalar_dense.default, aten.nonzero.default, aten.masked_select.default,
    aten.unique_dim.default, aten._unique2.default, aten.unique_consecutive.default,
    aten.repeat_interleave.Tensor, aten.bincount.default, aten.histc.default,
    aten._assert_async.msg, aten.equal.default, aten.is_nonzero.default,
})

# re-recordings of one size because a parameter's or buffer's address changed, before the graph
# declines for good (an address that changes every call would record every call)
MAX_RERECORDS = 2


def decline_reason(gm: fx.GraphModule, kind: str, wrapper_source: str) -> Optional[str]:
    """Why this compiled graph cannot be replayed as a CUDA graph, or None."""
    device = None
    for node in gm.graph.nodes:
        val = node.meta.get("val")
        for v in (val if isinstance(val, (list, tuple)) else [val]):
            if isinstance(v, torch.Tensor):
                if v.device.type != "cuda":
                    what = f"input {node.name}" if node.op == "placeholder" else node.name
                    return f"{what} is a {v.device.type.upper()} tensor"
                device = device or v.device
        if node.op == "call_function" and node.target in HOST_SYNC_OPS:
            return f"{node.target} waits for the device on the host"
    if device is None:
        return "no CUDA tensor in the graph"
    if "S.draw_seeds(" in wrapper_source:
        return ("its random ops draw their seeds on the host at each call: a replay would "
                "repeat the same numbers")
    return None


def static_input_indices() -> set:
    """The graph inputs AOTAutograd marks static (parameters and buffers), for the graph being
    compiled now; empty where it cannot tell."""
    try:
        ctx = torch._guards.TracingContext.try_get()
        meta = getattr(ctx, "fw_metadata", None) if ctx is not None else None
        return set(getattr(meta, "static_input_indices", None) or ())
    except Exception:  # noqa: BLE001 - then every input is copied, which is always right
        return set()


def written_inputs(gm: fx.GraphModule) -> set:
    """Positions of the inputs the graph writes in place (a ``copy_`` into an input, or any op
    whose schema writes an argument that is an input)."""
    placeholders = [n for n in gm.graph.nodes if n.op == "placeholder"]
    position = {n: i for i, n in enumerate(placeholders)}
    written = set()
    for node in gm.graph.nodes:
        if node.op != "call_function":
            continue
        schema = getattr(node.target, "_schema", None)
        if schema is not None and schema.is_mutable:
            for arg, value in zip(schema.arguments, node.args):
                if arg.alias_info is not None and arg.alias_info.is_write and value in position:
                    written.add(position[value])
            for name, value in node.kwargs.items():
                arg = next((a for a in schema.arguments if a.name == name), None)
                if arg is not None and arg.alias_info is not None and arg.alias_info.is_write \
                        and value in position:
                    written.add(position[value])
        elif schema is None:   # a higher-order op (a user kernel) may write its tensor inputs
            for value in list(node.args) + list(node.kwargs.values()):
                for v in (value.values() if isinstance(value, dict) else
                          value if isinstance(value, (list, tuple)) else [value]):
                    if v in position:
                        written.add(position[v])
    return written


def size_key(args) -> tuple:
    """What one recording is for: every tensor's sizes and strides, every other argument."""
    return tuple((tuple(a.shape), tuple(a.stride())) if isinstance(a, torch.Tensor) else a
                 for a in args)


class _Recording:
    __slots__ = ("graph", "inputs", "fixed", "outputs", "calls", "rerecords", "read_at",
                 "kept_refs")

    def __init__(self):
        self.graph = None
        self.inputs: list = []          # per position: the tensor the graph reads, or None
        self.fixed: dict = {}           # position -> data_ptr of a parameter or buffer
        self.outputs: list = []
        self.calls = 0                  # calls before the recording (the warm-up)
        self.rerecords = 0
        self.read_at: dict = {}         # position -> data_ptr an in-place input was recorded at
        self.kept_refs: dict = {}       # kept output -> its storage's references after recording


_POOLS: dict = {}   # device -> (the object that keeps the pool alive, the pool's id)
_ABANDONED: list = []   # (graph, pool) of failed captures, alive for the process (see below)
# process-wide counts, for tests and the bench: recordings made, replays run
STATS = {"recordings": 0, "replays": 0, "declines": []}   # declines: the reasons, newest last


def _pool(device: torch.device):
    """The id of the device's pool, alive for the process. A bare ``graph_pool_handle()`` dies
    with the last graph recorded into it: the next capture into it failed an internal assert
    of the caching allocator (``use_count > 0``). A ``MemPool`` holds a reference of its own."""
    if device not in _POOLS:
        with torch.cuda.device(device):
            pool = torch.cuda.MemPool()
        _POOLS[device] = (pool, pool.id)
    return _POOLS[device][1]


class Replayer:
    """Calls a compiled graph through CUDA graphs, one recording per size key (LRU)."""

    def __init__(self, compiled: Callable, name: str, static: set, written: set,
                 max_sizes: int, on_decline: Optional[Callable[[str], None]] = None,
                 kept: set = frozenset(), in_place: set = frozenset()):
        self.compiled = compiled
        self.name = name
        self.static, self.written = set(static), set(written)
        # kept: outputs handed out as the recording's own memory (a forward's values saved for
        # its backward); in_place: inputs read where they were recorded (a backward's saved
        # values, which are such outputs). A call where a kept output of the last replay is
        # still referenced, or an in-place input is elsewhere, runs without the graph.
        self.kept, self.in_place = set(kept), set(in_place)
        self.unreplayed = 0
        self.max_sizes = max(1, int(max_sizes))
        self.recordings: collections.OrderedDict = collections.OrderedDict()
        self.declined: Optional[str] = None
        self.on_decline = on_decline
        self.replays = 0

    # AOTAutograd calls compiled graphs with one list of arguments
    _boxed_call = True

    def __call__(self, *args):
        args = args[0] if len(args) == 1 and isinstance(args[0], list) else list(args)
        if self.declined is not None or not _all_cuda(args):
            return self.compiled(list(args))
        key = size_key(args)
        rec = self.recordings.get(key)
        if rec is None:
            rec = self.recordings[key] = _Recording()
            while len(self.recordings) > self.max_sizes:
                self.recordings.popitem(last=False)
        else:
            self.recordings.move_to_end(key)
        if rec.graph is not None and any(args[i].data_ptr() != p for i, p in rec.fixed.items()):
            rec.rerecords += 1
            rec.graph = None
            if rec.rerecords > MAX_RERECORDS:
                moved = [i for i, p in rec.fixed.items() if args[i].data_ptr() != p]
                self._decline(f"input {moved[0]} (a parameter or buffer) moves to a new address "
                              f"from call to call")
                return self.compiled(list(args))
        if rec.graph is not None and (
                any(args[i].data_ptr() != p for i, p in rec.read_at.items())
                or any(_references(rec.outputs[i]) > n for i, n in rec.kept_refs.items())):
            self.unreplayed += 1    # (two forwards before a backward; a forward not replayed)
            STATS["unreplayed"] = STATS.get("unreplayed", 0) + 1
            return self.compiled(list(args))
        if rec.graph is None:
            if rec.calls == 0:   # the warm-up: kernels compile, launch configs are tuned
                rec.calls += 1
                return self.compiled(list(args))
            try:
                self._record(rec, args)
            except Exception as e:  # noqa: BLE001 - declines, and runs as without graphs
                rec.graph = None
                self._decline(f"recording failed: {type(e).__name__}: {str(e)[:200]}")
                return self.compiled(list(args))
            if self.declined is not None:
                return self.compiled(list(args))
        return self._replay(rec, args)

    def _record(self, rec: _Recording, args: list) -> None:
        device = next(a.device for a in args if isinstance(a, torch.Tensor))
        rec.inputs, rec.fixed, rec.read_at = [], {}, {}
        for i, a in enumerate(args):
            if not isinstance(a, torch.Tensor):
                rec.inputs.append(None)
            elif i in self.static:
                rec.inputs.append(a)
                rec.fixed[i] = a.data_ptr()
            elif i in self.in_place:
                # only its address is kept: a reference would hold the forward's saved value,
                # and that forward would take it as still in use and never replay again
                rec.inputs.append(None)
                rec.read_at[i] = a.data_ptr()
            else:
                buf = torch.empty_strided(a.shape, a.stride(), dtype=a.dtype, device=a.device)
                buf.copy_(a)
                rec.inputs.append(buf)
        graph_args = [b if b is not None else a for a, b in zip(args, rec.inputs)]
        # no kernel of another graph compiles or loads in the background while this one records
        # (a module load on another thread is a CUDA call during the capture), and what other
        # threads do is not this capture's business ("thread_local")
        from .precompile import wait_all
        wait_all()
        torch.cuda.synchronize(device)
        graph = torch.cuda.CUDAGraph()
        pool = _pool(device)
        with _capture_undone_on_failure(device, pool, graph):
            with torch.cuda.graph(graph, pool=pool, capture_error_mode="thread_local"):
                outputs = self.compiled(list(graph_args))
        rec.graph, rec.outputs = graph, list(outputs)
        del outputs
        # the references a kept output's storage has while only the recording holds it; one
        # more at a later call is a caller (autograd's saved values of a forward whose backward
        # has not run) still holding the last replay's value. Outputs on a parameter's or
        # buffer's memory are not the recording's: not counted
        fixed_storages = {args[i].untyped_storage().data_ptr() for i in rec.fixed}
        rec.kept_refs = {i: _references(rec.outputs[i]) for i in self.kept
                         if i < len(rec.outputs) and isinstance(rec.outputs[i], torch.Tensor)
                         and rec.outputs[i].untyped_storage().data_ptr() not in fixed_storages}
        STATS["recordings"] += 1

    def _replay(self, rec: _Recording, args: list) -> list:
        for i, buf in enumerate(rec.inputs):
            if buf is not None and i not in rec.fixed:
                buf.copy_(args[i])
        rec.graph.replay()
        self.replays += 1
        STATS["replays"] += 1
        for i in self.written:
            if i < len(args) and i not in rec.fixed and rec.inputs[i] is not None:
                args[i].copy_(rec.inputs[i])
        return copy_out(rec.outputs, rec.inputs, args, {**rec.fixed, **rec.read_at},
                        self.kept)

    def _decline(self, reason: str) -> None:
        self.declined = reason
        STATS["declines"] = (STATS["declines"] + [f"{self.name}: {reason}"])[-20:]
        self.recordings.clear()
        if self.on_decline is not None:
            self.on_decline(reason)


@contextlib.contextmanager
def _capture_undone_on_failure(device, pool, graph):
    """What a failed capture leaves behind, undone. ``capture_end`` raises before it ends the
    generators' capture, so every later random op of the process raised "Offset increment
    outside graph capture": each default generator gets back a copy of its state from before
    the capture (same seed and offset, not capturing). It also skips ``torch.cuda.graph``'s
    return to the caller's stream (the process went on on the capture's side stream, where the
    next captures failed too), and the caching allocator's routing of new blocks into the
    pool: the next capture into it raised "beginAllocateToPool: already recording to
    mempool_id"."""
    gens = [torch.cuda.default_generators[i] for i in range(torch.cuda.device_count())]
    saved = [g.clone_state() for g in gens]
    stream = torch.cuda.current_stream() if gens else None
    try:
        yield
    except BaseException:
        for g, state in zip(gens, saved):
            g.graphsafe_set_state(state)
        if stream is not None:
            torch.cuda.set_stream(stream)
        try:
            torch._C._cuda_endAllocateToPool(
                torch.cuda.current_device() if device.index is None else device.index, pool)
        except RuntimeError as e:    # (the capture failed before it began routing)
            STATS["pool_release"] = f"{type(e).__name__}: {e}"[:200]
        # and later captures go to a new pool: should the routing still stand (seen on an
        # H100 with torch 2.11, 2026-12-06, with the call above made), it names this pool, and
        # its filter, which the failed graph holds, matches no other capture: the graph is kept
        _ABANDONED.append((graph, _POOLS.pop(device, None)))
        raise


def copy_out(outputs: list, inputs: list, args: list, fixed: dict,
             kept: set = frozenset()) -> list:
    """The outputs of a replay, on memory the next replay does not write: one copy per storage
    of the recording (outputs that alias each other keep aliasing, at the same offsets), the
    outputs on a parameter or buffer as they are, and those on an input's copy rebased onto the
    caller's input. Outputs at a position in ``kept`` are handed out as they are."""
    inputs_by_storage = {}
    for i, buf in enumerate(inputs):
        if buf is not None:
            inputs_by_storage[buf.untyped_storage().data_ptr()] = i
    copies: dict = {}
    out = []
    for k, o in enumerate(outputs):
        if not isinstance(o, torch.Tensor):
            out.append(o)
            continue
        if k in kept:   # a new tensor on the recording's memory: whoever holds it counts
            out.append(reinterpret(o, tuple(o.shape), tuple(o.stride()), 0))
            continue
        storage = o.untyped_storage()
        at = inputs_by_storage.get(storage.data_ptr())
        if at is not None:
            if at in fixed:
                out.append(o)
                continue
            a, buf = args[at], inputs[at]
            out.append(torch.empty(0, dtype=o.dtype, device=o.device).set_(
                a.untyped_storage(), a.storage_offset() + o.storage_offset() - buf.storage_offset(),
                o.shape, o.stride()))
            continue
        if storage.data_ptr() not in copies:
            copies[storage.data_ptr()] = storage.clone()
        out.append(torch.empty(0, dtype=o.dtype, device=o.device).set_(
            copies[storage.data_ptr()], o.storage_offset(), o.shape, o.stride()))
    return out


def _references(t: torch.Tensor) -> int:
    """How many tensors (and saved values) hold the storage under ``t``."""
    count = getattr(torch._C, "_storage_Use_Count", None)
    if count is None:   # (then a kept output always counts as held: no replay, never wrong)
        return 1 << 30
    return count(t.untyped_storage()._cdata)


def _all_cuda(args) -> bool:
    return all(a.is_cuda for a in args if isinstance(a, torch.Tensor))


def wrap(compiled: Any, gm: fx.GraphModule, kind: str, name: str, config,
         report=None) -> Any:
    """``compiled`` as a ``Replayer`` where the graph may be replayed; else ``compiled``, with
    the reason in the report (``report.cuda_graphs``)."""
    reason = decline_reason(gm, kind, getattr(compiled, "wrapper_source", "") or "")
    if reason is None and not torch.cuda.is_available():
        reason = "no CUDA device"
    if reason is not None:
        if report is not None:
            report.cuda_graphs = f"not replayed: {reason}"
        return compiled

    def declined(why: str) -> None:
        if report is not None:
            report.cuda_graphs = f"not replayed: {why}"
    static = static_input_indices()
    if kind != "inference" and not config.cuda_graph_training:
        if report is not None:
            report.cuda_graphs = (f"not replayed: a {kind} graph, and cuda_graph_training is "
                                  f"off")
        return compiled
    kept, in_place = set(), set()
    if kind == "forward":   # what the backward takes is handed out from the recording
        returns = _forward_returns()
        if returns is None:
            if report is not None:
                report.cuda_graphs = "not replayed: its saved values cannot be told apart"
            return compiled
        kept = set(range(returns, len(gm.graph.output_node().args[0])))
    elif kind == "backward":   # the forward's saved values are read where the forward left them
        static = set()
        in_place = {i for i, n in enumerate(n for n in gm.graph.nodes if n.op == "placeholder")
                    if not n.name.startswith("tangents") and
                    isinstance(n.meta.get("val"), torch.Tensor)}
    if report is not None:
        report.cuda_graphs = (
            f"replayed (recorded at the second call of each size; {len(static)} parameters and "
            f"buffers read in place, " + (f"{len(kept)} saved values handed to the backward "
                                          f"from the recording, " if kept else "")
            + (f"{len(in_place)} saved values read where the forward left them, "
               if in_place else "") + "the other inputs copied in)")
    return Replayer(compiled, name, static, written_inputs(gm), config.cuda_graph_sizes,
                    on_decline=declined, kept=kept, in_place=in_place)


def _forward_returns() -> Optional[int]:
    """How many of the forward graph being compiled now's outputs are not saved for the
    backward (written inputs, outputs, their bases, an RNG offset), or None where it cannot
    tell."""
    try:
        ctx = torch._guards.TracingContext.try_get()
        meta = getattr(ctx, "fw_metadata", None) if ctx is not None else None
        return int(meta.num_forward) if meta is not None else None
    except Exception:  # noqa: BLE001 - then the forward is not replayed
        return None
