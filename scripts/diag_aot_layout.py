"""Why a CUDA package plans NCHW activations: export's metadata, then refresh, step by step."""
import logging, sys, traceback
import torch, torchvision
from torch._subclasses.fake_tensor import FakeTensorMode
logging.basicConfig(level=logging.INFO, stream=sys.stdout)
print("cudnn enabled at start", torch.backends.cudnn.enabled)
m = FakeTensorMode()
with m:
    x = torch.empty(2, 8, 6, 6, device="cuda", dtype=torch.float16).to(memory_format=torch.channels_last)
    w = torch.empty(4, 8, 3, 3, device="cuda", dtype=torch.float16).to(memory_format=torch.channels_last)
    print("fake conv, cudnn on:", torch.ops.aten.convolution(x, w, None, [1, 1], [0, 0], [1, 1], False, [0, 0], 1).stride())
    with torch.backends.cudnn.flags(enabled=False):
        print("fake conv, cudnn off:", torch.ops.aten.convolution(x, w, None, [1, 1], [0, 0], [1, 1], False, [0, 0], 1).stride())
net = torchvision.models.resnet50().eval().half().cuda().to(memory_format=torch.channels_last)
xin = torch.randn(64, 3, 224, 224, device="cuda", dtype=torch.float16).to(memory_format=torch.channels_last)
from solder import config as config_mod
from solder.aot.build import _decompositions
with torch.no_grad():
    ep = torch.export.export(net, (xin,))
    print("cudnn enabled after export", torch.backends.cudnn.enabled)
    ep = ep.run_decompositions(_decompositions(config_mod.resolve(None)))
    print("cudnn enabled after run_decompositions", torch.backends.cudnn.enabled)
gm = ep.graph_module
ph = [n for n in gm.graph.nodes if n.op == "placeholder"]
conv = [n for n in gm.graph.nodes if n.target is torch.ops.aten.convolution.default]
print("user input meta", ph[-1].name, ph[-1].meta["val"].stride(), "weight", ph[0].name, ph[0].meta["val"].stride())
print("first convs before:", [c.meta["val"].stride() for c in conv[:3]])
from torch._guards import detect_fake_mode
mode = detect_fake_mode([n.meta.get("val") for n in ph])
print("fake mode", mode, "unbacked", [n.name for n in gm.graph.nodes if __import__("torch.fx.experimental.symbolic_shapes", fromlist=["x"]).free_unbacked_symbols(n.meta.get("val"))][:3])
from torch.fx.passes.fake_tensor_prop import FakeTensorProp
from solder.aot import run_time_layouts
print("refresh:", run_time_layouts.refresh(gm))
print("first convs after refresh:", [c.meta["val"].stride() for c in conv[:3]])
try:
    with torch.no_grad():
        FakeTensorProp(gm, mode=mode).propagate_dont_convert_inputs(*[n.meta["val"] for n in ph])
except Exception:
    traceback.print_exc(file=sys.stdout)
print("first convs after:", [c.meta["val"].stride() for c in conv[:3]])
with mode:
    a, b = ph[-1].meta["val"], ph[0].meta["val"]
    print("direct fake conv on the placeholders:", torch.ops.aten.convolution(a, b, None, [2, 2], [3, 3], [1, 1], False, [0, 0], 1).stride())
    try:
        print("backend", torch._C._select_conv_backend(a, b, stride=[2, 2], padding=[3, 3], dilation=[1, 1], transposed=False, output_padding=[0, 0], groups=1, bias=None))
    except Exception as e:
        print("backend?", e)
