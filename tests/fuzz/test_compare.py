"""The comparator: tolerances, NaN, the float64 reference, layouts, laws, eager's own bugs."""
import math

import pytest
import torch

from solder.fuzz.compare import law_differs, value_differs, verdict
from solder.fuzz.execute import Observed, correct_as_strided_scatter

nan, inf = math.nan, math.inf


def t(values, dtype=torch.float32):
    return torch.tensor(values, dtype=dtype)


def test_nan_where_eager_has_nan():
    assert value_differs(t([1.0, nan]), t([1.0, nan])) is None
    assert value_differs(t([1.0, nan]), t([1.0, 2.0])) is not None
    assert value_differs(t([1.0, 2.0]), t([1.0, nan])) is not None
    assert value_differs(t([inf, -inf]), t([inf, -inf])) is None
    assert value_differs(t([inf]), t([-inf])) is not None


def test_tolerance_by_dtype():
    assert value_differs(t([1.0]), t([1.00001])) is None
    assert value_differs(t([1.0]), t([1.001])) is not None
    assert value_differs(t([1.0], torch.bfloat16), t([1.0078125], torch.bfloat16)) is None
    assert value_differs(t([1.0], torch.float16), t([1.25], torch.float16)) is not None
    assert value_differs(t([3], torch.int64), t([4], torch.int64)) is not None
    assert value_differs(t([True], torch.bool), t([True], torch.bool)) is None


def test_dtype_and_shape_must_match():
    assert "dtype" in value_differs(t([1.0]), t([1.0], torch.float64))
    assert "shape" in value_differs(t([1.0]), t([[1.0]]))


def test_float64_reference_excuses_eager_rounding():
    eager, ref = t([1.0], torch.float16), t([1.2], torch.float64)
    assert value_differs(eager, t([1.2], torch.float16), ref) is None     # closer than eager
    assert value_differs(eager, t([1.5], torch.float16), ref) is None      # as noisy
    assert value_differs(eager, t([1.9], torch.float16), ref) is not None   # far noisier
    # a comparison that eager's rounding tipped: the compiled one agrees with the reference
    assert value_differs(t([True], torch.bool), t([False], torch.bool), t([False], torch.bool)) is None
    assert value_differs(t([True], torch.bool), t([False], torch.bool), t([True], torch.bool))
    # eager overflowed where the reference did not: the compiled value must be near the latter
    assert value_differs(t([nan]), t([5.0]), t([5.0], torch.float64)) is None
    assert value_differs(t([nan]), t([500.0]), t([5.0], torch.float64)) is not None


def test_eager_on_the_other_device_excuses_as_much_as_its_own_rounding():
    # H100 seed 414244: a layer norm's gradient through a constant row is a rounding residue
    # times 1/sqrt(eps); eager's CUDA kernel happened to leave almost none, its CPU kernel
    # 6e-5, the compiled one 6.1e-5
    ref = torch.tensor([-0.46267528686508547], dtype=torch.float64)
    eager, cpu = t([-0.4626752734184265]), t([-0.462736])
    compiled = t([-0.4626142382621765])
    assert value_differs(eager, compiled, ref) is not None
    assert value_differs(eager, compiled, ref, a=cpu) is None
    assert value_differs(eager, t([-0.4620]), ref, a=cpu) is not None   # far beyond either
    # only with the reference: the other run alone excuses nothing
    assert value_differs(eager, compiled, None, a=cpu) is not None
    both = [Observed("gradient of a2", eager)], [Observed("gradient of a2", compiled)]
    assert verdict(*both, [Observed("gradient of a2", ref)])
    assert not verdict(*both, [Observed("gradient of a2", ref)],
                       other=[Observed("gradient of a2", cpu)])


def test_the_cpu_run_is_left_out_for_random_programs_and_cpu_programs():
    from solder.fuzz.execute import run_on_cpu

    def make_inputs(up=False, grad=False):
        return [torch.ones(3)], [], []

    ns = {"torch": torch, "DEV": "cpu", "make_inputs": make_inputs}
    exec("def plain(x):\n    return (x * 2,)\n"
         "def noisy(x):\n    return (torch.rand(3, device=DEV) + x,)\n", ns)
    assert run_on_cpu(ns["plain"], make_inputs, {}, 0) is None     # already on the CPU
    ns["DEV"] = "cuda"
    assert run_on_cpu(ns["noisy"], make_inputs, {}, 0) is None      # other random numbers
    assert run_on_cpu(ns["plain"], make_inputs, {0: ("uniform", 0, 1)}, 0) is None
    out = run_on_cpu(ns["plain"], make_inputs, {}, 0)
    assert torch.equal(out[0].tensor, torch.full((3,), 2.0)) and ns["DEV"] == "cuda"


