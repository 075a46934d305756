"""Packages end to end: build on the example inputs, load, run, compare with eager — on the CPU
through Triton's interpreter (on a GPU machine the same tests build and run GPU packages).
Every refusal names the input or the mismatch."""
import json

import pytest
import torch

import solder.aot as aot
from solder.aot import PackageError, PackageInputError

from .helpers import MLP, rewrite


@pytest.fixture(scope="module")
def mlp_package(tmp_path_factory):
    device = "cuda" if torch.cuda.is_available() else "cpu"
    torch.manual_seed(0)
    model = MLP().eval().to(device)
    x = torch.randn(4, 16, device=device)
    batch = torch.export.Dim("batch", min=2, max=32)
    path = tmp_path_factory.mktemp("aot") / "mlp.solder"
    aot.compile(model, (x,), path, dynamic_shapes=({0: batch},))
    return model, path, device


def _close(out, ref):
    assert set(out) == set(ref)
    for k in ref:
        torch.testing.assert_close(out[k], ref[k], rtol=1e-4, atol=1e-4)


def test_mlp_matches_eager_at_every_batch_size_in_range(mlp_package):
    model, path, device = mlp_package
    run = aot.load(path)
    for batch in (4, 2, 7, 32):   # the example size, the bounds, sizes between
        x = torch.randn(batch, 16, device=device)
        with torch.no_grad():
            _close(run(x), model(x))


def test_non_contiguous_input_is_copied_not_misread(mlp_package):
    model, path, device = mlp_package
    x = torch.randn(16, 6, device=device).t()   # (6, 16) with transposed strides
    with torch.no_grad():
        _close(aot.load(path)(x), model(x))


@pytest.mark.parametrize("bad, message", [
    (lambda d: torch.randn(33, 16, device=d), r"input x dimension 0: size 33 is outside the "
                                              r"declared range of \w+ \[2, 32\]"),
    (lambda d: torch.randn(1, 16, device=d), r"size 1 is outside the declared range"),
    (lambda d: torch.randn(4, 16, device=d, dtype=torch.float64),
     "input x: expected dtype float32, got float64"),
    (lambda d: torch.randn(4, 16, 1, device=d), r"input x: expected 2 dimensions"),
    (lambda d: torch.randn(4, 15, device=d), r"input x: dimension 1 must be 16"),
    (lambda d: torch.randn(4, 16, device="meta"), r"input x: expected a tensor on \S+, got one on meta"),
    (lambda d: [1.0] * 16, "input x: expected a tensor, got list"),
])
def test_bad_inputs_are_refused_with_the_input_named(mlp_package, bad, message):
    _, path, device = mlp_package
    run = aot.load(path)
    arg = bad(device)
    with pytest.raises(PackageInputError, match=message):
        run(arg) if not isinstance(arg, list) else run.__call__(arg)


def test_wrong_argument_count(mlp_package):
    _, path, device = mlp_package
    x = torch.randn(4, 16, device=device)
    with pytest.raises(PackageInputError):
        aot.load(path)(x, x)


def test_weights_left_out_need_a_state_dict(mlp_package, tmp_path):
    model, _, device = mlp_package
    x = torch.randn(4, 16, device=device)
    path = tmp_path / "bare.solder"
    aot.compile(model, (x,), path, weights=False)
    with pytest.raises(PackageError, match="built without weights; the state dict lacks "
                                           "l1.bias, l1.weight"):
        aot.load(path)
    other = MLP().eval().to(device)   # different random weights: the package must use them
    run = aot.load(path, state_dict=other.state_dict())
    with torch.no_grad():
        _close(run(x), other(x))
    bad = dict(other.state_dict(), **{"l2.weight": torch.zeros(8, 31)})
    with pytest.raises(PackageError, match=r"weight l2.weight: expected float32 \(8, 32\)"):
        aot.load(path, state_dict=bad)


@pytest.mark.parametrize("change, message", [
    (lambda b: b.update(torch="3.0.0"), "built with torch 3.0.0; this is torch .* major"),
    (lambda b: b.update(triton="4.0.0"), "built with Triton 4.0.0; this is Triton .* major"),
    (lambda b: b.update(device="cuda", gpu_arch="sm_1000", gpu_name="Future GPU", device_index=0,
                        triton=__import__("triton").__version__),
     "sm_1000"),
    (lambda b: b.update(device="tpu"), "device type 'tpu'"),
])
def test_packages_built_elsewhere_are_refused(mlp_package, tmp_path, change, message):
    _, path, _ = mlp_package
    out = rewrite(path, tmp_path / "other.solder", change_info=lambda info: change(info["built"]))
    with pytest.raises(PackageError, match=message):
        aot.load(out)


def test_gpu_package_on_another_triton_minor_is_refused(mlp_package, tmp_path):
    import triton
    major = triton.__version__.split(".")[0]
    _, path, _ = mlp_package
    out = rewrite(path, tmp_path / "other.solder", change_info=lambda info: info["built"].update(
        device="cuda", gpu_arch="sm_90", device_index=0, triton=f"{major}.999.0"))
    with pytest.raises(PackageError, match="binaries were built with Triton"):
        aot.load(out)


