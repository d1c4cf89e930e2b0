"""The tiled-layout model: where every element of an XLA array lives (spec §11).

One mechanism serves everything: :func:`plan` turns a shape with a layout into
a :class:`LayoutPlan`, which holds

* the tile levels of the model (for the pure-Python reference maps here), and
* a small *offset program* (DESIGN.md decision 5) that the Cython core runs.

Sizes, offsets, pictures and :class:`~xlashape.LayoutArray` all come from the
plan, so they cannot disagree.

The model, for a shape with dimensions ``D`` and layout ``L``:

0. *Legacy padding* (seeds): dimension ``d`` is padded to
   ``L.padded_dimensions[d]`` (if given).
1. *Physical order*: dimensions listed major to minor, ``reversed(minor_to_major)``.
2. *Tiles, in sequence*: each tile ``(t1..tk)`` applies to the ``k`` minor-most
   physical dimensions (size-1 dimensions are prepended if there are fewer);
   ``*`` entries combine a dimension with the next more-minor one; then each
   dimension ``s`` becomes ``ceil(s/t)`` tiles (major) and ``t`` within-tile
   positions (minor): pad, reshape, transpose.
3. *Linearize* row-major over the final physical dimensions, and round the
   element count up to ``tail_padding_alignment_in_elements`` (``L(n)``).
4. *Bytes*: ``ceil(count * bits / 8)``, where bits is ``E(n)`` if set, else the
   type's byte width times 8. Sub-byte elements are packed low bits first.

Split configs and the dynamic-shape metadata prefix (``M(n)``) do not move
elements and are ignored here, as in XLA's size functions.

>>> from xlashape import Shape, Layout
>>> s = Shape("f32", (3, 5), Layout((1, 0), tiles=[(2, 2)]))
>>> physical_dimensions(s), linear_index(s, (2, 3)), physical_size_in_bytes(s)
((2, 3, 2, 2), 17, 96)
"""

from __future__ import annotations

import functools
import math
import numbers
from typing import Optional, Sequence, Tuple

from .errors import InvalidShapeError, ShapeIndexError, ShapeTypeError
from .layout import COMBINE_DIMENSION, Layout
from .primitive_types import PrimitiveType
from .shape import Shape, UNBOUNDED_SIZE

__all__ = [
    "LayoutPlan",
    "plan",
    "physical_dimensions",
    "physical_element_count",
    "physical_size_in_bytes",
    "element_size_in_bits",
    "linear_index",
    "multidimensional_index",
    "OP_MULADD",
    "OP_DIV",
    "OP_MOD",
]

# Offset-program opcodes. Each op is (opcode, dst, a, b, c):
#   OP_MULADD: r[dst] = r[a] * c + r[b]
#   OP_DIV:    r[dst] = r[a] // c
#   OP_MOD:    r[dst] = r[a] % c
OP_MULADD = 0
OP_DIV = 1
OP_MOD = 2


class _Level:
    """One tile level of the model, with what is needed to run it both ways."""

    __slots__ = ("prepend", "k", "sizes", "groups", "group_sizes", "tile")

    def __init__(self, prepend, k, sizes, groups, group_sizes, tile):
        self.prepend = prepend        # size-1 dims prepended before this level
        self.k = k                    # number of minor dims the tile covers
        self.sizes = sizes            # sizes of those k dims (after prepending)
        self.groups = groups          # list of lists of positions (0..k-1) combined by '*'
        self.group_sizes = group_sizes  # product of sizes per group
        self.tile = tile              # tile bound per group


