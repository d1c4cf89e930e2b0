"""The tiled-layout model: where every element of an XLA array lives.

One mechanism serves everything: :func:`plan` turns a shape with a layout into
a :class:`LayoutPlan`, which holds

* the tile levels of the model (for the pure-Python reference maps here), and
* a small *offset program*: per physical coordinate, a combination of the
  logical indices, then div/mod steps, then a stride, which the compiled core
  (``xlashape._core``) runs for LayoutArray and :mod:`xlashape.index_maps`.

Sizes, offsets, pictures and :class:`~xlashape.LayoutArray` all come from the
plan, so they cannot disagree.

The model, for a shape with dimensions ``D`` and layout ``L``:

0. *Legacy padding* (the ``padded_dimensions`` field of XLA's older shapes
   documentation): dimension ``d`` is padded to ``L.padded_dimensions[d]``
   (if given).
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

Besides the single-index maps, the module offers the compiled bulk maps
:func:`linear_indices` (N x rank -> N offsets) and
:func:`multidimensional_indices` (N offsets -> N x rank indices and a padding
mask), :func:`strides` (numpy byte strides when the layout has them), and
:func:`size_with_layout` and :func:`format_bytes` (sizes as XLA's TPU memory
report prints them). Where padding comes from and what a user can do about it
is :mod:`xlashape.padding`, built on this model.

>>> from xlashape import Shape, Layout
>>> s = Shape("f32", (3, 5), Layout((1, 0), tiles=[(2, 2)]))
>>> physical_dimensions(s), linear_index(s, (2, 3)), physical_size_in_bytes(s)
((2, 3, 2, 2), 17, 96)
"""

from __future__ import annotations

import functools
import itertools
import math
import numbers
from dataclasses import dataclass
from typing import Optional, Sequence, Tuple

import numpy as np

from ._base import INT64_MIN, check_index, element_bits
from ._shared import as_shape, index_rows, offset_array
from ._validation import check_element_size, check_tiles, require_permutation, require_sizes
from .errors import InvalidShapeError, ShapeIndexError, ShapeTypeError
from .layout import COMBINE_DIMENSION, Layout, Tile
from .shape import Shape

__all__ = [
    "LayoutPlan",
    "TileLevel",
    "TileEntry",
    "plan",
    "physical_dimensions",
    "physical_element_count",
    "physical_size_in_bytes",
    "element_size_in_bits",
    "linear_index",
    "multidimensional_index",
    "linear_indices",
    "multidimensional_indices",
    "strides",
    "format_bytes",
    "format_bytes_apart",
    "size_with_layout",
    "format_expansion",
    "OP_MULADD",
    "OP_DIV",
    "OP_MOD",
    "OP_CHECK",
]

# Offset-program opcodes, defined here only (the compiled core translates them
# into its own C codes when it loads a program). Each op is (opcode, dst, a, b, c):
#   OP_MULADD: r[dst] = r[a] * c + r[b]
#   OP_DIV:    r[dst] = r[a] // c
#   OP_MOD:    r[dst] = r[a] % c
OP_MULADD = 0
OP_DIV = 1
OP_MOD = 2
#   OP_CHECK:  (inverse program only) the slot is padding unless r[a] < c
OP_CHECK = 3

# arrays up to this many elements get their strides verified exhaustively
# when the symbolic analysis cannot decide
_VERIFY_LIMIT = 4096


class _Level:
    """One tile level of the model, as the plan's programs need it (the public
    view is :class:`TileLevel`)."""

    __slots__ = ("prepend", "k", "sizes", "groups", "group_sizes", "tile")

    def __init__(self, prepend, k, sizes, groups, group_sizes, tile):
        self.prepend = prepend        # size-1 dims prepended before this level
        self.k = k                    # number of minor dims the tile covers
        self.sizes = sizes            # sizes of those k dims (after prepending)
        self.groups = groups          # list of lists of positions (0..k-1) combined by '*'
        self.group_sizes = group_sizes  # product of sizes per group
        self.tile = tile              # tile bound per group


