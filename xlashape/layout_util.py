"""XLA's ``LayoutUtil`` in Python (``xla/layout_util.h``).

Function names are XLA's in snake_case and the results are XLA's, quirks
included; each quirk is named in the function's docstring. Layouts are
immutable here, so the XLA functions that modify a layout or a shape in place
(``SetToDefaultLayout``, ``ClearLayout``, ``CopyLayoutBetweenShapes``...) return
the modified copy instead.

Functions that take a shape accept a :class:`~xlashape.Shape` or HLO shape
text (``"f32[2,3]{0,1}"``).

>>> from xlashape import layout_util
>>> str(layout_util.make_layout_from_major_to_minor([0, 1]))
'{1,0}'
>>> layout_util.linear_index("bf16[16,256]{1,0:T(8,128)(2,1)}", (1, 0))
128
"""

from __future__ import annotations

from typing import Optional, Sequence

from . import _validation, tiling
from ._base import as_int, check_index, int_list
from ._shared import (array_shape, as_layout, as_shape, layout_or_default,
                      linear_index_unchecked)
from ._validation import require_permutation, require_sizes
from .errors import InvalidShapeError, ShapeIndexError
from .layout import Layout, SplitConfig
from .primitive_types import PrimitiveType, as_primitive_type
from .shape import Shape

__all__ = [
    "make_layout",
    "make_descending_layout",
    "make_ascending_layout",
    "make_layout_from_major_to_minor",
    "get_default_layout_for_rank",
    "get_default_layout_for_r2",
    "get_default_layout_for_r3",
    "get_default_layout_for_r4",
    "get_default_layout_for_shape",
    "set_to_default_layout",
    "get_with_default_layout",
    "clear_layout",
    "clear_tiles",
    "has_layout",
    "has_any_layout",
    "has_custom_element_size_in_bits",
    "layouts_in_shapes_equal",
    "copy_layout_between_shapes",
    "equal",
    "human_string",
    "minor_to_major",
    "minor",
    "major",
    "make_logical_to_physical",
    "is_monotonic_with_dim0_major",
    "is_monotonic_with_dim0_minor",
    "has_descending_layout",
    "has_ascending_layout",
    "move_dim_to_major",
    "move_dim_to_minor",
    "are_dimensions_consecutive",
    "byte_strides_is_major_to_minor",
    "linear_index",
    "linear_index_for_nested_tiling",
    "delinearize_index_for_nested_tiling",
    "max_split_size",
    "max_elements_in_per_split",
    "get_split_config",
    "memory_space",
    "delete_dimension",
    "validate_layout_for_shape",
    "validate_layout_in_shape",
    "position_in_container",
]

_INVALID = PrimitiveType.PRIMITIVE_TYPE_INVALID


# -- construction -------------------------------------------------------------
def make_layout(
    minor_to_major: Sequence[int],
    tiles: Sequence = (),
    tail_padding_alignment_in_elements: int = 1,
    index_primitive_type=_INVALID,
    pointer_primitive_type=_INVALID,
    element_size_in_bits: int = 0,
    memory_space: int = 0,
    split_configs: Sequence = (),
    physical_shape: Optional[Shape] = None,
    dynamic_shape_metadata_prefix_bytes: int = 0,
) -> Layout:
    """``LayoutUtil::MakeLayout``: a layout exactly as given, no validation.

    Whatever ``element_size_in_bits`` is given is kept, even the type's own
    width (``E(32)`` on f32); :func:`xlashape.shape_util.make_shape_with_dense_layout`
    is the constructor that normalises that to 0. Tiles may be
    :class:`~xlashape.Tile` objects or sequences (``(8, 128)``, ``('*', 128)``).
    A negative tile entry other than ``'*'`` is refused (XLA aborts the
    process there).

    >>> str(make_layout([1, 0], tiles=[(8, 128), (2, 1)], memory_space=1))
    '{1,0:T(8,128)(2,1)S(1)}'
    """
    return Layout(
        minor_to_major,
        tiles=tiles,
        tail_padding_alignment_in_elements=tail_padding_alignment_in_elements,
        index_primitive_type=index_primitive_type,
        pointer_primitive_type=pointer_primitive_type,
        element_size_in_bits=element_size_in_bits,
        memory_space=memory_space,
        split_configs=split_configs,
        physical_shape=physical_shape,
        dynamic_shape_metadata_prefix_bytes=dynamic_shape_metadata_prefix_bytes,
    )


