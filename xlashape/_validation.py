"""XLA's shape and layout validation, in one place.

``ShapeUtil::ValidateShape`` / ``ValidateShapeWithOptionalLayout`` and
``LayoutUtil::ValidateLayoutForShape`` / ``ValidateLayoutInShape``, with
XLA's messages, in XLA's order. Two entry points use them and must agree:

* :func:`xlashape.shape_util.validate_shape` and friends, and
  :func:`xlashape.layout_util.validate_layout_for_shape`;
* the HLO parser (:mod:`xlashape.hlo_text`), which, like XLA's, validates
  every element of a tuple as it builds the tuple (``(f32[8]{0:SC(0:9)})``
  is refused while ``f32[8]{0:SC(0:9)}`` on its own parses).

What XLA checks was established with XLA's own parser (jaxlib 0.12, by
parsing each case inside a tuple): the non-layout checks (negative
dimensions, element count and byte size within int64); in the layout, the
``minor_to_major`` permutation, no index/pointer primitive type, no physical
shape, no empty tile or tile containing 0, ``E(n) >= 0``, and split configs
(a physical dimension in range, at most one config per dimension, split
indices strictly increasing inside ``(0, size)``). Not checked by XLA, and
so not here: the memory space, negative tile entries other than ``*`` (the
parser and the constructors refuse those), tiles with more dimensions than
the shape, ``E(n)`` narrower than the type, ``M(n)``, the order of split
configs. Where XLA's parser gives no message (it reports only "Syntax
error"), the wording is xlashape's.

Also here: the two prerequisites of xlashape's index and size arithmetic
(:func:`require_permutation`, :func:`require_sizes`), which the utilities and
the tiling model share.
"""

from __future__ import annotations

from ._base import INT64_MAX
from .errors import InvalidShapeError
from .primitive_types import PrimitiveType
from .shape import UNBOUNDED_SIZE

P = PrimitiveType
_NO_TYPE = PrimitiveType.PRIMITIVE_TYPE_INVALID


def _shape_error(shape, message: str) -> InvalidShapeError:
    """XLA's ``ShapeError`` wording."""
    return InvalidShapeError(
        f"Shape Error: {message} Shape({shape.element_type.hlo_name}): {shape.human_string()}")


def validate_non_layout(shape) -> None:
    """``ValidateNonLayoutProperties``: element type, dimensions, sizes."""
    et = shape.element_type
    if et is P.PRIMITIVE_TYPE_INVALID:
        raise _shape_error(shape, "Invalid element type.")
    if et is P.TUPLE:
        for s in shape.tuple_shapes:
            validate_non_layout(s)
        return
    if et is P.BUFFER:
        validate_non_layout(shape.buffer_shape)
        return
    if et is P.TOKEN or et is P.OPAQUE_TYPE:
        return
    product = 1
    overflow = False
    for i, d in enumerate(shape.dimensions):
        if d == UNBOUNDED_SIZE:
            continue
        if d < 0:
            raise _shape_error(shape, f"Negative dimension at index {i}: {d}.")
        product *= d
        if product > INT64_MAX:
            overflow = True  # sticky, as XLA's flag: a later 0 does not clear it
    if overflow:
        raise _shape_error(shape, "Dimensions overflow.")
    if product * et.byte_width > INT64_MAX:
        raise InvalidShapeError(f"Shape {shape.human_string()} size may overflow int64_t.")


def validate_layout_for_shape(layout, shape) -> None:
    """``ValidateLayoutForShape`` for an array, token or opaque shape (tuples
    and buffers are the callers' business)."""
    if not shape.element_type.is_array_type:
        return  # token and opaque shapes accept any layout, as in XLA
    text = shape.human_string()
    m2m = layout.minor_to_major
    n = len(shape.dimensions)
    if len(m2m) != n or (n and (min(m2m) < 0 or max(m2m) >= n or len(set(m2m)) != n)):
        joined = ", ".join(map(str, m2m))
        if len(m2m) != n:
            raise InvalidShapeError(
                f"layout minor_to_major field contains {len(m2m)} elements, but shape has "
                f"{n} dimensions: {{{joined}}}; shape: {text}")
        seen = set()
        for d in m2m:  # the first offending entry, in order
            if not 0 <= d < n:
                raise InvalidShapeError(
                    f"layout minor_to_major field has out-of-bounds value: {{{joined}}}; "
                    f"shape: {text}")
            if d in seen:
                raise InvalidShapeError(
                    f"layout minor_to_major field has duplicate values: {{{joined}}}; "
                    f"shape: {text}")
            seen.add(d)
    tail = layout.tail_padding_alignment_in_elements
    if tail <= 0:
        # Only reachable with a Layout not built by its constructor (XLA: a proto).
        raise InvalidShapeError(
            f"layout tail_padding_alignment_in_elements field is <= 0: {{{tail}}}")
    if layout.index_primitive_type is not _NO_TYPE:
        raise InvalidShapeError(
            f"layout has a index_primitive_type, but is not a sparse array: {text}")
    if layout.pointer_primitive_type is not _NO_TYPE:
        raise InvalidShapeError(
            f"layout has a pointer_primitive_type, but is not a sparse array: {text}")
    if layout.physical_shape is not None:
        raise InvalidShapeError(
            f"layout has a physical_shape, but is not a sparse array: {text}")
    check_tiles(layout, shape)
    check_element_size(layout)
    if layout.split_configs:
        _validate_split_configs(layout, shape, text)


