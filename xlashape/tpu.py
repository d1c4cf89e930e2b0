"""The layout XLA:TPU gives an array: its default layout for a jit parameter.

When a program takes an array and nobody asks for a layout (``jax.jit(f)(x)``
with the default ``Format``), XLA:TPU chooses one: a dimension order and a
tiling that depend on the chip, the element type and the sizes. This module
predicts that choice without jax or a TPU::

    >>> from xlashape import tpu, tiling
    >>> str(tpu.with_default_layout("f32[100,5]"))
    'f32[100,5]{0,1:T(8,128)}'
    >>> str(tpu.with_default_layout("s32[1024,1]"))
    's32[1024,1]{0,1:T(1,128)}'
    >>> s = tpu.with_default_layout("bf16[8,1,1280]", chip="v5e")
    >>> str(s), tiling.physical_size_in_bytes(s)
    ('bf16[8,1,1280]{2,0,1:T(8,128)(2,1)}', 20480)

The rule
--------
Words below: the *minor* dimension is the one that changes fastest in memory
(``minor_to_major[0]``), the *second-minor* the next one; a tile ``(r,128)``
covers ``r`` rows of the second-minor dimension and 128 columns of the minor
one; a *row tile* is that ``r``.

1. **Tile rows.** Each element type has a short list of row tiles, from the
   chip generation and the type's width (table below). The second-minor size
   ``n`` gets the smallest row tile that is at least ``n``, or the largest
   one if none is. Narrow types then pack rows into 32-bit words with a second
   tile level (``(2,1)`` for 16-bit types, ``(4,1)`` for 8-bit types and
   ``pred``, ``(8,1)`` for 4-bit, ``(16,1)`` for 2-bit), and on v4 and later
   4-bit and 2-bit elements take 4 or 2 bits in memory (``E(4)``, ``E(2)``).
   On v4 and later one more tile is used when it costs nothing: 8-bit types
   and ``pred`` take ``(32,128)`` when ``n`` is a multiple of 32, 4-bit
   types ``(64,128)`` for multiples of 64, 2-bit types ``(128,128)`` for
   multiples of 128 (a whole 4 KiB tile).

2. **Dimension order** (rank 2 and more). XLA:TPU picks the minor and the
   second-minor dimension that make the padded array smallest: the padded
   size is the product of the other dimensions times the second-minor size
   rounded up to its row tile (counted as at most 8 rows while choosing, which
   matters for 2-bit types only) times the minor size rounded up to 128. Ties
   go to the higher-numbered dimensions (minor first, then second-minor), so
   an array that pads no worse in its default order keeps it. The other
   dimensions stay in their default order (dimension 0 major-most). So
   ``f32[100,5]`` becomes ``{0,1:T(8,128)}`` (100 columns and 5 rows pad to
   128 x 8, while 5 columns and 100 rows would pad to 128 x 104) and
   ``s32[N,1]`` becomes ``{0,1:T(1,128)}`` (one row, no row padding).

3. **Rank 1** arrays are tiled as one row of 128-element columns that wraps:
   ``T(128*k)`` (then ``(128)`` and the packing level for narrow types), where
   ``k`` is the row tile that step 1 picks for ``ceil(size/128)`` rows. So
   ``f32[100]`` is ``{0:T(128)}``, ``f32[300]`` is ``{0:T(512)}``,
   ``bf16[7]`` is ``{0:T(256)(128)(2,1)}`` on v4 and later.

4. **Scalars** get one tile of 128 elements for 32-bit and wider types, 256
   for 16-bit, 512 for 8-bit and ``pred``, 1024 for 4-bit and 2048 for 2-bit
   on v4 and later (``f32[]{:T(128)}``, ``s4[]{:T(1024)E(4)}``); v2 and v3
   use 256 for 32-bit and wider types, 512 for 16-bit and 1024 for the rest.

5. **Empty arrays** (a dimension of size 0) keep the default order and get
   no tiles (only ``E(n)`` for packed 4-bit and 2-bit types).

Types wider than 32 bits (``s64``, ``u64``, ``f64``, ``c64``, ``c128``) are
tiled like 32-bit types, each element taking its full width.

Row tiles (step 1), rank-1 row tiles (step 3) and scalar tiles (step 4):

=================  =====================  =====================
element width      v2, v3                 v4, v5e, v5p, v6e, v7x
=================  =====================  =====================
32 bits and more   2, 4, 8; scalar 256    1, 2, 4, 8; scalar 128
16 bits            4, 8; scalar 512       2, 4, 8; scalar 256
8 bits, ``pred``   8; scalar 1024         4, 8 (32); scalar 512
4 bits             8 (one byte each);     8 (64), ``E(4)``;
                   scalar 1024            scalar 1024
2 bits             16, rank 1: 8, 16      16 (128), ``E(2)``;
                   (one byte each);       scalar 2048
                   scalar 1024
=================  =====================  =====================

Where the chips differ: only between the two generations of the table.
v4, v5e, v5p, v6e and v7x agree on every case checked; so do v2 and v3.

How this was checked
--------------------
Against XLA:TPU itself (compile-only topologies ``v2:2x2``, ``v3:2x2``,
``v4:2x2x1``, ``v5e:2x2``, ``v5p:2x2x1``, ``v6e:2x2``, ``tpu7x:2x2x1``) with
jax and jaxlib 0.12.0.1 and libtpu 0.0.50.1: the repository's
``tests/oracle/sweep_tpu_layouts.py`` compiled jit programs with no requested
layout over random cases (every element type below, ranks 0 to 6, sizes
around tile boundaries from 0 to 8192) and recorded each parameter's layout
(``entry_computation_layout``, equal to ``input_formats``) and size (its
allocation in XLA's buffer assignment, equal to ``argument_size_in_bytes``
when compiled alone). The model agrees on the layout text and, through
:func:`xlashape.tiling.physical_size_in_bytes`, on the bytes of every one:
3,019 cases per chip in ``tests/data/tpu_layouts/`` (21,133 in all, a few of
rank 7 to 9 among them), and 2,019 per chip (14,133) from a later run with a
new random seed, in ``tests/data/tpu_layouts/recheck/``.

Element types: ``pred``, ``s2``..``s64``, ``u2``..``u64``, ``f16``, ``bf16``,
``f32``, ``f64``, every ``f8`` type, ``f4e2m1fn``, ``c64``, ``c128``: XLA:TPU
gives a parameter of each of them a layout. ``s1`` and ``u1`` cannot be
checked (JAX passes a 1-bit integer as ``pred`` and cannot serialize an
unsigned one for the compiler), so they raise
:class:`~xlashape.InvalidShapeError`, as do dynamic dimensions and non-array
shapes.

What XLA:TPU does refuse (``tests/data/tpu_layouts/acceptance.tsv``: every
type and rank 0 to 6 on every chip, one array copied by ``jax.jit(lambda a:
a)``): only programs on 2-bit arrays. Copying a rank-1 ``s2``/``u2`` array of
more than one element crashes libtpu 0.0.50.1 on every chip (``SIGILL`` in
its code generator), and on v4 copying an ``s2``/``u2`` array of rank 2 or
more aborts it (``Unsupported B2 packed type``; every one tried but those
with all dimensions 1). Their parameters still get the layout given here.
"""