def _rank(rank) -> int:
    rank = as_int(rank, "rank")
    if rank < 0:
        raise InvalidShapeError(f"rank must be >= 0, got {rank}")
    return rank


def make_descending_layout(rank: int) -> Layout:
    """``{rank-1, ..., 1, 0}``: dimension 0 major-most (row-major), XLA's default.

    >>> str(make_descending_layout(3))
    '{2,1,0}'
    """
    return Layout(tuple(range(_rank(rank) - 1, -1, -1)))


def make_ascending_layout(rank: int) -> Layout:
    """``{0, 1, ..., rank-1}``: dimension 0 minor-most (column-major).

    >>> str(make_ascending_layout(3))
    '{0,1,2}'
    """
    return Layout(tuple(range(_rank(rank))))


def make_layout_from_major_to_minor(major_to_minor: Sequence[int]) -> Layout:
    """A layout from the major-to-minor order (what JAX and numpy users think
    in): ``minor_to_major`` is the list reversed.

    >>> str(make_layout_from_major_to_minor([0, 2, 1]))
    '{1,2,0}'
    """
    return Layout(tuple(reversed(int_list(major_to_minor, "major_to_minor"))))


def get_default_layout_for_rank(rank: int) -> Layout:
    """XLA's default layout for an array of this rank: the descending layout.

    >>> str(get_default_layout_for_rank(2))
    '{1,0}'
    """
    return make_descending_layout(rank)


def get_default_layout_for_r2() -> Layout:
    """The default layout of a rank-2 array, ``{1,0}``.

    >>> str(get_default_layout_for_r2())
    '{1,0}'
    """
    return make_descending_layout(2)


def get_default_layout_for_r3() -> Layout:
    """The default layout of a rank-3 array, ``{2,1,0}``.

    >>> str(get_default_layout_for_r3())
    '{2,1,0}'
    """
    return make_descending_layout(3)


def get_default_layout_for_r4() -> Layout:
    """The default layout of a rank-4 array, ``{3,2,1,0}``.

    >>> str(get_default_layout_for_r4())
    '{3,2,1,0}'
    """
    return make_descending_layout(4)


def get_default_layout_for_shape(shape) -> Layout:
    """The default layout for an array shape; the empty layout for token and
    opaque shapes. A tuple has no single layout (error, as XLA CHECKs).

    >>> str(get_default_layout_for_shape("f32[10,20,30,15,25]"))
    '{4,3,2,1,0}'
    """
    shape = as_shape(shape)
    if shape.is_token or shape.is_opaque:
        return Layout()
    if shape.is_buffer:
        shape = shape.buffer_shape
    if not shape.is_array:
        raise InvalidShapeError(
            f"a single Layout is not valid for {shape.human_string()}; use "
            "set_to_default_layout() for tuples")
    return make_descending_layout(len(shape.dimensions))


