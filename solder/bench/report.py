"""Benchmark results, the metrics derived from them, and their two renderings: text tables and
JSON. Both renderings come from ``RunResult.to_dict`` so they always agree."""
from __future__ import annotations

import json
import statistics
from dataclasses import asdict, dataclass, field
from typing import Optional

from solder.bench.timing import gb_per_s

# Backend statuses: "ok" (checked and timed), "FAILED" (wrong output, not timed),
# "error" (raised), "skipped". Case statuses: "ok", "skipped", "error".
OK, FAILED, ERROR, SKIPPED = "ok", "FAILED", "error", "skipped"


@dataclass
class BackendResult:
    backend: str
    status: str = OK
    detail: str = ""                    # why FAILED / error / skipped
    median_ms: Optional[float] = None   # the median of round_ms
    round_ms: list[float] = field(default_factory=list)   # one steady-state median per round
    host_ms: Optional[float] = None     # host time to issue one call (median over the rounds)
    compile_s: Optional[float] = None   # first call, compile included, caches off
    kernels: Optional[int] = None       # distinct generated kernels (solder: its compile's
                                        # reports; inductor: distinct Triton kernels launched)
    launches: Optional[int] = None      # GPU kernel launches per call (CUDA only)
    # solder: launches per call that went through Triton's Python launcher instead of a launch
    # plan (a steady state should have none; launch hooks of a profiler force them)
    slow_launches: Optional[int] = None
    # CUDA only: the most memory one steady-state call allocated above what was allocated
    # before it (weights, inputs and the bench's reference outputs are resident, not counted)
    call_mib: Optional[float] = None
    peak_mib: Optional[float] = None    # CUDA only: the peak during that call, resident included


@dataclass
class CaseResult:
    case: str
    status: str = OK
    detail: str = ""
    min_bytes: Optional[int] = None
    bytes_formula: str = ""
    backends: dict[str, BackendResult] = field(default_factory=dict)

    def time_ms(self, backend: str) -> Optional[float]:
        r = self.backends.get(backend)
        return r.median_ms if r is not None and r.status == OK else None

    def metrics(self, backend: str, ceiling_gbs: Optional[float]) -> dict:
        """Speedup over eager, time relative to inductor, achieved GB/s and its share of the
        copy ceiling, for one backend (None where not applicable)."""
        ms = self.time_ms(backend)
        gbs = gb_per_s(self.min_bytes, ms)
        return {
            "speedup_vs_eager": self.ratio("eager", backend),
            "time_vs_inductor": self.ratio(backend, "inductor"),
            "gbs": gbs,
            "pct_of_copy": 100 * gbs / ceiling_gbs if gbs and ceiling_gbs else None,
            "spread_pct": spread_pct(self.backends.get(backend)),
        }

    def ratio(self, top: str, bottom: str) -> Optional[float]:
        """top's time over bottom's: with three or more rounds each, the median of the rounds'
        own ratios (the backends of one round run one after another, so a machine whose speed
        drifts between rounds, as a shared CPU's does by 2x, moves both alike); else the ratio
        of their medians."""
        a, b = self.backends.get(top), self.backends.get(bottom)
        if a is None or b is None or a.status != OK or b.status != OK \
                or not a.median_ms or not b.median_ms:
            return None
        if len(a.round_ms) >= 3 and len(a.round_ms) == len(b.round_ms):
            return statistics.median(x / y for x, y in zip(a.round_ms, b.round_ms))
        return a.median_ms / b.median_ms


def spread_pct(r: Optional[BackendResult]) -> Optional[float]:
    """How far apart a backend's rounds were: (slowest - fastest) / median, in percent; None
    with fewer than two rounds. A difference between backends smaller than this is noise."""
    if r is None or r.status != OK or len(r.round_ms) < 2 or not r.median_ms:
        return None
    return 100 * (max(r.round_ms) - min(r.round_ms)) / r.median_ms


@dataclass
class RunResult:
    meta: dict                          # device, versions, quick, timing settings
    copy_ceiling: Optional[dict]        # {"bytes", "ms", "gbs"} or None
    cases: list[CaseResult] = field(default_factory=list)
    backends: list[str] = field(default_factory=list)

    @property
    def ceiling_gbs(self) -> Optional[float]:
        return (self.copy_ceiling or {}).get("gbs")

    def to_dict(self) -> dict:
        cases = []
        for c in self.cases:
            d = asdict(c)
            for name, r in d["backends"].items():
                r.update(c.metrics(name, self.ceiling_gbs))
            cases.append(d)
        return {"meta": self.meta, "copy_ceiling": self.copy_ceiling,
                "backends": self.backends, "cases": cases}

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), indent=2)

    def any_wrong(self) -> bool:
        return any(r.status in (FAILED, ERROR) for c in self.cases for r in c.backends.values()) \
            or any(c.status == ERROR for c in self.cases)


