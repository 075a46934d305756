"""``grid_sampler_3d`` as gathers from the flattened volume, and the 2-D and 3-D samplers'
gradients as scatters and gathers (Solder's own decompositions; PyTorch has one for the 2-D
sampler's forward only).

Each output position reads the input at the point its grid entry names: the nearest element,
or the 4 (2-D) or 8 (3-D) around it weighted (bi/tri)linearly. The arithmetic follows ATen's
kernels step for step (unnormalize, then clamp or reflect the coordinate for the padding mode;
corners outside the input contribute nothing; corners taken in ATen's order), in the input's
dtype, or in float32 for float16/bfloat16 as ATen's CUDA kernel does, rounded once at the end.
The gradients: the input's is a ``scatter_add`` of each output's weighted gradient into the
corners it read; the grid's is the corner weights' derivative times the coordinate's derivative
through the unnormalizing and the padding mode (ATen's rules: zero where a coordinate was
clamped, the sign of each reflection). Bicubic sampling is left to ATen.
"""
from __future__ import annotations

import torch

_ZEROS, _BORDER, _REFLECTION = 0, 1, 2
_BILINEAR, _NEAREST = 0, 1


class _Sampling:
    """What the forward and the backward share: the source coordinates (x, y, z order: grid
    coordinate k indexes input axis ``spatial - 1 - k``) and reads and writes of the input
    flattened per (batch, channel)."""

    def __init__(self, input, grid, padding_mode: int, align_corners: bool, with_grad: bool):
        self.spatial = input.dim() - 2
        self.n, self.c = input.shape[:2]
        self.sizes = list(input.shape[2:])              # input order: (D,) H, W
        low = input.dtype in (torch.float16, torch.bfloat16)
        self.compute = torch.float32 if low else input.dtype
        g = grid.to(self.compute)
        self.coords, self.mults = [], []
        for k in range(self.spatial):
            pos, grad = _source(g[..., k], self.sizes[self.spatial - 1 - k], padding_mode,
                                align_corners, with_grad)
            self.coords.append(pos)
            self.mults.append(grad)
        self.volume = input.reshape(self.n, self.c, -1).to(self.compute)
        self.out_shape = (self.n, self.c) + tuple(grid.shape[1:-1])
        lows = [t.floor() for t in self.coords]
        # per coordinate: (weight toward the low corner, toward the high corner)
        self.weights = [(lo + 1 - t, t - lo) for lo, t in zip(lows, self.coords)]
        self.lows = [lo.to(torch.int64) for lo in lows]

    def nearest(self):
        # nearbyint: halves to even, as torch.round
        return self.index([t.round().to(torch.int64) for t in self.coords])

    def corner(self, offsets):
        return self.index([lo + o for lo, o in zip(self.lows, offsets)])

    def weight(self, offsets, skip=None):
        """The product of the corner's weights along every coordinate but ``skip``, x first
        (ATen's order)."""
        out = None
        for k, o in enumerate(offsets):
            if k != skip:
                out = self.weights[k][o] if out is None else out * self.weights[k][o]
        return out

    def index(self, ints):
        """(The flat input index of integer coordinates, 0 outside; whether inside)."""
        inside, flat = None, None
        for axis, size in enumerate(self.sizes):        # outermost input axis first
            i = ints[self.spatial - 1 - axis]
            ok = (i >= 0) & (i < size)
            inside = ok if inside is None else inside & ok
            flat = i if flat is None else flat * size + i
        return torch.where(inside, flat, 0), inside

    def _spread(self, flat):
        return flat.reshape(self.n, 1, -1).expand(self.n, self.c, -1)

    def read(self, at):
        flat, inside = at
        values = self.volume.gather(2, self._spread(flat)).reshape(self.out_shape)
        return torch.where(inside.unsqueeze(1), values, 0)

    def add_into(self, grad_volume, at, contribution):
        flat, inside = at
        contribution = torch.where(inside.unsqueeze(1), contribution, 0)
        return grad_volume.scatter_add(2, self._spread(flat),
                                       contribution.reshape(self.n, self.c, -1))


