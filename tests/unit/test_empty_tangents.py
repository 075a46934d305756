"""Gradients from outputs with no elements are zeros (capture/empty_tangents.py): what a backward
computes from an empty tangent alone is replaced by zeros, so 0 * 0 / 0 in a derivative formula
does not reach an input's gradient as NaN where eager never runs that formula."""
import torch

from solder.capture.empty_tangents import zero_empty_tangent_gradients


def _xlogy_and_an_empty_view(a):
    # xlogy's derivative of its second argument multiplies the gradient by self / other: at
    # a == 0 that is 0 * 0 / 0 (fuzz seed 532948)
    v = torch.xlogy(a, a)
    return a.sin(), v.narrow(1, 1, 0)


def _grad(fn, backend, a):
    leaf = a.clone().requires_grad_()
    f = torch.compile(fn, backend=backend) if backend else fn
    out = f(leaf * 1)
    return torch.autograd.grad(out[0].sum(), leaf)[0]


def test_an_empty_outputs_gradient_leaves_no_nan():
    a = torch.tensor([[0.0, 0.0, 1.5], [2.0, 0.0, -1.0]])
    torch._dynamo.reset()
    expected = _grad(_xlogy_and_an_empty_view, None, a)
    got = _grad(_xlogy_and_an_empty_view, "solder", a)
    assert not got.isnan().any()
    torch.testing.assert_close(got, expected)


def test_only_values_from_empty_tangents_alone_are_replaced():
    from torch.fx.experimental.proxy_tensor import make_fx

    def backward(saved, tangents_1, tangents_2):
        dead = torch.zeros(2, 3).slice_scatter(tangents_2, 1, 1, 1) * saved / saved
        live = tangents_1 * saved
        return live + dead, dead.eq(0)
    args = (torch.tensor([[0.0, 1.0, 2.0], [3.0, 0.0, 1.0]]), torch.ones(2, 3), torch.ones(2, 0))
    gm = make_fx(backward)(*args)
    placeholders = [n for n in gm.graph.nodes if n.op == "placeholder"]
    for node, name in zip(placeholders, ("saved", "tangents_1", "tangents_2")):
        node.name = name
    before = gm(*args)
    assert before[0].isnan().any()
    assert zero_empty_tangent_gradients(gm) > 0
    after = gm(*args)
    torch.testing.assert_close(after[0], args[1] * args[0])   # the live part, no NaN
    assert after[1].all()                                     # a bool computed from the zeros
    assert zero_empty_tangent_gradients(gm) == 0              # done once


def test_a_graph_without_empty_tangents_is_left_alone():
    from torch.fx.experimental.proxy_tensor import make_fx
    gm = make_fx(lambda saved, tangents_1: tangents_1 * saved / saved)(torch.zeros(3),
                                                                       torch.ones(3))
    for node in gm.graph.nodes:
        if node.op == "placeholder" and node.name != "saved_1":
            node.name = node.name.replace("tangents_1_1", "tangents_1")
    code = gm.code
    assert zero_empty_tangent_gradients(gm) == 0 and gm.code == code


def test_zeros_standing_for_an_expanded_gradient_are_writable():
    # fuzz seed 551531: the gradient of a sum through an empty slice of its 0-d result is an
    # expand (stride 0); zeros laid out so would be a tensor no later write may go into
    def fn(a0, a1):
        return torch.maximum(a1, a0), a1.sum(-1).view(-1)[2:3]
    a0, a1 = torch.tensor([0.3]), torch.tensor([0.3, -1.0])
    grads = []
    for backend in (None, "solder"):
        torch._dynamo.reset()
        leaves = [a0.clone().requires_grad_(), a1.clone().requires_grad_()]
        f = torch.compile(fn, backend=backend) if backend else fn
        out = f(*leaves)
        grads.append(torch.autograd.grad(out[0].sum(), leaves))
    for got, want in zip(grads[1], grads[0]):
        torch.testing.assert_close(got, want)


def test_an_effect_token_is_not_an_empty_tangent():
    # linalg's error check runs under an effect token, an empty float tensor among the
    # backward's tangents: taken for an empty tangent, the check and the token were replaced
    # by zeros and AOTAutograd counted one output too many (OpInfo linalg.eigvals, a 0 x 0
    # input)
    x = torch.zeros(0, 0, requires_grad=True)
    torch._dynamo.reset()
    out = torch.compile(lambda x: torch.linalg.eigvals(x), backend="solder")(x)
    (g,) = torch.autograd.grad(out.real.sum(), x, allow_unused=True, materialize_grads=True)
    assert out.shape == (0,) and g.shape == (0, 0)
