"""LayoutUtil: golden values from XLA's xla/layout_util_test.cc and spec §5, §8.7, §10.

Shapes are built with the constructors, not the HLO parser.
"""

import itertools

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
)
from xlashape import layout_util as lu


def arr(et, dims, m2m=None, **layout_kw):
    if m2m is None:
        m2m = tuple(range(len(dims) - 1, -1, -1))
    return Shape(et, dims, Layout(m2m, **layout_kw))


# -- construction ------------------------------------------------------------------
def test_make_descending_and_ascending():
    # MakeDescending / MakeAscending
    assert lu.make_descending_layout(5) == lu.make_layout([4, 3, 2, 1, 0])
    assert lu.make_descending_layout(1) == lu.make_layout([0])
    assert lu.make_descending_layout(0) == lu.make_layout([])
    assert lu.make_ascending_layout(5) == lu.make_layout([0, 1, 2, 3, 4])
    assert lu.make_ascending_layout(1) == lu.make_layout([0])
    assert lu.make_ascending_layout(0) == lu.make_layout([])


def test_default_layout_getters():
    # DefaultLayoutGettersMajorToMinor
    assert lu.get_default_layout_for_r2() == lu.make_layout([1, 0])
    assert lu.get_default_layout_for_r3() == lu.make_layout([2, 1, 0])
    assert lu.get_default_layout_for_r4() == lu.make_layout([3, 2, 1, 0])
    assert lu.get_default_layout_for_rank(5) == lu.make_layout([4, 3, 2, 1, 0])
    assert lu.get_default_layout_for_shape(arr("f32", (10, 20, 30, 15, 25))) == \
        lu.make_layout([4, 3, 2, 1, 0])
    assert lu.get_default_layout_for_shape(Shape.token()) == Layout()
    assert lu.get_default_layout_for_shape(Shape.opaque()) == Layout()


def test_make_layout_from_major_to_minor():
    assert lu.make_layout_from_major_to_minor([0, 2, 1]).minor_to_major == (1, 2, 0)
    assert lu.make_layout_from_major_to_minor([]).minor_to_major == ()


def test_make_layout_keeps_fields_as_given():
    lay = lu.make_layout([1, 0], tiles=[(8, 128), Tile(2, 1)],
                         tail_padding_alignment_in_elements=4, element_size_in_bits=32,
                         memory_space=1, split_configs=[SplitConfig(0, (3,))],
                         dynamic_shape_metadata_prefix_bytes=16)
    # E(32) is kept by MakeLayout (spec §3.3.6); only MakeShapeWithDenseLayout drops it.
    assert str(lay) == "{1,0:T(8,128)(2,1)L(4)E(32)S(1)SC(0:3)M(16)}"
    assert lay.tiles == (Tile(8, 128), Tile(2, 1))


@pytest.mark.parametrize("tiles,text", [
    # HumanStringWithTiling
    ([(512, 1024)], "{0,1,2:T(512,1024)}"),
    ([(512,)], "{0,1,2:T(512)}"),
    ([(2, COMBINE_DIMENSION, 128)], "{0,1,2:T(2,*,128)}"),
    ([(2, "*", "*", 128)], "{0,1,2:T(2,*,*,128)}"),
])
def test_make_layout_tile_text(tiles, text):
    assert str(lu.make_layout([0, 1, 2], tiles=tiles)) == text


def test_make_layout_refuses_negative_tile():
    with pytest.raises(InvalidShapeError, match="tile dimension must be >= 0 or '\\*'"):
        lu.make_layout([0], tiles=[(-1,)])


def test_rank_errors():
    with pytest.raises(InvalidShapeError, match="rank must be >= 0, got -1"):
        lu.make_descending_layout(-1)
    with pytest.raises(ShapeTypeError, match="rank must be an int"):
        lu.make_ascending_layout(2.0)
    with pytest.raises(ShapeTypeError, match="major_to_minor must be a sequence of ints"):
        lu.make_layout_from_major_to_minor("10")


