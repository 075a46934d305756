"""What a package was built with, and whether this machine can run it.

Refused, each with a message saying what differs: a different major version of torch or
Triton; for GPU binaries a different Triton minor version too (the binaries' metadata and
launcher change between minors) and a different GPU architecture (a cubin runs only on the
compute capability it was built for); a GPU package on a machine without that GPU; a CPU package
without Triton's interpreter. Package format versions are checked by ``container``.
"""
from __future__ import annotations

import platform

import torch

from .container import FORMAT, PackageError


def _triton_version() -> str:
    import triton
    return triton.__version__


def _major(v: str) -> int:
    return int(v.split(".")[0])


def _major_minor(v: str) -> tuple[int, int]:
    parts = v.split("+")[0].split(".")
    return int(parts[0]), int(parts[1])


def current(device: torch.device, interpreted: bool) -> dict:
    """The build record of a package compiled here for ``device``."""
    from .. import __version__
    info = {"format": FORMAT, "solder": __version__, "torch": torch.__version__,
            "triton": _triton_version(), "python": platform.python_version(),
            "device": device.type, "interpreted": bool(interpreted)}
    if device.type == "cuda":
        major, minor = torch.cuda.get_device_capability(device)
        info["gpu_arch"] = f"sm_{major}{minor}"
        info["gpu_name"] = torch.cuda.get_device_name(device)
        info["device_index"] = device.index if device.index is not None else torch.cuda.current_device()
    return info


def check(built: dict, path) -> None:
    """Raise PackageError when this machine cannot run a package built as ``built`` says."""
    from ..codegen.scalar_ops import interpreting
    torch_now, triton_now = torch.__version__, _triton_version()
    if _major(built["torch"]) != _major(torch_now):
        raise PackageError(f"{path}: built with torch {built['torch']}; this is torch {torch_now} "
                           "(another major version): rebuild the package")
    if _major(built["triton"]) != _major(triton_now):
        raise PackageError(f"{path}: built with Triton {built['triton']}; this is Triton "
                           f"{triton_now} (another major version): rebuild the package")
    if built["device"] == "cuda":
        if _major_minor(built["triton"]) != _major_minor(triton_now):
            raise PackageError(
                f"{path}: its GPU binaries were built with Triton {built['triton']}; this is "
                f"Triton {triton_now}, whose binary format may differ: rebuild the package")
        if interpreting() or not torch.cuda.is_available():
            raise PackageError(
                f"{path}: built for a GPU ({built['gpu_arch']}, {built.get('gpu_name', '?')}); "
                "this process has no CUDA device (or runs Triton's interpreter): build a CPU "
                "package with TRITON_INTERPRET=1 and CPU tensors, or load it on that GPU")
        major, minor = torch.cuda.get_device_capability()
        here = f"sm_{major}{minor}"
        if here != built["gpu_arch"]:
            raise PackageError(f"{path}: its kernels are built for {built['gpu_arch']}; this GPU "
                               f"({torch.cuda.get_device_name()}) is {here}: rebuild the package "
                               "on this GPU")
    elif built["device"] == "cpu":
        if not interpreting():
            raise PackageError(f"{path}: a CPU package runs its Triton kernels through Triton's "
                               "interpreter: set TRITON_INTERPRET=1 before importing triton")
    else:
        raise PackageError(f"{path}: built for device type {built['device']!r}, which this "
                           "Solder cannot run")
