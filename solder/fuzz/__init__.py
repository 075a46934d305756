"""A differential fuzzer: random straight-line PyTorch programs, compiled and compared with eager.

``python -m solder fuzz`` (``cli.py``). A program is drawn from a seed (``generate.py``, from the
op table in ``ops.py`` and the input layouts in ``inputs.py``), printed as Python
(``program.py``), run in eager, in float64 and compiled (``execute.py``, ``run.py``), judged
(``compare.py``, which also holds the rules for eager's own bugs), minimized when it fails
(``minimize.py``) and written as a standalone script (``script.py``). Programs run in worker
processes that are replaced when one dies or hangs (``workers.py``, ``worker.py``).
"""
