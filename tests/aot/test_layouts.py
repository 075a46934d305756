"""Packages plan the layouts the graph has when it runs: torch.export traces with cuDNN off, and
on CUDA that gives its convolutions NCHW results where cuDNN returns channels_last. These tests
make the CPU export look like that and check the package still plans channels_last."""
import zipfile

import torch

import solder.aot as aot
from solder.aot import run_time_layouts

CONV = torch.ops.aten.convolution.default


def _net(device):
    torch.manual_seed(0)
    net = torch.nn.Sequential(torch.nn.Conv2d(3, 8, 3, padding=1), torch.nn.ReLU(),
                              torch.nn.Conv2d(8, 8, 1), torch.nn.ReLU())
    return net.eval().to(device).to(memory_format=torch.channels_last)


def _as_export_on_cuda_gives(gm):
    """Every convolution's fake result made contiguous (NCHW), as export's cuDNN-off tracing
    gives them on CUDA, and everything after it propagated from there."""
    from torch._guards import detect_fake_mode
    from torch.fx.passes.fake_tensor_prop import FakeTensorProp
    inputs = [n.meta["val"] for n in gm.graph.nodes if n.op == "placeholder"]

    class NCHWConvs(FakeTensorProp):
        def run_node(self, n):
            out = super().run_node(n)
            if n.target is CONV:
                out = out.contiguous()
                n.meta["val"] = out
            return out
    NCHWConvs(gm, mode=detect_fake_mode(inputs)).propagate_dont_convert_inputs(*inputs)


def _conv_metas(gm):
    return [n.meta["val"] for n in gm.graph.nodes if n.target is CONV]


def test_refresh_gives_convolutions_the_layout_of_the_running_backend():
    x = torch.randn(2, 3, 6, 6).to(memory_format=torch.channels_last)
    ep = torch.export.export(_net("cpu"), (x,)).run_decompositions()
    gm = ep.graph_module
    _as_export_on_cuda_gives(gm)
    assert all(v.is_contiguous() and not v.is_contiguous(memory_format=torch.channels_last)
               for v in _conv_metas(gm))
    assert run_time_layouts.refresh(gm)
    assert all(v.is_contiguous(memory_format=torch.channels_last) for v in _conv_metas(gm))
    relu = [n for n in gm.graph.nodes if n.target is torch.ops.aten.relu.default][0]
    assert relu.meta["val"].is_contiguous(memory_format=torch.channels_last)


def test_graphs_without_convolutions_are_left_alone():
    ep = torch.export.export(torch.nn.Linear(4, 4), (torch.randn(2, 4),))
    before = {n: n.meta.get("val") for n in ep.graph_module.graph.nodes}
    assert not run_time_layouts.refresh(ep.graph_module)
    assert all(n.meta.get("val") is v for n, v in before.items())


def test_a_package_plans_channels_last_even_when_export_traced_nchw(tmp_path, monkeypatch):
    device = "cuda" if torch.cuda.is_available() else "cpu"
    net = _net(device)
    x = torch.randn(2, 3, 6, 6, device=device).to(memory_format=torch.channels_last)
    original = torch.export.ExportedProgram.run_decompositions

    def nchw_after_decompositions(self, *a, **k):
        ep = original(self, *a, **k)
        _as_export_on_cuda_gives(ep.graph_module)
        return ep
    monkeypatch.setattr(torch.export.ExportedProgram, "run_decompositions",
                        nchw_after_decompositions)
    path = aot.compile(net, (x,), tmp_path / "conv.solder")
    with zipfile.ZipFile(path) as z:
        code = "\n".join(z.read(n).decode() for n in z.namelist()
                         if n.startswith("graph/") and n.endswith(".py"))
    # the first convolution's [2, 8, 6, 6] result is planned channels_last, never NCHW
    assert "(2, 8, 6, 6), (288, 1, 48, 8)" in code
    assert "(2, 8, 6, 6), (288, 36, 6, 1)" not in code
    run = aot.load(path)
    with torch.no_grad():
        torch.testing.assert_close(run(x), net(x), rtol=1e-4, atol=1e-4)


