"""XLA's ``IndexUtil`` in Python (``xla/index_util.h``): logical index <-> linear index.

Like XLA's, these functions use **only** ``layout.minor_to_major``: tiles,
``E(n)``, ``L(n)``, split configs and the legacy padding fields are ignored,
so the linear index is the element's position in the *untiled* layout. For
where an element really lives in a tiled buffer, use
:func:`xlashape.tiling.linear_index`.

Where XLA only DCHECKs (an index outside the shape, a linear index past the
end), these functions raise :class:`~xlashape.ShapeIndexError`, because the
unchecked result would be silently wrong. A shape without a layout is treated
as having the default layout (XLA requires one). Shapes may be
:class:`~xlashape.Shape` objects or HLO text.

>>> from xlashape import index_util
>>> index_util.multidimensional_index_to_linear_index("f32[10,20]{0,1}", (3, 5))
53
>>> index_util.linear_index_to_multidimensional_index("f32[10,20]{1,0}", 65)
(3, 5)
"""

from __future__ import annotations

from typing import Sequence, Tuple

from ._base import as_int, check_index, int_tuple
from ._shared import array_shape, layout_or_default
from ._validation import require_permutation, require_sizes
from .errors import ShapeIndexError
from .shape import Shape

__all__ = [
    "multidimensional_index_to_linear_index",
    "linear_index_to_multidimensional_index",
    "bump_indices",
    "get_dimension_stride",
    "index_in_bounds",
    "compare_indices",
]


def _prepare(shape, what: str) -> Tuple[Shape, tuple]:
    shape = array_shape(shape, what)
    layout = layout_or_default(shape)
    require_permutation(shape, layout)
    require_sizes(shape, what)
    return shape, layout.minor_to_major


def multidimensional_index_to_linear_index(shape, multi_index: Sequence[int]) -> int:
    """``IndexUtil::MultidimensionalIndexToLinearIndex``.

    ``lin = idx[m2m[0]] + dims[m2m[0]] * (idx[m2m[1]] + dims[m2m[1]] * (...))``:
    the position of the element in the untiled ``minor_to_major`` order.
    Tiles are ignored (as in XLA). An index of the wrong length or outside
    the shape (negative included) raises :class:`~xlashape.ShapeIndexError`.

    >>> multidimensional_index_to_linear_index("f32[10,20,30]{1,2,0}", (3, 5, 7))
    1945
    """
    shape, m2m = _prepare(shape, "multidimensional_index_to_linear_index")
    idx = check_index(multi_index, shape)
    lin = 0
    scale = 1
    for d in m2m:
        lin += idx[d] * scale
        scale *= shape.dimensions[d]
    return lin


def linear_index_to_multidimensional_index(shape, linear_index: int) -> tuple:
    """``IndexUtil::LinearIndexToMultidimensionalIndex``: the inverse map.

    ``out[m2m[k]] = (lin // (dims[m2m[0]] * ... * dims[m2m[k-1]])) % dims[m2m[k]]``.
    ``linear_index`` must be in ``0 .. elements_in(shape) - 1`` (XLA only
    DCHECKs that), else :class:`~xlashape.ShapeIndexError`.

    >>> linear_index_to_multidimensional_index("f32[10,20]{0,1}", 53)
    (3, 5)
    """
    shape, m2m = _prepare(shape, "linear_index_to_multidimensional_index")
    lin = as_int(linear_index, "linear_index")
    total = 1
    for d in shape.dimensions:
        total *= d
    if not 0 <= lin < total:
        raise ShapeIndexError(
            f"linear index {lin} is out of bounds for {shape.human_string()} with "
            f"{total} elements")
    out = [0] * len(shape.dimensions)
    divisor = 1
    for d in m2m:
        out[d] = (lin // divisor) % shape.dimensions[d]
        divisor *= shape.dimensions[d]
    return tuple(out)


def bump_indices(shape, indices: Sequence[int]) -> Tuple[bool, tuple]:
    """``IndexUtil::BumpIndices``, returning ``(advanced, new_indices)``.

    An odometer in **logical** order: the last dimension changes fastest and
    the layout plays no part. From the last dimension backwards, the first one
    that can grow is incremented and every later one reset to 0. When none
    can grow, returns ``(False, indices)`` with the index unchanged (XLA leaves
    its vector unchanged too). Python tuples are immutable, so instead of
    mutating its argument like XLA, this returns the new index as a tuple.

    The index must have one entry per dimension and lie inside the shape
    (:class:`~xlashape.ShapeIndexError` otherwise).

    >>> bump_indices("s32[2,2]", (0, 1))
    (True, (1, 0))
    >>> bump_indices("s32[2,2]", (1, 1))
    (False, (1, 1))
    """
    shape, _ = _prepare(shape, "bump_indices")
    idx = list(check_index(indices, shape))
    for d in range(len(idx) - 1, -1, -1):
        if idx[d] + 1 < shape.dimensions[d]:
            idx[d] += 1
            for j in range(d + 1, len(idx)):
                idx[j] = 0
            return True, tuple(idx)
    return False, tuple(idx)


def get_dimension_stride(shape, dimension: int) -> int:
    """``IndexUtil::GetDimensionStride``: how many elements apart two
    neighbours along ``dimension`` are in the untiled layout — the product of
    the sizes of the dimensions more minor than it.

    >>> get_dimension_stride("f32[10,20,30]{1,2,0}", 2)
    20
    """
    shape, m2m = _prepare(shape, "get_dimension_stride")
    dim = as_int(dimension, "dimension")
    n = len(shape.dimensions)
    if not 0 <= dim < n:
        raise ShapeIndexError(
            f"dimension {dim} is out of range for {shape.human_string()} with {n} dimensions")
    stride = 1
    for d in m2m:
        if d == dim:
            break
        stride *= shape.dimensions[d]
    return stride


def index_in_bounds(shape, index: Sequence[int]) -> bool:
    """``IndexUtil::IndexInBounds``: false if the index has the wrong length or
    an entry ``>=`` its dimension's size.

    Quirk kept from XLA: **negative entries are not rejected**
    (``index_in_bounds("f32[2]", (-1,))`` is True).

    >>> index_in_bounds("f32[2,3]", (1, 2)), index_in_bounds("f32[2,3]", (2, 0))
    (True, False)
    """
    shape = array_shape(shape, "index_in_bounds")
    idx = int_tuple(index, "index")
    if len(idx) != len(shape.dimensions):
        return False
    return all(i < d for i, d in zip(idx, shape.dimensions))


def compare_indices(lhs: Sequence[int], rhs: Sequence[int]) -> int:
    """``IndexUtil::CompareIndices``: lexicographic from dimension 0.

    Returns -1 if ``lhs < rhs``, **+1 if ``lhs`` is larger** and 0 if equal;
    XLA's header comment has the sign backwards, its code (and this) does
    not. Indices of different lengths raise :class:`~xlashape.ShapeIndexError`.

    >>> compare_indices((1, 2), (1, 3)), compare_indices((2, 0), (1, 9))
    (-1, 1)
    """
    a = int_tuple(lhs, "lhs")
    b = int_tuple(rhs, "rhs")
    if len(a) != len(b):
        raise ShapeIndexError(
            f"cannot compare indices of different lengths: {list(a)} has {len(a)} "
            f"entries, {list(b)} has {len(b)}")
    for x, y in zip(a, b):
        if x < y:
            return -1
        if x > y:
            return 1
    return 0
