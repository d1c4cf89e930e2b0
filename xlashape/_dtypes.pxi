# Element types for LayoutArray: how each XLA type is stored, loaded into a
# Python scalar and (for the common cases) stored from one, with no numpy
# objects on the scalar path.
#
# Loads follow numpy: bf16 -> float by a 16-bit shift, f16 by a small C
# conversion, every float of 8 bits or fewer through a 256-entry table of
# doubles built once at import from ml_dtypes (so the values are ml_dtypes').

cimport numpy as cnp
from libc.math cimport ldexp, isinf, isnan, fabs, HUGE_VAL, NAN
from libc.stdint cimport int8_t, int16_t, int32_t, uint16_t, uint32_t, uint64_t
from libc.float cimport FLT_MAX

import numpy as np

cnp.import_array()

# One 256-entry table per small float type; filled by _build_float_tables().
cdef double _tables[MAX_TABLES][256]
_table_index = {}   # PrimitiveType -> row of _tables


cdef inline double half_to_double(uint16_t h) noexcept nogil:
    """IEEE binary16 -> double, exact (every half is a double)."""
    cdef int e = (h >> 10) & 0x1F
    cdef int m = h & 0x3FF
    cdef double v
    if e == 0:
        v = ldexp(<double>m, -24)
    elif e == 31:
        v = HUGE_VAL if m == 0 else NAN
    else:
        v = ldexp(<double>(m | 0x400), e - 25)
    return -v if (h & 0x8000) else v


cdef inline double bf16_to_double(uint16_t h) noexcept nogil:
    cdef uint32_t bits = (<uint32_t>h) << 16
    cdef float f
    memcpy(&f, &bits, 4)
    return f


def _build_float_tables():
    """Fill the small-float tables from ml_dtypes (every 8-bit pattern)."""
    from .primitive_types import all_array_types
    cdef int row = 0
    cdef int i
    codes = np.arange(256, dtype=np.uint8)
    for t in all_array_types():
        if not t.is_floating_point or t.bit_width > 8 or t.dtype is None:
            continue
        if row >= MAX_TABLES:
            raise RuntimeError("too many small float types for the table")
        if t.bit_width < 8:
            # ml_dtypes keeps a sub-byte code in the low bits of its byte.
            vals = (codes & ((1 << t.bit_width) - 1)).view(t.dtype).astype(np.float64)
        else:
            vals = codes.view(t.dtype).astype(np.float64)
        for i in range(256):
            _tables[row][i] = vals[i]
        _table_index[t] = row
        row += 1


_build_float_tables()


cdef int dinfo_for(DInfo* di, object ptype, object dtype, int64_t element_bits) except -1:
    """Describe how `ptype` is stored with `element_bits` bits per element.

    Raises InvalidShapeError for an element size that is neither the type's
    byte width (one element per byte or more) nor, for sub-byte types, its
    bit width (packed, E(n)).
    """
    cdef int bw = ptype.bit_width
    cdef int natural = ptype.byte_width * 8
    di.itemsize = dtype.itemsize
    di.value_bits = bw
    di.mask = ((<uint64_t>1) << bw) - 1 if bw < 64 else <uint64_t>0xFFFFFFFFFFFFFFFF
    di.table = NULL
    if element_bits == natural:
        di.packed_bits = 0
    elif bw < 8 and element_bits == bw:
        di.packed_bits = bw
    else:
        if bw < 8:
            expected = f"{natural} (one element per byte) or {bw} (packed, E({bw}))"
        else:
            expected = f"{natural}"
        raise InvalidShapeError(
            f"element size E({element_bits}) is not supported for {ptype.hlo_name}: "
            f"expected {expected}")
    if ptype.is_pred:
        di.kind = K_BOOL
    elif ptype.is_signed_integral:
        di.kind = K_SINT
    elif ptype.is_unsigned_integral:
        di.kind = K_UINT
    elif ptype.is_complex:
        di.kind = K_C64 if di.itemsize == 8 else K_C128
    elif ptype.hlo_name == "f16":
        di.kind = K_F16
    elif ptype.hlo_name == "bf16":
        di.kind = K_BF16
    elif ptype.hlo_name == "f32":
        di.kind = K_F32
    elif ptype.hlo_name == "f64":
        di.kind = K_F64
    elif ptype in _table_index:
        di.kind = K_TABLE
        di.table = _tables[<int>_table_index[ptype]]
    else:
        raise InvalidShapeError(f"element type {ptype.hlo_name} is not supported by LayoutArray")
    return 0


