"""Drawing a program from a seed, keeping only programs that eager runs.

A seed's program is its first draw that eager runs (on the CPU; with ``grad``, its backward
too): draw ``k`` uses ``random.Random("solder-fuzz/<seed>/<k>")``, which is the same on every
machine, and the statements are drawn one at a time against the real values of the program so
far (tiny CPU tensors), each one tried in eager and drawn again if eager raises. Only eager's
success or failure feeds back into the draw, never a value, so a seed gives the same program
wherever the same torch runs.
"""
from __future__ import annotations

import dataclasses
import random
import warnings
from typing import Optional

import torch
import torch.nn.functional as F

from . import ops_indexing, ops_math, ops_views, ops_writes  # noqa: F401 - they register the ops
from .draw import FAMILY_WEIGHTS, MAX_NUMEL, OPS, Ctx, Var, overlaps
from .execute import _leaf, _values, run
from .inputs import draw_input
from .program import Program, Stmt

MAX_DRAWS = 50


@dataclasses.dataclass
class Generated:
    program: Program
    rejected: int            # whole draws eager refused before this one


def namespace(source: str, device: str, filename: str = "<fuzz program>") -> dict:
    """Run a program's text and return its module dictionary (make_inputs, fn, LAWS, ...)."""
    import linecache
    ns = {"torch": torch, "F": F, "DEV": device, "_values": _values, "_leaf": _leaf,
          "__name__": "solder_fuzz_program"}
    # Dynamo and Solder's reports quote the program's lines from here
    linecache.cache[filename] = (len(source), None, source.splitlines(True), filename)
    exec(compile(source, filename, "exec"), ns)  # noqa: S102 - our own generated text
    return ns


def eager_runs(program: Program, grad: bool, device: str = "cpu") -> Optional[str]:
    """None when eager runs the program (and its backward, with grad), else why not."""
    try:
        ns = namespace(program.source(), device)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            run(ns["fn"], ns["make_inputs"], ns["LAWS"], ns["RNG_SEED"], grad=grad)
    except Exception as err:  # noqa: BLE001 - any failure rejects the draw
        return f"{type(err).__name__}: {err}"
    return None


def value_types(program: Program) -> dict:
    """{variable: (shape, dtype name)} of the values the statements define, from a CPU run
    (empty when eager fails)."""
    ns = namespace(program.source(), "cpu")
    ins, _, _ = ns["make_inputs"]()
    for spec, t in zip(program.inputs, ins):
        ns[spec.name] = t
    types = {}
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            for s in program.stmts:
                exec(s.code, ns)  # noqa: S102 - our own generated text
                if s.target:
                    t = ns[s.target]
                    types[s.target] = (tuple(t.shape), str(t.dtype).removeprefix("torch."))
    except Exception:  # noqa: BLE001 - no types: nothing is promoted
        return {}
    return types


def generate(seed: int, grad: bool = False) -> Generated:
    for k in range(MAX_DRAWS):
        program = draw(seed, k)
        if eager_runs(program, grad) is None:
            return Generated(program, k)
    raise RuntimeError(f"seed {seed}: no program eager runs in {MAX_DRAWS} draws")


