"""What a run found: per sample, per (op, dtype, kind) case, per op; counts; the JSON table."""
from __future__ import annotations

import dataclasses
from collections import Counter
from dataclasses import dataclass, field
from typing import Optional

PASSED, FAILED, NOT_APPLICABLE = "passed", "failed", "n/a"
XFAILED, XPASSED = "expected-failed", "unexpectedly-passed"
LOWERINGS = ("lowered", "extern", "fallback", "not-captured", "error", "unknown", "n/a")


@dataclass
class SampleResult:
    index: int
    status: str                 # passed | failed | n/a (eager itself raised: not a valid sample)
    check: str = "values"       # values | distribution (random ops) | metadata (empty and alike)
    message: str = ""           # why it failed or is n/a, and which sample it was
    graphs: int = 0             # graphs the backend compiled (0: Dynamo ran it all eagerly)
    seconds: float = 0.0


@dataclass
class CaseResult:
    """One (op, dtype, kind): its samples, and the outcome once the expected failures apply."""
    op: str
    dtype: str
    kind: str
    samples: list[SampleResult] = field(default_factory=list)
    error: str = ""             # set when the samples could not even be generated
    seconds: float = 0.0
    expected_reason: Optional[str] = None   # the expected-failure entry, if any
    outcome: str = ""           # passed | failed | n/a | expected-failed | unexpectedly-passed

    @property
    def key(self) -> tuple[str, str, str]:
        return (self.op, self.dtype, self.kind)

    @property
    def status(self) -> str:
        """passed, failed or n/a, before the expected-failure list is consulted."""
        if self.error or any(s.status == FAILED for s in self.samples):
            return FAILED
        if all(s.status == NOT_APPLICABLE for s in self.samples):
            return NOT_APPLICABLE
        return PASSED

    def apply_expected(self, expected: dict) -> None:
        self.expected_reason = expected.get(self.key)
        listed = self.expected_reason is not None
        if self.status == FAILED:
            self.outcome = XFAILED if listed else FAILED
        else:
            self.outcome = XPASSED if listed else self.status

    def first_failure(self) -> str:
        if self.error:
            return self.error
        for s in self.samples:
            if s.status == FAILED:
                return s.message
        return ""

    def sample_counts(self) -> Counter:
        return Counter(s.status for s in self.samples)


@dataclass
class OpResult:
    op: str
    cases: list[CaseResult] = field(default_factory=list)
    lowering: str = "unknown"   # solder.explain / inductor's wrappers; "unknown" for others
    fallbacks: list[dict] = field(default_factory=list)   # [{"op": ..., "reason": ...}]
    externs: list[str] = field(default_factory=list)
    explain_error: str = ""

    @property
    def outcome(self) -> str:
        outcomes = {c.outcome for c in self.cases}
        for worst in (FAILED, XPASSED, XFAILED, PASSED):
            if worst in outcomes:
                return worst
        return NOT_APPLICABLE


def to_json(result: OpResult) -> dict:
    return dataclasses.asdict(result)


def from_json(data: dict) -> OpResult:
    cases = []
    for c in data.get("cases", []):
        samples = [SampleResult(**s) for s in c.get("samples", [])]
        cases.append(CaseResult(**{**c, "samples": samples}))
    return OpResult(**{**data, "cases": cases})


def summarize(results: list[OpResult]) -> dict:
    """The counts the command line prints and the JSON table starts with."""
    sample_counts: Counter = Counter()
    for r in results:
        for c in r.cases:
            for s in c.samples:
                status = s.status
                if status == FAILED and c.outcome == XFAILED:
                    status = XFAILED
                sample_counts[status] += 1
    return {
        "ops": _ordered(Counter(r.outcome for r in results)),
        "cases": _ordered(Counter(c.outcome for r in results for c in r.cases)),
        "samples": _ordered(sample_counts),
        "lowering": {k: v for k, v in Counter(r.lowering for r in results).items()},
    }


def _ordered(counts: Counter) -> dict:
    order = (PASSED, FAILED, XFAILED, XPASSED, NOT_APPLICABLE)
    return {k: counts.get(k, 0) for k in order}


def table(results: list[OpResult]) -> list[dict]:
    """Per-op rows for the JSON output (sample-level detail only for failures)."""
    rows = []
    for r in results:
        cases = []
        for c in r.cases:
            counts = c.sample_counts()
            cases.append({
                "dtype": c.dtype, "kind": c.kind, "outcome": c.outcome,
                "samples": {k: counts.get(k, 0) for k in (PASSED, FAILED, NOT_APPLICABLE)},
                "checks": sorted({s.check for s in c.samples if s.status != NOT_APPLICABLE}),
                "graphs": sum(s.graphs for s in c.samples),
                "seconds": round(c.seconds, 3),
                "expected_reason": c.expected_reason,
                "error": c.error,
                "failures": [{"sample": s.index, "message": s.message}
                             for s in c.samples if s.status == FAILED],
                "not_applicable": [{"sample": s.index, "message": s.message}
                                   for s in c.samples if s.status == NOT_APPLICABLE],
            })
        rows.append({"op": r.op, "outcome": r.outcome, "lowering": r.lowering,
                     "fallbacks": r.fallbacks, "externs": r.externs,
                     "explain_error": r.explain_error, "cases": cases})
    return rows