from __future__ import annotations

from typing import Dict, NamedTuple, Optional, Tuple

from .errors import InvalidShapeError, ShapeTypeError
from .hlo_text import parse_shape
from .layout import Layout, Tile
from .primitive_types import PrimitiveType
from .shape import Shape
from .devices import tpu_generation

__all__ = ["CHIPS", "default_layout", "with_default_layout", "canonical_chip"]

P = PrimitiveType

#: The chips the model knows, as XLA:TPU's compile-only topologies name them.
CHIPS = ("v2", "v3", "v4", "v5e", "v5p", "v6e", "v7x")


class _Width(NamedTuple):
    """How one generation tiles one element width."""

    rows: Tuple[int, ...]          # row tiles for the second-minor dimension, ascending
    whole: Optional[int]           # the larger row tile used when it divides the size
    rank1_rows: Tuple[int, ...]    # row tiles for the wrapped rows of a rank-1 array
    scalar: int                    # elements in a scalar's tile
    packing: Optional[Tuple[int, int]]  # second tile level that packs rows into words
    element_bits: int              # E(n), 0 for the type's byte width


def _gen(rows, whole, rank1_rows, scalar, packing, element_bits=0):
    return _Width(tuple(rows), whole, tuple(rank1_rows), scalar, packing, element_bits)


