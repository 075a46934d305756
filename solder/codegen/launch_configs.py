"""The launch configs (XBLOCK, RBLOCK, num_warps) a generated kernel may run with, and whether a
kernel's static sizes let it drop its bounds masks.

Both code generation and the runtime need them: the runtime picks (or times) a config from
``candidates`` for the sizes of each call; code generation emits a kernel without masks
(``exact_cover``) only when every config the runtime could pick, on a GPU or in Triton's
interpreter, tiles the kernel's sizes exactly. Unmasked loads and stores are what the hardware
does best: no predicate per element and no guard against a partial last block.
"""
from __future__ import annotations

# Triton compile options every generated kernel takes, beside its launch config. Triton's
# default links libdevice with denormals flushed to zero (exp, log, fmod, ... of a subnormal
# operand or result give 0); ATen's CUDA kernels keep them, and so does Solder. And Triton's
# default contracts a multiply and an add into one fma across what were two ops in eager,
# each rounded on its own there: ``t = x * x; t - t`` became the rounding error of x * x, not
# 0 (log_softmax of one element came out 2.5e-10 where eager's is 0, and a division by it
# 4e9 where eager's is -inf: fuzz seed 452439 on an H100). Eager's kernels round every op's
# result, and so do Solder's.
COMPILE_OPTIONS = {"enable_reflect_ftz": False, "enable_fp_fusion": False}

# Reductions this large time a few candidates on a GPU; smaller kernels use the first one.
TUNE_MIN_ELEMENTS = 1 << 22
TUNE_MAX_CANDIDATES = 3


def next_pow2(n: int) -> int:
    return 1 if n <= 1 else 1 << (int(n) - 1).bit_length()


def candidates(is_reduction: bool, persistent: bool, outer: bool, xnumel: int, rnumel: int,
               interp: bool, reload: bool = False) -> list[dict]:
    """Launch configs to try, best guess first. ``reload``: the kernel takes a RELOAD constexpr
    (keep its rows in registers, 0, or read them again, 1); the second candidate then reads
    them again, with the most warps, so tuning compares the two forms."""
    cfgs = _block_candidates(is_reduction, persistent, outer, xnumel, rnumel, interp)
    if not reload:
        return cfgs
    kept = [dict(c, RELOAD=0) for c in cfgs]
    if interp:
        return kept
    again = dict(cfgs[0], RELOAD=1, num_warps=max(c.get("num_warps", 4) for c in cfgs))
    return _unique([kept[0], again] + kept[1:])


def _block_candidates(is_reduction, persistent, outer, xnumel, rnumel, interp) -> list[dict]:
    if not is_reduction:
        if interp:
            return [dict(XBLOCK=min(next_pow2(xnumel), 8192))]
        first = dict(XBLOCK=1024, num_warps=4) if xnumel >= 1 << 16 else \
            dict(XBLOCK=max(32, min(1024, next_pow2(xnumel))), num_warps=4)
        return _unique([first, dict(XBLOCK=512, num_warps=4), dict(XBLOCK=2048, num_warps=8),
                        dict(XBLOCK=4096, num_warps=8)])
    if persistent:
        rb = next_pow2(rnumel)
        if interp:
            return [dict(XBLOCK=max(1, min(next_pow2(xnumel), 16384 // rb)), RBLOCK=rb)]
        out = []
        for elems in ((4096, 2048, 8192) if outer else (2048, 1024, 4096, 8192)):
            xb = max(1, min(elems // rb, next_pow2(xnumel), 128 if outer else 64))
            warps = 4 if rb * xb <= 2048 else (8 if rb * xb <= 8192 else 16)
            out.append(dict(XBLOCK=xb, RBLOCK=rb, num_warps=warps))
            if rb * xb >= 4096:  # long rows: more warps hide more latency
                out.append(dict(XBLOCK=xb, RBLOCK=rb, num_warps=min(32, warps * 2)))
        return _unique(out)
    if interp:
        # the interpreter runs a program's Python once per program: rows go together, as many
        # as a block of 16384 elements holds and divide the rows evenly (a dynamic GPT-2's
        # column sums took 192 programs of one row each; evenly, so exact_cover is unchanged)
        rb = min(next_pow2(rnumel), 4096)
        return [dict(XBLOCK=_pow2_dividing(xnumel, 16384 // rb), RBLOCK=rb)]
    if outer:  # rows are strided in memory: many rows per program keep loads coalesced
        return _unique([dict(XBLOCK=64, RBLOCK=64, num_warps=8),
                        dict(XBLOCK=128, RBLOCK=32, num_warps=8),
                        dict(XBLOCK=32, RBLOCK=128, num_warps=8)])
    return _unique([dict(XBLOCK=1, RBLOCK=2048, num_warps=8),
                    dict(XBLOCK=1, RBLOCK=4096, num_warps=16),
                    dict(XBLOCK=8, RBLOCK=512, num_warps=8)])


def _pow2_dividing(n: int, cap: int) -> int:
    """The largest power of two that divides ``n`` and is at most ``cap``."""
    n = int(n)
    if n <= 0:
        return 1
    return max(1, min(n & -n, 1 << (max(1, int(cap)).bit_length() - 1)))


def is_launch_config(cfg) -> bool:
    """Whether ``cfg`` (read back from a cache entry) has the shape of a launch config."""
    return isinstance(cfg, dict) and all(isinstance(k, str) and type(v) is int
                                         for k, v in cfg.items())


def covers(cfg: dict, persistent: bool, xnumel: int, rnumel: int | None) -> bool:
    """Whether ``cfg`` tiles the sizes with no partial block (so masks are all true)."""
    if xnumel % cfg["XBLOCK"]:
        return False
    if rnumel is None:
        return True
    return cfg["RBLOCK"] == rnumel if persistent else rnumel % cfg["RBLOCK"] == 0


def exact_cover(is_reduction: bool, persistent: bool, outer: bool, xnumel, rnumel) -> bool:
    """Whether every config that may launch a kernel of these static sizes covers them exactly
    (checked for both the GPU's candidates and the interpreter's, since a package built on one
    may run on the other). Symbolic sizes never do."""
    try:
        x, r = int(xnumel), int(rnumel)
    except TypeError:
        return False
    if x <= 0 or r <= 0:
        return False
    return all(covers(c, persistent, x, r if is_reduction else None)
               for interp in (False, True)
               for c in candidates(is_reduction, persistent, outer, x, r, interp))


def _unique(cfgs):
    out = []
    for c in cfgs:
        if c not in out:
            out.append(c)
    return out