cdef inline uint64_t load_code(const DInfo* di, const char* base, int64_t elem) noexcept nogil:
    """The raw bits of element `elem` (sub-byte types, packed or one per byte)."""
    cdef int64_t bit
    if di.packed_bits:
        bit = elem * di.packed_bits
        return ((<const uint8_t*>base)[bit >> 3] >> (bit & 7)) & di.mask
    return (<const uint8_t*>base)[elem] & di.mask


cdef inline void store_code(const DInfo* di, char* base, int64_t elem, uint64_t code) noexcept nogil:
    cdef int64_t bit
    cdef uint8_t* p
    cdef int sh
    if di.packed_bits:
        bit = elem * di.packed_bits
        p = (<uint8_t*>base) + (bit >> 3)
        sh = bit & 7
        p[0] = <uint8_t>((p[0] & ~(di.mask << sh)) | ((code & di.mask) << sh))
    else:
        (<uint8_t*>base)[elem] = <uint8_t>(code & di.mask)


cdef object load_scalar(const DInfo* di, const char* base, int64_t elem):
    """Element `elem` of a physical buffer as a Python scalar (boxed once)."""
    cdef const char* p
    cdef uint64_t code
    cdef int8_t i8
    cdef int16_t i16
    cdef int32_t i32
    cdef int64_t i64
    cdef uint16_t u16
    cdef uint32_t u32
    cdef uint64_t u64
    cdef float f[2]
    cdef double d[2]
    if di.value_bits < 8 and di.kind != K_BOOL:
        code = load_code(di, base, elem)
        if di.kind == K_SINT:
            if code >> (di.value_bits - 1):
                return PyLong_FromLongLong(<long long>code - (1LL << di.value_bits))
            return PyLong_FromLongLong(<long long>code)
        if di.kind == K_UINT:
            return PyLong_FromLongLong(<long long>code)
        return PyFloat_FromDouble(di.table[code])
    if di.packed_bits:   # PRED with E(1)
        return PyBool_FromLong(<long>load_code(di, base, elem))
    p = base + elem * di.itemsize
    if di.kind == K_F32:
        memcpy(f, p, 4)
        return PyFloat_FromDouble(f[0])
    if di.kind == K_BF16:
        memcpy(&u16, p, 2)
        return PyFloat_FromDouble(bf16_to_double(u16))
    if di.kind == K_F64:
        memcpy(d, p, 8)
        return PyFloat_FromDouble(d[0])
    if di.kind == K_SINT:
        if di.itemsize == 1:
            memcpy(&i8, p, 1)
            return PyLong_FromLongLong(i8)
        if di.itemsize == 2:
            memcpy(&i16, p, 2)
            return PyLong_FromLongLong(i16)
        if di.itemsize == 4:
            memcpy(&i32, p, 4)
            return PyLong_FromLongLong(i32)
        memcpy(&i64, p, 8)
        return PyLong_FromLongLong(i64)
    if di.kind == K_UINT:
        if di.itemsize == 1:
            return PyLong_FromLongLong((<const uint8_t*>p)[0])
        if di.itemsize == 2:
            memcpy(&u16, p, 2)
            return PyLong_FromLongLong(u16)
        if di.itemsize == 4:
            memcpy(&u32, p, 4)
            return PyLong_FromLongLong(u32)
        memcpy(&u64, p, 8)
        return PyLong_FromUnsignedLongLong(u64)
    if di.kind == K_BOOL:
        return PyBool_FromLong((<const uint8_t*>p)[0] != 0)
    if di.kind == K_F16:
        memcpy(&u16, p, 2)
        return PyFloat_FromDouble(half_to_double(u16))
    if di.kind == K_TABLE:
        return PyFloat_FromDouble(di.table[(<const uint8_t*>p)[0]])
    if di.kind == K_C64:
        memcpy(f, p, 8)
        return PyComplex_FromDoubles(f[0], f[1])
    memcpy(d, p, 16)
    return PyComplex_FromDoubles(d[0], d[1])


