"""Options of the OpInfo conformance tests.

Which part of the suite runs, and against which backend, comes from an option or an environment
variable (the options exist only when pytest is pointed at tests/conformance; the variables
work from anywhere):

    --conformance=ci|full          SOLDER_CONFORMANCE=ci|full        (default ci)
    --conformance-backend=NAME     SOLDER_CONFORMANCE_BACKEND=NAME   (default solder)
                                   SOLDER_CONFORMANCE_DTYPES=a,b     (default per device)
                                   SOLDER_CONFORMANCE_SAMPLES=N      (default 2 for ci, all for full)
"""
from __future__ import annotations

import os

import torch

if not torch.cuda.is_available():
    # Generated Triton kernels run on the CPU through Triton's interpreter; the variable must be
    # set before triton is imported (torch._dynamo imports it).
    os.environ.setdefault("TRITON_INTERPRET", "1")


def pytest_addoption(parser):
    group = parser.getgroup("solder conformance")
    group.addoption("--conformance", choices=("ci", "full"), default=None,
                    help="OpInfo suite part: ci (fixed subset, default) or full (every op, "
                         "every sample); env SOLDER_CONFORMANCE")
    group.addoption("--conformance-backend", default=None,
                    help="torch.compile backend under test (default solder); "
                         "env SOLDER_CONFORMANCE_BACKEND")
