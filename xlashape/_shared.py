"""Private helpers shared by the XLA utility modules and the tiling model.

Argument coercion with one wording (a Shape or HLO text, a Layout or HLO
text, an array shape), the default layout of a shape without one, and XLA's
``LayoutUtil::LinearIndex`` arithmetic, which ``layout_util.linear_index``
and ``shape_util.array_data_size`` both use. This module sits just above the
parser (:mod:`xlashape.hlo_text`), which it uses to read text.
"""

from __future__ import annotations

import numbers
from typing import Sequence

import numpy as np

from ._base import INT64_MAX
from .errors import InvalidShapeError, ShapeIndexError, ShapeTypeError
from .hlo_text import parse_layout, parse_shape
from .layout import COMBINE_DIMENSION, Layout
from .shape import Shape


def as_shape(shape) -> Shape:
    """A Shape as given, or parsed from HLO shape text."""
    if isinstance(shape, Shape):
        return shape
    if isinstance(shape, str):
        return parse_shape(shape)
    raise ShapeTypeError(f"expected a Shape or HLO shape text, got {type(shape).__name__}")


def as_layout(layout) -> Layout:
    """A Layout as given, or parsed from HLO layout text (``{1,0:T(8,128)}``)."""
    if isinstance(layout, Layout):
        return layout
    if isinstance(layout, str):
        return parse_layout(layout)
    raise ShapeTypeError(f"expected a Layout or HLO layout text, got {type(layout).__name__}")


def array_shape(shape, what: str = "this function") -> Shape:
    """An array shape from a Shape or text; a buffer is unwrapped to its array."""
    shape = as_shape(shape)
    if shape.is_buffer:
        shape = shape.buffer_shape
    if not shape.is_array:
        raise InvalidShapeError(f"{what} needs an array shape, got {shape.human_string()}")
    return shape


def default_layout(rank: int) -> Layout:
    """XLA's default layout ``{rank-1, ..., 1, 0}``."""
    return Layout(tuple(range(rank - 1, -1, -1)))


def layout_or_default(shape: Shape) -> Layout:
    """The shape's layout, or the default layout when it has none (what the
    HLO parser and ``make_shape`` would have given it)."""
    lay = shape.layout
    if lay is None:
        return default_layout(len(shape.dimensions))
    return lay


def _c_div(a: int, b: int) -> int:
    """C++ integer division (truncates toward zero)."""
    q = abs(a) // abs(b)
    return q if (a >= 0) == (b >= 0) else -q


def _c_mod(a: int, b: int) -> int:
    return a - b * _c_div(a, b)


def linear_index_unchecked(shape: Shape, layout: Layout, index: Sequence[int]) -> int:
    """XLA's ``LayoutUtil::LinearIndex`` arithmetic (first tile only) with
    C++ division, without bounds checks: ``array_data_size`` passes
    ``dims - 1``, so -1 for an empty dimension."""
    n = len(shape.dimensions)
    if n == 0:
        return 0
    if n == 1:
        return index[0]
    tile = layout.tiles[0].dimensions if layout.tiles else ()
    if COMBINE_DIMENSION in tile:
        raise InvalidShapeError(
            f"LayoutUtil::LinearIndex does not support combined ('*') tile "
            f"dimensions ({shape}); use xlashape.tiling.linear_index")
    if 0 in tile:
        raise InvalidShapeError(f"layout has invalid tiles: {shape.human_string()}")
    tile_multiplier = 1
    for t in tile:
        tile_multiplier *= t
    within = 1
    lin = 0
    k = len(tile)
    m2m = layout.minor_to_major
    for mi in range(n):
        ld = m2m[mi]
        size = shape.dimensions[ld]
        e = index[ld]
        if mi < k:
            td = tile[k - 1 - mi]
            lin += tile_multiplier * _c_div(e, td) + within * _c_mod(e, td)
            tile_multiplier *= -((-size) // td)
            within *= td
        else:
            lin += e * tile_multiplier
            tile_multiplier *= size
    return lin


# -- arguments of the bulk index maps (tiling's numpy model, index_maps' compiled one) --

def int64_array(values, what: str):
    """``values`` as an int64 numpy array; ShapeTypeError for non-integers,
    ShapeIndexError for integers that do not fit in int64."""
    arr = np.asarray(values)
    kind = arr.dtype.kind
    if kind == "O":
        flat = arr.ravel()
        for pos, v in enumerate(flat):
            if isinstance(v, bool) or not isinstance(v, numbers.Integral):
                raise ShapeTypeError(
                    f"{what} must be integers, got {type(v).__name__} at position {pos}")
            if not -INT64_MAX - 1 <= v <= INT64_MAX:
                raise ShapeIndexError(
                    f"{what} entry {v} at position {pos} does not fit in int64")
        return np.array(flat.tolist(), dtype=np.int64).reshape(arr.shape)
    if kind not in "iu":
        raise ShapeTypeError(f"{what} must be an integer array, got dtype {arr.dtype}")
    if kind == "u" and arr.dtype.itemsize >= 8 and arr.size:
        too_big = arr > INT64_MAX
        if too_big.any():
            pos = int(np.flatnonzero(too_big.ravel())[0])
            raise ShapeIndexError(
                f"{what} entry {int(arr.ravel()[pos])} at position {pos} does not fit in int64")
    return np.asarray(arr, dtype=np.int64, order="C")


def _require_int64_offsets(p) -> None:
    if p.element_count > INT64_MAX:
        raise InvalidShapeError(
            f"{p.shape} has {p.element_count} elements with padding; offsets beyond "
            "int64 cannot be computed in bulk")


def index_rows(p, indices):
    """The ``(..., rank)`` logical indices of a bulk map for plan ``p``, as a
    C-contiguous ``(N, rank)`` int64 array, and the batch shape ``(...)``."""
    _require_int64_offsets(p)
    arr = int64_array(indices, "indices")
    if arr.ndim == 0 or arr.shape[-1] != p.rank:
        raise ShapeIndexError(
            f"indices must have shape (N, {p.rank}) (or (..., {p.rank})) for the "
            f"{p.rank}-dimensional shape {p.shape}, got shape {arr.shape}")
    batch = arr.shape[:-1]
    n = 1
    for b in batch:
        n *= b
    return arr.reshape(n, p.rank), batch


def offset_array(p, linear):
    """The element offsets of a bulk map for plan ``p``, as an int64 array."""
    _require_int64_offsets(p)
    return int64_array(linear, "linear indices")
