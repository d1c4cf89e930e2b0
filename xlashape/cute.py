"""XLA layouts as CuTe layouts: ``(shape):(stride)`` over the padded domain.

CUTLASS's CuTe describes a layout by a hierarchical shape and matching
strides; an integer coordinate inside a mode is split colexicographically
(the first sub-mode varies fastest), and the offset is the sum of
sub-coordinates times strides. Many XLA layouts are exactly that: one mode
per logical dimension (in dimension order), each split into the pieces that
the tiles cut it into, with element strides from the tiled physical buffer.

>>> cute_layout_text("f32[3,5]{1,0:T(2,2)}")
'((2,2),(2,3)):((2,12),(1,4))'
>>> cute_layout_text("f32[3,5]{0,1}")
'(3,5):(1,3)'

The domain is the *padded* one: each dimension is rounded up to what its
tiles cover (3 rows tiled by 2 become ``(2,2)``, 4 rows), and the legacy
``padded_dimensions`` count too; coordinates beyond the logical sizes land in
padding slots; a dimension smaller than its tile fills the tile
(``f32[3,5]{1,0:T(4,8)}`` is ``(4,8):(8,1)``). Strides count elements (for
``E(n)``-packed sub-byte types, elements of n bits).

A layout that CuTe's hierarchical strides cannot express (a tile that
splits a dimension at a size that does not divide the pieces earlier tiles
made, or ``*``-combined dimensions that do not line up with the tile) raises
:class:`~xlashape.InvalidShapeError` saying which tile does it.
"""

from __future__ import annotations

from .errors import InvalidShapeError
from .hlo_text import parse_shape
from .layout import COMBINE_DIMENSION
from . import tiling

__all__ = ["cute_layout", "cute_layout_text"]


class _Digit:
    """One piece of a logical dimension: (index // a) % b, or a padding
    piece of a combined dimension (dim None, always 0)."""

    __slots__ = ("dim", "a", "b", "top")

    def __init__(self, dim, a, b, top):
        self.dim, self.a, self.b, self.top = dim, a, b, top


class _Coord:
    """A physical coordinate: digits most significant first, its range."""

    __slots__ = ("digits", "size")

    def __init__(self, digits, size):
        self.digits, self.size = digits, size


def _product(digits):
    p = 1
    for d in digits:
        p *= d.b
    return p


def _refuse(shape, why):
    raise InvalidShapeError(f"{shape} has no CuTe layout: {why}")


def _paddable(digits, j):
    """The piece at j may grow: it is the top of its dimension and nothing
    but size-1 pieces sit above it."""
    return digits[j].top and all(d.b == 1 for d in digits[:j])


def _keep(digits):
    return [d for d in digits if d.b != 1 or d.top]


