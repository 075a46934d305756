"""Runs OpInfo samples eagerly and through a ``torch.compile`` backend and compares the two.

For each (op, dtype, kind) and each sample: eager runs on one copy of the sample, the compiled
function (``torch.compile(fn, backend=..., fullgraph=False, dynamic=False)``, Dynamo reset
first) on another; then outputs, the inputs after the call (in-place variants) and, for the
gradient kind, the gradients of every differentiable input are compared (see compare.py).

Before comparing, eager runs twice more to pick how strictly to compare: if two runs with one
seed disagree the output is uninitialized memory (shape/dtype only); if runs with two seeds
disagree, or the op is in RANDOM_OPS, the op is random (shape/dtype/distribution).
A sample on which eager itself raises is "n/a" (recorded with the error, never dropped).
"""
from __future__ import annotations

import contextlib
import functools
import signal
import threading
import time
import traceback
import types
import warnings
from dataclasses import dataclass
from typing import Callable, Optional, Union

import torch

from . import compare as cmp
from . import explain as explain_mod
from . import samples as smp
from .results import FAILED, NOT_APPLICABLE, PASSED, CaseResult, OpResult, SampleResult
from .selection import DTYPES, RANDOM_OPS, dtypes_for, full_name, kinds_for

SEED = 0  # torch.manual_seed before every eager and compiled call


@dataclass(frozen=True)
class RunConfig:
    backend: Union[str, Callable] = "solder"
    device: str = "cpu"
    dtypes: tuple[str, ...] = ("float32",)
    samples: Optional[int] = None   # first N samples per (op, dtype, kind); None: all
    # (op, dtype, kind) cases listed as expected failures. Past the sample limit such a case
    # keeps running until a sample fails, so that passing the first N samples is never taken
    # for "fixed" (that would make strict xfails flaky under --samples / in CI).
    expected_failures: frozenset = frozenset()
    grad: bool = True               # run the gradient kind
    timeout_s: float = 120.0        # per sample, compile included; 0: no limit
    explain: bool = True            # classify ops with solder.explain (backend "solder" only)

    @property
    def backend_name(self) -> str:
        b = self.backend
        return b if isinstance(b, str) else getattr(b, "__name__", type(b).__name__)


class NotApplicable(Exception):
    """The sample cannot be checked in this kind (e.g. no output depends on a grad input)."""


class SampleTimeout(BaseException):
    """Raised by the time limit; a BaseException so no `except Exception` inside swallows it."""


def run_suite(ops: list, config: RunConfig, expected: Optional[dict] = None,
              progress: Optional[Callable[[OpResult], None]] = None) -> list[OpResult]:
    results = []
    for op in sorted(ops, key=full_name):
        try:
            result = run_op(op, config)
        except Exception as err:  # noqa: BLE001 - a harness bug must not end the whole run
            result = broken_result(op, config, f"the suite itself raised {_error_text(err)}")
        for case in result.cases:
            case.apply_expected(expected or {})
        if progress:
            progress(result)
        results.append(result)
    return results


def run_op(op, config: RunConfig) -> OpResult:
    """Every applicable (dtype, kind) case of one op, then its lowering from solder.explain."""
    result = OpResult(op=full_name(op))
    if not dtypes_for(op, config.device, config.dtypes):
        result.lowering = "n/a"  # no requested dtype is supported on this device
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for dtype in dtypes_for(op, config.device, config.dtypes):
            for kind in kinds_for(op, config.device, dtype, config.grad):
                result.cases.append(run_case(op, dtype, kind, config))
        if config.explain and config.backend in CLASSIFIED_BACKENDS:
            _add_lowering(op, result, config)
    torch._dynamo.reset()
    return result


def broken_result(op, config: RunConfig, message: str) -> OpResult:
    """An op whose run ended abnormally: each of its cases failed with ``message``."""
    result = OpResult(op=full_name(op), lowering="error" if config.backend in CLASSIFIED_BACKENDS
                      else "unknown")
    for dtype in dtypes_for(op, config.device, config.dtypes):
        for kind in kinds_for(op, config.device, dtype, config.grad):
            result.cases.append(CaseResult(op=result.op, dtype=dtype, kind=kind, error=message))
    return result


