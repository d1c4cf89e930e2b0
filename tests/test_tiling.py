"""The tiled-layout model (xlashape.tiling): golden values and error paths.

Golden values come from XLA's documentation (the tiled-layout doc's worked
examples, the seeds' padding example), from XLA's ``ShapeUtil::ArraySize``
computed independently here from spec §8.4, and from real TPU out-of-memory
reports quoted in public issues. Nothing here is derived from running the code
under test.
"""

import math

import numpy as np
import pytest

from xlashape import (
    InvalidShapeError,
    Layout,
    Shape,
    parse_shape,
    ShapeIndexError,
    ShapeTypeError,
    Tile,
    UNBOUNDED_SIZE,
)
from xlashape.tiling import (
    format_bytes,
    format_expansion,
    linear_index,
    linear_indices,
    multidimensional_index,
    multidimensional_indices,
    physical_dimensions,
    physical_element_count,
    physical_size_in_bytes,
    plan,
    strides,
)
from xlashape._core import CompiledPlan
from xlashape.padding import padding_report
from xlashape import index_maps, tiling

# The bulk maps exist twice with the same contract: the numpy model in
# tiling and the compiled programs in index_maps. Their tests run on both.
BULK = pytest.mark.parametrize("bulk", [tiling, index_maps], ids=["tiling", "index_maps"])


def S(element_type, dims, m2m=None, tiles=(), **layout_fields):
    """A shape with a layout, without going through the text parser."""
    if m2m is None:
        m2m = tuple(range(len(dims) - 1, -1, -1))
    return Shape(element_type, tuple(dims), Layout(tuple(m2m), tiles=tiles, **layout_fields))


def all_indices(dims):
    return list(np.ndindex(*dims)) if dims else [()]


# -- the tiled-layout doc's worked examples ---------------------------------------

def test_figure1_element_2_3_and_total():
    s = S("f32", (3, 5), (1, 0), [(2, 2)])
    assert physical_dimensions(s) == (2, 3, 2, 2)
    assert linear_index(s, (2, 3)) == 17
    assert physical_element_count(s) == 24
    assert physical_size_in_bytes(s) == 96
    assert multidimensional_index(s, 17) == (2, 3)


def test_figure1_nine_padding_slots():
    s = S("f32", (3, 5), (1, 0), [(2, 2)])
    slots = [multidimensional_index(s, i) for i in range(24)]
    assert slots.count(None) == 9
    assert sorted(x for x in slots if x is not None) == all_indices((3, 5))


def test_figure2_memory_grid():
    s = S("f32", (4, 8), (1, 0), [(2, 4), (2, 1)])
    grid = [[linear_index(s, (i, j)) for j in range(8)] for i in range(4)]
    assert grid == [
        list(range(0, 16, 2)),
        list(range(1, 16, 2)),
        list(range(16, 32, 2)),
        list(range(17, 32, 2)),
    ]
    assert physical_dimensions(s) == (2, 2, 1, 4, 2, 1)


