"""IndexUtil: golden values from XLA's xla/index_util_test.cc and spec §9.

Shapes are built with the constructors (not the HLO parser) so these tests do
not depend on it. Note (spec §9): XLA's tests `MatrixIndexingRowMajor` /
`MatrixIndexingColumnMajor` have {0,1}/{1,0} the wrong way round in their
names; the data below goes by the numbers.
"""

import itertools

import pytest

from xlashape import (
    InvalidShapeError,
    Layout,
    Shape,
    ShapeIndexError,
    ShapeTypeError,
    UNBOUNDED_SIZE,
    Tile,
)
from xlashape import index_util as iu


def arr(et, dims, m2m=None, **layout_kw):
    if m2m is None:
        m2m = tuple(range(len(dims) - 1, -1, -1))
    return Shape(et, dims, Layout(m2m, **layout_kw))


# (shape dims, minor_to_major, index, linear) -- each row cites its XLA test.
GOLDEN = [
    ((100,), (0,), (42,), 42),                          # VectorIndexing
    ((10, 20), (0, 1), (0, 0), 0),                      # MatrixIndexingRowMajor ({0,1})
    ((10, 20), (0, 1), (9, 19), 199),                   # MatrixIndexingRowMajor
    ((10, 20), (0, 1), (3, 5), 53),                     # MatrixIndexingRowMajor: a + b*10
    ((10, 20), (1, 0), (0, 0), 0),                      # MatrixIndexingColumnMajor ({1,0})
    ((10, 20), (1, 0), (9, 19), 199),                   # MatrixIndexingColumnMajor
    ((10, 20), (1, 0), (3, 5), 65),                     # MatrixIndexingColumnMajor: a*20 + b
    ((10, 20, 30), (2, 1, 0), (3, 5, 7), 1957),         # ThreeDArrayIndexing210
    ((10, 20, 30), (2, 1, 0), (8, 15, 27), 5277),       # ThreeDArrayIndexing210
    ((10, 20, 30), (1, 2, 0), (3, 5, 7), 1945),         # ThreeDArrayIndexing120
    ((10, 20, 30), (1, 2, 0), (8, 15, 27), 5355),       # ThreeDArrayIndexing120
    ((10, 20, 30, 40), (3, 2, 1, 0), (3, 5, 7, 9), 78289),      # FourDArrayIndexing3210
    ((10, 20, 30, 40), (3, 2, 1, 0), (8, 15, 27, 33), 211113),  # FourDArrayIndexing3210
]


@pytest.mark.parametrize("dims,m2m,index,linear", GOLDEN)
def test_multidimensional_to_linear_golden(dims, m2m, index, linear):
    assert iu.multidimensional_index_to_linear_index(arr("f32", dims, m2m), index) == linear


@pytest.mark.parametrize("dims,m2m,index,linear", GOLDEN)
def test_linear_to_multidimensional_golden(dims, m2m, index, linear):
    assert iu.linear_index_to_multidimensional_index(arr("f32", dims, m2m), linear) == index


@pytest.mark.parametrize("m2m", [(6, 5, 4, 3, 2, 1, 0), (0, 1, 2, 3, 4, 5, 6),
                                 (4, 5, 1, 2, 6, 0, 3)])
def test_linear_to_multi_to_linear(m2m):
    # LinearToMultiToLinear: 1440000000 elements, XLA's "randomly-ish" picks.
    shape = arr("f32", (10, 20, 30, 40, 30, 20, 10), m2m)
    for lin in (0, 1439999999, 1145567336, 43883404, 617295214, 1117613654):
        idx = iu.linear_index_to_multidimensional_index(shape, lin)
        assert iu.multidimensional_index_to_linear_index(shape, idx) == lin


def test_bump_indices_2x2():
    # BumpIndices2x2: logical odometer, last dimension fastest.
    shape = arr("s32", (2, 2))
    idx = (0, 0)
    seen = []
    while True:
        ok, new = iu.bump_indices(shape, idx)
        if not ok:
            assert new == idx == (1, 1)  # unchanged when it cannot advance
            break
        seen.append(new)
        idx = new
    assert seen == [(0, 1), (1, 0), (1, 1)]


