"""Solder's settings: one typed object, passed explicitly through a compile.

Every field can be set three ways, later ones winning: the defaults below, a ``SOLDER_<FIELD>``
environment variable (upper-case field name), and ``torch.compile(..., options={...})``.
Fields marked ``codegen=True`` in their metadata change generated code and feed cache keys.
"""
from __future__ import annotations

import dataclasses
import os
from dataclasses import dataclass, field, fields
from typing import Any, Optional


def _setting(default: Any, doc: str, codegen: bool = False):
    return field(default=default, metadata={"doc": doc, "codegen": codegen})


@dataclass(frozen=True)
class Config:
    debug_dir: Optional[str] = _setting(None, "dump every stage of every graph under this folder")
    fuse: bool = _setting(True, "group nodes into shared kernels (off: one kernel per buffer)", True)
    persistent_reduction_max: int = _setting(
        16384, "rows up to this many elements are reduced in registers, in one pass", True)
    inline_max_ops: int = _setting(
        48, "a pointwise value read by several consumers is recomputed in each only if its "
        "expression has at most this many operations; above it becomes a buffer", True)
    inline_max_reads: int = _setting(
        4, "... and reads at most this many buffers (a residual stream recomputed from every "
        "earlier layer's output in each consumer costs reads that grow with depth)", True)
    autotune: bool = _setting(
        True, "time a few launch configs per large reduction kernel on first call (GPU only)")
    check_input_layouts: bool = _setting(
        True, "check at each call that inputs have the strides the graph was compiled for", True)
    cache_dir: Optional[str] = _setting(None, "on-disk cache folder (default: under ~/.cache/solder)")
    cache: bool = _setting(True, "use the on-disk cache")
    debug_eager: bool = _setting(
        False, "run the captured, decomposed graphs op by op through ATen instead of codegen "
        "(the solder_debug backend): places a wrong result in capture or in codegen")
    decompose: bool = _setting(True, "apply Solder's decomposition table during capture", True)
    log_compile: bool = _setting(False, "log one line per compiled graph with its stage times")
    compile_threads: int = _setting(
        0, "threads that compile a graph's kernels in parallel before its first call (GPU, "
        "static sizes; 0: one per core this process may use, 1: compile at each first launch)")
    compile_processes: int = _setting(
        -1, "worker processes that compile a graph's kernels ahead of the thread pool (GPU, "
        "static sizes; the thread pool is bound by Python's GIL): 0 off, -1 one per core, shared "
        "among torchrun's processes on the machine, at most 32")
    overlap_compile: bool = _setting(
        True, "compile a graph's kernels in the background while the rest of the program is "
        "captured and lowered (a backward graph, the next graph), waiting for them at the "
        "graph's first call; off: wait right after the graph's code generation")
    compile_backward_early: bool = _setting(
        True, "compile a training graph's backward right after its forward, at capture, "
        "instead of at the first backward call: its kernels then compile in the background "
        "while the forward runs (a LLaMA step's cold compile on an H200: 10.2 s, 13.1 s off); "
        "off: a program that never calls backward compiles no backward")
    compile_backward_in_child: bool = _setting(
        False, "with compile_backward_early, lower, schedule and generate a training graph's "
        "backward in a forked child process while this one does the forward's (Linux; the "
        "child's code is used only for the very graph it compiled, and anything wrong with it "
        "means compiling here; graphs with symbolic sizes compile here: "
        "runtime/forked_compile.py)")
    check_indices: bool = _setting(
        True, "check index tensors against the dimension they index, as eager does (a "
        "reduction fused into the op's kernel and an asynchronous assert per indexing op: an "
        "error on the CPU, a device-side assert on the GPU); off, an out-of-range index reads "
        "0 in a gather and is skipped by a scatter", True)
    pause_gc: bool = _setting(
        True, "pause Python's cyclic garbage collector while a graph compiles (its passes over "
        "the heap of a large model cost ~12% of capture); what became garbage is collected "
        "afterwards as usual")
    pad_mm_min_elements: int = _setting(
        1 << 20, "a matmul whose output rows are not 16-byte aligned and that has at least this "
        "many output elements multiplies zero-padded columns instead (CUDA only; -1: never)",
        True)
    simplify_attention_masks: bool = _setting(
        True, "an attention mask built from sizes and constants alone that allows everything is "
        "dropped, and one that is exactly causal becomes is_causal=True, so that the fused "
        "attention kernels run (capture/attention_masks.py)", True)
    split_reductions: bool = _setting(
        True, "a long reduction into few outputs (a weight gradient's column sums, a whole-tensor "
        "sum) runs as two: partial results over chunks of the rows, then their reduction, so that "
        "enough programs run to fill the GPU (lower/split_reductions.py)", True)
    cpu_codegen: bool = _setting(
        False, "graphs on the CPU (without TRITON_INTERPRET) run as generated C++ kernels, "
        "compiled with the system's C++ compiler (CXX, else g++, c++ or clang++; ops the native "
        "target lacks run in ATen; runtime/native.py); off, or with no compiler found, a CPU "
        "graph runs as Dynamo captured it, in eager's own ops. Off by default while a value "
        "computed again in another loop can differ in its last bits (the C library's vector "
        "math against its scalar functions: docs/fuzz-runs.md, seed 1023183)", True)
    cuda_graphs: bool = _setting(
        False, "replay each compiled inference graph as a CUDA graph, recorded at its second "
        "call of each input size (mode='reduce-overhead' turns it on; what declines, and why, "
        "is in solder.explain: runtime/cuda_graphs.py)")
    cuda_graph_training: bool = _setting(
        True, "with cuda_graphs, replay training graphs (forward and backward) too (BERT-base "
        "training on an H100: 1.24x the step without graphs, peak memory 1.09x; "
        "docs/benchmarks.md)")
    cuda_graph_sizes: int = _setting(
        8, "with cuda_graphs, the most input sizes a graph keeps recordings for (the least "
        "recently used beyond it is dropped)")
    attention_backends: str = _setting(
        "", "the fused attention kernels SDPA may pick when a graph is captured, comma-separated "
        "from flash, efficient, cudnn, math, in PyTorch's order of preference ('': PyTorch's own "
        "choice); the choice is made once, at capture (capture/attention_backends.py)", True)

    @classmethod
    def field_names(cls) -> list[str]:
        return [f.name for f in fields(cls)]

    def replace(self, **changes: Any) -> "Config":
        unknown = set(changes) - set(self.field_names())
        if unknown:
            raise ValueError(
                f"unknown Solder option(s) {sorted(unknown)}; known: {self.field_names()}")
        return dataclasses.replace(self, **{k: _coerce(self, k, v) for k, v in changes.items()})

    def codegen_key(self) -> tuple:
        """The settings that change generated code, for cache keys."""
        return tuple((f.name, getattr(self, f.name)) for f in fields(self) if f.metadata["codegen"])


