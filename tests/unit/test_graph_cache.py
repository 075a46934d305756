"""The whole-graph cache: a second compile of the same graph skips lowering, scheduling and codegen,
runs the same kernels and reports the same; anything that changes generated code misses; damaged
entries recompile; cache=False writes nothing; a second process hits."""
from __future__ import annotations

import math
import os
import subprocess
import sys
import textwrap
import warnings
from pathlib import Path

import pytest
import torch
import torch._dynamo

import solder
from solder.lower.graph import GraphLowering
from solder.runtime.cache import CacheWarning

REPO = Path(__file__).resolve().parents[2]


def entries(d: Path) -> list[Path]:
    root = d / "entries"
    return sorted(root.iterdir()) if root.exists() else []


def no_lowering(monkeypatch):
    def boom(self):
        raise AssertionError("lowering ran on a cache hit")
    monkeypatch.setattr(GraphLowering, "run", boom)


def explain(fn, *args, d: Path, **options):
    return solder.explain(fn, *args, options={"cache_dir": str(d), **options})


def states(report) -> list:
    return [g.timings.get("cache") for g in report.graphs]


def content(g):
    """What explain shows of a graph, less its name and timings."""
    return ([(k.name, k.source, list(k.ops), list(k.source_lines)) for k in g.kernels],
            [(c.op, c.reason) for c in g.externs], [(c.op, c.reason) for c in g.fallbacks],
            list(g.user_kernels), g.wrapper.replace(g.name, "GRAPH"))


def f(x, w):
    a = torch.mm(x.relu() + 1, w)
    return torch.mm(a.relu() + 1, w).sum(0), x.cos() * 2


def test_second_compile_hits_and_matches(tmp_path, monkeypatch, device):
    x, w = torch.randn(8, 8, device=device), torch.randn(8, 8, device=device)
    first = explain(f, x, w, d=tmp_path)
    assert states(first) == ["miss"]
    assert len(entries(tmp_path)) == 1
    no_lowering(monkeypatch)
    second = explain(f, x, w, d=tmp_path)
    assert states(second) == ["hit"]
    assert content(second.graphs[0]) == content(first.graphs[0])
    assert second.graphs[0].timings["kernels"] == first.graphs[0].timings["kernels"] > 0
    assert f"'{second.graphs[0].name}'" in second.graphs[0].wrapper  # renamed to this compile
    torch._dynamo.reset()
    got = torch.compile(f, backend="solder", options={"cache_dir": str(tmp_path)})(x, w)
    for g, e in zip(got, f(x, w)):
        torch.testing.assert_close(g, e)


def test_a_hit_reuses_the_launch_configs_and_chooses_none(tmp_path, monkeypatch, device):
    import json

    from solder.runtime.launch import KernelRunner

    def g(x):
        return (x.cos() * 2).sum(1), x.exp()
    x = torch.randn(8, 32, device=device)
    explain(g, x, d=tmp_path)
    (entry,) = entries(tmp_path)
    meta = json.loads(next(p for p in entry.rglob("meta.json")).read_bytes())
    stored = meta["launch_configs"]
    assert set(stored) == {k["name"] for k in meta["kernels"]} and all(stored.values())
    no_lowering(monkeypatch)

    def no_choosing(self, *a):
        raise AssertionError("a launch config was chosen again on a cache hit")
    monkeypatch.setattr(KernelRunner, "_choose", no_choosing)
    torch._dynamo.reset()
    got = torch.compile(g, backend="solder", options={"cache_dir": str(tmp_path)})(x)
    for a, b in zip(got, g(x)):
        torch.testing.assert_close(a, b)


