"""Launch plans (runtime/launch.py): the key that picks a compiled kernel without Triton's
Python launcher must change whenever Triton would specialize differently."""
from types import SimpleNamespace

import torch

from solder.runtime.launch import KernelRunner


def _runner():
    src = SimpleNamespace(name="k", is_reduction=False, persistent=False, reduction_hint=None,
                          source="", args=[("ptr", "a"), ("seed", 0), ("ptr", "b"),
                                           ("numel", "x")])
    return KernelRunner(None, src, "g", None, autotune=False)


def test_plan_key_tells_alignment_seed_and_sizes_apart():
    r = _runner()
    a, b = torch.empty(64), torch.empty(64)
    base = r._plan_key((a, 3, b, 64))
    assert r._plan_key((a, 5, b, 64)) == base          # same specialization: one plan
    assert r._plan_key((a, 1, b, 64)) != base          # a seed of 1 is a constant to Triton
    assert r._plan_key((a, 32, b, 64)) != base         # ... a multiple of 16 is specialized
    assert r._plan_key((a, 3, b, 65)) != base          # other sizes, other grid
    assert r._plan_key((a[1:], 3, b, 64)) != base      # a pointer no longer 16-byte aligned
    assert base[2] and not r._plan_key((a[1:], 3, b, 64))[2]


def test_call_sites_share_configs_but_not_plans():
    r = _runner()
    site = r.for_call_site()
    assert site.configs is r.configs and site.fast is r.fast
    assert site.plans is not r.plans


class _FailsWithManyWarps:
    """A stand-in JIT function whose compile fails in Triton's layout passes above one warp."""

    def __init__(self):
        self.warps = []

    def __getitem__(self, grid):
        def launch(*args, num_warps, **cfg):
            self.warps.append(num_warps)
            if num_warps > 1:
                raise RuntimeError("PassManager::run failed")
            return None
        return launch


def test_a_kernel_that_fails_in_the_layout_passes_compiles_again_with_fewer_warps():
    r = _runner()
    r.interp = False   # (the interpreter path compiles nothing)
    r.fn = _FailsWithManyWarps()
    r.configs[(64, 1)] = {"XBLOCK": 64, "num_warps": 4}
    r._launch({"XBLOCK": 64, "num_warps": 4}, (torch.empty(64), 3, torch.empty(64), 64), 64,
              key=(64, 1))
    assert r.fn.warps == [4, 2, 1]
    assert r.configs[(64, 1)]["num_warps"] == 1 and r.stats["compile_retries"] == 2


def test_a_front_end_error_is_not_retried():
    from solder.runtime.launch import KernelCompileError
    r = _runner()
    r.interp = False

    class Broken:
        def __getitem__(self, grid):
            def launch(*args, **cfg):
                raise RuntimeError("CompilationError: bad source")
            return launch
    r.fn = Broken()
    import pytest
    with pytest.raises(KernelCompileError, match="bad source"):
        r._launch({"XBLOCK": 64, "num_warps": 4}, (torch.empty(64), 3, torch.empty(64), 64), 64,
                  key=(64, 1))


def test_a_launcher_arity_error_names_the_kernels_the_jit_function_holds():
    from types import SimpleNamespace

    from solder.runtime.launch import KernelCompileError
    r = _runner()
    r.interp = False
    held = SimpleNamespace(name="k7", src=SimpleNamespace(signature={"a": "*fp32"},
                                                          fn=SimpleNamespace(module="other")))

    class Confused:
        module, __name__, arg_names = "mine", "k0", ["a", "s", "b", "n"]
        device_caches = {0: ({"key": held}, {}, None, None, None)}

        def __getitem__(self, grid):
            def launch(*args, **cfg):
                raise TypeError("function takes exactly 14 arguments (17 given)")
            return launch
    r.fn = Confused()
    import pytest
    with pytest.raises(KernelCompileError, match=r"4 parameters holds: k7 \(1 parameters, from other\)"):
        r._launch({"XBLOCK": 64, "num_warps": 4}, (torch.empty(64), 3, torch.empty(64), 64), 64,
                  key=(64, 1))
