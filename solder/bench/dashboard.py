"""``python -m solder.bench.dashboard RUN.json ... [-o docs/dashboard.md]``: the model dashboard
from one or more ``python -m solder bench --suite dashboard --json RUN.json`` runs (parts of
the suite, each fitting a GPU session), as one markdown table.

Per family and mode, per compiler: the pass rate (ran and matched eager), the geometric mean
speedup over eager and over inductor (of the models both passed), the mean cold-compile
seconds, and the geometric mean memory compression (eager's peak over the compiler's, one
call, resident weights and inputs included; above 1: less memory than eager). Then one row
per model and compiler. A case run twice (in two parts) keeps its later run."""
from __future__ import annotations

import json
import math
import sys
from typing import Optional

from ..cli_help import Parser


def load(paths: list[str]) -> tuple[dict, list]:
    """(the first run's meta, [(family, model, mode, case dict)]) over the runs, later ones
    replacing earlier runs of the same case."""
    meta, by_name = {}, {}
    for path in paths:
        with open(path) as f:
            run = json.load(f)
        meta = meta or run.get("meta", {})
        for case in run.get("cases", []):
            parts = case["case"].split(".")
            if len(parts) == 3:
                by_name[case["case"]] = (*parts, case)
    return meta, list(by_name.values())


def _geomean(xs: list) -> Optional[float]:
    xs = [x for x in xs if x and x > 0]
    return math.exp(sum(math.log(x) for x in xs) / len(xs)) if xs else None


def _ok(case: dict, backend: str) -> Optional[dict]:
    r = case.get("backends", {}).get(backend)
    return r if r and r.get("status") == "ok" and r.get("median_ms") else None


def summary_rows(rows: list, compilers: list) -> list[list]:
    out = [["family", "mode", "compiler", "models", "pass rate", "speedup vs eager",
            "vs inductor", "compile s", "memory compression"]]
    groups: dict = {}
    for family, model, mode, case in rows:
        groups.setdefault((family, mode), []).append(case)
    for (family, mode), cases in sorted(groups.items()):
        for c in compilers:
            tried = [k for k in cases if c in k.get("backends", {})
                     and k["backends"][c].get("status") != "skipped"]
            passed = [k for k in tried if _ok(k, c)]
            speed = [_ok(k, "eager")["median_ms"] / _ok(k, c)["median_ms"]
                     for k in passed if _ok(k, "eager")]
            vs_ind = [_ok(k, c)["median_ms"] / _ok(k, "inductor")["median_ms"]
                      for k in passed if c != "inductor" and _ok(k, "inductor")]
            compile_s = [_ok(k, c)["compile_s"] for k in passed if _ok(k, c).get("compile_s")]
            memory = [_ok(k, "eager")["peak_mib"] / _ok(k, c)["peak_mib"] for k in passed
                      if _ok(k, "eager") and _ok(k, "eager").get("peak_mib")
                      and _ok(k, c).get("peak_mib")]
            out.append([family, mode, c, str(len(tried)),
                        f"{len(passed)}/{len(tried)}" if tried else "-",
                        _fmt(_geomean(speed), "x"), _fmt(_geomean(vs_ind), "x"),
                        _fmt(sum(compile_s) / len(compile_s) if compile_s else None, " s"),
                        _fmt(_geomean(memory), "x")])
    return out


def model_rows(rows: list, compilers: list) -> list[list]:
    out = [["model", "mode", "compiler", "status", "ms", "speedup vs eager", "compile s",
            "peak MiB"]]
    for family, model, mode, case in sorted(rows, key=lambda r: (r[0], r[1], r[2])):
        eager = _ok(case, "eager")
        for c in ["eager"] + compilers:
            r = case.get("backends", {}).get(c)
            if r is None:
                continue
            good = _ok(case, c)
            out.append([f"{family}.{model}", mode, c,
                        r.get("status", "?") + (f": {r.get('detail', '')[:80]}"
                                               if r.get("detail") else ""),
                        _fmt(r.get("median_ms"), "", ".2f"),
                        _fmt(eager["median_ms"] / good["median_ms"] if eager and good else None,
                             "x"),
                        _fmt(r.get("compile_s"), "", ".1f"), _fmt(r.get("peak_mib"), "", ".0f")])
        if case.get("status") not in (None, "ok"):
            out.append([f"{family}.{model}", mode, "-", f"{case['status']}: "
                        f"{case.get('detail', '')[:80]}", "", "", "", ""])
    return out


def _fmt(x, unit: str, spec: str = ".2f") -> str:
    return "-" if x is None else f"{x:{spec}}{unit}"


def markdown(rows: list[list]) -> str:
    lines = ["| " + " | ".join(rows[0]) + " |", "|" + "---|" * len(rows[0])]
    lines += ["| " + " | ".join(r) + " |" for r in rows[1:]]
    return "\n".join(lines)


def render(meta: dict, rows: list) -> str:
    compilers = sorted({b for _, _, _, case in rows for b in case.get("backends", {})
                        if b != "eager"})
    head = (f"Device: {meta.get('device', '?')}, torch {meta.get('torch', '?')}, triton "
            f"{meta.get('triton', '?')}, Python {meta.get('python', '?')}"
            + (" (toy sizes: a smoke test, not a measurement)" if meta.get("quick") else ""))
    return "\n\n".join([head, markdown(summary_rows(rows, compilers)),
                        markdown(model_rows(rows, compilers))]) + "\n"


def main(argv=None) -> int:
    p = Parser(prog="python -m solder.bench.dashboard")
    p.add_argument("runs", nargs="+", help="JSON files of `python -m solder bench --suite "
                                            "dashboard --json`")
    p.add_argument("-o", "--output", default=None, help="write the markdown here (else stdout)")
    args = p.parse_args(argv)
    meta, rows = load(args.runs)
    if not rows:
        print("no dashboard cases in these runs (family.model.mode)", file=sys.stderr)
        return 2
    text = render(meta, rows)
    if args.output:
        with open(args.output, "w") as f:
            f.write(text)
    else:
        print(text, end="")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