def test_low_precision_cancellation_is_judged_on_the_whole_tensor():
    ref = torch.tensor([0.58, -0.18, 0.81, 0.68, -0.43, -1.58], dtype=torch.float64)
    eager = t([0.574, -0.167, 0.844, 0.672, -0.445, -1.578], torch.bfloat16)
    one_cancelled = t([0.578, -0.182, 0.6875, 0.676, -0.426, -1.578], torch.bfloat16)
    assert value_differs(eager, one_cancelled) is not None
    assert value_differs(eager, one_cancelled, ref) is None
    far = t([0.578, -0.182, 3.0, 0.676, -0.426, -1.578], torch.bfloat16)
    assert value_differs(eager, far, ref) is not None


def test_lowest_precision_sets_the_tolerance():
    # a float32 value computed through float16 ops carries float16's rounding
    assert value_differs(t([1.0]), t([1.004])) is not None
    assert value_differs(t([1.0]), t([1.004]), floor=torch.float16) is None
    assert value_differs(t([1.0]), t([1.1]), floor=torch.float16) is not None
    assert value_differs(t([3], torch.int64), t([4], torch.int64), floor=torch.bfloat16)


def test_where_eager_is_ill_conditioned_its_own_sensitivity_counts():
    # a group norm over a group without variance: eager's rounding is amplified by
    # 1/sqrt(eps), and eager on inputs moved by rounding moves as much
    eager, jittered = t([40004.914, 1.0, 5.0]), t([40004.60, 1.0, 5.0])
    assert value_differs(eager, t([40004.5, 1.0, 5.0]), j=jittered) is None
    # the noise may land elsewhere: the tensor's largest move is the scale
    assert value_differs(eager, t([40004.914, 1.5, 5.0]), j=jittered) is None
    assert value_differs(eager, t([40004.5, 3.0, 5.0]), j=jittered) is not None
    assert value_differs(eager, t([40000.0, 1.0, 5.0]), j=jittered) is not None
    assert value_differs(t([1.0, 5.0]), t([1.01, 5.0]), j=t([1.0, 5.0])) is not None
    flips = t([True, False], torch.bool)
    assert value_differs(flips, t([False, False], torch.bool), j=t([False, False], torch.bool)) is None
    assert value_differs(flips, t([False, True], torch.bool), j=t([False, False], torch.bool))


def test_none_gradient_matches_zeros():
    assert value_differs(None, torch.zeros(3)) is None
    assert value_differs(torch.zeros(3), None) is None
    assert value_differs(None, torch.ones(3)) is not None


def _obs(label, tensor, **kw):
    o = Observed(label, tensor)
    for k, v in kw.items():
        setattr(o, k, v)
    return o


def test_output_layout_and_aliasing():
    x = torch.arange(6.0).view(2, 3)
    e = [_obs("output 0", x)]
    assert verdict(e, [_obs("output 0", x.clone())]) == []
    got = verdict(e, [_obs("output 0", x.t().contiguous().t())])
    assert got and got[0][1] == "stride"
    # dims of size 1 have no observable stride
    y = torch.zeros(3, 1)
    assert verdict([_obs("output 0", y)], [_obs("output 0", y, strides=(1, 7))]) == []
    # a new tensor with gaps: eager's strides are its kernels' choice, not a promise
    gaps = torch.zeros(6)[::3]
    assert verdict([_obs("output 0", gaps)], [_obs("output 0", gaps.clone())]) == []
    assert verdict([_obs("output 0", gaps, alias="a0")],
                   [_obs("output 0", gaps.clone(), alias="a0")])[0][1] == "stride"
    view = [_obs("output 0", x, alias="a0")]
    assert verdict(view, [_obs("output 0", x, alias=None)])[0][1] == "alias"
    assert verdict(view, [_obs("output 0", x, alias="a0", offset=1)])[0][1] == "alias"
    # nothing is observable through an output without elements
    empty = torch.zeros(1, 0)
    assert verdict([_obs("output 0", empty, alias="a0")], [_obs("output 0", empty)]) == []
    # the inputs after the call are the caller's tensors: only their values count
    assert verdict([_obs("input a0 after the call", x)],
                   [_obs("input a0 after the call", x.t().contiguous().t())]) == []


