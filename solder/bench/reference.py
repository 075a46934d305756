"""A training step's float64 reference, for judging a compiler's bf16 gradients.

A deep network's gradients in bf16 autocast can differ from eager's by more than any fixed
tolerance while being no less accurate: ResNet-50's first convolution's weight gradient at
batch 2 differed from eager's in 87% of its elements for inductor and Solder alike (2026-12-07).
Judged as PyTorch's own benchmarks judge training accuracy, a compiled result passes when its
error against the same step in float64 is at most ``MULTIPLIER`` times eager's error (root mean
square, per output), plus a floor of ``FLOOR`` of the output's largest magnitude.

The step runs in float64 on a copy of the case's model (the module its function closes over,
swapped for the copy in the closure for that one call: the model itself, its gradients and its
running statistics are not touched). Autocast leaves float64 tensors alone, so the step's
``torch.autocast`` region computes in float64 too.
"""
from __future__ import annotations

import copy
from typing import Optional

import torch

from .cases import Workload, _leaves

MULTIPLIER = 3.0
FLOOR = 1e-3


def _module_cells(fn) -> list:
    """The closure cells of a workload's function that hold an nn.Module (its model)."""
    cells = []
    for cell in getattr(fn, "__closure__", None) or ():
        try:
            v = cell.cell_contents
        except ValueError:   # an empty cell
            continue
        if isinstance(v, torch.nn.Module):
            cells.append(cell)
    return cells


def float64_step(work: Workload) -> Optional[tuple]:
    """The workload's step (loss and gradients) computed in float64 on a copy of its model;
    None when its function closes over no module or its leaves are not the model's."""
    cells = _module_cells(work.fn)
    if not cells or not work.grad_leaves:
        return None
    originals = [c.cell_contents for c in cells]
    copies = [copy.deepcopy(m).double() for m in originals]
    twin = {}
    for m, c in zip(originals, copies):
        for p, q in zip(m.parameters(), c.parameters()):
            twin[id(p)] = q
    if any(id(leaf) not in twin for leaf in work.grad_leaves):
        return None
    inputs = tuple(x.double() if isinstance(x, torch.Tensor) and x.is_floating_point() else x
                   for x in work.inputs)
    try:
        for cell, c in zip(cells, copies):
            cell.cell_contents = c
        loss = work.fn(*inputs)
        loss.backward()
    finally:
        for cell, m in zip(cells, originals):
            cell.cell_contents = m
    return (loss.detach(),) + tuple(twin[id(leaf)].grad for leaf in work.grad_leaves)


def no_less_accurate(actual, expected, reference) -> Optional[str]:
    """None when every output of ``actual`` is within MULTIPLIER times eager's (``expected``)
    root-mean-square error against ``reference``; else which output is not, and by how much."""
    got, want, ref = _leaves(actual), _leaves(expected), _leaves(reference)
    if not (len(got) == len(want) == len(ref)):
        return f"{len(got)} outputs, eager {len(want)}, the float64 reference {len(ref)}"
    for i, (a, e, r) in enumerate(zip(got, want, ref)):
        if not isinstance(r, torch.Tensor) or not r.is_floating_point():
            continue
        r = r.double()
        scale = r.abs().max().item() if r.numel() else 0.0
        err_a = _rmse(a, r)
        err_e = _rmse(e, r)
        if not err_a <= MULTIPLIER * err_e + FLOOR * scale:
            return (f"output {i} {tuple(r.shape)}: error {err_a:.3g} against the float64 "
                    f"reference, eager's {err_e:.3g} (at most {MULTIPLIER:g}x eager's + "
                    f"{FLOOR * scale:.3g})")
    return None


def _rmse(x: torch.Tensor, ref: torch.Tensor) -> float:
    if ref.numel() == 0:
        return 0.0
    d = x.detach().double() - ref
    return d.pow(2).mean().sqrt().item()
