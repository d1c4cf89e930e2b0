"""ValidateShape / ValidateShapeWithOptionalLayout / ValidateLayoutForShape:
every message of spec §6, verbatim (XLA's wording), plus what is *not* validated.

Shapes are built with the constructors (the Shape constructor type-checks but
does not validate, like XLA's Shape class), not with the HLO parser.
"""

import re

import pytest

from xlashape import (
    InvalidShapeError,
    Layout,
    PrimitiveType,
    Shape,
    ShapeTypeError,
    SplitConfig,
    Tile,
    UNBOUNDED_SIZE,
)
from xlashape import layout_util as lu
from xlashape import shape_util as su


def arr(et, dims, m2m=None, dyn=None, **layout_kw):
    if m2m is None:
        m2m = tuple(range(len(dims) - 1, -1, -1))
    return Shape(et, dims, Layout(m2m, **layout_kw), dyn)


def raises_exactly(message):
    return pytest.raises(InvalidShapeError, match="^" + re.escape(message) + "$")


# -- valid shapes ----------------------------------------------------------------------
@pytest.mark.parametrize("shape", [
    arr("f32", (2, 3)),
    arr("f32", ()),
    arr("f32", (0, 3), (0, 1)),
    arr("bf16", (16, 256), tiles=[(8, 128), (2, 1)], memory_space=1),
    arr("s4", (64, 128), element_size_in_bits=4),
    arr("f32", (4, 3), dyn=(True, False)),
    arr("f32", (UNBOUNDED_SIZE, 3)),
    Shape.token(),
    Shape.opaque(),
    Shape.tuple(),
    Shape.tuple([arr("f32", (2,)), Shape.token(), Shape.tuple([arr("s8", ())])]),
    Shape.buffer(arr("s32", (4,))),
])
def test_valid_shapes_pass(shape):
    assert su.validate_shape(shape) is None
    assert su.validate_shape_with_optional_layout(shape) is None


# -- not validated (spec §6.2 "Not validated") ---------------------------------------
@pytest.mark.parametrize("layout", [
    Layout((1, 0), memory_space=-3),
    Layout((1, 0), split_configs=[SplitConfig(1, (100, 200)), SplitConfig(0, (4,))]),
    Layout((1, 0), tiles=[Tile(8, 8, 8, 128)]),           # tile longer than the shape
    Layout((1, 0), element_size_in_bits=4),                # narrower than f32
    Layout((1, 0), dynamic_shape_metadata_prefix_bytes=-5),
    Layout((1, 0), tiles=[Tile("*", 128)]),
])
def test_not_validated(layout):
    su.validate_shape(Shape("f32", (8, 256), layout))


def test_split_configs_are_validated():
    # XLA's parser refuses these in tuple elements (tests/test_validation_table.py
    # has the whole table with XLA's verdicts).
    with raises_exactly("split config dimension 7 is out of range for 2 dimensions: f32[8,256]"):
        su.validate_shape(Shape("f32", (8, 256), Layout((1, 0), split_configs=[
            SplitConfig(7, (100, 2))])))
    with raises_exactly("split indices [100, 2] must increase strictly within (0, 256): "
                        "f32[8,256]"):
        su.validate_shape(Shape("f32", (8, 256), Layout((1, 0), split_configs=[
            SplitConfig(1, (100, 2))])))


# -- non-layout checks (spec §6.1) -----------------------------------------------------
def test_invalid_element_type():
    with raises_exactly("Shape Error: Invalid element type. "
                        "Shape(primitive_type_invalid): primitive_type_invalid[]"):
        su.validate_shape(Shape(PrimitiveType.PRIMITIVE_TYPE_INVALID))
    # ... also inside a tuple, and with layouts optional.
    with pytest.raises(InvalidShapeError, match="Invalid element type"):
        su.validate_shape_with_optional_layout(
            Shape.tuple([arr("f32", (1,)), Shape(PrimitiveType.PRIMITIVE_TYPE_INVALID)]))


