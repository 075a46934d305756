"""``grid_sampler_3d`` as gathers from the flattened volume, and the 2-D and 3-D samplers'
gradients as scatters and gathers (Solder's own decompositions; PyTorch has one for the 2-D
sampler's forward only).

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


def grid_sampler_backward(grad_output, input, grid, interpolation_mode: int, padding_mode: int,
                          align_corners: bool, output_mask=(True, True)):
    """The gradients of the 2-D and 3-D samplers (nearest and bilinear/trilinear): the input's
    as a ``scatter_add`` of each output's weighted gradient into the corners it read, the grid's
    from the derivative of the corner weights, times the coordinate's derivative through the
    unnormalizing and the padding mode (ATen's rules: zero where a coordinate was clamped,
    the sign of each reflection)."""
    spatial = input.dim() - 2
    if interpolation_mode not in (_BILINEAR, _NEAREST) or spatial not in (2, 3):
        return NotImplemented   # bicubic: left to ATen
    n, c = input.shape[:2]
    sizes = list(input.shape[2:])               # input order: (D,) H, W
    low = input.dtype in (torch.float16, torch.bfloat16)
    compute = torch.float32 if low else input.dtype
    g = grid.to(compute)
    # coordinate k of the grid (x, y, z) indexes input axis spatial - 1 - k
    coords, mults = [], []
    for k in range(spatial):
        pos, mult = _source_and_grad(g[..., k], sizes[spatial - 1 - k], padding_mode,
                                     align_corners)
        coords.append(pos)
        mults.append(mult)
    go = grad_output.to(compute)                        # (N, C, *out)
    volume = input.reshape(n, c, -1).to(compute)
    out_shape = tuple(grad_output.shape)

    def flat_index(ints):
        """The flat input index of integer coordinates (x, y, z order), and whether inside."""
        inside, flat = None, None
        for axis in range(spatial):                     # outermost input axis first
            k = spatial - 1 - axis
            ok = (ints[k] >= 0) & (ints[k] < sizes[axis])
            inside = ok if inside is None else inside & ok
            flat = ints[k] if flat is None else flat * sizes[axis] + ints[k]
        return torch.where(inside, flat, 0), inside

    def gather(flat, inside):
        values = volume.gather(2, flat.reshape(n, 1, -1).expand(n, c, -1)).reshape(out_shape)
        return torch.where(inside.unsqueeze(1), values, 0)

    grad_volume = torch.zeros(n, c, volume.shape[2], dtype=compute, device=input.device)

    def scatter(grad_volume, flat, inside, contribution):
        contribution = torch.where(inside.unsqueeze(1), contribution, 0).reshape(n, c, -1)
        return grad_volume.scatter_add(2, flat.reshape(n, 1, -1).expand(n, c, -1), contribution)

    if interpolation_mode == _NEAREST:
        flat, inside = flat_index([t.round().to(torch.int64) for t in coords])
        grad_volume = scatter(grad_volume, flat, inside, go)
        return (grad_volume.reshape(input.shape).to(input.dtype), torch.zeros_like(grid))
    lows = [t.floor() for t in coords]
    weights = [(lo + 1 - t, t - lo) for lo, t in zip(lows, coords)]
    ints = [lo.to(torch.int64) for lo in lows]
    grad_coords = [None] * spatial
    for offsets in _corners(spatial):
        flat, inside = flat_index([i + o for i, o in zip(ints, offsets)])
        weight = None
        for k, o in enumerate(offsets):
            weight = weights[k][o] if weight is None else weight * weights[k][o]
        grad_volume = scatter(grad_volume, flat, inside, weight.unsqueeze(1) * go)
        seen = (gather(flat, inside) * go).sum(1)       # summed over channels
        for k in range(spatial):
            # d weight / d coordinate k: the other axes' weights, signed by the corner's side
            others = None
            for j, o in enumerate(offsets):
                if j != k:
                    others = weights[j][o] if others is None else others * weights[j][o]
            term = seen * others if offsets[k] else -(seen * others)
            grad_coords[k] = term if grad_coords[k] is None else grad_coords[k] + term
    grad_grid = torch.stack([gc * m for gc, m in zip(grad_coords, mults)], dim=-1)
    return (grad_volume.reshape(input.shape).to(input.dtype), grad_grid.to(grid.dtype))


def _corners(spatial: int):
    """Corner offsets per coordinate (x, y, z order), in ATen's order: z, then y, then x."""
    if spatial == 2:
        return [(dx, dy) for dy in (0, 1) for dx in (0, 1)]
    return [(dx, dy, dz) for dz in (0, 1) for dy in (0, 1) for dx in (0, 1)]


def _source_and_grad(coord, size: int, padding_mode: int, align_corners: bool):
    """``_source`` and its derivative with respect to the grid coordinate."""
    if align_corners:
        pos, mult = (coord + 1) / 2 * (size - 1), (size - 1) / 2
    else:
        pos, mult = ((coord + 1) * size - 1) / 2, size / 2
    grad = torch.full_like(pos, mult)
    if padding_mode == _REFLECTION:
        if align_corners:
            pos, sign = _reflect_and_sign(pos, 0, 2 * (size - 1))
        else:
            pos, sign = _reflect_and_sign(pos, -1, 2 * size - 1)
        grad = grad * sign
    if padding_mode in (_BORDER, _REFLECTION):
        clamped = (pos <= 0) | (pos >= size - 1)        # ATen: no gradient where clamped
        grad = torch.where(clamped, 0, grad)
        pos = pos.clamp(0, size - 1)
    return pos, grad


def _reflect_and_sign(pos, twice_low: int, twice_high: int):
    if twice_low == twice_high:
        return torch.zeros_like(pos), torch.zeros_like(pos)
    low = twice_low / 2
    span = (twice_high - twice_low) / 2
    shifted = pos - low
    sign = torch.where(shifted < 0, -1.0, 1.0)
    shifted = shifted.abs()
    extra = torch.fmod(shifted, span)
    flips = torch.floor(shifted / span)
    even = torch.remainder(flips, 2) == 0
    return (torch.where(even, extra + low, span - extra + low),
            torch.where(even, sign, -sign).to(pos.dtype))
