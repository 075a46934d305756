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
    if not argv or argv[0] in ("-h", "--help", "help"):
        print("usage: python -m solder <command> [args]\n\ncommands:")
        for name, (_, doc) in COMMANDS.items():
            print(f"  {name:<12} {doc}")
        return 0
    name, rest = argv[0], argv[1:]
    if name not in COMMANDS:
        print(f"unknown command {name!r}; try: python -m solder --help", file=sys.stderr)
        return 2
    if name in RUNS_KERNELS:
        from .interpreter import use_triton_interpreter_without_gpu
        use_triton_interpreter_without_gpu(name, rest)
    module = importlib.import_module(COMMANDS[name][0])
    return int(module.main(rest) or 0)


# commands that run generated kernels: without a GPU they run them in Triton's interpreter
RUNS_KERNELS = {"demo", "bench", "explain", "fuzz"}



if __name__ == "__main__":
    sys.exit(main())
