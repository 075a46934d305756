"""The stages of a reduction kernel, for every target: a member that reads a reduction result of
the kernel at element level (or reduces it) goes after the stage that produces it."""
from __future__ import annotations

from ..ir import expr as E


def member_stages(kernel) -> list[list]:
    """The kernel's prepared members, in stages (each a list, in schedule order)."""
    stage_of: dict = {}
    for name, p in kernel.prepared.items():
        s = 0
        for x in E.walk(p.value):
            if x.op == "rref":
                s = max(s, stage_of[x.args[0]] + 1)
        target = getattr(p.buffer, "mutates", None)
        if target:
            # an in-place write goes no earlier than the members before it that read the
            # old value (they were scheduled first; a later stage would run after it)
            for other, q in kernel.prepared.items():
                if other == name:
                    break
                if any(ld.args[0] == target for ld in E.loads_of(q.value)):
                    s = max(s, stage_of[other])
        stage_of[name] = s
    n = max(stage_of.values(), default=0) + 1
    return [[kernel.prepared[m] for m in kernel.prepared if stage_of[m] == i] for i in range(n)]