def test_random_values_by_their_law():
    g = torch.Generator().manual_seed(0)
    u = torch.rand(64, generator=g)
    assert law_differs(("uniform", 0.0, 1.0), u, None) is None
    assert law_differs(("uniform", 0.0, 1.0), u + 1, None) is not None
    assert law_differs(("uniform", 0.0, 1.0), torch.full((64,), 0.5), None) is not None
    n = torch.randn(64, generator=g)
    assert law_differs(("normal", 0.0, 1.0), n, None) is None
    assert law_differs(("normal", 0.0, 1.0), n * 5, None) is not None
    assert law_differs(("normal", 2.0, 1.0), n, None) is not None
    assert law_differs(("randint", 0, 3), torch.tensor([0, 1, 2, 2]), None) is None
    assert law_differs(("randint", 0, 3), torch.tensor([0, 3]), None) is not None
    assert law_differs(("perm", 4), torch.tensor([2, 0, 3, 1]), None) is None
    assert law_differs(("perm", 4), torch.tensor([2, 0, 2, 1]), None) is not None
    b = (torch.rand(200, generator=g) < 0.25).float()
    assert law_differs(("bernoulli", 0.25), b, None) is None
    assert law_differs(("bernoulli", 0.75), b, None) is not None
    x = torch.arange(1.0, 101.0)
    keep_e = torch.rand(100, generator=g) >= 0.5
    keep_c = torch.rand(100, generator=g) >= 0.5
    e, c = x * keep_e * 2, x * keep_c * 2
    assert law_differs(("dropout", 0.5), c, e) is None
    assert law_differs(("dropout", 0.5), x * 2, e) is not None          # nothing dropped
    assert law_differs(("dropout", 0.5), c * 3, e) is not None          # kept values wrong


def test_a_dropouts_kept_values_are_held_to_the_programs_precision():
    # fuzz seed 760323: layer_norm in float32, cast to float64, dropped out; the compiled
    # layer norm one float32 ulp from eager's is not wrong, a larger difference still is
    e = torch.tensor([2.3395590782165527, 0.0, 1.5], dtype=torch.float64)
    c = torch.tensor([2.3395588397979736, 0.0, 1.5], dtype=torch.float64)
    assert law_differs(("dropout", 0.5), c, e) is not None               # float64's tolerance
    assert law_differs(("dropout", 0.5), c, e, torch.float32) is None
    assert law_differs(("dropout", 0.5), c * 1.01, e, torch.float32) is not None


def _as_strided_scatter_gradient():
    x = torch.arange(4.0, requires_grad=True)
    y = torch.as_strided_scatter(x, torch.zeros(2), (2,), (2,))
    (g,) = torch.autograd.grad(y, x, torch.tensor([1.0, 2.0, 3.0, 4.0]))
    return g


def test_eager_as_strided_scatter_gradient_is_wrong_and_the_right_one_is_accepted():
    eager = _as_strided_scatter_gradient()
    with correct_as_strided_scatter():
        right = _as_strided_scatter_gradient()
    assert torch.equal(right, torch.tensor([0.0, 2.0, 0.0, 4.0]))
    assert torch.as_strided_scatter is not None and eager is not None
    label = "gradient of a0"
    e, fixed = [_obs(label, eager)], [_obs(label, right)]
    assert verdict(e, [_obs(label, right)], fixed=fixed) == []
    assert verdict(e, [_obs(label, eager)], fixed=fixed) == []
    assert verdict(e, [_obs(label, torch.ones(4))], fixed=fixed)
    if not torch.equal(eager, right):   # eager's bug, as torch 2.11 to 2.13 have it
        assert torch.equal(eager, torch.tensor([1.0, 0.0, 3.0, 0.0]))
        assert verdict(e, [_obs(label, right)])