def test_get_default_layout_for_tuple_is_an_error():
    with pytest.raises(InvalidShapeError, match="a single Layout is not valid for"):
        lu.get_default_layout_for_shape(Shape.tuple([arr("f32", (2,))]))


def test_set_to_default_layout_tuple():
    # SetToDefaultLayoutTuple
    shape = Shape.tuple([
        arr("f32", (2, 3, 4), (1, 0, 2)),
        arr("f32", (42, 123, 7), (1, 2, 0)),
        Shape.tuple([arr("f32", (), ()), arr("f32", (1, 2, 3, 4), (3, 1, 2, 0))]),
    ])
    assert shape.tuple_shapes[0].layout != shape.tuple_shapes[1].layout
    out = lu.set_to_default_layout(shape)
    assert out.tuple_shapes[0].layout == out.tuple_shapes[1].layout == lu.make_layout([2, 1, 0])
    assert out.tuple_shapes[2].tuple_shapes[1].layout == lu.make_layout([3, 2, 1, 0])
    assert out.tuple_shapes[2].tuple_shapes[0].layout == Layout()


def test_set_to_default_layout_keeps_other_fields_and_fills_missing():
    # XLA rewrites only minor_to_major of an existing layout (quirk, documented).
    s = arr("f32", (2, 3), (0, 1), tiles=[(8, 128)], memory_space=1)
    out = lu.set_to_default_layout(s)
    assert out.layout == Layout((1, 0), tiles=[(8, 128)], memory_space=1)
    assert lu.set_to_default_layout(Shape("f32", (2, 3))).layout == Layout((1, 0))
    assert lu.get_with_default_layout(Shape.token()) == Shape.token()
    b = lu.set_to_default_layout(Shape.buffer(Shape("s8", (4, 2))))
    assert b.buffer_shape.layout == Layout((1, 0))


def test_clear_layout_tuple_and_has_layout():
    # ClearLayoutTuple, ClearLayoutOpaqueAndToken
    shape = Shape.tuple([
        arr("f32", (2, 3), (1, 0)), arr("f32", (42, 123), (1, 0)),
        Shape.tuple([arr("f32", (), ()), arr("f32", (1, 2, 3), (1, 2, 0))]),
    ])
    assert lu.has_layout(shape)
    cleared = lu.clear_layout(shape)
    assert not lu.has_layout(cleared)
    assert cleared.tuple_shapes[0].layout is None
    assert cleared.tuple_shapes[2].tuple_shapes[1].layout is None
    for s in (Shape.opaque(), Shape.token()):
        assert lu.has_layout(s)
        assert lu.has_layout(lu.clear_layout(s))


def test_has_any_layout():
    some = Shape.tuple([Shape("f32", (2,)), arr("f32", (3,))])
    none = Shape.tuple([Shape("f32", (2,)), Shape("f32", (3,))])
    assert lu.has_any_layout(some) and not lu.has_layout(some)
    assert not lu.has_any_layout(none)
    assert not lu.has_any_layout(Shape.tuple())   # quirk: empty tuple has none
    assert lu.has_layout(Shape.tuple())           # ... but "has" all of them
    assert lu.has_any_layout(Shape.token())


def test_clear_tiles():
    s = Shape.tuple([arr("bf16", (16, 256), tiles=[(8, 128), (2, 1)], memory_space=1),
                     Shape.token()])
    out = lu.clear_tiles(s)
    assert out.tuple_shapes[0].layout == Layout((1, 0), memory_space=1)
    assert out.tuple_shapes[1] == Shape.token()


def test_has_custom_element_size_in_bits():
    # HasCustomElementSizeInBits
    assert not lu.has_custom_element_size_in_bits(arr("f32", (1, 2)))
    assert not lu.has_custom_element_size_in_bits(arr("f32", (1, 2), element_size_in_bits=0))
    assert lu.has_custom_element_size_in_bits(arr("f32", (1, 2), element_size_in_bits=32))
    inner = Shape.tuple([arr("f32", (1, 2)), arr("f32", (1, 2))])
    assert not lu.has_custom_element_size_in_bits(Shape.tuple([inner, arr("f32", (1, 2))]))
    inner2 = Shape.tuple([arr("f32", (1, 2)), arr("f32", (1, 2), element_size_in_bits=32)])
    assert lu.has_custom_element_size_in_bits(Shape.tuple([inner2, arr("f32", (1, 2))]))
    assert not lu.has_custom_element_size_in_bits(Shape.token())


