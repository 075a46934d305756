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