def draw(seed: int, k: int = 0) -> Program:
    """Draw k of a seed, not yet checked as a whole."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return _draw(seed, k)


def _draw(seed: int, k: int) -> Program:
    rng = random.Random(f"solder-fuzz/{seed}/{k}")
    count = rng.choice((1, 1, 2, 2, 2, 3))
    inputs = [draw_input(rng, f"a{i}", seed * 1000 + 8 * k + i) for i in range(count)]
    # share a shape between inputs now and then, so that binary ops meet same-shaped operands
    for i in range(1, count):
        if rng.random() < 0.4:
            inputs[i] = draw_input(rng, f"a{i}", inputs[i].seed, shape=inputs[0].shape)
    program = Program(seed, inputs, [], [], note=f"fuzz program, seed {seed}"
                      + (f" (draw {k})" if k else ""))
    ns = namespace(program.source(), "cpu")
    ins, bases, _ = ns["make_inputs"]()
    for spec, t in zip(inputs, ins):
        ns[spec.name] = t
    input_storages = {_storage(t) for t in ins} | {_storage(b) for _, b in bases}
    input_storages.discard(None)
    frozen = frozenset(_storage(t) for t in ins if overlaps(t))
    variables = [_var(spec.name, t, True) for spec, t in zip(inputs, ins)]
    random_vars: list = []
    families = list(FAMILY_WEIGHTS)
    weights = [FAMILY_WEIGHTS[f] for f in families]
    for index in range(rng.randint(3, 15)):
        stmt = _draw_stmt(Ctx(rng, ns, variables, frozen), families, weights, index)
        if stmt is None:
            continue
        program.stmts.append(stmt)
        if stmt.target is not None:
            t = ns[stmt.target]
            v = _var(stmt.target, t, _storage(t) in input_storages)
            v.writable = _writable(stmt, t, ns, variables)
            (random_vars if stmt.law else variables).append(v)
    program.outputs = _choose_outputs(rng, program, random_vars)
    return program


def _draw_stmt(ctx: Ctx, families, weights, index) -> Optional[Stmt]:
    rng, ns = ctx.rng, ctx.ns
    for _ in range(30):
        family = rng.choices(families, weights)[0]
        entries = OPS[family]
        _, _, fn = rng.choices(entries, [w for w, _, _ in entries])[0]
        draft = fn(ctx)
        if draft is None:
            continue
        target = f"v{index}" if draft.assign else None
        code = f"{target} = {draft.code}" if target else draft.code
        if not _runs(code, ns, target):
            continue
        return Stmt(code, target, draft.op, family, draft.law)
    return None


def _runs(code: str, ns: dict, target: Optional[str]) -> bool:
    try:
        exec(code, ns)  # noqa: S102 - our own generated text
    except Exception:  # noqa: BLE001 - eager refused it: draw again
        if target:
            ns.pop(target, None)
        return False
    if target is None:
        return True
    value = ns[target]
    if not isinstance(value, torch.Tensor) or value.numel() > MAX_NUMEL or value.dim() > 6:
        ns.pop(target)
        return False
    return True


def _writable(stmt: Stmt, t: torch.Tensor, ns: dict, variables: list) -> bool:
    """False for a view made through as_strided, for a view in another dtype (a float view of
    an integer input: the integers would hold a computed float's bits, where one unit of
    rounding or a NaN's unspecified sign and payload shows as a different integer), and for
    views of such views."""
    operands = {v.name: v for v in variables}
    for name in stmt.uses():
        if name in operands and _storage(ns[name]) == _storage(t) and _storage(t) is not None:
            if not operands[name].writable or "as_strided(" in stmt.code \
                    or ns[name].dtype != t.dtype:
                return False
    return True


def _storage(t: torch.Tensor):
    s = t.untyped_storage()
    return s.data_ptr() if s.nbytes() else None


def _var(name: str, t: torch.Tensor, of_input: bool) -> Var:
    return Var(name, tuple(t.shape), t.dtype, of_input)


def _choose_outputs(rng: random.Random, program: Program, random_vars: list) -> list:
    """Every random value, most values nothing reads later, and now and then one that is."""
    used = set()
    for s in program.stmts:
        used.update(s.uses())
    defined = [s.target for s in program.stmts if s.target and not s.law]
    sinks = [v for v in defined if v not in used]
    if len(sinks) > 4:
        sinks = rng.sample(sinks, 4)
    outs = set(sinks) | {v.name for v in random_vars}
    inner = [v for v in defined if v in used]
    if inner and rng.random() < 0.3:
        outs.add(rng.choice(inner))
    if not outs and defined:
        outs.add(defined[-1])
    order = [s.target for s in program.stmts if s.target]
    return [v for v in order if v in outs]
