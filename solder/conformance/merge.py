"""Shards of one conformance run joined into one table.

    python -m solder.conformance.merge part1.json part2.json --json all.json

Reads the per-op JSON of ``python -m solder conformance --shard I/N ... --json`` runs (same
backend, device, dtypes, samples and gradient setting), checks that no op appears twice, and
prints and writes the counts of the whole as one run would: ops, cases and samples by outcome,
lowered / extern / fallback, the seconds of every part added up and the ops any part did not
run. Exit status 1 when a part has failures or ops not run (as the run itself would), 2 when
the parts do not belong together.
"""
from __future__ import annotations

import argparse
import json
import sys
from collections import Counter

from ..cli_help import Parser

_SAME = ("backend", "device", "dtypes", "samples", "grad")
_OUTCOMES = ("passed", "failed", "expected-failed", "unexpectedly-passed", "n/a")


class MergeError(ValueError):
    pass


def merge(parts: list[dict]) -> dict:
    """One run's JSON from its shards' JSON."""
    if not parts:
        raise MergeError("no parts to merge")
    first = parts[0]
    for p in parts[1:]:
        for key in _SAME:
            if p.get(key) != first.get(key):
                raise MergeError(f"the parts differ in {key}: {first.get(key)!r} and "
                                 f"{p.get(key)!r}")
    seen: dict[str, int] = {}
    rows = []
    for i, p in enumerate(parts):
        for row in p["ops"]:
            if row["op"] in seen:
                raise MergeError(f"op {row['op']} is in part {seen[row['op']] + 1} and part "
                                 f"{i + 1}")
            seen[row["op"]] = i
            rows.append(row)
    rows.sort(key=lambda r: r["op"])
    not_run = sorted({op for p in parts for op in p.get("not_run", [])} - set(seen))
    return {**{k: first.get(k) for k in _SAME}, "torch": first.get("torch"),
            "shard": f"{len(parts)} parts merged", "not_run": not_run,
            "seconds": round(sum(p.get("seconds", 0.0) for p in parts), 1),
            "summary": summary_of(rows), "ops": rows}


def summary_of(rows: list[dict]) -> dict:
    """The counts ``results.summarize`` gives, from the table's rows."""
    samples: Counter = Counter()
    for r in rows:
        for c in r["cases"]:
            for status, n in c["samples"].items():
                if status == "failed" and c["outcome"] == "expected-failed":
                    status = "expected-failed"
                samples[status] += n
    ops = Counter(r["outcome"] for r in rows)
    cases = Counter(c["outcome"] for r in rows for c in r["cases"])
    return {"ops": {k: ops.get(k, 0) for k in _OUTCOMES},
            "cases": {k: cases.get(k, 0) for k in _OUTCOMES},
            "samples": {k: samples.get(k, 0) for k in _OUTCOMES},
            "lowering": dict(Counter(r["lowering"] for r in rows))}


def main(argv=None) -> int:
    p = Parser(prog="python -m solder.conformance.merge", description=__doc__,
               formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("parts", nargs="+")
    p.add_argument("--json", metavar="OUT", help="write the merged table here")
    args = p.parse_args(argv)
    parts = []
    for path in args.parts:
        with open(path) as f:
            parts.append(json.load(f))
    try:
        run = merge(parts)
    except MergeError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    s = run["summary"]
    print(f"{len(run['ops'])} ops from {len(parts)} parts ({run['backend']}, {run['device']}, "
          f"{','.join(run['dtypes'])}), {run['seconds']:.0f} s of runs")
    for what in ("ops", "cases", "samples"):
        print(f"  {what + ':':<9} " + "  ".join(f"{k} {v}" for k, v in s[what].items()))
    print(f"  {'lowering:':<9} " + "  ".join(f"{k} {v}" for k, v in sorted(s["lowering"].items())))
    if run["not_run"]:
        print(f"  not run: {len(run['not_run'])} ops: {', '.join(run['not_run'])}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(run, f, indent=1)
        print(f"merged table written to {args.json}")
    bad = s["cases"]["failed"] + s["cases"]["unexpectedly-passed"] + len(run["not_run"])
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
