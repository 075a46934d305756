"""``python -m solder aot inspect PATH``: what a package holds and whether it runs here."""
from __future__ import annotations

import sys

from ..cli_help import Parser


def main(argv: list[str]) -> int:
    parser = Parser(prog="python -m solder aot")
    sub = parser.add_subparsers(dest="command", required=True)
    inspect = sub.add_parser("inspect", help="print a package's kernels, sizes, versions, inputs")
    inspect.add_argument("path")
    args = parser.parse_args(argv)
    from .container import PackageError
    from .inspect import describe
    try:
        print(describe(args.path))
    except PackageError as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    return 0