def test_the_corrected_run_is_judged_against_its_own_float64_values():
    # a bfloat16 gradient summed from cancelling terms, where eager's as_strided_scatter
    # gradient is wrong (so the plain float64 reference is too): the compiled value is two
    # bfloat16 units of the large terms off the corrected bfloat16 run, and near the corrected
    # float64 one (seed 411101 on an H100)
    label = "gradient of a1"
    eager = [_obs(label, t([0.859375, 2.28125, -1.609375], torch.bfloat16))]
    fixed = [_obs(label, t([-0.0967, 0.4238, -2.5781], torch.bfloat16))]
    comp = [_obs(label, t([-0.1133, 0.4258, -2.5625], torch.bfloat16))]
    assert verdict(eager, comp, fixed=fixed)
    fixed[0].ref = _obs(label, t([-0.1112, 0.4237, -2.5772], torch.float64))
    assert verdict(eager, comp, fixed=fixed) == []
    comp = [_obs(label, t([0.5, 0.4258, -2.5625], torch.bfloat16))]
    assert verdict(eager, comp, fixed=fixed)


def test_strides_the_meta_functions_promise_are_accepted():
    # batch_norm of a permuted input: eager's kernel returns (2, 1), the meta functions that
    # torch.compile traces with promise (1, 2); a compiled output with either is right, a
    # view input's output with other strides is not
    import torch.nn.functional as F
    from solder.fuzz.compare import verdict
    from solder.fuzz.execute import Observed, attach_meta_strides

    def fn(a):
        return (F.batch_norm(a, None, None, training=True),)

    def make_inputs(up=False, grad=False):
        return [torch.randn(2, 2).t()], [], []
    eager = [Observed("output 0", fn(make_inputs()[0][0])[0])]
    attach_meta_strides(eager, fn, make_inputs, 0)
    meta = eager[0].meta_strides[0]
    if meta == eager[0].strides:
        pytest.skip("this torch's meta function agrees with its kernel")
    as_meta = torch.empty_strided((2, 2), meta).copy_(eager[0].tensor)
    assert verdict(eager, [Observed("output 0", as_meta)]) == []
    eager[0].meta_strides = []        # without the prediction, the same output differs
    assert verdict(eager, [Observed("output 0", as_meta)])[0][1] == "stride"


def test_strides_of_the_decomposed_trace_are_accepted():
    # stack of channels-last values: torch.compile traces it as cat of views, whose meta
    # strides (16, 1, 8, 4, 2, 2) are not eager's (16, 8, 4, 2, 1, 1) nor stack's own meta
    from solder.fuzz.compare import verdict
    from solder.fuzz.execute import Observed, attach_decomposed_strides, attach_meta_strides

    def fn(a):
        v1 = torch.stack([a, a], -2)
        return (torch.stack([v1, torch.exp2(v1)], -2),)

    def make_inputs(up=False, grad=False):
        return [torch.randn(1, 2, 2, 1).contiguous(memory_format=torch.channels_last)], [], []
    eager = [Observed("output 0", fn(make_inputs()[0][0])[0])]
    attach_meta_strides(eager, fn, make_inputs, 0)
    # (the Python dispatcher's run decomposes stack so too: only the C++ kernels' kept here)
    eager[0].meta_strides = eager[0].meta_strides[:1]
    traced = torch.empty_strided(eager[0].tensor.shape, (16, 1, 8, 4, 2, 2))
    traced.copy_(eager[0].tensor)
    if eager[0].strides == traced.stride():
        pytest.skip("this torch's stack agrees with the traced cat")
    assert verdict(eager, [Observed("output 0", traced)])[0][1] == "stride"
    attach_decomposed_strides(eager, fn, make_inputs, 0)
    assert verdict(eager, [Observed("output 0", traced)]) == []


