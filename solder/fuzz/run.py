"""One program checked: eager, the float64 reference, the compiled run, and on an error the
control backend; the outcome as plain data (it travels from a worker process as JSON)."""
from __future__ import annotations

import dataclasses
import re
import sys
import time
import traceback
import warnings
from typing import Optional

import torch

from .compare import verdict
from .execute import (CORRECTED_OPS, NOISE_RUNS, attach_decomposed_strides,
                      attach_meta_strides, jitter_of, run, run_corrected, run_on_cpu)
from .generate import generate, namespace
from .program import Program

# outcome kinds
PASS, WRONG, ERROR, CONTROL_ERROR = "pass", "wrong", "error", "control_error"
CONTROL_WRONG = "control_wrong"     # wrong, and the control backend is wrong the same way
EAGER_REJECTED, TIMEOUT, CRASH = "eager_rejected", "timeout", "crash"
EAGER_CRASH = "eager_crash"         # the worker died while eager ran: eager's own crash
# written to the worker's stderr before a backend (the one under test, or the control) runs
# and before eager runs again: a worker that dies with no backend line since the job began, or
# an eager line after the last one, died in eager (torch 2.11's CPU backward segfaults on fuzz
# seed 450272's draw), not in a backend
BACKEND_MARK = "solder-fuzz: a backend runs now"
EAGER_MARK = "solder-fuzz: eager runs now"


def mark(line: str) -> None:
    print(line, file=sys.stderr, flush=True)


@dataclasses.dataclass
class RunConfig:
    backend: str = "solder"
    device: str = "cpu"
    grad: bool = False
    control: Optional[str] = "aot_eager"   # run on a backend error, to tell whose error it is


@dataclasses.dataclass
class Outcome:
    kind: str
    detail: str = ""                        # the first difference, or the error
    diffs: list = dataclasses.field(default_factory=list)   # [(label, category, why)]
    error: str = ""                         # "Type: first line" of the backend's error
    control: str = ""                       # the control's error or difference, for CONTROL_*
    seconds: float = 0.0
    rejected: int = 0                       # draws eager refused before this program
    program: Optional[dict] = None          # Program.to_json()
    poisoned: bool = False                  # the device is unusable after this program

    def to_json(self) -> dict:
        return dataclasses.asdict(self)

    @staticmethod
    def from_json(d: dict) -> "Outcome":
        d = dict(d)
        d["diffs"] = [tuple(x) for x in d.get("diffs", [])]
        return Outcome(**d)

    def signature(self) -> tuple:
        """What "fails the same way" compares, for the minimizer."""
        if self.kind == WRONG:
            return (WRONG, frozenset((_label_kind(lb), cat) for lb, cat, _ in self.diffs))
        if self.kind == CONTROL_WRONG:
            return (CONTROL_WRONG,)
        if self.kind in (ERROR, CONTROL_ERROR):
            return (self.kind, re.sub(r"\d+", "#", self.error)[:80])
        return (self.kind,)


def _label_kind(label: str) -> str:
    return label.split(" ")[0]


def same_failure(a: Outcome, b: Outcome) -> bool:
    sa, sb = a.signature(), b.signature()
    if sa[0] != sb[0]:
        return False
    if sa[0] == WRONG:
        return bool(sa[1] & sb[1])
    return sa == sb


def check_seed(seed: int, cfg: RunConfig) -> Outcome:
    start = time.monotonic()
    try:
        gen = generate(seed, cfg.grad)
    except RuntimeError as err:
        # a draw whose eager run hit a device-side assert leaves every later draw of this
        # process refused: the worker must go (a run at seed 640000 lost 354 seeds so)
        return Outcome(EAGER_REJECTED, str(err), rejected=50,
                       seconds=time.monotonic() - start,
                       poisoned=cfg.device == "cuda" and not _device_alive())
    out = check_program(gen.program, cfg)
    out.rejected += gen.rejected
    out.seconds = time.monotonic() - start
    return out


def check_program(program: Program, cfg: RunConfig) -> Outcome:
    start = time.monotonic()
    out = _check(program, cfg)
    out.program = program.to_json()
    out.seconds = time.monotonic() - start
    if cfg.device == "cuda" and out.kind != PASS:
        out.poisoned = not _device_alive()
    return out


def _eager_variants(args, cfg: RunConfig, source: str, floor):
    """Eager's runs that tell how far its own values move: the float64 reference, inputs
    jittered, roundings moved, the other device, corrected gradients (None where one fails)."""
    try:
        ref = run(*args, up=True, grad=cfg.grad)
    except Exception:  # noqa: BLE001 - no reference: eager's rounding is not excused
        ref = None
    try:
        jittered = run(*args, grad=cfg.grad, jitter=jitter_of(floor))
    except Exception:  # noqa: BLE001 - then eager's sensitivity excuses nothing
        jittered = None
    try:
        noisy = [run(*args, grad=cfg.grad, noise=k) for k in NOISE_RUNS]
    except Exception:  # noqa: BLE001 - then eager's rounding noise excuses nothing
        noisy = None
    other = run_on_cpu(*args, grad=cfg.grad) if cfg.device == "cuda" else None
    fixed = None
    if any(op in source for op in CORRECTED_OPS):
        try:
            fixed = run_corrected(*args, grad=cfg.grad)
        except Exception:  # noqa: BLE001 - then only eager's values are accepted
            fixed = None
    return ref, jittered, noisy, other, fixed


