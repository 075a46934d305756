"""CUDA graphs on the GPU (runtime/cuda_graphs.py): recorded inference graphs replay with eager's
values, buffers written in place (a KV cache) included, kept outputs keep their values, chained
compiled functions, symbolic sizes, and the graphs that decline still give eager's values. The
decisions and bookkeeping alone are tested on the CPU (tests/unit/test_cuda_graphs.py)."""
import pytest
import torch

from solder.runtime import cuda_graphs as cg

pytestmark = pytest.mark.gpu


class _Decoder(torch.nn.Module):
    """One step of a toy decoder with a KV cache in a buffer, written in place each step."""

    def __init__(self, d=64, steps=16):
        super().__init__()
        self.proj = torch.nn.Linear(d, d)
        self.register_buffer("cache", torch.zeros(steps, d))

    def forward(self, x, pos):
        h = torch.tanh(self.proj(x))
        self.cache.index_copy_(0, pos, h)
        w = torch.softmax(self.cache @ h.t(), dim=0)
        return (w * self.cache).sum(0, keepdim=True) + h


def _replays():
    return cg.STATS["replays"]


def test_a_decode_loop_with_its_cache_written_in_place_equals_eager():
    torch.manual_seed(0)
    eager = _Decoder().cuda()
    compiled_model = _Decoder().cuda()
    compiled_model.load_state_dict(eager.state_dict())
    step = torch.compile(compiled_model, backend="solder", mode="reduce-overhead")
    before = _replays()
    x = torch.randn(1, 64, device="cuda")
    for t in range(12):
        pos = torch.tensor([t], device="cuda")
        with torch.no_grad():
            want = eager(x, pos)
            got = step(x, pos)
        torch.testing.assert_close(got, want)
        torch.testing.assert_close(compiled_model.cache, eager.cache)
        x = want.detach()
    assert _replays() - before >= 9   # recorded at the second call, replayed after
    # the weights and the caches are read and written in place, not copied each call
    import re

    import solder
    report = str(solder.explain(_Decoder().cuda().requires_grad_(False), x,
                                torch.tensor([0], device="cuda"),
                                options={"cuda_graphs": True}))
    assert int(re.search(r"(\d+) parameters and buffers read in place", report).group(1)) >= 2


def test_outputs_kept_across_calls_keep_their_values():
    f = torch.compile(lambda x: (x * 2).sin(), backend="solder", mode="reduce-overhead")
    xs = [torch.randn(1000, device="cuda") for _ in range(5)]
    before = _replays()
    outs = [f(x) for x in xs]
    for x, out in zip(xs, outs):
        torch.testing.assert_close(out, (x * 2).sin())
    # recorded at the second call (and replayed then), replayed at the three after it
    assert _replays() - before == 4, cg.STATS["declines"][-3:]


def test_a_failed_recording_leaves_random_numbers_working():
    # torch leaves its generators capturing after a capture that fails; every later random op
    # of the process raised until the Replayer gave them their states back
    def syncs(args):
        torch.cuda.synchronize()   # not allowed while capturing
        return [args[0] + 1]
    r = cg.Replayer(syncs, "syncs", static=set(), written=set(), max_sizes=2)
    stream = torch.cuda.current_stream()
    for _ in range(3):
        out, = r([torch.zeros(4, device="cuda")])
        assert torch.equal(out, torch.ones(4, device="cuda"))
    assert r.declined and "recording failed" in r.declined
    assert torch.cuda.current_stream() == stream   # not left on the capture's side stream
    recorded = cg.STATS["recordings"]
    f = torch.compile(lambda x: x.cos() + 1, backend="solder", mode="reduce-overhead")
    for _ in range(3):
        f(torch.ones(8, device="cuda"))
    assert cg.STATS["recordings"] == recorded + 1, cg.STATS["declines"][-2:]
    torch.manual_seed(1)
    a = torch.randn(8, device="cuda")
    torch.manual_seed(1)
    assert torch.equal(a, torch.randn(8, device="cuda"))


def test_chained_compiled_functions():
    f = torch.compile(lambda x: x.cos() * 3, backend="solder", mode="reduce-overhead")
    g = torch.compile(lambda y: (y + 1).relu().sum(0), backend="solder", mode="reduce-overhead")
    for _ in range(4):
        x = torch.randn(64, 32, device="cuda")
        torch.testing.assert_close(g(f(x)), ((x.cos() * 3) + 1).relu().sum(0))