def set_to_default_layout(shape) -> Shape:
    """``LayoutUtil::SetToDefaultLayout``, returning the new shape.

    Arrays get ``minor_to_major = {n-1, ..., 0}``. Quirk kept from XLA: only
    ``minor_to_major`` of an existing layout is rewritten, so its tiles,
    ``E(n)``, memory space etc. survive (``f32[2,3]{0,1:S(1)}`` becomes
    ``f32[2,3]{1,0:S(1)}``); an array without a layout gets the plain default
    layout. Tuples and buffers recurse; token and opaque shapes are returned
    unchanged (they never have a layout).

    >>> str(set_to_default_layout("(f32[2,3]{0,1}, token[])"))
    '(f32[2,3]{1,0}, token[])'
    """
    def fix(a: Shape) -> Shape:
        default = make_descending_layout(len(a.dimensions))
        if a.layout is None:
            return a.with_layout(default)
        return a.with_layout(a.layout.replace(minor_to_major=default.minor_to_major))

    return as_shape(shape).map_arrays(fix)


get_with_default_layout = set_to_default_layout


def clear_layout(shape) -> Shape:
    """``LayoutUtil::ClearLayout``: the shape with every layout removed
    (recursively for tuples).

    >>> str(clear_layout("(f32[2,3]{0,1}, s8[])").to_string(True))
    '(f32[2,3], s8[])'
    """
    return as_shape(shape).without_layout()


def clear_tiles(shape) -> Shape:
    """``LayoutUtil::ClearTiles``: every layout in the shape without its tiles.

    >>> str(clear_tiles("bf16[16,256]{1,0:T(8,128)(2,1)S(1)}"))
    'bf16[16,256]{1,0:S(1)}'
    """
    return as_shape(shape).map_arrays(
        lambda a: a if a.layout is None else a.with_layout(a.layout.replace(tiles=())))


def has_layout(shape) -> bool:
    """``LayoutUtil::HasLayout``: true if every array in the shape has a layout.

    Token and opaque shapes count as having one (they need none); a tuple has
    one if all its elements do (so the empty tuple does).

    >>> has_layout("(f32[2]{0}, token[])")
    True
    """
    shape = as_shape(shape)
    if shape.is_tuple:
        return all(has_layout(s) for s in shape.tuple_shapes)
    if shape.is_buffer:
        return shape.buffer_shape.layout is not None
    if not shape.is_array:
        return True
    return shape.layout is not None


def has_any_layout(shape) -> bool:
    """``LayoutUtil::HasAnyLayout``: true if any array in the shape has a layout.

    Quirk kept from XLA: a token or opaque shape counts as "having" one, and an
    empty tuple does not.

    >>> has_any_layout("()")
    False
    """
    shape = as_shape(shape)
    if shape.is_tuple:
        return any(has_any_layout(s) for s in shape.tuple_shapes)
    if shape.is_buffer:
        return shape.buffer_shape.layout is not None
    if not shape.is_array:
        return True
    return shape.layout is not None


def has_custom_element_size_in_bits(shape) -> bool:
    """True if some array in the shape has a layout with ``E(n)``, n != 0.

    >>> has_custom_element_size_in_bits("(f32[2], s4[8]{0:E(4)})")
    True
    """
    shape = as_shape(shape)
    if shape.is_tuple:
        return any(has_custom_element_size_in_bits(s) for s in shape.tuple_shapes)
    if shape.is_buffer:
        shape = shape.buffer_shape
    if not shape.is_array:
        return False
    return shape.layout is not None and shape.layout.element_size_in_bits != 0


def layouts_in_shapes_equal(lhs, rhs) -> bool:
    """``LayoutUtil::LayoutsInShapesEqual``: compare only the layouts.

    Arrays of different rank are unequal; two arrays without layouts are equal;
    token and opaque shapes are ignored (always equal); tuples must have the same
    number of elements.

    >>> layouts_in_shapes_equal("f32[2,3]{0,1}", "s8[7,9]{0,1}")
    True
    """
    lhs, rhs = as_shape(lhs), as_shape(rhs)
    if lhs.is_tuple:
        if not rhs.is_tuple or len(lhs.tuple_shapes) != len(rhs.tuple_shapes):
            return False
        return all(layouts_in_shapes_equal(a, b)
                   for a, b in zip(lhs.tuple_shapes, rhs.tuple_shapes))
    if lhs.is_buffer:
        lhs = lhs.buffer_shape
    if rhs.is_buffer:
        rhs = rhs.buffer_shape
    if lhs.is_array:
        if not rhs.is_array or len(lhs.dimensions) != len(rhs.dimensions):
            return False
        if lhs.layout is None and rhs.layout is None:
            return True
        if lhs.layout is None or rhs.layout is None:
            return False
        return lhs.layout == rhs.layout
    return True