# element width (32 stands for 32 bits and more, 8 for pred too) -> tiling
_V2_V3: Dict[int, _Width] = {
    32: _gen((2, 4, 8), None, (2, 4, 8), 256, None),
    16: _gen((4, 8), None, (4, 8), 512, (2, 1)),
    8: _gen((8,), None, (8,), 1024, (4, 1)),
    4: _gen((8,), None, (8,), 1024, (4, 1)),           # one byte per element
    2: _gen((16,), None, (8, 16), 1024, (4, 1)),       # one byte per element
}
_V4_ON: Dict[int, _Width] = {
    32: _gen((1, 2, 4, 8), None, (1, 2, 4, 8), 128, None),
    16: _gen((2, 4, 8), None, (2, 4, 8), 256, (2, 1)),
    8: _gen((4, 8), 32, (4, 8), 512, (4, 1)),
    4: _gen((8,), 64, (8,), 1024, (8, 1), 4),
    2: _gen((16,), 128, (16,), 2048, (16, 1), 2),
}
_GENERATIONS = {"v2": _V2_V3, "v3": _V2_V3, "v4": _V4_ON, "v5e": _V4_ON, "v5p": _V4_ON,
                "v6e": _V4_ON, "v7x": _V4_ON}

# while the dimension order is chosen, a row tile counts as at most this many rows
_ORDER_MAX_ROWS = 8
_LANES = 128


def canonical_chip(chip) -> str:
    """The model's name for ``chip``: ``"v5e"``, ``"TPU v5 lite"`` (jax's
    ``device_kind``), a topology name (``"v5e:2x2"``), ``"tpu7x"``... -> one
    of :data:`CHIPS`.

    >>> canonical_chip("TPU v5 lite"), canonical_chip("V6E"), canonical_chip("tpu7x:2x2x1")
    ('v5e', 'v6e', 'v7x')
    """
    if not isinstance(chip, str):
        raise ShapeTypeError(f"chip must be a string such as 'v5e', got {type(chip).__name__}")
    name = tpu_generation(chip)
    if name not in _GENERATIONS:
        raise InvalidShapeError(
            f"unknown TPU chip {chip!r}: expected one of {', '.join(CHIPS)} "
            "(or jax's device_kind, e.g. 'TPU v5 lite')")
    return name


def _width_class(et: PrimitiveType) -> int:
    if et is P.PRED:
        return 8
    if et in (P.S1, P.U1):
        raise InvalidShapeError(
            f"the XLA:TPU layout of {et.hlo_name} arrays is not known: JAX cannot pass one "
            "to the compiler (it sends a 1-bit integer as pred and refuses an unsigned one), "
            "so the model was not checked for it")
    return min(et.bit_width, 32)


def _array(shape, what: str) -> Shape:
    if isinstance(shape, str):
        shape = parse_shape(shape)
    if not isinstance(shape, Shape):
        raise ShapeTypeError(f"{what} expects a Shape or shape text, got {type(shape).__name__}")
    if not shape.is_array:
        raise InvalidShapeError(
            f"{shape} is not an array shape: only arrays have a TPU layout")
    if any(shape.dynamic_dimensions):
        raise InvalidShapeError(
            f"{shape.with_layout(None)} has a dynamic dimension: the TPU default layout is "
            "modelled for static shapes only")
    for i, d in enumerate(shape.dimensions):
        if d < 0:
            raise InvalidShapeError(f"{shape} has a negative dimension (dimension {i} is {d})")
    return shape