def test_layouts_in_shapes_equal_tuples():
    # TupleLayoutComparison
    shape = Shape.tuple([arr("f32", (2, 3), (0, 1))])
    other = Shape.tuple([arr("f32", (2, 2), (0, 1))])
    t0, t1, t2 = Shape.tuple([]), Shape.tuple([shape]), Shape.tuple([shape, shape])
    eq = lu.layouts_in_shapes_equal
    assert eq(t0, t0)
    assert not eq(t0, t1) and not eq(t0, t2) and not eq(t1, t0) and not eq(t2, t0)
    assert eq(t1, t1) and not eq(t1, t2) and not eq(t2, t1)
    other2 = Shape.tuple([shape, other])
    assert eq(t2, t2) and eq(t2, other2) and eq(other2, t2)


def test_layouts_in_shapes_equal_arrays():
    a = arr("f32", (2, 3), (0, 1))
    assert not lu.layouts_in_shapes_equal(a, arr("f32", (2, 3), (1, 0)))
    assert not lu.layouts_in_shapes_equal(a, arr("f32", (2, 3, 1)))
    assert not lu.layouts_in_shapes_equal(a, Shape("f32", (2, 3)))
    assert lu.layouts_in_shapes_equal(Shape("f32", (2,)), Shape("s8", (5,)))
    assert lu.layouts_in_shapes_equal(Shape.token(), Shape.opaque())


# -- CopyLayoutBetweenShapes -------------------------------------------------------
def test_copy_layout_dense_array():
    # CopyLayoutDenseArray
    src = arr("f32", (2, 3), (0, 1))
    dst = arr("f32", (2, 3), (1, 0))
    assert not lu.layouts_in_shapes_equal(src, dst)
    dst = lu.copy_layout_between_shapes(src, dst)
    assert lu.layouts_in_shapes_equal(src, dst)
    dst = lu.copy_layout_between_shapes(src, dst.without_layout())
    assert lu.layouts_in_shapes_equal(src, dst)
    src = src.without_layout()
    assert dst.has_layout
    dst = lu.copy_layout_between_shapes(src, dst)
    assert lu.layouts_in_shapes_equal(src, dst) and not dst.has_layout


def test_copy_layout_tuple_and_token_opaque():
    # CopyLayoutTuple, CopyTupleLayoutWithTokenAndOpaque, CopyTokenLayout, CopyOpaqueLayout
    src = Shape.tuple([arr("f32", (2, 3), (0, 1)), arr("f32", (42, 123), (1, 0)),
                       Shape.token(),
                       Shape.tuple([Shape.opaque(), arr("f32", (), ()),
                                    arr("f32", (1, 2, 3), (0, 2, 1))])])
    dst = Shape.tuple([arr("f32", (2, 3), (1, 0)), arr("f32", (42, 123), (1, 0)),
                       Shape.token(),
                       Shape.tuple([Shape.opaque(), arr("f32", (), ()),
                                    arr("f32", (1, 2, 3), (1, 2, 0))])])
    assert not lu.layouts_in_shapes_equal(src, dst)
    out = lu.copy_layout_between_shapes(src, dst)
    assert lu.layouts_in_shapes_equal(src, out)
    assert out.tuple_shapes[3].tuple_shapes[2].layout == Layout((0, 2, 1))
    for s in (Shape.token(), Shape.opaque()):
        assert lu.copy_layout_between_shapes(s, s) == s


def test_copy_layout_not_compatible_same_rank():
    # CopyLayoutNotCompatibleSameRank
    src = arr("f32", (123, 42, 7), (2, 0, 1))
    dst = arr("f32", (2, 3, 5), (1, 0, 2))
    out = lu.copy_layout_between_shapes(src, dst)
    assert lu.layouts_in_shapes_equal(src, out)
    assert out.dimensions == (2, 3, 5)


