"""A worker process for ``--jobs``: op names in on stdin, one JSON OpResult per line out.

``python -m solder.conformance.worker '<RunConfig as JSON>'``. Anything the ops themselves print
goes to stderr, so stdout carries only results.
"""
from __future__ import annotations

import json
import logging
import os
import sys


def main(argv: list[str]) -> int:
    config_fields = json.loads(argv[0])
    config_fields["dtypes"] = tuple(config_fields["dtypes"])
    config_fields["expected_failures"] = frozenset(
        tuple(key) for key in config_fields["expected_failures"])
    results = os.fdopen(os.dup(sys.stdout.fileno()), "w", buffering=1)
    os.dup2(sys.stderr.fileno(), sys.stdout.fileno())

    logging.getLogger("torch").setLevel(logging.CRITICAL)  # graph breaks are counted
    from .results import to_json
    from .runner import RunConfig, broken_result, run_op
    from .selection import all_opinfos

    config = RunConfig(**config_fields)
    ops = all_opinfos()
    for line in sys.stdin:
        name = line.strip()
        if not name:
            continue
        try:
            result = run_op(ops[name], config)
        except Exception as err:  # noqa: BLE001 - reported as the op's failure
            result = broken_result(ops[name], config,
                                   f"the suite itself raised {type(err).__name__}: {err}")
        results.write(json.dumps(to_json(result)) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
