"""XLA's ``ShapeUtil`` in Python (``xla/shape_util.h``, ``xla/permutation_util.h``).

Function names are XLA's in snake_case and the results are XLA's, quirks
included; each quirk is named in the function's docstring. Shapes are
immutable here, so XLA functions that modify a shape in place
(``AppendMinorDimension``, ``SetToDefaultLayout``...) return the new shape.
Where XLA would crash (a failed ``CHECK``) or silently compute garbage, these
functions raise an :mod:`xlashape.errors` exception instead.

Every function that takes a shape accepts a :class:`~xlashape.Shape` or HLO
shape text (parsed with :func:`xlashape.parse_shape`).

>>> from xlashape import shape_util
>>> shape_util.byte_strides("f32[3,5,7]")
(140, 28, 4)
>>> shape_util.byte_size_of("s4[3,5]"), shape_util.byte_size_of("s4[3,5]{1,0:E(4)}")
(15, 8)
>>> shape_util.array_size("f32[3,5]{1,0:T(2,2)}")
96
"""

from __future__ import annotations

import numbers
from typing import Callable, Iterable, Optional, Sequence

from . import _validation, layout_util
from ._base import INT64_MAX, as_int, element_bits, int_list
from ._shared import array_shape, as_shape, layout_or_default, linear_index_unchecked
from ._validation import require_permutation, require_sizes
from .errors import InvalidShapeError, ShapeIndexError, ShapeTypeError
from .layout import COMBINE_DIMENSION, Layout
from .primitive_types import PrimitiveType, as_primitive_type
from .shape import UNBOUNDED_SIZE, Shape

__all__ = [
    # construction
    "make_shape", "make_validated_shape", "make_shape_with_dense_layout",
    "make_shape_with_descending_layout", "make_shape_with_static_dimensions",
    "make_static_shape", "make_scalar_shape", "make_tuple_shape", "make_nil",
    "make_maybe_tuple_shape", "make_token_shape", "make_opaque_shape",
    "make_buffer_shape", "make_shape_with_descending_layout_and_same_physical_layout",
    # validation
    "validate_shape", "validate_shape_with_optional_layout",
    # sizes
    "elements_in", "elements_in_recursive", "element_size_in_bits",
    "byte_size_of", "byte_size_of_tuple_index_table", "byte_size_of_elements",
    "byte_size_of_elements_recursive", "byte_size_of_primitive_type",
    "array_size", "array_data_size", "byte_strides", "unpacked_byte_strides",
    # predicates
    "true_num_dimensions", "is_effective_scalar", "is_scalar", "is_zero_element_array",
    "has_degenerate_dimensions", "is_empty_tuple", "is_nested_tuple",
    "tuple_element_count", "has_primitive_type", "element_is_integral",
    "element_is_floating", "element_is_complex", "element_is_signed",
    "element_has_bit_width", "same_rank", "same_dimensions", "same_element_type",
    "same_element_type_ignoring_fp_precision", "last_dim_is_minor_most",
    "is_effectively_most_major_dimension", "device_shape_is_host_shape",
    # equality
    "equal", "equal_ignoring_element_type", "equal_ignoring_fp_precision",
    "compatible", "compatible_ignoring_element_type",
    "compatible_ignoring_fp_precision", "compatible_kind", "equal_structure",
    # transformations
    "get_dimension", "get_dimension_number", "change_element_type",
    "permute_dimensions", "permute_dimensions_ignoring_layout",
    "reorder_logical_dimensions", "delete_dimension", "delete_dimensions",
    "drop_degenerate_dimensions", "filter_dimensions", "prepend_major_dimension",
    "append_minor_dimension", "append_major_dimension", "insert_dimension_at_index",
    "insert_dimensions_at_index", "move_dim_to_major", "set_to_default_layout",
    "get_with_default_layout", "clear_layout", "device_shape_to_host_shape",
    "get_subshape", "get_leaf_count", "flatten_tuple_shape",
    "transpose_is_bitcast", "reshape_is_bitcast",
    "deduce_transpose_dimensions_for_bitcast",
    # text
    "human_string", "human_string_with_layout",
    # permutations (xla/permutation_util.h)
    "is_permutation", "permute", "inverse_permutation", "compose_permutations",
    "is_identity_permutation",
]

P = PrimitiveType


def _type_name(t: PrimitiveType) -> str:
    """``PrimitiveType_Name``: the proto enum name (``F32``, ``TUPLE``...)."""
    return t.name


def _bool_list(values, what: str) -> list:
    if isinstance(values, (str, bytes)) or not isinstance(values, Iterable):
        raise ShapeTypeError(f"{what} must be a sequence of bools, got {type(values).__name__}")
    out = []
    for v in values:
        if not isinstance(v, (bool, numbers.Integral)):
            raise ShapeTypeError(f"{what} entries must be bools, got {type(v).__name__}")
        out.append(bool(v))
    return out


def _is_valid_dimension_size(size: int, is_dynamic: bool) -> bool:
    return size >= 0 or (is_dynamic and size == UNBOUNDED_SIZE)


# =============================================================================
# Permutations (xla/permutation_util.h)
# =============================================================================
def is_permutation(permutation: Sequence[int]) -> bool:
    """True if ``permutation`` holds each of ``0..n-1`` exactly once.

    >>> is_permutation([2, 0, 1]), is_permutation([0, 0])
    (True, False)
    """
    p = int_list(permutation, "permutation")
    return sorted(p) == list(range(len(p)))


def _check_permutation(permutation, n: Optional[int] = None) -> list:
    p = int_list(permutation, "permutation")
    if sorted(p) != list(range(len(p))):
        raise InvalidShapeError(f"{p} is not a permutation of 0..{len(p) - 1}")
    if n is not None and len(p) != n:
        raise InvalidShapeError(f"permutation {p} has {len(p)} entries, expected {n}")
    return p


def permute(values: Sequence, permutation: Sequence[int]) -> tuple:
    """``Permute(v, p)[i] = v[p[i]]``.

    >>> permute("abc", [2, 0, 1])
    ('c', 'a', 'b')
    """
    values = list(values)
    p = _check_permutation(permutation, len(values))
    return tuple(values[i] for i in p)


def inverse_permutation(permutation: Sequence[int]) -> tuple:
    """``InversePermutation(p)[p[i]] = i``.

    >>> inverse_permutation([2, 0, 1])
    (1, 2, 0)
    """
    p = _check_permutation(permutation)
    out = [0] * len(p)
    for i, v in enumerate(p):
        out[v] = i
    return tuple(out)


def compose_permutations(p1: Sequence[int], p2: Sequence[int]) -> tuple:
    """``ComposePermutations(p1, p2)[i] = p1[p2[i]]`` (apply ``p2`` after ``p1``).

    >>> compose_permutations([2, 0, 1], [2, 0, 1])
    (1, 2, 0)
    """
    a = _check_permutation(p1)
    b = _check_permutation(p2, len(a))
    return tuple(a[i] for i in b)


def is_identity_permutation(permutation: Sequence[int]) -> bool:
    """True for ``[0, 1, ..., n-1]``.

    >>> is_identity_permutation([0, 1, 2])
    True
    """
    p = int_list(permutation, "permutation")
    return p == list(range(len(p)))


# =============================================================================
# Construction
# =============================================================================
def _overflowing_product(values: Iterable[int], start: int = 1) -> bool:
    """XLA's OverflowSafeMultiply loop: true once a running product exceeds int64."""
    product = start
    for v in values:
        product *= v
        if product > INT64_MAX:
            return True
    return False


