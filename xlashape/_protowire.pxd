# cython: language_level=3
"""Protobuf's wire format, for the compiled proto readers (``_protowire.pyx``,
``_protoscan.pyx``): reading a varint and skipping a field, inline."""

from libc.stdint cimport uint64_t


cdef enum:
    WIRE_VARINT = 0
    WIRE_FIXED64 = 1
    WIRE_LEN = 2
    WIRE_FIXED32 = 5


cdef inline Py_ssize_t read_varint(const unsigned char* p, Py_ssize_t i, Py_ssize_t end,
                                   uint64_t* out) noexcept nogil:
    """The varint at ``p[i:end]`` into ``out``: the index past it, or -1 if it
    is cut off, longer than 10 bytes, or holds more than 64 bits (protobuf
    refuses the first two; the third it would truncate, which the readers
    here leave to the reference)."""
    cdef uint64_t value = 0, b
    cdef int shift = 0
    while i < end:
        b = p[i]
        i += 1
        if shift == 63 and b > 1:
            return -1
        value |= (b & 0x7F) << shift
        if not b & 0x80:
            out[0] = value
            return i
        shift += 7
        if shift > 63:
            return -1
    return -1


cdef inline Py_ssize_t skip_field(const unsigned char* p, Py_ssize_t i, Py_ssize_t end,
                                  uint64_t wire, Py_ssize_t* start) noexcept nogil:
    """Past the value of a field of wire type ``wire`` at ``p[i:end]`` (its
    bytes in ``start[0]`` up to the index returned): -1 if it is cut off or
    of a wire type XLA's messages never have (a group)."""
    cdef uint64_t n
    if wire == WIRE_VARINT:
        start[0] = i
        return read_varint(p, i, end, &n)
    if wire == WIRE_LEN:
        i = read_varint(p, i, end, &n)
        if i < 0 or n > <uint64_t>(end - i):
            return -1
        start[0] = i
        return i + <Py_ssize_t>n
    if wire == WIRE_FIXED64 or wire == WIRE_FIXED32:
        start[0] = i
        i += 8 if wire == WIRE_FIXED64 else 4
        return i if i <= end else -1
    return -1
