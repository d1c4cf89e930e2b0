"""Shape, Layout, Tile, SplitConfig: construction, immutability, hashing,
equality as XLA's Shape::Equal / Layout::Equal (spec §2.4, §2.5, §7)."""

import copy
import math
import pickle

import numpy as np
import pytest

from xlashape import (
    COMBINE_DIMENSION,
    InvalidShapeError,
    Layout,
    PrimitiveType,
    Shape,
    ShapeIndexError,
    ShapeTypeError,
    SplitConfig,
    Tile,
    UNBOUNDED_SIZE,
    memory_space_name,
)

P = PrimitiveType
INT64_MIN = -(2**63)


# ---------------------------------------------------------------------------
# Tile / SplitConfig

def test_tile_entries_and_combine_dimension():
    t = Tile(8, 128)
    assert t.dimensions == (8, 128) and len(t) == 2 and list(t) == [8, 128]
    assert t.dimension(1) == 128
    c = Tile("*", 128)
    assert c.dimensions == (INT64_MIN, 128)  # Tile::kCombineDimension is INT64_MIN
    assert COMBINE_DIMENSION == INT64_MIN
    assert c.has_combined_dimension and not t.has_combined_dimension
    assert Tile(COMBINE_DIMENSION) == Tile("*")
    assert Tile([8, 128]) == t  # one sequence argument works too
    assert str(Tile()) == "()"
    assert repr(c) == "Tile('*', 128)"


def test_tile_rejects_negative_entries_and_non_ints():
    with pytest.raises(InvalidShapeError, match="tile dimension must be >= 0 or '\\*'.*got -1"):
        Tile(8, -1)
    with pytest.raises(ShapeTypeError, match="tile dimension must be an int, got float"):
        Tile(8, 1.5)
    with pytest.raises(ShapeTypeError, match="got bool"):
        Tile(True)


def test_split_config():
    c = SplitConfig(1, (0, 4))
    assert (c.dimension, c.split_indices) == (1, (0, 4))
    assert str(c) == "(1:0,4)" and str(SplitConfig(0, ())) == "(0:)"
    assert c == SplitConfig(1, [0, 4]) and hash(c) == hash(SplitConfig(1, [0, 4]))
    assert c != SplitConfig(0, (0, 4))
    with pytest.raises(ShapeTypeError, match="split dimension must be an int"):
        SplitConfig("1", ())
    with pytest.raises(ShapeTypeError, match="split_indices must be a sequence of ints"):
        SplitConfig(1, "04")


# ---------------------------------------------------------------------------
# Layout construction and defaults (spec §2.4)

def test_layout_defaults():
    lay = Layout()
    assert lay.minor_to_major == () and lay.tiles == ()
    assert lay.tail_padding_alignment_in_elements == 1
    assert lay.index_primitive_type is P.PRIMITIVE_TYPE_INVALID
    assert lay.pointer_primitive_type is P.PRIMITIVE_TYPE_INVALID
    assert lay.element_size_in_bits == 0 and lay.memory_space == 0
    assert lay.split_configs == () and lay.physical_shape is None
    assert lay.dynamic_shape_metadata_prefix_bytes == 0
    assert lay.padded_dimensions == () and lay.padding_value == 0
    assert Layout() == Layout([]) and hash(Layout()) == hash(Layout([]))


def test_layout_fields_and_major_to_minor():
    lay = Layout((3, 2, 0, 1), tiles=[(8, 128), Tile(2, 1)], memory_space=1)
    assert lay.tiles == (Tile(8, 128), Tile(2, 1))
    assert lay.major_to_minor == (1, 0, 2, 3)
    assert lay.rank == 4 and lay.minor_to_major_at(0) == 3
    assert lay.memory_space_name == memory_space_name(1)
    assert str(lay) == "{3,2,0,1:T(8,128)(2,1)S(1)}"


def test_memory_space_names():
    assert "HBM" in memory_space_name(0)
    assert "VMEM" in memory_space_name(1)
    assert "host" in memory_space_name(5)
    assert "7" in memory_space_name(7)