def make_validated_shape(element_type, dimensions: Sequence[int] = (),
                         dynamic_dimensions: Optional[Sequence[bool]] = None) -> Shape:
    """``ShapeUtil::MakeValidatedShape``: an array shape with the default layout.

    Without ``dynamic_dimensions``, a dimension is dynamic exactly when it is
    :data:`~xlashape.UNBOUNDED_SIZE` (``?``). Errors, with XLA's wording:

    * ``dynamic dimensions size 1 did not match number of dimensions 2``
    * ``Invalid dimension size -1, is_dynamic=false``
    * ``overflow in static extent product: dimensions=[...].`` (byte width times
      every dimension that is not unbounded must fit in int64)
    * ``Invalid dimensions size 1 for non-array shape of type TOKEN``

    For a non-array type with no dimensions, the bare shape of that type is
    returned (``make_shape("token")`` is a token shape), as in XLA; BUFFER is
    refused (use :func:`make_buffer_shape`).

    >>> str(make_validated_shape("s32", [2, UNBOUNDED_SIZE]))
    's32[2,?]{1,0}'
    """
    et = as_primitive_type(element_type)
    dims = int_list(dimensions, "dimensions")
    if dynamic_dimensions is None:
        dyn = [d == UNBOUNDED_SIZE for d in dims]
    else:
        dyn = _bool_list(dynamic_dimensions, "dynamic_dimensions")
    if len(dyn) != len(dims):
        raise InvalidShapeError(
            f"dynamic dimensions size {len(dyn)} did not match number of dimensions {len(dims)}")
    if not et.is_array_type:
        if dims:
            raise InvalidShapeError(
                f"Invalid dimensions size {len(dims)} for non-array shape of type "
                f"{_type_name(et)}")
        if et is P.TUPLE:
            return Shape.tuple()
        if et is P.BUFFER:
            raise InvalidShapeError(
                "a BUFFER shape wraps an array shape: use make_buffer_shape(array_shape)")
        return Shape(et)
    for d, is_dyn in zip(dims, dyn):
        if not _is_valid_dimension_size(d, is_dyn):
            raise InvalidShapeError(
                f"Invalid dimension size {d}, is_dynamic={'true' if is_dyn else 'false'}")
    if _overflowing_product((d for d in dims if d != UNBOUNDED_SIZE), et.byte_width):
        raise InvalidShapeError(
            f"overflow in static extent product: dimensions=[{', '.join(map(str, dims))}].")
    return Shape(et, dims, layout_util.make_descending_layout(len(dims)), dyn)


def make_shape(element_type, dimensions: Sequence[int] = (),
               dynamic_dimensions: Optional[Sequence[bool]] = None) -> Shape:
    """``ShapeUtil::MakeShape``: an array shape with **the default layout always
    attached** (``{n-1,...,0}``), validated.

    Where XLA's ``MakeShape`` would crash on bad input, this raises
    :class:`~xlashape.InvalidShapeError` with the message of
    :func:`make_validated_shape`.

    >>> str(make_shape("f32", [2, 3]))
    'f32[2,3]{1,0}'
    >>> str(make_shape("f32", [4, 3], [True, False]))
    'f32[<=4,3]{1,0}'
    """
    return make_validated_shape(element_type, dimensions, dynamic_dimensions)


def make_shape_with_dense_layout(element_type, dimensions: Sequence[int],
                                 minor_to_major: Sequence[int], tiles: Sequence = (),
                                 tail_padding_alignment_in_elements: int = 1,
                                 element_size_in_bits: int = 0, memory_space: int = 0,
                                 split_configs: Sequence = ()) -> Shape:
    """``ShapeUtil::MakeShapeWithDenseLayout``: an array shape with this layout,
    fully validated (:func:`validate_shape`).

    Quirk kept from XLA: an ``element_size_in_bits`` equal to the type's
    default width (``byte_width * 8``) is stored as 0, so
    ``make_shape_with_dense_layout("f32", [2], [0], element_size_in_bits=32)``
    prints ``f32[2]{0}`` and is *not* equal to the parsed ``f32[2]{0:E(32)}``.

    Errors (XLA's wording): ``Dimensions size is 2, but layout size is 1.``,
    ``Unsupported element type: TUPLE`` (also TOKEN, OPAQUE_TYPE, and here
    BUFFER and PRIMITIVE_TYPE_INVALID), then those of :func:`make_shape` and
    :func:`validate_shape`. A memory space outside int8 is refused (XLA
    silently truncates it).

    >>> str(make_shape_with_dense_layout("bf16", [16, 256], [1, 0], tiles=[(8, 128), (2, 1)]))
    'bf16[16,256]{1,0:T(8,128)(2,1)}'
    """
    et = as_primitive_type(element_type)
    dims = int_list(dimensions, "dimensions")
    m2m = int_list(minor_to_major, "minor_to_major")
    if len(dims) != len(m2m):
        raise InvalidShapeError(
            f"Dimensions size is {len(dims)}, but layout size is {len(m2m)}.")
    if not et.is_array_type:
        raise InvalidShapeError(f"Unsupported element type: {_type_name(et)}")
    shape = make_validated_shape(et, dims)
    bits = as_int(element_size_in_bits, "element_size_in_bits")
    if bits == et.byte_width * 8:
        bits = 0  # only a non-default width is stored
    layout = layout_util.make_layout(
        m2m, tiles=tiles, tail_padding_alignment_in_elements=tail_padding_alignment_in_elements,
        element_size_in_bits=bits, memory_space=memory_space, split_configs=split_configs)
    shape = shape.with_layout(layout)
    validate_shape(shape)
    return shape


def make_shape_with_descending_layout(element_type, dimensions: Sequence[int]) -> Shape:
    """An array shape with the descending (default, row-major) layout.

    >>> str(make_shape_with_descending_layout("s8", [3, 4]))
    's8[3,4]{1,0}'
    """
    dims = int_list(dimensions, "dimensions")
    return make_shape_with_dense_layout(element_type, dims, list(range(len(dims) - 1, -1, -1)))


def make_shape_with_static_dimensions(shape) -> Shape:
    """``ShapeUtil::MakeShapeWithStaticDimensions``: every dimension marked
    static (sizes unchanged; tuples recurse).

    >>> str(make_shape_with_static_dimensions("f32[<=4,3]"))
    'f32[4,3]{1,0}'
    """
    return as_shape(shape).map_arrays(
        lambda a: a.replace(dynamic_dimensions=[False] * len(a.dimensions)))


def make_static_shape(shape) -> Shape:
    """``ShapeUtil::MakeStaticShape``: like
    :func:`make_shape_with_static_dimensions`, and the layout's ``M(n)``
    (dynamic-shape metadata prefix) is reset to 0.

    >>> str(make_static_shape("f32[<=4]{0:M(8)}"))
    'f32[4]{0}'
    """
    def fix(a: Shape) -> Shape:
        layout = a.layout
        if layout is not None:
            layout = layout.replace(dynamic_shape_metadata_prefix_bytes=0)
        return a.replace(layout=layout, dynamic_dimensions=[False] * len(a.dimensions))

    return as_shape(shape).map_arrays(fix)


def make_scalar_shape(element_type) -> Shape:
    """``MakeScalarShape(t)`` = ``MakeShape(t, {})``.

    >>> str(make_scalar_shape("f32"))
    'f32[]'
    """
    return make_shape(element_type, ())


def _shapes(shapes, what: str) -> list:
    if isinstance(shapes, (str, bytes, Shape)) or not isinstance(shapes, Iterable):
        raise ShapeTypeError(f"{what} must be a sequence of shapes, got {type(shapes).__name__}")
    return [as_shape(s) for s in shapes]


def make_tuple_shape(shapes: Sequence) -> Shape:
    """``ShapeUtil::MakeTupleShape``, validated with layouts optional
    (:func:`validate_shape_with_optional_layout`), as XLA's
    ``MakeValidatedTupleShape``.

    >>> str(make_tuple_shape([make_shape("f32", [2]), make_token_shape()]))
    '(f32[2]{0}, token[])'
    """
    result = Shape.tuple(_shapes(shapes, "shapes"))
    validate_shape_with_optional_layout(result)
    return result


def make_nil() -> Shape:
    """``MakeNil()``: the empty tuple ``()``.

    >>> str(make_nil())
    '()'
    """
    return Shape.tuple()


def make_maybe_tuple_shape(shapes: Sequence) -> Shape:
    """The single shape itself if there is exactly one, else a tuple of them.

    >>> str(make_maybe_tuple_shape([make_shape("f32", [2])]))
    'f32[2]{0}'
    """
    items = _shapes(shapes, "shapes")
    if len(items) == 1:
        return items[0]
    return make_tuple_shape(items)


def make_token_shape() -> Shape:
    """``token[]``.

    >>> str(make_token_shape())
    'token[]'
    """
    return Shape.token()


def make_opaque_shape() -> Shape:
    """``opaque[]``.

    >>> str(make_opaque_shape())
    'opaque[]'
    """
    return Shape.opaque()