def test_a_hit_precompiles_the_kept_configs_of_the_first_call(tmp_path, monkeypatch, device):
    # the entry keeps the compile jobs of the configs the first call launched; a hit hands
    # exactly those to the parallel precompile (Triton then reads its binaries back)
    from solder.runtime import precompile as pre
    from solder.runtime.launch import KernelRunner
    launched, handed = set(), []
    real_launch, real_start = KernelRunner._launch, pre.start

    def record_launch(self, cfg, args, xnumel, key=None):
        launched.add((self.src.name, tuple(a.dtype if isinstance(a, torch.Tensor) else a
                                           for a in args), tuple(sorted(cfg.items()))))
        return real_launch(self, cfg, args, xnumel, key)

    def record_start(jobs, device, threads, stats=None, on_device=None, processes=0):
        handed.append((jobs, device))
        return real_start(jobs, device, threads, stats, on_device, processes)
    monkeypatch.setattr(KernelRunner, "_launch", record_launch)
    monkeypatch.setattr(pre, "start", record_start)

    def g(x, y):
        return (x.cos() * 2).sum(1), (x.exp() + y).to(torch.float16)
    x, y = torch.randn(8, 32, device=device), torch.randn(8, 32, device=device)
    assert states(explain(g, x, y, d=tmp_path)) == ["miss"]
    handed.clear()
    assert states(explain(g, x, y, d=tmp_path)) == ["hit"]
    ((jobs, dev),) = handed
    assert dev == x.device and jobs
    assert {(j.kernel, tuple(j.args), tuple(sorted(j.cfg.items()))) for j in jobs} == launched


def test_a_damaged_precompile_list_is_a_miss(tmp_path, device):
    import json
    x = torch.randn(8, 32, device=device)
    explain(lambda x: x.exp().sum(1), x, d=tmp_path)
    (entry,) = entries(tmp_path)
    meta_path = next(entry.rglob("meta.json"))
    meta = json.loads(meta_path.read_bytes())
    meta["precompile"]["jobs"][0][1][0] = "dtype:not_a_dtype"
    files = {p.name: p.read_bytes() for p in entry.iterdir() if p.name != "manifest.json"}
    files["meta.json"] = json.dumps(meta).encode()
    from solder.runtime.cache import DiskCache
    DiskCache(tmp_path).put(entry.name, files)  # a well-formed entry with a bad job in it
    torch._dynamo.reset()
    assert states(explain(lambda x: x.exp().sum(1), x, d=tmp_path)) == ["miss"]


def test_forward_and_backward_graphs_hit(tmp_path, monkeypatch, device):
    def g(x):
        return (x.sin() * x).sum(1)
    x = torch.randn(4, 16, device=device, requires_grad=True)
    first = explain(g, x, d=tmp_path)
    assert states(first) == ["miss", "miss"]
    no_lowering(monkeypatch)
    second = explain(g, x, d=tmp_path)
    assert states(second) == ["hit", "hit"]
    assert [content(a) for a in second.graphs] == [content(a) for a in first.graphs]
    torch._dynamo.reset()
    y = torch.compile(g, backend="solder", options={"cache_dir": str(tmp_path)})(x)
    (grad,) = torch.autograd.grad(y.sum(), x)
    torch.testing.assert_close(grad, x.detach().sin() + x.detach() * x.detach().cos())


def test_identical_kernels_stay_aliases_after_a_hit(tmp_path, monkeypatch, device):
    def layers(x, w):
        return torch.mm(torch.tanh(torch.mm(torch.tanh(x), w)), w)
    x, w = torch.randn(8, 8, device=device), torch.randn(8, 8, device=device)
    first = explain(layers, x, w, d=tmp_path)
    assert first.graphs[0].timings["distinct_kernels"] < first.graphs[0].timings["kernels"]
    no_lowering(monkeypatch)
    second = explain(layers, x, w, d=tmp_path)
    assert states(second) == ["hit"]
    t, t0 = second.graphs[0].timings, first.graphs[0].timings
    assert (t["kernels"], t["distinct_kernels"]) == (t0["kernels"], t0["distinct_kernels"])
    torch._dynamo.reset()
    compiled = torch.compile(layers, backend="solder", options={"cache_dir": str(tmp_path)})
    torch.testing.assert_close(compiled(x, w), layers(x, w))


def test_dynamic_shapes_hit_and_run_other_sizes(tmp_path, monkeypatch, device):
    def g(x):
        return (x * 2).softmax(-1)
    opts = {"cache_dir": str(tmp_path)}
    torch.compile(g, backend="solder", dynamic=True, options=opts)(torch.randn(3, 5, device=device))
    no_lowering(monkeypatch)
    torch._dynamo.reset()
    compiled = torch.compile(g, backend="solder", dynamic=True, options=opts)
    for shape in [(3, 5), (6, 7)]:
        x = torch.randn(*shape, device=device)
        torch.testing.assert_close(compiled(x), g(x))