@pytest.mark.parametrize("kwargs, error, fragment", [
    ({"tail_padding_alignment_in_elements": 0}, InvalidShapeError,
     "tail_padding_alignment_in_elements must be >= 1, got 0"),
    ({"memory_space": 128}, InvalidShapeError, "memory_space must fit in int8 .* got 128"),
    ({"memory_space": -129}, InvalidShapeError, "got -129"),
    ({"minor_to_major": "10"}, ShapeTypeError, "minor_to_major must be a sequence of ints"),
    ({"minor_to_major": (1.0, 0)}, ShapeTypeError, "minor_to_major entry must be an int"),
    ({"tiles": Tile(8)}, ShapeTypeError, "tiles must be a sequence of Tile"),
    ({"element_size_in_bits": 4.0}, ShapeTypeError, "element_size_in_bits must be an int"),
    ({"physical_shape": "f32[2]"}, ShapeTypeError, "physical_shape must be a Shape or None"),
    ({"minor_to_major": (1, 0), "padded_dimensions": (8,)}, InvalidShapeError,
     "padded_dimensions has 1 entries but the layout has 2 dimensions"),
    ({"minor_to_major": (0,), "padded_dimensions": (-1,)}, InvalidShapeError,
     "padded_dimensions must be >= 0"),
    ({"padding_value": "x"}, ShapeTypeError, "padding_value must be a number, got str"),
    ({"index_primitive_type": "U32"}, InvalidShapeError, "Invalid element type string"),
])
def test_layout_constructor_errors(kwargs, error, fragment):
    with pytest.raises(error, match=fragment):
        Layout(**kwargs)


def test_layout_is_immutable_and_replace_copies():
    lay = Layout((1, 0))
    with pytest.raises(AttributeError, match="immutable"):
        lay.memory_space = 1
    with pytest.raises(AttributeError, match="immutable"):
        del lay._minor_to_major
    lay2 = lay.replace(memory_space=1, tiles=[(8, 128)])
    assert lay.memory_space == 0 and lay2.memory_space == 1
    assert lay2 == Layout((1, 0), tiles=[Tile(8, 128)], memory_space=1)
    with pytest.raises(ShapeTypeError, match="Layout has no field"):
        lay.replace(bogus=1)


# ---------------------------------------------------------------------------
# Layout::Equal

def test_layout_equal_ignores_dynamic_metadata_prefix_bytes():
    a = Layout((1, 0), dynamic_shape_metadata_prefix_bytes=0)
    b = Layout((1, 0), dynamic_shape_metadata_prefix_bytes=123)
    assert a == b and hash(a) == hash(b)
    assert str(b) == "{1,0:M(123)}"  # but it is printed


@pytest.mark.parametrize("field, value, option", [
    ("tiles", [(8, 128)], "ignore_tiles"),
    ("tail_padding_alignment_in_elements", 4, "ignore_tail_padding_alignment_in_elements"),
    ("index_primitive_type", P.U32, "ignore_index_primitive_type"),
    ("pointer_primitive_type", P.U16, "ignore_pointer_primitive_type"),
    ("element_size_in_bits", 4, "ignore_element_size"),
    ("memory_space", 1, "ignore_memory_space"),
    ("split_configs", [SplitConfig(0, (1,))], "ignore_split_configs"),
    ("physical_shape", Shape("s32", (10,)), "ignore_physical_shape"),
    ("padded_dimensions", (8, 128), "ignore_padding"),
    ("padding_value", 7, "ignore_padding"),
])
def test_layout_equal_compares_each_field_unless_ignored(field, value, option):
    a = Layout((1, 0))
    b = a.replace(**{field: value})
    assert a != b
    assert not a.equal(b)
    assert a.equal(b, **{option: True})
    assert a.equal(b, minor_to_major_only=True)
    assert not Layout((0, 1)).equal(b, minor_to_major_only=True)


