"""``python -m solder cache list|clear|path [--dir DIR]``: look at or empty the compile cache."""
from __future__ import annotations

import argparse
import sys
import time
import warnings

from .cache import DiskCache, default_cache_dir
from ..cli_help import Parser


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    if args.command == "path":  # no need to create or check the folder just to name it
        print(args.dir or default_cache_dir())
        return 0
    with warnings.catch_warnings():  # the refusal is printed below, once, not as a warning too
        warnings.simplefilter("ignore")
        cache = DiskCache(args.dir)
    if not cache._root_ok:
        print(cache.reason, file=sys.stderr)
        return 1
    return _list(cache) if args.command == "list" else _clear(cache)


def _parser() -> argparse.ArgumentParser:
    p = Parser(prog="python -m solder cache",
               description="Look at or empty Solder's on-disk compile cache.")
    p.add_argument("--dir", help="cache folder (default: $SOLDER_CACHE_DIR, else "
                                 "$XDG_CACHE_HOME/solder, else ~/.cache/solder)")
    sub = p.add_subparsers(dest="command", required=True, metavar="{list,clear,path}")
    for name, doc in (("list", "show every entry and the total size"),
                      ("clear", "remove every entry"),
                      ("path", "print the cache folder")):
        # --dir is accepted after the command too; SUPPRESS keeps one given before it.
        sub.add_parser(name, help=doc).add_argument("--dir", default=argparse.SUPPRESS)
    return p


def _list(cache: DiskCache) -> int:
    entries = cache.entries()
    now = time.time()
    if entries:
        print(f"{'KEY':<16}  {'SIZE':>9}  {'AGE':>5}  FILES")
    for e in entries:
        print(f"{e.key[:16]:<16}  {_size(e.size):>9}  {_age(now - e.mtime):>5}  "
              f"{', '.join(e.files)}")
    total = sum(e.size for e in entries)
    print(f"{len(entries)} entr{'y' if len(entries) == 1 else 'ies'}, {_size(total)} "
          f"in {cache.root}")
    return 0


def _clear(cache: DiskCache) -> int:
    removed = cache.clear()
    print(f"removed {removed} entr{'y' if removed == 1 else 'ies'} from {cache.root}")
    left = len(cache.entries())
    if left:
        print(f"{left} could not be removed (is {cache.root} writable?)", file=sys.stderr)
        return 1
    return 0


def _size(n: int) -> str:
    for unit in ("B", "KiB", "MiB", "GiB"):
        if n < 1024 or unit == "GiB":
            return f"{n} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return ""


def _age(seconds: float) -> str:
    seconds = max(0.0, seconds)
    for unit, span in (("d", 86400), ("h", 3600), ("m", 60)):
        if seconds >= span:
            return f"{int(seconds // span)}{unit}"
    return f"{int(seconds)}s"


if __name__ == "__main__":
    sys.exit(main())
