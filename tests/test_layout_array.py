"""LayoutArray: every element type x a set of layouts, checked exhaustively.

The expected physical bytes are computed independently here: for every
logical index, the element must sit at ``tiling.linear_index`` (XLA's tiled
layout model, tested against the doc's worked examples in test_tiling.py),
decoded bit by bit for packed sub-byte types; every other slot must hold the
layout's ``padding_value``. Values come from random bit patterns (so every
float encoding, NaNs included, is exercised) and are compared as raw codes.
"""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest

import xlashape as xs
from xlashape import Layout, LayoutArray, PrimitiveType as P, Shape, Tile, tiling
from xlashape.primitive_types import all_array_types

TYPES = [t for t in all_array_types() if t.dtype is not None]


def _pad_value(t):
    return -1 if t == P.S1 else 1


def _layouts(t):
    """(id, Shape) cases for element type t."""
    pv = _pad_value(t)
    out = [
        ("rowmajor", Shape(t, (3, 5), Layout((1, 0)))),
        ("colmajor", Shape(t, (3, 5), Layout((0, 1)))),
        ("perm3d", Shape(t, (2, 3, 4), Layout((0, 2, 1)))),
        ("perm4d", Shape(t, (2, 3, 2, 3), Layout((1, 3, 0, 2)))),
        ("padded", Shape(t, (3, 5), Layout((1, 0), padded_dimensions=(4, 8), padding_value=pv))),
        ("T8x128", Shape(t, (10, 130), Layout((1, 0), tiles=[Tile(8, 128)], padding_value=pv))),
        ("T2x128", Shape(t, (3, 130), Layout((1, 0), tiles=[Tile(2, 128)]))),
        ("T8x128_2x1", Shape(t, (9, 129), Layout((1, 0), tiles=[Tile(8, 128), Tile(2, 1)]))),
        ("T8x128_4x1_colmajor", Shape(t, (129, 9), Layout((0, 1), tiles=[Tile(8, 128), Tile(4, 1)]))),
        ("combined", Shape(t, (2, 3, 5), Layout((2, 1, 0), tiles=[Tile(2, "*", 4)], padding_value=pv))),
        ("T2x2_perm3d", Shape(t, (3, 3, 5), Layout((1, 2, 0), tiles=[Tile(2, 2)]))),
        ("scalar", Shape(t, (), Layout(()))),
        ("scalar_T128", Shape(t, (), Layout((), tiles=[Tile(128)], padding_value=pv))),
        ("zero_size", Shape(t, (0, 5), Layout((1, 0)))),
        ("zero_size_tiled", Shape(t, (3, 0), Layout((0, 1), tiles=[Tile(2, 2)]))),
        ("tail_L", Shape(t, (3, 5), Layout((1, 0), tail_padding_alignment_in_elements=64,
                                           padding_value=pv))),
        ("no_layout", Shape(t, (4, 3))),
    ]
    if t.is_sub_byte or t == P.PRED:
        e = t.bit_width
        out += [
            ("E_rowmajor", Shape(t, (3, 5), Layout((1, 0), element_size_in_bits=e))),
            ("E_colmajor_padded", Shape(t, (3, 5), Layout((0, 1), element_size_in_bits=e,
                                                          padded_dimensions=(5, 7),
                                                          padding_value=pv))),
            ("E_T8x128_8x1", Shape(t, (9, 130), Layout((1, 0), tiles=[Tile(8, 128), Tile(8, 1)],
                                                     element_size_in_bits=e,
                                                     padding_value=pv))),
            ("E_perm3d_odd", Shape(t, (3, 3, 3), Layout((0, 2, 1), element_size_in_bits=e))),
            ("E_scalar", Shape(t, (), Layout((), element_size_in_bits=e))),
        ]
    return out


CASES = [pytest.param(t, shape, id=f"{t.hlo_name}-{name}")
         for t in TYPES for name, shape in _layouts(t)]
# cases with at least one axis and one element (for scalar stores by index)
NONEMPTY = [c for c in CASES if c.values[1].dimensions and 0 not in c.values[1].dimensions]


def _codes_mask(t):
    return (1 << t.bit_width) - 1 if t.bit_width < 8 else 0xFF


def random_array(t, dims, seed=0):
    """Random bit patterns of type t (sub-byte codes in the low bits, ml_dtypes' format)."""
    rng = np.random.default_rng(seed)
    dt = t.dtype
    raw = rng.integers(0, 256, size=tuple(dims) + (dt.itemsize,), dtype=np.uint8)
    if t == P.PRED:
        raw &= 1
    elif t.bit_width < 8:
        raw &= _codes_mask(t)
    return raw.view(dt).reshape(dims)