def test_negative_dimension():
    with raises_exactly("Shape Error: Negative dimension at index 1: -3. Shape(f32): f32[2,-3]"):
        su.validate_shape(arr("f32", (2, -3)))
    # A bounded dynamic dim with a negative bound other than INT64_MIN.
    with raises_exactly("Shape Error: Negative dimension at index 0: -2. Shape(s8): s8[<=-2]"):
        su.validate_shape_with_optional_layout(Shape("s8", (-2,), None, (True,)))
    # In a buffer.
    with pytest.raises(InvalidShapeError, match="Negative dimension at index 0: -1"):
        su.validate_shape(Shape.buffer(arr("s32", (-1,))))


def test_dimensions_overflow():
    with raises_exactly("Shape Error: Dimensions overflow. Shape(u8): u8[4611686018427387904,4]"):
        su.validate_shape(arr("u8", (2**62, 4)))
    # Once a zero has made the product 0 it can no longer overflow ...
    su.validate_shape(arr("u8", (0, 2**62, 4)))
    # ... but an overflow before the zero is still reported (XLA's sticky flag).
    with pytest.raises(InvalidShapeError, match="Dimensions overflow"):
        su.validate_shape(arr("u8", (2**62, 4, 0)))


def test_size_may_overflow():
    # 2**61 elements fit, 2**61 * 4 bytes do not.
    with raises_exactly("Shape f32[2305843009213693952] size may overflow int64_t."):
        su.validate_shape(arr("f32", (2**61,)))
    su.validate_shape(arr("u8", (2**61,)))
    # Unbounded dims are skipped.
    su.validate_shape(arr("f32", (UNBOUNDED_SIZE, 2**60)))


# -- layout checks (spec §6.2), in XLA's order -------------------------------------------
def test_missing_layout():
    # ValidateLayout_MissingArrayLayout
    shape = Shape("f32", (2, 3))
    with raises_exactly("shape f32[2,3] does not have a layout"):
        su.validate_shape(shape)
    su.validate_shape_with_optional_layout(shape)
    lu.validate_layout_in_shape(shape, allow_missing_layouts=True)


def test_tuple_subshapes_with_missing_layouts():
    # ValidateLayout_TupleSubshapesWithMissingLayouts
    sub_1 = Shape.tuple([Shape.tuple([arr("f32", (1, 2))]), Shape("f32", (1, 2))])
    sub_2 = Shape.tuple([Shape("f32", (9,))])
    shape = Shape.tuple([sub_1, sub_2])
    with pytest.raises(InvalidShapeError, match="shape f32\\[1,2\\] does not have a layout"):
        lu.validate_layout_in_shape(shape, allow_missing_layouts=False)
    lu.validate_layout_in_shape(shape, allow_missing_layouts=True)
    bad = Shape.tuple([sub_1, Shape.tuple([Shape("f32", (9,), Layout((0, 2, 3)))])])
    with raises_exactly("layout minor_to_major field contains 3 elements, but shape has 1 "
                        "dimensions: {0, 2, 3}; shape: f32[9]"):
        lu.validate_layout_in_shape(bad, allow_missing_layouts=True)


def test_minor_to_major_count():
    # ValidateLayout_InvalidArrayLayout
    shape = Shape("f32", (2, 3), Layout((0, 1, 2)))
    msg = ("layout minor_to_major field contains 3 elements, but shape has 2 dimensions: "
           "{0, 1, 2}; shape: f32[2,3]")
    with raises_exactly(msg):
        su.validate_shape(shape)
    with raises_exactly(msg):
        su.validate_shape_with_optional_layout(shape)


def test_minor_to_major_out_of_bounds():
    with raises_exactly("layout minor_to_major field has out-of-bounds value: {2, 0}; "
                        "shape: f32[2,3]"):
        su.validate_shape(Shape("f32", (2, 3), Layout((2, 0))))
    with pytest.raises(InvalidShapeError, match="out-of-bounds value: \\{-1, 0\\}"):
        su.validate_shape(Shape("f32", (2, 3), Layout((-1, 0))))


