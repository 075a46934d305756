"""A training step's float64 reference (solder/bench/reference.py): computed on a copy of the
model, leaving the model as it was, and the judgement of a result against it."""
import torch

from solder.bench.cases import Workload
from solder.bench.reference import float64_step, no_less_accurate


def _workload():
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.BatchNorm1d(16),
                                torch.nn.ReLU(), torch.nn.Linear(16, 3)).train()
    x = torch.randn(4, 8)

    def loss(x):
        with torch.autocast("cpu", dtype=torch.bfloat16):
            return model(x).square().mean()

    return model, Workload(loss, (x,), grad_leaves=tuple(model.parameters()))


def test_the_reference_is_the_step_in_float64_and_leaves_the_model_alone():
    model, work = _workload()
    before = {k: v.clone() for k, v in model.state_dict().items()}
    marker = [torch.full_like(p, 7.0) for p in model.parameters()]
    for p, m in zip(model.parameters(), marker):
        p.grad = m
    ref = float64_step(work)
    # the same step by hand, in float64 on a copy made here
    twin = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.BatchNorm1d(16),
                               torch.nn.ReLU(), torch.nn.Linear(16, 3)).train()
    twin.load_state_dict(before)
    twin = twin.double()
    out = twin(work.inputs[0].double()).square().mean()
    out.backward()
    assert ref[0].dtype == torch.float64 and torch.allclose(ref[0], out.detach())
    for g, p in zip(ref[1:], twin.parameters()):
        assert g.dtype == torch.float64 and torch.allclose(g, p.grad)
    # the model: its values, running statistics, dtype and gradients as they were
    for k, v in model.state_dict().items():
        assert v.dtype == before[k].dtype and torch.equal(v, before[k]), k
    assert all(p.grad is m for p, m in zip(model.parameters(), marker))
    assert work.fn.__closure__[0].cell_contents is model


def test_a_result_is_judged_by_its_error_against_the_reference_beside_eager_s():
    ref = (torch.zeros(100, dtype=torch.float64) + 1.0,)
    eager = (ref[0].float() + 0.01,)
    assert no_less_accurate((ref[0].float() + 0.02,), eager, ref) is None   # 2x eager's error
    worse = no_less_accurate((ref[0].float() + 0.1,), eager, ref)            # 10x
    assert worse is not None and "output 0" in worse and "eager's" in worse


def test_a_function_without_a_model_has_no_reference():
    x = torch.randn(3, requires_grad=True)
    work = Workload(lambda t: (t * 2).sum(), (x,), grad_leaves=(x,))
    assert float64_step(work) is None