def copy_layout_between_shapes(src, dst) -> Shape:
    """``LayoutUtil::CopyLayoutBetweenShapes``: ``dst`` with ``src``'s layouts.

    Returns the new ``dst``. The structures must match (tuple vs. not, tuple
    sizes, array ranks) and the layout must be valid for ``dst``; a ``src``
    array without a layout clears ``dst``'s.

    >>> str(copy_layout_between_shapes("f32[123,42,7]{2,0,1}", "f32[2,3,5]"))
    'f32[2,3,5]{2,0,1}'
    """
    src, dst = as_shape(src), as_shape(dst)
    if src.is_tuple != dst.is_tuple:
        raise InvalidShapeError("cannot copy layout from shape: shape structure differs")
    if src.is_tuple:
        if len(src.tuple_shapes) != len(dst.tuple_shapes):
            raise InvalidShapeError(
                "cannot copy layout from shape: tuple element count differs")
        return Shape.tuple([copy_layout_between_shapes(a, b)
                            for a, b in zip(src.tuple_shapes, dst.tuple_shapes)])
    if src.is_buffer and dst.is_buffer:
        return Shape.buffer(copy_layout_between_shapes(src.buffer_shape, dst.buffer_shape))
    if src.is_array:
        if not dst.is_array:
            raise InvalidShapeError("cannot copy layout from shape: shape structure differs")
        if src.layout is None:
            return dst.with_layout(None)
        if len(src.dimensions) != len(dst.dimensions):
            raise InvalidShapeError("cannot copy layout from shape: ranks differs")
        validate_layout_for_shape(src.layout, dst)
        return dst.with_layout(src.layout)
    return dst


def equal(lhs: Layout, rhs: Layout) -> bool:
    """``LayoutUtil::Equal`` = ``Layout::operator==`` (``M(n)`` is not compared).

    >>> equal(make_layout([1, 0], dynamic_shape_metadata_prefix_bytes=8), make_layout([1, 0]))
    True
    """
    return as_layout(lhs) == as_layout(rhs)


def human_string(layout) -> str:
    """``LayoutUtil::HumanString``: XLA's text of the layout, e.g. ``{1,0:T(8,128)}``.

    >>> human_string(make_layout([1, 0], tiles=[(8, 128)]))
    '{1,0:T(8,128)}'
    """
    return str(as_layout(layout))


# -- dimension mapping --------------------------------------------------------
def minor_to_major(shape_or_layout) -> tuple:
    """``LayoutUtil::MinorToMajor`` of a layout, or of an array shape's layout.

    A shape without a layout is refused (XLA CHECKs ``has_layout``).

    >>> minor_to_major("f32[2,3]{0,1}")
    (0, 1)
    """
    if isinstance(shape_or_layout, Layout):
        return shape_or_layout.minor_to_major
    if isinstance(shape_or_layout, str) and shape_or_layout.lstrip().startswith("{"):
        return as_layout(shape_or_layout).minor_to_major
    shape = array_shape(shape_or_layout, "minor_to_major")
    if shape.layout is None:
        raise InvalidShapeError(f"shape {shape.human_string()} does not have a layout")
    return shape.layout.minor_to_major


def _position(layout: Layout, physical: int, what: str) -> int:
    physical = as_int(physical, what)
    n = len(layout.minor_to_major)
    if not 0 <= physical < n:
        raise ShapeIndexError(
            f"{what} {physical} is out of range for layout {layout} with {n} dimensions")
    return physical