def element_codes(x):
    """Raw element bytes of x as a Python int per element (little endian)."""
    b = np.ascontiguousarray(x).view(np.uint8).reshape(x.shape + (x.dtype.itemsize,))
    return b


def code_of(arr_bytes, idx):
    return int.from_bytes(bytes(arr_bytes[idx]), "little")


def pad_code(t, pv):
    return int.from_bytes(np.array(pv, dtype=t.dtype).tobytes(), "little")


def physical_slots(la, plan):
    """Decode the physical buffer into one int code per slot, by hand."""
    raw = bytes(la.physical)
    bits = plan.element_bits
    out = []
    for lin in range(plan.element_count):
        if bits % 8 == 0:
            k = bits // 8
            out.append(int.from_bytes(raw[lin * k:(lin + 1) * k], "little"))
        else:
            bit = lin * bits
            out.append((raw[bit // 8] >> (bit % 8)) & ((1 << bits) - 1))
    return out


def python_value(t, v):
    """numpy scalar -> the Python scalar LayoutArray should return."""
    if t == P.PRED:
        return bool(v)
    if t.is_integral:
        return int(v)
    if t.is_complex:
        return complex(v)
    return float(v)


def same(a, b):
    if isinstance(a, complex):
        return same(a.real, b.real) and same(a.imag, b.imag)
    if isinstance(a, float) and math.isnan(a):
        return isinstance(b, float) and math.isnan(b)
    return a == b and type(a) is type(b)


def check_physical(la, x, t):
    plan = tiling.plan(la.xla_shape)
    pv = la.layout.padding_value
    mask = _codes_mask(t) if plan.element_bits < 8 else None
    xb = element_codes(x)
    expected = [pad_code(t, pv)] * plan.element_count
    for idx in np.ndindex(*x.shape):
        expected[plan.linear_index(idx)] = code_of(xb, idx)
    got = physical_slots(la, plan)
    if mask is not None:
        expected = [e & mask for e in expected]
    assert got == expected
    # the bytes beyond the last slot (a partly used last byte) hold padding too
    assert la.physical_nbytes == plan.size_in_bytes


@pytest.mark.parametrize("t, shape", CASES)
def test_roundtrip_indexing_and_physical_bytes(t, shape):
    x = random_array(t, shape.dimensions)
    la = LayoutArray.from_numpy(x, shape)
    assert la.shape == x.shape and la.dtype == t.dtype and la.ndim == x.ndim
    assert la.size == x.size and la.nbytes == x.nbytes and la.itemsize == t.dtype.itemsize
    back = la.to_numpy()
    assert back.dtype == t.dtype and back.shape == x.shape and back.flags.c_contiguous
    assert back.tobytes() == x.tobytes()
    for idx in np.ndindex(*x.shape):
        got = la[idx]
        assert same(got, python_value(t, x[idx])), (idx, got, x[idx])
    check_physical(la, x, t)


@pytest.mark.parametrize("t, shape", CASES)
def test_relayout_preserves_values_and_places_them(t, shape):
    x = random_array(t, shape.dimensions, seed=1)
    la = LayoutArray.from_numpy(x, shape)
    n = len(shape.dimensions)
    targets = [Layout(tuple(range(n))),  # column-major
               Layout(tuple(range(n - 1, -1, -1)), tiles=[Tile(2, 3)], padding_value=_pad_value(t))]
    if t.bit_width < 8 and t != P.PRED:
        targets.append(Layout(tuple(range(n)), element_size_in_bits=t.bit_width))
    for lay in targets:
        r = la.relayout(lay)
        assert r.layout == lay
        assert r.to_numpy().tobytes() == x.tobytes()
        check_physical(r, x, t)
        # and back again
        assert r.relayout(shape.layout or Layout(tuple(range(n - 1, -1, -1)))).to_numpy().tobytes() \
            == x.tobytes()


@pytest.mark.parametrize("t, shape", CASES)
def test_new_array_is_zero_with_padding_value(t, shape):
    la = LayoutArray(shape)
    zero = np.zeros(shape.dimensions, dtype=t.dtype)
    assert la.to_numpy().tobytes() == zero.tobytes()
    check_physical(la, zero, t)


@pytest.mark.parametrize("t, shape", NONEMPTY)
def test_setitem_scalar_matches_numpy(t, shape):
    x = random_array(t, shape.dimensions, seed=2)
    la = LayoutArray.from_numpy(x, shape)
    ref = x.copy()
    values = [True, 0, 1] if t == P.PRED else [0, 1, -1, 0.5, 1.75, 3]
    if t.is_unsigned_integral:
        values = [0, 1, 3]
    if t.is_integral and t.bit_width < 8:
        values = [0, 1] if t.is_unsigned_integral or t.bit_width > 1 else [0, -1]
    if t.is_complex:
        values += [1 + 2j]
    rng = np.random.default_rng(3)
    for k, v in enumerate(values * 3):
        idx = tuple(int(rng.integers(0, d)) for d in shape.dimensions)
        la[idx] = v
        ref[idx] = v
    assert la.to_numpy().tobytes() == ref.tobytes()
    check_physical(la, ref, t)


@pytest.mark.parametrize("t, shape", CASES)
def test_fill_and_copy(t, shape):
    la = LayoutArray(shape)
    v = True if t == P.PRED else (-1 if t == P.S1 else 1)
    la.fill(v)
    ref = np.full(shape.dimensions, v, dtype=t.dtype)
    assert la.to_numpy().tobytes() == ref.tobytes()
    check_physical(la, ref, t)
    c = la.copy()
    assert bytes(c.physical) == bytes(la.physical) and c.xla_shape == la.xla_shape


# -- from_numpy: any strides, casts, mismatches -------------------------------

@pytest.mark.parametrize("layout", [Layout((1, 0)), Layout((0, 1)),
                                    Layout((1, 0), tiles=[Tile(2, 4)]),
                                    Layout((0, 1), tiles=[Tile(8, 128), Tile(2, 1)])])
def test_from_numpy_any_strides(layout):
    base = np.arange(7 * 9 * 4, dtype=np.int32).reshape(7, 9 * 4)
    views = [base[::-1, ::3], base[:, 1:20:2].T[::-1], np.asfortranarray(base[:, :9]),
             np.broadcast_to(np.arange(9, dtype=np.int32), (7, 9))]
    for v in views:
        la = LayoutArray.from_numpy(v, layout)
        assert np.array_equal(la.to_numpy(), v)
        assert all(la[i, j] == v[i, j] for i in range(v.shape[0]) for j in range(v.shape[1]))


def test_from_numpy_zero_d_and_default_layout():
    la = LayoutArray.from_numpy(np.array(2.5, dtype=np.float64))
    assert la.shape == () and la[()] == 2.5 and str(la.xla_shape) == "f64[]"
    la = LayoutArray.from_numpy(np.ones((2, 3), np.int16))
    assert str(la.xla_shape) == "s16[2,3]{1,0}"


def test_from_numpy_accepts_text_and_lists():
    la = LayoutArray.from_numpy([[1, 2], [3, 4]], "s64[2,2]{0,1}")
    assert la[1, 0] == 3 and bytes(la.physical) == np.array([1, 3, 2, 4], np.int64).tobytes()


def test_from_numpy_dtype_mismatch_and_cast():
    x = np.arange(6, dtype=np.float64).reshape(2, 3)
    with pytest.raises(xs.ShapeTypeError, match=r"dtype float64 does not match .*dtype_cast=True"):
        LayoutArray.from_numpy(x, "f32[2,3]{1,0}")
    la = LayoutArray.from_numpy(x, "bf16[2,3]{1,0}", dtype_cast=True)
    assert la.dtype == P.BF16.dtype and la[1, 2] == 5.0
    with pytest.raises(TypeError, match="has no XLA element type"):
        LayoutArray.from_numpy(np.array(["a"]))


def test_from_numpy_dimension_mismatch():
    with pytest.raises(ValueError, match=r"array of shape \(2, 3\) does not match the dimensions \(3, 2\)"):
        LayoutArray.from_numpy(np.zeros((2, 3), np.float32), "f32[3,2]{1,0}")


# -- scalar indexing ----------------------------------------------------------

def test_negative_and_numpy_integer_indices():
    x = np.arange(12, dtype=np.float32).reshape(3, 4)
    la = LayoutArray.from_numpy(x, "f32[3,4]{0,1:T(2,2)}")
    assert la[-1, -4] == 8.0 and la[np.int64(2), np.uint8(1)] == 9.0
    assert type(la[0, 0]) is float
    la[np.int32(-1), -1] = 7
    assert la[2, 3] == 7.0


def test_index_errors_name_axis_and_size():
    la = LayoutArray("f32[3,4]{1,0:T(2,2)}")
    with pytest.raises(IndexError, match="index 7 is out of bounds for axis 1 with size 4"):
        la[1, 7]
    with pytest.raises(IndexError, match="index -4 is out of bounds for axis 0 with size 3"):
        la[-4, 0]
    with pytest.raises(xs.ShapeIndexError, match="out of bounds for axis 0 with size 3"):
        la[2 ** 70, 0]
    with pytest.raises(IndexError, match="index 4 is out of bounds for axis 1 with size 4"):
        la[0, 4] = 1.0
    with pytest.raises(IndexError, match="too many indices"):
        la[0, 0, 0]
    with pytest.raises(IndexError, match="out of bounds for axis 0 with size 3"):
        la[3]


def test_key_type_errors():
    la = LayoutArray("s8[3,4]{1,0}")
    with pytest.raises(xs.ShapeTypeError, match="got float at position 1"):
        la[0, 1.0]
    with pytest.raises(TypeError, match="got str at position 0"):
        la["a"]
    with pytest.raises(xs.ShapeTypeError, match="got dict at position 1"):
        la[[0, 1], {}]
    # booleans and lists are numpy's advanced indexing (issue 13), not errors
    ref = np.arange(12, dtype=np.int8).reshape(3, 4)
    la[...] = ref
    assert np.array_equal(la[True, 0], ref[True, 0])
    la[[0, 1], 0] = 3
    ref[[0, 1], 0] = 3
    assert np.array_equal(la.to_numpy(), ref)


def test_store_rules_match_numpy():
    la = LayoutArray("s8[4]{0}")
    with pytest.raises(OverflowError, match="Python integer 300 out of bounds for int8"):
        la[0] = 300
    la[1] = 2.9        # numpy truncates toward zero
    assert la[1] == 2
    with pytest.raises(ValueError, match="cannot convert float NaN to integer"):
        la[2] = float("nan")
    u = LayoutArray("u64[2]{0}")
    u[0] = 2 ** 64 - 1
    assert u[0] == 2 ** 64 - 1
    with pytest.raises(OverflowError, match="out of bounds for uint64"):
        u[1] = -1
    f = LayoutArray("f32[2]{0}")
    f[0] = 0.1
    assert f[0] == float(np.float32(0.1))
    with pytest.raises(OverflowError, match="int too large to convert to float"):
        f[1] = 10 ** 400
    b = LayoutArray("bf16[2]{0:T(2)}")
    b[0] = 1.00390625    # halfway: rounds to even like numpy/ml_dtypes
    assert b[0] == float(np.array(1.00390625, dtype=P.BF16.dtype))
    s4 = LayoutArray("s4[3]{0:E(4)}")
    s4[0], s4[1], s4[2] = -8, 7, -1
    assert [s4[0], s4[1], s4[2]] == [-8, 7, -1]
    assert bytes(s4.physical) == bytes([0x78, 0x0F])   # low nibble first


# -- slices, ..., None --------------------------------------------------------

@pytest.mark.parametrize("text", ["f32[4,6]{1,0}", "f32[4,6]{0,1:T(2,4)}", "s4[4,6]{0,1:E(4)}"])
def test_basic_indexing_returns_copies(text):
    t = xs.parse_shape(text).element_type
    x = random_array(t, (4, 6), seed=5)
    if t.is_floating_point:
        x = np.arange(24, dtype=t.dtype).reshape(4, 6)
    la = LayoutArray.from_numpy(x, text)
    for key in [(slice(None), 1), (1,), (Ellipsis, 2), (None, 1, slice(1, 5, 2)),
                (slice(None, None, -1), slice(2, 3)), Ellipsis, 2, slice(1, 3), (-1, Ellipsis)]:
        got = la[key]
        assert isinstance(got, np.ndarray) and got.dtype == x.dtype
        assert got.tobytes() == x[key].tobytes() and got.shape == x[key].shape
    sel = la[1:3]
    sel[...] = x[0, 0]     # a copy: the LayoutArray does not change
    assert la.to_numpy().tobytes() == x.tobytes()


@pytest.mark.parametrize("text", ["s8[3,2]{1,0}", "s8[3,2]{0,1}", "s8[3,2]{1,0:T(2,2)}"])
def test_every_slice_of_a_small_axis_matches_numpy(text):
    # Every start/stop in -4..4 (and None) with every step, get and set,
    # against numpy: ranges that are empty because they start before the
    # first element (slice(-3, None, -1) on size 2) used to select the
    # whole axis backwards.
    x = np.arange(6, dtype=np.int8).reshape(3, 2)
    la = LayoutArray.from_numpy(x, text)
    bounds = [None, *range(-4, 5)]
    for start, stop, step in itertools.product(bounds, bounds, [None, 1, 2, -1, -2, -3]):
        key = (1, slice(start, stop, step))
        got = la[key]
        assert got.shape == x[key].shape and got.tobytes() == x[key].tobytes(), key
        ref = x.copy()
        ref[key] = -np.arange(ref[key].size, dtype=np.int8) - 1
        la[key] = -np.arange(ref[key].size, dtype=np.int8) - 1
        assert la.to_numpy().tobytes() == ref.tobytes(), key
        la[...] = x


@pytest.mark.parametrize("text", ["f32[4,6]{1,0}", "f32[4,6]{0,1:T(2,4)}", "bf16[4,6]{1,0:T(2,2)(2,1)}"])
def test_setitem_with_slices_writes_through(text):
    la = LayoutArray(text)
    ref = np.zeros((4, 6), dtype=la.dtype)
    la[1:3, ::2] = 5
    ref[1:3, ::2] = 5
    la[..., -1] = np.arange(4)
    ref[..., -1] = np.arange(4)
    la[None, 0] = 2
    ref[None, 0] = 2
    assert la.to_numpy().tobytes() == ref.tobytes()
    la[...] = ref[::-1]
    assert la.to_numpy().tobytes() == ref[::-1].tobytes()


@pytest.mark.parametrize("text", ["f32[3]{0}", "f32[3]{0:T(2)}", "s4[3]{0:E(4)}", "pred[1]{0}"])
def test_negative_step_slices_that_select_nothing(text):
    # slice(-5, None, -1).indices(3) is (-1, -1, -1): nothing selected. The
    # start -1 was passed on as a slice bound, where it means the last element:
    # la[-5::-1] read every element and la[-5::-1] = v wrote every one.
    la = LayoutArray(text)
    n = la.shape[0]
    x = (np.arange(n) % 2).astype(la.dtype)
    la[...] = x
    for key in [slice(-5, None, -1), slice(-n - 1, None, -1), slice(-5, -7, -1),
                (slice(-5, None, -1),), slice(-n - 1, -1, -1)]:
        got = la[key]
        assert got.shape == x[key].shape == (0,)
        la[key] = 1
        assert la.to_numpy().tobytes() == x.tobytes()
    assert la[-n::-1].tolist() == x[-n::-1].tolist() == [x[0]]   # just the first element


def test_len_iter_repr():
    la = LayoutArray.from_numpy(np.arange(6, dtype=np.int32).reshape(2, 3), "s32[2,3]{0,1:T(2,2)}")
    assert len(la) == 2
    rows = list(la)
    assert [r.tolist() for r in rows] == [[0, 1, 2], [3, 4, 5]]
    assert list(LayoutArray.from_numpy(np.array([1.5, 2.5]))) == [1.5, 2.5]
    r = repr(la)
    assert r.startswith("LayoutArray(s32[2,3]{0,1:T(2,2)},") and "[3, 4, 5]" in r
    s = LayoutArray("f32[]")
    with pytest.raises(TypeError, match="len\\(\\) of unsized object"):
        len(s)
    with pytest.raises(TypeError, match="iteration over a 0-d array"):
        iter(s).__next__()


def test_attributes():
    la = LayoutArray("bf16[16,256]{1,0:T(8,128)(2,1)S(1)}")
    assert la.shape == (16, 256) and la.ndim == 2 and la.size == 4096
    assert la.itemsize == 2 and la.nbytes == 8192 and la.physical_nbytes == 8192
    assert str(la.xla_shape) == "bf16[16,256]{1,0:T(8,128)(2,1)S(1)}"
    assert la.layout.memory_space == 1
    assert la.physical_array().shape == (2, 2, 4, 128, 2, 1)
    assert la.physical_array().dtype == P.BF16.dtype
    assert LayoutArray("f32[3,5]").layout == Layout((1, 0))
    p = LayoutArray("s4[5]{0:E(4)}")
    assert p.itemsize == 1 and p.nbytes == 5 and p.physical_nbytes == 3


def test_physical_array_is_a_view():
    la = LayoutArray("f32[3,5]{1,0:T(2,2)}")
    pa = la.physical_array()
    pa[1, 1, 0, 1] = 4.0     # the doc's example: element (2,3) sits at offset 17
    assert la[2, 3] == 4.0
    assert np.frombuffer(la.physical, np.float32)[17] == 4.0


def test_bad_element_sizes_are_rejected():
    with pytest.raises(xs.InvalidShapeError, match=r"E\(4\) is not supported for f32: expected 32"):
        LayoutArray("f32[4]{0:E(4)}")
    with pytest.raises(ValueError, match=r"E\(16\) is not supported for s8"):
        LayoutArray("s8[4]{0:E(16)}")
    with pytest.raises(ValueError, match=r"expected 8 \(one element per byte\) or 4 \(packed"):
        LayoutArray("s4[4]{0:E(2)}")
    s8e = LayoutArray("s4[4]{0:E(8)}")    # one per byte, spelled out
    assert s8e.physical_nbytes == 4


def test_constructor_errors():
    with pytest.raises(xs.ShapeTypeError, match="expected a Shape or HLO shape text, got int"):
        LayoutArray(5)
    with pytest.raises(xs.InvalidShapeError, match="needs an array shape"):
        LayoutArray("(f32[2], s32[])")
    with pytest.raises(xs.HloParseError):
        LayoutArray("f32[2")
    with pytest.raises(xs.InvalidShapeError, match="padding_value 300 cannot be stored as s8"):
        LayoutArray(Shape("s8", (3,), Layout((0,), padded_dimensions=(4,), padding_value=300)))


def test_relayout_errors():
    la = LayoutArray("f32[2,3]{1,0}")
    with pytest.raises(ValueError, match="keeps the element type and dimensions"):
        la.relayout("f32[3,2]{1,0}")
    with pytest.raises(ValueError, match="keeps the element type and dimensions"):
        la.relayout("s32[2,3]{1,0}")
    with pytest.raises(TypeError, match="relayout expects a Layout"):
        la.relayout((0, 1))
    assert la.relayout("f32[2,3]{0,1:T(2,2)}").layout == Layout((0, 1), tiles=[Tile(2, 2)])
    # layout text alone is accepted too, and checked against the rank
    assert la.relayout("{0,1:T(2,2)}").layout == Layout((0, 1), tiles=[Tile(2, 2)])
    with pytest.raises(ValueError, match="minor_to_major"):
        la.relayout("{0}")


def test_allocation_failures_say_what_was_asked():
    # 10^18 elements: neither the offset tables nor the buffer can exist.
    with pytest.raises(MemoryError, match=r"f32\[1000000000000,1000000\]"):
        LayoutArray("f32[1000000000000,1000000]")


def test_pickle_roundtrip():
    import pickle
    la = LayoutArray.from_numpy(np.arange(10, dtype=np.float32).reshape(2, 5), "f32[2,5]{0,1:T(2,2)}")
    lb = pickle.loads(pickle.dumps(la))
    assert lb.xla_shape == la.xla_shape and bytes(lb.physical) == bytes(la.physical)
    lb[0, 0] = 9
    assert lb[0, 0] == 9.0 and la[0, 0] == 0.0


def test_assign_all_from_an_overlapping_view():
    x = np.arange(12, dtype=np.float32).reshape(3, 4)
    la = LayoutArray.from_numpy(x, "f32[3,4]{0,1}")
    la[...] = np.asarray(la)[::-1, ::-1]
    assert la.to_numpy().tolist() == x[::-1, ::-1].tolist()
    la[:, :] = 2
    assert (la.to_numpy() == 2).all()
    with pytest.raises(ValueError, match="broadcast"):
        la[...] = np.zeros((2, 4), np.float32)


def test_to_numpy_out():
    x = np.arange(12, dtype=np.int16).reshape(3, 4)
    la = LayoutArray.from_numpy(x, "s16[3,4]{1,0:T(2,2)}")
    out = np.zeros((4, 3), np.int16).T
    assert la.to_numpy(out=out) is out and out.tolist() == x.tolist()
    with pytest.raises(ValueError, match=r"out has shape \(4, 3\) and dtype int16; expected \(3, 4\)"):
        la.to_numpy(out=np.zeros((4, 3), np.int16))
    with pytest.raises(TypeError, match="out must be a numpy array"):
        la.to_numpy(out=[1])


def test_large_arrays_match_numpy_reshape_transpose():
    """Big enough (> 8 MB) for the kernels' streaming-store path; the expected
    physical bytes are numpy's own reshape/transpose of the tiled order."""
    rng = np.random.default_rng(7)
    x = rng.standard_normal((2048, 1152), dtype=np.float32)
    la = LayoutArray.from_numpy(x, "f32[2048,1152]{1,0:T(8,128)}")
    phys = x.reshape(256, 8, 9, 128).transpose(0, 2, 1, 3)
    assert bytes(la.physical) == phys.tobytes()
    assert np.array_equal(la.to_numpy(), x)
    xb = x[:, :1024].astype(P.BF16.dtype).repeat(2, axis=0)
    lb = LayoutArray.from_numpy(xb, "bf16[4096,1024]{1,0:T(8,128)(2,1)}")
    physb = xb.reshape(512, 4, 2, 8, 128).transpose(0, 3, 1, 4, 2)
    assert bytes(lb.physical) == physb.tobytes()
    assert lb.to_numpy().tobytes() == xb.tobytes()
    t = la.relayout("f32[2048,1152]{0,1}")
    assert bytes(t.physical) == np.ascontiguousarray(x.T).tobytes()


def test_bf16_store_rounds_exactly_like_ml_dtypes():
    """The C fast path for Python floats into bf16 must agree bit for bit with
    ml_dtypes (double -> float -> bf16, ties to even), halfway cases included."""
    import struct
    la = LayoutArray("bf16[1]{0}")
    rng = np.random.default_rng(0)
    vals = list(rng.standard_normal(3000) * 10.0 ** rng.integers(-40, 38, 3000))
    for bits in rng.integers(0, 2 ** 15, 500):
        f = struct.unpack("<f", struct.pack("<I", (int(bits) << 16) | 0x8000))[0]
        if math.isfinite(f) and abs(f) < 1e38:
            vals += [f, math.nextafter(f, math.inf), math.nextafter(f, -math.inf), f * (1 + 2 ** -30)]
    vals += [0.0, -0.0, math.inf, -math.inf, 1e-45, 5e-324, -2.5]
    ref = np.zeros(1, P.BF16.dtype)
    for v in vals:
        la[0] = v
        ref[0] = v
        assert bytes(la.physical) == ref.tobytes(), v


KEYS = [(slice(None), 1), (1,), (Ellipsis, 2), (None, 1, slice(1, 5, 2)), (slice(None, None, -1), slice(2, 3)),
        Ellipsis, 2, -1, slice(1, 3), (-1, Ellipsis), (slice(5, 1, -2), None, slice(None)),
        (slice(3, 3), 0), (Ellipsis, None), (None, Ellipsis, None, -2), (slice(-100, 100), slice(None, None, 3))]


@pytest.mark.parametrize("text", ["f32[4,6]{0,1:T(2,4)}", "s4[4,6]{0,1:E(4)}", "bf16[4,6]{1,0:T(2,2)(2,1)}",
                                  "u2[4,6]{1,0:T(2,4)E(2)}", "pred[4,6]{0,1:T(3,2)E(1)}"])
def test_basic_indexing_on_tiled_layouts_matches_numpy(text):
    t = xs.parse_shape(text).element_type
    x = random_array(t, (4, 6), seed=11)
    la = LayoutArray.from_numpy(x, text)
    for key in KEYS:
        got = la[key]
        assert got.tobytes() == x[key].tobytes() and got.shape == x[key].shape, key
    for key in KEYS:
        lb = LayoutArray.from_numpy(x, text)
        ref = x.copy()
        val = random_array(t, ref[key].shape, seed=12)
        lb[key] = val
        ref[key] = val
        assert lb.to_numpy().tobytes() == ref.tobytes(), key
        check_physical(lb, ref, t)
    with pytest.raises(IndexError, match="single ellipsis"):
        la[..., ...]
    with pytest.raises(IndexError, match="too many indices for array: array is 2-dimensional, but 3"):
        la[0, :, 1]
    with pytest.raises(IndexError, match="index 6 is out of bounds for axis 1 with size 6"):
        la[:, 6]
    with pytest.raises(IndexError, match="index -5 is out of bounds for axis 0 with size 4"):
        la[-5, :] = 0


def test_rows_of_a_big_tiled_array_are_read_without_unpacking_it_all():
    x = np.arange(1024 * 1024, dtype=np.float32).reshape(1024, 1024)
    la = LayoutArray.from_numpy(x, "f32[1024,1024]{1,0:T(8,128)}")
    rows = [la[i] for i in range(0, 1024, 97)]
    assert all(np.array_equal(r, x[i]) for r, i in zip(rows, range(0, 1024, 97)))
    la[5, 3:9] = -1
    assert la[5, 2] == x[5, 2] and la[5, 3] == -1.0 and la[5, 9] == x[5, 9]


def test_byte_order_and_dynamic_shapes():
    big = np.arange(6, dtype=">f4").reshape(2, 3)
    with pytest.raises(TypeError, match=r"dtype >f4 does not match"):
        LayoutArray.from_numpy(big, "f32[2,3]{1,0}")
    la = LayoutArray.from_numpy(big, "f32[2,3]{1,0:T(2,2)}", dtype_cast=True)
    assert la[1, 2] == 5.0
    with pytest.raises(ValueError, match="unbounded dynamic dimension"):
        LayoutArray("f32[?,3]{1,0}")
    bounded = LayoutArray("f32[<=4,3]{1,0}")     # storage for the bound
    assert bounded.shape == (4, 3) and bounded.physical_nbytes == 48


# -- conversion to Python scalars follows numpy 2 (regression: int(la) parsed raw bytes) --

@pytest.mark.parametrize("value", [
    np.array(55, np.uint8), np.array(-7, np.int32), np.array(2.75, np.float32),
    np.array([1.5], np.float64), np.array([[-3]], np.int64), np.array(0, np.int8),
    np.array(True), np.array(False), np.array(1.25, P.BF16.dtype),
])
def test_int_float_bool_match_numpy(value):
    la = LayoutArray.from_numpy(value)
    if value.ndim:
        # numpy 2.4: only 0-d arrays convert (size 1 is not enough); bool() does
        for conv in (int, float, complex):
            with pytest.raises(TypeError) as ref:
                conv(value)
            with pytest.raises(xs.ShapeTypeError, match=str(ref.value)):
                conv(la)
        assert bool(la) is bool(value)
        return
    assert int(la) == int(value) and type(int(la)) is int
    assert float(la) == float(value) and type(float(la)) is float
    assert complex(la) == complex(value)
    assert bool(la) is bool(value)


def test_int_of_uint8_55_is_55():
    assert int(LayoutArray.from_numpy(np.array(55, np.uint8))) == 55


def test_complex_and_tiled_single_element():
    assert complex(LayoutArray.from_numpy(np.array(1 + 2j, np.complex64))) == 1 + 2j
    la = LayoutArray("f32[1,1]{1,0:T(8,128)}")
    la[0, 0] = 4.5
    assert bool(la) is True
    with pytest.raises(xs.ShapeTypeError, match="only 0-dimensional arrays"):
        float(la)               # numpy 2.4's TypeError for ndim > 0, size 1 too
    assert float(la[0, 0]) == 4.5 and int(la[0, 0]) == 4


def test_index_only_for_integer_0d():
    import operator
    assert operator.index(LayoutArray.from_numpy(np.array(5, np.int16))) == 5
    assert [10, 11, 12][LayoutArray.from_numpy(np.array(2, np.uint32))] == 12
    for bad in [np.array(2.0, np.float32), np.array(True), np.array([2], np.int32)]:
        with pytest.raises(TypeError, match="only integer scalar arrays"):
            operator.index(bad)          # numpy agrees
        with pytest.raises(TypeError, match="only integer scalar arrays"):
            operator.index(LayoutArray.from_numpy(bad))


@pytest.mark.parametrize("conv", [int, float, complex])
def test_scalar_conversion_needs_one_element(conv):
    for text in ["f32[2]", "f32[0]", "f32[2,3]{0,1:T(2,2)}", "f32[1]"]:
        with pytest.raises(TypeError, match="only 0-dimensional arrays can be converted"):
            conv(LayoutArray(text))


def test_bool_of_many_or_no_elements_is_ambiguous():
    with pytest.raises(ValueError, match="more than one element is ambiguous"):
        bool(np.zeros(2))                # numpy agrees
    with pytest.raises(ValueError, match="more than one element is ambiguous"):
        bool(LayoutArray("f32[2]"))
    with pytest.raises(ValueError, match="empty array is ambiguous"):
        bool(np.zeros(0))
    with pytest.raises(ValueError, match="empty array is ambiguous"):
        bool(LayoutArray("f32[0]"))


def test_scalar_conversion_after_release():
    la = LayoutArray("f32[]")
    la.release()
    for conv in (int, float, complex, bool):
        with pytest.raises(ValueError, match="released LayoutArray"):
            conv(la)


# -- sizes past int64 are a MemoryError, not a C-level OverflowError (regression) --

@pytest.mark.parametrize("text, fragment", [
    ("f32[4611686018427387904,4]", r"needs 73786976294838206464 bytes, more than"),
    ("f32[1]{0:T(9223372036854775807)}", r"needs 36893488147419103228 bytes, more than"),
])
def test_sizes_past_int64_raise_memory_error(text, fragment):
    # 2**62 * 4 elements * 4 bytes = 2**66; 9223372036854775807 * 4 bytes = 2**65 - 4
    assert 4611686018427387904 * 4 * 4 == 73786976294838206464
    assert 9223372036854775807 * 4 == 36893488147419103228
    with pytest.raises(MemoryError, match=fragment):
        LayoutArray(text)
    with pytest.raises(MemoryError, match=fragment):
        LayoutArray.frombuffer(b"", text)


def test_compiled_plan_refuses_sizes_past_int64():
    from xlashape._core import CompiledPlan
    with pytest.raises(MemoryError, match="a 64-bit offset can address"):
        CompiledPlan(tiling.plan("f32[4611686018427387904,4]"))


# -- from_numpy accepts layout text, like relayout (regression) ---------------------

def test_from_numpy_accepts_layout_text():
    x = np.arange(12, dtype=np.int32).reshape(3, 4)
    la = LayoutArray.from_numpy(x, "{0,1:T(2,2)}")
    assert la.layout == Layout((0, 1), tiles=[Tile(2, 2)])
    assert la.xla_shape == Shape(P.S32, (3, 4), Layout((0, 1), tiles=[Tile(2, 2)]))
    assert np.array_equal(la.to_numpy(), x)
    assert LayoutArray.from_numpy(x, "  {0,1}").layout == Layout((0, 1))
    # column-major bytes of x, computed independently of the code under test
    assert bytes(LayoutArray.from_numpy(x, "{0,1}").physical) == x.T.tobytes()
    with pytest.raises(ValueError, match="minor_to_major"):
        LayoutArray.from_numpy(x, "{0}")