def test_bump_indices_ignores_layout_and_resets_minor_dims():
    shape = arr("s32", (2, 3, 2), (0, 1, 2))  # layout must not matter
    assert iu.bump_indices(shape, (0, 2, 1)) == (True, (1, 0, 0))
    assert iu.bump_indices(shape, [0, 0, 0]) == (True, (0, 0, 1))
    # Visits every index in row-major order.
    idx, visited = (0, 0, 0), [(0, 0, 0)]
    while True:
        ok, idx2 = iu.bump_indices(shape, idx)
        if not ok:
            break
        idx = idx2
        visited.append(idx)
    assert visited == list(itertools.product(range(2), range(3), range(2)))


def test_bump_indices_scalar_and_empty():
    assert iu.bump_indices(arr("f32", ()), ()) == (False, ())


def test_round_trip_exhaustive_small_shapes():
    # Every index of small shapes under every permutation: the inverse maps agree
    # with an independent row-major computation over the physical order.
    dims = (2, 3, 4)
    for m2m in itertools.permutations(range(3)):
        shape = arr("f32", dims, m2m)
        major_to_minor = list(reversed(m2m))
        for idx in itertools.product(*(range(d) for d in dims)):
            expected = 0
            for d in major_to_minor:
                expected = expected * dims[d] + idx[d]
            lin = iu.multidimensional_index_to_linear_index(shape, idx)
            assert lin == expected
            assert iu.linear_index_to_multidimensional_index(shape, lin) == idx


def test_tiles_are_ignored():
    # IndexUtil never looks at tiles (spec §9, §14.5).
    plain = arr("f32", (3, 5), (1, 0))
    tiled = arr("f32", (3, 5), (1, 0), tiles=[Tile(2, 2)], element_size_in_bits=8,
                tail_padding_alignment_in_elements=16)
    for idx in itertools.product(range(3), range(5)):
        assert (iu.multidimensional_index_to_linear_index(tiled, idx)
                == iu.multidimensional_index_to_linear_index(plain, idx))
    # f32[3,5]{1,0:T(2,2)} element (2,3) is at 17 in the tiled model, 13 here.
    assert iu.multidimensional_index_to_linear_index(tiled, (2, 3)) == 13


def test_scalar_linear_index():
    s = arr("f32", ())
    assert iu.multidimensional_index_to_linear_index(s, ()) == 0
    assert iu.linear_index_to_multidimensional_index(s, 0) == ()


def test_missing_layout_means_default_layout():
    s = Shape("f32", (10, 20))
    assert iu.multidimensional_index_to_linear_index(s, (3, 5)) == 65


def test_bounded_dynamic_uses_bound():
    s = Shape("f32", (4, 3), Layout((1, 0)), (True, False))
    assert iu.multidimensional_index_to_linear_index(s, (3, 2)) == 11


@pytest.mark.parametrize("m2m,dim,stride", [
    ((1, 2, 0), 0, 600), ((1, 2, 0), 1, 1), ((1, 2, 0), 2, 20),
    ((2, 1, 0), 0, 600), ((2, 1, 0), 1, 30), ((2, 1, 0), 2, 1),
])
def test_get_dimension_stride(m2m, dim, stride):
    # Independent: product of the sizes of the dims more minor in f32[10,20,30].
    assert iu.get_dimension_stride(arr("f32", (10, 20, 30), m2m), dim) == stride


def test_index_in_bounds():
    s = arr("f32", (2, 3))
    assert iu.index_in_bounds(s, (1, 2))
    assert not iu.index_in_bounds(s, (2, 0))
    assert not iu.index_in_bounds(s, (0, 3))
    assert not iu.index_in_bounds(s, (0,))           # wrong length
    assert not iu.index_in_bounds(s, (0, 0, 0))
    # XLA quirk: negative entries are not rejected.
    assert iu.index_in_bounds(s, (-1, -5))


@pytest.mark.parametrize("lhs,rhs,expected", [
    ((1, 2), (1, 3), -1),
    ((1, 3), (1, 2), 1),     # lhs larger -> +1 (the XLA header comment says -1)
    ((2, 0), (1, 9), 1),
    ((0, 9), (1, 0), -1),
    ((4, 4), (4, 4), 0),
    ((), (), 0),
])
def test_compare_indices(lhs, rhs, expected):
    assert iu.compare_indices(lhs, rhs) == expected


