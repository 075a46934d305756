"""The expected-failure lists: one text file per (backend, device), one line per failing case.

    expected_failures/solder-cpu.txt:
        # op                         dtype     kind      reason
        nn.functional.ctc_loss       float32   gradient  wrong values: ...

Fields are separated by whitespace; the reason is the rest of the line. A listed case that
fails is "expected-failed"; one that passes (or has no valid sample) is "unexpectedly-passed"
and fails the run, so the list can only shrink. ``--write-expected-failures`` rewrites the
file from a run: failures that are new get the first failure message as their reason (edit it
into a real one), fixed ones are dropped, and cases the run did not cover are kept.
"""
from __future__ import annotations

from pathlib import Path
from typing import Iterable, Union

from .results import FAILED, CaseResult

FOLDER = Path(__file__).parent / "expected_failures"
Key = tuple[str, str, str]

HEADER = """\
# Expected failures of the OpInfo conformance suite for backend {backend} on {device}.
# One line per (op, dtype, kind): op  dtype  kind  reason. Kinds: forward, inplace, gradient.
# A listed case that passes fails the run (strict xfail): remove its line when it is fixed.
# Regenerate from a run with: python -m solder conformance --backend {backend} \\
#     --device {device} --write-expected-failures   (keeps the reasons already written)
"""


def path_for(backend: str, device: str) -> Path:
    return FOLDER / f"{backend}-{device}.txt"


def load(path: Union[str, Path]) -> dict[Key, str]:
    path = Path(path)
    if not path.exists():
        return {}
    entries: dict[Key, str] = {}
    for number, line in enumerate(path.read_text().splitlines(), 1):
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        parts = line.split(None, 3)
        if len(parts) < 3:
            raise ValueError(f"{path}:{number}: expected 'op dtype kind reason', got {line!r}")
        op, dtype, kind = parts[:3]
        entries[(op, dtype, kind)] = parts[3] if len(parts) == 4 else "(no reason given)"
    return entries


def regenerate(old: dict[Key, str], cases: Iterable[CaseResult]) -> dict[Key, str]:
    """The list after a run: keep old entries the run did not cover, list every failing case."""
    new = dict(old)
    for case in cases:
        if case.status == FAILED:
            new[case.key] = old.get(case.key) or _reason_from(case)
        else:
            new.pop(case.key, None)
    return new


def write(path: Union[str, Path], entries: dict[Key, str], backend: str, device: str) -> None:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    rows = sorted(entries.items())
    width = max([len(op) for (op, _, _), _ in rows] + [28])
    lines = [HEADER.format(backend=backend, device=device)]
    for (op, dtype, kind), reason in rows:
        lines.append(f"{op:<{width}} {dtype:<9} {kind:<9} {reason}\n")
    path.write_text("".join(lines))


def _reason_from(case: CaseResult, limit: int = 200) -> str:
    """The first failure's message, without the sample's description (it is in the JSON)."""
    text = " ".join(case.first_failure().split()) or "failed"
    head, sep, tail = text.rpartition(" (sample ")
    if sep:
        text = f"{head} [sample {tail.split(':')[0]}]"
    return text if len(text) <= limit else text[: limit - 3] + "..."