def run_case(op, dtype: str, kind: str, config: RunConfig) -> CaseResult:
    case = CaseResult(op=full_name(op), dtype=dtype, kind=kind)
    start = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        listed = case.key in config.expected_failures
        try:
            samples = smp.generate(op, config.device, DTYPES[dtype], kind == "gradient",
                                   None if listed else config.samples)
        except Exception as err:  # noqa: BLE001 - reported, not hidden
            case.error = f"sample generation failed: {_error_text(err)}"
            samples = []
        fn = _variant(op, kind)
        for index, sample in enumerate(samples):
            if listed and config.samples is not None and index >= config.samples \
                    and case.status == FAILED:
                break  # the expected failure is confirmed; the limit applies again
            case.samples.append(_run_sample(op, kind, fn, sample, index, config))
            torch._dynamo.reset()
    case.seconds = time.perf_counter() - start
    return case


def _variant(op, kind: str) -> Callable:
    """A plain Python function calling the variant under test (Dynamo traces into it). It
    takes the op's name: OpInfo's gradcheck wrappers for masked ops look at ``__name__``."""
    variant = _without_reseeding(op.inplace_variant if kind == "inplace" else op.op)

    def call_op(*args, **kwargs):
        return variant(*args, **kwargs)
    call_op.__name__ = getattr(variant, "__name__", "call_op")
    return call_op


def _call_as_is(fn: Callable, *args, **kwargs):
    return fn(*args, **kwargs)


def _without_reseeding(fn: Callable) -> Callable:
    """OpInfo wraps its random ops in ``wrapper_set_seed`` (it reseeds inside a saved RNG
    state), which Dynamo does not trace: the op would run eagerly and nothing be tested. Give
    such functions a copy of their module's globals where that helper just calls the op (the
    suite seeds every call itself)."""
    if getattr(fn, "__name__", "") == "wrapper_set_seed":
        return _call_as_is
    namespace = getattr(fn, "__globals__", None)
    if not isinstance(fn, types.FunctionType) or "wrapper_set_seed" not in namespace:
        return fn
    clone = types.FunctionType(fn.__code__, {**namespace, "wrapper_set_seed": _call_as_is},
                               fn.__name__, fn.__defaults__, fn.__closure__)
    clone.__kwdefaults__ = fn.__kwdefaults__
    return clone


def _run_sample(op, kind: str, fn: Callable, sample, index: int,
                config: RunConfig) -> SampleResult:
    start = time.perf_counter()
    name = full_name(op)
    run = _outputs
    if kind == "gradient":
        run = functools.partial(_gradients, wrapper=_without_reseeding(op.gradcheck_wrapper))
    where = f"(sample {index}: {smp.describe(sample)})"
    result = SampleResult(index=index, status=PASSED)
    if kind == "inplace" and sample.broadcasts_input:
        # OpInfo's own convention: such a sample's result is larger than its input, so the
        # in-place variant must reject it (eager does not always: addbmm_ resizes instead).
        result.status = NOT_APPLICABLE
        result.message = f"the input would be broadcast, which an in-place op cannot do {where}"
        return result
    try:
        expected = run(fn, sample, SEED)
    except Exception as err:  # noqa: BLE001 - an invalid sample, recorded as n/a
        result.status = NOT_APPLICABLE
        result.message = f"eager raised {_error_text(err)} {where}"
        return result
    result.check = _check_strength(op, name, kind, run, fn, sample, expected)
    seeds = _seeds_to_pool(expected) if result.check == "distribution" else 1
    backend = _CountingBackend(config.backend)
    compiled = torch.compile(fn, backend=backend, fullgraph=False, dynamic=False)
    try:
        with time_limit(config.timeout_s):
            actual = [run(compiled, sample, SEED + i) for i in range(seeds)]
        if result.check == "distribution":
            expected_runs = [expected] + [run(fn, sample, SEED + i) for i in range(1, seeds)]
            message = cmp.compare_pooled(actual, expected_runs, op_name=name, kind=kind)
        else:
            message = cmp.compare(actual[0], expected, how=result.check, op_name=name,
                                  kind=kind, where="")
            if message and kind == "forward" and cmp.tied_indices_agree(actual[0], expected,
                                                                       name, sample):
                message = None   # another index of a tied value (compare.TIE_AMBIGUOUS_INDICES)
            if message and kind == "gradient" and cmp.tied_gradients_agree(actual[0], expected,
                                                                          name, sample):
                message = None   # routed to other tied elements, the same total per tie group
            if message and _no_less_accurate(run, fn, sample, actual[0], expected, name, kind):
                message = None   # closer to the exact result than eager (compare.py)
    except SampleTimeout as err:
        message = f"timed out: {err}"
    except Exception as err:  # noqa: BLE001 - every compiler error is a recorded failure
        message = f"compiled raised {_error_text(err)}"
    if message:
        result.status, result.message = FAILED, f"{message} {where}"
    result.graphs = backend.graphs
    result.seconds = time.perf_counter() - start
    return result