def test_a_control_whose_backward_raises_still_explains_its_forward():
    # seed 60014: an output that views an input the program writes in place
    # (a0.contiguous().remainder_(a1)): under gradients AOTAutograd returns it as a new tensor,
    # and aot_eager's backward then raises on the saved input's version; Solder (which saves
    # such inputs by value) runs the backward, and its forward shares aot_eager's difference
    # (the program as seed 60014 drew it before 0681b6b added draws)
    from solder.fuzz.inputs import InputSpec
    from solder.fuzz.program import Program, Stmt
    from solder.fuzz.run import CONTROL_WRONG, RunConfig, check_program
    stmts = [
        ("v0 = torch.argsort(a0.round(decimals=3), dim=0, stable=True)", "v0", "argsort", "misc"),
        ("v1 = a0.sum(0, dtype=torch.float32)", "v1", "sum", "reduction"),
        ("v2 = a1[:, torch.tensor([0], device=DEV)]", "v2", "index", "gather"),
        ("v3 = torch.scatter_add(v2, 0, torch.tensor([2, 3, 0, 3, 0, 4, 2, 3], device=DEV)"
         ".view(4, 1, 1, 2), a0.expand(4, 1, 1, 2))", "v3", "scatter_add", "scatter"),
        ("v4 = a1.contiguous().remainder_(v3)", "v4", "remainder_", "inplace"),
        ("v5 = v4.chunk(3, -2)[0]", "v5", "split", "view"),
        ("v6 = v1.to(torch.float64)", "v6", "to_float64", "cast"),
        ("v7 = F.adaptive_avg_pool2d(v3, (1, 2))", "v7", "adaptive_avg_pool2d", "misc"),
        ("v8 = torch.mul(v6, v1)", "v8", "arith", "pointwise")]
    program = Program(
        seed=60014,
        inputs=[InputSpec("a0", (1,), "float32", "normal", (), 60014000),
                InputSpec("a1", (5, 1, 3, 2), "float32", "normal", (), 60014001)],
        stmts=[Stmt(code, target, op, family, None) for code, target, op, family in stmts],
        outputs=["v0", "v5", "v7", "v8"], note="fuzz program, seed 60014")
    out = check_program(program, RunConfig(backend="solder", device="cpu", grad=True,
                                           control="aot_eager"))
    assert out.kind == CONTROL_WRONG, out.detail
    assert "its backward raises" in out.control and "a new tensor" in out.control


def test_eager_batch_norm_gradient_of_a_permuted_input_is_wrong_and_the_right_one_is_accepted():
    # eager's CPU backward of batch_norm for a (1, 4, 2, 1) input permuted from (1, 1, 2, 4)
    # differs from the same input made contiguous; finite differences side with the latter
    import torch.nn.functional as F
    from solder.fuzz.execute import corrected_eager, run
    torch.manual_seed(0)
    base = torch.randn(1, 1, 2, 4, dtype=torch.float64)

    def make_inputs(up=False, grad=False):
        leaf = base.clone().requires_grad_(grad)
        return [leaf.permute(0, 3, 2, 1)], [], [("a0", leaf)]

    def fn(a0):
        return (F.batch_norm(a0, None, None, None, None, training=True),)
    eager = run(fn, make_inputs, {}, 0, grad=True)
    with corrected_eager():
        fixed = run(fn, make_inputs, {}, 0, grad=True)
    assert F.batch_norm is torch.nn.functional.batch_norm   # restored
    label = "gradient of a0"
    got = {o.label: o.tensor for o in fixed}
    if torch.allclose({o.label: o.tensor for o in eager}[label], got[label]):
        pytest.skip("this torch's batch_norm backward handles the permuted input")
    import copy
    right = copy.copy(eager)     # eager's run with the corrected gradient in it
    k = [o.label for o in eager].index(label)
    right[k] = copy.copy(eager[k])
    right[k].tensor = got[label]
    assert verdict(eager, right, fixed=fixed) == []
    assert [d[0] for d in verdict(eager, right)] == [label]


def test_the_reference_run_promotes_integers_to_float64():
    # seed 140765: a group norm of a row that is constant only in exact arithmetic, computed
    # from ``a0 / a0`` of an int64 input; the reference's division gave float32 (the default
    # dtype), so its group norm carried eager's float32 rounding and Solder's exact bias was
    # "wrong" against both
    from solder.fuzz.execute import run

    def make_inputs(up=False, grad=False):
        return [torch.tensor([-8, 0, 7, 8])], [], []

    def fn(a0):
        return (a0 / a0 * 3,)
    ref = run(fn, make_inputs, {}, 0, up=True)
    eager = run(fn, make_inputs, {}, 0)
    assert ref[0].tensor.dtype == torch.float64 and eager[0].tensor.dtype == torch.float32
    assert torch.get_default_dtype() == torch.float32   # restored


