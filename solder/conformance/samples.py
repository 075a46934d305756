"""OpInfo sample inputs: generating them, copying them exactly, finding their tensors."""
from __future__ import annotations

import itertools
import random
from typing import Any, Iterator, Optional

import torch

SAMPLE_SEED = 1234  # the samples of every op are drawn from this seed, so runs are repeatable


def generate(op, device: str, dtype: torch.dtype, requires_grad: bool,
             limit: Optional[int]) -> list:
    """The op's first ``limit`` sample inputs (all when None), drawn from a fixed seed."""
    torch.manual_seed(SAMPLE_SEED)
    random.seed(SAMPLE_SEED)
    samples = op.sample_inputs(device, dtype, requires_grad=requires_grad)
    return list(itertools.islice(samples, limit))


def call_args(sample) -> tuple[tuple, dict]:
    return (sample.input, *sample.args), dict(sample.kwargs)


def copy_args(sample) -> tuple[tuple, dict]:
    """Fresh copies of a sample's arguments with the same sizes, strides, offsets, dtypes and
    requires_grad, and the same aliasing between them (tensors that shared a storage share the
    copy of it), so eager and compiled runs each get their own identical inputs."""
    storages: dict = {}
    args, kwargs = call_args(sample)
    return _copy(args, storages), _copy(kwargs, storages)


def _copy(value: Any, storages: dict) -> Any:
    if isinstance(value, torch.Tensor):
        return _copy_tensor(value, storages)
    if isinstance(value, list):
        return [_copy(v, storages) for v in value]
    if isinstance(value, tuple) and not hasattr(value, "_fields"):
        return tuple(_copy(v, storages) for v in value)
    if isinstance(value, dict):
        return {k: _copy(v, storages) for k, v in value.items()}
    return value


def _copy_tensor(t: torch.Tensor, storages: dict) -> torch.Tensor:
    if type(t) is not torch.Tensor or t.layout != torch.strided or t.is_conj() or t.is_neg():
        copy = t.detach().clone()
    else:
        storage = t.untyped_storage()
        key = (storage.device, storage.data_ptr(), storage.nbytes())
        if key not in storages:
            storages[key] = storage.clone()
        with torch.no_grad():
            copy = torch.empty(0, dtype=t.dtype, device=t.device)
            copy.set_(storages[key], t.storage_offset(), t.size(), t.stride())
    return copy.requires_grad_(t.requires_grad)


def tensors_in(value: Any) -> Iterator[torch.Tensor]:
    """Every tensor inside nested lists, tuples and dicts, in order."""
    if isinstance(value, torch.Tensor):
        yield value
    elif isinstance(value, (list, tuple)):
        for v in value:
            yield from tensors_in(v)
    elif isinstance(value, dict):
        for v in value.values():
            yield from tensors_in(v)


LOW_PRECISION = (torch.float16, torch.bfloat16)


def upcast(sample, dtype: torch.dtype = torch.float64, which=LOW_PRECISION):
    """The sample with its floating tensors of the ``which`` dtypes in ``dtype`` (requires_grad
    kept): the input of a reference run that says how far eager itself is from the exact
    result."""
    import copy

    def up(v):
        if isinstance(v, torch.Tensor) and v.dtype in which:
            out = v.detach().to(dtype)
            return out.requires_grad_(v.requires_grad)
        if isinstance(v, list):
            return [up(x) for x in v]
        if isinstance(v, tuple) and not hasattr(v, "_fields"):
            return tuple(up(x) for x in v)
        if isinstance(v, dict):
            return {k: up(x) for k, x in v.items()}
        return v
    out = copy.copy(sample)
    out.input, out.args, out.kwargs = up(sample.input), up(tuple(sample.args)), up(dict(sample.kwargs))
    return out


def grad_output_like(t: torch.Tensor, seed: int) -> torch.Tensor:
    """A fixed random cotangent for output ``t`` (the same for the eager and compiled runs)."""
    g = torch.Generator().manual_seed(seed)
    dtype = t.dtype if t.dtype in (torch.float64, torch.complex128, torch.complex64) \
        else torch.float32
    return torch.randn(t.shape, generator=g, dtype=dtype).to(device=t.device, dtype=t.dtype)


def describe(sample, limit: int = 300) -> str:
    """A short description of a sample, for failure messages."""
    try:
        text = sample.summary()
    except Exception:  # summary() is a testing helper; never let it hide a result
        text = repr(sample)
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 3] + "..."
