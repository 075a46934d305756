"""``solder.explain(fn, *args, **kwargs)``: compile, run once, and report what Solder made of it."""
from __future__ import annotations

from dataclasses import dataclass, field

import torch

from . import config as config_mod
from .pipeline import CompileContext
from .reports import GraphReport


@dataclass
class Report:
    graphs: list = field(default_factory=list)      # GraphReport, in compile order
    graph_breaks: int = 0
    rewrites: list = field(default_factory=list)    # rewrites of Dynamo's graphs, one line each
    notes: list = field(default_factory=list)       # what a rewrite left alone, and why

    @property
    def kernel_count(self) -> int:
        return sum(len(g.kernels) for g in self.graphs)

    @property
    def fallbacks(self) -> list:
        return [f for g in self.graphs for f in g.fallbacks]

    @property
    def externs(self) -> list:
        return [e for g in self.graphs for e in g.externs]

    def __str__(self) -> str:
        lines = [f"Solder: {len(self.graphs)} graph(s), {self.kernel_count} generated kernel(s), "
                 f"{len(self.externs)} library call(s), {len(self.fallbacks)} ATen fallback(s)"]
        lines += [f"  rewrite: {r}" for r in self.rewrites]
        lines += [f"  note: {n}" for n in self.notes]
        for g in self.graphs:
            lines.append(f"\n== {g.name} ({g.kind}) ==")
            for k in g.kernels:
                lines.append(f"  kernel {k.name}: {', '.join(k.ops)}")
                for s in k.source_lines[:3]:
                    lines.append(f"      from {s}")
            for e in g.externs:
                lines.append(f"  library call: {e.op}" + (f" ({e.reason})" if e.reason else ""))
            for f in g.fallbacks:
                lines.append(f"  ATen fallback: {f.op} ({f.reason})")
            for u in g.user_kernels:
                lines.append(f"  user kernel: {u}")
            if g.cuda_graphs:
                lines.append(f"  CUDA graphs: {g.cuda_graphs}")
            if g.timings:
                t = ", ".join(f"{k} {v * 1e3:.1f} ms" if isinstance(v, float) else f"{k} {v}"
                              for k, v in g.timings.items())
                lines.append(f"  compile: {t}")
            if g.dump_dir:
                lines.append(f"  dumped to {g.dump_dir}")
        return "\n".join(lines)

    def source(self) -> str:
        """Every generated kernel's Triton source."""
        return "\n\n".join(k.source for g in self.graphs for k in g.kernels)


def explain(fn, *args, options: dict | None = None, dynamic=None, **kwargs) -> Report:
    """Compile ``fn`` with Solder, call it on the arguments, and return a ``Report``. If any
    input requires grad, a backward through the sum of the floating outputs is run too, so the
    backward graph is compiled and reported."""
    from .backend import backend_for
    torch._dynamo.reset()
    ctx = CompileContext(config_mod.resolve(options))
    compiled = torch.compile(fn, backend=backend_for(options, ctx), dynamic=dynamic)
    out = compiled(*args, **kwargs)
    leaves = [a for a in _flat(args, kwargs) if isinstance(a, torch.Tensor) and a.requires_grad]
    if isinstance(fn, torch.nn.Module):
        leaves += [p for p in fn.parameters() if p.requires_grad]
    outs = [o for o in _flat((out,), {}) if isinstance(o, torch.Tensor) and o.requires_grad]
    if leaves and outs:
        # autograd.grad, not backward: the caller's .grad fields stay untouched
        torch.autograd.grad([o.float().sum() for o in outs], leaves, allow_unused=True)
    report = Report(list(ctx.graphs), rewrites=list(ctx.rewrites), notes=list(ctx.notes))
    torch._dynamo.reset()
    return report


def _flat(args, kwargs):
    stack = list(args) + list(kwargs.values())
    while stack:
        a = stack.pop()
        if isinstance(a, (list, tuple)):
            stack.extend(a)
        elif isinstance(a, dict):
            stack.extend(a.values())
        else:
            yield a