def check_tiles(layout, shape) -> None:
    """No tile may be empty or contain a 0."""
    for tile in layout.tiles:
        if len(tile) == 0 or 0 in tile.dimensions:
            raise InvalidShapeError(f"layout has invalid tiles: {shape.human_string()}")


def check_element_size(layout) -> None:
    """``E(n)`` must not be negative."""
    if layout.element_size_in_bits < 0:
        raise InvalidShapeError(
            f"layout element_size_in_bits field is negative: {layout.element_size_in_bits}")


def _validate_split_configs(layout, shape, text: str) -> None:
    n = len(shape.dimensions)
    m2m = layout.minor_to_major
    used = set()
    for cfg in layout.split_configs:
        d = cfg.dimension  # physical: 0 is the major-most dimension
        if not 0 <= d < n:
            raise InvalidShapeError(
                f"split config dimension {d} is out of range for {n} dimensions: {text}")
        if d in used:
            raise InvalidShapeError(f"more than one split config for dimension {d}: {text}")
        used.add(d)
        size = shape.dimensions[m2m[n - 1 - d]]
        last = 0
        for index in cfg.split_indices:
            if index <= last or index >= size:
                bound = "?" if size == UNBOUNDED_SIZE else size
                raise InvalidShapeError(
                    f"split indices {list(cfg.split_indices)} must increase strictly "
                    f"within (0, {bound}): {text}")
            last = index


def validate_layout_in_shape(shape, allow_missing_layouts: bool) -> None:
    """``ValidateLayoutInShape``: every layout in the shape; tuples and
    buffers recurse."""
    et = shape.element_type
    if et is P.TUPLE:
        for s in shape.tuple_shapes:
            validate_layout_in_shape(s, allow_missing_layouts)
        return
    if et is P.BUFFER:
        shape = shape.buffer_shape
    if shape.element_type.is_array_type:
        if shape.layout is None:
            if allow_missing_layouts:
                return
            raise InvalidShapeError(f"shape {shape.human_string()} does not have a layout")
        validate_layout_for_shape(shape.layout, shape)


def validate_shape(shape, allow_missing_layouts: bool = False) -> None:
    """``ValidateShape`` (or, with ``allow_missing_layouts``,
    ``ValidateShapeWithOptionalLayout``): the non-layout checks of the whole
    shape first, then its layouts."""
    validate_non_layout(shape)
    validate_layout_in_shape(shape, allow_missing_layouts)


# -- prerequisites of the index and size arithmetic ---------------------------

def require_permutation(shape, layout) -> None:
    """``layout.minor_to_major`` must list each dimension of ``shape`` once."""
    n = len(shape.dimensions)
    m2m = layout.minor_to_major
    if len(m2m) != n or sorted(m2m) != list(range(n)):
        raise InvalidShapeError(
            f"layout {layout} is not a permutation of the {n} dimensions of "
            f"{shape.human_string()} (minor_to_major must list 0..{n - 1} once each)")


def require_sizes(shape, what: str) -> None:
    """Every dimension of ``shape`` must have a known, non-negative size (a
    bounded dynamic dimension counts with its bound)."""
    for d, (size, dyn) in enumerate(zip(shape.dimensions, shape.dynamic_dimensions)):
        if dyn and size == UNBOUNDED_SIZE:
            raise InvalidShapeError(
                f"{what} needs a known size for every dimension, but dimension {d} of "
                f"{shape.human_string()} is unbounded ('?')")
        if size < 0:
            raise InvalidShapeError(
                f"{what}: dimension {d} of {shape.human_string()} has negative size {size}")
