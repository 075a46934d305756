"""The OpInfo conformance suite: PyTorch's op_db, sample by sample, compiled against eager.

Entry points: ``python -m solder conformance --help`` (cli.py), ``tests/conformance`` (pytest),
and from Python::

    from solder.conformance import RunConfig, run_suite, select_ops
    results = run_suite(select_ops(["add", "sum"]), RunConfig(backend="aot_eager", samples=2))

See README.md next to this file for what is checked, the expected-failure lists and timings.
"""
from .runner import RunConfig, run_case, run_op, run_suite
from .selection import CI_OPS, KINDS, all_opinfos, select_ops

__all__ = ["RunConfig", "run_case", "run_op", "run_suite", "CI_OPS", "KINDS", "all_opinfos",
           "select_ops"]
