"""The layouts an exported graph has when it runs, not the ones it had while being exported.

torch.export traces with cuDNN, MKLDNN and NNPACK switched off, so FakeTensor gives each
convolution the layout of the fallback kernel: on CUDA that is NCHW where cuDNN returns
channels_last. Compiled from that metadata, a channels_last ResNet-50 package planned NCHW
activations and copied every cuDNN result into them (33 copies per call on the H200). The
package runs with the backends on, so the graph's metadata is propagated again under them,
with FakeTensor's op cache bypassed: its key does not include the backend flags, so it would
hand back export's NCHW results (seen on the H200).
"""
from __future__ import annotations

import logging

import torch

log = logging.getLogger("solder.aot")

# the ops whose result layout depends on which library backend runs them
_BACKEND_DEPENDENT = {torch.ops.aten.convolution.default, torch.ops.aten._convolution.default}


def refresh(gm: torch.fx.GraphModule) -> bool:
    """Propagate fake values through ``gm`` again under the process's backend settings, in the
    fake mode of its placeholders. Only graphs with a backend-dependent op and no data-dependent
    sizes are touched; if propagation fails the export's metadata is kept (it is correct, the
    layouts only cost copies). Returns whether the metadata was replaced."""
    from torch._guards import detect_fake_mode
    from torch.fx.experimental.symbolic_shapes import free_unbacked_symbols
    from torch.fx.passes.fake_tensor_prop import FakeTensorProp
    nodes = list(gm.graph.nodes)
    if not any(n.op == "call_function" and n.target in _BACKEND_DEPENDENT for n in nodes):
        return False
    if any(free_unbacked_symbols(n.meta.get("val")) for n in nodes):
        return False
    inputs = [n.meta.get("val") for n in nodes if n.op == "placeholder"]
    mode = detect_fake_mode(inputs)
    if mode is None:
        return False
    saved = {n: n.meta.get("val") for n in nodes}
    cache_was = getattr(mode, "cache_enabled", False)
    mode.cache_enabled = False
    try:
        FakeTensorProp(gm, mode=mode).propagate_dont_convert_inputs(*inputs)
    except Exception as e:  # noqa: BLE001 - keep what export gave
        for n, v in saved.items():
            n.meta["val"] = v
        log.warning("kept torch.export's layouts (propagating under the run-time backends "
                    "failed: %s: %s)", type(e).__name__, e)
        return False
    finally:
        mode.cache_enabled = cache_was
    return True