def test_layout_equal_rejects_non_layouts():
    assert (Layout() == "{}") is False
    with pytest.raises(ShapeTypeError, match="expected a Layout, got str"):
        Layout().equal("{}")


def test_padding_fields_round_trip_but_are_never_printed():
    lay = Layout((1, 0), tiles=[(8, 128)], padded_dimensions=(16, 256), padding_value=-1.5)
    assert str(lay) == "{1,0:T(8,128)}"
    assert "padded_dimensions=(16, 256)" in repr(lay) and "padding_value=-1.5" in repr(lay)
    for copy_ in (pickle.loads(pickle.dumps(lay)), copy.deepcopy(lay), lay.replace()):
        assert copy_ == lay
        assert copy_.padded_dimensions == (16, 256) and copy_.padding_value == -1.5
    s = Shape("f32", (10, 100), lay)
    assert str(s) == "f32[10,100]{1,0:T(8,128)}"
    s2 = pickle.loads(pickle.dumps(s))
    assert s2 == s and s2.layout.padded_dimensions == (16, 256)
    assert s.replace(dimensions=(3, 4)).layout.padding_value == -1.5


def test_nan_padding_values_compare_equal():
    a = Layout((0,), padding_value=float("nan"))
    b = Layout((0,), padding_value=math.nan)
    assert a == b and hash(a) == hash(b)


# ---------------------------------------------------------------------------
# Shape construction (spec §2.5)

def test_array_shape_basics():
    s = Shape("bf16", (8, 1, 1280, 16384), Layout((3, 2, 0, 1)))
    assert s.element_type is P.BF16 and s.rank == 4
    assert s.dimensions == (8, 1, 1280, 16384)
    assert s.dynamic_dimensions == (False,) * 4
    assert s.dimension(-1) == 16384 and s.dimension(0) == 8
    assert s.dtype == np.dtype("bfloat16")
    assert s.is_array and not (s.is_tuple or s.is_token or s.is_opaque or s.is_buffer)
    assert s.has_layout and s.is_static and not s.is_scalar


def test_element_type_spellings():
    for et in ("f32", P.F32, 11, np.float32, np.dtype("float32")):
        assert Shape(et, (2,)).element_type is P.F32


def test_dynamic_dimensions():
    s = Shape("f32", (3, UNBOUNDED_SIZE, 5), dynamic_dimensions=(True, True, False))
    assert s.is_dynamic_dimension(0) and s.is_bounded_dynamic_dimension(0)
    assert s.is_unbounded_dynamic_dimension(1) and s.is_unbounded_dynamic_dimension(-2)
    assert not s.is_dynamic_dimension(-1)
    assert s.is_dynamic and s.is_unbounded_dynamic
    assert str(s) == "f32[<=3,?,5]"
    # Without flags, exactly the INT64_MIN dims are dynamic (MakeShape's rule).
    assert Shape("f32", (UNBOUNDED_SIZE, 2)).dynamic_dimensions == (True, False)


def test_other_kinds():
    t = Shape.tuple([Shape("f32", ()), Shape.token()])
    assert t.is_tuple and len(t.tuple_shapes) == 2 and t.tuple_shapes[1].is_token
    assert Shape.tuple().tuple_shapes == () and str(Shape.tuple()) == "()"
    assert Shape.opaque().is_opaque and str(Shape.opaque()) == "opaque[]"
    b = Shape.buffer(Shape("s32", (2,), Layout((0,))))
    assert b.is_buffer and b.buffer_shape == Shape("s32", (2,), Layout((0,)))
    assert str(b) == "b(s32[2]{0})" and b.has_layout
    for s in (t, Shape.token(), Shape.opaque()):
        assert not s.has_layout and s.dtype is None


