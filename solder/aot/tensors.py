"""Tensors in a package, in the safetensors file format.

The ``safetensors`` library writes and reads them where it is installed; where it is not (the GPU
machine may lack it) this module writes and reads the same format itself: 8 bytes of little-endian
header length, a JSON header ``{name: {"dtype", "shape", "data_offsets": [begin, end]}}``, then the
raw bytes. Either way a package built on one machine loads on the other. No pickle.
"""
from __future__ import annotations

import json
import struct

import torch

# safetensors dtype names
_DTYPES = {
    torch.float64: "F64", torch.float32: "F32", torch.float16: "F16", torch.bfloat16: "BF16",
    torch.int64: "I64", torch.int32: "I32", torch.int16: "I16", torch.int8: "I8",
    torch.uint8: "U8", torch.bool: "BOOL",
}
_BY_NAME = {v: k for k, v in _DTYPES.items()}
for _name, _attr in (("F8_E4M3", "float8_e4m3fn"), ("F8_E5M2", "float8_e5m2")):
    if hasattr(torch, _attr):
        _DTYPES[getattr(torch, _attr)] = _name
        _BY_NAME[_name] = getattr(torch, _attr)


def _library():
    try:
        import safetensors.torch as st
        return st
    except ImportError:
        return None


def dumps(tensors: dict[str, torch.Tensor]) -> bytes:
    """Tensors (any device) as one safetensors blob. Tensors sharing storage are stored apart."""
    plain = {}
    for name, t in tensors.items():
        if t.dtype not in _DTYPES:
            raise TypeError(f"tensor {name}: dtype {t.dtype} cannot be stored in a package")
        plain[name] = t.detach().to("cpu").contiguous().clone()
    st = _library()
    if st is not None:
        return st.save(plain)
    return _dumps(plain)


def loads(blob: bytes) -> dict[str, torch.Tensor]:
    """CPU tensors from a safetensors blob (the library's reader if present, else our own)."""
    st = _library()
    if st is not None:
        return st.load(blob)
    return _loads(blob)


def _dumps(tensors: dict[str, torch.Tensor]) -> bytes:
    header, chunks, offset = {}, [], 0
    for name in sorted(tensors):
        t = tensors[name]
        raw = t.reshape(-1).view(torch.uint8).numpy().tobytes() if t.numel() else b""
        header[name] = {"dtype": _DTYPES[t.dtype], "shape": list(t.shape),
                        "data_offsets": [offset, offset + len(raw)]}
        chunks.append(raw)
        offset += len(raw)
    head = json.dumps(header, separators=(",", ":")).encode()
    head += b" " * (-len(head) % 8)  # the format aligns the data to 8 bytes
    return struct.pack("<Q", len(head)) + head + b"".join(chunks)


def _loads(blob: bytes) -> dict[str, torch.Tensor]:
    if len(blob) < 8:
        raise ValueError("tensor blob too short")
    (n,) = struct.unpack("<Q", blob[:8])
    if 8 + n > len(blob):
        raise ValueError("tensor blob header runs past its end")
    header = json.loads(blob[8:8 + n].decode())
    data = memoryview(blob)[8 + n:]
    out = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        dtype = _BY_NAME.get(info["dtype"])
        if dtype is None:
            raise ValueError(f"tensor {name}: unknown dtype {info['dtype']}")
        begin, end = info["data_offsets"]
        shape = [int(s) for s in info["shape"]]
        numel = 1
        for s in shape:
            numel *= s
        itemsize = torch.empty((), dtype=dtype, device="cpu").element_size()
        if not 0 <= begin <= end <= len(data) or end - begin != numel * itemsize:
            raise ValueError(f"tensor {name}: data offsets do not match its shape")
        raw = bytearray(data[begin:end])  # a writable copy: torch.frombuffer shares it
        flat = (torch.frombuffer(raw, dtype=torch.uint8) if raw
                else torch.empty(0, dtype=torch.uint8, device="cpu"))
        out[name] = flat.view(dtype).reshape(shape)
    return out