def test_copy_layout_errors():
    # CopyLayoutNotCompatibleDifferentRank
    with pytest.raises(InvalidShapeError, match="cannot copy layout from shape: ranks differs"):
        lu.copy_layout_between_shapes(arr("f32", (123, 42, 7), (2, 0, 1)), arr("f32", (2, 3)))
    # CopyLayoutNotCompatibleTuple
    src = Shape.tuple([arr("f32", (2, 3), (0, 1)), arr("f32", (42, 123)),
                       Shape.tuple([arr("f32", (1, 2, 3), (0, 2, 1))])])
    dst = Shape.tuple([arr("f32", (2, 3)), arr("f32", (42, 123)),
                       Shape.tuple([arr("f32", ()), arr("f32", (1, 2, 3), (1, 2, 0))])])
    with pytest.raises(InvalidShapeError, match="cannot copy layout from shape: tuple element count"):
        lu.copy_layout_between_shapes(src, dst)
    with pytest.raises(InvalidShapeError, match="cannot copy layout from shape: shape structure"):
        lu.copy_layout_between_shapes(src, arr("f32", (2,)))
    with pytest.raises(InvalidShapeError, match="cannot copy layout from shape: shape structure"):
        lu.copy_layout_between_shapes(arr("f32", (2,)), Shape.token())
    # CopyLayoutBogusLayout: the layout must be valid for dst.
    bogus = Shape("f32", (2, 3), Layout((1, 2, 3, 4)))
    with pytest.raises(InvalidShapeError, match="cannot copy layout from shape: ranks differs"):
        lu.copy_layout_between_shapes(Shape("f32", (2, 3, 4, 5), Layout((1, 2, 3, 4))),
                                      arr("f32", (2, 3)))
    with pytest.raises(InvalidShapeError,
                       match="layout minor_to_major field contains 4 elements, but shape has 2"):
        lu.copy_layout_between_shapes(bogus, arr("f32", (2, 3)))


# -- mapping and predicates -------------------------------------------------------------
def test_minor_major_and_logical_to_physical():
    lay = lu.make_layout([2, 0, 1])
    assert [lu.minor(lay, p) for p in range(3)] == [2, 0, 1]
    assert [lu.major(lay, p) for p in range(3)] == [1, 0, 2]
    # MakeLogicalToPhysical[Major(p)] = p
    l2p = lu.make_logical_to_physical(lay)
    assert l2p == (1, 0, 2)
    for p in range(3):
        assert l2p[lu.major(lay, p)] == p
    assert lu.make_logical_to_physical(Layout()) == ()


def test_minor_to_major_of_shape_or_layout():
    assert lu.minor_to_major(arr("f32", (2, 3), (0, 1))) == (0, 1)
    assert lu.minor_to_major(Layout((1, 0))) == (1, 0)
    with pytest.raises(InvalidShapeError, match="shape f32\\[2\\] does not have a layout"):
        lu.minor_to_major(Shape("f32", (2,)))


@pytest.mark.parametrize("m2m,dim0_major,dim0_minor", [
    ((), True, True), ((0,), True, True), ((1, 0), True, False), ((0, 1), False, True),
    ((2, 1, 0), True, False), ((0, 1, 2), False, True), ((1, 2, 0), False, False),
])
def test_monotonic(m2m, dim0_major, dim0_minor):
    lay = Layout(m2m)
    assert lu.is_monotonic_with_dim0_major(lay) is dim0_major
    assert lu.has_descending_layout(lay) is dim0_major
    assert lu.is_monotonic_with_dim0_minor(lay) is dim0_minor
    assert lu.has_ascending_layout(lay) is dim0_minor
    assert lu.is_monotonic_with_dim0_major(Shape("f32", (1,) * len(m2m), lay)) is dim0_major


