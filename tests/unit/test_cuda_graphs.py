"""CUDA-graph decisions and bookkeeping without a GPU (runtime/cuda_graphs.py): what declines and
why, which inputs a graph writes, and a replayer driven by a stand-in for CUDA's graph capture
that re-runs the recorded call on the recorded memory, as a replay does. The real recordings are
tested on the GPU (tests/kernels/test_cuda_graphs_gpu.py)."""
import pytest
import torch
import torch.fx as fx
from torch._subclasses.fake_tensor import FakeTensorMode

from solder.runtime import cuda_graphs as cg

aten = torch.ops.aten


def _graph(build, devices=("cuda", "cuda")):
    """An FX graph of aten ops whose placeholders carry fake tensors on ``devices``."""
    g = fx.Graph()
    with FakeTensorMode():
        vals = [torch.empty(4, device=d) for d in devices]
    xs = []
    for i, v in enumerate(vals):
        p = g.placeholder(f"arg{i}")
        p.meta["val"] = v
        xs.append(p)
    g.output(build(g, xs))
    return fx.GraphModule(torch.nn.Module(), g)


def _add(g, xs):
    return (g.call_function(aten.add.Tensor, (xs[0], xs[1])),)


def test_what_declines_and_why():
    plain = _graph(_add)
    assert cg.decline_reason(plain, "inference", "") is None
    assert cg.decline_reason(plain, "forward", "") is None      # training graphs replay too
    assert cg.decline_reason(plain, "backward", "") is None
    assert "input arg1 is a CPU tensor" in cg.decline_reason(
        _graph(_add, ("cuda", "cpu")), "inference", "")
    assert "repeat the same numbers" in cg.decline_reason(
        plain, "inference", "seeds = S.draw_seeds(2, dev)\n")
    synced = _graph(lambda g, xs: (g.call_function(aten.nonzero.default, (xs[0],)),))
    assert "nonzero" in cg.decline_reason(synced, "inference", "")


def test_the_inputs_a_graph_writes():
    def build(g, xs):
        s = g.call_function(aten.add.Tensor, (xs[0], xs[1]))
        g.call_function(aten.copy_.default, (xs[1], s))
        g.call_function(aten.index_put_.default, (xs[2], [xs[0]], s))
        return (s,)
    assert cg.written_inputs(_graph(build, ("cuda",) * 3)) == {1, 2}
    assert cg.written_inputs(_graph(_add)) == set()


class _FakeCapture:
    """Stand-in for torch.cuda.CUDAGraph / torch.cuda.graph: the call made under the capture is
    remembered with its arguments, and replay() makes it again (the compiled functions below
    write into memory they allocated at the recording, as a captured graph's kernels do)."""
    recording = None

    def __init__(self):
        self.call = None

    def replay(self):
        self.call()


class _CapturingContext:
    def __init__(self, graph, pool=None, capture_error_mode="global"):
        self.graph = graph

    def __enter__(self):
        _FakeCapture.recording = self.graph

    def __exit__(self, *exc):
        _FakeCapture.recording = None


@pytest.fixture
def fake_cuda(monkeypatch):
    monkeypatch.setattr(torch.cuda, "CUDAGraph", _FakeCapture)
    monkeypatch.setattr(torch.cuda, "graph", _CapturingContext)
    monkeypatch.setattr(torch.cuda, "synchronize", lambda *a: None)
    monkeypatch.setattr(cg, "_pool", lambda device: None)
    monkeypatch.setattr(cg, "_all_cuda", lambda args: True)


class _Compiled:
    """``out = x * w + 1`` and a view of it, written into memory allocated at its first call
    under a capture (the recording's pool), and ``x`` written in place when asked."""

    def __init__(self, write_x=False):
        self.calls, self.captured, self.write_x = 0, 0, write_x

    def __call__(self, args):
        x, w = args
        self.calls += 1
        rec = _FakeCapture.recording
        if rec is None:   # a plain call (the warm-up, or declined)
            out = x * w + 1
            if self.write_x:
                x.mul_(2)
            return [out, out[1:]]
        self.captured += 1
        out = torch.empty_like(x)

        def run():
            torch.add(x * w, 1, out=out)
            if self.write_x:
                x.mul_(2)
        run()
        rec.call = run
        return [out, out[1:]]


