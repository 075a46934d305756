"""``grid_sampler_3d`` as gathers from the flattened volume (Solder's own decomposition; PyTorch
has one for the 2-D sampler only).

Each output position reads the input at the point its grid entry names: the nearest voxel, or
the eight around it weighted trilinearly. The arithmetic follows ATen's kernels step for step
(unnormalize, then clamp or reflect the coordinate for the padding mode; corners outside the
volume contribute nothing; the eight corners summed in ATen's order), in the input's dtype, or
in float32 for float16/bfloat16 as ATen's CUDA kernel does, rounded once at the end. Bicubic
sampling has no 3-D form in ATen.
"""
from __future__ import annotations

import torch

_ZEROS, _BORDER, _REFLECTION = 0, 1, 2
_BILINEAR, _NEAREST = 0, 1


def grid_sampler_3d(input, grid, interpolation_mode: int, padding_mode: int,
                    align_corners: bool):
    if interpolation_mode not in (_BILINEAR, _NEAREST) or input.dim() != 5:
        return NotImplemented   # left to ATen
    n, c, d, h, w = input.shape
    low = input.dtype in (torch.float16, torch.bfloat16)
    compute = torch.float32 if low else input.dtype
    g = grid.to(compute)
    ix = _source(g[..., 0], w, padding_mode, align_corners)
    iy = _source(g[..., 1], h, padding_mode, align_corners)
    iz = _source(g[..., 2], d, padding_mode, align_corners)
    volume = input.reshape(n, c, d * h * w)
    out_shape = (n, c) + tuple(grid.shape[1:4])

    def read(z, y, x):
        """input[b, :, z, y, x] at every output position, 0 where (z, y, x) is outside."""
        inside = (x >= 0) & (x < w) & (y >= 0) & (y < h) & (z >= 0) & (z < d)
        flat = torch.where(inside, (z * h + y) * w + x, 0)
        values = volume.gather(2, flat.reshape(n, 1, -1).expand(n, c, -1)).reshape(out_shape)
        return torch.where(inside.unsqueeze(1), values.to(compute), 0)

    if interpolation_mode == _NEAREST:
        # nearbyint: halves to even, as torch.round
        x, y, z = (t.round().to(torch.int64) for t in (ix, iy, iz))
        return read(z, y, x).to(input.dtype)
    x0, y0, z0 = ix.floor(), iy.floor(), iz.floor()
    # (weight toward the low corner, toward the high corner) per axis
    wx = (x0 + 1 - ix, ix - x0)
    wy = (y0 + 1 - iy, iy - y0)
    wz = (z0 + 1 - iz, iz - z0)
    xi, yi, zi = x0.to(torch.int64), y0.to(torch.int64), z0.to(torch.int64)
    out = None
    for dz in (0, 1):          # ATen's order: top (z0) before bottom, north (y0) before south,
        for dy in (0, 1):      # west (x0) before east
            for dx in (0, 1):
                weight = (wx[dx] * wy[dy] * wz[dz]).unsqueeze(1)
                term = weight * read(zi + dz, yi + dy, xi + dx)
                out = term if out is None else out + term
    return out.to(input.dtype)


def _source(coord, size: int, padding_mode: int, align_corners: bool):
    """A normalized grid coordinate as a position in the input, the padding mode applied."""
    if align_corners:
        pos = (coord + 1) / 2 * (size - 1)
    else:
        pos = ((coord + 1) * size - 1) / 2
    if padding_mode == _BORDER:
        pos = pos.clamp(0, size - 1)
    elif padding_mode == _REFLECTION:
        if align_corners:
            pos = _reflect(pos, 0, 2 * (size - 1))
        else:
            pos = _reflect(pos, -1, 2 * size - 1)
        pos = pos.clamp(0, size - 1)
    return pos


def _reflect(pos, twice_low: int, twice_high: int):
    """Fold ``pos`` back into [twice_low / 2, twice_high / 2] by reflecting at its ends."""
    if twice_low == twice_high:
        return torch.zeros_like(pos)
    low = twice_low / 2
    span = (twice_high - twice_low) / 2
    pos = (pos - low).abs()
    extra = torch.fmod(pos, span)
    flips = torch.floor(pos / span)
    return torch.where(torch.remainder(flips, 2) == 0, extra + low, span - extra + low)