def _no_less_accurate(run, fn, sample, actual, expected, name: str, kind: str) -> bool:
    """For float16/bfloat16 results (float32 for compare.FLOAT32_SECOND_LOOK) that differ from
    eager's: whether they are at least as close as eager's to a float64 run of the same op
    (compare.no_less_accurate)."""
    low = {t.dtype for t in smp.tensors_in(expected)} & cmp.second_look_dtypes(name)
    if len(low) != 1:
        return False
    (draw_as,) = low
    try:
        # gradients: the cotangents of the low-precision run, upcast
        extra = {"draw_as": draw_as} if kind == "gradient" else {}
        reference = run(fn, smp.upcast(sample, which=tuple(cmp.second_look_dtypes(name))),
                        SEED, **extra)
    except Exception:  # noqa: BLE001 - no float64 kernel for the op: the failure stands
        return False
    return cmp.no_less_accurate(actual, expected, reference, op_name=name, kind=kind)


def _outputs(fn: Callable, sample, seed: int) -> dict:
    """Call fn on a fresh copy of the sample: its output and its arguments afterwards."""
    args, kwargs = smp.copy_args(sample)
    torch.manual_seed(seed)
    output = fn(*args, **kwargs)
    return {"output": output, "args after the call": args, "kwargs after the call": kwargs}


def _gradients(fn: Callable, sample, seed: int, wrapper: Callable,
               draw_as: Optional[torch.dtype] = None) -> dict:
    """Gradients of every input that requires grad, for fixed random output cotangents.

    ``wrapper`` is the OpInfo's gradcheck wrapper (it makes inputs Hermitian, zeroes masked-out
    outputs, ...); it runs eagerly around ``fn``, so only the op itself is compiled."""
    args, kwargs = smp.copy_args(sample)
    inputs = [t for t in smp.tensors_in((args, kwargs)) if t.requires_grad]
    torch.manual_seed(seed)
    output = sample.output_process_fn_grad(wrapper(fn, *args, **kwargs))
    outputs = [t for t in smp.tensors_in(output) if t.requires_grad]
    if not inputs or not outputs:
        raise NotApplicable("no output requires grad" if inputs else "no input requires grad")
    # draw_as: a float64 reference run gets the cotangents of the low-precision run, upcast
    cotangents = [smp.grad_output_like(t if draw_as is None else t.detach().to(draw_as),
                                       SEED + i).to(t.dtype) for i, t in enumerate(outputs)]
    grads = torch.autograd.grad(outputs, inputs, cotangents, allow_unused=True)
    grads = [torch.zeros_like(x) if g is None else g for g, x in zip(grads, inputs)]
    return {"outputs requiring grad": len(outputs), "gradient": grads}


# the ops OpInfo marks has_nondeterministic_output (torch 2.13), for releases without the flag
UNINITIALIZED_OUTPUT_OPS = frozenset({
    "empty", "empty_like", "empty_permuted", "empty_strided", "new_empty", "new_empty_strided",
    "torch.ops.aten._efficient_attention_forward", "torch.ops.aten._flash_attention_forward"})


def _uninitialized_output(op, name: str) -> bool:
    flag = getattr(op, "has_nondeterministic_output", None)
    return flag if flag is not None else name in UNINITIALIZED_OUTPUT_OPS


def _check_strength(op, name: str, kind: str, run: Callable, fn: Callable, sample,
                    expected: dict) -> str:
    """values, distribution (random ops) or metadata (uninitialized outputs).

    A sample of a listed random op is still compared by value when 16 eager runs with
    different seeds agree (dropout with p=0, rrelu in eval mode); other ops get one try."""
    if _uninitialized_output(op, name):
        return "metadata"
    tries = 16 if name in RANDOM_OPS else 1
    try:
        if _differs(run(fn, sample, SEED), expected, name, kind):
            return "metadata"
        for i in range(1, tries + 1):
            if _differs(run(fn, sample, SEED + i), expected, name, kind):
                return "distribution"
    except Exception:  # noqa: BLE001 - a flaky eager rerun: compare only what surely holds
        return "metadata"
    return "values"


