"""Python's cyclic collector is paused while a graph compiles (Config.pause_gc) and restored
afterwards, also when the compile fails."""
import gc

import pytest
import torch

import solder.capture.aot as aot


def test_paused_in_the_block_and_restored_after_it_even_on_error():
    assert gc.isenabled()
    with aot.paused_gc(True):
        assert not gc.isenabled()
        with aot.paused_gc(True):      # nested: the outer block re-enables
            assert not gc.isenabled()
        assert not gc.isenabled()
    assert gc.isenabled()
    with pytest.raises(ValueError):
        with aot.paused_gc(True):
            raise ValueError("a failed compile")
    assert gc.isenabled()
    with aot.paused_gc(False):
        assert gc.isenabled()


def test_a_user_who_turned_gc_off_keeps_it_off():
    gc.disable()
    try:
        with aot.paused_gc(True):
            assert not gc.isenabled()
        assert not gc.isenabled()
    finally:
        gc.enable()


@pytest.mark.parametrize("pause", [True, False])
def test_graphs_compile_with_the_collector_paused(monkeypatch, pause):
    seen = []
    real = aot.prepare_graph

    def record(gm):
        seen.append(gc.isenabled())
        return real(gm)
    monkeypatch.setattr(aot, "prepare_graph", record)
    torch._dynamo.reset()
    x = torch.randn(8, 4, requires_grad=True)
    f = torch.compile(lambda x: (x.sin() * 2).sum(), backend="solder",
                      options={"pause_gc": pause})
    f(x).backward()      # forward at the call, backward at the first backward
    assert len(seen) == 2 and seen == [not pause] * 2
    assert gc.isenabled()
    torch.testing.assert_close(x.grad, 2 * x.detach().cos())