def test_rounding_noise_moves_ill_conditioned_values_and_not_others():
    # eager with each op's rounding moved by a unit: a sum of products barely moves, a group
    # norm of a row whose spread is below bfloat16's unit near 20 (a hypot of a large sum,
    # seed 171111) moves by whole units
    from solder.fuzz.execute import RoundingNoise
    x = torch.linspace(0.5, 1.5, 64, dtype=torch.float64).view(8, 8).float()
    with RoundingNoise():
        calm = (x * 3 + 1).sum(1)
    plain = (x * 3 + 1).sum(1)
    assert ((calm - plain).abs() <= 1e-4 * plain.abs()).all()
    a = torch.tensor([[0.47, -2.28, -0.65], [0.30, 1.64, -0.88]], dtype=torch.bfloat16)

    def ill(a):
        return torch.nn.functional.group_norm(torch.hypot(a, torch.tensor(-20.3)), 1)
    with RoundingNoise():
        moved = ill(a)
    assert (moved.float() - ill(a).float()).abs().max() > 0.1
    # and the verdict takes the noisy run's move as eager's sensitivity, no more
    e, c_near, c_far = t([1.0]), t([1.3]), t([2.5])
    noisy = [Observed("output 0", t([1.2]))]
    assert verdict([Observed("output 0", e)], [Observed("output 0", c_near)])
    assert not verdict([Observed("output 0", e)], [Observed("output 0", c_near)], noisy=noisy)
    assert verdict([Observed("output 0", e)], [Observed("output 0", c_far)], noisy=noisy)


def test_strides_of_dynamos_python_dispatcher_are_accepted():
    # seed 181567: Dynamo traces with the Python dispatcher on, where logical_xor of a
    # permuted and a broadcast input takes its Python reference's strides (1, 1, 2), not the
    # C++ meta kernel's (4, 2, 1) (which eager's kernel gives too). FakeTensorMode's cache
    # does not key on the dispatcher: the second run must not reuse the first's answer
    from solder.fuzz.compare import verdict
    from solder.fuzz.execute import Observed, attach_meta_strides

    def fn(a0, a1):
        return (torch.logical_xor(a0, a1),)

    def make_inputs(up=False, grad=False):
        return [torch.randn(2, 3)[:, ::3].permute(1, 0),
                torch.randint(-8, 9, (1, 2, 1))], [], []
    eager = [Observed("output 0", fn(*make_inputs()[0])[0])]
    attach_meta_strides(eager, fn, make_inputs, 0)
    traced = torch.empty_strided((1, 2, 2), (1, 1, 2), dtype=torch.bool).copy_(eager[0].tensor)
    if eager[0].strides == traced.stride():
        pytest.skip("this torch's Python reference agrees with its kernel")
    assert verdict(eager, [Observed("output 0", traced)]) == []


def test_strides_are_predicted_for_a_program_that_indexes_with_its_data():
    # seed 481332: an index read from a 0-d tensor (a data-dependent size on plain fake
    # tensors) beside logical_and of a broadcast and a permuted input, which Dynamo traces with
    # the meta strides (15, 3, 1) where eager's kernel gives (1, 3, 15): the fake tensors carry
    # their values, so the meta strides are predicted for this program too
    from solder.fuzz.compare import verdict
    from solder.fuzz.execute import Observed, attach_meta_strides

    def fn(a1, a2):
        return torch.logical_and(torch.logsumexp(a1.amax(2), -1), a1), (a1 + 2.0)[a2.remainder(3)]

    def make_inputs(up=False, grad=False):
        return [torch.randn(9, 5, 3)[::3].permute(2, 1, 0),
                torch.tensor([5, 7], dtype=torch.int32)[1:].view(())], [], []
    out = fn(*make_inputs()[0])[0]
    eager = [Observed("output 0", out)]
    attach_meta_strides(eager, fn, make_inputs, 0)
    traced = torch.empty_strided(out.shape, (15, 3, 1), dtype=out.dtype).copy_(out)
    if eager[0].strides == traced.stride():
        pytest.skip("this torch's meta function agrees with its kernel")
    assert (15, 3, 1) in eager[0].meta_strides
    assert verdict(eager, [Observed("output 0", traced)]) == []


def test_a_gradient_that_sums_infinities_may_be_nan_or_inf():
    # fuzz seed 194179: layer_norm's backward of an upstream gradient with one inf: eager's
    # CPU kernel gives NaN everywhere, PyTorch's decomposition (the CUDA kernel's formula)
    # -inf and NaN; in a gradient either is accepted where eager and the reference are not
    # finite, and nowhere else
    from solder.fuzz.compare import verdict
    from solder.fuzz.execute import Observed
    nan, inf = float("nan"), float("inf")
    eager = [Observed("gradient of a0", torch.tensor([nan, nan, 1.0]))]
    ref = [Observed("gradient of a0", torch.tensor([nan, inf, 1.0], dtype=torch.float64))]
    comp = [Observed("gradient of a0", torch.tensor([-inf, nan, 1.0]))]
    assert verdict(eager, comp, ref) == []
    assert verdict(eager, [Observed("gradient of a0", torch.tensor([-inf, nan, inf]))], ref)
    as_output = [Observed("output 0", t.tensor) for t in (eager[0], ref[0], comp[0])]
    assert verdict(as_output[:1], as_output[2:], as_output[1:2])