def test_combined_dimension_example():
    s = S("f32", (2, 7, 8, 11, 10), (4, 3, 2, 1, 0), [("*", "*", 2, "*", 3)])
    assert physical_dimensions(s) == (56, 37, 2, 3)
    # [112, 110] tiled by (2, 3): element (a,b,c,d,e) is at row (a*7+b)*8+c,
    # column d*10+e of the combined 112 x 110 matrix.
    for idx in [(0, 0, 0, 0, 0), (1, 6, 7, 10, 9), (1, 2, 3, 4, 5), (0, 5, 1, 9, 2)]:
        a, b, c, d, e = idx
        row, col = (a * 7 + b) * 8 + c, d * 10 + e
        expected = ((row // 2) * 37 + col // 3) * 6 + (row % 2) * 3 + col % 3
        assert linear_index(s, idx) == expected


def test_sub_tile_padding_counts_144_bytes():
    # spec §11: ArraySize says 96, the model counts the second level's padding
    s = S("f32", (3, 5), (1, 0), [(2, 2), (3, 1)])
    assert physical_size_in_bytes(s) == 144


def test_sub_tile_linear_index_differs_from_first_tile_only():
    # spec §11: bf16[16,256]{1,0:T(8,128)(2,1)} element (1,0) is at 1
    s = S("bf16", (16, 256), (1, 0), [(8, 128), (2, 1)])
    assert linear_index(s, (1, 0)) == 1
    assert physical_dimensions(s) == (2, 2, 4, 128, 2, 1)


def test_seeds_padded_dimensions_column_major():
    # seeds: [2 x 3] padded to [3, 5], column-major:  a d 0 b e 0 c f 0 0 0 0 0 0 0
    s = S("f32", (2, 3), (0, 1), padded_dimensions=(3, 5))
    names = {(0, 0): "a", (0, 1): "b", (0, 2): "c", (1, 0): "d", (1, 1): "e", (1, 2): "f"}
    memory = ["0"] * physical_element_count(s)
    for idx, name in names.items():
        memory[linear_index(s, idx)] = name
    assert " ".join(memory) == "a d 0 b e 0 c f 0 0 0 0 0 0 0"
    assert multidimensional_index(s, 2) is None
    assert multidimensional_index(s, 4) == (1, 1)


# -- XLA's ArraySize (spec §8.4), computed independently --------------------------

def xla_array_size(dims, m2m, tile, bytes_per_element=None, bits=None, tail=1):
    """ShapeUtil::ArraySize with one (first) tile, no split configs."""
    n, k = len(dims), len(tile)
    count = 1
    for j in range(k):
        d = dims[m2m[j]] if j < n else 1
        t = tile[k - 1 - j]
        count *= -(-d // t) * t
    for j in range(k, n):
        count *= dims[m2m[j]]
    count = -(-count // tail) * tail
    if bits:
        return -(-count * bits // 8)
    return count * bytes_per_element


TPU_FORMATS = [
    ("f32", [(8, 128)], None),
    ("f32", [(2, 128)], None),
    ("f32", [(4, 128)], None),
    ("bf16", [(8, 128), (2, 1)], None),
    ("s8", [(8, 128), (4, 1)], None),
    ("s4", [(8, 128), (8, 1)], 4),
    ("f32", [(1024,)], None),
    ("f32", [(128,)], None),
    ("f32", [(256,)], None),
]


@pytest.mark.parametrize("et,tiles,ebits", TPU_FORMATS)
@pytest.mark.parametrize("dims", [(1,), (5,), (300,), (3, 5), (16, 256), (9, 130), (2, 1, 7),
                                  (4, 33, 129), ()])
def test_tpu_formats_match_xla_array_size(et, tiles, ebits, dims):
    m2m = tuple(range(len(dims) - 1, -1, -1))
    kw = {"element_size_in_bits": ebits} if ebits else {}
    s = S(et, dims, m2m, tiles, **kw)
    width = Shape(et, ()).element_type.byte_width
    expected = xla_array_size(dims, m2m, tiles[0], bytes_per_element=width, bits=ebits)
    assert physical_size_in_bytes(s) == expected


@pytest.mark.parametrize("tail", [1, 3, 16, 1000])
def test_tail_padding_matches_array_size(tail):
    s = S("f32", (9, 130), (0, 1), [(8, 128)], tail_padding_alignment_in_elements=tail)
    assert physical_size_in_bytes(s) == xla_array_size((9, 130), (0, 1), (8, 128), 4, tail=tail)


def test_sub_byte_packing_rounds_up_to_whole_bytes():
    assert physical_size_in_bytes(S("s4", (3, 5), element_size_in_bits=4)) == 8
    assert physical_size_in_bytes(S("s4", (3, 5))) == 15  # one byte each without E
    assert physical_size_in_bytes(S("pred", (3,), element_size_in_bits=1)) == 1


def test_default_layout_for_shapes_without_one():
    s = Shape("f32", (3, 5))
    assert linear_index(s, (1, 2)) == 7
    assert strides(s) == (20, 4)


# -- strides -----------------------------------------------------------------

@pytest.mark.parametrize("shape,expected", [
    (S("f32", (3, 5)), (20, 4)),
    (S("f32", (3, 5), (0, 1)), (4, 12)),
    (S("f32", (3, 5, 7), (1, 2, 0)), (140, 4, 20)),
    (S("f32", (3, 5), (1, 0), [(4, 8)]), (32, 4)),          # one tile, no split
    (S("f32", (3, 5), (1, 0), [(1, 1)]), (20, 4)),          # tiles of 1
    (S("f32", (16, 128), (1, 0), [(8, 128)]), (512, 4)),     # full-width rows
    (S("f32", (3, 4), (1, 0), [("*", 4)]), (16, 4)),         # combined, aligned
    (S("f32", (2, 3), (0, 1), padded_dimensions=(3, 5)), (4, 12)),
    (S("s8", (4, 5)), (5, 1)),
    (S("s4", (4, 5)), (5, 1)),                               # a byte each without E
    (S("f32", ()), ()),
    # above the exhaustive-verification limit: the symbolic analysis alone
    (S("f32", (1024, 128), (1, 0), [(8, 128)]), (512, 4)),
    (S("f32", (4096, 5), (1, 0), [(8, 8)]), (32, 4)),
    (S("bf16", (3, 4096, 4), (2, 1, 0), [("*", 8, 4)]), (4096 * 8, 8, 2)),
    (S("f32", (5000,), (0,), [(128,)]), (4,)),
])
def test_strides_when_expressible(shape, expected):
    assert strides(shape) == expected
    rng = np.random.default_rng(0)
    idxs = all_indices(shape.dimensions)
    if len(idxs) > 2000:
        idxs = [idxs[k] for k in rng.choice(len(idxs), 2000, replace=False)]
    for idx in idxs:
        bytes_at = sum(i * st for i, st in zip(idx, expected))
        assert bytes_at == linear_index(shape, idx) * shape.element_type.byte_width


@pytest.mark.parametrize("shape", [
    S("f32", (3, 5), (1, 0), [(2, 2)]),
    S("bf16", (16, 256), (1, 0), [(8, 128), (2, 1)]),
    S("s4", (4, 6), element_size_in_bits=4),
    S("f32", (3, 5), element_size_in_bits=64),
    S("f32", (256,), (0,), [(2, 128)]),
])
def test_strides_none_when_not_expressible(shape):
    assert strides(shape) is None


# -- vectorized forms -------------------------------------------------------------

@BULK
def test_linear_indices_figure1(bulk):
    s = S("f32", (3, 5), (1, 0), [(2, 2)])
    idx = np.array(all_indices((3, 5)))
    out = bulk.linear_indices(s, idx)
    assert out.dtype == np.int64
    assert out.tolist() == [linear_index(s, tuple(i)) for i in idx]
    assert bulk.linear_indices(s, idx.astype(np.uint8)).tolist() == out.tolist()
    assert bulk.linear_indices(s, [[2, 3]]).tolist() == [17]
    assert bulk.linear_indices(s, [2, 3]).tolist() == 17  # a single (rank,) row
    assert bulk.linear_indices(s, idx.reshape(3, 5, 2)).shape == (3, 5)


@BULK
def test_multidimensional_indices_figure1(bulk):
    s = S("f32", (3, 5), (1, 0), [(2, 2)])
    out, pad = bulk.multidimensional_indices(s, np.arange(24))
    assert out.shape == (24, 2) and pad.shape == (24,) and pad.dtype == np.bool_
    assert int(pad.sum()) == 9
    assert out[17].tolist() == [2, 3]
    assert (out[pad] == -1).all()
    out2, pad2 = bulk.multidimensional_indices(s, np.arange(24).reshape(4, 6))
    assert out2.shape == (4, 6, 2) and pad2.shape == (4, 6)


@BULK
def test_vectorized_empty_inputs(bulk):
    s = S("f32", (3, 5), (1, 0), [(2, 2)])
    assert bulk.linear_indices(s, np.zeros((0, 2), np.int64)).shape == (0,)
    out, pad = bulk.multidimensional_indices(s, np.zeros(0, np.int64))
    assert out.shape == (0, 2) and pad.shape == (0,)


@BULK
def test_vectorized_scalar_shape_with_tail_padding(bulk):
    s = S("f32", (), (), tail_padding_alignment_in_elements=4)
    assert bulk.linear_indices(s, np.zeros((3, 0), np.int64)).tolist() == [0, 0, 0]
    out, pad = bulk.multidimensional_indices(s, [0, 1, 3])
    assert out.shape == (3, 0)
    assert pad.tolist() == [False, True, True]


def test_compiled_plan_offset_matches_reference():
    s = S("bf16", (16, 256), (1, 0), [(8, 128), (2, 1)])
    cp = CompiledPlan(plan(s))
    maps = index_maps.compiled_maps(s)
    for idx in [(0, 0), (1, 0), (15, 255), (7, 129)]:
        assert cp.offset(idx) == linear_index(s, idx)
        assert maps.offset(idx) == linear_index(s, idx)
    with pytest.raises(ShapeIndexError, match="index 16 is out of bounds for axis 0 with size 16"):
        maps.offset((16, 0))
    with pytest.raises(ShapeIndexError, match=r"index \[1\] has 1 entries but the shape bf16\[16,256\] has 2 dimensions"):
        maps.offset((1,))


# -- error paths -------------------------------------------------------------------

F1 = S("f32", (3, 5), (1, 0), [(2, 2)])


@pytest.mark.parametrize("idx,fragment", [
    ((3, 0), "index 3 is out of bounds for axis 0 with size 3"),
    ((0, 5), "index 5 is out of bounds for axis 1 with size 5"),
    ((-1, 0), "index -1 is out of bounds for axis 0 with size 3"),
    ((0,), r"index \[0\] has 1 entries but the shape f32\[3,5\] has 2 dimensions"),
    ((0, 0, 0), r"index \[0, 0, 0\] has 3 entries but the shape f32\[3,5\] has 2 dimensions"),
])
def test_linear_index_errors(idx, fragment):
    with pytest.raises(ShapeIndexError, match=fragment):
        linear_index(F1, idx)
    assert issubclass(ShapeIndexError, IndexError)


@pytest.mark.parametrize("idx,fragment", [
    ((0.5, 0), "index entry must be an int, got float 0.5 at axis 0"),
    ((0, True), "index entry must be an int, got bool True at axis 1"),
    (object(), "index must be a sequence of ints, got object"),
])
def test_linear_index_type_errors(idx, fragment):
    with pytest.raises(ShapeTypeError, match=fragment):
        linear_index(F1, idx)


def test_multidimensional_index_errors():
    with pytest.raises(ShapeIndexError, match="linear index 24 is out of bounds for a buffer of 24"):
        multidimensional_index(F1, 24)
    with pytest.raises(ShapeIndexError, match="linear index -1 is out of bounds"):
        multidimensional_index(F1, -1)
    with pytest.raises(ShapeTypeError, match="linear index must be an int, got float"):
        multidimensional_index(F1, 1.0)


@BULK
@pytest.mark.parametrize("rows,fragment", [
    ([[0, 0], [3, 1]], r"index 3 is out of bounds for axis 0 with size 3 \(row 1 of the indices\)"),
    ([[0, 0], [1, 1], [2, -1]], r"index -1 is out of bounds for axis 1 with size 5 \(row 2"),
    ([[0, 0, 0]], r"indices must have shape \(N, 2\)"),
    (np.zeros((4, 1), np.int64), r"got shape \(4, 1\)"),
    (5, r"got shape \(\)"),
    (np.array([[2**63, 0]], dtype=np.uint64), "does not fit in int64"),
    ([[2**70, 0]], "does not fit in int64"),
])
def test_linear_indices_errors(bulk, rows, fragment):
    with pytest.raises(ShapeIndexError, match=fragment):
        bulk.linear_indices(F1, rows)


@BULK
@pytest.mark.parametrize("rows,fragment", [
    (np.array([[0.0, 1.0]]), "indices must be an integer array, got dtype float64"),
    (np.array([[True, False]]), "indices must be an integer array, got dtype bool"),
    ([[0, "a"]], "indices must be an integer array, got dtype <U21"),
    (np.array([[0, 1.5]], dtype=object), "indices must be integers, got float at position 1"),
])
def test_linear_indices_type_errors(bulk, rows, fragment):
    with pytest.raises(ShapeTypeError, match=fragment):
        bulk.linear_indices(F1, rows)


@BULK
def test_multidimensional_indices_errors(bulk):
    with pytest.raises(ShapeIndexError,
                       match=r"linear index 24 is out of bounds for a buffer of 24 elements \(entry 2\)"):
        bulk.multidimensional_indices(F1, [0, 5, 24])
    with pytest.raises(ShapeIndexError, match=r"linear index -3 is out of bounds.*\(entry 0\)"):
        bulk.multidimensional_indices(F1, [-3])
    with pytest.raises(ShapeTypeError, match="linear indices must be an integer array"):
        bulk.multidimensional_indices(F1, [0.5])


@BULK
@pytest.mark.parametrize("shape,fragment", [
    (Shape("f32", (3, 5), Layout((0,))),
     r"layout \{0\} is not a permutation of the 2 dimensions of f32\[3,5\]"),
    (Shape("f32", (3, 5), Layout((0, 0))),
     r"layout \{0,0\} is not a permutation of the 2 dimensions of f32\[3,5\]"),
    (Shape("f32", (3, -1), Layout((1, 0))), "dimension 1 of f32\\[3,-1\\] has negative size -1"),
    (Shape("f32", (3, 5), Layout((1, 0), tiles=[(2, 0)])), "layout has invalid tiles"),
    (Shape("f32", (3, 5), Layout((1, 0), tiles=[(2, "*")])), "ends with '\\*'"),
    (Shape("f32", (3, 5), Layout((1, 0), padded_dimensions=(2, 5))),
     "padded_dimensions\\[0\\] is 2, smaller than dimension 0 of size 3"),
    (Shape("f32", (3, 5), Layout((1, 0), element_size_in_bits=-4)),
     "element_size_in_bits field is negative"),
    (Shape.tuple([Shape("f32", (3,))]), "is not an array shape"),
    (Shape("f32", (3, UNBOUNDED_SIZE)), "unbounded dynamic dimension"),
])
def test_invalid_layouts(bulk, shape, fragment):
    with pytest.raises(InvalidShapeError, match=fragment):
        plan(shape)
    with pytest.raises(InvalidShapeError, match=fragment):
        bulk.linear_indices(shape, np.zeros((1, len(shape.dimensions)), np.int64))
    with pytest.raises(InvalidShapeError, match=fragment):
        padding_report(shape)


@BULK
def test_bad_shape_types(bulk):
    with pytest.raises(ShapeTypeError, match="expected a Shape or HLO shape text, got int"):
        plan(3)
    with pytest.raises(ShapeTypeError, match="expected a Shape or HLO shape text, got list"):
        bulk.linear_indices([3, 5], [[0, 0]])


@BULK
def test_offsets_beyond_int64_are_refused(bulk):
    s = S("f32", (2**40, 2**40))
    with pytest.raises(InvalidShapeError, match="offsets beyond int64"):
        bulk.linear_indices(s, [[0, 0]])
    with pytest.raises(InvalidShapeError, match="offsets beyond int64"):
        bulk.multidimensional_indices(s, [0])


# -- sizes in XLA's words ------------------------------------------------------------

@pytest.mark.parametrize("n,text", [
    (0, "0B"), (96, "96B"), (1023, "1023B"), (1024, "1.0K"), (4096, "4.0K"),
    (512 * 1024, "512.0K"), (2**20, "1.00M"), (2**30, "1.00G"), (32 * 2**30, "32.00G"),
    (int(61.25 * 2**20), "61.25M"), (int(15.48 * 2**30), "15.48G"), (-2048, "-2.0K"),
    (2**50, "1.00P"), (-(2**63), "-8E"),
    # XLA divides by 1024 as an integer before printing: 1 MiB - 1 is still "1024.0K"
    (2**20 - 1, "1024.0K"),
])
def test_format_bytes(n, text):
    assert format_bytes(n) == text


def test_format_expansion():
    assert format_expansion(32.0) == "32.0x expansion"
    assert format_expansion(64 / 61.25) == "1.0x expansion"
    assert format_expansion(math.inf) == "infx expansion"
    with pytest.raises(ShapeTypeError, match="expansion factor must be a number, got str"):
        format_expansion("32")
    with pytest.raises(ShapeTypeError, match="byte count must be an int, got float"):
        format_bytes(1.5)


# -- padding reports against real TPU out-of-memory reports ------------------------
# Each case: the shape and the "Size" / "Unpadded size" / "(Nx expansion)" lines
# of an XLA TPU memory report quoted in a public issue.

OOM_REPORTS = [
    # DifferentiableUniverseInitiative/flowpm#27
    (S("s32", (8388608, 8, 4), (2, 1, 0), [(8, 128)]), "32.00G", "1.00G", "31.00G", "32.0x"),
    # jax-ml/jax#7502
    (S("s32", (2048, 1, 128, 128, 4), (4, 3, 2, 0, 1), [(8, 128)]),
     "16.00G", "512.00M", "15.50G", "32.0x"),
    # pytorch/xla#3041
    (S("f32", (29184, 1, 2560), (2, 1, 0), [(2, 128)]), "570.00M", "285.00M", "285.00M", "2.0x"),
    # sokrypton/ColabFold#62
    (S("f32", (1024, 245, 64), (1, 2, 0), [(8, 128)]), "64.00M", "61.25M", "2.75M", "1.0x"),
]


@pytest.mark.parametrize("shape,size,unpadded,extra,expansion", OOM_REPORTS)
def test_padding_report_matches_xla_oom_reports(shape, size, unpadded, extra, expansion):
    r = padding_report(shape)
    assert format_bytes(r.padded_bytes) == size
    assert format_bytes(r.unpadded_bytes) == unpadded
    assert format_bytes(r.padding_bytes) == extra
    assert format_expansion(r.expansion) == expansion + " expansion"
    assert r.summary().splitlines()[2] == (
        f"Extra memory due to padding: {extra} ({expansion} expansion)")


def test_padding_report_sources_and_suggestion_for_32x():
    r = padding_report(OOM_REPORTS[0][0])
    assert r.physical_dimensions == (8388608, 1, 1, 8, 128)
    assert len(r.sources) == 1
    src = r.sources[0]
    assert (src.kind, src.level, src.dimensions, src.size, src.padded_size, src.factor) == (
        "tile", 0, (2,), 4, 128, 32.0)
    assert "dimension 2 has size 4" in src.description and "tiled by 128" in src.description
    # making dimension 0 (8388608) the most minor removes all padding
    assert any("would take 1.00G instead of 32.00G" in t for t in r.suggestions)


def test_padding_report_second_minor_size_one():
    r = padding_report(OOM_REPORTS[2][0])
    (src,) = r.sources
    assert src.dimensions == (1,) and src.factor == 2.0
    assert src.description == ("dimension 1 has size 1 but is the second-most-minor "
                               "dimension, tiled by 2: 2x")
    assert any("(1,128)" in t and "285.00M instead of 570.00M" in t for t in r.suggestions)


def test_padding_report_kinds_and_order():
    s = S("f32", (3, 5), (1, 0), [(2, 2)], tail_padding_alignment_in_elements=32,
          padded_dimensions=(3, 6))
    r = padding_report(s)
    kinds = [x.kind for x in r.sources]
    assert sorted(kinds) == ["padded_dimensions", "tail_padding", "tile"]
    factors = [x.factor for x in r.sources]
    assert factors == sorted(factors, reverse=True)
    pd = next(x for x in r.sources if x.kind == "padded_dimensions")
    assert (pd.dimensions, pd.size, pd.padded_size, pd.factor) == ((1,), 5, 6, 1.2)
    tail = next(x for x in r.sources if x.kind == "tail_padding")
    assert (tail.size, tail.padded_size) == (24, 32)
    assert "L(32)" in tail.description
    # 15 logical elements; 18 after padded_dimensions, 24 after the tile, 32 after L(32)
    assert math.isclose(math.prod(x.factor for x in r.sources), 32 / 15)
    assert r.expansion == 128 / 60


def test_padding_report_no_padding():
    r = padding_report(S("f32", (8, 128), (1, 0), [(8, 128)]))
    assert r.sources == () and r.suggestions == () and r.expansion == 1.0
    assert r.summary() == "Size: 4.0K\nUnpadded size: 4.0K"


def test_padding_report_element_size_source_is_outside_expansion():
    r = padding_report(S("s4", (3, 5)))
    assert r.expansion == 1.0
    (src,) = r.sources
    assert (src.kind, src.size, src.padded_size, src.factor) == ("element_size", 4, 8, 2.0)
    assert any("E(4)" in t and "8B instead of 15B" in t for t in r.suggestions)


def test_padding_report_scalar_tile_and_combined_dims():
    r = padding_report(S("f32", (), (), [(256,)]))
    (src,) = r.sources
    assert (src.kind, src.dimensions, src.size, src.padded_size) == ("tile", (), 1, 256)
    assert r.padded_bytes == 1024 and r.unpadded_bytes == 4
    r = padding_report(S("f32", (2, 7, 8, 11, 10), (4, 3, 2, 1, 0), [("*", "*", 2, "*", 3)]))
    (src,) = r.sources
    assert (src.dimensions, src.size, src.padded_size) == ((3, 4), 110, 111)
    assert "combined" in src.description


def test_padding_report_empty_array():
    r = padding_report(S("f32", (0, 5), (1, 0), [(8, 128)]))
    assert (r.unpadded_bytes, r.padded_bytes, r.expansion, r.sources) == (0, 0, 1.0, ())


def test_padding_report_padded_empty_dimension_is_infinite():
    r = padding_report(S("f32", (0,), (0,), padded_dimensions=(4,)))
    assert r.expansion == math.inf
    assert r.sources[0].factor == math.inf


def test_tile_object_accepted():
    s = S("f32", (3, 5), (1, 0), [Tile(2, 2)])
    assert linear_index(s, (2, 3)) == 17


def test_layout_too_complex_for_the_compiled_core():
    s = S("f32", (1,) * 65)
    assert linear_index(s, (0,) * 65) == 0  # the Python model has no limit
    assert tiling.linear_indices(s, np.zeros((1, 65), np.int64)).tolist() == [0]
    with pytest.raises(InvalidShapeError, match="rank 65 exceeds the compiled core's limit of 64"):
        index_maps.linear_indices(s, np.zeros((1, 65), np.int64))


def test_docstring_examples():
    import doctest

    result = doctest.testmod(tiling, optionflags=doctest.ELLIPSIS)
    assert result.attempted >= 10
    assert result.failed == 0


@BULK
def test_vectorized_accepts_read_only_and_strided_inputs(bulk):
    s = F1
    idx = np.array(all_indices((3, 5)), dtype=np.int64)
    expected = [linear_index(s, tuple(i)) for i in idx]
    ro = idx.copy()
    ro.setflags(write=False)
    assert bulk.linear_indices(s, ro).tolist() == expected
    strided = np.asfortranarray(idx)
    assert bulk.linear_indices(s, strided).tolist() == expected
    assert bulk.linear_indices(s, idx.T.copy().T).tolist() == expected
    lin = np.arange(24)[::2]
    out, pad = bulk.multidimensional_indices(s, lin)
    assert [None if p else tuple(o) for o, p in zip(out.tolist(), pad)] == [
        multidimensional_index(s, int(x)) for x in lin]


def test_absurd_tile_level_counts_are_refused_quickly():
    # 64 levels of T(1) still work: the first turns [3] into [3,1], each
    # later one tiles the trailing 1 and appends another, so the physical
    # dims are 3 followed by 64 ones and the elements stay at 0, 1, 2.
    ok = Shape("f32", (3,), Layout((0,), tiles=[Tile(1)] * 64))
    assert tiling.physical_dimensions(ok) == (3,) + (1,) * 64
    assert tiling.physical_element_count(ok) == 3
    assert [tiling.linear_index(ok, (i,)) for i in range(3)] == [0, 1, 2]
    # Far more levels would take quadratic time: refused with a clear error.
    many = Shape("f32", (3,), Layout((0,), tiles=[Tile(1)] * 100000))
    with pytest.raises(InvalidShapeError, match="100000 tile levels.*at most 64"):
        tiling.physical_size_in_bytes(many)


# -- the plan's public description of its tile levels --------------------------------

def test_tile_levels_of_the_seed_shape():
    # bf16[8,1,1280]{2,1,0:T(8,128)(2,1)}: T(8,128) covers dims 1 (size 1) and 2
    # (1280); the physical dims it leaves are [8, 1, 10, 8, 128] (dim 0, then the
    # tile counts, then the tile), and (2,1) covers the last two: the 8 rows that
    # came from dim 1 and the 128 columns that came from dim 2.
    p = plan("bf16[8,1,1280]{2,1,0:T(8,128)(2,1)}")
    first, second = p.tile_levels
    assert (first.index, str(first.tile), first.added_dimensions) == (0, "(8,128)", 0)
    assert [(e.inputs, e.input_sizes, e.size, e.tile_size, e.count, e.padded_size)
            for e in first.entries] == [(((1,),), (1,), 1, 8, 1, 8),
                                        (((2,),), (1280,), 1280, 128, 10, 1280)]
    assert (second.index, str(second.tile), second.added_dimensions) == (1, "(2,1)", 0)
    assert [(e.dimensions, e.size, e.tile_size, e.count) for e in second.entries] == [
        ((1,), 8, 2, 4), ((2,), 128, 1, 128)]
    assert p.physical_dimensions == (8, 1, 10, 4, 128, 2, 1)


def test_tile_levels_with_combined_and_added_dimensions():
    # T(*,8,128) on f32[2,3,128]: '*' combines dims 0 and 1 (2*3 = 6) into the
    # entry tiled by 8.
    (level,) = plan("f32[2,3,128]{2,1,0:T(*,8,128)}").tile_levels
    assert [(e.inputs, e.input_sizes, e.size, e.tile_size) for e in level.entries] == [
        (((0,), (1,)), (2, 3), 6, 8), (((2,),), (128,), 128, 128)]
    # A tile with more entries than the shape has dimensions adds size-1 ones.
    (level,) = plan("f32[5]{0:T(2,4)}").tile_levels
    assert level.added_dimensions == 1
    assert [(e.inputs, e.size, e.tile_size) for e in level.entries] == [
        (((),), 1, 2), (((0,),), 5, 4)]
    assert level.entries[0].dimensions == ()
    assert plan("f32[3,5]{1,0}").tile_levels == ()


@pytest.mark.parametrize("text,merged,transposed,size", [
    # 64 of 128 lanes used; 32 x 64 as one dimension of 2048 fills them all
    ("bf16[8,64,64,32]{2,3,1,0:T(8,128)(2,1)}", "bf16[8,64,2048]{2,1,0:T(8,128)(2,1)}", True,
     8 * 64 * 2048 * 2),
    ("f32[8,64,64,32]{3,2,1,0:T(8,128)}", "f32[8,64,2048]{2,1,0:T(8,128)}", False,
     8 * 64 * 2048 * 4),
    # 32 lanes of 128 still: 8388608 rows of 128 s32
    ("s32[8388608,8,4]{2,1,0:T(8,128)}", "s32[8388608,32]{1,0:T(8,128)}", False,
     8388608 * 128 * 4),
])
def test_padding_report_offers_merging_the_two_minor_most_dimensions(text, merged, transposed,
                                                                      size):
    r = padding_report(text)
    (offer,) = [t for t in r.suggestions if t.startswith("merge dimensions")]
    assert merged in offer
    assert ("a transpose and a reshape" in offer) == transposed
    m = parse_shape(merged)
    assert math.prod(m.dimensions) == math.prod(parse_shape(text).dimensions)
    assert offer.endswith(f"would take {format_bytes(size)} instead of "
                          f"{format_bytes(r.padded_bytes)}")


def test_padding_report_no_merge_offer_when_it_does_not_help():
    # 8 x 128 minor-most: nothing is padded, and a merge would not shrink it
    r = padding_report("f32[4,8,128]{2,1,0:T(8,128)}")
    assert not any(t.startswith("merge dimensions") for t in r.suggestions)


# --- a big tile size is analysed in milliseconds (found by the proto fuzzer:
# the minor-run analysis tried every number up to the tile size as a divisor)

def test_divisors_up_to_equal_trial_division():
    from xlashape.tiling import _divisors_up_to
    for c in range(1, 2000):
        for limit in (1, 7, c // 2 + 1, c, 5000):
            assert _divisors_up_to(c, limit) == {k for k in range(1, min(c, limit) + 1) if c % k == 0}


@pytest.mark.parametrize("primes", [
    (2 ** 31 - 1, 2 ** 31 - 19),               # two large primes
    (2, 2, 3, 400000009),                      # small and one large
    (1000003, 1000033, 1000037),               # three six-digit primes
    (2 ** 61 - 1,),                            # a Mersenne prime
])
def test_divisors_of_large_numbers_from_known_factors(primes):
    import itertools
    from xlashape.tiling import _divisors_up_to
    c = 1
    for p in primes:
        c *= p
    expected = set()
    for r in range(len(primes) + 1):
        for combo in itertools.combinations(primes, r):
            d = 1
            for p in combo:
                d *= p
            expected.add(d)
    assert _divisors_up_to(c, c) == expected
    assert _divisors_up_to(c, 2 ** 31) == {d for d in expected if d <= 2 ** 31}


@pytest.mark.parametrize("text, size", [
    ("u8[4000000000]{0:T(400000000)}", 4000000000),
    ("f32[0,100000000000]{1,0:T(1,99999999999)}", 0),
])
def test_huge_tiles_are_sized_without_hanging(text, size):
    import subprocess
    import sys
    code = ("import xlashape as x; "
            f"print(x.tiling.physical_size_in_bytes(x.parse_shape({text!r})))")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    assert int(r.stdout) == size
