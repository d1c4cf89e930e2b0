# cython: language_level=3
"""The wire-format walks of :mod:`xlashape.protos`, compiled.

:func:`parse_cost` is ``protos._parse_cost_py`` in C: the estimate, from the
wire format alone, of the memory protobuf's parse of gzip input would take,
which ``protos._Budget`` checks before it lets protobuf parse. The Python
function is the reference: this one counts the same bytes the same way,
branch for branch, stops at the same field and explains a malformed input in
the same words (``tests/test_protowire.py`` compares the two on every real
proto of the test data and on mutated and random bytes). It reads each
message type's fields from a :class:`CostTable` that ``protos`` compiles
once from its own table (``protos._fields_of``), so the costs are written
in one place. In Python it read about 25 MB of a real module a second,
which made a 100 MB module gzip'd to 12 MB cost 4 s before its 1 s parse.

:func:`field_spans` lists where the values of one field of a message are
(``hlo_proto`` finds an ``HloProto``'s module in its bytes with it).
"""

from cpython.buffer cimport PyBUF_SIMPLE, PyBuffer_Release, PyObject_GetBuffer
from cpython.mem cimport PyMem_Free, PyMem_Malloc
from libc.stdint cimport INT64_MAX, int64_t, uint64_t
from libc.string cimport memset

from xlashape._protowire cimport WIRE_LEN, read_varint, skip_field

cdef enum:
    UNKNOWN = 0     # a field the table does not declare
    BYTES = 1       # a string or bytes field
    NUMBER = 2      # a number (or an enum, a bool)
    MESSAGE = 3     # a message the estimate walks into (it holds messages)
    FLAT = 4        # a message of numbers and strings alone: counted by its length
    MAX_STACK = 1024


cdef struct Field:
    unsigned char kind
    unsigned char repeated
    int sub             # MESSAGE: the index of its message type
    int64_t cost        # MESSAGE, FLAT: the message's fixed part
    int64_t per_byte    # FLAT: the most its content takes per byte


cdef class CostTable:
    """The fields of a message type and of every message type under it, for
    :func:`parse_cost`: ``fields`` is ``protos._fields_of(descriptor)``
    (``{number: (kind, repeated)}``, kind ``None`` for a string or bytes,
    ``0`` for a number, ``(cost, fields, per_byte)`` for a message) and the
    constants are protos' (``_POINTER``, ``_REPEATED_NUMBER``,
    ``_MAX_DEPTH``)."""

    cdef Field* fields          # every message type's fields, by number, one after the other
    cdef Py_ssize_t* first      # per message type: where its fields start in ``fields``
    cdef Py_ssize_t* count      # per message type: its largest field number + 1
    cdef int messages
    cdef readonly int64_t pointer
    cdef readonly int64_t repeated_number
    cdef readonly int max_depth

    def __cinit__(self, dict fields, int64_t pointer, int64_t repeated_number, int max_depth):
        if not 0 <= max_depth < MAX_STACK:
            raise ValueError(f"max_depth={max_depth}: at most {MAX_STACK - 1}")
        self.pointer = pointer
        self.repeated_number = repeated_number
        self.max_depth = max_depth
        # number the message types that the walk descends into (the dicts,
        # which refer to each other: a tuple ShapeProto holds ShapeProtos)
        order = [fields]
        index = {id(fields): 0}
        k = 0
        while k < len(order):
            for kind, _repeated in order[k].values():
                if type(kind) is tuple and kind[2] is None and id(kind[1]) not in index:
                    index[id(kind[1])] = len(order)
                    order.append(kind[1])
            k += 1
        self.messages = len(order)
        self.first = <Py_ssize_t*>PyMem_Malloc(self.messages * sizeof(Py_ssize_t))
        self.count = <Py_ssize_t*>PyMem_Malloc(self.messages * sizeof(Py_ssize_t))
        if self.first == NULL or self.count == NULL:
            raise MemoryError()
        cdef Py_ssize_t total = 0, m
        for m, table in enumerate(order):
            self.first[m] = total
            self.count[m] = (max(table) + 1) if table else 0
            total += self.count[m]
        self.fields = <Field*>PyMem_Malloc(max(total, 1) * sizeof(Field))
        if self.fields == NULL:
            raise MemoryError()
        memset(self.fields, 0, max(total, 1) * sizeof(Field))
        cdef Field* f
        for m, table in enumerate(order):
            for number, (kind, repeated) in table.items():
                if number < 0:
                    raise ValueError(f"field number {number}")
                f = &self.fields[self.first[m] + number]
                f.repeated = bool(repeated)
                if kind is None:
                    f.kind = BYTES
                elif type(kind) is not tuple:
                    f.kind = NUMBER
                else:
                    f.cost = kind[0]
                    if kind[2] is None:
                        f.kind = MESSAGE
                        f.sub = index[id(kind[1])]
                    else:
                        f.kind = FLAT
                        f.per_byte = kind[2]

    def __dealloc__(self):
        PyMem_Free(self.fields)
        PyMem_Free(self.first)
        PyMem_Free(self.count)


cdef object _varint_value(const unsigned char* p, Py_ssize_t i, Py_ssize_t end):
    # a length as the reference reads it (a Python int of up to 70 bits), for
    # its message
    value = 0
    cdef int shift = 0
    while i < end:
        b = p[i]
        i += 1
        value |= (b & 0x7F) << shift
        if not b & 0x80 or shift >= 63:
            break
        shift += 7
    return value


