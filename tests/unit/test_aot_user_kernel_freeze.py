"""How a package freezes a user kernel launch and launches it again, without a GPU: the kernel is
a real (never compiled) ``JITFunction`` under Triton's real autotuner and heuristics; compiling
and launching are replaced by recorders. The end-to-end tests are tests/aot/test_user_kernels_gpu.py."""
import pytest
import torch

from solder.aot import binaries, user_kernels
from solder.aot.user_kernels import NotPackable, PackagedUserKernel, RecordingUserLauncher
from solder.runtime import graph_cache
from solder.runtime.user_kernel import UserKernelLauncher

triton = pytest.importorskip("triton")
from triton.runtime.autotuner import Autotuner, Heuristics  # noqa: E402
from triton.runtime.jit import JITFunction  # noqa: E402


def body(x_ptr, out_ptr, n, scale, BLOCK: "tl.constexpr", FLAG: "tl.constexpr" = 3):
    pass


def _jit():
    return JITFunction(body)


def _tuned(pre_hook=None):
    configs = [triton.Config({"BLOCK": 64}, num_warps=2),
               triton.Config({"BLOCK": 256}, num_warps=4, pre_hook=pre_hook)]
    jit = _jit()
    return Autotuner(jit, jit.arg_names, configs, ["n"], None, None)


def _launcher(kernel, const_args=None, config_kwargs=None, tma=None):
    return UserKernelLauncher(kernel, "body", "model.py:12", "g0", const_args or {},
                              config_kwargs, tma)


def test_refusals_name_the_kernel_and_the_reason():
    check = user_kernels.check_packable
    with pytest.raises(NotPackable, match="user Triton kernel body, called at model.py:12.*pre_hook"):
        check(_launcher(_tuned(pre_hook=lambda nargs: None)), dynamic=False)
    heur = Heuristics(_jit(), _jit().arg_names, {"BLOCK": lambda a: 64})
    check(_launcher(heur), dynamic=False)      # fixed sizes: the values are stored
    with pytest.raises(NotPackable, match=r"heuristics computes \['BLOCK'\].*symbolic sizes"):
        check(_launcher(heur), dynamic=True)
    with pytest.raises(NotPackable, match="TMA"):
        check(_launcher(_jit(), tma={"x_ptr": ("stable", ((16,),))}), dynamic=False)
    with pytest.raises(NotPackable, match="not a @triton.jit"):
        check(_launcher(object()), dynamic=False)
    check(_launcher(_tuned()), dynamic=True)


class _Compiled:
    """Stands for a CompiledKernel: remembers its launches."""

    def __init__(self, tag):
        self.tag, self.function, self.packed_metadata, self.launches = tag, None, None, []

    def run(self, g0, g1, g2, stream, fn, meta, launch_meta, enter, exit_, *args):
        self.launches.append(((g0, g1, g2), args))


def _record(monkeypatch, launcher, grids, kwargs):
    """Record one launch, with Triton's launch and compiler replaced (the autotuner still picks
    its config: its benchmark is replaced by fixed timings favouring BLOCK=256)."""
    warmed = []

    def warmup(self, *args, grid, **options):
        warmed.append((self, args, grid, options))
        return _Compiled("generic" if self.do_not_specialize else "exact")
    monkeypatch.setattr(JITFunction, "warmup", warmup)
    monkeypatch.setattr(JITFunction, "run", lambda self, *a, **k: None)
    monkeypatch.setattr(Autotuner, "_bench", lambda self, *a, config, **k:
                        [1.0 if config.kwargs["BLOCK"] == 256 else 2.0] * 3)
    rec = RecordingUserLauncher(launcher)
    rec(grids, **kwargs)
    return rec, warmed


