"""Load generated kernel modules and launch their kernels with a chosen block configuration."""
from __future__ import annotations

import hashlib
import importlib.util
import os
import sys
import threading
from pathlib import Path
from typing import Any

import torch

from ..codegen.scalar_ops import interpreting
from ..codegen.triton_kernel import KernelSource


class KernelCompileError(RuntimeError):
    pass


_module_lock = threading.Lock()


def module_dir(cache_dir: str | None) -> Path:
    from .cache import default_cache_dir
    root = Path(cache_dir) if cache_dir else default_cache_dir()
    d = root / "modules"
    d.mkdir(parents=True, exist_ok=True, mode=0o700)
    return d


def load_module(source: str, cache_dir: str | None, stem: str = "kernels"):
    """Import generated source as a module (Triton's JIT reads its functions' source files)."""
    digest = hashlib.sha256(source.encode()).hexdigest()[:20]
    path = module_dir(cache_dir) / f"{stem}_{digest}.py"
    with _module_lock:
        if not path.exists() or path.read_text() != source:
            tmp = path.with_suffix(f".{os.getpid()}.{threading.get_ident()}.tmp")
            tmp.write_text(source)
            os.replace(tmp, path)
        name = f"solder_generated.{stem}_{digest}"
        if name in sys.modules:
            return sys.modules[name]
        spec = importlib.util.spec_from_file_location(name, path)
        mod = importlib.util.module_from_spec(spec)
        sys.modules[name] = mod
        spec.loader.exec_module(mod)
        return mod


def _next_pow2(n: int) -> int:
    return 1 if n <= 1 else 1 << (int(n) - 1).bit_length()


class KernelRunner:
    """Calls one generated kernel: picks XBLOCK/RBLOCK/num_warps for the sizes it is called
    with (timing a few candidates on a GPU, once per size bucket), then launches."""

    def __init__(self, fn, src: KernelSource, graph_name: str, dump_path: str | None,
                 autotune: bool):
        self.fn = fn
        self.src = src
        self.graph_name = graph_name
        self.dump_path = dump_path
        self.autotune = autotune
        self.configs: dict[Any, dict] = {}
        self.written = [i for i, (kind, _) in enumerate(src.args) if kind == "ptr"]

    def candidates(self, xnumel: int, rnumel: int) -> list[dict]:
        interp = interpreting()
        if not self.src.is_reduction:
            if interp:
                return [dict(XBLOCK=min(_next_pow2(xnumel), 8192))]
            return [dict(XBLOCK=b, num_warps=w) for b, w in ((1024, 4), (512, 4), (2048, 8),
                                                            (4096, 8))]
        if self.src.persistent:
            rb = _next_pow2(rnumel)
            if interp:
                return [dict(XBLOCK=max(1, min(_next_pow2(xnumel), 16384 // rb)), RBLOCK=rb)]
            out = []
            for elems in (1024, 2048, 4096, 8192):
                xb = max(1, min(elems // rb, _next_pow2(xnumel), 64))
                warps = 4 if rb * xb <= 2048 else (8 if rb * xb <= 8192 else 16)
                out.append(dict(XBLOCK=xb, RBLOCK=rb, num_warps=warps))
                if rb * xb >= 4096:  # long rows: more warps hide more latency
                    out.append(dict(XBLOCK=xb, RBLOCK=rb, num_warps=min(32, warps * 2)))
            return _unique(out)
        if interp:
            return [dict(XBLOCK=1, RBLOCK=min(_next_pow2(rnumel), 4096))]
        return _unique([dict(XBLOCK=1, RBLOCK=2048, num_warps=8),
                        dict(XBLOCK=1, RBLOCK=4096, num_warps=16),
                        dict(XBLOCK=8, RBLOCK=512, num_warps=8),
                        dict(XBLOCK=64, RBLOCK=64, num_warps=8)])

    def __call__(self, *args):
        xnumel = int(args[-2] if self.src.is_reduction else args[-1])
        rnumel = int(args[-1]) if self.src.is_reduction else 1
        if xnumel == 0 or rnumel == 0 and not self.src.is_reduction:
            return
        key = (_next_pow2(xnumel), _next_pow2(rnumel))
        cfg = self.configs.get(key)
        if cfg is None:
            cfg = self._choose(args, xnumel, rnumel)
            self.configs[key] = cfg
        self._launch(cfg, args, xnumel)

    def _launch(self, cfg, args, xnumel):
        meta = dict(cfg)
        grid = ((xnumel + meta["XBLOCK"] - 1) // meta["XBLOCK"],)
        try:
            self.fn[grid](*args, **meta)
        except Exception as e:
            where = f" (generated source: {self.dump_path})" if self.dump_path else ""
            raise KernelCompileError(
                f"Solder kernel {self.src.name} of graph {self.graph_name} failed to compile or "
                f"launch{where}: {type(e).__name__}: {e}\n--- kernel source ---\n{self.src.source}"
            ) from e

    def _choose(self, args, xnumel, rnumel):
        cands = self.candidates(xnumel, rnumel)
        if len(cands) == 1 or not self.autotune or interpreting() or not torch.cuda.is_available():
            return cands[0]
        from triton.testing import do_bench
        # time on copies of the pointer arguments: the kernel may update some in place
        scratch = [a.clone() if isinstance(a, torch.Tensor) else a for a in args]
        best, best_t = cands[0], float("inf")
        for cfg in cands:
            try:
                t = do_bench(lambda: self._launch(cfg, scratch, xnumel), warmup=5, rep=20,
                             return_mode="median")
            except KernelCompileError:
                continue
            if t < best_t:
                best, best_t = cfg, t
        return best


def _unique(cfgs):
    out = []
    for c in cfgs:
        if c not in out:
            out.append(c)
    return out