def _row_tile(rows: Tuple[int, ...], n: int) -> int:
    """The smallest row tile that holds ``n`` rows, else the largest."""
    for r in rows:
        if r >= n:
            return r
    return rows[-1]


def _tiles(w: _Width, first) -> tuple:
    return (Tile(*first),) + ((Tile(*w.packing),) if w.packing else ())


def _round_up(n: int, m: int) -> int:
    return -(-n // m) * m


def _minor_and_second_minor(dims, w: _Width):
    """Step 2 of the rule: the (minor, second-minor) pair with the smallest
    padded size; ties go to the higher-numbered dimensions."""
    n = len(dims)
    total = 1
    for d in dims:
        total *= d
    # each dimension padded as the minor one, and as the second-minor one
    as_minor = [_round_up(d, _LANES) for d in dims]
    as_second = [_round_up(d, min(_row_tile(w.rows, d), _ORDER_MAX_ROWS)) for d in dims]
    best = None
    for minor in range(n - 1, -1, -1):
        rest = total // dims[minor] * as_minor[minor]
        for second in range(n - 1, -1, -1):
            if second != minor:
                padded = rest // dims[second] * as_second[second]
                if best is None or padded < best[0]:
                    best = (padded, minor, second)
    return best[1], best[2]


def default_layout(shape, chip: str = "v5e") -> Layout:
    """The layout XLA:TPU gives a jit parameter of this shape when no layout is
    requested (any layout ``shape`` already has is ignored).

    ``shape`` is a :class:`~xlashape.Shape` or shape text (``"f32[100,5]"``);
    ``chip`` is one of :data:`CHIPS` or a spelling :func:`canonical_chip`
    accepts. The module docstring states the rule and how it was checked.

    >>> str(default_layout("f32[100,5]")), str(default_layout("s8[7]"))
    ('{0,1:T(8,128)}', '{0:T(512)(128)(4,1)}')
    >>> str(default_layout("s4[3,5,7]", chip="v5p")), str(default_layout("s4[3,5,7]", chip="v3"))
    ('{2,1,0:T(8,128)(8,1)E(4)}', '{2,1,0:T(8,128)(4,1)}')
    """
    shape = _array(shape, "default_layout")
    w = _GENERATIONS[canonical_chip(chip)][_width_class(shape.element_type)]
    dims = shape.dimensions
    n = len(dims)
    if n == 0:
        return Layout((), tiles=(Tile(w.scalar),), element_size_in_bits=w.element_bits)
    if 0 in dims:
        return Layout(tuple(range(n - 1, -1, -1)), element_size_in_bits=w.element_bits)
    if n == 1:
        k = _row_tile(w.rank1_rows, -(-dims[0] // _LANES))
        tiles = (Tile(k * _LANES),)
        if w.packing:
            tiles += (Tile(_LANES), Tile(*w.packing))
        return Layout((0,), tiles=tiles, element_size_in_bits=w.element_bits)
    minor, second = _minor_and_second_minor(dims, w)
    rest = tuple(d for d in range(n - 1, -1, -1) if d != minor and d != second)
    rows = _row_tile(w.rows, dims[second])
    if w.whole is not None and dims[second] % w.whole == 0:
        rows = w.whole
    return Layout((minor, second) + rest, tiles=_tiles(w, (rows, _LANES)),
                  element_size_in_bits=w.element_bits)


def with_default_layout(shape, chip: str = "v5e") -> Shape:
    """``shape`` with the layout XLA:TPU gives it (see :func:`default_layout`);
    every array of a tuple shape gets its own.

    >>> str(with_default_layout("(f32[100,5], pred[])", chip="v4"))
    '(f32[100,5]{0,1:T(8,128)}, pred[]{:T(512)})'
    """
    if isinstance(shape, str):
        shape = parse_shape(shape)
    if isinstance(shape, Shape) and shape.is_tuple:
        return shape.map_arrays(lambda a: with_default_layout(a, chip))
    shape = _array(shape, "with_default_layout")
    return shape.with_layout(default_layout(shape, chip))