@pytest.mark.parametrize("change", ["dtype", "shape", "strides", "fuse", "check_input_layouts"])
def test_what_changes_code_misses(tmp_path, monkeypatch, device, change):
    def g(x):
        return x.exp() + 1
    x = torch.randn(4, 6, device=device)
    assert states(explain(g, x, d=tmp_path)) == ["miss"]
    options = {}
    if change == "dtype":
        x = x.double()
    elif change == "shape":
        x = torch.randn(4, 7, device=device)
    elif change == "strides":
        x = torch.randn(6, 4, device=device).t()
    else:
        options[change] = False
    again = explain(g, x, d=tmp_path, **options)
    assert states(again) == ["miss"]
    assert len(entries(tmp_path)) == 2
    torch._dynamo.reset()
    out = torch.compile(g, backend="solder",
                        options={"cache_dir": str(tmp_path), **options})(x)
    torch.testing.assert_close(out, g(x))


def test_damaged_entry_is_detected_and_recompiled(tmp_path, device):
    x = torch.randn(8, 8, device=device)
    w = torch.randn(8, 8, device=device)
    explain(f, x, w, d=tmp_path)
    (entry,) = entries(tmp_path)
    kernels = entry / "kernels.py"
    data = bytearray(kernels.read_bytes())
    data[len(data) // 2] ^= 0x41  # inside the kernels' code
    kernels.chmod(0o600)
    kernels.write_bytes(bytes(data))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        again = explain(f, x, w, d=tmp_path)
    assert any(issubclass(w_.category, CacheWarning) and "damaged" in str(w_.message)
               for w_ in caught)
    assert states(again) == ["miss"]
    torch._dynamo.reset()
    got = torch.compile(f, backend="solder", options={"cache_dir": str(tmp_path)})(x, w)
    for g, e in zip(got, f(x, w)):
        torch.testing.assert_close(g, e)
    assert states(explain(f, x, w, d=tmp_path)) == ["hit"]  # rewritten by the recompile


def test_cache_off_writes_no_entry(tmp_path, device):
    x = torch.randn(5, device=device)
    for _ in range(2):
        r = explain(lambda t: t * 3, x, d=tmp_path, cache=False)
        assert states(r) == ["off"]
        assert "cache_key" not in r.graphs[0].timings   # no key worked out
    assert entries(tmp_path) == []


def test_the_key_has_its_own_stage_on_a_miss_and_a_hit(tmp_path, device):
    # a warm start's own time is the key, the load and the precompile: the report shows each
    x = torch.randn(5, device=device)
    for state in ("miss", "hit"):
        r = explain(lambda t: t * 3, x, d=tmp_path)
        assert states(r) == [state]
        t = r.graphs[0].timings
        assert isinstance(t["cache_key"], float) and t["cache_key"] > 0
        assert "cache key" in solder.pipeline.compile_log_line(r.graphs[0])


def test_a_kernel_that_fails_is_not_cached(tmp_path, monkeypatch, device):
    from solder.codegen import scalar_ops
    x = torch.randn(4, device=device)
    opts = {"cache_dir": str(tmp_path)}
    with monkeypatch.context() as m:
        m.setitem(scalar_ops.SCALAR_OPS, "exp", lambda a, d: f"tl.no_such_fn({a[0]})")
        with pytest.raises(Exception):
            torch.compile(lambda t: torch.exp(t), backend="solder", options=opts)(x)
    assert entries(tmp_path) == []
    torch._dynamo.reset()
    out = torch.compile(lambda t: torch.exp(t), backend="solder", options=opts)(x)
    torch.testing.assert_close(out, x.exp())


def test_graph_holding_a_tensor_constant_is_not_cached(tmp_path, device):
    def g(x):
        return x + torch.tensor([1.0, 2.0, 3.0, 4.0], device=x.device)
    x = torch.randn(4, device=device)
    for _ in range(2):
        r = explain(g, x, d=tmp_path)
        assert states(r) == ["skip (the graph holds attributes (constants))"]
    assert entries(tmp_path) == []
    torch._dynamo.reset()
    compiled = torch.compile(g, backend="solder", options={"cache_dir": str(tmp_path)})
    torch.testing.assert_close(compiled(x), g(x))


def test_user_kernel_graph_is_not_cached(tmp_path):
    from tests.kernels.user_kernel_support import Compiled, add_one

    def g(x):
        out = torch.empty_like(x)
        add_one(x, out)
        return out * 2
    x = torch.randn(10)
    for _ in range(2):
        c = Compiled(g, [x], options={"cache_dir": str(tmp_path)})
        torch.testing.assert_close(c(x), (x + 1) * 2)
        assert [r.timings["cache"] for r in c.ctx.graphs] == [
            "skip (higher-order op triton_kernel_wrapper_mutation)"]
    assert entries(tmp_path) == []


def test_fallback_with_device_constant_hits(tmp_path, monkeypatch, device):
    def g(x):
        return x + torch.randperm(6, device=x.device), torch.sort(x.double())[0]
    x = torch.zeros(6, device=device)
    first = explain(g, x, d=tmp_path)
    assert "CONSTS[0]" in first.graphs[0].wrapper and first.graphs[0].fallbacks
    no_lowering(monkeypatch)
    second = explain(g, x, d=tmp_path)
    assert states(second) == ["hit"]
    assert content(second.graphs[0]) == content(first.graphs[0])
    torch._dynamo.reset()
    perm, s = torch.compile(g, backend="solder", options={"cache_dir": str(tmp_path)})(x)
    assert sorted(perm.tolist()) == list(range(6)) and s.dtype == torch.float64


def test_constant_encoding_round_trips_exactly():
    from solder.runtime import graph_cache as gc
    values = [None, True, 0, -3, 2**70, 1.5, -0.0, float("inf"), float("-inf"), "s",
              [1, (2.0, None)], (), torch.float16, torch.device("cuda", 1), torch.device("cpu"),
              torch.channels_last, torch.strided]
    back = [gc._dec(gc._enc(v)) for v in values]
    assert back == values
    assert [type(b) for b in back] == [type(v) for v in values]
    assert str(gc._dec(gc._enc(-0.0))) == "-0.0" and math.isnan(gc._dec(gc._enc(float("nan"))))
    for bad in [torch.zeros(1), object(), {"a": 1}, 1j, torch.Size([2])]:
        with pytest.raises(gc.Uncacheable):
            gc._enc(bad)
    with pytest.raises(ValueError):
        gc._dec(["dtype", "channels_last"])  # a name that resolves to another kind of object


def test_ops_round_trip_by_qualified_name():
    from solder.runtime import graph_cache as gc
    for op in [torch.ops.aten.mm.default, torch.ops.aten.add.Tensor, torch.ops.aten.sort.stable]:
        assert gc._resolve_op(gc._op_name(op)) is op
    assert gc._op_name(torch.ops.aten.mm.default) == "aten::mm.default"
    with pytest.raises(gc.Uncacheable):
        gc._op_name(torch.ops.aten.mm)  # a packet, not an overload
    with pytest.raises(gc.Uncacheable):
        gc._op_name(torch.add)


SCRIPT = textwrap.dedent("""
    import torch
    import solder

    def f(x):
        return (x.sin() + 1).sum(0)

    x = torch.arange(12, dtype=torch.float32).reshape(3, 4)
    r = solder.explain(f, x)
    print("STATE", r.graphs[0].timings["cache"])
    out = torch.compile(f, backend="solder")(x)
    assert torch.allclose(out, f(x)), (out, f(x))
""")


# a graph whose wrapper calls an operator of Solder's (torch.ops.solder), which the second
# process must register before it resolves the name
SCRIPT_SOLDER_OP = textwrap.dedent("""
    import torch
    import solder

    def f(x, w):
        return (x @ w.t()).view(2, 5, 13)

    x, w = torch.randn(10, 8), torch.randn(13, 8)
    options = {"pad_mm_min_elements": 1}
    r = solder.explain(f, x, w, options=options)
    assert "OPS[0](arg1, buf0, 13, 2)" in r.graphs[0].wrapper, r.graphs[0].wrapper
    print("STATE", r.graphs[0].timings["cache"])
    out = torch.compile(f, backend="solder", options=options)(x, w)
    torch.testing.assert_close(out, f(x, w))
""")


@pytest.mark.parametrize("source", [SCRIPT, SCRIPT_SOLDER_OP], ids=["aten", "solder_op"])
def test_second_process_hits(tmp_path, source):
    script = tmp_path / "script.py"
    script.write_text(source)
    env = dict(os.environ, TRITON_INTERPRET="1", SOLDER_CACHE_DIR=str(tmp_path / "cache"),
               SOLDER_AUTOTUNE="0", PYTHONPATH=str(REPO))
    env.pop("SOLDER_CACHE", None)
    got = []
    for _ in range(2):
        p = subprocess.run([sys.executable, str(script)], env=env, cwd=tmp_path,
                           capture_output=True, text=True, timeout=300)
        assert p.returncode == 0, p.stderr[-3000:]
        got.append([ln.split()[1] for ln in p.stdout.splitlines() if ln.startswith("STATE")])
    assert got == [["miss"], ["hit"]]


def test_the_key_follows_the_graph_not_a_stale_forward():
    # a pass may edit the graph without regenerating ``gm.code`` (dead-code removal regenerates
    # only when it removed something); the key must still tell two graphs apart
    from torch.fx.experimental.proxy_tensor import make_fx
    from solder.config import Config
    from solder.runtime.graph_cache import graph_key
    gm = make_fx(lambda x: (x.sin() * 2,))(torch.ones(3))
    before = graph_key(gm, "inference", Config(), True)
    code = gm.code
    (mul,) = [n for n in gm.graph.nodes if n.target is torch.ops.aten.mul.Tensor]
    mul.args = (mul.args[0], 3)   # the graph changes; gm.code does not
    assert gm.code == code
    assert graph_key(gm, "inference", Config(), True) != before


def test_the_key_follows_which_outputs_the_caller_gets_as_they_are():
    # the same forward nodes make another wrapper when another set of outputs reaches the
    # caller as it is (a view among them is returned as a real view: ir/nodes.py PLAIN_OUTPUTS)
    from torch.fx.experimental.proxy_tensor import make_fx
    from solder.config import Config
    from solder.ir.nodes import PLAIN_OUTPUTS
    from solder.runtime.graph_cache import fingerprint, graph_key
    keys = []
    for plain in (None, frozenset(), frozenset({1})):
        gm = make_fx(lambda x: (x.sin(), x.t()))(torch.ones(3, 2))
        if plain is not None:
            gm.meta[PLAIN_OUTPUTS] = plain
        keys.append((graph_key(gm, "forward", Config(), True), fingerprint(gm)))
    assert len({k for k, _ in keys}) == 3 and len({f for _, f in keys}) == 3


def test_the_key_tells_apart_what_the_code_would():
    # the key describes the nodes themselves: each argument's type and value, each keyword,
    # each target, as the graph's printed code would have
    from torch.fx.experimental.proxy_tensor import make_fx
    from solder.config import Config
    from solder.runtime.graph_cache import Uncacheable, graph_key

    def build():
        return make_fx(lambda x: (torch.sum(x * 2, dim=0, keepdim=True),))(torch.ones(3, 2))

    def key(gm):
        return graph_key(gm, "inference", Config(), True)
    gm = build()
    base = key(gm)
    assert key(build()) == base   # made again, the same key: nothing depends on object identity
    (mul,) = [n for n in gm.graph.nodes if n.target is torch.ops.aten.mul.Tensor]
    (total,) = [n for n in gm.graph.nodes if n.target is torch.ops.aten.sum.dim_IntList]
    seen = {base}
    for edit in (lambda: setattr(mul, "args", (mul.args[0], 2.0)),   # 2 -> 2.0
                 lambda: setattr(mul, "args", (mul.args[0], True)),  # 2 -> True
                 lambda: setattr(mul, "target", torch.ops.aten.div.Tensor),
                 lambda: setattr(total, "kwargs", {"keepdim": False}),
                 lambda: setattr(total, "args", (total.args[0], tuple(total.args[1])))):
        edit()   # the last: a list of dimensions made a tuple
        seen.add(key(gm))
    assert len(seen) == 6
    mul.target = lambda a, b: a * b   # no name that is the same in the next process
    with pytest.raises(Uncacheable, match="no name that is the same"):
        key(gm)
