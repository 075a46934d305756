"""Shrinking a failing program while it still fails the same way.

Greedy passes, repeated until none makes progress or the budget is spent: the backward left
out (when the failure is in the forward), statements dropped (halves, quarters, ... then one at
a time; a dropped statement takes what reads it along), values promoted to inputs of their own
(so that what computed them can go), outputs and unused inputs dropped,
inputs made plain (contiguous, ordinary values, float32), dimensions shrunk. Each candidate is
checked in full (eager must still run it: a candidate eager refuses is not the same failure).
"""
from __future__ import annotations

import dataclasses
import time
from typing import Callable

from .generate import value_types
from .inputs import DTYPES
from .program import Program
from .run import Outcome, same_failure

Check = Callable[[Program, bool], Outcome]    # (program, grad) -> outcome


class _Spent(Exception):
    pass


@dataclasses.dataclass
class Minimized:
    program: Program
    outcome: Outcome
    grad: bool
    checks: int


def minimize(program: Program, failure: Outcome, grad: bool, check: Check,
             max_checks: int = 150, max_seconds: float = 600.0) -> Minimized:
    state = Minimized(program, failure, grad, 0)
    stop_at = time.monotonic() + max_seconds

    def accept(candidate: Program, cand_grad: bool) -> bool:
        if state.checks >= max_checks or time.monotonic() > stop_at:
            raise _Spent
        state.checks += 1
        out = check(candidate, cand_grad)
        if same_failure(failure, out):
            state.program, state.outcome, state.grad = candidate, out, cand_grad
            return True
        return False

    try:
        if grad:
            accept(state.program, False)
        progress = True
        while progress:
            progress = False
            for step in (_drop_statements, _promote_values, _drop_outputs, _drop_inputs,
                         _plain_inputs, _shrink_dims):
                progress |= step(state, accept)
    except _Spent:
        pass
    return state


def _drop_statements(state: Minimized, accept) -> bool:
    progress = False
    chunk = max(1, len(state.program.stmts) // 2)
    while chunk >= 1:
        i = 0
        while i < len(state.program.stmts):
            cand = state.program.without_stmts(set(range(i, i + chunk)))
            if cand.size() < state.program.size() and accept(cand, state.grad):
                progress = True
                continue
            i += chunk
        chunk //= 2
    return progress


def _promote_values(state: Minimized, accept) -> bool:
    """A value computed from earlier statements becomes an input of its own, then the
    statements it came from are tried again for dropping."""
    progress = False
    i = len(state.program.stmts) - 1
    while i >= 0:
        stmt = state.program.stmts[i]
        types = value_types(state.program) if stmt.target and stmt.uses() else {}
        if stmt.target in types and types[stmt.target][1] in DTYPES and not stmt.law:
            shape, dtype = types[stmt.target]
            if accept(state.program.promoted(i, shape, dtype), state.grad):
                progress = True
                _drop_statements(state, accept)
                i = min(i, len(state.program.stmts))
        i -= 1
    return progress


def _drop_outputs(state: Minimized, accept) -> bool:
    progress = False
    i = 0
    while i < len(state.program.outputs):
        outs = state.program.outputs[:i] + state.program.outputs[i + 1:]
        if accept(dataclasses.replace(state.program, outputs=outs), state.grad):
            progress = True
            continue
        i += 1
    return progress


def _drop_inputs(state: Minimized, accept) -> bool:
    progress = False
    for spec in list(state.program.inputs):
        if len(state.program.inputs) > 1 and spec.name not in state.program.used_inputs():
            progress |= accept(state.program.without_input(spec.name), state.grad)
    return progress


def _plain_inputs(state: Minimized, accept) -> bool:
    progress = False
    for k in range(len(state.program.inputs)):
        spec = state.program.inputs[k]
        simpler = []
        if spec.layout:
            simpler.append(dataclasses.replace(spec, layout=()))
        if spec.values != "normal":
            simpler.append(dataclasses.replace(spec, values="normal"))
        if spec.dtype in ("float16", "bfloat16", "float64"):
            simpler.append(dataclasses.replace(spec, dtype="float32"))
        for cand in simpler:
            spec = state.program.inputs[k]
            changed = {f: getattr(cand, f) for f in ("layout", "values", "dtype")
                       if getattr(cand, f) != getattr(spec, f)}
            progress |= accept(state.program.with_input(k, dataclasses.replace(spec, **changed)),
                               state.grad)
    return progress


def _shrink_dims(state: Minimized, accept) -> bool:
    progress = False
    for k in range(len(state.program.inputs)):
        for d in range(len(state.program.inputs[k].shape)):
            size = state.program.inputs[k].shape[d]
            for new in sorted({1, size // 2, size - 1}):
                if not 1 <= new < size:
                    continue
                spec = state.program.inputs[k]
                shape = spec.shape[:d] + (new,) + spec.shape[d + 1:]
                if accept(state.program.with_input(k, dataclasses.replace(spec, shape=shape)),
                          state.grad):
                    progress = True
                    break
    return progress
