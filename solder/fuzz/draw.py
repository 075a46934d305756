"""What an op's drawing function sees: the program's variables so far and helpers that write
operands, constants and index tensors as Python text; and the table the ops register in.

Variables are the real (tiny, CPU) tensors of the program run so far, so an op reads shapes and
dtypes off them, and ``meta(expr)`` evaluates a view expression to learn its shape. A drawing
function returns a ``Draft`` (a line of code) or None when it does not apply; the generator runs
the line in eager and draws again if eager raises.
"""
from __future__ import annotations

import dataclasses
import random
from typing import Callable, Optional

import torch

# family -> [(weight, name, function)]
OPS: dict = {}
FAMILY_WEIGHTS = {"pointwise": 20, "cast": 5, "reduction": 10, "norm": 6, "view": 12,
                  "catpad": 6, "scatter": 11, "gather": 7, "inplace": 14, "random": 3,
                  "library": 3, "misc": 5}
FAMILIES = tuple(FAMILY_WEIGHTS)
MAX_NUMEL = 256     # a drawn value with more elements is drawn again (the interpreter is slow)


@dataclasses.dataclass
class Draft:
    code: str                   # an expression (assign=True) or a whole statement
    op: str
    assign: bool = True
    law: Optional[tuple] = None


def op(family: str, weight: int = 1) -> Callable:
    def register(fn):
        OPS.setdefault(family, []).append((weight, fn.__name__.removeprefix("draw_"), fn))
        return fn
    return register


def _cast_to(v: "Var", like: "Var") -> str:
    """``v`` in ``like``'s dtype. A float becomes an integer only finite and small: NaN, an
    infinity or an out-of-range float has no defined integer value (undefined in C++; eager's
    CUDA kernels give INT64_MIN for NaN, compiled code another integer: GPU seeds 600323 and
    601452, a NaN variance cast into a scatter's int64 source)."""
    if v.dtype.is_floating_point and not like.dtype.is_floating_point \
            and like.dtype != torch.bool:
        return f"{v.name}.nan_to_num(0.0).clamp(-1000, 1000).to({like.name}.dtype)"
    return f"{v.name}.to({like.name}.dtype)"


@dataclasses.dataclass
class Var:
    name: str
    shape: tuple
    dtype: torch.dtype
    of_input: bool              # shares its storage with an input
    # False for a view through as_strided: torch.compile refuses a write through one (it
    # cannot functionalize it), so nothing writes it
    writable: bool = True

    @property
    def rank(self) -> int:
        return len(self.shape)

    @property
    def numel(self) -> int:
        n = 1
        for s in self.shape:
            n *= s
        return n

    @property
    def floating(self) -> bool:
        return self.dtype.is_floating_point

    @property
    def integer(self) -> bool:
        return not self.dtype.is_floating_point and self.dtype != torch.bool

    @property
    def boolean(self) -> bool:
        return self.dtype == torch.bool


def broadcasts(a: tuple, b: tuple) -> Optional[tuple]:
    """The broadcast shape of a and b, or None."""
    out = []
    for i in range(1, max(len(a), len(b)) + 1):
        x = a[-i] if i <= len(a) else 1
        y = b[-i] if i <= len(b) else 1
        if x != y and 1 not in (x, y):
            return None
        out.append(y if x == 1 else x)
    return tuple(reversed(out))


def overlaps(t: torch.Tensor) -> bool:
    """Whether two elements of t share memory."""
    if t.numel() < 2:
        return False
    span = t.storage_offset() + 1 + sum((n - 1) * abs(s) for n, s in zip(t.shape, t.stride()))
    where = torch.arange(span).as_strided(t.shape, t.stride(), t.storage_offset())
    return where.unique().numel() != t.numel()


def tup(shape) -> str:
    shape = tuple(shape)
    return f"({shape[0]},)" if len(shape) == 1 else str(shape)