def test_minor_to_major_duplicate():
    with raises_exactly("layout minor_to_major field has duplicate values: {1, 1}; "
                        "shape: f32[<=2,3]"):
        su.validate_shape(Shape("f32", (2, 3), Layout((1, 1)), (True, False)))


def test_tail_padding_not_positive():
    # The Layout constructor refuses L(0); a layout read from elsewhere (a proto in
    # XLA) may still carry it, so build one past the constructor.
    lay = Layout((1, 0))
    object.__setattr__(lay, "_tail_padding_alignment_in_elements", 0)
    with raises_exactly("layout tail_padding_alignment_in_elements field is <= 0: {0}"):
        su.validate_shape(Shape("f32", (2, 3), lay))
    with pytest.raises(InvalidShapeError, match="tail_padding_alignment_in_elements must be >= 1"):
        Layout((1, 0), tail_padding_alignment_in_elements=0)


def test_index_and_pointer_primitive_types():
    with raises_exactly("layout has a index_primitive_type, but is not a sparse array: f32[2,3]"):
        su.validate_shape(arr("f32", (2, 3), index_primitive_type=PrimitiveType.U32))
    with raises_exactly("layout has a pointer_primitive_type, but is not a sparse array: "
                        "f32[2,3]"):
        su.validate_shape(arr("f32", (2, 3), pointer_primitive_type="u16"))


def test_physical_shape():
    shape = arr("f32", (2, 3), physical_shape=arr("s32", (10, 20)))
    with raises_exactly("layout has a physical_shape, but is not a sparse array: f32[2,3]"):
        su.validate_shape(shape)


@pytest.mark.parametrize("tiles", [[Tile()], [Tile(0, 128)], [Tile(8, 128), Tile(2, 0)]])
def test_invalid_tiles(tiles):
    with raises_exactly("layout has invalid tiles: bf16[16,256]"):
        su.validate_shape(arr("bf16", (16, 256), tiles=tiles))


def test_negative_element_size():
    with raises_exactly("layout element_size_in_bits field is negative: -4"):
        su.validate_shape(arr("s4", (8,), element_size_in_bits=-4))


def test_check_order_is_xlas():
    # Several faults at once: XLA reports the first in its order.
    lay = Layout((1, 1), index_primitive_type="u8", element_size_in_bits=-1, tiles=[Tile(0)])
    with pytest.raises(InvalidShapeError, match="duplicate values"):
        su.validate_shape(Shape("f32", (2, 3), lay))
    lay = Layout((1, 0), index_primitive_type="u8", element_size_in_bits=-1, tiles=[Tile(0)])
    with pytest.raises(InvalidShapeError, match="index_primitive_type"):
        su.validate_shape(Shape("f32", (2, 3), lay))
    lay = Layout((1, 0), element_size_in_bits=-1, tiles=[Tile(0)])
    with pytest.raises(InvalidShapeError, match="invalid tiles"):
        su.validate_shape(Shape("f32", (2, 3), lay))
    # Non-layout checks come before layout checks.
    with pytest.raises(InvalidShapeError, match="Negative dimension"):
        su.validate_shape(Shape("f32", (-1, 3)))


def test_single_layout_for_tuple():
    with raises_exactly("a single Layout is not valid for tuple shapes"):
        lu.validate_layout_for_shape(Layout(()), Shape.tuple())
    # Token and opaque accept any layout (XLA: OK for non-arrays).
    lu.validate_layout_for_shape(Layout((0, 1)), Shape.token())