def minor(layout, physical_dimension_number: int) -> int:
    """``LayoutUtil::Minor``: the logical dimension that is ``p``-th from the
    minor end: ``minor_to_major[p]``.

    >>> minor(make_layout([2, 0, 1]), 0)
    2
    """
    layout = as_layout(layout)
    p = _position(layout, physical_dimension_number, "physical dimension")
    return layout.minor_to_major[p]


def major(layout, physical_dimension_number: int) -> int:
    """``LayoutUtil::Major``: the logical dimension that is ``p``-th from the
    major end: ``minor_to_major[n-1-p]``.

    >>> major(make_layout([2, 0, 1]), 0)
    1
    """
    layout = as_layout(layout)
    p = _position(layout, physical_dimension_number, "physical dimension")
    m2m = layout.minor_to_major
    return m2m[len(m2m) - 1 - p]


def make_logical_to_physical(layout) -> tuple:
    """``LayoutUtil::MakeLogicalToPhysical``: for each logical dimension, its
    physical position counted from the major end (0 = major-most).

    >>> make_logical_to_physical(make_layout([0, 2, 1]))
    (2, 0, 1)
    """
    layout = as_layout(layout)
    m2m = layout.minor_to_major
    n = len(m2m)
    if sorted(m2m) != list(range(n)):
        raise InvalidShapeError(f"layout {layout} minor_to_major is not a permutation of 0..{n - 1}")
    out = [0] * n
    for p in range(n):
        out[m2m[n - 1 - p]] = p
    return tuple(out)


def _layout_of(shape_or_layout) -> Layout:
    if isinstance(shape_or_layout, Layout):
        return shape_or_layout
    if isinstance(shape_or_layout, str) and shape_or_layout.lstrip().startswith("{"):
        return as_layout(shape_or_layout)
    shape = array_shape(shape_or_layout)
    if shape.layout is None:
        raise InvalidShapeError(f"shape {shape.human_string()} does not have a layout")
    return shape.layout


def is_monotonic_with_dim0_major(layout) -> bool:
    """True if ``minor_to_major`` is sorted descending (row-major order).

    True for the default layout, for ``{}`` and for ``{0}``. Accepts a layout
    or an array shape with a layout.

    >>> is_monotonic_with_dim0_major(make_layout([2, 1, 0]))
    True
    """
    m2m = _layout_of(layout).minor_to_major
    return all(m2m[i] >= m2m[i + 1] for i in range(len(m2m) - 1))


def is_monotonic_with_dim0_minor(layout) -> bool:
    """True if ``minor_to_major`` is sorted ascending (column-major order).

    >>> is_monotonic_with_dim0_minor(make_layout([0, 1, 2]))
    True
    """
    m2m = _layout_of(layout).minor_to_major
    return all(m2m[i] <= m2m[i + 1] for i in range(len(m2m) - 1))


def has_descending_layout(layout) -> bool:
    """Same check as :func:`is_monotonic_with_dim0_major`.

    >>> has_descending_layout("f32[2,3]")
    True
    """
    return is_monotonic_with_dim0_major(layout)


def has_ascending_layout(layout) -> bool:
    """Same check as :func:`is_monotonic_with_dim0_minor`.

    >>> has_ascending_layout("f32[2,3]{0,1}")
    True
    """
    return is_monotonic_with_dim0_minor(layout)


def _dim_in_layout(layout: Layout, dim) -> int:
    dim = as_int(dim, "dimension")
    if dim not in layout.minor_to_major:
        raise ShapeIndexError(f"dimension {dim} is not in layout {layout}")
    return dim