class LayoutPlan:
    """Everything xlashape knows about where the elements of one shape live.

    Build with :func:`plan` (cached). Attributes:

    ``dimensions``             logical dims (bounds for bounded dynamic dims)
    ``minor_to_major``         the layout's order
    ``padded_dimensions``      logical dims after the legacy padding
    ``physical_dimensions``    final tiled dims, major to minor
    ``physical_strides``       row-major element strides of those
    ``element_count``          elements in the buffer incl. padding and ``L(n)``
    ``element_bits``           bits per stored element
    ``size_in_bytes``          ``ceil(element_count * element_bits / 8)``
    ``ops``                    the offset program, a tuple of (op, dst, a, b, c)
    ``num_registers``          registers used: 0..rank-1 are the logical
                               indices, ``rank`` is the constant 0, then temporaries
    ``out_registers``, ``out_strides``
                               offset = sum(r[out_registers[i]] * out_strides[i])
    ``minor_dim``, ``minor_run``, ``minor_stride``
                               along logical dim ``minor_dim`` (``minor_to_major[0]``),
                               starting at any multiple of ``minor_run``, the next
                               ``minor_run`` elements are ``minor_stride`` elements
                               apart (``minor_run`` 1 means no such promise)
    ``strides``                numpy-style byte strides of the logical array if
                               the layout is expressible by strides, else None
    """

    def __init__(self, shape: Shape):
        if not isinstance(shape, Shape):
            raise ShapeTypeError(f"expected a Shape, got {type(shape).__name__}")
        if not shape.is_array:
            raise InvalidShapeError(
                f"{shape} is not an array shape; only arrays have a memory layout")
        if shape.is_unbounded_dynamic:
            raise InvalidShapeError(
                f"{shape} has an unbounded dynamic dimension ('?'): its size is unknown")
        self.shape = shape
        dims = shape.dimensions
        n = len(dims)
        layout = shape.layout
        if layout is None:
            layout = Layout(tuple(range(n - 1, -1, -1)))
        self.layout = layout
        _check_layout(shape, layout)
        self.element_type = shape.element_type
        self.dimensions = dims
        self.rank = n
        m2m = layout.minor_to_major
        self.minor_to_major = m2m
        padded = layout.padded_dimensions or dims
        for d, (p, s) in enumerate(zip(padded, dims)):
            if p < s:
                raise InvalidShapeError(
                    f"padded_dimensions[{d}] is {p}, smaller than dimension {d} of size {s}")
        self.padded_dimensions = tuple(padded)

        bits = layout.element_size_in_bits or self.element_type.byte_width * 8
        self.element_bits = bits

        # -- run the model symbolically: sizes and registers side by side ---
        ZERO = n
        ops = []
        nreg = [n + 1]

        def new_reg():
            nreg[0] += 1
            return nreg[0] - 1

        sizes = [padded[d] for d in reversed(m2m)]
        regs = [d for d in reversed(m2m)]
        levels = []
        for tile in layout.tiles:
            t = tile.dimensions
            k = len(t)
            pre = max(0, k - len(sizes))
            sizes = [1] * pre + sizes
            regs = [ZERO] * pre + regs
            suf_sizes = sizes[len(sizes) - k:]
            suf_regs = regs[len(regs) - k:]
            groups, gsizes, gregs, gtile = [], [], [], []
            cur, csize, creg = [], 1, ZERO
            for j in range(k):
                s, r = suf_sizes[j], suf_regs[j]
                if cur:
                    # combine the carried dims with this one: v = carry * s + r
                    if creg == ZERO:
                        nr = r
                    elif s == 1:
                        nr = creg  # r is 0 on a size-1 dim
                    else:
                        nr = new_reg()
                        ops.append((OP_MULADD, nr, creg, r, s))
                    csize, creg = csize * s, nr
                else:
                    csize, creg = s, r
                cur.append(j)
                if t[j] == COMBINE_DIMENSION:
                    if j == k - 1:
                        raise InvalidShapeError(
                            f"tile {tile} of layout {layout} ends with '*': there is no "
                            "more-minor dimension to combine with")
                    continue
                groups.append(cur)
                gsizes.append(csize)
                gregs.append(creg)
                gtile.append(t[j])
                cur, csize, creg = [], 1, ZERO
            qs, qr, rs, rr = [], [], [], []
            for s, r, tt in zip(gsizes, gregs, gtile):
                qs.append(-(-s // tt))
                rs.append(tt)
                if r == ZERO:
                    qr.append(ZERO)
                    rr.append(ZERO)
                elif tt == 1:
                    qr.append(r)
                    rr.append(ZERO)
                elif s <= tt:  # one tile: the index is already the within-tile index
                    qr.append(ZERO)
                    rr.append(r)
                else:
                    q = new_reg()
                    ops.append((OP_DIV, q, r, 0, tt))
                    m = new_reg()
                    ops.append((OP_MOD, m, r, 0, tt))
                    qr.append(q)
                    rr.append(m)
            levels.append(_Level(pre, k, tuple(suf_sizes), groups, tuple(gsizes), tuple(gtile)))
            sizes = sizes[: len(sizes) - k] + qs + rs
            regs = regs[: len(regs) - k] + qr + rr

        self.levels = tuple(levels)
        self.physical_dimensions = tuple(sizes)
        strides = [1] * len(sizes)
        acc = 1
        for i in range(len(sizes) - 1, -1, -1):
            strides[i] = acc
            acc *= sizes[i]
        self.physical_strides = tuple(strides)
        total = acc
        align = layout.tail_padding_alignment_in_elements
        if align > 1:
            total = -(-total // align) * align
        self.unpadded_element_count = _prod(dims)
        self.element_count = total
        self.size_in_bytes = -(-total * bits // 8)

        # Offset program outputs; several physical dims may share a register
        # only through ZERO, which is dropped.
        out_r, out_s = [], []
        for r, s, st in zip(regs, sizes, strides):
            if r != ZERO and s > 1:
                out_r.append(r)
                out_s.append(st)
        self.ops = tuple(ops)
        self.num_registers = nreg[0]
        self.out_registers = tuple(out_r)
        self.out_strides = tuple(out_s)
        self._final_regs = tuple(regs)
        self._analyse_minor_runs()
        self.strides = self._byte_strides()

    # -- analysis for the bulk kernels --------------------------------------
    def _analyse_minor_runs(self):
        n = self.rank
        if n == 0:
            self.minor_dim, self.minor_run, self.minor_stride = -1, 1, 0
            return
        d0 = self.minor_to_major[0]
        zero = n
        slope = {d0: 1}
        g = 0
        mixed = False
        for op, dst, a, b, c in self.ops:
            if op == OP_MULADD:
                ina, inb = a in slope, b in slope
                if ina or inb:
                    other = b if ina else a
                    if other != zero:
                        mixed = True
                    slope[dst] = slope.get(a, 0) * c + slope.get(b, 0)
            elif a in slope:
                if c > 1:
                    g = math.gcd(g, c)
                slope[dst] = 0 if op == OP_DIV else slope[a]
        if mixed:
            run = 1
        elif g == 0:
            run = max(self.padded_dimensions[d0], 1)
        else:
            run = g
        stride = 0
        for r, st in zip(self.out_registers, self.out_strides):
            stride += slope.get(r, 0) * st
        self.minor_dim, self.minor_run, self.minor_stride = d0, run, stride

    def _byte_strides(self):
        """numpy-style byte strides when every logical dim maps to one physical
        dim with a fixed element stride and elements are whole bytes."""
        bits = self.element_bits
        if bits % 8 or bits == 0:
            return None
        if bits // 8 != self.element_type.byte_width:
            return None
        n = self.rank
        slope = {d: {d: 1} for d in range(n)}
        for op, dst, a, b, c in self.ops:
            if op == OP_MULADD:
                ok_a = a == n or (a in slope)
                ok_b = b == n or (b in slope)
                if ok_a and ok_b:
                    merged = {}
                    for src, fac in ((a, c), (b, 1)):
                        for d, v in slope.get(src, {}).items():
                            merged[d] = merged.get(d, 0) + v * fac
                    slope[dst] = merged
            # DIV/MOD by anything other than a trivially-satisfied bound split a
            # dimension: the map is no longer linear in it.
        used = {}
        for r, st in zip(self.out_registers, self.out_strides):
            if r not in slope:
                return None
            for d, v in slope[r].items():
                used[d] = used.get(d, 0) + v * st
        # Every DIV/MOD must be on a register nothing reaches the output through.
        consumed = set(self.out_registers)
        for op, dst, a, b, c in reversed(self.ops):
            if dst in consumed:
                if op != OP_MULADD:
                    return None
                consumed.update((a, b))
        nbytes = bits // 8
        out = []
        for d in range(n):
            if self.dimensions[d] <= 1:
                out.append(used.get(d, 0) * nbytes)
            elif d not in used:
                return None
            else:
                out.append(used[d] * nbytes)
        return tuple(out)

    # -- evaluation (pure Python; the reference for the compiled kernels) ---
    def run_program(self, index: Sequence[int]) -> int:
        """Evaluate the offset program in Python (checks nothing)."""
        r = list(index) + [0] * (self.num_registers - self.rank)
        for op, dst, a, b, c in self.ops:
            if op == OP_MULADD:
                r[dst] = r[a] * c + r[b]
            elif op == OP_DIV:
                r[dst] = r[a] // c
            else:
                r[dst] = r[a] % c
        return sum(r[x] * s for x, s in zip(self.out_registers, self.out_strides))

    def physical_coordinates(self, index: Sequence[int]) -> tuple:
        """The model run step by step: a logical index -> physical coordinates."""
        m2m = self.minor_to_major
        coords = [index[d] for d in reversed(m2m)]
        for lv in self.levels:
            coords = [0] * lv.prepend + coords
            k = lv.k
            suffix = coords[len(coords) - k:]
            vals = []
            for grp in lv.groups:
                v = 0
                for j in grp:
                    v = v * lv.sizes[j] + suffix[j]
                vals.append(v)
            coords = (coords[: len(coords) - k] + [v // t for v, t in zip(vals, lv.tile)]
                      + [v % t for v, t in zip(vals, lv.tile)])
        return tuple(coords)

    def coordinates_to_index(self, coords: Sequence[int]) -> Optional[tuple]:
        """Physical coordinates -> logical index, or None for a padding slot."""
        coords = list(coords)
        for lv in reversed(self.levels):
            m = len(lv.groups)
            q = coords[len(coords) - 2 * m: len(coords) - m]
            r = coords[len(coords) - m:]
            suffix = [0] * lv.k
            for grp, gsize, t, qq, rr in zip(lv.groups, lv.group_sizes, lv.tile, q, r):
                v = qq * t + rr
                if v >= gsize:
                    return None
                for j in reversed(grp):
                    suffix[j] = v % lv.sizes[j]
                    v //= lv.sizes[j]
            coords = coords[: len(coords) - 2 * m] + suffix
            coords = coords[lv.prepend:]
        index = [0] * self.rank
        for c, d in zip(coords, reversed(self.minor_to_major)):
            if c >= self.dimensions[d]:
                return None
            index[d] = c
        return tuple(index)

    def check_index(self, index) -> tuple:
        """Validate a logical index: ints, right length, 0 <= i < dim."""
        if isinstance(index, numbers.Integral) and not isinstance(index, bool):
            index = (index,)
        try:
            index = tuple(index)
        except TypeError:
            raise ShapeTypeError(
                f"index must be a sequence of ints, got {type(index).__name__}") from None
        if len(index) != self.rank:
            raise ShapeIndexError(
                f"index has {len(index)} entries but the shape has {self.rank} dimensions")
        out = []
        for axis, (i, size) in enumerate(zip(index, self.dimensions)):
            if isinstance(i, bool) or not isinstance(i, numbers.Integral):
                raise ShapeTypeError(
                    f"index entries must be ints, got {type(i).__name__} at axis {axis}")
            i = int(i)
            if not 0 <= i < size:
                raise ShapeIndexError(
                    f"index {i} is out of bounds for axis {axis} with size {size}")
            out.append(i)
        return tuple(out)

    def linear_index(self, index) -> int:
        index = self.check_index(index)
        coords = self.physical_coordinates(index)
        return sum(c * s for c, s in zip(coords, self.physical_strides))

    def multidimensional_index(self, linear) -> Optional[tuple]:
        if isinstance(linear, bool) or not isinstance(linear, numbers.Integral):
            raise ShapeTypeError(f"linear index must be an int, got {type(linear).__name__}")
        linear = int(linear)
        if not 0 <= linear < self.element_count:
            raise ShapeIndexError(
                f"linear index {linear} is out of bounds for a buffer of "
                f"{self.element_count} elements")
        coords = []
        rem = linear
        for s in self.physical_strides:
            coords.append(rem // s)
            rem %= s
        if coords and coords[0] >= self.physical_dimensions[0]:
            return None  # tail padding (L(n))
        if not self.physical_dimensions and linear > 0:
            return None
        return self.coordinates_to_index(coords)

    def __repr__(self):
        return f"<LayoutPlan {self.shape} -> {list(self.physical_dimensions)}>"


def _prod(values) -> int:
    out = 1
    for v in values:
        out *= v
    return out


def _check_layout(shape: Shape, layout: Layout) -> None:
    """The checks without which the model is meaningless (a subset of
    ``ValidateShape``, with messages that say what to fix)."""
    n = len(shape.dimensions)
    m2m = layout.minor_to_major
    if len(m2m) != n:
        raise InvalidShapeError(
            f"layout {layout} has {len(m2m)} minor_to_major entries but shape "
            f"{shape.human_string()} has {n} dimensions")
    if sorted(m2m) != list(range(n)):
        raise InvalidShapeError(
            f"layout {layout} minor_to_major must be a permutation of 0..{n - 1}")
    for d, size in enumerate(shape.dimensions):
        if size < 0:
            raise InvalidShapeError(f"dimension {d} has negative size {size}")
    for t in layout.tiles:
        if len(t) == 0 or any(x == 0 for x in t.dimensions):
            raise InvalidShapeError(f"layout has invalid tiles: {shape}")
    bits = layout.element_size_in_bits
    if bits < 0:
        raise InvalidShapeError(f"layout element_size_in_bits field is negative: {bits}")


@functools.lru_cache(maxsize=4096)
def _plan_cached(shape: Shape) -> LayoutPlan:
    return LayoutPlan(shape)


def plan(shape) -> LayoutPlan:
    """The (cached) :class:`LayoutPlan` of an array shape.

    A shape without a layout gets XLA's default layout ``{n-1,...,0}``.
    Accepts a :class:`Shape` or HLO text.
    """
    if isinstance(shape, str):
        from .hlo_text import parse_shape  # the parser sits above this layer

        shape = parse_shape(shape)
    if not isinstance(shape, Shape):
        raise ShapeTypeError(f"expected a Shape or shape text, got {type(shape).__name__}")
    return _plan_cached(shape)


def physical_dimensions(shape) -> tuple:
    """The physical (tiled) dimensions, major to minor.

    >>> physical_dimensions("bf16[16,256]{1,0:T(8,128)(2,1)}")
    (2, 2, 4, 128, 2, 1)
    """
    return plan(shape).physical_dimensions


def physical_element_count(shape) -> int:
    """Elements in the buffer: logical elements plus every padding slot."""
    return plan(shape).element_count


def physical_size_in_bytes(shape) -> int:
    """Bytes of the buffer: all tiling padding, ``L(n)`` and ``E(n)`` packing.

    Equals XLA's ``ShapeUtil::ArraySize`` whenever sub-tiles add no padding of
    their own (all TPU formats); where a later tile level pads the tiles of an
    earlier one (``f32[3,5]{1,0:T(2,2)(3,1)}``: 144 bytes here, 96 from
    ``ArraySize``), this counts that padding and ``ArraySize`` does not.
    """
    return plan(shape).size_in_bytes


def element_size_in_bits(shape) -> int:
    """Bits per stored element: ``E(n)`` if set, else the byte width times 8."""
    return plan(shape).element_bits


def linear_index(shape, index) -> int:
    """Element offset of a logical index in the physical buffer.

    >>> linear_index("f32[3,5]{1,0:T(2,2)}", (2, 3))
    17
    """
    return plan(shape).linear_index(index)


def multidimensional_index(shape, linear: int) -> Optional[tuple]:
    """The logical index stored at element offset ``linear``; ``None`` for padding.

    >>> multidimensional_index("f32[3,5]{1,0:T(2,2)}", 17)
    (2, 3)
    """
    return plan(shape).multidimensional_index(linear)