def test_move_dim_to_major_and_minor():
    # MoveDimToMajor, MoveDimToMinor
    layout = lu.make_layout([2, 1, 0])
    assert lu.move_dim_to_major(layout, 0) == layout
    assert lu.move_dim_to_major(layout, 1) == lu.make_layout([2, 0, 1])
    layout = lu.make_layout([2, 0, 3, 1])
    assert lu.move_dim_to_minor(layout, 2) == layout
    assert lu.move_dim_to_minor(layout, 3) == lu.make_layout([3, 2, 0, 1])
    # Other fields are kept (tiles not adjusted).
    tiled = Layout((1, 0), tiles=[(8, 128)], memory_space=1)
    assert lu.move_dim_to_major(tiled, 1) == Layout((0, 1), tiles=[(8, 128)], memory_space=1)


def test_move_dim_errors():
    with pytest.raises(ShapeIndexError, match="dimension 5 is not in layout \\{1,0\\}"):
        lu.move_dim_to_major(Layout((1, 0)), 5)
    with pytest.raises(ShapeIndexError, match="dimension 2 is not in layout"):
        lu.move_dim_to_minor(Layout((1, 0)), 2)
    with pytest.raises(ShapeIndexError, match="physical dimension 3 is out of range"):
        lu.minor(Layout((1, 0)), 3)
    with pytest.raises(ShapeIndexError, match="physical dimension -1 is out of range"):
        lu.major(Layout((1, 0)), -1)
    with pytest.raises(InvalidShapeError, match="is not a permutation of 0..1"):
        lu.make_logical_to_physical(Layout((1, 1)))


@pytest.mark.parametrize("m2m,dims,expected", [
    ((3, 1, 2, 0), (2, 1), True),
    ((3, 1, 2, 0), (1, 2, 0), True),
    ((3, 1, 2, 0), (3, 2), False),
    ((3, 1, 2, 0), (0,), True),
    ((3, 1, 2, 0), (), True),
])
def test_are_dimensions_consecutive(m2m, dims, expected):
    assert lu.are_dimensions_consecutive(Layout(m2m), dims) is expected


def test_are_dimensions_consecutive_unknown_dim():
    with pytest.raises(ShapeIndexError, match="7 is not in \\[1, 0\\]"):
        lu.are_dimensions_consecutive(Layout((1, 0)), [7])


def test_byte_strides_is_major_to_minor():
    # StridesIsMajorToMinor, StridesNotMajorToMinorInnerMostStrideIncorrect,
    # StridesNotMajorToMinor
    dims = [8, 9, 10, 11]
    assert lu.byte_strides_is_major_to_minor([3960, 440, 44, 4], dims, PrimitiveType.F32)
    assert not lu.byte_strides_is_major_to_minor([1880, 220, 22, 2], dims, PrimitiveType.F32)
    assert not lu.byte_strides_is_major_to_minor([1880, 440, 44, 4], dims, "f32")
    with pytest.raises(InvalidShapeError, match="byte_strides has 2 entries but dims has 4"):
        lu.byte_strides_is_major_to_minor([44, 4], dims, "f32")


