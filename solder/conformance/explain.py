"""How Solder ran an op, from ``solder.explain``: lowered, extern, fallback or not-captured.

* fallback: some graph has an ATen fallback (``report.fallbacks``), listed with its reason;
* extern: no fallback, but a vendor-library call (``graph.externs``: mm, conv, sdpa);
* lowered: every graph became generated kernels (or pure views);
* not-captured: Dynamo compiled no graph at all (the op ran eagerly after a graph break).
"""
from __future__ import annotations

from typing import Callable, Optional


def explain_function() -> tuple[Optional[Callable], str]:
    """``(solder.explain, "")`` when Solder provides it, else ``(None, why not)``."""
    try:
        import solder
    except Exception as err:  # noqa: BLE001 - any import failure means "not available yet"
        return None, f"cannot import solder: {type(err).__name__}: {err}"
    explain = getattr(solder, "explain", None)
    if explain is None:
        return None, "solder.explain does not exist yet"
    return explain, ""


_EXPLAIN_KEYWORDS = {"options", "dynamic"}


def classify(explain: Callable, fn: Callable, args: tuple, kwargs: dict) -> dict:
    """Run ``explain(fn, *args, **kwargs)`` and sum its report up for the op table."""
    if kwargs.keys() & _EXPLAIN_KEYWORDS:  # explain() has keywords of its own: bind ours
        report = explain(lambda *a: fn(*a, **kwargs), *args)
    else:
        report = explain(fn, *args, **kwargs)
    graphs = list(getattr(report, "graphs", []) or [])
    fallbacks = [{"op": str(f.op), "reason": str(getattr(f, "reason", ""))}
                 for f in getattr(report, "fallbacks", []) or []]
    externs = sorted({str(e.op) for g in graphs for e in getattr(g, "externs", []) or []})
    if fallbacks:
        lowering = "fallback"
    elif externs:
        lowering = "extern"
    elif graphs:
        lowering = "lowered"
    else:
        lowering = "not-captured"
    return {"lowering": lowering, "fallbacks": _unique(fallbacks), "externs": externs}


def _unique(rows: list[dict]) -> list[dict]:
    seen, out = set(), []
    for row in rows:
        key = (row["op"], row["reason"])
        if key not in seen:
            seen.add(key)
            out.append(row)
    return out