def test_recording_freezes_the_chosen_config_its_grid_and_the_defaults(monkeypatch):
    launcher = _launcher(_tuned(), const_args={"scale": 0.5},
                         config_kwargs=[{"BLOCK": 64}, {"BLOCK": 256}])
    x, out = torch.zeros(100), torch.zeros(100)
    rec, warmed = _record(monkeypatch, launcher, [(2,), (1,)], {"x_ptr": x, "out_ptr": out, "n": 100})
    e = rec.entry
    assert e["frozen"] == {"scale": 0.5, "BLOCK": 256, "FLAG": 3}   # config, constant, default
    assert e["per_call"] == ["x_ptr", "out_ptr", "n"] and e["call_constexprs"] == []
    assert e["grid_index"] == 1 and e["config"]["num_warps"] == 4
    # the exact binary and a generic one, both compiled with the chosen options and grid
    assert len(warmed) == 2 and all(w[2] == (1, 1, 1) and w[3]["num_warps"] == 4 for w in warmed)
    assert warmed[0][1] == (x, out, 100, 0.5, 256, 3)
    assert set(warmed[1][0].do_not_specialize) == {"x_ptr", "out_ptr", "n"}


def test_packaged_launch_passes_every_parameter_in_order_and_picks_the_binary(monkeypatch):
    launcher = _launcher(_tuned(), const_args={"scale": 0.5},
                         config_kwargs=[{"BLOCK": 64}, {"BLOCK": 256}])
    x, out = torch.zeros(96), torch.zeros(96)
    rec, _ = _record(monkeypatch, launcher, [(2,), (1,)], {"x_ptr": x, "out_ptr": out, "n": 96})
    members = {}
    monkeypatch.setattr(user_kernels, "_binary",
                        lambda k, cfg, match, members: {**match, "tag": k.tag})
    entry = user_kernels.export_user_kernel(4, rec, members, graph_cache._enc)
    assert entry["const"] == 4 and entry["frozen"]["BLOCK"] == ["int", 256]
    loaded = {}
    monkeypatch.setattr(user_kernels, "load_binary",
                        lambda b, m, t: loaded.setdefault(b["tag"], _Compiled(b["tag"])))
    launch = PackagedUserKernel(entry, members, None, graph_cache._dec)
    monkeypatch.setattr(user_kernels, "_stream", lambda: 0)
    launch([(9,), (3,)], x_ptr=x, out_ptr=out, n=96)        # the build's specialization
    launch([(9,), (5,)], x_ptr=x, out_ptr=out, n=97)        # 97 is not a multiple of 16
    assert loaded["exact"].launches == [((3, 1, 1), (x, out, 96, 0.5, 256, 3))]
    assert loaded["generic"].launches == [((5, 1, 1), (x, out, 97, 0.5, 256, 3))]
    launch([(0,), (0,)], x_ptr=x, out_ptr=out, n=0)          # an empty grid launches nothing
    assert len(loaded["generic"].launches) + len(loaded["exact"].launches) == 2
    with pytest.raises(binaries.BinaryMissing, match="user Triton kernel body"):
        launch([(1,), (1,)], x_ptr=x.half(), out_ptr=out, n=96)   # another pointer dtype


def test_a_frozen_value_that_is_not_plain_data_is_refused(monkeypatch):
    launcher = _launcher(_jit(), const_args={"scale": object(), "BLOCK": 64})
    x = torch.zeros(8)
    rec, _ = _record(monkeypatch, launcher, [(1,)], {"x_ptr": x, "out_ptr": x, "n": 8})
    from solder.aot.build import _plain
    with pytest.raises(NotPackable, match="body.*constant argument.*object"):
        user_kernels.export_user_kernel(0, rec, {}, _plain(graph_cache._enc))


def test_wrapper_constants_name_user_kernels_by_place():
    from solder.codegen.wrapper import WrapperModule
    marker = object()
    w = WrapperModule("def call(args):\n    return CONSTS[1]\n", [], [3, marker, (marker, 2)])
    files = graph_cache.encode("g", w, "", {}, _Report(), _Graph(),
                               objects=lambda v: 0 if v is marker else None)
    stand_in = object()
    entry = graph_cache.decode(files, "g", [stand_in])
    assert entry.wrapper.consts == [3, stand_in, (stand_in, 2)]
    with pytest.raises(ValueError, match="object 0"):
        graph_cache.decode(files, "g", [])
    with pytest.raises(graph_cache.Uncacheable):    # the disk cache still refuses objects
        graph_cache.encode("g", w, "", {}, _Report(), _Graph())


class _Report:
    kernels, externs, fallbacks, user_kernels = [], [], [], []


class _Graph:
    user_kernel_reports, buffers = [], []