def _tile_levels(sizes: list, layout: Layout) -> Tuple[tuple, list]:
    """Run the tiles of ``layout`` over physical dimension ``sizes`` (major to
    minor, before tiling): the levels, and the final physical dimensions.

    This is the size half of the model, shared by :class:`LayoutPlan` (which
    then compiles the levels into its programs) and the padding suggestions
    (which size many candidate layouts without building plans).
    """
    levels = []
    for tile in layout.tiles:
        t = tile.dimensions
        k = len(t)
        pre = max(0, k - len(sizes))
        sizes = [1] * pre + sizes
        suffix = sizes[len(sizes) - k:]
        groups, gsizes, gtile = [], [], []
        cur, csize = [], 1
        for j in range(k):
            csize *= suffix[j]
            cur.append(j)
            if t[j] == COMBINE_DIMENSION:
                if j == k - 1:
                    raise InvalidShapeError(
                        f"tile {tile} of layout {layout} ends with '*': there is no "
                        "more-minor dimension to combine with")
                continue
            groups.append(cur)
            gsizes.append(csize)
            gtile.append(t[j])
            cur, csize = [], 1
        levels.append(_Level(pre, k, tuple(suffix), groups, tuple(gsizes), tuple(gtile)))
        sizes = (sizes[: len(sizes) - k] + [-(-g // tt) for g, tt in zip(gsizes, gtile)]
                 + gtile)
    return tuple(levels), sizes


@dataclass(frozen=True)
class TileEntry:
    """One entry of a tile as the model applies it: the physical dimensions it
    covers (several, when ``*`` entries combine them), their combined size,
    and the tile bound that splits that size into tiles.

    ``inputs`` has one item per covered physical dimension, major to minor:
    the logical dimensions that dimension comes from (one at the first tile
    level; at later levels, all the logical dimensions that fed it; ``()``
    for a size-1 dimension the level added because the tile has more
    dimensions than there are). ``input_sizes`` are those dimensions' sizes
    and ``size`` their product.

    >>> e = plan("bf16[8,1,1280]{2,1,0:T(8,128)(2,1)}").tile_levels[0].entries[0]
    >>> e.inputs, e.size, e.tile_size, e.count, e.padded_size
    (((1,),), 1, 8, 1, 8)
    """

    inputs: tuple
    input_sizes: tuple
    size: int
    tile_size: int

    @property
    def dimensions(self) -> tuple:
        """The logical dimensions this entry covers, in increasing order."""
        return tuple(sorted(set().union(*self.inputs)))

    @property
    def count(self) -> int:
        """How many tiles the size is split into: ``ceil(size / tile_size)``."""
        return -(-self.size // self.tile_size)

    @property
    def padded_size(self) -> int:
        """The size rounded up to whole tiles: ``count * tile_size``."""
        return self.count * self.tile_size


@dataclass(frozen=True)
class TileLevel:
    """One tile of the layout (``T(8,128)`` of ``T(8,128)(2,1)`` is level 0),
    as the model applies it to the physical dimensions left by the previous
    level (the layout's dimensions, major to minor, for level 0).

    ``added_dimensions`` size-1 dimensions are put in front first when the
    tile has more entries than there are dimensions; ``entries`` are the
    tile's entries, major to minor, a run combined by ``*`` counting as one.
    Each entry turns its (combined) dimension into ``count`` tiles (a more
    major physical dimension) times ``tile_size`` positions (a more minor one).

    >>> [(e.dimensions, e.size, e.tile_size)
    ...  for e in plan("f32[2,3,128]{2,1,0:T(*,8,128)}").tile_levels[0].entries]
    [((0, 1), 6, 8), ((2,), 128, 128)]
    """

    index: int
    tile: Tile
    added_dimensions: int
    entries: tuple


class LayoutPlan:
    """Everything xlashape knows about where the elements of one shape live.

    Build with :func:`plan` (cached). Attributes:

    ``dimensions``             logical dims (bounds for bounded dynamic dims)
    ``minor_to_major``         the layout's order
    ``padded_dimensions``      logical dims after the legacy padding
    ``physical_dimensions``    final tiled dims, major to minor
    ``physical_strides``       row-major element strides of those
    ``tile_levels``            one :class:`TileLevel` per tile: the logical
                               dimensions each tile entry covers, their
                               combined size and the tile bound
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
    ``inverse_ops``, ``inverse_num_registers``, ``inverse_out_registers``
                               the inverse program (element offset -> logical
                               index, ``OP_CHECK`` marking padding)

    The programs are data: the compiled core (``xlashape._core``) runs them
    for :class:`~xlashape.LayoutArray` and :mod:`xlashape.index_maps`; this
    module runs them only in Python (:meth:`run_program`), as a reference.
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
        padded = _padded_dimensions(shape, layout)
        self.padded_dimensions = padded
        self.element_bits = element_bits(self.element_type, layout)

        # -- the model: sizes level by level, then the registers that follow
        # a logical index through the same levels (the offset program) -----
        levels, sizes = _tile_levels([padded[d] for d in reversed(m2m)], layout)
        self._levels = levels
        ZERO = n
        ops = []
        nreg = [n + 1]

        def new_reg():
            nreg[0] += 1
            return nreg[0] - 1

        regs = [d for d in reversed(m2m)]
        for lv in levels:
            regs = [ZERO] * lv.prepend + regs
            suf_regs = regs[len(regs) - lv.k:]
            gregs = []
            for grp in lv.groups:
                creg = ZERO
                for pos, j in enumerate(grp):
                    s, r = lv.sizes[j], suf_regs[j]
                    if pos == 0 or creg == ZERO:
                        creg = r
                    elif s != 1:  # r is 0 on a size-1 dim
                        # combine the carried dims with this one: v = carry * s + r
                        nr = new_reg()
                        ops.append((OP_MULADD, nr, creg, r, s))
                        creg = nr
                gregs.append(creg)
            qr, rr = [], []
            for s, r, tt in zip(lv.group_sizes, gregs, lv.tile):
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
            regs = regs[: len(regs) - lv.k] + qr + rr

        self.physical_dimensions = tuple(sizes)
        strides = [1] * len(sizes)
        acc = 1
        for i in range(len(sizes) - 1, -1, -1):
            strides[i] = acc
            acc *= sizes[i]
        self.physical_strides = tuple(strides)
        total = acc
        self.unpadded_element_count = _prod(dims)
        self.element_count = _aligned_count(total, layout)
        self.size_in_bytes = _size_in_bytes(total, layout, self.element_type)

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
        self._build_inverse()

    @functools.cached_property
    def tile_levels(self) -> tuple:
        """The tile levels of the layout as the model applies them, one
        :class:`TileLevel` per tile (``()`` without tiles): which logical
        dimensions each entry covers, their combined size and the tile bound."""
        origin = [(d,) for d in reversed(self.minor_to_major)]
        out = []
        for i, (lv, tile) in enumerate(zip(self._levels, self.layout.tiles)):
            origin = [()] * lv.prepend + origin
            suffix = origin[len(origin) - lv.k:]
            entries = tuple(
                TileEntry(tuple(suffix[j] for j in grp), tuple(lv.sizes[j] for j in grp),
                          size, t)
                for grp, size, t in zip(lv.groups, lv.group_sizes, lv.tile))
            out.append(TileLevel(i, tile, lv.prepend, entries))
            fed = [e.dimensions for e in entries]
            origin = origin[: len(origin) - lv.k] + fed + fed
        return tuple(out)

    # -- analysis for the bulk kernels --------------------------------------
    def _analyse_minor_runs(self):
        """Find the longest run along ``minor_to_major[0]`` on which offsets are
        affine, so bulk copies can move whole runs.

        Every register is tracked as ``C + slope*j`` where ``j`` (0 <= j < R)
        steps along the minor dimension inside one run that starts at a
        multiple of ``R``, ``slope`` is exact, and ``C`` (whatever the other
        indices are) is only known to be a multiple of ``align`` (0: C == 0).
        A DIV/MOD by ``t`` keeps things affine if ``t`` divides ``slope``, or if
        no run can cross a multiple of ``t``: ``slope*(R-1) < gcd(align, t)``.
        The largest ``R`` that passes every DIV/MOD is the promise.
        """
        n = self.rank
        if n == 0:
            self.minor_dim, self.minor_run, self.minor_stride = -1, 1, 0
            return
        d0 = self.minor_to_major[0]
        size = max(self.padded_dimensions[d0], 1)
        # slopes do not depend on R
        slope = {d0: 1}
        divisors = set()
        for op, dst, a, b, c in self.ops:
            if op == OP_MULADD:
                slope[dst] = slope.get(a, 0) * c + slope.get(b, 0)
            else:
                s = slope.get(a, 0)
                if s and s % c:
                    divisors.add(c)
                if op == OP_DIV:
                    slope[dst] = s // c if s % c == 0 else 0
                else:
                    slope[dst] = 0 if s % c == 0 else s

        def feasible(run):
            # other indices are arbitrary (alignment 1) unless always 0
            align = {d: (1 if self.padded_dimensions[d] > 1 else 0) for d in range(n)}
            align[d0] = run
            align[n] = 0
            for op, dst, a, b, c in self.ops:
                if op == OP_MULADD:
                    align[dst] = math.gcd(align[a] * c, align[b])
                    continue
                s, al = slope.get(a, 0), align[a]
                if s and s % c and s * (run - 1) >= math.gcd(al, c):
                    return False
                if op == OP_DIV:
                    align[dst] = al // c if al % c == 0 else 1
                else:
                    align[dst] = 0 if al == 0 else math.gcd(al, c)
            return True

        candidates = {size}
        for c in divisors:
            candidates.update(_divisors_up_to(c, size))
        run = 1
        for cand in sorted(candidates, reverse=True):
            if feasible(cand):
                run = cand
                break
        stride = 0
        for r, st in zip(self.out_registers, self.out_strides):
            stride += slope.get(r, 0) * st
        self.minor_dim, self.minor_run, self.minor_stride = d0, run, stride

    @functools.cached_property
    def strides(self) -> Optional[tuple]:
        """numpy-style byte strides of the logical array, or None.

        Found by symbolic analysis of the offset program (exact, any size);
        for small arrays (up to 4096 elements) where the analysis cannot
        decide, candidate strides are verified on every index instead.
        """
        st = self._byte_strides()
        count = _prod(self.dimensions)
        if (st is None and 0 < count <= _VERIFY_LIMIT
                and self.element_bits == self.element_type.byte_width * 8):
            st = self._verified_strides()
        return st

    def _verified_strides(self):
        n = self.rank
        cand = []
        for d in range(n):
            if self.dimensions[d] > 1:
                e = [0] * n
                e[d] = 1
                cand.append(self.run_program(e))
            else:
                cand.append(0)
        if self.run_program([0] * n) != 0:
            return None
        for idx in itertools.product(*(range(x) for x in self.dimensions)):
            if self.run_program(idx) != sum(i * c for i, c in zip(idx, cand)):
                return None
        nbytes = self.element_bits // 8
        return tuple(c * nbytes for c in cand)

    def _byte_strides(self):
        """numpy-style byte strides when the offset map is affine in every
        logical index and elements are whole bytes; else None.

        The program is evaluated symbolically. A register is an affine
        expression over variables (logical indices, plus opaque DIV/MOD
        results) with known maxima. A DIV/MOD by ``t`` stays affine when the
        terms not divisible by ``t`` can never carry into the next multiple of
        ``t`` (e.g. a dimension no larger than its tile, or combined
        dimensions that line up with it). Otherwise the quotient and the
        remainder become opaque variables; if the final offset uses them as
        ``t*s*q + s*r`` they fold back into ``s*v`` (a tile that spans the full
        width of everything more minor splits nothing in memory). A DIV/MOD of
        a single index that only takes the values 0 and 1 is affine in it.
        """
        bits = self.element_bits
        if bits % 8 or bits == 0:
            return None
        if bits // 8 != self.element_type.byte_width:
            return None
        n = self.rank
        vmax = {d: max(self.dimensions[d] - 1, 0) for d in range(n)}
        # expression: (const, {var: coef}); vars 0..n-1 are logical indices,
        # others are opaque ('q'|'r', id) tuples
        exprs = {d: (0, {d: 1}) for d in range(n)}
        exprs[n] = (0, {})
        pairs = {}

        def emax(e):
            const, terms = e
            return const + sum(max(0, k * vmax[v]) for v, k in terms.items())

        for op, dst, a, b, c in self.ops:
            if op == OP_MULADD:
                ca, ta = exprs[a]
                cb, tb = exprs[b]
                terms = {v: k * c for v, k in ta.items()}
                for v, k in tb.items():
                    terms[v] = terms.get(v, 0) + k
                exprs[dst] = (ca * c + cb, terms)
                continue
            const, terms = exprs[a]
            # v = c*W + R with W the terms divisible by c; if R stays inside one
            # multiple of c, then v // c = W + R // c and v % c = R - c*(R // c)
            whole = {v: k // c for v, k in terms.items() if k % c == 0 and k}
            rest = {v: k for v, k in terms.items() if k % c}
            rmin = const + sum(min(0, k * vmax[v]) for v, k in rest.items())
            rmax = const + sum(max(0, k * vmax[v]) for v, k in rest.items())
            if rmin // c == rmax // c:
                base = rmin // c
                if op == OP_DIV:
                    exprs[dst] = (base, whole)
                else:
                    exprs[dst] = (const - c * base, rest)
                continue
            live = [(v, k) for v, k in terms.items() if k and vmax[v]]
            if len(live) == 1 and vmax[live[0][0]] == 1:
                # one variable taking only the values 0 and 1: any function of it is affine
                v, k = live[0]
                lo, hi = (const // c, (const + k) // c) if op == OP_DIV else \
                    (const % c, (const + k) % c)
                exprs[dst] = (lo, {v: hi - lo} if hi != lo else {})
                continue
            pair = pairs.setdefault((a, c), {"src": exprs[a], "t": c})
            var = ("q" if op == OP_DIV else "r", dst)
            vmax[var] = emax(exprs[a]) // c if op == OP_DIV else c - 1
            pair[op] = var
            exprs[dst] = (0, {var: 1})

        const, terms = 0, {}
        for r, st in zip(self.out_registers, self.out_strides):
            cr, tr = exprs[r]
            const += cr * st
            for v, k in tr.items():
                terms[v] = terms.get(v, 0) + k * st
        changed = True
        while changed:
            changed = False
            for pair in pairs.values():
                q, r = pair.get(OP_DIV), pair.get(OP_MOD)
                if q is None or r is None:
                    continue
                kq, kr = terms.get(q, 0), terms.get(r, 0)
                if (kq or kr) and kq == pair["t"] * kr:
                    terms.pop(q, None)
                    terms.pop(r, None)
                    sc, st = pair["src"]
                    const += sc * kr
                    for v, k in st.items():
                        terms[v] = terms.get(v, 0) + k * kr
                    changed = True
        if const or any(not isinstance(v, int) and k for v, k in terms.items()):
            return None
        nbytes = bits // 8
        return tuple(terms.get(d, 0) * nbytes for d in range(n))

    # -- the inverse program (offset -> logical index) ----------------------
    def _build_inverse(self):
        """Compile offset -> logical index into ops of the same form as
        ``ops``, plus ``OP_CHECK`` (``r[a] < c`` or the slot is padding).

        Register 0 holds the element offset, register 1 the constant 0.
        ``inverse_out_registers[d]`` holds logical index ``d`` at the end.
        """
        ZERO = 1
        ops = []
        nreg = [2]

        def new_reg():
            nreg[0] += 1
            return nreg[0] - 1

        def emit(op, a, b, c):
            dst = new_reg()
            ops.append((op, dst, a, b, c))
            return dst

        sizes = self.physical_dimensions
        strides = self.physical_strides
        coords = []
        if not sizes:
            ops.append((OP_CHECK, 0, 0, 0, 1))
        for j, (p, st) in enumerate(zip(sizes, strides)):
            if j == 0:
                reg = emit(OP_DIV, 0, 0, st) if st > 1 else 0
                ops.append((OP_CHECK, 0, reg, 0, p))  # tail padding (L(n))
                coords.append(reg if p > 1 else ZERO)
            elif p <= 1:
                coords.append(ZERO)
            else:
                reg = emit(OP_DIV, 0, 0, st) if st > 1 else 0
                coords.append(emit(OP_MOD, reg, 0, p))
        for lv in reversed(self._levels):
            m = len(lv.groups)
            q = coords[len(coords) - 2 * m: len(coords) - m]
            r = coords[len(coords) - m:]
            suffix = [ZERO] * lv.k
            for grp, gsize, t, qq, rr in zip(lv.groups, lv.group_sizes, lv.tile, q, r):
                if qq == ZERO:
                    v = rr
                else:
                    v = emit(OP_MULADD, qq, rr, t)
                if -(-gsize // t) * t > gsize:
                    ops.append((OP_CHECK, 0, v, 0, gsize))
                for pos, j in enumerate(reversed(grp)):
                    s = lv.sizes[j]
                    if pos == len(grp) - 1:
                        suffix[j] = v if s > 1 else ZERO
                    elif s <= 1:
                        suffix[j] = ZERO
                    else:
                        suffix[j] = emit(OP_MOD, v, 0, s)
                        v = emit(OP_DIV, v, 0, s)
            coords = coords[: len(coords) - 2 * m] + suffix
            coords = coords[lv.prepend:]
        out = [ZERO] * self.rank
        for c, d in zip(coords, reversed(self.minor_to_major)):
            if self.padded_dimensions[d] > self.dimensions[d]:
                ops.append((OP_CHECK, 0, c, 0, self.dimensions[d]))
            out[d] = c
        self.inverse_ops = tuple(ops)
        self.inverse_num_registers = nreg[0]
        self.inverse_out_registers = tuple(out)

    def run_inverse_program(self, linear: int) -> Optional[tuple]:
        """Evaluate the inverse program in Python (checks nothing but padding)."""
        r = [linear, 0] + [0] * (self.inverse_num_registers - 2)
        for op, dst, a, b, c in self.inverse_ops:
            if op == OP_MULADD:
                r[dst] = r[a] * c + r[b]
            elif op == OP_DIV:
                r[dst] = r[a] // c
            elif op == OP_MOD:
                r[dst] = r[a] % c
            elif r[a] >= c:
                return None
        return tuple(r[x] for x in self.inverse_out_registers)

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
        for lv in self._levels:
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
        for lv in reversed(self._levels):
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
        """Validate a logical index: ints (a bare int for rank 1), right length,
        ``0 <= i < dim``."""
        return check_index(index, self.shape, scalar_ok=True)

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

    def model_linear_indices(self, rows):
        """:meth:`linear_index` of every row of an ``(N, rank)`` int64 array,
        the model run on whole columns (numpy). Rows are bounds-checked first
        (:class:`~xlashape.ShapeIndexError` names the first bad row and axis)."""
        n = rows.shape[0]
        dims = np.array(self.dimensions, dtype=np.int64)
        bad = (rows < 0) | (rows >= dims)
        if bad.any():
            row, axis = (int(x) for x in np.argwhere(bad)[0])
            raise ShapeIndexError(
                f"index {int(rows[row, axis])} is out of bounds for axis {axis} with size "
                f"{self.dimensions[axis]} (row {row} of the indices)")
        zeros = np.zeros(n, dtype=np.int64)
        coords = [rows[:, d] for d in reversed(self.minor_to_major)]
        for lv in self._levels:
            coords = [zeros] * lv.prepend + coords
            suffix = coords[len(coords) - lv.k:]
            values = []
            for grp in lv.groups:
                v = suffix[grp[0]]
                for j in grp[1:]:
                    v = v * lv.sizes[j] + suffix[j]
                values.append(v)
            coords = (coords[: len(coords) - lv.k] + [v // t for v, t in zip(values, lv.tile)]
                      + [v % t for v, t in zip(values, lv.tile)])
        out = zeros.copy()
        for c, stride in zip(coords, self.physical_strides):
            out += c * stride
        return out

    def model_multidimensional_indices(self, linear):
        """:meth:`multidimensional_index` of every entry of an ``(N,)`` int64
        array, the model run backwards on whole columns (numpy): ``(indices,
        padding)`` with -1 rows where ``padding`` is True. Entries are
        bounds-checked first."""
        n = linear.shape[0]
        count = self.element_count
        bad = (linear < 0) | (linear >= count)
        if bad.any():
            entry = int(np.flatnonzero(bad)[0])
            raise ShapeIndexError(
                f"linear index {int(linear[entry])} is out of bounds for a buffer of "
                f"{count} elements (entry {entry})")
        pad = np.zeros(n, dtype=bool)
        coords, rem = [], linear
        for stride in self.physical_strides:
            coords.append(rem // stride)
            rem = rem % stride
        if coords:
            pad |= coords[0] >= self.physical_dimensions[0]  # tail padding (L(n))
        else:
            pad |= linear > 0
        for lv in reversed(self._levels):
            m = len(lv.groups)
            q = coords[len(coords) - 2 * m: len(coords) - m]
            r = coords[len(coords) - m:]
            suffix = [None] * lv.k
            for grp, gsize, t, qq, rr in zip(lv.groups, lv.group_sizes, lv.tile, q, r):
                v = qq * t + rr
                pad |= v >= gsize
                for j in reversed(grp):
                    size = max(lv.sizes[j], 1)  # a 0 size makes the whole entry padding
                    suffix[j] = v % size
                    v = v // size
            coords = coords[: len(coords) - 2 * m] + suffix
            coords = coords[lv.prepend:]
        out = np.empty((n, self.rank), dtype=np.int64)
        for c, d in zip(coords, reversed(self.minor_to_major)):
            pad |= c >= self.dimensions[d]
            out[:, d] = c
        out[pad] = -1
        return out, pad

    def __repr__(self):
        return f"<LayoutPlan {self.shape} -> {list(self.physical_dimensions)}>"


def _prod(values) -> int:
    out = 1
    for v in values:
        out *= v
    return out


_SMALL_PRIMES = (2, 3, 5, 7, 11, 13, 17, 19, 23, 29, 31, 37)


def _is_prime(n: int) -> bool:
    """Miller-Rabin with the first twelve primes as bases: exact below 3.3e24
    (tile and dimension sizes are int64)."""
    if n < 2:
        return False
    for p in _SMALL_PRIMES:
        if n % p == 0:
            return n == p
    d, s = n - 1, 0
    while d % 2 == 0:
        d, s = d // 2, s + 1
    for a in _SMALL_PRIMES:
        x = pow(a, d, n)
        if x in (1, n - 1):
            continue
        for _ in range(s - 1):
            x = x * x % n
            if x == n - 1:
                break
        else:
            return False
    return True


def _factor(n: int, out: dict) -> None:
    """Prime factors of n >= 1 into ``out`` (prime -> power): small primes by
    trial division, the rest by Pollard's rho (milliseconds for any int64)."""
    for p in _SMALL_PRIMES:
        while n % p == 0:
            out[p] = out.get(p, 0) + 1
            n //= p
    stack = [n] if n > 1 else []
    while stack:
        m = stack.pop()
        if _is_prime(m):
            out[m] = out.get(m, 0) + 1
            continue
        c = 1
        while True:  # Brent-free rho: f(x) = x^2 + c, Floyd's cycle finding
            x = y = 2
            g = 1
            while g == 1:
                x = (x * x + c) % m
                y = (y * y + c) % m
                y = (y * y + c) % m
                g = math.gcd(abs(x - y), m)
            if g != m:
                stack.extend((g, m // g))
                break
            c += 1


def _divisors_up_to(c: int, limit: int) -> set:
    """The divisors of c >= 1 that are at most ``limit``, from c's prime
    factors (trying every number up to c took minutes for a tile of 4e8)."""
    factors: dict = {}
    _factor(c, factors)
    out = {1}
    for p, k in factors.items():
        out = {d * p ** e for d in out for e in range(k + 1) if d * p ** e <= limit}
    return out


#: Tile levels the model accepts (XLA's TPU layouts use one to three).
MAX_TILE_LEVELS = 64


def _check_layout(shape: Shape, layout: Layout) -> None:
    """The checks without which the model is meaningless: a subset of XLA's
    validation (the model ignores split configs, and index/pointer types and
    physical shapes, which no dense layout has), with the same messages."""
    if len(layout.tiles) > MAX_TILE_LEVELS:
        # Each level adds physical dimensions, so the model's cost grows with
        # the square of the level count; real layouts use one to three.
        raise InvalidShapeError(
            f"layout has {len(layout.tiles)} tile levels; xlashape's tiling model "
            f"supports at most {MAX_TILE_LEVELS}")
    require_permutation(shape, layout)
    require_sizes(shape, "the tiling model")
    check_tiles(layout, shape)
    check_element_size(layout)


@functools.lru_cache(maxsize=4096)
def _plan_cached(shape: Shape) -> LayoutPlan:
    return LayoutPlan(shape)


def plan(shape) -> LayoutPlan:
    """The (cached) :class:`LayoutPlan` of an array shape.

    A shape without a layout gets XLA's default layout ``{n-1,...,0}``.
    Accepts a :class:`Shape` or HLO text.
    """
    return _plan_cached(as_shape(shape))


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


# -- vectorized maps (numpy; the compiled ones are in xlashape.index_maps) ----

def linear_indices(shape, indices):
    """Element offsets of many logical indices at once.

    ``indices`` is an integer array of shape ``(..., rank)`` (typically
    ``(N, rank)``); the result is an int64 array of shape ``(...)``. Every
    entry is bounds-checked first: a negative or too-large entry raises
    :class:`~xlashape.ShapeIndexError` naming the row, the axis and its size,
    and nothing is returned.

    This is the model run level by level on whole numpy columns: the
    reference for :func:`xlashape.index_maps.linear_indices`, which gives the
    same results and errors from the compiled offset program, several times
    faster.

    >>> import numpy as np
    >>> linear_indices("f32[3,5]{1,0:T(2,2)}", np.array([[0, 0], [2, 3]])).tolist()
    [0, 17]
    """
    p = plan(shape)
    flat, batch = index_rows(p, indices)
    return p.model_linear_indices(flat).reshape(batch)


def multidimensional_indices(shape, linear):
    """Logical indices stored at many element offsets.

    ``linear`` is an integer array of any shape ``(...)``. Returns
    ``(indices, padding)``: ``indices`` an int64 array of shape
    ``(..., rank)`` and ``padding`` a bool array of shape ``(...)`` that is
    True where the offset is a padding slot (tile padding, legacy padded
    dimensions or ``L(n)`` tail padding); those rows of ``indices`` are -1.
    An offset outside ``0 .. physical_element_count - 1`` raises
    :class:`~xlashape.ShapeIndexError` and nothing is returned.

    The model run backwards on numpy columns: the reference for
    :func:`xlashape.index_maps.multidimensional_indices` (compiled).

    >>> idx, pad = multidimensional_indices("f32[3,5]{1,0:T(2,2)}", [17, 9])
    >>> idx.tolist(), pad.tolist()
    ([[2, 3], [-1, -1]], [False, True])
    """
    p = plan(shape)
    arr = offset_array(p, linear)
    out, pad = p.model_multidimensional_indices(arr.reshape(-1))
    return out.reshape(arr.shape + (p.rank,)), pad.reshape(arr.shape)


def strides(shape) -> Optional[tuple]:
    """numpy byte strides of the logical array, or None if no strides describe it.

    Strides exist when every logical index moves the element offset by a
    fixed amount: no tile splits a dimension in memory (a tile at least as
    large as the dimensions, tiles of 1, or a tile spanning the full width of
    everything more minor all qualify) and elements are whole bytes at their
    natural width (no sub-byte packing, ``E(n)`` equal to the type width).

    >>> strides("f32[3,5]{1,0}"), strides("f32[3,5]{1,0:T(4,8)}"), strides("f32[3,5]{1,0:T(2,2)}")
    ((20, 4), (32, 4), None)
    """
    return plan(shape).strides


# -- human-readable sizes ------------------------------------------------------

def format_bytes(num_bytes: int) -> str:
    """A byte count the way XLA's TPU memory reports print it.

    This is ``tsl::strings::HumanReadableNumBytes`` without its ``iB``
    suffix, as in "Used 32.00G of 15.48G hbm": powers of 1024, below 1024
    plain bytes (``96B``), kilobytes with one decimal (``512.0K``), larger
    units with two (``1.00G``). Like XLA, each step divides by 1024 as an
    integer, so the shown fraction is truncated before it is rounded.

    >>> format_bytes(96), format_bytes(512 * 1024), format_bytes(2**30), format_bytes(32 * 2**30)
    ('96B', '512.0K', '1.00G', '32.00G')
    """
    if isinstance(num_bytes, bool) or not isinstance(num_bytes, numbers.Integral):
        raise ShapeTypeError(f"byte count must be an int, got {type(num_bytes).__name__}")
    n = int(num_bytes)
    if n == INT64_MIN:
        return "-8E"
    sign = "-" if n < 0 else ""
    n = abs(n)
    if n < 1024:
        return f"{sign}{n}B"
    units = "KMGTPE"
    u = 0
    while n >= 1024 * 1024 and u < len(units) - 1:
        n //= 1024
        u += 1
    fmt = "%s%.1f%s" if units[u] == "K" else "%s%.2f%s"
    return fmt % (sign, n / 1024.0, units[u])



def format_bytes_apart(a: int, b: int) -> Tuple[str, str]:
    """Two byte counts that are compared, as :func:`format_bytes` prints them,
    with their exact bytes when they print the same but differ ("7.84G
    (8418135654 bytes)" against "7.84G (8418135552 bytes)"), so that a
    comparison never reads as a size against itself.

    >>> format_bytes_apart(3 << 30, 1 << 30)
    ('3.00G', '1.00G')
    >>> format_bytes_apart(1024 * 1024 + 1, 1024 * 1024)
    ('1.00M (1048577 bytes)', '1.00M (1048576 bytes)')
    """
    x, y = format_bytes(a), format_bytes(b)
    if x == y and a != b:
        return f"{x} ({a} bytes)", f"{y} ({b} bytes)"
    return x, y

def format_expansion(factor: float) -> str:
    """``32.0x expansion``, as XLA's TPU memory report words it."""
    if isinstance(factor, bool) or not isinstance(factor, numbers.Real):
        raise ShapeTypeError(f"expansion factor must be a number, got {type(factor).__name__}")
    if math.isinf(factor):
        return "infx expansion"
    return f"{float(factor):.1f}x expansion"


def _padded_dimensions(shape: Shape, layout: Layout) -> tuple:
    """The logical dimensions after the legacy ``padded_dimensions``."""
    padded = layout.padded_dimensions or shape.dimensions
    for d, (p, s) in enumerate(zip(padded, shape.dimensions)):
        if p < s:
            raise InvalidShapeError(
                f"padded_dimensions[{d}] is {p}, smaller than dimension {d} of size {s}")
    return tuple(padded)


def _aligned_count(count: int, layout: Layout) -> int:
    """The element count rounded up to the layout's ``L(n)``."""
    align = layout.tail_padding_alignment_in_elements
    return -(-count // align) * align


def _size_in_bytes(count: int, layout: Layout, element_type) -> int:
    """Bytes of ``count`` physical elements (before ``L(n)``) in ``layout``."""
    return -(-_aligned_count(count, layout) * element_bits(element_type, layout) // 8)


def size_with_layout(shape: Shape, layout: Layout) -> Optional[int]:
    """physical_size_in_bytes of ``shape`` with another layout, from the size
    half of the model alone (:mod:`xlashape.padding` tries many layouts; a
    full plan, with its programs, is slower). None if that layout is not
    valid for the shape.

    >>> from xlashape import Shape, Layout
    >>> size_with_layout(Shape("f32", (8, 1)), Layout((0, 1), tiles=[(8, 128)]))
    4096
    """
    try:
        _check_layout(shape, layout)
        padded = _padded_dimensions(shape, layout)
        _, sizes = _tile_levels([padded[d] for d in reversed(layout.minor_to_major)], layout)
    except InvalidShapeError:
        return None
    return _size_in_bytes(_prod(sizes), layout, shape.element_type)
