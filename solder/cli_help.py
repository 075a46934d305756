"""Command-line help for people: module docstrings serve as ``--help`` text, so the markup they
carry for readers of the source (reStructuredText's double backquotes) is left out there."""
from __future__ import annotations

import argparse
import re

_LITERAL = re.compile(r"``([^`]+)``")


def plain(text: str) -> str:
    return _LITERAL.sub(r"\1", text) if text else text


class Parser(argparse.ArgumentParser):
    """argparse's parser whose usage and help read as plain text (its subcommands' too)."""

    def format_help(self) -> str:
        return plain(super().format_help())

    def format_usage(self) -> str:
        return plain(super().format_usage())


def interleaved_part(items: list, spec: str, flag: str) -> list:
    """``items[i-1::n]`` for ``spec`` "i/n" (the i-th of n interleaved slices, so that each
    gets a mix of what the list holds); a ValueError naming ``flag`` for a malformed spec."""
    try:
        i, n = (int(x) for x in spec.split("/"))
    except ValueError:
        raise ValueError(f"{flag} wants I/N (two integers), got {spec!r}") from None
    if not 1 <= i <= n:
        raise ValueError(f"{flag} {spec}: I must be between 1 and N")
    return items[i - 1::n]
