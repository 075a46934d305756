"""A backward writes over the saved tensors AOTAutograd donated (capture/donated_inputs.py,
codegen/memory_plan.py): the logits' gradient over the saved logits, as inductor does; never
where another reader of the donor could see the write, and never for a retained graph."""
import pathlib

import pytest
import torch
import torch.nn.functional as F

DEVICE = "cuda" if torch.cuda.is_available() else "cpu"


def _lm_head_loss():
    torch.manual_seed(0)
    w = torch.randn(64, 32, device=DEVICE, requires_grad=True)
    h = torch.randn(16, 32, device=DEVICE)
    labels = torch.randint(0, 64, (16,), device=DEVICE)

    def f(h, labels):
        return F.cross_entropy((h @ w.t()).float(), labels)

    return f, w, (h, labels)


def _backward_wrappers(folder) -> str:
    return "\n".join(p.read_text() for p in pathlib.Path(folder).glob("*backward*/wrapper.py"))


def _grads(f, w, args, backend, options=None, retain=False):
    cf = torch.compile(f, backend=backend, options=options) if backend else f
    w.grad = None
    loss = cf(*args)
    loss.backward(retain_graph=retain)
    return loss.detach(), w.grad.clone()


def test_the_logits_gradient_is_written_over_the_saved_logits(tmp_path):
    f, w, args = _lm_head_loss()
    torch._dynamo.reset()
    loss, grad = _grads(f, w, args, "solder", {"debug_dir": str(tmp_path)})
    ref_loss, ref_grad = _grads(f, w, args, None)
    torch.testing.assert_close(loss, ref_loss)
    torch.testing.assert_close(grad, ref_grad)
    src = _backward_wrappers(tmp_path)
    # a row reduction's element-level result (the log-softmax backward) over a donated input
    assert "S.check_donated_inputs(" in src
    assert any("written in place: its kernel reads arg" in ln for ln in src.splitlines()), src
    # a second step gives the same, the saved logits being new each time
    loss2, grad2 = _grads(f, w, args, "solder", {"debug_dir": str(tmp_path)})
    torch.testing.assert_close(grad2, ref_grad)


def test_a_retained_graph_is_refused_not_read_after_the_write():
    f, w, args = _lm_head_loss()
    torch._dynamo.reset()
    cf = torch.compile(f, backend="solder")
    loss = cf(*args)
    with pytest.raises(RuntimeError, match="retain_graph"):
        loss.backward(retain_graph=True)


def test_without_donated_buffers_nothing_is_written_over_and_a_graph_may_be_retained(tmp_path):
    f, w, args = _lm_head_loss()
    torch._dynamo.reset()
    with torch._functorch.config.patch(donated_buffer=False):
        cf = torch.compile(f, backend="solder", options={"debug_dir": str(tmp_path)})
        w.grad = None
        loss = cf(*args)
        loss.backward(retain_graph=True)
        first = w.grad.clone()
        loss.backward()            # the saved logits read again: still the logits
        twice = w.grad.clone()
    src = _backward_wrappers(tmp_path)
    assert "check_donated_inputs" not in src
    assert not any("written in place: its kernel reads arg" in ln for ln in src.splitlines())
    _, ref = _grads(f, w, args, None)
    torch.testing.assert_close(first, ref)
    torch.testing.assert_close(twice, 2 * ref)


def test_the_flag_turned_off_after_the_compile_still_refuses_a_retained_graph():
    f, w, args = _lm_head_loss()
    torch._dynamo.reset()
    cf = torch.compile(f, backend="solder")
    _grads(f, w, args, "solder")         # compiled with donation
    loss = cf(*args)
    with torch._functorch.config.patch(donated_buffer=False):
        with pytest.raises(RuntimeError, match="writes over the tensors its forward saved"):
            loss.backward(retain_graph=True)


def test_a_donor_another_member_reads_is_not_written_over(tmp_path):
    # softmax's backward reads its saved output in a row's sum and at each element: the
    # gradient may not be written over it (the sum's reads could come after the write)
    torch.manual_seed(0)
    w = torch.randn(32, 64, device=DEVICE, requires_grad=True)
    x = torch.randn(16, 32, device=DEVICE)
    c = torch.randn(16, 64, device=DEVICE)

    def f(x, c):
        return (torch.softmax(x @ w, -1) * c).sum()

    torch._dynamo.reset()
    cf = torch.compile(f, backend="solder", options={"debug_dir": str(tmp_path)})
    w.grad = None
    cf(x, c).backward()
    got = w.grad.clone()
    w.grad = None
    f(x, c).backward()
    torch.testing.assert_close(got, w.grad)
    src = _backward_wrappers(tmp_path)
    assert not any("written in place: its kernel reads arg" in ln for ln in src.splitlines()), src
