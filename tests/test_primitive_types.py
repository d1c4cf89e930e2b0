"""PrimitiveType: the table of spec §1 (xla_data.proto, primitive_util)."""

import ml_dtypes
import numpy as np
import pytest

from xlashape import (
    InvalidShapeError,
    PrimitiveType,
    ShapeTypeError,
    primitive_type_from_dtype,
    primitive_type_from_name,
)
from xlashape.primitive_types import all_array_types, as_primitive_type, bit_width, byte_width

P = PrimitiveType

# (enum, value, name, BitWidth, numpy dtype or None) — spec §1, row by row.
TABLE = [
    (P.PRED, 1, "pred", 1, np.dtype(np.bool_)),
    (P.S1, 30, "s1", 1, None),
    (P.S2, 26, "s2", 2, np.dtype(ml_dtypes.int2)),
    (P.S4, 21, "s4", 4, np.dtype(ml_dtypes.int4)),
    (P.S8, 2, "s8", 8, np.dtype(np.int8)),
    (P.S16, 3, "s16", 16, np.dtype(np.int16)),
    (P.S32, 4, "s32", 32, np.dtype(np.int32)),
    (P.S64, 5, "s64", 64, np.dtype(np.int64)),
    (P.U1, 31, "u1", 1, None),
    (P.U2, 27, "u2", 2, np.dtype(ml_dtypes.uint2)),
    (P.U4, 22, "u4", 4, np.dtype(ml_dtypes.uint4)),
    (P.U8, 6, "u8", 8, np.dtype(np.uint8)),
    (P.U16, 7, "u16", 16, np.dtype(np.uint16)),
    (P.U32, 8, "u32", 32, np.dtype(np.uint32)),
    (P.U64, 9, "u64", 64, np.dtype(np.uint64)),
    (P.F16, 10, "f16", 16, np.dtype(np.float16)),
    (P.F32, 11, "f32", 32, np.dtype(np.float32)),
    (P.BF16, 16, "bf16", 16, np.dtype(ml_dtypes.bfloat16)),
    (P.F64, 12, "f64", 64, np.dtype(np.float64)),
    (P.F8E5M2, 19, "f8e5m2", 8, np.dtype(ml_dtypes.float8_e5m2)),
    (P.F8E4M3, 28, "f8e4m3", 8, np.dtype(ml_dtypes.float8_e4m3)),
    (P.F8E4M3FN, 20, "f8e4m3fn", 8, np.dtype(ml_dtypes.float8_e4m3fn)),
    (P.F8E4M3B11FNUZ, 23, "f8e4m3b11fnuz", 8, np.dtype(ml_dtypes.float8_e4m3b11fnuz)),
    (P.F8E3M4, 29, "f8e3m4", 8, np.dtype(ml_dtypes.float8_e3m4)),
    (P.F8E5M2FNUZ, 24, "f8e5m2fnuz", 8, np.dtype(ml_dtypes.float8_e5m2fnuz)),
    (P.F8E4M3FNUZ, 25, "f8e4m3fnuz", 8, np.dtype(ml_dtypes.float8_e4m3fnuz)),
    (P.F4E2M1FN, 32, "f4e2m1fn", 4, np.dtype(ml_dtypes.float4_e2m1fn)),
    (P.F8E8M0FNU, 33, "f8e8m0fnu", 8, np.dtype(ml_dtypes.float8_e8m0fnu)),
    (P.C64, 15, "c64", 64, np.dtype(np.complex64)),
    (P.C128, 18, "c128", 128, np.dtype(np.complex128)),
]
NON_ARRAY = [
    (P.PRIMITIVE_TYPE_INVALID, 0, "primitive_type_invalid"),
    (P.TUPLE, 13, "tuple"),
    (P.OPAQUE_TYPE, 14, "opaque"),
    (P.TOKEN, 17, "token"),
    (P.BUFFER, 34, "buffer"),
]
IDS = [row[2] for row in TABLE]


def test_the_table_covers_every_enum_member():
    listed = {row[0] for row in TABLE} | {row[0] for row in NON_ARRAY}
    assert listed == set(PrimitiveType)
    assert len(PrimitiveType) == 35


