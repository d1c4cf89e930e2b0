"""The shape algebra of zero-copy views: which :class:`~xlashape.Shape`
shows the same buffer with its dimensions permuted or reshaped.

A view keeps every element at the byte offset it has in the original, so only
the layout changes: :func:`permuted_shape` permutes the logical dimensions
and lets ``minor_to_major`` (and legacy ``padded_dimensions``) follow;
:func:`reshaped_shape` finds a layout of the new dimensions under which the
C-order reshape leaves every element in place (split or merged strided
dimensions, the tiled ones unchanged or cut into whole tiles), checked
against the tiling model, or returns None when no layout does (the caller
copies). Pure metadata: no buffers, no numpy; ``LayoutArray.transpose`` /
``.T`` / ``.reshape`` (``xlashape._numpy_api``) build their views from these.

>>> from xlashape.hlo_text import parse_shape
>>> str(permuted_shape(parse_shape("f32[8,128]{1,0:T(8,128)}"), (1, 0)))
'f32[128,8]{0,1:T(8,128)}'
>>> str(reshaped_shape(parse_shape("f32[4,8,128]{2,1,0:T(8,128)}"), (32, 128)))
'f32[32,128]{1,0:T(8,128)}'
"""

from __future__ import annotations

from . import tiling
from .errors import XlaShapeError
from .shape import Shape

__all__ = ["permuted_shape", "reshaped_shape"]


def permuted_shape(shape: Shape, axes) -> Shape:
    """``shape`` with its logical dimensions permuted (new dim i is old dim
    ``axes[i]``) and the same physical placement: the layout's
    ``minor_to_major`` and legacy ``padded_dimensions`` follow, tiles stay."""
    lay = shape.layout
    inv = [0] * len(axes)
    for i, a in enumerate(axes):
        inv[a] = i
    padded = tuple(lay.padded_dimensions[a] for a in axes) if lay.padded_dimensions else ()
    layout = lay.replace(minor_to_major=tuple(inv[d] for d in lay.minor_to_major),
                         padded_dimensions=padded)
    return Shape(shape.element_type, tuple(shape.dimensions[a] for a in axes), layout,
                 tuple(shape.dynamic_dimensions[a] for a in axes))


def _nocopy_reshape(olddims, oldstrides, newdims):
    """New strides for a C-order reshape without copying, or None
    (numpy's algorithm: groups of old dims that multiply to groups of new
    dims, each old group contiguous in C order)."""
    od = [(s, st) for s, st in zip(olddims, oldstrides) if s != 1]
    newstrides = [0] * len(newdims)
    oi, oj, ni, nj = 0, 1, 0, 1
    while ni < len(newdims) and oi < len(od):
        np_, op = newdims[ni], od[oi][0]
        while np_ != op:
            if np_ < op:
                np_ *= newdims[nj]
                nj += 1
            else:
                op *= od[oj][0]
                oj += 1
        for k in range(oi, oj - 1):
            if od[k][1] != od[k + 1][0] * od[k + 1][1]:
                return None
        newstrides[nj - 1] = od[oj - 1][1]
        for k in range(nj - 1, ni, -1):
            newstrides[k - 1] = newstrides[k] * newdims[k]
        ni, nj, oi, oj = nj, nj + 1, oj, oj + 1
    return [0 if d == 1 else s for d, s in zip(newdims, newstrides)]


def reshaped_shape(shape: Shape, newdims):
    """A Shape of ``newdims`` whose layout puts every element of the C-order
    reshape at the offset it has in ``shape``, or None if no layout does.

    The dimensions that tiles touch (the ``k`` minor-most in physical order,
    ``k`` the largest tile rank) reappear unchanged, except that the
    major-most of them may absorb or shed whole tiles (``f32[4,8,128]`` and
    ``f32[32,128]`` under ``T(8,128)``); the others are strided over whole
    tiled blocks and may be split or merged where numpy could reshape a
    strided array without copying. Every candidate is checked against the
    tiling model before it is used.
    """
    p = tiling.plan(shape)
    newdims = tuple(newdims)
    if newdims == tuple(shape.dimensions):
        return shape
    if p.unpadded_element_count == 0:
        return None
    return _reshape_try(p, shape, newdims, False) or _reshape_try(p, shape, newdims, True)