class Ctx:
    def __init__(self, rng: random.Random, ns: dict, variables: list,
                 frozen: frozenset = frozenset()):
        self.rng, self.ns, self.vars = rng, ns, variables
        self.read: list = []    # the variable-based operand texts handed out
        # storages of inputs whose elements share memory: AOTAutograd cannot write such an
        # input back (its copy_ refuses an overlapping destination), so nothing writes them
        self.frozen = frozen

    # --- variables ---------------------------------------------------------------------
    def pick(self, pred: Callable[[Var], bool] = lambda v: True) -> Optional[Var]:
        cands = [v for v in self.vars if pred(v)]
        if not cands:
            return None
        # later values are likelier: programs then chain instead of fanning out of the inputs
        weights = [1 + i for i in range(len(cands))]
        return self.rng.choices(cands, weights)[0]

    def meta(self, expr: str) -> Optional[Var]:
        """Shape and dtype of a side-effect-free expression over the variables."""
        try:
            t = eval(expr, self.ns)  # noqa: S307 - our own generated text
        except Exception:  # noqa: BLE001 - not applicable: the caller draws something else
            return None
        if not isinstance(t, torch.Tensor):
            return None
        return Var(expr, tuple(t.shape), t.dtype, False)

    def writable(self, expr: str) -> bool:
        """Whether an in-place write into the tensor is defined and compiles: not when two of
        its elements share memory (an expanded input, an unfold: eager writes them in some
        order), nor into the storage of an input whose elements do."""
        t = eval(expr, self.ns)  # noqa: S307 - our own generated text
        s = t.untyped_storage()
        if s.nbytes() and s.data_ptr() in self.frozen:
            return False
        return not overlaps(t)

    def dim(self, v: Var, nonempty: bool = False) -> Optional[int]:
        dims = [d for d in range(v.rank) if not nonempty or v.shape[d] > 0]
        if not dims:
            return None
        d = self.rng.choice(dims)
        return d - v.rank if self.rng.random() < 0.3 else d

    def chance(self, p: float) -> bool:
        return self.rng.random() < p

    # --- operands ----------------------------------------------------------------------
    def scalar(self, v: Var, nonzero: bool = False) -> str:
        if v.boolean:
            return self.rng.choice(("True", "False"))
        if v.integer or nonzero:
            return str(self.rng.choice((2, -3, 1, 5, 3)))
        return self.rng.choice(("0.5", "-0.25", "2.0", "-1.5", "3.0", "0.0", "1e-3"))

    def partner(self, x: Var, into: bool = False, pred=lambda v: True) -> str:
        """A second operand for x: a variable of a shape that broadcasts with x's (into: into
        x's shape exactly, for in-place ops), a 0-d variable, or a Python scalar."""
        r = self.rng.random()
        if r < 0.75:
            def fits(v):
                b = broadcasts(v.shape, x.shape)
                if b is None or not pred(v):
                    return False
                n = 1
                for s in b:
                    n *= s
                return (b == x.shape) if into else n <= MAX_NUMEL
            same = [v for v in self.vars if v.shape == x.shape and v.name != x.name and pred(v)]
            if same and r < 0.4:
                return self._read(self.rng.choice(same).name)
            v = self.pick(fits)
            if v is not None:
                return self._read(v.name)
        return self.scalar(x)

    def divisor(self, y: str, x: Var) -> str:
        """y (a literal or a variable's name) as a divisor of x that is never zero when the
        division is an integer one: integer division by zero raises in eager on the CPU and is
        undefined on a GPU."""
        v = next((v for v in self.vars if v.name == y), None)
        if v is None:
            if y in ("0", "0.0", "False") and not x.floating:
                return str(self.rng.choice((2, -3, 5)))
            return y
        if v.floating:
            return y
        return f"({y}.remainder(5) + 1)" if v.integer else f"({y}.long() + 1)"

    def const(self, shape: tuple, like: Var) -> str:
        """A constant tensor of this shape with like's dtype (written so that the float64
        reference run gets float64 constants where like is float64 there)."""
        n = 1
        for s in shape:
            n *= s
        dt = f"dtype={like.name}.dtype, device=DEV"
        view = "" if len(shape) == 1 else f".view{tup(shape) if shape else '(())'}"
        if like.boolean:
            return f"(torch.arange({n}, device=DEV) % 3 == 0){view}"
        if like.integer:
            return f"torch.arange({-(n // 2)}, {n - n // 2}, {dt}){view}"
        if self.chance(0.3):
            return f"torch.full({tup(shape)}, {self.scalar(like)}, {dt})"
        # no grid point at zero: eager's linspace rounds it by a fused multiply-add
        # (linspace(-1, 1, 15)[7] is -4.5e-8 in float32), a comparison with it then hinges on
        # that rounding
        lo, hi = self.rng.choice(((-2.0, -0.25), (0.5, 1.5), (0.25, 3.0)))
        return f"torch.linspace({lo}, {hi}, {n}, {dt}){view}"

    def operand(self, shape: tuple, like: Var) -> str:
        """An operand of exactly this shape and like's dtype: a variable (cast or expanded if
        need be) or a constant."""
        if self.chance(0.6):
            exact = [v for v in self.vars if v.shape == shape]
            if exact:
                v = self.rng.choice(exact)
                return self._read(v.name if v.dtype == like.dtype else _cast_to(v, like))
            wider = [v for v in self.vars if v.shape != shape and broadcasts(v.shape, shape) == shape]
            if wider:
                v = self.rng.choice(wider)
                cast = v.name if v.dtype == like.dtype else _cast_to(v, like)
                return self._read(f"{cast}.expand{tup(shape) if shape else '(())'}")
        return self.const(shape, like)

    def _read(self, expr: str) -> str:
        self.read.append(expr)
        return expr

    def reads_from(self, code: str, written: str) -> bool:
        """Whether an operand handed out and used in code shares memory with the tensor that
        code writes: eager's result then depends on the order it reads and writes elements
        (an index_put_ accumulating a view of its own destination), so it is not drawn."""
        target = eval(written, self.ns)  # noqa: S307 - our own generated text
        ptr = target.untyped_storage().data_ptr() if target.untyped_storage().nbytes() else None
        for expr in self.read:
            if expr in code:
                t = eval(expr, self.ns)  # noqa: S307 - our own generated text
                if ptr is not None and t.untyped_storage().data_ptr() == ptr:
                    return True
        return False

    # --- indices -----------------------------------------------------------------------
    def indices(self, size: int, count: int, unique: bool, negative: bool = True) -> list:
        if size == 0:
            return []
        if unique:
            picks = self.rng.sample(range(size), min(count, size))
        else:
            picks = [self.rng.randrange(size) for _ in range(count)]
        if negative:
            picks = [p - size if self.chance(0.2) else p for p in picks]
        return picks

    @staticmethod
    def index_tensor(values: list, shape: Optional[tuple] = None) -> str:
        """A long tensor of these values, viewed as shape (default: 1-D)."""
        flat = values
        while flat and isinstance(flat[0], list):
            flat = [x for row in flat for x in row]
        dt = "" if flat else "dtype=torch.long, "
        text = f"torch.tensor({values}, {dt}device=DEV)"
        if shape is not None and len(shape) != 1:
            text += f".view{tup(shape) if shape else '(())'}"
        return text