def test_tampered_member_is_refused_before_use(mlp_package, tmp_path):
    _, path, _ = mlp_package
    evil = b"import os\nos.environ['SOLDER_PWNED'] = '1'\ndef call(args):\n    return ()\n"
    out = rewrite(path, tmp_path / "evil.solder", change_member=("graph/wrapper.py", evil))
    with pytest.raises(PackageError, match="graph/wrapper.py fails its checksum"):
        aot.load(out)
    import os
    assert "SOLDER_PWNED" not in os.environ


def test_truncated_package_is_refused(mlp_package, tmp_path):
    _, path, _ = mlp_package
    data = path.read_bytes()
    cut = tmp_path / "cut.solder"
    cut.write_bytes(data[: len(data) * 2 // 3])
    with pytest.raises(PackageError, match="truncated or damaged"):
        aot.load(cut)


def test_inspect_lists_kernels_sizes_versions_and_inputs(mlp_package, capsys):
    import triton

    from solder.__main__ import main
    _, path, _ = mlp_package
    assert main(["aot", "inspect", str(path)]) == 0
    text = capsys.readouterr().out
    info = json.loads(__import__("zipfile").ZipFile(path).read("package.json"))
    assert f"triton {triton.__version__}" in text and f"torch {torch.__version__}" in text
    assert "x: float32(" in text and ", 16)" in text
    (sym,) = info["spec"]["symbols"]
    assert f"{sym} in [2, 32]" in text
    for k in info["kernels"]:
        assert f"  {k['name']}: " in text
    assert "weights.safetensors" in text and "loadable on this machine" in text
    assert main(["aot", "inspect", str(path) + ".absent"]) == 1


def test_function_with_several_inputs_and_shared_symbol(tmp_path):
    device = "cuda" if torch.cuda.is_available() else "cpu"

    def fn(a, b):
        return torch.softmax(a * 2.0, dim=-1) + b.relu(), (a - b).abs().amax(dim=1)

    a = torch.randn(3, 24, device=device)
    b = torch.randn(3, 24, device=device)
    n = torch.export.Dim("n", min=1, max=16)
    path = aot.compile(fn, (a, b), tmp_path / "fn.solder", dynamic_shapes=({0: n}, {0: n}))
    run = aot.load(path)
    for rows in (3, 5):
        a, b = torch.randn(rows, 24, device=device), torch.randn(rows, 24, device=device)
        out, ref = run(a, b), fn(a, b)
        assert isinstance(out, tuple) and len(out) == 2
        for o, r in zip(out, ref):
            torch.testing.assert_close(o, r)
    with pytest.raises(PackageInputError, match="differs from .* bound by an earlier input"):
        run(torch.randn(3, 24, device=device), torch.randn(4, 24, device=device))


def test_channels_last_conv_net_keeps_its_weight_layout(tmp_path):
    """Weights are stored dense and put back in the layout the kernels read them in."""
    device = "cuda" if torch.cuda.is_available() else "cpu"
    torch.manual_seed(0)
    net = torch.nn.Sequential(torch.nn.Conv2d(3, 8, 3, padding=1), torch.nn.BatchNorm2d(8),
                              torch.nn.ReLU(), torch.nn.AdaptiveAvgPool2d(1), torch.nn.Flatten())
    net = net.eval().to(device).to(memory_format=torch.channels_last)
    x = torch.randn(2, 3, 8, 8, device=device).to(memory_format=torch.channels_last)
    path = aot.compile(net, (x,), tmp_path / "conv.solder")
    info = json.loads(__import__("zipfile").ZipFile(path).read("package.json"))
    assert info["weights"]["tensors"]["0.weight"]["layout"] == "channels_last"
    assert info["spec"]["inputs"][0]["layout"] == "channels_last"
    run = aot.load(path)
    with torch.no_grad():
        torch.testing.assert_close(run(x), net(x), rtol=1e-4, atol=1e-4)
        y = torch.randn(2, 3, 8, 8, device=device)   # contiguous: copied to channels_last
        torch.testing.assert_close(run(y), net(y), rtol=1e-4, atol=1e-4)


def test_attention_backends_choose_the_packaged_attention_kernel(tmp_path):
    # SDPA picks its kernel in the package's decompositions: the option restricts that choice
    import zipfile

    import torch.nn.functional as F

    def fn(q, k, v):
        return F.scaled_dot_product_attention(q, k, v, is_causal=True) * 2
    device = "cuda" if torch.cuda.is_available() else "cpu"
    q, k, v = (torch.randn(1, 2, 8, 4, device=device) for _ in range(3))
    calls = {}
    for name, opt in (("own", None), ("math", {"attention_backends": "math"})):
        path = aot.compile(fn, (q, k, v), tmp_path / f"{name}.solder", options=opt)
        wrapper = zipfile.ZipFile(path).read("graph/wrapper.py").decode()
        calls[name] = "_scaled_dot_product" in wrapper
        torch.testing.assert_close(aot.load(path)(q, k, v), fn(q, k, v))
    assert calls == {"own": True, "math": False}
