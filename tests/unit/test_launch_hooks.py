"""When generated kernels may skip Triton's Python launcher: only while no launch hook listens."""
from triton import knobs

from solder.runtime import launch


def test_empty_hook_chains_are_idle_and_registered_hooks_are_not():
    enter = knobs.runtime.launch_enter_hook
    assert launch._hook_idle(None)
    if hasattr(enter, "calls"):   # Triton 3.6 keeps hooks as always-present HookChain objects
        assert launch._hook_idle(type(enter)())
        chain = type(enter)()
        chain.add(lambda *a: None)
        assert not launch._hook_idle(chain)
    assert not launch._hook_idle(lambda *a: None)   # a plain function set as the hook


def test_a_registered_enter_hook_turns_the_fast_path_off():
    assert launch._launch_hooks_idle()
    enter = knobs.runtime.launch_enter_hook
    if not hasattr(enter, "add"):
        return
    hook = lambda *a: None  # noqa: E731
    enter.add(hook)
    try:
        assert not launch._launch_hooks_idle()
    finally:
        enter.remove(hook)
    assert launch._launch_hooks_idle()


def test_specialization_tells_pointer_dtypes_apart():
    # identical kernel sources share one function: an int32 and an int64 launch of it are two
    # binaries, so the fast path's key must differ
    import torch
    a32, a64 = torch.zeros(4, dtype=torch.int32), torch.zeros(4, dtype=torch.int64)
    assert launch._specialization([a32, 16]) != launch._specialization([a64, 16])
    assert launch._specialization([a32, 16]) == launch._specialization([a32.clone(), 16])