def move_dim_to_major(layout, dim: int) -> Layout:
    """``LayoutUtil::MoveDimToMajor``: ``dim`` becomes the major-most dimension.

    The other dimensions keep their order; all other layout fields are kept
    (tiles are not adjusted). The layout is returned unchanged if ``dim`` is
    already major-most.

    >>> str(move_dim_to_major(make_layout([2, 1, 0]), 1))
    '{2,0,1}'
    """
    layout = as_layout(layout)
    dim = _dim_in_layout(layout, dim)
    m2m = layout.minor_to_major
    if m2m[-1] == dim:
        return layout
    return layout.replace(minor_to_major=tuple(d for d in m2m if d != dim) + (dim,))


def move_dim_to_minor(layout, dim: int) -> Layout:
    """``LayoutUtil::MoveDimToMinor``: ``dim`` becomes the minor-most dimension.

    >>> str(move_dim_to_minor(make_layout([2, 0, 3, 1]), 3))
    '{3,2,0,1}'
    """
    layout = as_layout(layout)
    dim = _dim_in_layout(layout, dim)
    m2m = layout.minor_to_major
    if m2m[0] == dim:
        return layout
    return layout.replace(minor_to_major=(dim,) + tuple(d for d in m2m if d != dim))


def position_in_container(container: Sequence[int], value: int) -> int:
    """Index of ``value`` in ``container`` (``PositionInContainer``).

    >>> position_in_container([3, 1, 2], 2)
    2
    """
    try:
        return list(container).index(value)
    except ValueError:
        raise ShapeIndexError(f"{value} is not in {list(container)}") from None


def are_dimensions_consecutive(layout, dims: Sequence[int]) -> bool:
    """``LayoutUtil::AreDimensionsConsecutive``: true iff the positions of
    ``dims`` in ``minor_to_major`` form one contiguous run (in any order).

    >>> are_dimensions_consecutive(make_layout([3, 1, 2, 0]), [2, 1])
    True
    """
    layout = as_layout(layout)
    positions = sorted(position_in_container(layout.minor_to_major, as_int(d, "dimension"))
                       for d in dims)
    return all(b - a == 1 for a, b in zip(positions, positions[1:]))


def byte_strides_is_major_to_minor(byte_strides: Sequence[int], dims: Sequence[int],
                                   element_type) -> bool:
    """``LayoutUtil::ByteStridesIsMajorToMinor``: true iff ``byte_strides`` are
    exactly the row-major (C-contiguous) byte strides of ``dims``.

    >>> byte_strides_is_major_to_minor([3960, 440, 44, 4], [8, 9, 10, 11], "f32")
    True
    """
    strides = int_list(byte_strides, "byte_strides")
    dims = int_list(dims, "dims")
    if len(strides) != len(dims):
        raise InvalidShapeError(
            f"byte_strides has {len(strides)} entries but dims has {len(dims)}; "
            "they must be equal")
    stride = as_primitive_type(element_type).byte_width
    for i in range(len(dims) - 1, -1, -1):
        if strides[i] != stride:
            return False
        stride *= dims[i]
    return True


# -- linear index, splits -----------------------------------------------------
def linear_index(shape, index: Sequence[int]) -> int:
    """``LayoutUtil::LinearIndex``: element offset using the **first tile only**.

    XLA's quirks, kept:

    * rank 0 gives 0 and **rank 1 gives ``index[0]`` even when the shape is
      tiled** (``f32[5]{0:T(2)}``: index (3,) -> 3);
    * only ``tiles[0]`` is used: sub-tiles (``(2,1)`` in ``T(8,128)(2,1)``) are
      ignored, so ``bf16[16,256]{1,0:T(8,128)(2,1)}`` element (1, 0) is at 128
      here and at 1 in the full tiled model (:func:`xlashape.tiling.linear_index`);
    * tail padding ``L(n)``, ``E(n)`` and split configs play no part.

    Unlike XLA (which checks nothing), an index outside the shape raises
    :class:`~xlashape.ShapeIndexError`, and a ``*`` tile entry (for which
    XLA's arithmetic is meaningless) raises :class:`~xlashape.InvalidShapeError`.
    A shape without a layout is treated as having the default layout.

    >>> linear_index("f32[3,5]{1,0:T(2,2)}", (2, 3))
    17
    """
    shape = array_shape(shape, "linear_index")
    layout = layout_or_default(shape)
    require_permutation(shape, layout)
    require_sizes(shape, "linear_index")
    idx = check_index(index, shape)
    return linear_index_unchecked(shape, layout, idx)