def grid_sampler_3d(input, grid, interpolation_mode: int, padding_mode: int,
                    align_corners: bool):
    if interpolation_mode not in (_BILINEAR, _NEAREST) or input.dim() != 5:
        return NotImplemented   # left to ATen
    s = _Sampling(input, grid, padding_mode, align_corners, with_grad=False)
    if interpolation_mode == _NEAREST:
        return s.read(s.nearest()).to(input.dtype)
    out = None
    for offsets in _corners(3):
        term = s.weight(offsets).unsqueeze(1) * s.read(s.corner(offsets))
        out = term if out is None else out + term
    return out.to(input.dtype)


def grid_sampler_backward(grad_output, input, grid, interpolation_mode: int, padding_mode: int,
                          align_corners: bool, output_mask=(True, True)):
    if interpolation_mode not in (_BILINEAR, _NEAREST) or input.dim() not in (4, 5):
        return NotImplemented   # bicubic: left to ATen
    s = _Sampling(input, grid, padding_mode, align_corners, with_grad=True)
    go = grad_output.to(s.compute)                      # (N, C, *out)
    grad_volume = torch.zeros_like(s.volume)
    if interpolation_mode == _NEAREST:
        grad_volume = s.add_into(grad_volume, s.nearest(), go)
        return grad_volume.reshape(input.shape).to(input.dtype), torch.zeros_like(grid)
    grad_coords = [None] * s.spatial
    for offsets in _corners(s.spatial):
        at = s.corner(offsets)
        grad_volume = s.add_into(grad_volume, at, s.weight(offsets).unsqueeze(1) * go)
        seen = (s.read(at) * go).sum(1)                 # summed over channels
        for k in range(s.spatial):
            # d weight / d coordinate k: the other coordinates' weights, signed by the side
            term = seen * s.weight(offsets, skip=k)
            term = term if offsets[k] else -term
            grad_coords[k] = term if grad_coords[k] is None else grad_coords[k] + term
    grad_grid = torch.stack([gc * m for gc, m in zip(grad_coords, s.mults)], dim=-1)
    return grad_volume.reshape(input.shape).to(input.dtype), grad_grid.to(grid.dtype)


def _corners(spatial: int):
    """Corner offsets per coordinate (x, y, z order), in ATen's order: z, then y, then x."""
    if spatial == 2:
        return [(dx, dy) for dy in (0, 1) for dx in (0, 1)]
    return [(dx, dy, dz) for dz in (0, 1) for dy in (0, 1) for dx in (0, 1)]


def _source(coord, size: int, padding_mode: int, align_corners: bool, with_grad: bool):
    """A normalized grid coordinate as a position in the input, the padding mode applied, and
    (``with_grad``) its derivative with respect to the coordinate, else None."""
    if align_corners:
        pos, mult = (coord + 1) / 2 * (size - 1), (size - 1) / 2
    else:
        pos, mult = ((coord + 1) * size - 1) / 2, size / 2
    grad = torch.full_like(pos, mult) if with_grad else None
    if padding_mode == _REFLECTION:
        if align_corners:
            pos, sign = _reflect(pos, 0, 2 * (size - 1))
        else:
            pos, sign = _reflect(pos, -1, 2 * size - 1)
        grad = grad * sign if with_grad else None
    if padding_mode in (_BORDER, _REFLECTION):
        if with_grad:   # ATen: no gradient where the coordinate is clamped
            grad = torch.where((pos <= 0) | (pos >= size - 1), 0, grad)
        pos = pos.clamp(0, size - 1)
    return pos, grad


def _reflect(pos, twice_low: int, twice_high: int):
    """``pos`` folded back into [twice_low / 2, twice_high / 2] by reflecting at its ends, and
    the sign that folding gives its derivative."""
    if twice_low == twice_high:
        return torch.zeros_like(pos), torch.zeros_like(pos)
    low = twice_low / 2
    span = (twice_high - twice_low) / 2
    shifted = pos - low
    sign = torch.where(shifted < 0, -1.0, 1.0)
    shifted = shifted.abs()
    extra = torch.fmod(shifted, span)
    even = torch.remainder(torch.floor(shifted / span), 2) == 0
    return (torch.where(even, extra + low, span - extra + low),
            torch.where(even, sign, -sign).to(pos.dtype))