def test_a_1x1_convolution_weight_gets_back_its_exact_strides(tmp_path):
    """A [out, in, 1, 1] weight is contiguous and channels_last at once by its sizes; the
    library chooses its algorithm and the layout of its result by the strides, so the package
    puts back exactly the strides the graph was compiled with (else every call pays copies)."""
    device = "cuda" if torch.cuda.is_available() else "cpu"
    torch.manual_seed(0)
    net = torch.nn.Sequential(torch.nn.Conv2d(3, 8, 1), torch.nn.ReLU(), torch.nn.Conv2d(8, 4, 1))
    net = net.eval().to(device).to(memory_format=torch.channels_last)
    assert net[0].weight.stride() == (3, 1, 3, 3)   # what channels_last gives a 1x1 kernel
    x = torch.randn(2, 3, 6, 6, device=device).to(memory_format=torch.channels_last)
    path = aot.compile(net, (x,), tmp_path / "conv1x1.solder")
    run = aot.load(path)
    weights = {k: v for k, v in run._values.items() if k.endswith("weight")}
    assert weights and all(w.stride() == dict(net.named_parameters())[k].stride()
                           for k, w in weights.items())
    with torch.no_grad():
        torch.testing.assert_close(run(x), net(x), rtol=1e-4, atol=1e-4)


def test_refresh_keeps_symbolic_sizes(tmp_path):
    """A dynamic batch stays symbolic through the second propagation, and the package runs
    other batch sizes."""
    device = "cuda" if torch.cuda.is_available() else "cpu"
    net = _net(device)
    x = torch.randn(2, 3, 6, 6, device=device).to(memory_format=torch.channels_last)
    batch = torch.export.Dim("batch", min=1, max=8)
    ep = torch.export.export(net, (x,), dynamic_shapes=({0: batch},)).run_decompositions()
    assert run_time_layouts.refresh(ep.graph_module)
    (first, *_) = _conv_metas(ep.graph_module)
    assert isinstance(first.shape[0], torch.SymInt)
    path = aot.compile(net, (x,), tmp_path / "dyn.solder", dynamic_shapes=({0: batch},))
    run = aot.load(path)
    with torch.no_grad():
        y = torch.randn(5, 3, 6, 6, device=device).to(memory_format=torch.channels_last)
        torch.testing.assert_close(run(y), net(y), rtol=1e-4, atol=1e-4)


def test_exact_strides_are_only_recreated_when_dense():
    from solder.aot.spec import with_strides
    x = torch.arange(6.0).reshape(1, 2, 3, 1)
    y = with_strides(x, (6, 1, 2, 2))             # channels_last of the same sizes
    assert y.stride() == (6, 1, 2, 2) and torch.equal(y, x)
    assert with_strides(x, (0, 0, 1, 1)) is x      # overlapping: kept as it is
    assert with_strides(x, (12, 6, 2, 1)) is x     # gaps: kept as it is


def test_refresh_does_not_take_results_from_fake_tensors_op_cache(monkeypatch):
    """Export's tracing fills FakeTensor's op cache, whose key ignores the backend flags; the
    second propagation must compute each convolution's layout anew (seen on the H200)."""
    from torch._subclasses.fake_tensor import FakeTensorMode
    FakeTensorMode.cache_clear()   # the cache is shared: earlier tests traced the same shapes
    x = torch.randn(2, 3, 6, 6).to(memory_format=torch.channels_last)
    real = torch._C._conv_determine_backend_memory_format
    monkeypatch.setattr(torch._C, "_conv_determine_backend_memory_format",
                        lambda *a: torch.contiguous_format)   # what cuDNN-off gives on CUDA
    ep = torch.export.export(_net("cpu"), (x,)).run_decompositions()
    gm = ep.graph_module
    assert all(not v.is_contiguous(memory_format=torch.channels_last) for v in _conv_metas(gm))
    monkeypatch.setattr(torch._C, "_conv_determine_backend_memory_format", real)
    assert run_time_layouts.refresh(gm)
    assert all(v.is_contiguous(memory_format=torch.channels_last) for v in _conv_metas(gm))
