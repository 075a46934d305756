"""Two conformance runs side by side (Solder's against inductor's, say).

    python -m solder.conformance.side_by_side solder.json inductor.json

Reads the per-op JSON of two ``python -m solder conformance ... --json`` runs (same device and
dtypes) and prints their counts in two columns, then the ops where the first does worse than
the second: failed where the other passed, or a fallback where the other lowered (generated
kernels or a library call). Exit status 1 when there are such ops.
"""
from __future__ import annotations

import argparse
import json
import sys

from ..cli_help import Parser

_RANK = {"lowered": 0, "extern": 0, "fallback": 1}  # a library call is not a fallback


def counts(run: dict) -> dict:
    ops = run["ops"]
    out = {f"ops {k}": v for k, v in run["summary"]["ops"].items()}
    for k in ("lowered", "extern", "fallback", "not-captured"):
        out[k] = sum(1 for r in ops if r["lowering"] == k)
    return out


def worse(first: dict, second: dict) -> list[str]:
    """Lines naming each op where ``first`` fails what ``second`` passes, or falls back where
    ``second`` does not."""
    theirs = {r["op"]: r for r in second["ops"]}
    lines = []
    for ours in first["ops"]:
        other = theirs.get(ours["op"])
        if other is None:
            continue
        if ours["outcome"] == "failed" and other["outcome"] != "failed":
            lines.append(f"{ours['op']}: fails; {second['backend']} {other['outcome']}")
        a, b = _RANK.get(ours["lowering"]), _RANK.get(other["lowering"])
        if a is not None and b is not None and a > b:
            fb = ", ".join(sorted({f["op"] for f in ours.get("fallbacks", [])}))
            lines.append(f"{ours['op']}: fallback ({fb}); {second['backend']} "
                         f"{other['lowering']}")
    return lines


def main(argv=None) -> int:
    p = Parser(prog="python -m solder.conformance.side_by_side",
               description=__doc__,
               formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("first")
    p.add_argument("second")
    args = p.parse_args(argv)
    with open(args.first) as f:
        first = json.load(f)
    with open(args.second) as f:
        second = json.load(f)
    for key in ("device", "dtypes"):
        if first.get(key) != second.get(key):
            print(f"warning: the runs differ in {key}: {first.get(key)} / {second.get(key)}",
                  file=sys.stderr)
    a, b = counts(first), counts(second)
    print(f"| | {first['backend']} | {second['backend']} |\n|---|---|---|")
    for key in a:
        print(f"| {key} | {a[key]} | {b.get(key, '-')} |")
    lines = worse(first, second)
    print(f"\n{first['backend']} worse than {second['backend']} on {len(lines)} ops"
          + (":" if lines else ""))
    for line in lines:
        print(f"  {line}")
    return 1 if lines else 0


if __name__ == "__main__":
    sys.exit(main())