@pytest.mark.parametrize("build, error, fragment", [
    (lambda: Shape("f32", "23"), ShapeTypeError, "not a string"),
    (lambda: Shape("f32", 3), ShapeTypeError, "dimensions must be a sequence of ints, got int"),
    (lambda: Shape("f32", (2.0,)), ShapeTypeError, "dimension sizes must be ints, got float"),
    (lambda: Shape("f32", (2,), dynamic_dimensions=(True, False)), InvalidShapeError,
     "dynamic dimensions size 2 did not match number of dimensions 1"),
    (lambda: Shape("f32", (2,), "{0}"), ShapeTypeError, "layout must be a Layout or None, got str"),
    (lambda: Shape("token", (2,)), InvalidShapeError, "a token shape has no dimensions or layout"),
    (lambda: Shape.tuple([Shape.token(), "f32[]"]), ShapeTypeError, "tuple elements must be Shapes"),
    (lambda: Shape.buffer(Shape.token()), InvalidShapeError, "wraps exactly one array shape"),
    (lambda: Shape("F32", ()), InvalidShapeError, 'Invalid element type string: "F32".'),
])
def test_shape_constructor_errors(build, error, fragment):
    with pytest.raises(error, match=fragment):
        build()


def test_dimension_lookup_errors():
    s = Shape("f32", (2, 3))
    with pytest.raises(ShapeIndexError, match="dimension 2 is out of range for a shape with 2 dimensions"):
        s.dimension(2)
    with pytest.raises(ShapeIndexError, match="dimension -3 is out of range"):
        s.is_dynamic_dimension(-3)
    with pytest.raises(ShapeTypeError, match="dimension number must be an int, got str"):
        s.dimension("0")
    with pytest.raises(InvalidShapeError, match="is not an array and has no rank"):
        Shape.token().rank
    with pytest.raises(InvalidShapeError, match="is not a buffer shape"):
        s.buffer_shape


def test_shape_is_immutable_and_copies():
    s = Shape("f32", (2, 3), Layout((1, 0)))
    with pytest.raises(AttributeError, match="immutable"):
        s._dimensions = (1,)
    assert s.with_layout(Layout((0, 1))).layout == Layout((0, 1))
    assert s.with_layout(None).layout is None and s.layout == Layout((1, 0))
    assert s.without_layout() == Shape("f32", (2, 3))
    assert s.replace(element_type="s8").element_type is P.S8
    with pytest.raises(ShapeTypeError, match="Shape has no field"):
        s.replace(rank=3)
    with pytest.raises(InvalidShapeError, match="should not have a layout"):
        Shape.token().with_layout(Layout())


# ---------------------------------------------------------------------------
# Shape::Equal and the relaxed comparisons (spec §7)

def test_equal_requires_layout_on_both_sides():
    a = Shape("f32", (2, 3), Layout((1, 0)))
    assert a != Shape("f32", (2, 3))
    assert a.equal(Shape("f32", (2, 3)), ignore_layout=True)
    assert a != Shape("f32", (2, 3), Layout((0, 1)))
    assert a == Shape("f32", [2, 3], Layout([1, 0]))


def test_scalar_shapes_with_empty_layout_are_equal():
    # MakeShape(F32,{}) equals MakeShapeWithDenseLayout(F32,{},{}).
    assert Shape("f32", (), Layout()) == Shape("f32", (), Layout([]))


def test_equal_compares_type_dims_and_dynamic_flags():
    a = Shape("f32", (2, 3))
    assert a != Shape("f64", (2, 3))
    assert a != Shape("f32", (2, 4))
    assert a != Shape("f32", (2, 3), dynamic_dimensions=(True, False))
    assert a.equal(Shape("f32", (2, 3), dynamic_dimensions=(True, False)),
                   ignore_dynamic_dimension=True)
    assert a.equal(Shape("f64", (2, 3)), ignore_fp_precision=True)
    assert not a.equal(Shape("s32", (2, 3)), ignore_fp_precision=True)
    assert a.equal(Shape("s32", (2, 3)), ignore_element_type=True)
    assert a.equal(Shape("f32", (5, 7)), ignore_dimensions=True)
    assert not a.equal(Shape("f32", (5,)), ignore_dimensions=True)
    # SameElementTypeIgnoringFpPrecision relaxes floating-point types only
    # (ElementIsFloating), so c64 and c128 still differ.
    c = Shape("c64", (2,))
    assert not c.equal(Shape("c128", (2,)), ignore_fp_precision=True)
    # With ignore_dynamic_dimension an unbounded dimension matches any size.
    u = Shape("f32", (UNBOUNDED_SIZE, 3))
    assert u.equal(Shape("f32", (7, 3)), ignore_dynamic_dimension=True)
    assert not u.equal(Shape("f32", (7, 4)), ignore_dynamic_dimension=True)