cdef object _walk(const unsigned char* p, Py_ssize_t size, CostTable t, int64_t total,
                  int64_t stop):
    cdef Py_ssize_t stack_end[MAX_STACK]
    cdef int stack_message[MAX_STACK]
    cdef Py_ssize_t stack_next[MAX_STACK]
    cdef int depth = 0, message = 0, shift
    cdef Py_ssize_t i = 0, end = size, start, j, length_at
    cdef uint64_t b, tag, n, wire, number
    cdef bint wide
    cdef Field unknown
    cdef const Field* f
    memset(&unknown, 0, sizeof(Field))
    while True:
        if i >= end:
            if depth == 0:
                return total, ""
            depth -= 1
            i = stack_next[depth]
            end = stack_end[depth]
            message = stack_message[depth]
            continue
        start = i
        b = p[i]
        i += 1
        tag = b & 0x7F
        shift = 7
        wide = False                  # bits past the 64th: no field of the table
        while b & 0x80:
            if i >= end or shift > 63:
                return None, f"a tag cut off at byte {start}"
            b = p[i]
            i += 1
            if shift == 63:
                wide = wide or (b & 0x7E) != 0
            tag |= (b & 0x7F) << shift
            shift += 7
        wire = tag & 7
        number = tag >> 3
        if not wide and number < <uint64_t>t.count[message]:
            f = &t.fields[t.first[message] + number]
        else:
            f = &unknown
        if wire == 2:
            if i >= end:
                return None, f"a length cut off at byte {i}"
            length_at = i
            b = p[i]
            i += 1
            n = b & 0x7F
            shift = 7
            wide = False
            while b & 0x80:
                if i >= end or shift > 63:
                    return None, f"a length cut off at byte {i}"
                b = p[i]
                i += 1
                if shift == 63:
                    wide = wide or (b & 0x7E) != 0
                n |= (b & 0x7F) << shift
                shift += 7
            if wide or n > <uint64_t>(end - i):
                return None, (f"a field of {_varint_value(p, length_at, end)} bytes at byte "
                              f"{start} runs past its end")
            j = i + <Py_ssize_t>n
            if f.kind == UNKNOWN:
                total += <int64_t>n
                i = j
            elif f.kind == BYTES:
                total += <int64_t>n + (t.pointer if f.repeated else 0)
                i = j
            elif f.kind == NUMBER:      # packed numbers: at most one per byte
                total += t.repeated_number * <int64_t>n
                i = j
            elif f.kind == FLAT:
                total += f.cost + (t.pointer if f.repeated else 0) + f.per_byte * <int64_t>n
                i = j
            else:
                total += f.cost + (t.pointer if f.repeated else 0)
                if n:
                    if depth >= t.max_depth:
                        return None, (f"messages nested deeper than protobuf reads "
                                      f"({t.max_depth}) at byte {start}")
                    stack_next[depth] = j
                    stack_end[depth] = end
                    stack_message[depth] = message
                    depth += 1
                    end = j
                    message = f.sub
                else:
                    i = j
            if total > stop:
                return total, ""
        elif wire == 0:
            while True:
                if i >= end:
                    return None, f"a number cut off at byte {i}"
                b = p[i]
                i += 1
                if not b & 0x80:
                    break
            if f.repeated:
                total += t.repeated_number
                if total > stop:
                    return total, ""
        elif wire == 1 or wire == 5:
            i += 8 if wire == 1 else 4
            if i > end:
                return None, f"a fixed-size field cut off at byte {start}"
        else:
            return None, (f"wire type {wire} at byte {start} (a group, which XLA's messages "
                          "do not have, or no wire type)")


def parse_cost(data, CostTable table, int64_t message_cost, stop):
    """``protos._parse_cost_py(data, descriptor, stop)`` for the message type
    ``table`` was made from, whose fixed part is ``message_cost``:
    ``(estimate, "")`` or ``(None, why)``; ``None`` if ``data`` is no
    buffer of bytes (the reference decides)."""
    cdef Py_buffer view
    try:
        PyObject_GetBuffer(data, &view, PyBUF_SIMPLE)
    except (BufferError, TypeError):
        return None
    # the walk counts in 64 bits: a stop past 2**62 is never reached by a
    # buffer in memory (at most a few hundred bytes counted per byte)
    cdef int64_t cap = <int64_t>1 << 62
    cdef int64_t limit = cap if stop > cap else stop
    try:
        return _walk(<const unsigned char*>view.buf, view.len, table, message_cost, limit)
    finally:
        PyBuffer_Release(&view)


def field_spans(data, Py_ssize_t number, Py_ssize_t start=0, end=None):
    """``[(start, end), ...]`` of each length-delimited value of field
    ``number`` in the message ``data[start:end]``, in order; ``None`` if the
    message is not well-formed (a cut-off field, a group) or ``data`` is no
    buffer of bytes."""
    cdef Py_buffer view
    try:
        PyObject_GetBuffer(data, &view, PyBUF_SIMPLE)
    except (BufferError, TypeError):
        return None
    cdef const unsigned char* p = <const unsigned char*>view.buf
    cdef Py_ssize_t stop = view.len if end is None else min(<Py_ssize_t>end, view.len)
    cdef Py_ssize_t i = start, value_at = 0
    cdef uint64_t tag
    out = []
    try:
        if i < 0 or i > stop:
            return None
        while i < stop:
            i = read_varint(p, i, stop, &tag)
            if i < 0 or tag >> 3 == 0:
                return None
            i = skip_field(p, i, stop, tag & 7, &value_at)
            if i < 0:
                return None
            if tag >> 3 == <uint64_t>number and tag & 7 == WIRE_LEN:
                out.append((value_at, i))
        return out
    finally:
        PyBuffer_Release(&view)
