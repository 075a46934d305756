"""topk and kthvalue on inputs with ties: any index of an equal element is right (eager's choice
is unspecified), so the suite checks values exactly and that each index points at its value."""
from types import SimpleNamespace

import torch

from solder.conformance.compare import tied_indices_agree


def _sample(x, *args, **kwargs):
    return SimpleNamespace(input=x, args=args, kwargs=kwargs)


def _result(out):
    return {"output": out, "args after the call": [], "kwargs after the call": {}}


def test_another_index_of_a_tied_value_is_accepted_and_a_wrong_one_is_not():
    x = torch.tensor([[3, 1, 3, 0], [2, 2, 5, 5]])
    expected = torch.topk(x, 1, dim=1)                      # values 3 and 5
    tied = torch.return_types.topk((expected.values, torch.tensor([[2], [3]])))
    assert not torch.equal(tied.indices, expected.indices)
    assert tied_indices_agree(_result(tied), _result(expected), "topk", _sample(x, 1, 1))
    wrong = torch.return_types.topk((expected.values, torch.tensor([[1], [3]])))   # x[0,1] = 1
    assert not tied_indices_agree(_result(wrong), _result(expected), "topk", _sample(x, 1, 1))
    other_values = torch.return_types.topk((expected.values + 1, expected.indices))
    assert not tied_indices_agree(_result(other_values), _result(expected), "topk",
                                  _sample(x, 1, 1))


def test_kthvalue_without_keepdim_and_ops_not_listed():
    x = torch.tensor([[4, 1, 1, 7], [0, 0, 9, 9]])
    expected = torch.kthvalue(x, 1, 1)                      # values 1 and 0, dim reduced
    tied = torch.return_types.kthvalue((expected.values, torch.tensor([2, 1])))
    assert tied_indices_agree(_result(tied), _result(expected), "kthvalue", _sample(x, 1, 1))
    out_of_range = torch.return_types.kthvalue((expected.values, torch.tensor([2, 4])))
    assert not tied_indices_agree(_result(out_of_range), _result(expected), "kthvalue",
                                  _sample(x, 1, 1))
    # an op whose indices are not ambiguous keeps the exact comparison
    m = torch.max(x, 1)
    assert not tied_indices_agree(_result(m), _result(m), "max", _sample(x, 1))