def linear_index_for_nested_tiling(shape, index: Sequence[int]) -> int:
    """``LayoutUtil::LinearIndexForNestedTiling``: the element offset with
    **every** tile level applied (repeated tiles, ``*``, padding) — the full
    tiled-layout model of :func:`xlashape.tiling.linear_index`, under XLA's
    name. Compare :func:`linear_index`, which uses the first tile only.

    >>> linear_index_for_nested_tiling("bf16[2048]{0:T(1024)(128)(2,1)}", (128,))
    1
    >>> linear_index("bf16[2048]{0:T(1024)(128)(2,1)}", (128,))
    128
    """
    return tiling.linear_index(as_shape(shape), index)


def delinearize_index_for_nested_tiling(shape, linear: int):
    """``LayoutUtil::DelinearizeIndexForNestedTiling``: the logical index
    stored at element offset ``linear`` in the full tiled layout, or ``None``
    when that slot is padding (see :func:`xlashape.tiling.multidimensional_index`).

    >>> delinearize_index_for_nested_tiling("bf16[2,8,128]{2,1,0:T(8,128)(2,1)}", 256)
    (0, 2, 0)
    """
    return tiling.multidimensional_index(as_shape(shape), linear)


def max_split_size(shape, dim: int) -> int:
    """``LayoutUtil::MaxSplitSize``: the largest piece of logical dimension
    ``dim`` after the layout's split configs cut it.

    A split config's ``dimension`` is *physical* (0 = major-most); the first
    config whose physical dimension maps to ``dim`` is used. Without one (or
    without a layout) this is ``dims[dim]``.

    >>> s = "f32[150,200,100]{0,1,2:SC(0:30)(1:40,130)}"
    >>> [max_split_size(s, d) for d in range(3)]
    [150, 90, 70]
    """
    shape = array_shape(shape, "max_split_size")
    n = len(shape.dimensions)
    d = as_int(dim, "dimension")
    if not 0 <= d < n:
        raise ShapeIndexError(f"dimension {d} is out of range for {shape.human_string()} "
                              f"with {n} dimensions")
    layout = shape.layout
    if layout is None:
        return shape.dimensions[d]
    m2m = layout.minor_to_major
    for config in layout.split_configs:
        p = config.dimension
        if not 0 <= p < len(m2m):
            raise InvalidShapeError(
                f"split config {config} names physical dimension {p}, but layout "
                f"{layout} has {len(m2m)} dimensions")
        if m2m[len(m2m) - 1 - p] == d:
            largest = 0
            last = 0
            for split_index in config.split_indices:
                largest = max(largest, split_index - last)
                last = split_index
            return max(largest, shape.dimensions[d] - last)
    return shape.dimensions[d]


def max_elements_in_per_split(shape) -> int:
    """``LayoutUtil::MaxElementsInPerSplit``: product of :func:`max_split_size`
    over all dimensions.

    >>> max_elements_in_per_split("f32[150,200,100]{0,1,2:SC(0:30)(1:40,130)}")
    945000
    """
    shape = array_shape(shape, "max_elements_in_per_split")
    out = 1
    for d in range(len(shape.dimensions)):
        out *= max_split_size(shape, d)
    return out


def get_split_config(shape) -> Optional[SplitConfig]:
    """``LayoutUtil::GetSplitConfig``: the one split config, or None.

    More than one is an error (XLA CHECKs at most one here).

    >>> str(get_split_config("f32[8,8]{1,0:SC(0:3)}"))
    '(0:3)'
    """
    shape = array_shape(shape, "get_split_config")
    if shape.layout is None or not shape.layout.split_configs:
        return None
    configs = shape.layout.split_configs
    if len(configs) > 1:
        raise InvalidShapeError(
            f"get_split_config expects at most one split config, {shape} has {len(configs)}")
    return configs[0]


