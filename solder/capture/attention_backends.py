"""Which fused attention kernel SDPA calls (``Config.attention_backends``).

``F.scaled_dot_product_attention`` picks its kernel when it is traced: AOTAutograd (and
``torch.export``'s decompositions) record the chosen ATen op, ``_scaled_dot_product_cudnn_attention``
say, and the compiled graph calls that op from then on. PyTorch's choice weighs GPU time only;
the kernels differ in host time per call too, which matters once a model is host-bound. This
restricts the choice while a graph is captured, with PyTorch's own ``sdpa_kernel`` context;
PyTorch still falls back along the list where a kernel does not support the inputs.
"""
from __future__ import annotations

import contextlib

NAMES = ("flash", "efficient", "cudnn", "math")


def parse(setting: str) -> list[str]:
    """The backend names of a setting, checked; [] for PyTorch's own choice."""
    names = [n.strip().lower() for n in setting.split(",") if n.strip()]
    unknown = [n for n in names if n not in NAMES]
    if unknown:
        raise ValueError(f"attention_backends: unknown backend(s) {unknown}; known: "
                         f"{', '.join(NAMES)} (comma-separated, or '' for PyTorch's choice)")
    return names


def restricted(setting: str):
    """A context in which SDPA may pick only the backends of ``setting``."""
    names = parse(setting)
    if not names:
        return contextlib.nullcontext()
    from torch.nn.attention import SDPBackend, sdpa_kernel
    by_name = {"flash": SDPBackend.FLASH_ATTENTION, "efficient": SDPBackend.EFFICIENT_ATTENTION,
               "cudnn": SDPBackend.CUDNN_ATTENTION, "math": SDPBackend.MATH}
    chosen = [by_name[n] for n in names]
    try:
        return sdpa_kernel(chosen, set_priority=True)   # the list's order is the preference
    except TypeError:   # a torch without priorities: the set alone
        return sdpa_kernel(chosen)