# numpy's wording for an out-of-range Python int (numpy 2 raises, never wraps).
cdef int _int_overflow(object value, object dtype) except -1:
    raise ShapeOverflowError(f"Python integer {value} out of bounds for {dtype}")


cdef double _int_to_double(object value) except? -1.0:
    """An exact int as a double; ShapeOverflowError (Python's wording) past
    the double range, as storing it through numpy raises OverflowError."""
    cdef double x = PyLong_AsDouble_noexc(value)
    if x == -1.0 and PyErr_Occurred() != NULL:
        PyErr_Clear()
        raise ShapeOverflowError("int too large to convert to float")
    return x


# PRED is stored as XLA stores it: one byte (or one bit with E(1)) holding 0
# or 1. A numpy bool array can hold any nonzero byte (e.g.
# np.array([2], np.uint8).view(bool), which numpy reads as True); these
# helpers find and fold such bytes to 1.
cdef inline bint bytes_above_one(const char* p, int64_t n) noexcept nogil:
    """True when some byte of p[0:n] is neither 0 nor 1."""
    cdef const uint8_t* b = <const uint8_t*>p
    cdef uint8_t acc = 0
    cdef int64_t i
    for i in range(n):
        acc |= b[i]
    return (acc & 0xFE) != 0


cdef inline void bytes_to_bools(char* p, int64_t n) noexcept nogil:
    """Every nonzero byte of p[0:n] := 1."""
    cdef uint8_t* b = <uint8_t*>p
    cdef int64_t i
    for i in range(n):
        b[i] = b[i] != 0


cdef object bool_array_clean(object arr):
    """A numpy bool array whose bytes are all 0/1: `arr` itself, or a copy
    with every nonzero byte as 1 (same shape, C order)."""
    u = arr.view(np.uint8)
    if u.size and u.max() > 1:
        return np.not_equal(u, 0, out=np.empty(u.shape, np.bool_))
    return arr


cdef int bool_array_fix(object arr) except -1:
    """In place: every nonzero byte of the (writable) numpy bool array := 1."""
    u = arr.view(np.uint8)
    if u.size:
        np.minimum(u, 1, out=u)
    return 0


