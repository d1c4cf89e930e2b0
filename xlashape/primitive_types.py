"""XLA element types (``xla_data.proto`` ``PrimitiveType``) and their facts.

Names, enum numbers, bit and byte widths follow ``xla/primitive_util.h``;
the numpy dtypes are xlashape's mapping (numpy for the standard types,
``ml_dtypes`` for bf16, the f8/f4 family and 2/4-bit integers).

>>> PrimitiveType.BF16.bit_width, PrimitiveType.BF16.byte_width
(16, 2)
>>> primitive_type_from_name("s4").dtype
dtype(int4)
"""

from __future__ import annotations

import enum
from typing import Optional

import numpy as np

from .errors import InvalidShapeError, ShapeTypeError

try:  # ml_dtypes is a runtime dependency, but keep the metadata usable without it.
    import ml_dtypes as _ml
except ImportError:  # pragma: no cover - exercised only without ml_dtypes
    _ml = None

__all__ = [
    "PrimitiveType",
    "primitive_type_from_name",
    "primitive_type_from_dtype",
    "bit_width",
    "byte_width",
    "all_array_types",
]


class PrimitiveType(enum.IntEnum):
    """XLA's ``PrimitiveType`` enum, with the proto's numbers."""

    PRIMITIVE_TYPE_INVALID = 0
    PRED = 1
    S1 = 30
    S2 = 26
    S4 = 21
    S8 = 2
    S16 = 3
    S32 = 4
    S64 = 5
    U1 = 31
    U2 = 27
    U4 = 22
    U8 = 6
    U16 = 7
    U32 = 8
    U64 = 9
    F16 = 10
    F32 = 11
    BF16 = 16
    F64 = 12
    F8E5M2 = 19
    F8E4M3 = 28
    F8E4M3FN = 20
    F8E4M3B11FNUZ = 23
    F8E3M4 = 29
    F8E5M2FNUZ = 24
    F8E4M3FNUZ = 25
    F4E2M1FN = 32
    F8E8M0FNU = 33
    C64 = 15
    C128 = 18
    TUPLE = 13
    OPAQUE_TYPE = 14
    TOKEN = 17
    BUFFER = 34

    # -- names -------------------------------------------------------------
    @property
    def hlo_name(self) -> str:
        """The lowercase name XLA prints (``opaque`` for OPAQUE_TYPE)."""
        return _HLO_NAMES[self]

    def __str__(self) -> str:
        return self.hlo_name

    # -- widths ------------------------------------------------------------
    @property
    def bit_width(self) -> int:
        """``primitive_util::BitWidth``: 1 for PRED, value bits for ints.

        Raises ``ValueError`` for non-array types, where XLA crashes.
        """
        try:
            return _BIT_WIDTH[self]
        except KeyError:
            raise InvalidShapeError(
                f"{self.hlo_name} is not an array type and has no bit width"
            ) from None

    @property
    def byte_width(self) -> int:
        """``primitive_util::ByteWidth`` = ceil(bit_width / 8)."""
        return (self.bit_width + 7) // 8

    # -- predicates (primitive_util.h) ------------------------------------
    @property
    def is_pred(self) -> bool:
        return self is PrimitiveType.PRED

    @property
    def is_signed_integral(self) -> bool:
        return self in _SIGNED

    @property
    def is_unsigned_integral(self) -> bool:
        return self in _UNSIGNED

    @property
    def is_integral(self) -> bool:
        return self in _SIGNED or self in _UNSIGNED

    @property
    def is_floating_point(self) -> bool:
        return self in _FLOATS

    @property
    def is_f8_type(self) -> bool:
        return self in _FLOATS and _BIT_WIDTH[self] == 8

    @property
    def is_complex(self) -> bool:
        return self in (PrimitiveType.C64, PrimitiveType.C128)

    @property
    def is_array_type(self) -> bool:
        """PRED, integral, floating or complex (``IsArrayType``)."""
        return self in _BIT_WIDTH

    @property
    def is_sub_byte(self) -> bool:
        """``IsSubByteNonPredType``: an array type other than PRED narrower than 8 bits."""
        return self in _BIT_WIDTH and self is not PrimitiveType.PRED and _BIT_WIDTH[self] < 8

    # -- numpy -------------------------------------------------------------
    @property
    def dtype(self) -> Optional[np.dtype]:
        """The numpy dtype for this type, or ``None`` where there is none."""
        return _DTYPES.get(self)


P = PrimitiveType

_HLO_NAMES = {t: t.name.lower() for t in PrimitiveType}
_HLO_NAMES[P.OPAQUE_TYPE] = "opaque"

# StringToPrimitiveType: lowercase names only (case-sensitive).
_BY_NAME = {name: t for t, name in _HLO_NAMES.items()}