def make_buffer_shape(element_shape_or_type, dimensions: Optional[Sequence[int]] = None) -> Shape:
    """``ShapeUtil::MakeValidatedBufferShape``: ``b(<array shape>)``.

    Takes an array shape, or an element type and dimensions (then the inner
    shape is :func:`make_shape`'s). A non-array inner shape fails with XLA's
    ``element_shape must be an array shape to create a buffer shape.``

    >>> str(make_buffer_shape("s32", [4]))
    'b(s32[4]{0})'
    """
    if dimensions is not None:
        inner = make_shape(element_shape_or_type, dimensions)
    else:
        inner = as_shape(element_shape_or_type)
    if not inner.is_array:
        raise InvalidShapeError(
            "element_shape must be an array shape to create a buffer shape.")
    return Shape.buffer(inner)


def make_shape_with_descending_layout_and_same_physical_layout(shape) -> Shape:
    """The same memory, described with a descending layout.

    The dimensions are reordered into physical major-to-minor order and given
    the layout ``{n-1..0}``; dynamic flags move with their dimensions. As in
    XLA, the tiles, ``E(n)``, ``L(n)`` and memory space are kept (the physical
    layout is the same, so they still apply); index/pointer types, split
    configs and ``M(n)`` are dropped. Buffers stay buffers. The legacy
    ``padded_dimensions`` (per logical dimension) are reordered with the
    dimensions, so the padding stays where it was.

    >>> str(make_shape_with_descending_layout_and_same_physical_layout(
    ...     "f32[128,24,4,48,48]{2,4,3,1,0}"))
    'f32[128,24,48,48,4]{4,3,2,1,0}'
    """
    shape = as_shape(shape)
    is_buffer = shape.is_buffer
    if is_buffer:
        shape = shape.buffer_shape
    if not shape.is_array:
        raise InvalidShapeError(
            f"make_shape_with_descending_layout_and_same_physical_layout needs an array "
            f"shape, got {shape.human_string()}")
    n = len(shape.dimensions)
    if shape.layout is not None:
        require_permutation(shape, shape.layout)
        order = list(reversed(shape.layout.minor_to_major))
    else:
        order = list(range(n))
    dims = [shape.dimensions[d] for d in order]
    dyn = [shape.dynamic_dimensions[d] for d in order]
    new = make_shape_with_descending_layout(shape.element_type, dims)
    layout = new.layout
    if shape.layout is not None:
        layout = layout.replace(
            tiles=shape.layout.tiles,
            element_size_in_bits=shape.layout.element_size_in_bits,
            tail_padding_alignment_in_elements=shape.layout.tail_padding_alignment_in_elements,
            memory_space=shape.layout.memory_space)
        if shape.layout.padded_dimensions:  # legacy padding moves with its dimension
            layout = layout.replace(
                padded_dimensions=tuple(shape.layout.padded_dimensions[d] for d in order),
                padding_value=shape.layout.padding_value)
    new = Shape(shape.element_type, dims, layout, dyn)
    return Shape.buffer(new) if is_buffer else new


# =============================================================================
# Validation
# =============================================================================
def validate_shape(shape) -> None:
    """``ShapeUtil::ValidateShape``: raise :class:`~xlashape.InvalidShapeError`
    with XLA's message if the shape is not valid; every array needs a layout.

    Non-layout checks (``Shape Error: <what> Shape(<type>): <shape>``):
    ``Invalid element type.``, ``Negative dimension at index 1: -3.``,
    ``Dimensions overflow.``, then ``Shape f32[...] size may overflow int64_t.``
    Then the layout checks of
    :func:`xlashape.layout_util.validate_layout_for_shape`
    (``shape f32[2,3] does not have a layout``, ``layout minor_to_major field
    contains 3 elements, but shape has 2 dimensions: {0, 1, 2}; shape: f32[2,3]``,
    ...). Parsing validates only tuple elements, as in XLA: ``parse_shape``
    accepts ``f32[8]{0:SC(0:9)}``, which this function refuses, and refuses
    ``(f32[8]{0:SC(0:9)})`` with the same message.

    >>> validate_shape(make_shape("f32", [2, 3]))
    >>> validate_shape(Shape("f32", [2, -3], Layout((1, 0))))
    Traceback (most recent call last):
    ...
    xlashape.errors.InvalidShapeError: Shape Error: Negative dimension at index 1: -3. Shape(f32): f32[2,-3]
    """
    _validation.validate_shape(as_shape(shape), allow_missing_layouts=False)


def validate_shape_with_optional_layout(shape) -> None:
    """``ShapeUtil::ValidateShapeWithOptionalLayout``: like
    :func:`validate_shape`, but arrays may lack a layout.

    >>> validate_shape_with_optional_layout(Shape("f32", [2, 3]))
    """
    _validation.validate_shape(as_shape(shape), allow_missing_layouts=True)


# =============================================================================
# Element counts and sizes
# =============================================================================
def elements_in(shape) -> int:
    """``ShapeUtil::ElementsIn``: the product of the dimensions (1 for a
    scalar, 0 if any dimension is 0). A bounded dynamic dimension counts with
    its bound; an unbounded one is an error (a DCHECK in XLA).

    >>> elements_in("s32[3,0,5]"), elements_in("s32[]"), elements_in("f32[<=4,3]")
    (0, 1, 12)
    """
    shape = array_shape(shape, "elements_in")
    require_sizes(shape, "elements_in")
    n = 1
    for d in shape.dimensions:
        n *= d
    return n


def elements_in_recursive(shape) -> int:
    """``ShapeUtil::ElementsInRecursive``: elements summed over tuple leaves
    (arrays and tuples only).

    >>> elements_in_recursive("(f32[2,3], (s8[4], ()))")
    10
    """
    shape = as_shape(shape)
    if shape.is_tuple:
        return sum(elements_in_recursive(s) for s in shape.tuple_shapes)
    if not (shape.is_array or shape.is_buffer):
        raise InvalidShapeError(
            f"elements_in_recursive needs arrays and tuples, got {shape.human_string()}")
    return elements_in(shape)


def byte_size_of_primitive_type(element_type) -> int:
    """``ShapeUtil::ByteSizeOfPrimitiveType`` = ``ByteWidth``: bytes per
    element *without* packing. **1 for PRED and every sub-byte type.**
    Non-array types are an error (XLA aborts).

    >>> byte_size_of_primitive_type("f32"), byte_size_of_primitive_type("s4")
    (4, 1)
    """
    et = as_primitive_type(element_type)
    if not et.is_array_type:
        raise InvalidShapeError(
            f"{_type_name(et)} primitive type has no definitive size")
    return et.byte_width


def element_size_in_bits(shape) -> int:
    """``ShapeUtil::ElementSizeInBits``: the layout's ``E(n)`` if set and
    non-zero, else ``byte_width * 8`` — so **8 for PRED and sub-byte types**
    unless ``E`` says otherwise.

    >>> element_size_in_bits("s4[8]"), element_size_in_bits("s4[8]{0:E(4)}")
    (8, 4)
    """
    shape = array_shape(shape, "element_size_in_bits")
    return element_bits(shape.element_type, shape.layout)