# -- error paths ---------------------------------------------------------------
def test_out_of_bounds_index_raises():
    s = arr("f32", (3, 4))
    with pytest.raises(ShapeIndexError, match="index 7 is out of bounds for axis 1 with size 4"):
        iu.multidimensional_index_to_linear_index(s, (0, 7))
    with pytest.raises(IndexError, match="index -1 is out of bounds for axis 0 with size 3"):
        iu.multidimensional_index_to_linear_index(s, (-1, 0))
    with pytest.raises(ShapeIndexError, match="index \\[0\\] has 1 entries but the shape f32\\[3,4\\] has 2 dimensions"):
        iu.multidimensional_index_to_linear_index(s, (0,))
    with pytest.raises(ShapeIndexError, match="out of bounds for axis 1"):
        iu.bump_indices(s, (0, 4))


def test_linear_index_out_of_range_raises():
    s = arr("f32", (3, 4))
    with pytest.raises(ShapeIndexError, match="linear index 12 is out of bounds for f32\\[3,4\\] with 12"):
        iu.linear_index_to_multidimensional_index(s, 12)
    with pytest.raises(ShapeIndexError, match="linear index -1"):
        iu.linear_index_to_multidimensional_index(s, -1)
    with pytest.raises(ShapeIndexError, match="with 0 elements"):
        iu.linear_index_to_multidimensional_index(arr("f32", (0, 4)), 0)


def test_get_dimension_stride_out_of_range():
    with pytest.raises(ShapeIndexError, match="dimension 3 is out of range"):
        iu.get_dimension_stride(arr("f32", (2, 3, 4)), 3)
    with pytest.raises(ShapeIndexError, match="dimension -1 is out of range"):
        iu.get_dimension_stride(arr("f32", (2, 3, 4)), -1)


def test_compare_indices_length_mismatch():
    with pytest.raises(ShapeIndexError, match="different lengths"):
        iu.compare_indices((1, 2), (1,))


def test_type_errors():
    s = arr("f32", (3, 4))
    with pytest.raises(ShapeTypeError, match="index entry must be an int, got float"):
        iu.multidimensional_index_to_linear_index(s, (0, 1.0))
    with pytest.raises(ShapeTypeError, match="must be an int, got bool"):
        iu.multidimensional_index_to_linear_index(s, (0, True))
    with pytest.raises(ShapeTypeError, match="must be a sequence of ints, got int"):
        iu.multidimensional_index_to_linear_index(s, 3)
    with pytest.raises(ShapeTypeError, match="lhs must be a sequence of ints, got str"):
        iu.compare_indices("12", (1, 2))
    with pytest.raises(ShapeTypeError, match="linear_index must be an int"):
        iu.linear_index_to_multidimensional_index(s, "3")
    with pytest.raises(ShapeTypeError, match="expected a Shape or HLO shape text, got list"):
        iu.index_in_bounds([3, 4], (0, 0))
    with pytest.raises(ShapeTypeError, match="dimension must be an int"):
        iu.get_dimension_stride(s, 0.5)


def test_numpy_integers_accepted():
    np = pytest.importorskip("numpy")
    s = arr("f32", (10, 20), (0, 1))
    assert iu.multidimensional_index_to_linear_index(s, np.array([3, 5])) == 53
    assert iu.linear_index_to_multidimensional_index(s, np.int64(53)) == (3, 5)


def test_non_array_and_bad_layout_rejected():
    with pytest.raises(InvalidShapeError, match="needs an array shape, got token\\[\\]"):
        iu.multidimensional_index_to_linear_index(Shape.token(), ())
    bad = Shape("f32", (2, 3), Layout((0, 0)))
    with pytest.raises(InvalidShapeError, match="is not a permutation of the 2 dimensions"):
        iu.multidimensional_index_to_linear_index(bad, (0, 0))
    unbounded = Shape("f32", (UNBOUNDED_SIZE, 3), Layout((1, 0)))
    with pytest.raises(InvalidShapeError, match="is unbounded"):
        iu.linear_index_to_multidimensional_index(unbounded, 0)
    negative = Shape("f32", (-2, 3), Layout((1, 0)))
    with pytest.raises(InvalidShapeError, match="negative size -2"):
        iu.get_dimension_stride(negative, 0)


def test_buffer_shape_uses_inner_array():
    b = Shape.buffer(arr("f32", (10, 20), (0, 1)))
    assert iu.multidimensional_index_to_linear_index(b, (3, 5)) == 53
