"""AOTAutograd's graph printouts are skipped while no log shows them (capture/aot_logs.py),
and are there again when its graph logs are on."""
import sys

import pytest
import torch

from solder.capture.aot_logs import graph_logs_wanted


@pytest.fixture
def printed(monkeypatch):
    """The graphs AOTAutograd printed with ``print_readable`` (what its logs use; Dynamo's own
    structured-trace printout, which pytest's log capture turns on, is not counted)."""
    count = []
    real = torch.fx.GraphModule.print_readable

    def counting(self, *args, **kwargs):
        caller = sys._getframe(1).f_code.co_filename
        if "_aot_autograd" in caller:
            count.append(caller)
        return real(self, *args, **kwargs)
    monkeypatch.setattr(torch.fx.GraphModule, "print_readable", counting)
    return count


def _train_step():
    torch.manual_seed(0)
    lin = torch.nn.Linear(4, 3)
    x = torch.randn(2, 4)
    torch._dynamo.reset()
    step = torch.compile(lambda x: lin(x).sin().sum(), backend="solder",
                         options={"cache": False})
    step(x).backward()
    got = lin.weight.grad.clone()
    lin.weight.grad = None
    lin(x).sin().sum().backward()
    torch.testing.assert_close(got, lin.weight.grad)


def test_no_log_no_printout(printed, monkeypatch):
    monkeypatch.delenv("TORCH_TRACE", raising=False)
    monkeypatch.delenv("TORCH_COMPILE_DEBUG", raising=False)
    assert not graph_logs_wanted()
    _train_step()
    assert printed == []
    # and AOTAutograd is left as it was
    from torch._functorch import aot_autograd
    from torch._functorch._aot_autograd.schemas import AOTConfig
    assert aot_autograd.AOTConfig is AOTConfig


def test_graph_logs_on_print_as_before(printed, monkeypatch):
    monkeypatch.delenv("TORCH_TRACE", raising=False)
    monkeypatch.delenv("TORCH_COMPILE_DEBUG", raising=False)
    torch._logging.set_logs(aot_joint_graph=True)
    try:
        assert graph_logs_wanted()
        _train_step()
    finally:
        torch._logging.set_logs()
    assert printed   # the joint graph, printed for the log


def test_a_structured_trace_wants_the_printouts(monkeypatch):
    monkeypatch.setenv("TORCH_TRACE", "/nonexistent-dir-not-written")
    assert graph_logs_wanted()