def test_equal_passes_layout_options_through():
    a = Shape("f32", (2,), Layout((0,), tiles=[(128,)]))
    b = Shape("f32", (2,), Layout((0,)))
    assert a != b and a.equal(b, ignore_tiles=True)


def test_tuple_buffer_token_equality():
    t1 = Shape.tuple([Shape("f32", ()), Shape.token()])
    assert t1 == Shape.tuple([Shape("f32", ()), Shape.token()])
    assert t1 != Shape.tuple([Shape("f32", ())])
    assert t1 != Shape("f32", ())
    assert Shape.token() == Shape.token() and Shape.token() != Shape.opaque()
    inner = Shape("f32", (2,), Layout((0,)))
    assert Shape.buffer(inner) == Shape.buffer(inner)
    assert Shape.buffer(inner) != inner
    assert Shape.buffer(inner).equal(inner, ignore_buffer=True)
    with pytest.raises(ShapeTypeError, match="expected a Shape, got str"):
        inner.equal("f32[2]")
    assert (inner == "f32[2]{0}") is False


def test_hash_is_consistent_with_equality():
    shapes = [
        Shape("f32", (2, 3), Layout((1, 0))),
        Shape("f32", [2, 3], Layout([1, 0])),
        Shape("f32", (2, 3), Layout((1, 0), dynamic_shape_metadata_prefix_bytes=8)),
    ]
    assert len({hash(s) for s in shapes}) == 1
    assert len(set(shapes)) == 1
    assert {Shape.token(), Shape.token(), Shape.tuple()} == {Shape.token(), Shape.tuple()}


def test_pickle_round_trip_of_every_kind():
    for s in (Shape("s4", (3, 5), Layout((1, 0), element_size_in_bits=4)),
              Shape.tuple([Shape.token(), Shape.opaque(), Shape("f32", ())]),
              Shape.buffer(Shape("f32", (2,))),
              Shape("f32", (UNBOUNDED_SIZE, 3), dynamic_dimensions=(True, True))):
        assert pickle.loads(pickle.dumps(s)) == s
        assert copy.deepcopy(s) == s


def test_human_string_and_to_string():
    s = Shape("f32", (2, 3), Layout((0, 1), tiles=[(2, 2)]))
    assert s.human_string() == "f32[2,3]" == s.to_string(print_layout=False)
    assert s.to_string() == str(s) == "f32[2,3]{0,1:T(2,2)}"
    assert repr(s) == "Shape('f32[2,3]{0,1:T(2,2)}')"


def test_layout_defaults_come_from_one_table():
    # The constructor's defaults, the trusted constructor (Layout._from_parsed)
    # and the field list of replace()/pickling all read Layout._DEFAULTS.
    import inspect

    params = inspect.signature(Layout.__init__).parameters
    table = Layout._DEFAULTS
    assert list(params)[1:] == list(table._fields)
    for field, default in zip(table._fields, table):
        assert params[field].default is default, field
    parsed = Layout._from_parsed((1, 0), (), 1, 0, 0)
    built = Layout((1, 0))
    for field in table._fields:
        assert getattr(parsed, field) == getattr(built, field), field
    assert parsed == built and hash(parsed) == hash(built) and str(parsed) == "{1,0}"
    # Every slot but the cached text is a field of the table.
    assert Layout.__slots__ == tuple("_" + f for f in table._fields) + ("_text",)