def test_warm_up_record_then_replay_with_outputs_copied_out(fake_cuda):
    compiled = _Compiled()
    r = cg.Replayer(compiled, "g", static={1}, written=set(), max_sizes=4)
    w = torch.full((4,), 2.0)
    outs = []
    for k in range(4):
        x = torch.arange(4.0) + k
        outs.append((x, r([x, w])))
    # one warm-up, one recording (a capture and its first replay), then replays only
    assert compiled.calls == 2 and compiled.captured == 1 and r.replays == 3
    for x, (out, tail) in outs:   # every call's outputs kept their own values
        assert torch.equal(out, x * 2 + 1) and torch.equal(tail, out[1:])
        # ... and still alias each other, at the same offset
        assert tail.untyped_storage().data_ptr() == out.untyped_storage().data_ptr()
        assert tail.storage_offset() == out.storage_offset() + 1
    last = outs[-1][1][0]
    rec = next(iter(r.recordings.values()))
    assert last.data_ptr() != rec.outputs[0].data_ptr()   # not the recording's memory


def test_a_written_input_is_copied_back_and_a_moved_parameter_records_again(fake_cuda):
    compiled = _Compiled(write_x=True)
    r = cg.Replayer(compiled, "g", static={1}, written={0}, max_sizes=4)
    w = torch.full((4,), 3.0)
    for k in range(3):
        x = torch.arange(4.0) + k
        before = x.clone()
        out, _ = r([x, w])
        assert torch.equal(out, before * 3 + 1) and torch.equal(x, before * 2)
    assert compiled.captured == 1
    w2 = torch.full((4,), 5.0)          # the parameter now lives elsewhere: recorded again
    x = torch.ones(4)
    out, _ = r([x, w2])
    assert torch.equal(out, torch.full((4,), 6.0)) and compiled.captured == 2
    for k in range(cg.MAX_RERECORDS):   # ... and once it moves every call, it declines
        r([torch.ones(4), torch.full((4,), 5.0)])
    assert r.declined and "moves to a new address" in r.declined
    calls = compiled.calls
    out, _ = r([torch.ones(4), w])
    assert torch.equal(out, torch.full((4,), 4.0)) and compiled.calls == calls + 1


def test_one_recording_per_size_least_recently_used_dropped(fake_cuda):
    compiled = _Compiled()
    r = cg.Replayer(compiled, "g", static=set(), written=set(), max_sizes=2)
    for n in (3, 4, 3, 5, 3):
        for _ in range(2):
            out, _ = r([torch.ones(n), torch.ones(n)])
            assert torch.equal(out, torch.full((n,), 2.0))
    assert [key[0][0] for key in r.recordings] == [(5,), (3,)]


def test_an_output_on_an_input_copy_is_rebased_onto_the_callers_input(fake_cuda):
    class ViewOfInput:
        def __call__(self, args):
            x, = args
            rec = _FakeCapture.recording
            if rec is not None:
                rec.call = lambda: None
            return [x[1:]]
    r = cg.Replayer(ViewOfInput(), "g", static=set(), written=set(), max_sizes=2)
    base = torch.arange(6.0)
    for _ in range(3):
        x = base[1:5]
        view, = r([x])
        assert view.untyped_storage().data_ptr() == base.untyped_storage().data_ptr()
        assert view.storage_offset() == 2 and torch.equal(view, base[2:5])


def test_a_recording_that_fails_declines_with_its_reason(fake_cuda, monkeypatch):
    class Generator:   # torch's CUDA generator: a failed capture leaves its state capturing
        def __init__(self):
            self.state = "before"

        def clone_state(self):
            return f"copy of {self.state}"

        def graphsafe_set_state(self, state):
            self.state = state
    gen = Generator()
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 1)
    monkeypatch.setattr(torch.cuda, "default_generators", (gen,))
    streams = ["caller's"]   # and the capture left the process on its side stream
    monkeypatch.setattr(torch.cuda, "current_stream", lambda *a: streams[-1])
    monkeypatch.setattr(torch.cuda, "set_stream", streams.append)
    routed = []     # the allocator's routing of new blocks into the pool, left on by it too
    monkeypatch.setattr(torch.cuda, "current_device", lambda: 0)
    monkeypatch.setattr(torch._C, "_cuda_endAllocateToPool",
                        lambda device, pool: routed.append((device, pool)), raising=False)

    class SyncsInCapture:
        calls = 0

        def __call__(self, args):
            self.calls += 1
            if _FakeCapture.recording is not None:
                gen.state = "capturing"
                streams.append("capture side stream")
                raise RuntimeError("operation not permitted when stream is capturing")
            return [args[0] + 1]
    said = []
    r = cg.Replayer(SyncsInCapture(), "g", static=set(), written=set(), max_sizes=2,
                    on_decline=said.append)
    for _ in range(3):
        out, = r([torch.zeros(2)])
        assert torch.equal(out, torch.ones(2))
    assert said and "stream is capturing" in said[0] and "recording failed" in r.declined
    assert gen.state == "copy of before"   # random ops after it still work
    assert streams[-1] == "caller's"
    assert routed == [(0, None)]        # (the fake pool's id is None)
    assert cg._ABANDONED and cg._ABANDONED[-1][1] is None   # a new pool for the next capture
    assert "g: recording failed" in cg.STATS["declines"][-1]


