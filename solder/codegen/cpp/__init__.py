"""The native CPU target: generated C++ (OpenMP over the outer loop) from the same IR, schedule
and fusion decisions as the Triton target, compiled with the system's C++ compiler
(``runtime/native.py``). ``target.py`` tells lowering what it can emit; ``scalar_ops.py`` is its
scalar-op table, ``kernel.py`` writes one kernel, ``module.py`` the translation unit."""
