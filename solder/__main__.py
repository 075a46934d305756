"""``python -m solder <command>``: the demo, the benchmark, the conformance suite, the cache."""
from __future__ import annotations

import importlib
import sys

# command -> (module, one-line help); each module has main(argv) -> int. Imported on demand so
# that `python -m solder --help` stays instant.
COMMANDS = {
    "demo": ("solder.demo", "compile a transformer block forward and backward; show its kernels"),
    "bench": ("solder.bench.cli", "eager, inductor and Solder side by side on this GPU"),
    "conformance": ("solder.conformance.cli", "PyTorch's OpInfo database through Solder"),
    "explain": ("solder.explain_cli", "compile a script's function and print the report"),
    "cache": ("solder.runtime.cache_cli", "list or clear the on-disk compile cache"),
    "aot": ("solder.aot.cli", "ahead-of-time packages: inspect PATH"),
    "fuzz": ("solder.fuzz.cli", "random programs compiled and compared with eager"),
}


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if not argv:   # a command is needed: say which there are, and fail as argparse would
        print(usage(), file=sys.stderr)
        return 2
    if argv[0] in ("-h", "--help", "help"):
        print(usage())
        return 0
    if argv[0] == "--version":
        print(version())
        return 0
    name, rest = argv[0], argv[1:]
    if name not in COMMANDS:
        print(f"unknown command {name!r}; try: python -m solder --help", file=sys.stderr)
        return 2
    if name in RUNS_KERNELS and not _measures_cpu_paths(name, rest):
        from .interpreter import use_triton_interpreter_without_gpu
        use_triton_interpreter_without_gpu(name, rest)
    module = importlib.import_module(COMMANDS[name][0])
    return int(module.main(rest) or 0)


def usage() -> str:
    lines = ["usage: python -m solder <command> [args]   (python -m solder <command> --help)",
             "       python -m solder --version", "", "commands:"]
    lines += [f"  {name:<12} {doc}" for name, (_, doc) in COMMANDS.items()]
    return "\n".join(lines)


def version() -> str:
    """Solder's version and the torch and Triton it runs with (read from the installed
    packages' metadata: no import of either)."""
    from importlib.metadata import PackageNotFoundError
    from importlib.metadata import version as installed

    from . import __version__

    def of(package):
        try:
            return installed(package)
        except PackageNotFoundError:
            return "not installed"
    return (f"solder {__version__} (torch {of('torch')}, triton {of('triton')}, "
            f"Python {sys.version.split()[0]})")


# commands that run generated kernels: without a GPU they run them in Triton's interpreter
RUNS_KERNELS = {"demo", "bench", "explain", "fuzz"}


def _measures_cpu_paths(name: str, rest: list) -> bool:
    """``bench --device cpu`` (not --quick) times the CPU paths: the interpreter stays off."""
    joined = " ".join(rest).replace("--device=", "--device ")
    return name == "bench" and "--device cpu" in joined and "--quick" not in rest



if __name__ == "__main__":
    sys.exit(main())