# ---- text -------------------------------------------------------------------------------------

def _num(x, fmt: str) -> str:
    return "-" if x is None else format(x, fmt)


def _bytes(n: int) -> str:
    for unit, size in (("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if n >= size:
            return f"{n / size:.2f} {unit}"
    return f"{n} B"


def format_table(rows: list[list[str]], left: int = 1) -> str:
    """Aligns rows of cells into columns: the first ``left`` columns flush left, others right."""
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    lines = []
    for row in rows:
        cells = [c.ljust(w) if i < left else c.rjust(w)
                 for i, (c, w) in enumerate(zip(row, widths))]
        lines.append("  ".join(cells).rstrip())
    lines.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(lines)


def summary_table(run: RunResult) -> str:
    """One row per case: median ms per backend, speedup of each compiler over eager, and
    solder's time relative to inductor's (below 1: solder is faster)."""
    compilers = [b for b in run.backends if b != "eager"]
    with_eager = "eager" in run.backends
    both = "solder" in run.backends and "inductor" in run.backends
    header = ["case"] + [f"{b} ms" for b in run.backends]
    header += [f"{b} x" for b in compilers] if with_eager else []
    header += ["solder/inductor"] if both else []
    rows = [header]
    for c in run.cases:
        if c.status != OK:
            rows.append([c.case, c.status] + [""] * (len(header) - 2))
            continue
        row = [c.case]
        for b in run.backends:
            r = c.backends.get(b)
            row.append(_num(r.median_ms, ".3f") if r and r.status == OK
                       else (r.status if r else "-"))
        if with_eager:
            row += [_num(c.metrics(b, None)["speedup_vs_eager"], ".2f") for b in compilers]
        if both:
            row.append(_num(c.metrics("solder", None)["time_vs_inductor"], ".2f"))
        rows.append(row)
    return format_table(rows)


def detail_table(run: RunResult) -> str:
    """One row per case and backend: everything measured."""
    rows = [["case", "backend", "status", "median ms", "spread %", "host ms", "x eager",
             "compile s", "kernels", "launches", "call MiB", "GB/s", "% copy"]]
    for c in run.cases:
        for i, (name, r) in enumerate(c.backends.items()):
            m = c.metrics(name, run.ceiling_gbs)
            rows.append([c.case if i == 0 else "", name, r.status, _num(r.median_ms, ".3f"),
                         _num(m["spread_pct"], ".0f"), _num(r.host_ms, ".3f"),
                         _num(m["speedup_vs_eager"], ".2f"),
                         _num(r.compile_s, ".2f"),
                         _num(r.kernels, "d"), _num(r.launches, "d"),
                         _num(r.call_mib, ".0f"), _num(m["gbs"], ".0f"),
                         _num(m["pct_of_copy"], ".0f")])
    return format_table(rows, left=3)


def notes(run: RunResult) -> list[str]:
    """Why cases were skipped and backends failed, one line each."""
    out = []
    for c in run.cases:
        if c.status != OK:
            out.append(f"{c.case}: {c.status}: {c.detail}")
        for name, r in c.backends.items():
            if r.status != OK:
                out.append(f"{c.case}/{name}: {r.status}: {r.detail}")
    return out


def format_report(run: RunResult) -> str:
    meta = run.meta
    sizes = "toy sizes (--quick: a smoke test, not a measurement)" if meta.get("quick") \
        else "CPU sizes (--device cpu)" if meta.get("device") == "cpu" else "full sizes"
    head = [f"device: {meta.get('device', '?')}  torch {meta.get('torch', '?')}  "
            f"triton {meta.get('triton', '?')}  {sizes}"]
    if run.ceiling_gbs:
        head.append(f"copy ceiling: {run.ceiling_gbs:.0f} GB/s "
                    f"({run.copy_ceiling['bytes'] / 2**30:.2f} GiB read+written "
                    f"in {run.copy_ceiling['ms']:.3f} ms)")
    parts = ["\n".join(head), summary_table(run), detail_table(run)]
    if run.cases and any(c.min_bytes for c in run.cases):
        parts.append("GB/s = minimal bytes / median time (memory-bound cases):\n" + "\n".join(
            f"  {c.case}: {c.bytes_formula} = {_bytes(c.min_bytes)}"
            for c in run.cases if c.min_bytes))
    lines = notes(run)
    if lines:
        parts.append("notes:\n" + "\n".join("  " + line for line in lines))
    return "\n\n".join(parts)