def test_symbolic_sizes_record_one_graph_per_size():
    f = torch.compile(lambda x: torch.softmax(x * 2, -1), backend="solder",
                      mode="reduce-overhead", dynamic=True)
    recorded = cg.STATS["recordings"]
    for n in (8, 16, 8, 24, 16, 8):
        for _ in range(2):
            x = torch.randn(4, n, device="cuda")
            torch.testing.assert_close(f(x), torch.softmax(x * 2, -1))
    assert cg.STATS["recordings"] - recorded == 3, cg.STATS["declines"][-3:]


def test_graphs_that_decline_say_why_and_stay_right():
    import solder

    def noisy(x):
        return torch.nn.functional.dropout(x, 0.5, training=True) + x

    report = solder.explain(noisy, torch.ones(256, device="cuda"),
                            options={"cuda_graphs": True})
    assert "repeat the same numbers" in str(report)
    f = torch.compile(noisy, backend="solder", mode="reduce-overhead")
    outs = [f(torch.ones(256, device="cuda")) for _ in range(3)]
    assert not torch.equal(outs[1], outs[2])   # new numbers each call
    for out in outs:
        assert set(out.unique().tolist()) <= {1.0, 3.0}
    train = solder.explain(lambda x: (x * 2).sum(), torch.ones(4, device="cuda",
                                                             requires_grad=True),
                           options={"cuda_graphs": True, "cuda_graph_training": False})
    assert "cuda_graph_training is off" in str(train)
    train = solder.explain(lambda x: (x * 2).sum(), torch.ones(4, device="cuda",
                                                             requires_grad=True),
                           options={"cuda_graphs": True})    # on by default
    assert "CUDA graphs: replayed" in str(train)


def test_explain_says_a_graph_is_replayed():
    import solder
    report = solder.explain(lambda x: x.sin() + 1, torch.ones(8, device="cuda"),
                            options={"cuda_graphs": True})
    assert "CUDA graphs: replayed" in str(report)


TRAINING = {"cuda_graphs": True, "cuda_graph_training": True}


def _mlp():
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(32, 64), torch.nn.LayerNorm(64), torch.nn.GELU(),
                               torch.nn.Linear(64, 8)).cuda()


def test_a_training_loop_replays_forward_and_backward_and_equals_eager():
    ref, model = _mlp(), _mlp()
    step = torch.compile(lambda m, x: m(x).square().mean(), backend="solder",
                         options=TRAINING)
    opts = [torch.optim.SGD(m.parameters(), lr=0.1) for m in (ref, model)]
    replays = cg.STATS["replays"]
    for k in range(6):
        x = torch.randn(16, 32, device="cuda")
        losses = []
        for m, opt, f in ((ref, opts[0], lambda m, x: m(x).square().mean()),
                          (model, opts[1], step)):
            opt.zero_grad(set_to_none=True)
            loss = f(m, x)
            loss.backward()
            losses.append(loss.detach().clone())
            opt.step()
        torch.testing.assert_close(losses[1], losses[0], rtol=1e-4, atol=1e-5)
    for p, q in zip(ref.parameters(), model.parameters()):
        torch.testing.assert_close(q, p, rtol=1e-4, atol=1e-5)
    # forward and backward replayed from the third step on (warm-up, recording)
    assert cg.STATS["replays"] - replays >= 2 * 4, cg.STATS["declines"][-3:]


def test_two_forwards_before_one_backward_never_overwrite_saved_values():
    ref, model = _mlp(), _mlp()
    step = torch.compile(lambda m, x: m(x).square().mean(), backend="solder",
                         options=TRAINING)
    for k in range(4):   # recorded and replayed first
        step(model, torch.randn(16, 32, device="cuda")).backward()
    model.zero_grad(set_to_none=True)
    unreplayed = cg.STATS.get("unreplayed", 0)
    xs = [torch.randn(16, 32, device="cuda") for _ in range(2)]
    (step(model, xs[0]) + step(model, xs[1])).backward()
    (ref(xs[0]).square().mean() + ref(xs[1]).square().mean()).backward()
    for p, q in zip(ref.parameters(), model.parameters()):
        torch.testing.assert_close(q.grad, p.grad, rtol=1e-4, atol=1e-5)
    assert cg.STATS.get("unreplayed", 0) > unreplayed   # the second forward ran without it