def _check(program: Program, cfg: RunConfig) -> Outcome:
    source = program.source()
    ns = namespace(source, cfg.device, f"<fuzz program {program.seed}>")
    args = (ns["fn"], ns["make_inputs"], ns["LAWS"], ns["RNG_SEED"])
    floor = ns["PRECISION"]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            eager = run(*args, grad=cfg.grad)
        except Exception as err:  # noqa: BLE001 - eager on this device refuses it
            return Outcome(EAGER_REJECTED, _error_text(err), rejected=1)
        attach_meta_strides(eager, *args[:2], args[3])
        torch._dynamo.reset()
        mark(BACKEND_MARK)
        try:
            comp = run(*args, backend=cfg.backend, grad=cfg.grad)
        except Exception as err:  # noqa: BLE001 - the backend raised where eager ran
            text = _error_text(err)
            tb = traceback.format_exc(limit=-8)
            control = _control_error(args, cfg)
            if control:
                return Outcome(CONTROL_ERROR, tb, error=text, control=control)
            return Outcome(ERROR, tb, error=text)
        finally:
            torch._dynamo.reset()
        # eager's own sensitivity only excuses differences (every run below widens what
        # passes), so it runs only for a program whose compiled values differ from eager's
        diffs = verdict(eager, comp, floor=floor)
        if not diffs:
            return Outcome(PASS)
        mark(EAGER_MARK)
        ref, jittered, noisy, other, fixed = _eager_variants(args, cfg, source, floor)
    diffs = verdict(eager, comp, ref, fixed, floor, jittered, other, noisy)
    if any(category == "stride" for _, category, _ in diffs):
        attach_decomposed_strides(eager, *args[:2], args[3])   # (only when needed: a trace)
        diffs = verdict(eager, comp, ref, fixed, floor, jittered, other, noisy)
    if not diffs:
        return Outcome(PASS)
    label, category, why = diffs[0]
    detail = f"{label}: {why}"
    shared = _control_wrong(args, cfg, diffs, eager, ref, fixed, floor, jittered, other,
                            noisy)
    if shared:
        return Outcome(CONTROL_WRONG, detail, diffs=[list(d) for d in diffs], control=shared)
    return Outcome(WRONG, detail, diffs=[list(d) for d in diffs])


def _control_wrong(args, cfg: RunConfig, diffs, eager, ref, fixed, floor, jittered,
                   other=None, noisy=None) -> str:
    """The control backend's first difference when it differs from eager in the same value
    the same way (then the fault is in what both share: Dynamo, AOTAutograd), else ""."""
    if not cfg.control or cfg.control == cfg.backend:
        return ""
    torch._dynamo.reset()
    mark(BACKEND_MARK)
    note = ""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            try:
                control = run(*args, backend=cfg.control, grad=cfg.grad)
            except Exception:  # noqa: BLE001
                # a control that raises in its backward (AOTAutograd's version check) can
                # still share a difference of the forward's: compared on the forward alone
                # (the gradients, which the control never computes, then go unjudged)
                if not cfg.grad or all(label.startswith("gradient") for label, _, _ in diffs):
                    return ""
                torch._dynamo.reset()
                control = run(*args, backend=cfg.control, grad=True, backward=False)
                note = " (its backward raises)"
                eager, ref, fixed, jittered, other = (
                    None if obs is None else [o for o in obs if not o.label.startswith("gradient")]
                    for obs in (eager, ref, fixed, jittered, other))
                noisy = None if noisy is None else [
                    [o for o in obs if not o.label.startswith("gradient")] for obs in noisy]
    except Exception:  # noqa: BLE001 - the control does not share the difference
        return ""
    finally:
        torch._dynamo.reset()
    theirs = {(label, category): why for label, category, why in
              verdict(eager, control, ref, fixed, floor, jittered, other, noisy)}
    for label, category, _ in diffs:
        if (label, category) in theirs:
            return f"{cfg.control}{note}: {label}: {theirs[(label, category)]}"
    return ""


def _control_error(args, cfg: RunConfig) -> str:
    """The control backend's error on the same program, or "" when it runs it."""
    if not cfg.control or cfg.control == cfg.backend:
        return ""
    torch._dynamo.reset()
    mark(BACKEND_MARK)
    try:
        run(*args, backend=cfg.control, grad=cfg.grad)
    except Exception as err:  # noqa: BLE001 - what we want to know
        return f"{cfg.control}: {_error_text(err)}"
    return ""


def _error_text(err: BaseException) -> str:
    """"Type: message", the message's first line; for Dynamo's wrapper of a backend's error
    (whose first line only names the backend), the wrapped error's."""
    lines = [line for line in str(err).strip().splitlines() if line.strip()]
    if lines and lines[0].rstrip().endswith("raised:") and len(lines) > 1:
        return lines[1][:300]
    return f"{type(err).__name__}: {lines[0] if lines else ''}"[:300]


def _device_alive() -> bool:
    try:
        torch.cuda.synchronize()
        torch.zeros(1, device="cuda").add_(1).item()
    except Exception:  # noqa: BLE001 - a device-side assert leaves the context unusable
        return False
    return True
