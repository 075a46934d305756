"""OpInfo conformance: one test per (op, dtype, kind), compiled against eager.

By default the CI subset runs (solder.conformance.selection.CI_OPS, 2 samples each); with
``SOLDER_CONFORMANCE=full`` (or ``--conformance=full`` when pytest is given this folder) every
OpInfo and every sample runs. Cases listed in the backend's expected-failure file are strict
xfails: a listed case that passes fails the test run, so the list only shrinks.
"""
from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Optional

import pytest
import torch

from solder.conformance import expected as expected_failures
from solder.conformance.results import FAILED, NOT_APPLICABLE
from solder.conformance.runner import RunConfig, run_case
from solder.conformance.selection import (CI_OPS, DEFAULT_DTYPES, all_opinfos, dtypes_for,
                                          full_name, kinds_for, select_ops)


@dataclass(frozen=True, eq=False)
class Setup:
    part: str                   # ci | full
    config: RunConfig
    xfails: dict                # (op, dtype, kind) -> reason, from the expected-failure list
    unavailable: Optional[str]  # why the backend cannot run here, if it cannot


def _setup(config) -> Setup:
    part = (config.getoption("--conformance", default=None)
            or os.environ.get("SOLDER_CONFORMANCE", "ci"))
    backend = (config.getoption("--conformance-backend", default=None)
               or os.environ.get("SOLDER_CONFORMANCE_BACKEND", "solder"))
    device = "cuda" if torch.cuda.is_available() else "cpu"
    dtypes = os.environ.get("SOLDER_CONFORMANCE_DTYPES")
    samples = os.environ.get("SOLDER_CONFORMANCE_SAMPLES")
    xfails = expected_failures.load(expected_failures.path_for(backend, device))
    run_config = RunConfig(
        backend=backend, device=device,
        dtypes=tuple(dtypes.split(",")) if dtypes else DEFAULT_DTYPES[device],
        samples=int(samples) if samples else (2 if part == "ci" else None),
        expected_failures=frozenset(xfails), explain=False)
    return Setup(part, run_config, xfails, _backend_unavailable(backend))


def _backend_unavailable(backend: str) -> Optional[str]:
    if backend != "solder":
        return None
    try:
        import solder
        solder.explain  # noqa: B018 - the public API the suite reports with
        from torch._dynamo.backends.registry import lookup_backend
        lookup_backend("solder")
    except Exception as err:  # noqa: BLE001 - any failure means "not ready yet"
        return (f"the solder backend is not available yet ({type(err).__name__}: {err}); "
                f"run with SOLDER_CONFORMANCE_BACKEND=aot_eager or inductor meanwhile")
    return None


def pytest_generate_tests(metafunc):
    if "case" not in metafunc.fixturenames:
        return
    setup = _setup(metafunc.config)
    names = CI_OPS if setup.part == "ci" else None
    xfails = setup.xfails
    params = []
    for op in select_ops(names):
        for dtype in dtypes_for(op, setup.config.device, setup.config.dtypes):
            for kind in kinds_for(op, setup.config.device, dtype, setup.config.grad):
                key = (full_name(op), dtype, kind)
                marks = []
                if key in xfails:
                    marks.append(pytest.mark.xfail(strict=True, reason=xfails[key]))
                params.append(pytest.param(key, marks=marks, id="-".join(key)))
    metafunc.parametrize("case", params)
    metafunc.parametrize("setup", [setup], ids=[setup.config.backend])


def test_opinfo(case, setup: Setup):
    if setup.unavailable:
        pytest.skip(setup.unavailable)
    op_name, dtype, kind = case
    result = run_case(all_opinfos()[op_name], dtype, kind, setup.config)
    if result.status == FAILED:
        failures = [result.error] if result.error else [
            s.message for s in result.samples if s.status == FAILED]
        pytest.fail(f"{op_name} {dtype} {kind} with backend {setup.config.backend}: "
                    f"{len(failures)} failing sample(s):\n" + "\n".join(failures),
                    pytrace=False)
    if result.status == NOT_APPLICABLE:
        pytest.skip("eager raised on every sample: " + result.samples[0].message
                    if result.samples else "the op has no samples for this dtype")