def _differs(a, b, name: str, kind: str) -> bool:
    return cmp.compare(a, b, how="values", op_name=name, kind=kind, where="") is not None


def _seeds_to_pool(expected: dict, values_wanted: int = 4000, most: int = 32) -> int:
    """How many seeds to pool a random op's values over, so small outputs still give the
    distribution test something to work with."""
    numel = sum(t.numel() for t in smp.tensors_in(expected))
    return max(1, min(most, -(-values_wanted // max(numel, 1))))


class _CountingBackend:
    """Wraps a backend to count the graphs Dynamo hands it (0: the op ran eagerly)."""

    def __init__(self, backend: Union[str, Callable]):
        if isinstance(backend, str):
            from torch._dynamo.backends.registry import lookup_backend
            backend = lookup_backend(backend)
        self.inner = backend
        self.graphs = 0

    def __call__(self, gm, example_inputs):
        self.graphs += 1
        return self.inner(gm, example_inputs)

    def __repr__(self) -> str:
        return getattr(self.inner, "__name__", repr(self.inner))


@contextlib.contextmanager
def time_limit(seconds: float):
    """Raise SampleTimeout after ``seconds`` (main thread on Unix only; elsewhere no limit)."""
    usable = (seconds and hasattr(signal, "setitimer")
              and threading.current_thread() is threading.main_thread())
    if not usable:
        yield
        return

    def on_alarm(signum, frame):
        raise SampleTimeout(f"took longer than {seconds:g} s")
    previous = signal.signal(signal.SIGALRM, on_alarm)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


# Backends whose ops the table classifies as lowered / extern / fallback: Solder through
# solder.explain, inductor through the wrapper code it generates (inductor_lowering.py).
CLASSIFIED_BACKENDS = ("solder", "inductor")


def _classifier(backend: str) -> tuple[Optional[Callable], str]:
    """``(classify(fn, args, kwargs) -> summary, "")``, or ``(None, why not)``."""
    if backend == "inductor":
        from . import inductor_lowering
        return inductor_lowering.classify, ""
    explain, why_not = explain_mod.explain_function()
    if explain is None:
        return None, why_not
    return functools.partial(explain_mod.classify, explain), ""


def _add_lowering(op, result: OpResult, config: RunConfig) -> None:
    """Classify one sample per case, preferring the gradient kind (its report includes the
    backward graph) and a sample that passed; the first classification that succeeds counts."""
    classify, why_not = _classifier(config.backend)
    if classify is None:
        result.explain_error = why_not
        return
    for case in sorted(result.cases, key=lambda c: c.kind != "gradient"):
        valid = [s for s in case.samples if s.status != NOT_APPLICABLE]
        if case.kind == "inplace" or not valid:
            continue
        index = min(valid, key=lambda s: (s.status != PASSED, s.index)).index
        try:
            samples = smp.generate(op, config.device, DTYPES[case.dtype],
                                   case.kind == "gradient", index + 1)
            args, kwargs = smp.copy_args(samples[index])
            torch._dynamo.reset()
            with time_limit(config.timeout_s):
                summary = classify(_variant(op, "forward"), args, kwargs)
        except (Exception, SampleTimeout) as err:  # noqa: BLE001 - reported in the table
            result.lowering = "error"
            result.explain_error = result.explain_error or _error_text(err)
            continue
        result.lowering, result.explain_error = summary["lowering"], ""
        result.fallbacks, result.externs = summary["fallbacks"], summary["externs"]
        return


def _error_text(err: BaseException, limit: int = 800) -> str:
    """``Type: message`` on one line; Dynamo's wrapper around a backend error is unwrapped and
    its advice about TORCHDYNAMO_VERBOSE dropped, so the compiler's own message leads."""
    inner = getattr(err, "inner_exception", None)
    if inner is not None and type(err).__name__ == "BackendCompilerFailed":
        err = inner
    message = str(err).split("Set TORCHDYNAMO_VERBOSE=1")[0]
    text = f"{type(err).__name__}: {message}"
    if isinstance(err, (AssertionError, KeyError)) and not str(err):
        text += " at " + traceback.format_exception(err)[-2].strip()
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 3] + "..."