def test_the_corrected_run_computes_batch_norm_as_eagers_cuda_kernel():
    # fuzz seed 231415: on a constant channel eager's CPU batch norm (x * alpha + beta) leaves
    # a residue, its CUDA kernel ((x - mean) * invstd) and Solder give 0; elsewhere, and for
    # the running statistics, the two agree
    import torch.nn.functional as F
    from solder.fuzz.execute import _batch_norm_as_cuda_computes
    torch.manual_seed(0)
    x = torch.randn(5, 3, 4)
    x[:, 1] = 0.15498
    rm, rv = torch.zeros(3), torch.ones(3)
    rm2, rv2 = rm.clone(), rv.clone()
    w, b = torch.randn(3), torch.randn(3)
    ours = _batch_norm_as_cuda_computes(x, rm, rv, w, b, training=True, momentum=0.3)
    eager = F.batch_norm(x, rm2, rv2, w, b, training=True, momentum=0.3)
    assert torch.equal(ours[:, 1], b[1].expand(5, 4))     # exactly the bias
    torch.testing.assert_close(ours, eager)
    torch.testing.assert_close(rm, rm2)
    torch.testing.assert_close(rv, rv2)
    evaluated = _batch_norm_as_cuda_computes(x.permute(0, 1, 2), rm, rv, w, b)
    torch.testing.assert_close(evaluated, F.batch_norm(x, rm, rv, w, b))


def test_rounding_moved_all_one_way_tips_a_sum_on_an_integer_boundary():
    # fuzz seed 444225: int(sum(softmax(x))) is 1 in eager and 0 where the sum comes out
    # 0.99999994; random moves of each rounding cancel in the sum as often as not, every
    # rounding moved down tips it, and the verdict then accepts the compiled 0
    from solder.fuzz.execute import RoundingNoise, run

    x = torch.randn(5, generator=torch.Generator().manual_seed(2))   # sums to 1 + 2e-8

    def fn(a):
        return (torch.softmax(a, 0).sum(0, dtype=torch.float64).to(torch.int32),)

    def make_inputs(up=False, grad=False):
        return [x.double() if up else x.clone()], [], []

    eager = run(fn, make_inputs, {}, 0)
    assert eager[0].tensor.item() == 1
    down = run(fn, make_inputs, {}, 0, noise="down")
    assert down[0].tensor.item() == 0
    compiled = [Observed(o.label, torch.zeros_like(o.tensor)) if o.label == "output 0" else o
                for o in eager]
    assert verdict(eager, compiled, noisy=[down]) == []
    assert verdict(eager, compiled) != []
    with RoundingNoise(pattern="up"):
        up = x * 3
    assert torch.equal(up, ((x * 3).double() * (1 + torch.finfo(torch.float32).eps)).float())


def test_neighbours_moved_apart_break_a_tie_the_other_way():
    # fuzz seed 460913: argmin over two equal row sums of a softmax is 0 in eager (the first of
    # the tie) and 1 where the compiled sums differ by a unit; random moves leave the tie to
    # eager's side four times in nine over two runs, moving neighbours apart breaks it
    from solder.fuzz.execute import RoundingNoise, run

    x = torch.tensor([[0.5, 0.5], [1.0, 1.0]])

    def fn(a):
        return ((a * 3).argmin(),)

    def make_inputs(up=False, grad=False):
        return [x.double() if up else x.clone()], [], []

    eager = run(fn, make_inputs, {}, 0)
    assert eager[0].tensor.item() == 0
    apart = run(fn, make_inputs, {}, 0, noise="alternate")
    assert apart[0].tensor.item() == 1      # the elements moved up, down, up, down
    compiled = [Observed(o.label, torch.full_like(o.tensor, 1)) if o.label == "output 0" else o
                for o in eager]
    assert verdict(eager, compiled, noisy=[apart]) == []
    assert verdict(eager, compiled) != []
    with RoundingNoise(pattern="alternate"):
        y = x * 3
    eps = torch.finfo(torch.float32).eps
    assert torch.equal(y, ((x * 3).double() * (1 + eps * torch.tensor([[1.0, -1.0], [1.0, -1.0]])
                                              )).float())