def test_explain_says_why_a_graph_is_not_replayed():
    import solder
    report = solder.explain(lambda x: x.sin() + 1, torch.ones(8, device="cpu"),
                            options={"cuda_graphs": True})
    # (generated and interpreted, or run in ATen where no interpreter is on: either says why)
    assert "CUDA graphs: not replayed: " in str(report) and "CPU tensor" in str(report)
    plain = solder.explain(lambda x: x.sin() + 1, torch.ones(8, device="cpu"))
    assert "CUDA graphs" not in str(plain)


def test_a_forwards_saved_values_are_handed_out_and_a_held_one_is_never_overwritten(fake_cuda):
    # output 1 (a view of the graph's buffer) stands for a value saved for the backward: it is
    # the recording's own memory, not a copy; while a caller (autograd, before the backward)
    # still holds the last replay's, the next call runs without the graph
    compiled = _Compiled()
    r = cg.Replayer(compiled, "fw", static={1}, written=set(), max_sizes=2, kept={1})
    w = torch.full((4,), 2.0)
    r([torch.zeros(4), w])                                   # warm-up
    out, saved = r([torch.ones(4), w])                       # recorded, replayed
    rec = next(iter(r.recordings.values()))
    assert saved.data_ptr() == rec.outputs[1].data_ptr()     # handed out, not copied
    assert saved is not rec.outputs[1]                       # (a tensor of its own on it)
    assert out.data_ptr() != rec.outputs[0].data_ptr()       # the other outputs: copies
    held = saved                                             # a backward not yet run
    del saved
    out2, saved2 = r([torch.full((4,), 5.0), w])             # two forwards before a backward
    assert r.unreplayed == 1 and compiled.calls == 3
    assert torch.equal(held, torch.full((3,), 3.0))          # the first forward's, intact
    assert torch.equal(saved2, torch.full((3,), 11.0))
    del held, saved2                                         # backward ran: replays again
    replays = r.replays
    _, saved3 = r([torch.full((4,), 7.0), w])
    assert r.replays == replays + 1 and torch.equal(saved3, torch.full((3,), 15.0))


def test_a_backward_reads_saved_values_where_the_forward_left_them(fake_cuda):
    compiled = _Compiled()
    r = cg.Replayer(compiled, "bw", static=set(), written=set(), max_sizes=2, in_place={0})
    saved, g = torch.ones(4), torch.full((4,), 2.0)
    r([saved, g])
    r([saved, g])                                            # recorded where saved lies
    rec = next(iter(r.recordings.values()))
    assert rec.inputs[0] is None and rec.read_at[0] == saved.data_ptr()   # read in place
    saved.fill_(4.0)
    out, _ = r([saved, g])
    assert torch.equal(out, torch.full((4,), 9.0)) and r.unreplayed == 0
    elsewhere = torch.full((4,), 3.0)                        # a forward that ran without its graph
    calls = compiled.calls
    out, _ = r([elsewhere, g])
    assert torch.equal(out, torch.full((4,), 7.0)) and compiled.calls == calls + 1
    assert r.unreplayed == 1


def test_training_graphs_replay_unless_turned_off(monkeypatch):
    from solder import config as solder_config
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)

    class Report:
        cuda_graphs = None
    compiled = lambda args: args   # noqa: E731
    for kind in ("forward", "backward"):
        report = Report()
        out = cg.wrap(compiled, _graph(_add), kind, "g",
                      solder_config.resolve({"cuda_graph_training": False}), report)
        assert out is compiled and "cuda_graph_training is off" in report.cuda_graphs
    report = Report()
    out = cg.wrap(compiled, _graph(_add), "backward", "g", solder_config.resolve({}), report)
    assert isinstance(out, cg.Replayer) and "replayed" in report.cuda_graphs
    assert out.in_place == {0, 1}      # a backward's non-tangent inputs: read where they lie