cdef int store_fast(const DInfo* di, char* base, int64_t elem, object value,
                    object dtype) except -1:
    """Store a Python int/float/bool with numpy's rules when that is simple in C.

    Returns 1 if stored, 0 if the caller must go through numpy (other value
    types, and every case whose rounding or errors are numpy's business).
    """
    cdef char* p
    cdef int overflow = 0
    cdef long long v
    cdef double x
    cdef float f
    cdef int8_t i8
    cdef int16_t i16
    cdef int32_t i32
    cdef uint16_t u16
    cdef uint32_t u32
    cdef uint64_t u64
    if di.packed_bits or di.value_bits < 8:
        return 0
    p = base + elem * di.itemsize
    if PyFloat_CheckExact(value):
        x = PyFloat_AS_DOUBLE(value)
        if di.kind == K_F64:
            memcpy(p, &x, 8)
            return 1
        if di.kind == K_F32:
            # numpy warns on finite overflow to inf; let numpy do that case.
            if fabs(x) > FLT_MAX and not isinf(x) and not isnan(x):
                return 0
            f = <float>x
            memcpy(p, &f, 4)
            return 1
        if di.kind == K_BF16:
            # ml_dtypes rounds double -> float -> bfloat16 (nearest, ties to
            # even); finite values that overflow and NaNs are left to it.
            if isnan(x) or fabs(x) > FLT_MAX:
                return 0
            f = <float>x
            memcpy(&u32, &f, 4)
            u32 = (u32 + 0x7FFF + ((u32 >> 16) & 1)) >> 16
            if (u32 & 0x7F80) == 0x7F80 and not isinf(x):
                return 0
            u16 = <uint16_t>u32
            memcpy(p, &u16, 2)
            return 1
        return 0
    if PyLong_CheckExact(value) or PyBool_Check(value):
        if di.kind == K_BOOL:
            if PyBool_Check(value):
                (<uint8_t*>p)[0] = 1 if value is True else 0
                return 1
            return 0
        if di.kind == K_F32 or di.kind == K_F64:
            x = _int_to_double(value)   # OverflowError beyond double, as numpy
            if di.kind == K_F64:
                memcpy(p, &x, 8)
                return 1
            if fabs(x) > FLT_MAX:
                return 0
            f = <float>x
            memcpy(p, &f, 4)
            return 1
        if di.kind != K_SINT and di.kind != K_UINT:
            return 0
        v = PyLong_AsLongLongAndOverflow(value, &overflow)
        if overflow:
            if di.kind == K_UINT and di.itemsize == 8 and overflow > 0:
                if value > 0xFFFFFFFFFFFFFFFF:
                    _int_overflow(value, dtype)
                u64 = value
                memcpy(p, &u64, 8)
                return 1
            _int_overflow(value, dtype)
        if di.kind == K_SINT:
            if di.itemsize == 1:
                if v < -128 or v > 127:
                    _int_overflow(value, dtype)
                i8 = <int8_t>v
                memcpy(p, &i8, 1)
            elif di.itemsize == 2:
                if v < -32768 or v > 32767:
                    _int_overflow(value, dtype)
                i16 = <int16_t>v
                memcpy(p, &i16, 2)
            elif di.itemsize == 4:
                if v < -2147483648LL or v > 2147483647LL:
                    _int_overflow(value, dtype)
                i32 = <int32_t>v
                memcpy(p, &i32, 4)
            else:
                memcpy(p, &v, 8)
            return 1
        if v < 0:
            _int_overflow(value, dtype)
        if di.itemsize == 1:
            if v > 255:
                _int_overflow(value, dtype)
            (<uint8_t*>p)[0] = <uint8_t>v
        elif di.itemsize == 2:
            if v > 65535:
                _int_overflow(value, dtype)
            u16 = <uint16_t>v
            memcpy(p, &u16, 2)
        elif di.itemsize == 4:
            if v > 4294967295LL:
                _int_overflow(value, dtype)
            u32 = <uint32_t>v
            memcpy(p, &u32, 4)
        else:
            memcpy(p, &v, 8)
        return 1
    return 0


# PEP 3118 format codes of the types that have one (numpy's own choices);
# bf16, the f8 family and the 1/2/4-bit types have none.
def _pep3118_formats():
    """The buffer format of each element type with one: the one numpy itself
    exports for that dtype, so that a consumer of the buffer protocol (numpy
    reads it before __array__) gets exactly np.int64 / np.uint64 back ('l'
    where a C long is 64-bit; 'q', numpy's `longlong`, is another dtype that
    ml_dtypes registers no casts for)."""
    out = {}
    for name, dt in (("pred", np.bool_), ("s8", np.int8), ("s16", np.int16),
                     ("s32", np.int32), ("s64", np.int64), ("u8", np.uint8),
                     ("u16", np.uint16), ("u32", np.uint32), ("u64", np.uint64),
                     ("f16", np.float16), ("f32", np.float32), ("f64", np.float64),
                     ("c64", np.complex64), ("c128", np.complex128)):
        fmt = memoryview(np.empty(0, dt)).format
        out[name] = fmt.encode("ascii")
    return out


_PEP3118 = _pep3118_formats()