def test_validate_layout_for_shape_direct():
    lu.validate_layout_for_shape(Layout((0, 1)), Shape("f32", (2, 3)))
    with pytest.raises(InvalidShapeError, match="out-of-bounds value: \\{0, 5\\}"):
        lu.validate_layout_for_shape(Layout((0, 5)), Shape("f32", (2, 3)))
    # A buffer is checked through its array.
    with pytest.raises(InvalidShapeError, match="contains 1 elements, but shape has 2"):
        lu.validate_layout_for_shape(Layout((0,)), Shape.buffer(Shape("f32", (2, 3))))


def test_validate_accepts_no_other_types():
    with pytest.raises(ShapeTypeError, match="expected a Shape or HLO shape text, got int"):
        su.validate_shape(3)
    with pytest.raises(ShapeTypeError, match="expected a Layout or HLO layout text, got tuple"):
        lu.validate_layout_for_shape((1, 0), Shape("f32", (2, 3)))


def test_validation_leaves_shape_untouched():
    shape = Shape("f32", (2, 3), Layout((0, 1, 2)))
    before = (shape.dimensions, shape.layout, shape.dynamic_dimensions)
    with pytest.raises(InvalidShapeError):
        su.validate_shape(shape)
    assert (shape.dimensions, shape.layout, shape.dynamic_dimensions) == before


# -- robustness: arbitrary shapes only ever raise xlashape's own errors ------------------
from hypothesis import given, settings  # noqa: E402

from strategies import shapes  # noqa: E402
from xlashape import XlaShapeError, index_util as iu  # noqa: E402


def _calls(shape):
    n = len(shape.dimensions) if shape.is_array else 0
    zeros = (0,) * n
    return [
        lambda: su.validate_shape(shape),
        lambda: su.validate_shape_with_optional_layout(shape),
        lambda: su.elements_in(shape),
        lambda: su.elements_in_recursive(shape),
        lambda: su.element_size_in_bits(shape),
        lambda: su.byte_size_of(shape, 8),
        lambda: su.byte_size_of_elements(shape),
        lambda: su.array_size(shape),
        lambda: su.array_data_size(shape),
        lambda: su.byte_strides(shape),
        lambda: su.true_num_dimensions(shape),
        lambda: su.drop_degenerate_dimensions(shape),
        lambda: su.make_shape_with_descending_layout_and_same_physical_layout(shape),
        lambda: su.device_shape_to_host_shape(shape),
        lambda: su.make_static_shape(shape),
        lambda: su.last_dim_is_minor_most(shape),
        lambda: su.is_effectively_most_major_dimension(shape, 0),
        lambda: su.permute_dimensions(tuple(reversed(range(n))), shape),
        lambda: su.prepend_major_dimension(3, shape),
        lambda: su.append_minor_dimension(3, shape),
        lambda: su.insert_dimensions_at_index(shape, 0, [2]),
        lambda: su.move_dim_to_major(shape, 0),
        lambda: su.change_element_type(shape, "s4"),
        lambda: su.equal(shape, shape),
        lambda: su.compatible(shape, shape),
        lambda: lu.set_to_default_layout(shape),
        lambda: lu.linear_index(shape, zeros),
        lambda: lu.max_elements_in_per_split(shape),
        lambda: lu.has_layout(shape),
        lambda: lu.validate_layout_in_shape(shape, True),
        lambda: iu.multidimensional_index_to_linear_index(shape, zeros),
        lambda: iu.linear_index_to_multidimensional_index(shape, 0),
        lambda: iu.bump_indices(shape, zeros),
        lambda: iu.get_dimension_stride(shape, 0),
    ]


@settings(max_examples=300)
@given(shapes())
def test_arbitrary_shapes_raise_only_xlashape_errors(shape):
    for call in _calls(shape):
        try:
            call()
        except XlaShapeError:
            pass


@given(shapes())
def test_valid_shapes_pass_both_validations(shape):
    # strategies.shapes() puts only valid shapes inside tuples: a valid tuple
    # passes ValidateShapeWithOptionalLayout.
    if shape.is_tuple:
        su.validate_shape_with_optional_layout(shape)