@pytest.mark.parametrize("t, value, name, bits, dtype", TABLE, ids=IDS)
def test_array_type_row(t, value, name, bits, dtype):
    assert int(t) == value
    assert PrimitiveType(value) is t
    assert t.hlo_name == name == str(t)
    assert t.bit_width == bits == bit_width(t) == bit_width(name)
    # ByteWidth = ceil(BitWidth / 8), computed independently here.
    assert t.byte_width == -(-bits // 8) == byte_width(value)
    assert t.is_array_type


@pytest.mark.parametrize("t, value, name", NON_ARRAY, ids=[r[2] for r in NON_ARRAY])
def test_non_array_type_row(t, value, name):
    assert int(t) == value
    assert t.hlo_name == name
    assert not t.is_array_type
    assert t.dtype is None
    with pytest.raises(InvalidShapeError, match="not an array type"):
        t.bit_width
    with pytest.raises(InvalidShapeError, match="not an array type"):
        t.byte_width


@pytest.mark.parametrize("t, value, name, bits, dtype", TABLE, ids=IDS)
def test_dtype_and_round_trip(t, value, name, bits, dtype):
    if t in (P.S1, P.U1) and t.dtype is not None:
        # ml_dtypes 0.6 may add int1/uint1; the mapping then must be that type.
        assert t.dtype.name in ("int1", "uint1")
        dtype = t.dtype
    assert t.dtype == dtype
    if dtype is not None:
        assert primitive_type_from_dtype(dtype) is t
        if dtype.itemsize > 1 and dtype.kind in "iufc":
            # Byte order does not change the element type.
            assert primitive_type_from_dtype(dtype.newbyteorder("S")) is t
        assert as_primitive_type(dtype) is t


@pytest.mark.parametrize("t, value, name, bits, dtype", TABLE, ids=IDS)
def test_lookup_by_name_and_value(t, value, name, bits, dtype):
    assert primitive_type_from_name(name) is t
    assert as_primitive_type(name) is t
    assert as_primitive_type(value) is t
    assert as_primitive_type(np.int64(value)) is t
    assert as_primitive_type(t) is t


@pytest.mark.parametrize("name", ["F32", "Pred", "preD", "BF16", "S4", "Opaque"])
def test_names_are_case_sensitive(name):
    with pytest.raises(InvalidShapeError, match=f'Invalid element type string: "{name}".'):
        primitive_type_from_name(name)


def test_opaque_type_spelling_is_rejected_but_opaque_accepted():
    # Despite a comment in XLA's source, only "opaque" maps to OPAQUE_TYPE.
    assert primitive_type_from_name("opaque") is P.OPAQUE_TYPE
    with pytest.raises(InvalidShapeError, match='Invalid element type string: "opaque_type".'):
        primitive_type_from_name("opaque_type")


def test_bad_lookups_raise_clear_errors():
    with pytest.raises(ShapeTypeError, match="must be a str, got int"):
        primitive_type_from_name(11)
    with pytest.raises(InvalidShapeError, match="99 is not a PrimitiveType enum value"):
        as_primitive_type(99)
    with pytest.raises(InvalidShapeError, match="has no XLA element type"):
        primitive_type_from_dtype(np.dtype("U3"))
    with pytest.raises(ShapeTypeError, match="not a numpy dtype"):
        primitive_type_from_dtype("not-a-dtype")


SIGNED = {P.S1, P.S2, P.S4, P.S8, P.S16, P.S32, P.S64}
UNSIGNED = {P.U1, P.U2, P.U4, P.U8, P.U16, P.U32, P.U64}
COMPLEX = {P.C64, P.C128}
FLOATS = {row[0] for row in TABLE} - SIGNED - UNSIGNED - COMPLEX - {P.PRED}


@pytest.mark.parametrize("t", list(PrimitiveType), ids=lambda t: t.name)
def test_predicates(t):
    assert t.is_signed_integral == (t in SIGNED)
    assert t.is_unsigned_integral == (t in UNSIGNED)
    assert t.is_integral == (t in SIGNED | UNSIGNED)
    assert t.is_floating_point == (t in FLOATS)
    assert t.is_complex == (t in COMPLEX)
    assert t.is_pred == (t is P.PRED)
    # IsArrayType = PRED or integral or floating or complex.
    assert t.is_array_type == (t is P.PRED or t in SIGNED | UNSIGNED | FLOATS | COMPLEX)
    # IsSubByteNonPredType: an array type, not PRED, narrower than 8 bits.
    expected_sub_byte = t in {P.S1, P.S2, P.S4, P.U1, P.U2, P.U4, P.F4E2M1FN}
    assert t.is_sub_byte == expected_sub_byte
    assert t.is_f8_type == (t.name.startswith("F8"))


def test_float_set_has_the_thirteen_xla_floats():
    assert len(FLOATS) == 13
    assert P.F4E2M1FN in FLOATS and P.F8E8M0FNU in FLOATS


def test_all_array_types_is_in_enum_order_and_complete():
    types = all_array_types()
    assert set(types) == {row[0] for row in TABLE}
    assert list(types) == [t for t in PrimitiveType if t in set(types)]


def test_pred_is_one_bit_but_one_byte():
    # Spec §14.1: BitWidth(PRED) == 1, ByteWidth(PRED) == 1.
    assert (P.PRED.bit_width, P.PRED.byte_width) == (1, 1)