def _reshape_try(p, shape, newdims, split_first):
    old = tuple(shape.dimensions)
    n = len(old)
    lay = p.layout
    k = min(max((len(t) for t in lay.tiles), default=0), n)
    phys = list(reversed(lay.minor_to_major))          # major to minor
    inner, outer = phys[n - k:], phys[:n - k]
    scale, t0, d0 = 1, 1, None
    if split_first:
        # The major-most tiled dimension d0, cut into whole tiles by the
        # first tile level: its tile index is the major-most coordinate of
        # the tiled block as long as later levels are no wider, so it is
        # strided (S_q per tile) and can merge or split like the outer dims.
        if not lay.tiles or k == 0 or len(lay.tiles[0]) != k or \
                any(len(t) > k for t in lay.tiles):
            return None
        d0, t0 = inner[0], lay.tiles[0].dimensions[0]
        if t0 <= 0 or old[d0] % t0 or p.padded_dimensions[d0] != old[d0]:
            return None
        inner = inner[1:]
        scale = t0
    if any(old[d] == 1 for d in inner):
        return None       # a size-1 tiled dimension cannot be followed
    fake = 1 << 50        # beyond any real offset: never merges with anything
    strides = [0] * n
    for j, d in enumerate(inner):
        strides[d] = fake + j
    for d in outer:
        e = [0] * n
        e[d] = 1
        strides[d] = p.run_program(e) * scale
    if d0 is not None:
        e = [0] * n
        e[d0] = t0
        s_q = p.run_program(e)
        strides[d0] = s_q           # per element, in units of 1/t0
    new_strides = _nocopy_reshape(old, strides, newdims)
    if new_strides is None:
        return None
    new_inner = []
    for j, d in enumerate(inner):
        hits = [i for i, s in enumerate(new_strides) if s == fake + j]
        if len(hits) != 1 or newdims[hits[0]] != old[d]:
            return None
        new_inner.append(hits[0])
    new_d0 = None
    if d0 is not None:
        hits = [i for i, s in enumerate(new_strides) if s == s_q and newdims[i] != 1]
        if len(hits) != 1 or newdims[hits[0]] % t0:
            return None
        new_d0 = hits[0]
        new_inner.insert(0, new_d0)
    rest = [i for i in range(len(newdims)) if i not in new_inner]
    if any(new_strides[i] >= fake for i in rest):
        return None
    for i in rest:
        if new_strides[i] % scale:
            return None
        new_strides[i] //= scale
    real = sorted((i for i in rest if newdims[i] != 1), key=lambda i: new_strides[i])
    ones = [i for i in rest if newdims[i] == 1]
    # a size-1 dimension goes just major of its logical right neighbour
    # (row-major stays row-major); never among the tiled ones
    order = list(real)
    for i in reversed(ones):
        right = [j for j in order if j > i]
        at = order.index(min(right)) + 1 if right else 0
        order.insert(at, i)
    m2m = list(reversed(new_inner)) + order
    padded = [0] * len(newdims)
    pad_old = p.padded_dimensions
    for i, d in zip(new_inner[1:] if d0 is not None else new_inner, inner):
        padded[i] = pad_old[d]
    if new_d0 is not None:
        padded[new_d0] = newdims[new_d0]
    span = 1
    for x in p.physical_dimensions:
        span *= x
    for j, i in enumerate(real):
        hi = new_strides[real[j + 1]] if j + 1 < len(real) else span
        if new_strides[i] <= 0 or hi % new_strides[i]:
            return None
        padded[i] = hi // new_strides[i]
    for i in ones:
        padded[i] = 1
    if tuple(padded) == newdims and not lay.padded_dimensions:
        padded = ()
    try:
        layout = lay.replace(minor_to_major=tuple(m2m), padded_dimensions=tuple(padded))
        cand = Shape(shape.element_type, newdims, layout)
        q = tiling.plan(cand)
    except XlaShapeError:
        return None
    if q.size_in_bytes != p.size_in_bytes or q.element_count != p.element_count:
        return None
    for i in real:
        e = [0] * len(newdims)
        e[i] = 1
        if q.run_program(e) != new_strides[i]:
            return None
    if new_d0 is not None and newdims[new_d0] > t0:
        # (one tile along it, there is no next tile to place)
        e = [0] * len(newdims)
        e[new_d0] = t0
        if q.run_program(e) != s_q:
            return None
    return cand