def _coerce(cfg: Config, name: str, value: Any) -> Any:
    current = next(f for f in fields(cfg) if f.name == name)
    kind = current.type if isinstance(current.type, type) else None
    if isinstance(value, str):
        default = current.default
        if isinstance(default, bool):
            low = value.strip().lower()
            if low in ("1", "true", "yes", "on"):
                return True
            if low in ("0", "false", "no", "off", ""):
                return False
            raise ValueError(f"option {name}: expected a boolean, got {value!r}")
        if isinstance(default, int):
            return int(value)
    del kind
    return value


# SOLDER_* variables that are not settings: the conformance suite's own
OTHER_VARIABLES = frozenset({"SOLDER_CONFORMANCE", "SOLDER_CONFORMANCE_BACKEND",
                             "SOLDER_CONFORMANCE_SAMPLES", "SOLDER_CONFORMANCE_DTYPES"})
_warned: set = set()


def from_env(base: Optional[Config] = None) -> Config:
    cfg = base or Config()
    env = {}
    known = {"SOLDER_" + name.upper(): name for name in Config.field_names()}
    for var, value in os.environ.items():
        if var in known:
            env[known[var]] = value
        elif var.startswith("SOLDER_") and var not in OTHER_VARIABLES:
            _warn_unknown(var, known)
    return cfg.replace(**env) if env else cfg


def _warn_unknown(var: str, known: dict) -> None:
    """Once per process and name: a misspelt setting would otherwise be ignored silently."""
    if var in _warned:
        return
    _warned.add(var)
    import difflib
    import logging
    close = difflib.get_close_matches(var, list(known) + sorted(OTHER_VARIABLES), n=1)
    hint = f"; did you mean {close[0]}?" if close else " (python -c 'import solder; " \
        "print(solder.Config.field_names())' lists the settings)"
    logging.getLogger("solder").warning("%s is not a Solder setting and is ignored%s", var, hint)


def resolve(options: Optional[dict] = None) -> Config:
    """Defaults, then SOLDER_* environment variables, then ``options``."""
    cfg = from_env()
    return cfg.replace(**options) if options else cfg
