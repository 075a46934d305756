"""What both targets' kernel writers share: values emitted as numbered temporaries in nested
scopes (a loop body sees what its enclosing scope computed), each common subexpression once.
A target's subclass says how one value is written (``_emit``)."""
from __future__ import annotations

from ..ir import expr as E


class ScopedEmitter:
    def __init__(self, gen, indent: str, parent: "ScopedEmitter | None" = None):
        self.gen = gen
        self.indent = indent
        self.parent = parent
        self.cache: dict = {}
        self.lines: list[str] = []

    def lookup(self, v):
        e = self
        while e is not None:
            if v in e.cache:
                return e.cache[v]
            e = e.parent
        return None

    def line(self, text: str) -> None:
        self.lines.append(self.indent + text)

    def value(self, v: E.Value) -> str:
        got = self.lookup(v)
        if got is not None:
            return got
        # children before parents, each once; nothing under a value already emitted (or
        # given a name by the caller: a row's scratch array) is emitted again
        stack, done = [(v, False)], set()
        while stack:
            x, expanded = stack.pop()
            if x in done or self.lookup(x) is not None:
                continue
            if expanded:
                owner = self.owner(x)
                if owner is self:
                    self.cache[x] = self._emit(x)
                else:   # emitted where it belongs (an enclosing scope), found from here
                    owner.value(x)
                done.add(x)
                continue
            stack.append((x, True))
            stack.extend((c, False) for c in reversed(x.children()))
        return self.lookup(v)

    def owner(self, v: E.Value) -> "ScopedEmitter":
        """The emitter that computes ``v``: this one, unless a subclass hoists it out of a loop
        (its children were emitted first, so they are there already)."""
        return self

    def _emit(self, v: E.Value) -> str:
        raise NotImplementedError
