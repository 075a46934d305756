"""The benchmark behind ``python -m solder bench``: eager, inductor and Solder side by side.

It uses only public interfaces (``torch.compile(fn, backend=name)`` and ``solder.explain``), so
it can run against any state of the compiler. Modules: ``cases`` (memory-bound cases and the
output check), ``models`` (transformers / torchvision cases), ``timing`` (clocks, copy ceiling,
launch counts), ``runner`` (one case on every backend), ``report`` (results, tables, JSON),
``cli`` (arguments and the run).
"""
