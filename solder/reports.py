"""What a compile reports (``solder.explain``, the graph cache, the logs): plain records that
every stage may fill in and that the runtime reads back from its cache. A leaf module: it imports
nothing of Solder's, so that ``runtime/`` needs neither the pipeline nor ``lower/`` to restore
a cached graph's report."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, Optional


@dataclass
class KernelReport:
    name: str
    source: str
    ops: list
    source_lines: list = field(default_factory=list)


@dataclass
class CallReport:
    op: str
    reason: str = ""


@dataclass
class GraphReport:
    name: str
    kind: str
    kernels: list = field(default_factory=list)
    externs: list = field(default_factory=list)
    fallbacks: list = field(default_factory=list)
    user_kernels: list = field(default_factory=list)
    wrapper: str = ""
    timings: dict = field(default_factory=dict)
    dump_dir: Optional[str] = None
    cuda_graphs: str = ""   # with cuda_graphs on: replayed, or why not (runtime/cuda_graphs.py)
    # the graph as AOTAutograd handed it over, printed when first read: printing a LLaMA step's
    # two graphs took 0.07 s of a compile on the CPU that nobody reads unless asked
    fx_graph_printer: Optional[Callable[[], str]] = field(default=None, repr=False)
    _fx_graph: Optional[str] = field(default=None, repr=False)

    @property
    def fx_graph(self) -> str:
        if self._fx_graph is None:
            printer, self.fx_graph_printer = self.fx_graph_printer, None
            self._fx_graph = printer() if printer is not None else ""
        return self._fx_graph