def _split(shape, coord, t, tile):
    """``coord`` cut by tile entry ``t`` into (tile index, within tile)."""
    digits = list(coord.digits)
    if _product(digits) <= t:
        # one tile holds every value; the top piece grows to fill the tile
        # (the padded domain), when the pieces below divide it
        for j, dig in enumerate(digits):
            if _paddable(digits, j):
                lower = _product(digits[j + 1:])
                if t % lower == 0:
                    digits[j] = _Digit(dig.dim, dig.a, t // lower, True)
                break
        return _Coord([], -(-coord.size // t)), _Coord(digits, t)
    m, j = 1, len(digits) - 1
    while j >= 0 and m * digits[j].b <= t:
        m *= digits[j].b
        j -= 1
    if m == t:
        return _Coord(digits[:j + 1], -(-coord.size // t)), _Coord(digits[j + 1:], t)
    dig = digits[j]
    if t % m:
        _refuse(shape, f"tile {tile} cuts at {t}, which is not a multiple of the "
                       f"{m} values below it")
    k = t // m
    b = dig.b
    if b % k:
        if not _paddable(digits, j):
            what = f"dimension {dig.dim}" if dig.dim is not None else "a padded piece"
            _refuse(shape, f"tile {tile} cuts a piece of {what} of size {b} at {k}, "
                           f"which does not divide it")
        b = -(-b // k) * k            # the tile pads the dimension
    hi = _Digit(dig.dim, dig.a * k, b // k, dig.top)
    lo = _Digit(dig.dim, dig.a, k, False)
    q = _keep(digits[:j] + [hi])
    r = _keep([lo] + digits[j + 1:])
    return _Coord(q, -(-coord.size // t)), _Coord(r, t)


def _combine(shape, coords):
    """Coordinates combined by '*' (most major first) into one."""
    digits = []
    size = 1
    for i, c in enumerate(coords):
        if i and _product(c.digits) != c.size:
            gap = c.size // _product(c.digits)
            if gap * _product(c.digits) != c.size:
                _refuse(shape, "'*' combines a dimension whose tiles leave a gap that "
                               "no stride can skip")
            digits.append(_Digit(None, 1, gap, False))
        digits.extend(c.digits)
        size *= c.size
    return _Coord(digits, size)


def _modes(shape):
    p = tiling.plan(shape)
    if any(d == 0 for d in p.dimensions):
        _refuse(shape, "a dimension of size 0 has no elements to lay out")
    coords = []
    for d in reversed(p.minor_to_major):
        size = p.padded_dimensions[d]
        coords.append(_Coord([_Digit(d, 1, size, True)], size))
    for tile in p.layout.tiles:
        t = tile.dimensions
        k = len(t)
        pre = max(0, k - len(coords))
        coords = [_Coord([], 1) for _ in range(pre)] + coords
        suffix = coords[len(coords) - k:]
        groups, cur = [], []
        for j in range(k):
            cur.append(suffix[j])
            if t[j] == COMBINE_DIMENSION:
                continue
            groups.append((_combine(shape, cur) if len(cur) > 1 else cur[0], t[j]))
            cur = []
        qs, rs = [], []
        for c, tt in groups:
            q, r = _split(shape, c, tt, tile)
            qs.append(q)
            rs.append(r)
        coords = coords[:len(coords) - k] + qs + rs
    sizes = tuple(c.size for c in coords)
    if sizes != tuple(p.physical_dimensions):  # pragma: no cover - a model bug
        raise AssertionError(f"CuTe model disagrees with the tiling plan for {shape}")
    pieces = {d: [] for d in range(p.rank)}
    stride = 1
    for c in reversed(coords):
        w = stride
        for dig in reversed(c.digits):
            if dig.dim is not None:
                pieces[dig.dim].append((dig.a, dig.b, w))
            w *= dig.b
        stride *= c.size
    modes = []
    for d in range(p.rank):
        ones = [x for x in pieces[d] if x[1] == 1]
        ps = sorted(x for x in pieces[d] if x[1] != 1)
        a = 1
        for pa, pb, _ in ps:
            if pa != a:  # pragma: no cover - exact splits keep the chain whole
                raise AssertionError(f"CuTe pieces of dimension {d} do not chain")
            a *= pb
        if not ps:
            modes.append((1, ones[0][2] if ones else 0))
        elif len(ps) == 1:
            modes.append((ps[0][1], ps[0][2]))
        else:
            modes.append((tuple(x[1] for x in ps), tuple(x[2] for x in ps)))
    return modes


def cute_layout(shape):
    """``(shape, stride)`` as nested tuples of ints (pycute's ``Layout(shape,
    stride)`` arguments), one mode per logical dimension.

    ``shape`` is a :class:`~xlashape.Shape` with a layout or HLO text.

    >>> cute_layout("bf16[16,256]{1,0:T(8,128)(2,1)}")
    (((2, 4, 2), (128, 2)), ((1, 256, 2048), (2, 1024)))
    """
    if isinstance(shape, str):
        shape = parse_shape(shape)
    modes = _modes(shape)
    return tuple(m[0] for m in modes), tuple(m[1] for m in modes)


def _text(x):
    if isinstance(x, tuple):
        return "(" + ",".join(_text(v) for v in x) + ")"
    return str(x)


def cute_layout_text(shape) -> str:
    """CuTe's printed form ``(shape):(stride)``, e.g. ``((2,2),(2,3)):((2,12),(1,4))``."""
    s, d = cute_layout(shape)
    return f"{_text(s)}:{_text(d)}"