def _bytes_for(count: int, shape: Shape) -> int:
    return -(-(count * element_bits(shape.element_type, shape.layout)) // 8)


def byte_size_of_elements(shape) -> int:
    """``ShapeUtil::ByteSizeOfElements``: ``ceil(elements * E / 8)`` when the
    layout sets ``E(n)``, else ``elements * byte_width``.

    Quirk kept from XLA (despite its header comment): **tiles, tail padding
    ``L(n)`` and ``M(n)`` are ignored** — this is the unpadded size; see
    :func:`array_size` and :func:`xlashape.tiling.physical_size_in_bytes`.

    >>> byte_size_of_elements("s4[3,5]"), byte_size_of_elements("s4[3,5]{1,0:E(4)}")
    (15, 8)
    """
    shape = array_shape(shape, "byte_size_of_elements")
    return _bytes_for(elements_in(shape), shape)


def byte_size_of_tuple_index_table(shape, pointer_size: int) -> int:
    """Bytes of a tuple's table of element pointers: ``pointer_size * len``.

    >>> byte_size_of_tuple_index_table("(f32[2], s8[], token[])", 8)
    24
    """
    shape = as_shape(shape)
    if not shape.is_tuple:
        raise InvalidShapeError(
            f"byte_size_of_tuple_index_table needs a tuple shape, got {shape.human_string()}")
    pointer_size = as_int(pointer_size, "pointer_size")
    if pointer_size <= 0:
        raise InvalidShapeError(
            f"the size of a tuple ({shape.human_string()}) needs pointer_size > 0, "
            f"got {pointer_size}")
    return pointer_size * len(shape.tuple_shapes)


def byte_size_of(shape, pointer_size: int = -1) -> int:
    """``ShapeUtil::ByteSizeOf(shape, pointer_size=-1)``.

    * array: :func:`byte_size_of_elements` (no tiling padding);
    * buffer: the inner array's :func:`byte_size_of_elements`;
    * tuple: ``pointer_size * len(tuple_shapes)`` — the index table only, not
      the elements (needs ``pointer_size > 0``);
    * token: 0;  opaque: ``pointer_size`` (needs ``pointer_size > 0``).

    >>> byte_size_of("f32[10,20]"), byte_size_of("(f32[2], s8[])", pointer_size=8)
    (800, 16)
    """
    shape = as_shape(shape)
    pointer_size = as_int(pointer_size, "pointer_size")
    if shape.is_tuple:
        return byte_size_of_tuple_index_table(shape, pointer_size)
    if shape.is_buffer:
        return byte_size_of_elements(shape.buffer_shape)
    if shape.is_array:
        return byte_size_of_elements(shape)
    if shape.is_token:
        return 0
    if shape.is_opaque:
        if pointer_size <= 0:
            raise InvalidShapeError(
                f"the size of an opaque shape is pointer_size, which must be > 0, got {pointer_size}")
        return pointer_size
    raise InvalidShapeError(
        f"{_type_name(shape.element_type)} primitive type has no definitive size")


def byte_size_of_elements_recursive(shape) -> int:
    """Bytes of all array elements in the shape (tuples summed, tokens 0).

    >>> byte_size_of_elements_recursive("(f32[100], s8[], token[])")
    401
    """
    shape = as_shape(shape)
    if shape.is_token:
        return 0
    if shape.is_tuple:
        return sum(byte_size_of_elements_recursive(s) for s in shape.tuple_shapes)
    if not (shape.is_array or shape.is_buffer):
        raise InvalidShapeError(
            f"byte_size_of_elements_recursive needs arrays, tuples or tokens, got "
            f"{shape.human_string()}")
    return byte_size_of_elements(shape)


def _round_up_to(value: int, divisor: int) -> int:
    return -(-value // divisor) * divisor


def array_size(shape) -> int:
    """``ShapeUtil::ArraySize``: allocation bytes including **first-tile**
    padding and ``L(n)``.

    XLA's rules and quirks, kept:

    * no tiles: :func:`byte_size_of_elements`, and **``L(n)`` is ignored**
      (``f32[3,5]{1,0:L(16)}`` is 60 bytes, not 64);
    * with tiles, only ``tiles[0]`` is used: each of its dimensions rounds up the
      matching minor-most dimension (a tile longer than the shape counts the
      missing dimensions as 1); **sub-tiles are assumed to add no padding**
      (``f32[3,5]{1,0:T(2,2)(3,1)}`` is 96 bytes here, 144 in the full model of
      :func:`xlashape.tiling.physical_size_in_bytes`);
    * split configs shrink a dimension to its largest piece
      (:func:`xlashape.layout_util.max_split_size`);
    * a ``*`` entry in the first tile uses the matching entry of the second
      tile, or ``max(1, 32 // element_size_in_bits)`` without one (current
      upstream; older XLA computed 0 there);
    * an unbounded dynamic shape returns :data:`~xlashape.UNBOUNDED_SIZE`
      (XLA returns it for tiled shapes; untiled ones would fail a DCHECK).

    A shape without a layout is treated as having the default layout.

    >>> array_size("f32[3,5]{1,0:T(2,2)}"), array_size("f32[3,5]{1,0:L(16)}")
    (96, 60)
    """
    shape = array_shape(shape, "array_size")
    if shape.is_unbounded_dynamic:
        return UNBOUNDED_SIZE
    layout = layout_or_default(shape)
    if not layout.tiles:
        return byte_size_of_elements(shape)
    require_permutation(shape, layout)
    require_sizes(shape, "array_size")
    tiles = layout.tiles
    tile = tiles[0].dimensions
    m2m = layout.minor_to_major
    n = len(shape.dimensions)
    k = len(tile)
    count = 1
    for j in range(k):
        size = layout_util.max_split_size(shape, m2m[j]) if j < n else 1
        t = tile[k - 1 - j]
        if t == COMBINE_DIMENSION:
            if len(tiles) > 1 and j < len(tiles[1]):
                sub = tiles[1].dimensions
                t = sub[len(sub) - 1 - j]
            else:
                t = max(1, 32 // element_size_in_bits(shape))
            if t == COMBINE_DIMENSION:
                raise InvalidShapeError(
                    f"array_size cannot size {shape}: a '*' tile entry whose "
                    "sub-tile entry is also '*'")
        if t <= 0:
            raise InvalidShapeError(f"layout has invalid tiles: {shape.human_string()}")
        count *= _round_up_to(size, t)
    for j in range(k, n):
        count *= layout_util.max_split_size(shape, m2m[j])
    align = layout.tail_padding_alignment_in_elements
    if align != 1:
        count = _round_up_to(count, align)
    return _bytes_for(count, shape.with_layout(layout))


def array_data_size(shape) -> int:
    """``ShapeUtil::ArrayDataSize``: bytes up to and including the last element.

    Computed as XLA does: ``LayoutUtil::LinearIndex`` of ``(d0-1, d1-1, ...)``
    plus one, converted to bytes. So trailing tile padding is excluded while
    padding inside the range counts; the first-tile-only and rank-1 quirks of
    :func:`xlashape.layout_util.linear_index` apply. With a zero dimension the
    ``-1`` index entry drives the sum to ``-1`` and the result to 0 for untiled
    layouts; with tiles, C++'s truncating division and remainder of ``-1`` can
    leave a positive count, which is kept as XLA computes it
    (``f32[0,5]{1,0:T(2,2)}`` gives 28 bytes).
    A shape without a layout is treated as having the default layout.

    >>> array_data_size("s4[64,128]{1,0:E(4)}"), array_data_size("f32[3,5]{1,0:T(2,2)}")
    (4096, 84)
    """
    shape = array_shape(shape, "array_data_size")
    layout = layout_or_default(shape)
    require_permutation(shape, layout)
    require_sizes(shape, "array_data_size")
    idx = [d - 1 for d in shape.dimensions]
    count = linear_index_unchecked(shape, layout, idx) + 1
    return _bytes_for(count, shape.with_layout(layout))


def unpacked_byte_strides(shape) -> Optional[tuple]:
    """``ShapeUtil::UnpackedByteStrides``: byte strides of an untiled array,
    following ``minor_to_major``, the minor-most being ``byte_width``.

    ``E(n)``, tiles and padding are ignored. ``None`` for a shape without a
    layout or that is not an array (XLA returns nullopt).

    >>> unpacked_byte_strides("s4[2,4]{1,0:E(4)}")
    (4, 1)
    """
    shape = as_shape(shape)
    if shape.is_buffer:
        shape = shape.buffer_shape
    if not shape.is_array or shape.layout is None:
        return None
    require_permutation(shape, shape.layout)
    require_sizes(shape, "byte_strides")
    strides = [0] * len(shape.dimensions)
    stride = shape.element_type.byte_width
    for d in shape.layout.minor_to_major:
        strides[d] = stride
        stride *= shape.dimensions[d]
    return tuple(strides)


def byte_strides(shape) -> Optional[tuple]:
    """``ShapeUtil::ByteStrides``: per-dimension byte strides, or ``None``.

    Quirks kept from XLA: **tiles are ignored** (the strides are those of the
    untiled layout) and ``E(n)`` only matters in that an ``E`` that is not a
    whole number of bytes (``E(4)``) gives ``None``; otherwise strides use the
    type's byte width. ``None`` also without a layout. For strides that respect
    tiling, see :attr:`xlashape.tiling.LayoutPlan.strides`.

    >>> byte_strides("f32[3,5,7]"), byte_strides("f16[5,7,9]"), byte_strides("s4[10,20]{1,0:E(4)}")
    ((140, 28, 4), (126, 18, 2), None)
    """
    shape = as_shape(shape)
    if shape.is_buffer:
        shape = shape.buffer_shape
    if shape.is_array and shape.layout is not None and shape.layout.element_size_in_bits % 8:
        return None
    return unpacked_byte_strides(shape)


# =============================================================================
# Predicates
# =============================================================================
def true_num_dimensions(shape) -> int:
    """``ShapeUtil::TrueNumDimensions``: the number of dimensions that are not 1
    (size-0 dimensions count).

    >>> true_num_dimensions("f32[1,3,1,0]")
    2
    """
    shape = array_shape(shape, "true_num_dimensions")
    return sum(1 for d in shape.dimensions if d != 1)


def is_effective_scalar(shape) -> bool:
    """True for an array whose dimensions are all 1 (or a scalar).

    >>> is_effective_scalar("f32[1,1]"), is_effective_scalar("f32[1,2]")
    (True, False)
    """
    shape = as_shape(shape)
    return shape.is_array and true_num_dimensions(shape) == 0


def is_scalar(shape) -> bool:
    """True for a rank-0 array.

    >>> is_scalar("f32[]"), is_scalar("f32[1]")
    (True, False)
    """
    return as_shape(shape).is_scalar


def is_zero_element_array(shape) -> bool:
    """True for an array with a dimension of size 0 (tuples: False).

    >>> is_zero_element_array("s32[3,0,5]"), is_zero_element_array("(s32[0])")
    (True, False)
    """
    shape = as_shape(shape)
    return shape.is_array and 0 in shape.dimensions


def has_degenerate_dimensions(shape) -> bool:
    """True if the array has a dimension of size 1.

    >>> has_degenerate_dimensions("f32[3,1,2]")
    True
    """
    shape = array_shape(shape, "has_degenerate_dimensions")
    return 1 in shape.dimensions


def is_empty_tuple(shape) -> bool:
    """True for the empty tuple ``()`` (``ShapeUtil::IsEmptyTuple``).

    >>> is_empty_tuple("()"), is_empty_tuple("(s32[])")
    (True, False)
    """
    shape = as_shape(shape)
    return shape.is_tuple and not shape.tuple_shapes


def is_nested_tuple(shape) -> bool:
    """True for a tuple with a tuple among its elements.

    >>> is_nested_tuple("(s32[], ())"), is_nested_tuple("(s32[], s32[])")
    (True, False)
    """
    shape = as_shape(shape)
    return shape.is_tuple and any(s.is_tuple for s in shape.tuple_shapes)


def tuple_element_count(shape) -> int:
    """Number of elements of a tuple shape (not recursive).

    >>> tuple_element_count("(f32[2], token[])")
    2
    """
    shape = as_shape(shape)
    if not shape.is_tuple:
        raise InvalidShapeError(f"{shape.human_string()} is not a tuple")
    return len(shape.tuple_shapes)


def has_primitive_type(shape, element_type) -> bool:
    """True if the shape or any tuple element (recursively) has this type.

    >>> has_primitive_type("(s32[], (s16[]))", "s16")
    True
    """
    shape = as_shape(shape)
    et = as_primitive_type(element_type)
    if shape.element_type is et:
        return True
    return shape.is_tuple and any(has_primitive_type(s, et) for s in shape.tuple_shapes)


def element_is_integral(shape) -> bool:
    """True if the element type is a signed or unsigned integer (not PRED).

    >>> element_is_integral("u8[2]"), element_is_integral("f32[2]")
    (True, False)
    """
    return as_shape(shape).element_type.is_integral


def element_is_floating(shape) -> bool:
    """True if the element type is floating point (bf16, f8/f4 included; complex not).

    >>> element_is_floating("bf16[2]")
    True
    """
    return as_shape(shape).element_type.is_floating_point


def element_is_complex(shape) -> bool:
    """True for c64 and c128.

    >>> element_is_complex("c64[2]")
    True
    """
    return as_shape(shape).element_type.is_complex


def element_is_signed(shape) -> bool:
    """Signed integers and floating-point types (as XLA; complex is not).

    >>> element_is_signed("s8[]"), element_is_signed("f32[]"), element_is_signed("c64[]")
    (True, True, False)
    """
    et = as_shape(shape).element_type
    return et.is_signed_integral or et.is_floating_point


def element_has_bit_width(shape, bits: int) -> bool:
    """True for an array whose element type is ``bits`` wide (``BitWidth``: PRED is 1).

    >>> element_has_bit_width("s4[8]", 4)
    True
    """
    shape = as_shape(shape)
    return shape.is_array and shape.element_type.bit_width == as_int(bits, "bits")


def same_rank(lhs, rhs) -> bool:
    """True if both shapes have the same number of dimensions.

    >>> same_rank("f32[1,2]", "s8[3,4]")
    True
    """
    return len(as_shape(lhs).dimensions) == len(as_shape(rhs).dimensions)


def same_dimensions(lhs, rhs) -> bool:
    """Same rank and sizes; an unbounded (``?``) dimension matches any size.

    >>> same_dimensions("f32[?,3]", "s8[7,3]"), same_dimensions("f32[1]", "f32[2]")
    (True, False)
    """
    lhs, rhs = as_shape(lhs), as_shape(rhs)
    if len(lhs.dimensions) != len(rhs.dimensions):
        return False
    for i, (a, b) in enumerate(zip(lhs.dimensions, rhs.dimensions)):
        if lhs.is_unbounded_dynamic_dimension(i) or rhs.is_unbounded_dynamic_dimension(i):
            continue
        if a != b:
            return False
    return True


def same_element_type(lhs, rhs) -> bool:
    """True if both shapes have the same element type.

    >>> same_element_type("f32[2]", "f32[7,7]")
    True
    """
    return as_shape(lhs).element_type is as_shape(rhs).element_type


def same_element_type_ignoring_fp_precision(lhs, rhs) -> bool:
    """Equal element types, or both floating point (complex types are not
    floating point here, as in XLA).

    >>> same_element_type_ignoring_fp_precision("bf16[]", "f32[]")
    True
    """
    a, b = as_shape(lhs).element_type, as_shape(rhs).element_type
    if a.is_floating_point and b.is_floating_point:
        return True
    return a is b


def last_dim_is_minor_most(shape) -> bool:
    """True if the last dimension is minor-most (``m2m[0] == n-1``); true
    without a layout (the default layout is implied).

    >>> last_dim_is_minor_most("s8[5,6]{0,1}")
    False
    """
    shape = array_shape(shape, "last_dim_is_minor_most")
    if shape.layout is None or not shape.dimensions:
        return True
    return shape.layout.minor_to_major[0] == len(shape.dimensions) - 1


def is_effectively_most_major_dimension(shape, dimension: int) -> bool:
    """True if ``dimension`` is the major-most one once leading size-1 major
    dimensions are skipped.

    >>> is_effectively_most_major_dimension("f32[1,1,16,1,279]{4,0,1,2,3}", 2)
    True
    """
    shape = array_shape(shape, "is_effectively_most_major_dimension")
    dimension = as_int(dimension, "dimension")
    layout = layout_or_default(shape)
    require_permutation(shape, layout)
    for d in reversed(layout.minor_to_major):
        if d == dimension:
            return True
        if shape.dimensions[d] != 1:
            return False
    return False


def device_shape_is_host_shape(shape) -> bool:
    """True if no array layout has device-only fields (tiles, a memory space,
    a physical shape, ``E(n)``, ``L(n)``, ``M(n)``).

    >>> device_shape_is_host_shape("f32[8,128]{1,0:T(8,128)}"), device_shape_is_host_shape("f32[8]")
    (False, True)
    """
    shape = as_shape(shape)
    if shape.is_tuple:
        return all(device_shape_is_host_shape(s) for s in shape.tuple_shapes)
    if shape.is_buffer:
        shape = shape.buffer_shape
    lay = shape.layout if shape.is_array else None
    if lay is None:
        return True
    return (not lay.tiles and lay.memory_space == 0 and lay.physical_shape is None
            and lay.element_size_in_bits == 0 and lay.tail_padding_alignment_in_elements == 1
            and lay.dynamic_shape_metadata_prefix_bytes == 0)


# =============================================================================
# Equality and compatibility
# =============================================================================
def _equal(a: Shape, b: Shape, **options) -> bool:
    """XLA's ``Shape::Equal`` functor with its options: :meth:`Shape.equal`,
    which keeps XLA's quirks (buffers compared with the default ``Equal``
    whatever the options; ``ignore_dimensions`` still requires the same rank)."""
    return a.equal(b, **options)


def equal(lhs, rhs) -> bool:
    """``ShapeUtil::Equal``: types, dimensions, dynamic flags and layouts (if
    either side has a layout, both must, and they must be equal).

    >>> equal(make_shape("f32", []), make_shape_with_dense_layout("f32", [], []))
    True
    """
    return _equal(as_shape(lhs), as_shape(rhs))


def equal_ignoring_element_type(lhs, rhs) -> bool:
    """Equal except for element types (layouts still compared).

    >>> equal_ignoring_element_type("f32[4,3]{0,1}", "s32[4,3]{0,1}")
    True
    """
    return _equal(as_shape(lhs), as_shape(rhs), ignore_element_type=True)


def equal_ignoring_fp_precision(lhs, rhs) -> bool:
    """Equal, with any two floating-point element types matching (layouts
    still compared; c64 vs c128 does not match).

    >>> equal_ignoring_fp_precision("f32[4,3]{0,1}", "f16[4,3]{0,1}")
    True
    """
    return _equal(as_shape(lhs), as_shape(rhs), ignore_fp_precision=True)


def compatible(lhs, rhs) -> bool:
    """``ShapeUtil::Compatible``: equal ignoring layouts and dynamic flags; an
    unbounded (``?``) dimension matches any size.

    >>> compatible("f32[3,2]{0,1}", "f32[3,2]{1,0}"), compatible("f32[?]", "f32[7]")
    (True, True)
    """
    return _equal(as_shape(lhs), as_shape(rhs), ignore_layout=True,
                  ignore_dynamic_dimension=True)


def compatible_ignoring_element_type(lhs, rhs) -> bool:
    """:func:`compatible`, also ignoring element types.

    >>> compatible_ignoring_element_type("(pred[4,5], f32[3,2])", "(pred[4,5], s32[3,2])")
    True
    """
    return _equal(as_shape(lhs), as_shape(rhs), ignore_layout=True,
                  ignore_dynamic_dimension=True, ignore_element_type=True)


def compatible_ignoring_fp_precision(lhs, rhs) -> bool:
    """:func:`compatible`, with any two floating-point types matching.

    >>> compatible_ignoring_fp_precision("bf16[3,2]", "f32[3,2]")
    True
    """
    return _equal(as_shape(lhs), as_shape(rhs), ignore_layout=True,
                  ignore_dynamic_dimension=True, ignore_fp_precision=True)


def compatible_kind(lhs, rhs, ignore_buffer: bool = False) -> bool:
    """``ShapeUtil::CompatibleKind``: same kind, tuple structure and ranks,
    ignoring element types, dimension sizes and layouts.

    Quirk kept from XLA: buffers are compared with full equality even here
    (with ``ignore_buffer``, a buffer's inner array must *equal* the other
    side), because ``Shape::Equal`` drops its options for buffers.

    >>> compatible_kind("(f32[1])", "(s8[7])"), compatible_kind("f32[1]", "f32[1,1]")
    (True, False)
    """
    return _equal(as_shape(lhs), as_shape(rhs), ignore_layout=True,
                  ignore_dynamic_dimension=True, ignore_element_type=True,
                  ignore_dimensions=True, ignore_buffer=bool(ignore_buffer))


def equal_structure(lhs, rhs) -> bool:
    """Same tuple tree (every tuple index valid in both), leaves ignored.

    >>> equal_structure("(f32[1], ())", "(token[], ())")
    True
    """
    lhs, rhs = as_shape(lhs), as_shape(rhs)
    if lhs.is_tuple != rhs.is_tuple:
        return False
    if not lhs.is_tuple:
        return True
    return (len(lhs.tuple_shapes) == len(rhs.tuple_shapes)
            and all(equal_structure(a, b) for a, b in zip(lhs.tuple_shapes, rhs.tuple_shapes)))


# =============================================================================
# Dimension access and transformations
# =============================================================================
def get_dimension_number(shape, dimension_number: int) -> int:
    """``ShapeUtil::GetDimensionNumber``: a negative number counts from the end.
    Out of range raises :class:`~xlashape.ShapeIndexError` (XLA CHECKs
    ``dimension_number >= 0``).

    >>> get_dimension_number("f32[2,3]", -1)
    1
    """
    shape = array_shape(shape, "get_dimension_number")
    i = as_int(dimension_number, "dimension_number")
    n = len(shape.dimensions)
    j = i + n if i < 0 else i
    if not 0 <= j < n:
        raise ShapeIndexError(
            f"dimension {i} is out of range for {shape.human_string()} with {n} dimensions")
    return j


def get_dimension(shape, dimension_number: int) -> int:
    """``ShapeUtil::GetDimension``: size of a dimension, negative numbers
    counting from the end.

    >>> get_dimension("f32[1,2,3,4]", -1)
    4
    """
    shape = array_shape(shape, "get_dimension")
    return shape.dimensions[get_dimension_number(shape, dimension_number)]


def change_element_type(shape, element_type) -> Shape:
    """``ShapeUtil::ChangeElementType``: the same shape with another element
    type (tuples recurse).

    Quirk kept from XLA: the layout is kept, but ``E(n)`` is reset to 0 unless
    the new type is a sub-byte non-PRED type (``s4[64]{0:E(4)}`` to ``u4``
    keeps ``E(4)``, to ``pred`` or ``u8`` drops it).

    >>> str(change_element_type("s4[64,128]{1,0:E(4)}", "u4"))
    'u4[64,128]{1,0:E(4)}'
    """
    shape = as_shape(shape)
    et = as_primitive_type(element_type)
    if shape.is_tuple:
        return Shape.tuple([change_element_type(s, et) for s in shape.tuple_shapes])
    if shape.is_buffer:
        return Shape.buffer(change_element_type(shape.buffer_shape, et))
    if not shape.is_array or not et.is_array_type:
        raise InvalidShapeError(
            f"change_element_type works on arrays and array types; got "
            f"{shape.human_string()} -> {_type_name(et)}")
    layout = shape.layout
    if layout is not None and not et.is_sub_byte:
        layout = layout.replace(element_size_in_bits=0)
    return Shape(et, shape.dimensions, layout, shape.dynamic_dimensions)


def permute_dimensions_ignoring_layout(permutation: Sequence[int], shape) -> Shape:
    """Dimensions (and dynamic flags) permuted: ``new[i] = old[permutation[i]]``;
    the layout is kept exactly as it was.

    >>> str(permute_dimensions_ignoring_layout([1, 2, 0], "f32[10,100,1000]{2,1,0}"))
    'f32[100,1000,10]{2,1,0}'
    """
    shape = array_shape(shape, "permute_dimensions")
    p = _check_permutation(permutation, len(shape.dimensions))
    dims = [shape.dimensions[i] for i in p]
    dyn = [shape.dynamic_dimensions[i] for i in p]
    return Shape(shape.element_type, dims, shape.layout, dyn)


def permute_dimensions(permutation: Sequence[int], shape) -> Shape:
    """``ShapeUtil::PermuteDimensions``: ``new[i] = old[permutation[i]]``, with
    a layout chosen so the transpose is a bitcast (same physical order):
    ``new_m2m[i] = inverse(permutation)[old_m2m[i]]``. Tiles and the other
    layout fields are kept unchanged, except the legacy
    ``padded_dimensions`` (one per logical dimension), which are permuted
    with the dimensions they pad.

    >>> str(permute_dimensions([1, 0], "f32[2,3]{1,0}"))
    'f32[3,2]{0,1}'
    """
    new = permute_dimensions_ignoring_layout(permutation, shape)
    if new.layout is None:
        return new
    inv = inverse_permutation(permutation)
    old = new.layout.minor_to_major
    if sorted(old) != list(range(len(inv))):
        raise InvalidShapeError(
            f"layout {new.layout} is not a permutation of 0..{len(inv) - 1}")
    changes = {"minor_to_major": tuple(inv[d] for d in old)}
    pd = new.layout.padded_dimensions
    if pd:  # legacy per-dimension padding moves with its dimension
        changes["padded_dimensions"] = tuple(pd[i] for i in _check_permutation(permutation))
    return new.with_layout(new.layout.replace(**changes))


def reorder_logical_dimensions(shape, permutation: Sequence[int]) -> Shape:
    """``ShapeUtil::ReorderLogicalDimensions``: the same as
    :func:`permute_dimensions`, with XLA's argument order.

    >>> str(reorder_logical_dimensions("f32[16,3,12,17]{1,2,0,3}", [0, 2, 1, 3]))
    'f32[16,12,3,17]{2,1,0,3}'
    """
    return permute_dimensions(permutation, shape)


def _delete_dims(shape: Shape, dims: list) -> Shape:
    n = len(shape.dimensions)
    for d in dims:
        if not 0 <= d < n:
            raise ShapeIndexError(
                f"dimension {d} is out of range for {shape.human_string()} with {n} dimensions")
    if len(set(dims)) != len(dims):
        raise InvalidShapeError(f"dimensions to delete {dims} contain duplicates")
    gone = set(dims)
    keep = [i for i in range(n) if i not in gone]
    layout = shape.layout
    if layout is not None:
        require_permutation(shape, layout)
        for d in sorted(dims, reverse=True):
            layout = layout_util.delete_dimension(layout, d)
    return Shape(shape.element_type, [shape.dimensions[i] for i in keep], layout,
                 [shape.dynamic_dimensions[i] for i in keep])


def delete_dimension(dim_to_delete: int, shape) -> Shape:
    """``ShapeUtil::DeleteDimension``: remove one dimension (and its dynamic
    flag); the layout renumbers as :func:`xlashape.layout_util.delete_dimension`
    (tiles untouched).

    >>> str(delete_dimension(1, "f32[5,3,2]{2,0,1}"))
    'f32[5,2]{1,0}'
    """
    shape = array_shape(shape, "delete_dimension")
    return _delete_dims(shape, [as_int(dim_to_delete, "dimension")])


def delete_dimensions(dims_to_delete: Sequence[int], shape) -> Shape:
    """``ShapeUtil::DeleteDimensions``: remove several dimensions (any order).

    >>> str(delete_dimensions([3, 2, 1], "f32[5,3,2,7,9]{2,0,1,4,3}"))
    'f32[5,9]{0,1}'
    """
    shape = array_shape(shape, "delete_dimensions")
    return _delete_dims(shape, int_list(dims_to_delete, "dims_to_delete"))


def filter_dimensions(predicate: Callable[[int], bool], shape) -> Shape:
    """``ShapeUtil::FilterDimensions``: keep the dimensions ``i`` for which
    ``predicate(i)`` is true.

    >>> str(filter_dimensions(lambda i: i != 1, "f32[2,3,4]"))
    'f32[2,4]{1,0}'
    """
    shape = array_shape(shape, "filter_dimensions")
    if not callable(predicate):
        raise ShapeTypeError(f"predicate must be callable, got {type(predicate).__name__}")
    return _delete_dims(shape, [i for i in range(len(shape.dimensions)) if not predicate(i)])


def drop_degenerate_dimensions(shape) -> Shape:
    """``ShapeUtil::DropDegenerateDimensions``: remove every size-1 dimension.

    >>> str(drop_degenerate_dimensions("f32[1,3,1,2]{0,1,2,3}"))
    'f32[3,2]{0,1}'
    """
    shape = array_shape(shape, "drop_degenerate_dimensions")
    return _delete_dims(shape, [i for i, d in enumerate(shape.dimensions) if d == 1])


def _bound(bound) -> int:
    b = as_int(bound, "bound")
    if b < 0:
        raise InvalidShapeError(f"Invalid dimension size {b}, is_dynamic=false")
    return b


def prepend_major_dimension(bound: int, shape) -> Shape:
    """``ShapeUtil::PrependMajorDimension``: a new dimension 0 of size
    ``bound``, major-most (``m2m = [d+1 for d in old] + [0]``).

    Quirk kept from XLA: it builds a fresh shape, so **only ``minor_to_major``
    of the layout survives** (tiles, memory space etc. are dropped). Unlike
    XLA, the dynamic flags of the old dimensions are kept (XLA drops them,
    which would turn ``?`` into an invalid static size).

    >>> str(prepend_major_dimension(40, "f32[10,20,30]{0,2,1}"))
    'f32[40,10,20,30]{1,3,2,0}'
    """
    shape = array_shape(shape, "prepend_major_dimension")
    b = _bound(bound)
    layout = None
    if shape.layout is not None:
        layout = Layout(tuple(d + 1 for d in shape.layout.minor_to_major) + (0,))
    return Shape(shape.element_type, (b,) + shape.dimensions, layout,
                 (False,) + shape.dynamic_dimensions)


def append_minor_dimension(bound: int, shape) -> Shape:
    """``ShapeUtil::AppendMinorDimension``: a new last dimension of size
    ``bound``, minor-most; the rest of the layout is kept.

    >>> str(append_minor_dimension(40, "f32[10,20,30]{0,2,1}"))
    'f32[10,20,30,40]{3,0,2,1}'
    """
    shape = array_shape(shape, "append_minor_dimension")
    b = _bound(bound)
    layout = shape.layout
    n = len(shape.dimensions)
    if layout is not None:
        layout = _grow_padding(layout, (n,) + layout.minor_to_major)
    return Shape(shape.element_type, shape.dimensions + (b,), layout,
                 shape.dynamic_dimensions + (False,))


def append_major_dimension(bound: int, shape) -> Shape:
    """``ShapeUtil::AppendMajorDimension``: a new last dimension of size
    ``bound`` that is major-most in the layout; the rest of the layout is kept.

    >>> str(append_major_dimension(40, "f32[10,20]{1,0}"))
    'f32[10,20,40]{1,0,2}'
    """
    shape = array_shape(shape, "append_major_dimension")
    b = _bound(bound)
    layout = shape.layout
    n = len(shape.dimensions)
    if layout is not None:
        layout = _grow_padding(layout, layout.minor_to_major + (n,))
    return Shape(shape.element_type, shape.dimensions + (b,), layout,
                 shape.dynamic_dimensions + (False,))


def _grow_padding(layout: Layout, m2m: tuple) -> Layout:
    """``layout`` with a new ``minor_to_major``; the legacy padded_dimensions
    (one entry per dimension) are dropped if present, since the new dimension
    has no padding width."""
    if layout.padded_dimensions:
        return layout.replace(minor_to_major=m2m, padded_dimensions=())
    return layout.replace(minor_to_major=m2m)


def insert_dimensions_at_index(shape, dim_idx: int, bounds: Sequence[int]) -> Shape:
    """``ShapeUtil::InsertDimensionsAtIndex``: new dimensions at logical
    position ``dim_idx``; old dimensions from ``dim_idx`` on shift up.

    In the layout the new dimensions sit right next-major to the old dimension
    ``dim_idx`` (in row-major order among themselves); with ``dim_idx == rank``
    they become the minor-most. Quirk kept from XLA: a fresh shape is built,
    so **only ``minor_to_major`` of the layout survives**. Unlike XLA, the old
    dimensions' dynamic flags are kept.

    >>> str(insert_dimensions_at_index("f32[10,20,30]{0,2,1}", 1, [40, 50]))
    'f32[10,40,50,20,30]{0,4,3,2,1}'
    """
    shape = array_shape(shape, "insert_dimensions_at_index")
    n = len(shape.dimensions)
    i = as_int(dim_idx, "dim_idx")
    if not 0 <= i <= n:
        raise ShapeIndexError(f"dim_idx {i} is out of range 0..{n} for {shape.human_string()}")
    new = [_bound(b) for b in int_list(bounds, "bounds")]
    k = len(new)
    dims = shape.dimensions[:i] + tuple(new) + shape.dimensions[i:]
    dyn = shape.dynamic_dimensions[:i] + (False,) * k + shape.dynamic_dimensions[i:]
    layout = None
    if shape.layout is not None:
        require_permutation(shape, shape.layout)
        inserted = [i + j for j in range(k - 1, -1, -1)]
        m2m = []
        if i == n:
            m2m.extend(inserted)
        for d in shape.layout.minor_to_major:
            m2m.append(d + k if d >= i else d)
            if d == i:
                m2m.extend(inserted)
        layout = Layout(tuple(m2m))
    return Shape(shape.element_type, dims, layout, dyn)


def insert_dimension_at_index(shape, dim_idx: int, bound: int) -> Shape:
    """``ShapeUtil::InsertDimensionAtIndex``: one new dimension (see
    :func:`insert_dimensions_at_index`).

    >>> str(insert_dimension_at_index("f32[10,20,30]{2,1,0}", 1, 40))
    'f32[10,40,20,30]{3,2,1,0}'
    """
    return insert_dimensions_at_index(shape, dim_idx, [bound])


def move_dim_to_major(shape, dim: int) -> Shape:
    """``ShapeUtil::MoveDimToMajor``: ``dim`` becomes major-most in the layout
    (tuples recurse; a missing layout is first set to the default).

    Quirk kept from XLA: the result's layout is rebuilt from
    ``minor_to_major`` alone, so **tiles, memory space and every other layout
    field are dropped**, even when ``dim`` was already major-most
    (:func:`xlashape.layout_util.move_dim_to_major` keeps them).

    >>> str(move_dim_to_major("f32[10,10,10]{0,2,1}", 0))
    'f32[10,10,10]{2,1,0}'
    """
    shape = as_shape(shape)
    if shape.is_tuple:
        return Shape.tuple([move_dim_to_major(s, dim) for s in shape.tuple_shapes])
    shape = array_shape(shape, "move_dim_to_major")
    dim = as_int(dim, "dimension")
    layout = layout_or_default(shape)
    m2m = [d for d in layout.minor_to_major if d != dim]
    if len(m2m) == len(layout.minor_to_major):
        raise ShapeIndexError(f"dimension {dim} is not in layout {layout}")
    return shape.with_layout(Layout(tuple(m2m) + (dim,)))


def set_to_default_layout(shape) -> Shape:
    """See :func:`xlashape.layout_util.set_to_default_layout`.

    >>> str(set_to_default_layout("f32[2,3]{0,1}"))
    'f32[2,3]{1,0}'
    """
    return layout_util.set_to_default_layout(shape)


get_with_default_layout = set_to_default_layout


def clear_layout(shape) -> Shape:
    """See :func:`xlashape.layout_util.clear_layout`.

    >>> clear_layout("f32[2,3]{0,1}").layout is None
    True
    """
    return layout_util.clear_layout(shape)


def device_shape_to_host_shape(shape) -> Shape:
    """``ShapeUtil::DeviceShapeToHostShape``: every array layout stripped of
    tiles, memory space, physical shape, ``E(n)``, ``L(n)`` and ``M(n)``
    (``minor_to_major`` is kept).

    >>> str(device_shape_to_host_shape("s4[64,128]{1,0:T(8,128)E(4)S(1)}"))
    's4[64,128]{1,0}'
    """
    def strip(a: Shape) -> Shape:
        if a.layout is None:
            return a
        return a.with_layout(a.layout.replace(
            tiles=(), memory_space=0, physical_shape=None, element_size_in_bits=0,
            tail_padding_alignment_in_elements=1, dynamic_shape_metadata_prefix_bytes=0))

    return as_shape(shape).map_arrays(strip)


def get_subshape(shape, index: Sequence[int]) -> Shape:
    """``ShapeUtil::GetSubshape``: follow a tuple index (``()`` = the shape).

    >>> str(get_subshape("(f32[2], (s8[], token[]))", [1, 0]))
    's8[]'
    """
    shape = as_shape(shape)
    path = int_list(index, "shape index")
    cur = shape
    for depth, i in enumerate(path):
        if not cur.is_tuple or not 0 <= i < len(cur.tuple_shapes):
            raise ShapeIndexError(
                f"Shape index {{{','.join(map(str, path))}}} not a valid subshape index "
                f"for tuple with shape {shape}")
        cur = cur.tuple_shapes[i]
    return cur


def get_leaf_count(shape) -> int:
    """Number of non-tuple leaves (1 for a non-tuple; 0 for ``()``).

    >>> get_leaf_count("(f32[2], (s8[], token[]), ())")
    3
    """
    shape = as_shape(shape)
    if not shape.is_tuple:
        return 1
    return sum(get_leaf_count(s) for s in shape.tuple_shapes)


def flatten_tuple_shape(shape) -> list:
    """The non-tuple leaves, depth first (``ShapeUtil::FlattenTupleShape``).

    >>> [str(s) for s in flatten_tuple_shape("(f32[2], (s8[], ()))")]
    ['f32[2]{0}', 's8[]']
    """
    shape = as_shape(shape)
    if not shape.is_tuple:
        return [shape]
    out = []
    for s in shape.tuple_shapes:
        out.extend(flatten_tuple_shape(s))
    return out


def _layout_required(shape, what: str) -> Shape:
    shape = array_shape(shape, what)
    if shape.layout is None:
        raise InvalidShapeError(f"{what} needs shapes with layouts; {shape} has none")
    require_permutation(shape, shape.layout)
    return shape


def transpose_is_bitcast(input_shape, output_shape, dimension_mapping: Sequence[int],
                         ignore_element_type: bool = False) -> bool:
    """``ShapeUtil::TransposeIsBitcast``: true if transposing ``input_shape``
    by ``dimension_mapping`` into ``output_shape`` moves no byte, i.e.
    ``compose(dimension_mapping, output_m2m) == input_m2m``. Only
    ``minor_to_major`` is looked at (tiles are ignored, as in XLA).

    >>> transpose_is_bitcast("f32[10,5]{1,0}", "f32[5,10]{0,1}", [1, 0])
    True
    """
    a = _layout_required(input_shape, "transpose_is_bitcast")
    b = _layout_required(output_shape, "transpose_is_bitcast")
    if not ignore_element_type and a.element_type is not b.element_type:
        return False
    mapping = _check_permutation(dimension_mapping, len(b.dimensions))
    if len(a.dimensions) != len(b.dimensions):
        return False
    return compose_permutations(mapping, b.layout.minor_to_major) == a.layout.minor_to_major


def _m2m_linear(shape: Shape, index: Sequence[int]) -> int:
    lin = 0
    scale = 1
    for d in shape.layout.minor_to_major:
        lin += index[d] * scale
        scale *= shape.dimensions[d]
    return lin


def _row_major_unravel(dims: Sequence[int], linear: int) -> list:
    out = [0] * len(dims)
    for d in range(len(dims) - 1, -1, -1):
        out[d] = linear % dims[d]
        linear //= dims[d]
    return out


def reshape_is_bitcast(input_shape, output_shape, ignore_element_type: bool = False) -> bool:
    """``ShapeUtil::ReshapeIsBitcast``: true if reshaping ``input_shape`` to
    ``output_shape`` (row-major logical order) moves no element in memory.

    As XLA, it checks that every unit index (one dimension at 1, the others
    at 0) lands on the same physical offset both ways; layouts are read as
    ``minor_to_major`` only (tiles ignored).

    >>> reshape_is_bitcast("f32[3,2,2]{1,0,2}", "f32[6,2]{0,1}")
    True
    """
    a = _layout_required(input_shape, "reshape_is_bitcast")
    b = _layout_required(output_shape, "reshape_is_bitcast")
    require_sizes(a, "reshape_is_bitcast")
    require_sizes(b, "reshape_is_bitcast")
    if not ignore_element_type and a.element_type is not b.element_type:
        return False
    if elements_in(a) != elements_in(b):
        return False
    if elements_in(a) == 0:
        return True

    def check(src: Shape, dst: Shape) -> bool:
        for d, size in enumerate(src.dimensions):
            if size <= 1:
                continue
            unit = [0] * len(src.dimensions)
            unit[d] = 1
            logical = 0
            for i, s in zip(unit, src.dimensions):
                logical = logical * s + i
            out_index = _row_major_unravel(dst.dimensions, logical)
            if _m2m_linear(src, unit) != _m2m_linear(dst, out_index):
                return False
        return True

    return check(a, b) and check(b, a)


def deduce_transpose_dimensions_for_bitcast(input_shape, output_shape) -> Optional[tuple]:
    """``ShapeUtil::DeduceTransposeDimensionsForBitcast``: the permutation that
    makes ``output_shape`` a bitcast transpose of ``input_shape``, or None.

    >>> deduce_transpose_dimensions_for_bitcast("f32[5,3]{1,0}", "f32[3,5]{0,1}")
    (1, 0)
    """
    a = _layout_required(input_shape, "deduce_transpose_dimensions_for_bitcast")
    b = _layout_required(output_shape, "deduce_transpose_dimensions_for_bitcast")
    if len(a.dimensions) != len(b.dimensions):
        return None
    perm = compose_permutations(a.layout.minor_to_major,
                                inverse_permutation(b.layout.minor_to_major))
    if tuple(a.dimensions[i] for i in perm) != b.dimensions:
        return None
    return perm


# =============================================================================
# Text
# =============================================================================
def human_string(shape) -> str:
    """``ShapeUtil::HumanString``: the shape without layouts (``f32[2,3]``).

    >>> human_string("f32[2,3]{0,1}")
    'f32[2,3]'
    """
    return as_shape(shape).human_string()


def human_string_with_layout(shape) -> str:
    """``ShapeUtil::HumanStringWithLayout``: the shape with layouts, as XLA
    prints it (``f32[2,3]{0,1}``; a scalar's ``{}`` is omitted).

    >>> human_string_with_layout("f32[2,3]{0,1}")
    'f32[2,3]{0,1}'
    """
    return as_shape(shape).to_string(True)