_SIGNED = frozenset({P.S1, P.S2, P.S4, P.S8, P.S16, P.S32, P.S64})
_UNSIGNED = frozenset({P.U1, P.U2, P.U4, P.U8, P.U16, P.U32, P.U64})
_FLOATS = frozenset({
    P.F16, P.F32, P.BF16, P.F64, P.F8E5M2, P.F8E4M3, P.F8E4M3FN,
    P.F8E4M3B11FNUZ, P.F8E3M4, P.F8E5M2FNUZ, P.F8E4M3FNUZ, P.F4E2M1FN,
    P.F8E8M0FNU,
})

_BIT_WIDTH = {
    P.PRED: 1,
    P.S1: 1, P.S2: 2, P.S4: 4, P.S8: 8, P.S16: 16, P.S32: 32, P.S64: 64,
    P.U1: 1, P.U2: 2, P.U4: 4, P.U8: 8, P.U16: 16, P.U32: 32, P.U64: 64,
    P.F16: 16, P.F32: 32, P.BF16: 16, P.F64: 64,
    P.F8E5M2: 8, P.F8E4M3: 8, P.F8E4M3FN: 8, P.F8E4M3B11FNUZ: 8, P.F8E3M4: 8,
    P.F8E5M2FNUZ: 8, P.F8E4M3FNUZ: 8, P.F4E2M1FN: 4, P.F8E8M0FNU: 8,
    P.C64: 64, P.C128: 128,
}


def _build_dtypes() -> dict:
    table = {
        P.PRED: np.dtype(np.bool_),
        P.S8: np.dtype(np.int8), P.S16: np.dtype(np.int16),
        P.S32: np.dtype(np.int32), P.S64: np.dtype(np.int64),
        P.U8: np.dtype(np.uint8), P.U16: np.dtype(np.uint16),
        P.U32: np.dtype(np.uint32), P.U64: np.dtype(np.uint64),
        P.F16: np.dtype(np.float16), P.F32: np.dtype(np.float32),
        P.F64: np.dtype(np.float64),
        P.C64: np.dtype(np.complex64), P.C128: np.dtype(np.complex128),
    }
    if _ml is not None:
        names = {
            P.BF16: "bfloat16",
            P.F8E5M2: "float8_e5m2", P.F8E4M3: "float8_e4m3",
            P.F8E4M3FN: "float8_e4m3fn", P.F8E4M3B11FNUZ: "float8_e4m3b11fnuz",
            P.F8E3M4: "float8_e3m4", P.F8E5M2FNUZ: "float8_e5m2fnuz",
            P.F8E4M3FNUZ: "float8_e4m3fnuz", P.F4E2M1FN: "float4_e2m1fn",
            P.F8E8M0FNU: "float8_e8m0fnu",
            P.S2: "int2", P.S4: "int4", P.U2: "uint2", P.U4: "uint4",
            # 1-bit integers exist only in newer ml_dtypes (0.6+).
            P.S1: "int1", P.U1: "uint1",
        }
        for t, name in names.items():
            scalar = getattr(_ml, name, None)
            if scalar is not None:
                table[t] = np.dtype(scalar)
    return table


_DTYPES = _build_dtypes()
_BY_DTYPE = {dt: t for t, dt in _DTYPES.items()}


def all_array_types() -> tuple:
    """Every array element type, in enum order."""
    return tuple(t for t in PrimitiveType if t.is_array_type)


def primitive_type_from_name(name: str) -> PrimitiveType:
    """``StringToPrimitiveType``: the type with this HLO name (case-sensitive).

    >>> primitive_type_from_name("bf16")
    <PrimitiveType.BF16: 16>
    """
    if not isinstance(name, str):
        raise ShapeTypeError(f"element type name must be a str, got {type(name).__name__}")
    try:
        return _BY_NAME[name]
    except KeyError:
        raise InvalidShapeError(f'Invalid element type string: "{name}".') from None


def primitive_type_from_dtype(dtype) -> PrimitiveType:
    """The XLA element type of a numpy dtype (anything ``np.dtype`` accepts)."""
    try:
        dt = np.dtype(dtype)
    except TypeError as e:
        raise ShapeTypeError(f"not a numpy dtype: {dtype!r}") from e
    # Byte order does not change the element type.
    if dt.byteorder not in ("=", "|"):
        dt = dt.newbyteorder("=")
    try:
        return _BY_DTYPE[dt]
    except KeyError:
        raise InvalidShapeError(f"numpy dtype {dt} has no XLA element type") from None


def as_primitive_type(value) -> PrimitiveType:
    """Accept a PrimitiveType, an HLO name, an enum number or a numpy dtype."""
    if isinstance(value, PrimitiveType):
        return value
    if isinstance(value, str):
        return primitive_type_from_name(value)
    if isinstance(value, (int, np.integer)) and not isinstance(value, bool):
        try:
            return PrimitiveType(int(value))
        except ValueError:
            raise InvalidShapeError(f"{int(value)} is not a PrimitiveType enum value") from None
    return primitive_type_from_dtype(value)


def bit_width(t) -> int:
    return as_primitive_type(t).bit_width


def byte_width(t) -> int:
    return as_primitive_type(t).byte_width