def memory_space(shape) -> int:
    """``LayoutUtil::MemorySpace``: the layout's ``S(n)``, 0 without a layout.

    >>> memory_space("f32[8]{0:S(1)}"), memory_space("f32[8]")
    (1, 0)
    """
    shape = as_shape(shape)
    if shape.is_buffer:
        shape = shape.buffer_shape
    if shape.is_array and shape.layout is not None:
        return shape.layout.memory_space
    return 0


def delete_dimension(layout, dim: int) -> Layout:
    """``Layout::DeleteDimension``: remove logical dimension ``dim``.

    ``dim`` is removed from ``minor_to_major`` and every entry greater than it
    is decremented. Quirk kept from XLA: **tiles are not adjusted** (nor are
    split configs or the legacy ``padded_dimensions``, except that
    ``padded_dimensions`` loses its entry so the layout stays constructible).

    >>> str(delete_dimension(make_layout([2, 0, 1]), 1))
    '{1,0}'
    """
    layout = as_layout(layout)
    dim = _dim_in_layout(layout, dim)
    m2m = tuple(d - 1 if d > dim else d for d in layout.minor_to_major if d != dim)
    changes = {"minor_to_major": m2m}
    if layout.padded_dimensions:
        pd = list(layout.padded_dimensions)
        if dim < len(pd):
            del pd[dim]
        changes["padded_dimensions"] = tuple(pd)
    return layout.replace(**changes)


# -- validation ---------------------------------------------------------------
def validate_layout_for_shape(layout, shape) -> None:
    """``LayoutUtil::ValidateLayoutForShape``: raise
    :class:`~xlashape.InvalidShapeError` with XLA's message if ``layout`` is
    not valid for the array ``shape``.

    Checked, in XLA's order: the number of ``minor_to_major`` entries, each in
    range, no duplicates, ``L(n)`` > 0, no index/pointer primitive type, no
    physical shape, no empty tile or tile containing 0, ``E(n)`` >= 0, then
    the split configs (a physical dimension in range, one config per
    dimension, split indices strictly increasing inside ``(0, size)``).
    Not checked, as in XLA: memory space, negative tile entries, tiles with
    more dimensions than the shape, ``E(n)`` narrower than the type, ``M(n)``.
    Token and opaque shapes accept any layout; a tuple is refused. These are
    the checks XLA's HLO parser runs on every tuple element, so
    ``parse_shape("(f32[8]{0:SC(0:9)})")`` is refused with the same message.

    >>> validate_layout_for_shape(make_layout([0, 1, 2]), "f32[2,3]")
    Traceback (most recent call last):
    ...
    xlashape.errors.InvalidShapeError: layout minor_to_major field contains 3 elements, but shape has 2 dimensions: {0, 1, 2}; shape: f32[2,3]
    """
    layout = as_layout(layout)
    shape = as_shape(shape)
    if shape.is_tuple:
        raise InvalidShapeError("a single Layout is not valid for tuple shapes")
    if shape.is_buffer:
        shape = shape.buffer_shape
    _validation.validate_layout_for_shape(layout, shape)


def validate_layout_in_shape(shape, allow_missing_layouts: bool = False) -> None:
    """``LayoutUtil::ValidateLayoutInShape``: validate every layout in the shape.

    Tuples and buffers recurse; token and opaque shapes pass. An array without
    a layout fails with ``shape f32[2,3] does not have a layout`` unless
    ``allow_missing_layouts`` is true.

    >>> validate_layout_in_shape(Shape("f32", [2, 3]), allow_missing_layouts=True)
    """
    _validation.validate_layout_in_shape(as_shape(shape), allow_missing_layouts)