def test_a_seed_whose_draws_all_fail_on_a_dead_gpu_ends_its_worker(monkeypatch):
    # a draw that hits a device-side assert leaves the process's CUDA context unusable: every
    # later draw of that worker was refused (354 seeds of one GPU run), so the outcome says
    # the device is gone and the parent starts a fresh worker
    from solder.fuzz import run as fuzz_run

    def no_program(seed, grad):
        raise RuntimeError(f"seed {seed}: no program eager runs in 50 draws")
    monkeypatch.setattr(fuzz_run, "generate", no_program)
    cfg = fuzz_run.RunConfig(backend="solder", device="cuda", grad=False)
    monkeypatch.setattr(fuzz_run, "_device_alive", lambda: False)
    out = fuzz_run.check_seed(7, cfg)
    assert out.kind == fuzz_run.EAGER_REJECTED and out.poisoned
    monkeypatch.setattr(fuzz_run, "_device_alive", lambda: True)
    assert not fuzz_run.check_seed(7, cfg).poisoned


def test_the_corrected_gradient_is_judged_by_its_own_rounding_noise():
    # seed 1001662: eager's as_strided_scatter derivative sends a zero gradient into a batch
    # norm over constant float16 channels, so eager's gradient, and its rounding-noise runs,
    # are exact zeros there; the right gradient (the corrected run, and Solder's) is that
    # norm's 1/sqrt(eps) times the upstream one, rounded to float16 per element, and its sum
    # over a channel a rounding residue of several units. Judged by eager's noise runs it was
    # "wrong"; the corrected run carries noise runs of its own
    import copy

    import torch.nn.functional as F
    from solder.fuzz.execute import run, run_corrected

    base = torch.tensor([[[1.4678], [-0.0381]]], dtype=torch.float16)
    src = torch.tensor([0.25, 3.0], dtype=torch.float16)
    index = torch.tensor([4, 1, 3, 1, 4, 1, 3, 3, 0, 4, 4, 0]).view(3, 2, 2)

    def make_inputs(up=False, grad=False):
        leaf = (base.double() if up else base.clone()).requires_grad_(grad)
        return [leaf.clone().expand(5, 2, 4)], [], [("a0", leaf)]

    def fn(a0):
        w = torch.tensor([-2.0, -0.25], dtype=a0.dtype)
        v0 = F.batch_norm(a0, None, None, w, torch.full((2,), -1.5, dtype=a0.dtype),
                          training=True)
        v3 = torch.as_strided_scatter(v0.contiguous(), src.to(a0.dtype), (2,), (18,), 11)
        return (torch.gather(v3, 0, index).expand(2, -1, -1, 2),)
    label = "gradient of a0"
    eager = run(fn, make_inputs, {}, 0, grad=True)
    fixed = run_corrected(fn, make_inputs, {}, 0, grad=True)
    k = [o.label for o in eager].index(label)
    fix = fixed[k]
    assert len(fix.noisy) >= 2 and fix.ref is not None
    moves = [float((n.tensor.double() - fix.tensor.double()).abs().max()) for n in fix.noisy]
    # the right gradient moves by units when its roundings move...
    from solder.fuzz.execute import NOISE_RUNS     # ...eager's wrong one is not
    eager_moves = [float((run(fn, make_inputs, {}, 0, grad=True, noise=n)[k].tensor.double()
                          - eager[k].tensor.double()).abs().max()) for n in NOISE_RUNS]
    assert max(moves) > 5 * max(eager_moves)
    # a compiled gradient the right one's rounding residue away passes; one far off does not
    shift = torch.tensor([[[max(moves)], [0.0]]], dtype=torch.float64)
    comp = copy.copy(eager)
    comp[k] = copy.copy(eager[k])
    comp[k].tensor = (fix.tensor.double() + shift).to(torch.float16)
    assert verdict(eager, comp, fixed=fixed) == []
    without = [copy.copy(o) for o in fixed]
    without[k].noisy = []
    assert [d[0] for d in verdict(eager, comp, fixed=without)] == [label]
    comp[k].tensor = (fix.tensor.double() + 40 * shift).to(torch.float16)
    assert [d[0] for d in verdict(eager, comp, fixed=fixed)] == [label]
