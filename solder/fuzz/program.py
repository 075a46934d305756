"""A fuzz program: its inputs, its straight-line statements and outputs, and its Python text.

The text is what runs, in the fuzzer and in a standalone script alike: ``source()`` defines
``make_inputs(up=False, grad=False)``, ``fn(a0, ...)``, ``LAWS`` (the outputs of random ops and
the law each is checked against) and ``RNG_SEED`` (torch's seed before each call).
"""
from __future__ import annotations

import dataclasses
import re
from typing import Optional

from .inputs import InputSpec

NAME = re.compile(r"\b([av]\d+)\b")


@dataclasses.dataclass
class Stmt:
    code: str                       # one line of Python, e.g. "v3 = torch.sin(a0)"
    target: Optional[str] = None    # the variable it defines (None: a statement for its effect)
    op: str = ""                    # what was drawn, e.g. "sin"
    family: str = ""
    law: Optional[tuple] = None     # random ops: the law its value follows

    def uses(self) -> list[str]:
        names = NAME.findall(self.code)
        if self.target is not None and names and names[0] == self.target:
            names = names[1:]
        return names

    def to_json(self) -> dict:
        return {"code": self.code, "target": self.target, "op": self.op, "family": self.family,
                "law": list(self.law) if self.law else None}

    @staticmethod
    def from_json(d: dict) -> "Stmt":
        return Stmt(d["code"], d["target"], d["op"], d["family"],
                    tuple(d["law"]) if d["law"] else None)


@dataclasses.dataclass
class Program:
    seed: int
    inputs: list            # [InputSpec]
    stmts: list             # [Stmt]
    outputs: list           # variable names returned, in order
    note: str = ""          # where it came from ("seed 12, draw 2", "minimized from ...")

    def to_json(self) -> dict:
        return {"seed": self.seed, "inputs": [i.to_json() for i in self.inputs],
                "stmts": [s.to_json() for s in self.stmts], "outputs": list(self.outputs),
                "note": self.note}

    @staticmethod
    def from_json(d: dict) -> "Program":
        return Program(d["seed"], [InputSpec.from_json(i) for i in d["inputs"]],
                       [Stmt.from_json(s) for s in d["stmts"]], list(d["outputs"]), d["note"])

    def laws(self) -> dict:
        by_var = {s.target: s.law for s in self.stmts if s.law}
        return {k: by_var[v] for k, v in enumerate(self.outputs) if v in by_var}

    def precision(self) -> str:
        """The lowest floating precision of its inputs and of the dtypes its code names."""
        text = " ".join(s.code for s in self.stmts) + " " + " ".join(
            i.dtype for i in self.inputs)
        for name, marks in (("bfloat16", ("bfloat16",)), ("float16", ("float16", ".half()")),
                            ("float32", ("float32", ".float()", "int32", "int64", "bool"))):
            if any(m in text for m in marks):
                return name
        return "float64"

    def ops(self) -> list[str]:
        return [s.op for s in self.stmts]

    def source(self) -> str:
        lines = [f"# {self.note}" if self.note else f"# fuzz program, seed {self.seed}",
                 "def make_inputs(up=False, grad=False):",
                 '    """Fresh inputs, bases of the view inputs, and (with grad) the leaves."""',
                 "    ins, bases, leaves = [], [], []"]
        for spec in self.inputs:
            lines += ["    " + line for line in spec.source_lines()]
        lines += ["    return ins, bases, leaves", "", ""]
        lines.append(f"def fn({', '.join(i.name for i in self.inputs)}):")
        lines += ["    " + s.code for s in self.stmts]
        outs = ", ".join(self.outputs) + ("," if len(self.outputs) == 1 else "")
        lines += [f"    return ({outs})", "", ""]
        lines.append(f"LAWS = {self.laws()!r}")
        lines.append(f"PRECISION = torch.{self.precision()}  # the lowest floating precision "
                     "it computes in")
        lines.append(f"RNG_SEED = {self.seed % 100003}")
        return "\n".join(lines) + "\n"

    # --- edits, for the minimizer: each returns a new program ---------------------------

    def without_stmts(self, drop: set) -> "Program":
        """Drop the statements at these positions and every later one that reads what they
        define; outputs that are gone are no longer returned."""
        gone, keep = set(), []
        for i, s in enumerate(self.stmts):
            if i in drop or any(u in gone for u in s.uses()):
                if s.target:
                    gone.add(s.target)
                continue
            keep.append(s)
        return dataclasses.replace(self, stmts=keep,
                                   outputs=[o for o in self.outputs if o not in gone])

    def used_inputs(self) -> set:
        used = set(self.outputs)
        for s in self.stmts:
            used.update(s.uses())
        return {i.name for i in self.inputs if i.name in used}

    def without_input(self, name: str) -> "Program":
        """Drop an input that nothing reads; later inputs are renamed down."""
        inputs = [dataclasses.replace(i) for i in self.inputs if i.name != name]
        mapping = {}
        for k, spec in enumerate(inputs):
            mapping[spec.name] = f"a{k}"
            spec.name = f"a{k}"

        def rename(text):
            return NAME.sub(lambda m: mapping.get(m.group(1), m.group(1)), text)
        stmts = [dataclasses.replace(s, code=rename(s.code)) for s in self.stmts]
        return dataclasses.replace(self, inputs=inputs, stmts=stmts,
                                   outputs=[mapping.get(o, o) for o in self.outputs])

    def promoted(self, index: int, shape: tuple, dtype: str) -> "Program":
        """The value statement ``index`` defines becomes a new (contiguous) input instead:
        what it was computed from is then free to go."""
        target = self.stmts[index].target
        name = f"a{len(self.inputs)}"
        seed = max(i.seed for i in self.inputs) + 1 if self.inputs else self.seed * 1000
        spec = InputSpec(name, tuple(shape), dtype, "normal", (), seed)

        def rename(text):
            return NAME.sub(lambda m: name if m.group(1) == target else m.group(1), text)
        stmts = [dataclasses.replace(s, code=rename(s.code)) for s in self.stmts[index + 1:]]
        return dataclasses.replace(
            self, inputs=self.inputs + [spec], stmts=self.stmts[:index] + stmts,
            outputs=[name if o == target else o for o in self.outputs])

    def with_input(self, k: int, spec: InputSpec) -> "Program":
        inputs = list(self.inputs)
        inputs[k] = spec
        return dataclasses.replace(self, inputs=inputs)

    def size(self) -> tuple:
        """What the minimizer makes smaller: statements, then elements, then layouts."""
        numel = 0
        for i in self.inputs:
            n = 1
            for s in i.shape:
                n *= s
            numel += n
        return (len(self.stmts), len(self.inputs), len(self.outputs), numel,
                sum(len(i.layout) for i in self.inputs))
