"""A program's inputs: shape, dtype, values and layout, and the Python that makes each one.

A layout is a chain of transforms applied to a freshly made contiguous base tensor. Each
transform is stated for whatever shape it must produce, so the minimizer can shrink an input's
shape and keep its layout: the base's shape is worked out backwards from the input's.
"""
from __future__ import annotations

import dataclasses
import random
from typing import Optional

DTYPES = ("float32", "float16", "bfloat16", "float64", "int32", "int64", "bool")
FLOATING = ("float32", "float16", "bfloat16", "float64")
LAYOUTS = ("contiguous", "permute", "slice", "expand", "offset", "channels_last")


@dataclasses.dataclass
class InputSpec:
    name: str
    shape: tuple
    dtype: str
    values: str = "normal"        # normal | special (normal with inf, nan, 0, -0 mixed in)
    layout: tuple = ()            # transforms, e.g. (("slice", 1, 2, 1), ("permute", (1, 0)))
    seed: int = 0                 # the values' own generator seed

    def to_json(self) -> dict:
        return {"name": self.name, "shape": list(self.shape), "dtype": self.dtype,
                "values": self.values, "layout": [list(_jsonable(t)) for t in self.layout],
                "seed": self.seed}

    @staticmethod
    def from_json(d: dict) -> "InputSpec":
        layout = tuple(tuple(tuple(x) if isinstance(x, list) else x for x in t) for t in d["layout"])
        return InputSpec(d["name"], tuple(d["shape"]), d["dtype"], d["values"], layout, d["seed"])

    @property
    def is_view(self) -> bool:
        """Whether the input is a view of a base tensor (whose storage is compared too)."""
        return any(t[0] != "channels_last" for t in self.layout)

    def base_shape(self) -> tuple:
        shape = tuple(self.shape)
        for t in reversed(self.layout):
            shape = _pre_shape(t, shape)
        return shape

    def _shapes_after(self) -> list:
        """The shape after each transform of the layout."""
        outs, shape = [], tuple(self.shape)
        for t in reversed(self.layout):
            outs.append(shape)
            shape = _pre_shape(t, shape)
        return outs[::-1]

    def source_lines(self) -> list[str]:
        """Lines of make_inputs that append this input (and its base, for a view) to ``ins``."""
        make = (f"b = _values({self.seed}, {_tup(self.base_shape())}, torch.{self.dtype}, "
                f"{self.values!r}, DEV, up)")
        lines = [make, f"b = _leaf(b, leaves, {self.name!r}) if grad else b"]
        expr = "b"
        for t, out in zip(self.layout, self._shapes_after()):
            expr = _render(t, expr, out)
        if self.is_view:
            lines.append(f"bases.append(({self.name!r}, b))")
        lines.append(f"ins.append({expr})")
        return lines


def _jsonable(t):
    return [list(x) if isinstance(x, tuple) else x for x in t]


def _tup(shape) -> str:
    shape = tuple(shape)
    return f"({shape[0]},)" if len(shape) == 1 else str(shape)


def _pre_shape(t: tuple, out: tuple) -> tuple:
    """The shape a transform's operand must have for it to produce ``out``."""
    kind = t[0]
    if kind == "permute":
        perm = t[1]
        pre = [0] * len(out)
        for i, p in enumerate(perm):
            pre[p] = out[i]
        return tuple(pre)
    if kind == "slice":
        _, dim, step, start = t
        pre = list(out)
        pre[dim] = out[dim] * step + start
        return tuple(pre)
    if kind == "expand":
        dims, lead = t[1], t[2]
        return tuple(1 if i in dims else s for i, s in enumerate(out))[lead:]
    if kind == "offset":
        n = 1
        for s in out:
            n *= s
        return (n + t[1] + t[2],)
    return out  # channels_last


def _render(t: tuple, expr: str, out: tuple) -> str:
    kind = t[0]
    if kind == "permute":
        return f"{expr}.permute{tuple(t[1])}" if len(t[1]) > 1 else f"{expr}.permute({t[1][0]})"
    if kind == "slice":
        _, dim, step, start = t
        return f"{expr}[{':, ' * dim}{start or ''}::{step}]"
    if kind == "expand":
        return f"{expr}.expand{_tup(out) if out else '(())'}"
    if kind == "offset":
        n = _numel(out)
        return f"{expr}[{t[1]}:{t[1] + n}].view{_tup(out) if out else '(())'}"
    if kind == "channels_last":
        return f"{expr}.contiguous(memory_format=torch.channels_last)"
    raise ValueError(f"unknown layout transform {t!r}")


def draw_layout(rng: random.Random, shape: tuple) -> tuple:
    """A random chain of one or two layout transforms for an input of this shape."""
    rank = len(shape)
    options = ["contiguous", "offset", "expand"]
    if rank >= 1:
        options.append("slice")
    if rank >= 2:
        options.append("permute")
    if rank == 4:
        options.append("channels_last")
    kind = rng.choice(options)
    chain = []
    if kind == "contiguous":
        return ()
    if kind == "channels_last":
        return (("channels_last",),)
    if kind == "offset":
        return (("offset", rng.choice((1, 2, 5)), rng.choice((0, 3))),)
    if kind == "expand":
        dims = tuple(i for i in range(rank) if rng.random() < 0.5)
        lead = rng.choice((0, 0, 1)) if rank >= 1 else 0
        lead = min(lead, rank)
        # the leading dims a base lacks are broadcast too
        dims = tuple(sorted(set(dims) | set(range(lead))))
        return (("expand", dims, lead),)
    if kind == "slice":
        chain.append(("slice", rng.randrange(rank), rng.choice((2, 3)), rng.choice((0, 1))))
        if rank >= 2 and rng.random() < 0.4:
            perm = list(range(rank))
            rng.shuffle(perm)
            chain.append(("permute", tuple(perm)))
        return tuple(chain)
    perm = list(range(rank))
    while perm == sorted(perm):
        rng.shuffle(perm)
    chain.append(("permute", tuple(perm)))
    return tuple(chain)


def draw_shape(rng: random.Random, rank: Optional[int] = None) -> tuple:
    rank = rng.choice((0, 1, 1, 2, 2, 2, 3, 3, 4)) if rank is None else rank
    sizes = (1, 2, 3, 4, 5, 6, 0)
    weights = (3, 4, 4, 3, 2, 2, 1)
    shape = tuple(rng.choices(sizes, weights)[0] for _ in range(rank))
    # keep programs tiny for the interpreter
    while _numel(shape) > 96:
        shape = tuple(max(1, s // 2) for s in shape)
    return shape


def _numel(shape) -> int:
    n = 1
    for s in shape:
        n *= s
    return n


def draw_input(rng: random.Random, name: str, seed: int, shape: Optional[tuple] = None,
               dtype: Optional[str] = None) -> InputSpec:
    shape = draw_shape(rng) if shape is None else shape
    if dtype is None:
        dtype = rng.choices(DTYPES, (6, 2, 2, 2, 1, 2, 1))[0]
    values = "special" if dtype in FLOATING and rng.random() < 0.1 else "normal"
    return InputSpec(name, shape, dtype, values, draw_layout(rng, shape), seed)