# -- LinearIndex ----------------------------------------------------------------------
def _first_tile_reference(dims, m2m, tile, idx):
    """Independent computation of the first-tile index (spec §10/§11): pad the
    minor dims to the tile, list tile counts major then within-tile positions."""
    phys = [dims[d] for d in reversed(m2m)]
    pidx = [idx[d] for d in reversed(m2m)]
    k = len(tile)
    outer_sizes = phys[:len(phys) - k] + [-(-s // t) for s, t in zip(phys[-k:], tile)]
    outer_idx = pidx[:len(phys) - k] + [e // t for e, t in zip(pidx[-k:], tile)]
    inner_sizes = list(tile)
    inner_idx = [e % t for e, t in zip(pidx[-k:], tile)]
    lin = 0
    for e, s in zip(outer_idx + inner_idx, outer_sizes + inner_sizes):
        lin = lin * s + e
    return lin


def test_linear_index_golden():
    # Spec §11 Fig. 1: f32[3,5]{1,0:T(2,2)} element (2,3) -> 17.
    assert lu.linear_index(arr("f32", (3, 5), tiles=[(2, 2)]), (2, 3)) == 17
    # LinearIndexWithAndWithoutTiles: f32[8,4]{1,0} element (3,1): 11 tiled by (2,2),
    # 13 untiled (XLA checks it with LinearIndexForNestedTiling; one tile: same formula).
    assert lu.linear_index(arr("f32", (8, 4), tiles=[(2, 2)]), (3, 1)) == 11
    assert lu.linear_index(arr("f32", (8, 4)), (3, 1)) == 13
    # Spec §11: bf16[16,256]{1,0:T(8,128)(2,1)} element (1,0): the sub-tile is ignored.
    assert lu.linear_index(arr("bf16", (16, 256), tiles=[(8, 128), (2, 1)]), (1, 0)) == 128
    # LinearIndexForNestedTilingRoundTrip2D: bf16[2,8,128]{2,1,0:T(8,128)(2,1)} (0,2,0).
    assert lu.linear_index(arr("bf16", (2, 8, 128), tiles=[(8, 128), (2, 1)]), (0, 2, 0)) == 256


def test_linear_index_rank1_shortcut_and_scalar():
    # Quirk (spec §14.4): rank 1 returns idx[0] even when tiled.
    assert lu.linear_index(arr("f32", (5,), tiles=[(2,)]), (3,)) == 3
    assert lu.linear_index(arr("bf16", (2048,), tiles=[(1024,), (128,), (2, 1)]), (128,)) == 128
    assert lu.linear_index(arr("f32", ()), ()) == 0


@pytest.mark.parametrize("dims,m2m,tile", [
    ((3, 5), (1, 0), (2, 2)),
    ((5, 3), (0, 1), (2, 2)),
    ((4, 6, 5), (2, 0, 1), (2, 3)),
    ((3, 4, 5), (2, 1, 0), (2, 3, 4)),
    ((7, 3), (1, 0), (4,)),
    ((2, 3, 2), (0, 2, 1), (2, 2, 2)),
])
def test_linear_index_matches_first_tile_model(dims, m2m, tile):
    shape = arr("f32", dims, m2m, tiles=[tile])
    offsets = set()
    for idx in itertools.product(*(range(d) for d in dims)):
        lin = lu.linear_index(shape, idx)
        assert lin == _first_tile_reference(dims, m2m, tile, idx)
        offsets.add(lin)
    assert len(offsets) == len(list(itertools.product(*(range(d) for d in dims))))


def test_linear_index_untiled_is_row_major_in_physical_order():
    shape = arr("f32", (2, 3, 4), (0, 2, 1))
    for idx in itertools.product(range(2), range(3), range(4)):
        expected = (idx[1] * 4 + idx[2]) * 2 + idx[0]
        assert lu.linear_index(shape, idx) == expected


def test_linear_index_errors():
    s = arr("f32", (3, 4))
    with pytest.raises(ShapeIndexError, match="index 4 is out of bounds for axis 1 with size 4"):
        lu.linear_index(s, (0, 4))
    with pytest.raises(ShapeIndexError, match="index -1 is out of bounds for axis 0 with size 3"):
        lu.linear_index(s, (-1, 0))
    with pytest.raises(ShapeIndexError, match="has 3 entries"):
        lu.linear_index(s, (0, 0, 0))
    with pytest.raises(InvalidShapeError, match="does not support combined \\('\\*'\\) tile"):
        lu.linear_index(arr("bf16", (2, 3, 8), tiles=[(2, "*", 8)]), (0, 0, 0))
    with pytest.raises(InvalidShapeError, match="layout has invalid tiles: f32\\[3,4\\]"):
        lu.linear_index(arr("f32", (3, 4), tiles=[(0, 2)]), (0, 0))
    with pytest.raises(InvalidShapeError, match="is unbounded"):
        lu.linear_index(Shape("f32", (UNBOUNDED_SIZE, 4), Layout((1, 0))), (0, 0))
    with pytest.raises(InvalidShapeError, match="negative size -3"):
        lu.linear_index(Shape("f32", (-3, 4), Layout((1, 0))), (0, 0))
    with pytest.raises(InvalidShapeError, match="not a permutation of the 2 dimensions"):
        lu.linear_index(Shape("f32", (3, 4), Layout((0,))), (0, 0))
    with pytest.raises(ShapeTypeError, match="index must be a sequence of ints, got int"):
        lu.linear_index(s, 5)
    with pytest.raises(InvalidShapeError, match="needs an array shape, got \\(\\)"):
        lu.linear_index(Shape.tuple(), ())


# -- splits ----------------------------------------------------------------------------
def _split_shape():
    return Shape("f32", (150, 200, 100),
                 Layout((0, 1, 2), split_configs=[SplitConfig(0, (30,)),
                                                  SplitConfig(1, (40, 130))]))


def test_max_split_size():
    # MaxSplitSize: split configs name *physical* dims (0 = major-most = dim 2 here).
    s = _split_shape()
    assert [lu.max_split_size(s, d) for d in range(3)] == [150, 90, 70]
    assert lu.max_split_size(arr("f32", (150, 200)), 1) == 200
    assert lu.max_split_size(Shape("f32", (7, 9)), 1) == 9   # no layout


def test_max_elements_in_per_split():
    # MaxElementsInPerSplit
    assert lu.max_elements_in_per_split(arr("f32", (150, 200, 100), (0, 1, 2))) == 150 * 200 * 100
    assert lu.max_elements_in_per_split(_split_shape()) == 150 * 90 * 70


def test_split_errors_and_get_split_config():
    with pytest.raises(ShapeIndexError, match="dimension 3 is out of range for f32\\[150,200,100\\]"):
        lu.max_split_size(_split_shape(), 3)
    bad = Shape("f32", (4, 4), Layout((1, 0), split_configs=[SplitConfig(5, (2,))]))
    with pytest.raises(InvalidShapeError, match="names physical dimension 5"):
        lu.max_split_size(bad, 0)
    with pytest.raises(InvalidShapeError, match="at most one split config"):
        lu.get_split_config(_split_shape())
    one = Shape("f32", (4, 4), Layout((1, 0), split_configs=[SplitConfig(0, (2,))]))
    assert lu.get_split_config(one) == SplitConfig(0, (2,))
    assert lu.get_split_config(arr("f32", (4,))) is None


def test_memory_space():
    assert lu.memory_space(arr("f32", (4,), memory_space=5)) == 5
    assert lu.memory_space(Shape("f32", (4,))) == 0
    assert lu.memory_space(Shape.token()) == 0


# -- DeleteDimension -------------------------------------------------------------------
def test_delete_dimension_renumbers_and_keeps_tiles():
    lay = Layout((2, 0, 1), tiles=[(8, 128)])
    out = lu.delete_dimension(lay, 1)
    assert out.minor_to_major == (1, 0)
    assert out.tiles == (Tile(8, 128),)  # quirk: tiles untouched
    assert lu.delete_dimension(Layout((0,)), 0) == Layout(())
    with pytest.raises(ShapeIndexError, match="dimension 3 is not in layout"):
        lu.delete_dimension(lay, 3)


def test_delete_dimension_drops_padded_entry():
    lay = Layout((1, 0), padded_dimensions=(4, 8))
    assert lu.delete_dimension(lay, 0).padded_dimensions == (8,)


def test_equal_and_human_string():
    a = Layout((1, 0), dynamic_shape_metadata_prefix_bytes=8)
    assert lu.equal(a, Layout((1, 0)))  # M(n) is not compared
    assert not lu.equal(a, Layout((0, 1)))
    assert lu.human_string(Layout((1, 0), tiles=[(8, 128)])) == "{1,0:T(8,128)}"
    with pytest.raises(ShapeTypeError, match="expected a Layout or HLO layout text, got int"):
        lu.equal(3, a)


def test_position_in_container():
    assert lu.position_in_container((3, 1, 2), 2) == 2
    with pytest.raises(ShapeIndexError, match="5 is not in \\[3, 1, 2\\]"):
        lu.position_in_container((3, 1, 2), 5)


# -- buffers, missing layouts, HLO text -----------------------------------------------------
def test_buffer_branches():
    inner = arr("bf16", (16, 256), tiles=[(8, 128)], element_size_in_bits=16)
    b = Shape.buffer(inner)
    assert lu.get_default_layout_for_shape(b) == Layout((1, 0))
    assert lu.clear_tiles(b).buffer_shape.layout == Layout((1, 0), element_size_in_bits=16)
    assert lu.has_layout(b) and lu.has_any_layout(b)
    assert not lu.has_layout(Shape.buffer(Shape("f32", (2,))))
    assert lu.has_custom_element_size_in_bits(b)
    assert lu.layouts_in_shapes_equal(b, inner) and lu.layouts_in_shapes_equal(inner, b)
    out = lu.copy_layout_between_shapes(Shape.buffer(arr("f32", (2, 3), (0, 1))),
                                        Shape.buffer(arr("f32", (2, 3))))
    assert out.buffer_shape.layout == Layout((0, 1))
    assert lu.memory_space(Shape.buffer(arr("f32", (2,), memory_space=1))) == 1


def test_layout_of_shape_without_layout():
    with pytest.raises(InvalidShapeError, match="shape f32\\[2\\] does not have a layout"):
        lu.is_monotonic_with_dim0_major(Shape("f32", (2,)))


def test_hlo_text_goes_through_the_parser(monkeypatch):
    import xlashape._shared as shared

    monkeypatch.setattr(shared, "parse_layout", lambda text: Layout((0, 1)))
    monkeypatch.setattr(shared, "parse_shape", lambda text: arr("f32", (2, 3), (0, 1)))
    assert lu.minor_to_major("{0,1}") == (0, 1)
    assert lu.is_monotonic_with_dim0_minor("{0,1}")
    assert lu.minor_to_major("f32[2,3]{0,1}") == (0, 1)
    assert lu.human_string("{0,1}") == "{0,1}"


# -- the nested-tiling functions (XLA's names for the full tiled model) -----------------------
def test_linear_index_for_nested_tiling_round_trip_1d():
    # LinearIndexForNestedTilingRoundTrip1D: bf16[2048]{0:T(1024)(128)(2,1)}
    s = arr("bf16", (2048,), tiles=[(1024,), (128,), (2, 1)])
    assert lu.linear_index_for_nested_tiling(s, (0,)) == 0
    assert lu.linear_index_for_nested_tiling(s, (128,)) == 1
    assert lu.delinearize_index_for_nested_tiling(s, 1) == (128,)
    assert lu.linear_index_for_nested_tiling(s, (1,)) == 2
    assert lu.delinearize_index_for_nested_tiling(s, 2) == (1,)


def test_linear_index_for_nested_tiling_round_trip_2d():
    # LinearIndexForNestedTilingRoundTrip2D: bf16[2,8,128]{2,1,0:T(8,128)(2,1)}
    s = arr("bf16", (2, 8, 128), tiles=[(8, 128), (2, 1)])
    assert lu.linear_index_for_nested_tiling(s, (0, 0, 0)) == 0
    assert lu.delinearize_index_for_nested_tiling(s, 0) == (0, 0, 0)
    assert lu.linear_index_for_nested_tiling(s, (0, 2, 0)) == 256
    assert lu.delinearize_index_for_nested_tiling(s, 256) == (0, 2, 0)


def test_linear_index_for_nested_tiling_with_and_without_tiles():
    # LinearIndexWithAndWithoutTiles: element 13 of f32[8,4] is at 11 tiled by (2,2).
    assert lu.linear_index_for_nested_tiling(arr("f32", (8, 4), tiles=[(2, 2)]), (3, 1)) == 11
    assert lu.linear_index_for_nested_tiling(arr("f32", (8, 4)), (3, 1)) == 13
    # Where the two differ: the sub-tile of bf16 (8,128)(2,1) (spec §11).
    s = arr("bf16", (16, 256), tiles=[(8, 128), (2, 1)])
    assert lu.linear_index_for_nested_tiling(s, (1, 0)) == 1
    assert lu.linear_index(s, (1, 0)) == 128
    with pytest.raises(IndexError):
        lu.linear_index_for_nested_tiling(s, (16, 0))
