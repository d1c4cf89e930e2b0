# cython: language_level=3
"""The ``.hlo.pb`` reader's fast path: an HloModuleProto's instructions, from its bytes, in C.

:func:`xlashape.hlo_proto.read_hlo_proto_module` builds an
``Instruction`` object per instruction of the module. Read through
protobuf's Python objects, each costs about ten attribute reads of the
message (its id, name, opcode, shape, operand ids, ...), a shape looked up
by its serialized bytes, the operand names joined and an object built with
keyword arguments: 10 us an instruction, 2.8 times what jaxlib's C++ takes
to parse the same bytes and build its module. :class:`ModuleScan` reads the
same fields from the wire format of the bytes protobuf has already parsed
(so they are well-formed), and makes the objects in C:

- one shape per distinct ShapeProto (by its bytes), one opcode string per
  distinct opcode;
- operands as ``%name, %name``, each ``%name`` made once;
- no protobuf object per instruction: an instruction keeps its
  computation's message and its index there (:class:`ProtoInstructionBase`)
  for the attribute text it writes when first read.

It decides nothing that needs a reason: ``hlo_proto``'s Python reader,
which reads the messages, is the reference and the only source of error
messages. The scan reports a module it does not read exactly as protobuf
would (a message field given twice, which protobuf merges; a varint of
more than 64 bits; a group; counts that differ from the message's), and the
build returns ``None`` at the first thing the reference must explain (an
operand or callee that does not exist, an instruction without an opcode, a
shape it refuses): ``hlo_proto`` then reads the module the reference way.
``tests/test_protoscan.py`` compares the two models field by field on every
proto of the test data and on mutated ones.
"""

from cpython.buffer cimport PyBUF_SIMPLE, PyBuffer_Release, PyObject_GetBuffer
from cpython.list cimport PyList_GET_ITEM, PyList_GET_SIZE
from cpython.mem cimport PyMem_Free, PyMem_Malloc, PyMem_Realloc
from cpython.object cimport PyObject
from cpython.ref cimport Py_DECREF, Py_INCREF, Py_XDECREF
from libc.stdint cimport int64_t, uint64_t
from libc.string cimport memcmp, memcpy, memset

from xlashape._hloscan cimport InstructionBase
from xlashape._protowire cimport WIRE_LEN, WIRE_VARINT, read_varint, skip_field

cdef extern from "Python.h":
    bint PyUnicode_IS_ASCII(object o)
    void* PyUnicode_DATA(object o)
    Py_ssize_t PyUnicode_GET_LENGTH(object o)
    object PyUnicode_New(Py_ssize_t size, Py_UCS4 maxchar)
    object PyUnicode_DecodeUTF8(const char* s, Py_ssize_t size, const char* errors)
    object PyBytes_FromStringAndSize(const char* s, Py_ssize_t n)

cdef extern from *:
    """
    /* an object of the type cls, made by its tp_new alone (no __init__) */
    static PyObject* xs_new_object(PyObject* cls, PyObject* args) {
        return ((PyTypeObject*)cls)->tp_new((PyTypeObject*)cls, args, NULL);
    }
    """
    object xs_new_object(object cls, object args)


cdef class ProtoInstructionBase(InstructionBase):
    """The fields an instruction read from a proto adds (see
    ``hlo_proto.ProtoInstruction``): ``_ip`` its computation's message
    (``HloComputationProto``; ``None`` once its attribute text is written),
    ``_index`` its place in that message's ``instructions``, ``_called``
    the names of the computations it calls."""

    cdef public object _ip
    cdef public object _called
    cdef public Py_ssize_t _index


# the fields of XLA's messages read here (service/hlo.proto)
cdef enum:
    MODULE_COMPUTATIONS = 3
    COMPUTATION_INSTRUCTIONS = 2
    INS_NAME = 1
    INS_OPCODE = 2
    INS_SHAPE = 3
    INS_PARAMETER_NUMBER = 9
    INS_ID = 35
    INS_OPERAND_IDS = 36
    INS_CALLED_COMPUTATION_IDS = 38


cdef struct Ins:
    Py_ssize_t start, end           # the instruction's bytes
    Py_ssize_t name_at, name_n
    Py_ssize_t opcode_at, opcode_n
    Py_ssize_t shape_at, shape_n    # shape_at -1: no shape field
    int64_t id
    int64_t parameter_number
    bint calls


# -- a table of byte spans (opcodes, shapes) to the object made of them -----------------

cdef struct SpanEntry:
    const unsigned char* at
    Py_ssize_t n
    uint64_t hash
    PyObject* value                 # a reference owned by the table; NULL: empty


cdef struct SpanTable:
    SpanEntry* slots
    Py_ssize_t mask                 # capacity - 1 (a power of 2)
    Py_ssize_t used


cdef inline uint64_t _span_hash(const unsigned char* s, Py_ssize_t n) noexcept nogil:
    cdef uint64_t h = 14695981039346656037ULL         # FNV-1a
    cdef Py_ssize_t k
    for k in range(n):
        h = (h ^ s[k]) * 1099511628211ULL
    return h


cdef int _span_init(SpanTable* t, Py_ssize_t capacity) except -1:
    t.slots = <SpanEntry*>PyMem_Malloc(capacity * sizeof(SpanEntry))
    if t.slots == NULL:
        raise MemoryError()
    memset(t.slots, 0, capacity * sizeof(SpanEntry))
    t.mask = capacity - 1
    t.used = 0
    return 0


cdef void _span_free(SpanTable* t) noexcept:
    cdef Py_ssize_t k
    if t.slots == NULL:
        return
    for k in range(t.mask + 1):
        Py_XDECREF(t.slots[k].value)
    PyMem_Free(t.slots)
    t.slots = NULL


cdef SpanEntry* _span_find(SpanTable* t, const unsigned char* s, Py_ssize_t n,
                           uint64_t h) noexcept nogil:
    """The slot of s[:n]: its entry, or the empty slot to put it in."""
    cdef Py_ssize_t k = <Py_ssize_t>(h & <uint64_t>t.mask)
    cdef SpanEntry* e
    while True:
        e = &t.slots[k]
        if e.value == NULL or (e.hash == h and e.n == n and memcmp(e.at, s, n) == 0):
            return e
        k = (k + 1) & t.mask


cdef int _span_put(SpanTable* t, SpanEntry* e, const unsigned char* s, Py_ssize_t n,
                   uint64_t h, object value) except -1:
    cdef SpanEntry* old
    cdef Py_ssize_t k, capacity
    Py_INCREF(value)
    e.at = s
    e.n = n
    e.hash = h
    e.value = <PyObject*>value
    t.used += 1
    if 2 * t.used <= t.mask:
        return 0
    # grow to twice the size, moving each entry
    old = t.slots
    capacity = 2 * (t.mask + 1)
    t.slots = <SpanEntry*>PyMem_Malloc(capacity * sizeof(SpanEntry))
    if t.slots == NULL:
        t.slots = old
        raise MemoryError()
    memset(t.slots, 0, capacity * sizeof(SpanEntry))
    t.mask = capacity - 1
    for k in range(capacity // 2):
        if old[k].value != NULL:
            _span_find(t, old[k].at, old[k].n, old[k].hash)[0] = old[k]
    PyMem_Free(old)
    return 0


# -- a table of instruction ids to their index ----------------------------------------

cdef inline uint64_t _id_hash(int64_t key) noexcept nogil:
    cdef uint64_t z = <uint64_t>key + 0x9E3779B97F4A7C15ULL    # splitmix64's finalizer
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL
    return z ^ (z >> 31)


cdef inline Py_ssize_t _id_lookup(const Py_ssize_t* slots, Py_ssize_t mask, const Ins* ins,
                                  int64_t key) noexcept nogil:
    """The index of the instruction with id ``key``, or -1."""
    cdef Py_ssize_t k = <Py_ssize_t>(_id_hash(key) & <uint64_t>mask), at
    while True:
        at = slots[k]
        if at < 0 or ins[at].id == key:
            return at
        k = (k + 1) & mask


cdef object _ascii_or_utf8(const unsigned char* s, Py_ssize_t n, Py_ssize_t prefix):
    """s[:n] as a str (with ``%`` before it if ``prefix``); None if it is not UTF-8."""
    cdef Py_ssize_t k
    for k in range(n):
        if s[k] >= 0x80:
            try:
                text = PyUnicode_DecodeUTF8(<const char*>s, n, "strict")
            except UnicodeDecodeError:
                return None
            return "%" + text if prefix else text
    out = PyUnicode_New(n + prefix, 127)
    cdef char* d = <char*>PyUnicode_DATA(out)
    if prefix:
        d[0] = 37                   # %
    memcpy(d + prefix, s, n)
    return out


cdef class ModuleScan:
    """The instructions of the ``HloModuleProto`` whose serialized bytes are
    ``data`` (bytes protobuf has parsed): where each one's fields are, read
    from the wire format. ``ok`` is False if the module is not one this scan
    reads exactly as protobuf does (the reader then reads it the reference
    way). ``instructions_per_computation`` gives the counts (to check against
    the message), :meth:`names`, :meth:`instruction_ids` and :meth:`build`
    the model."""

    cdef Py_buffer view
    cdef bint has_view
    cdef const unsigned char* p
    cdef Ins* ins
    cdef Py_ssize_t n, capacity
    cdef Py_ssize_t* comp_first     # per computation: its first instruction
    cdef Py_ssize_t ncomp, comp_capacity
    cdef Py_ssize_t* ids            # instruction id -> index (open addressing), after instruction_ids
    cdef Py_ssize_t ids_mask
    cdef readonly bint ok

    def __cinit__(self, data):
        self.has_view = False
        self.ok = False
        try:
            PyObject_GetBuffer(data, &self.view, PyBUF_SIMPLE)
        except (BufferError, TypeError):
            return
        self.has_view = True
        self.p = <const unsigned char*>self.view.buf
        self.ok = self._scan(self.view.len) == 0

    def __dealloc__(self):
        PyMem_Free(self.ins)
        PyMem_Free(self.comp_first)
        PyMem_Free(self.ids)
        if self.has_view:
            PyBuffer_Release(&self.view)

    cdef int _scan(self, Py_ssize_t size) except -2:
        """0, or -1 for a module this scan does not read."""
        cdef Py_ssize_t i = 0, j, at, ci, cj
        cdef uint64_t tag
        while i < size:
            i = read_varint(self.p, i, size, &tag)
            if i < 0 or tag >> 3 == 0:
                return -1
            j = skip_field(self.p, i, size, tag & 7, &at)
            if j < 0:
                return -1
            if tag >> 3 == MODULE_COMPUTATIONS and tag & 7 == WIRE_LEN:
                if self._add_computation() < 0:
                    return -1
                ci = at
                while ci < j:
                    ci = read_varint(self.p, ci, j, &tag)
                    if ci < 0 or tag >> 3 == 0:
                        return -1
                    cj = skip_field(self.p, ci, j, tag & 7, &at)
                    if cj < 0:
                        return -1
                    if tag >> 3 == COMPUTATION_INSTRUCTIONS and tag & 7 == WIRE_LEN:
                        if self._add_instruction(at, cj) < 0:
                            return -1
                    ci = cj
            i = j
        return 0

    cdef int _add_computation(self) except -2:
        if self.ncomp == self.comp_capacity:
            grown = <Py_ssize_t*>PyMem_Realloc(
                self.comp_first, (2 * self.comp_capacity + 16) * sizeof(Py_ssize_t))
            if grown == NULL:
                raise MemoryError()
            self.comp_first = grown
            self.comp_capacity = 2 * self.comp_capacity + 16
        self.comp_first[self.ncomp] = self.n
        self.ncomp += 1
        return 0

    cdef int _add_instruction(self, Py_ssize_t start, Py_ssize_t end) except -2:
        cdef Ins* r
        cdef Py_ssize_t i = start, j, at = 0
        cdef uint64_t tag = 0, v = 0, number, wire
        if self.n == self.capacity:
            grown = <Ins*>PyMem_Realloc(self.ins, (2 * self.capacity + 64) * sizeof(Ins))
            if grown == NULL:
                raise MemoryError()
            self.ins = grown
            self.capacity = 2 * self.capacity + 64
        r = &self.ins[self.n]
        memset(r, 0, sizeof(Ins))
        r.start = start
        r.end = end
        r.shape_at = -1
        while i < end:
            i = read_varint(self.p, i, end, &tag)
            if i < 0:
                return -1
            number = tag >> 3
            wire = tag & 7
            if number == 0:
                return -1
            j = skip_field(self.p, i, end, wire, &at)
            if j < 0:
                return -1
            if wire == WIRE_LEN:
                if number == INS_NAME:
                    r.name_at = at
                    r.name_n = j - at
                elif number == INS_OPCODE:
                    r.opcode_at = at
                    r.opcode_n = j - at
                elif number == INS_SHAPE:
                    if r.shape_at >= 0:
                        return -1           # protobuf merges the two: the reference reads it
                    r.shape_at = at
                    r.shape_n = j - at
                elif number == INS_CALLED_COMPUTATION_IDS:
                    r.calls = True
            elif wire == WIRE_VARINT:
                if number == INS_ID or number == INS_PARAMETER_NUMBER:
                    read_varint(self.p, at, j, &v)
                    if number == INS_ID:
                        r.id = <int64_t>v
                    else:
                        r.parameter_number = <int64_t>v
                elif number == INS_CALLED_COMPUTATION_IDS:
                    r.calls = True
            i = j
        self.n += 1
        return 0

    @property
    def instructions_per_computation(self):
        """[count, ...] in the order of the module's computations."""
        return [(self.comp_first[k + 1] if k + 1 < self.ncomp else self.n) - self.comp_first[k]
                for k in range(self.ncomp)]

    def names(self):
        """Every instruction's name, in the module's order (``None`` if one
        is not UTF-8)."""
        out = [None] * self.n
        cdef Py_ssize_t k
        for k in range(self.n):
            name = _ascii_or_utf8(self.p + self.ins[k].name_at, self.ins[k].name_n, 0)
            if name is None:
                return None
            out[k] = name
        return out

    def instruction_ids(self, list names):
        """``{id: name}`` of every instruction (``names`` from
        :meth:`names`); ``None`` if two have the same id."""
        if len(names) != self.n:
            raise ValueError("one name per instruction")
        cdef Py_ssize_t capacity = 16, k, at, slot
        while capacity < 2 * self.n:
            capacity *= 2
        PyMem_Free(self.ids)
        self.ids = <Py_ssize_t*>PyMem_Malloc(capacity * sizeof(Py_ssize_t))
        if self.ids == NULL:
            raise MemoryError()
        for k in range(capacity):
            self.ids[k] = -1
        self.ids_mask = capacity - 1
        out = {}
        for k in range(self.n):
            slot = <Py_ssize_t>(_id_hash(self.ins[k].id) & <uint64_t>self.ids_mask)
            while True:
                at = self.ids[slot]
                if at < 0:
                    self.ids[slot] = k
                    break
                if self.ins[at].id == self.ins[k].id:
                    return None
                slot = (slot + 1) & self.ids_mask
            out[self.ins[k].id] = <object>PyList_GET_ITEM(names, k)
        return out

    def build(self, cls, list computations, list messages, list root_ids, list names, shape_of):
        """Make the instructions (objects of ``cls``, a subclass of
        :class:`ProtoInstructionBase`) and append each to its computation's
        ``instructions``: ``computations`` are the module's ``Computation``
        objects in order, ``messages`` their ``HloComputationProto``,
        ``root_ids`` their root ids; ``shape_of(bytes)`` makes the Shape of a
        ShapeProto's bytes (once per distinct bytes). Returns ``[(instruction,
        (called computation id, ...)), ...]`` of the instructions that call
        computations (the caller names them), or ``None`` if an operand id
        names no instruction or an opcode is empty (the reference explains
        it). Call :meth:`instruction_ids` first."""
        if self.ids == NULL:
            raise ValueError("call instruction_ids() first")
        if not (len(computations) == len(messages) == len(root_ids) == self.ncomp) \
                or len(names) != self.n:
            raise ValueError("one computation, message and root id per computation scanned")
        if not (isinstance(cls, type) and issubclass(cls, ProtoInstructionBase)):
            raise TypeError("cls must be a subclass of ProtoInstructionBase")
        cdef SpanTable shapes, opcodes
        cdef Py_ssize_t k
        shapes.slots = opcodes.slots = NULL
        cdef PyObject** percent = <PyObject**>PyMem_Malloc(max(self.n, 1) * sizeof(PyObject*))
        cdef Py_ssize_t* operands = NULL
        cdef Py_ssize_t operands_capacity = 0
        if percent == NULL:
            raise MemoryError()
        memset(percent, 0, max(self.n, 1) * sizeof(PyObject*))
        try:
            _span_init(&shapes, 256)
            _span_init(&opcodes, 256)
            return self._build(cls, computations, messages, root_ids, names, shape_of,
                               &shapes, &opcodes, percent, &operands, &operands_capacity)
        finally:
            for k in range(self.n):
                Py_XDECREF(percent[k])
            PyMem_Free(percent)
            PyMem_Free(operands)
            _span_free(&shapes)
            _span_free(&opcodes)

    cdef object _build(self, cls, list computations, list messages, list root_ids, list names,
                       shape_of, SpanTable* shapes, SpanTable* opcodes, PyObject** percent,
                       Py_ssize_t** operands, Py_ssize_t* operands_capacity):
        cdef Py_ssize_t ci, k, first, stop, count, i, j, at = 0, m, total
        cdef int64_t root
        cdef uint64_t tag = 0, v = 0
        cdef Ins* r
        cdef SpanEntry* e
        cdef uint64_t h
        cdef const unsigned char* s
        cdef const unsigned char* last_shape = NULL
        cdef Py_ssize_t last_shape_n = -1
        cdef ProtoInstructionBase ins
        cdef bint ascii
        cdef char* d
        cdef list out
        calls = []
        shape = None
        empty = ""
        no_calls = ()
        zero = 0
        for ci in range(self.ncomp):
            comp = computations[ci]
            cname = comp.name
            out = comp.instructions
            message = messages[ci]
            root = root_ids[ci]
            first = self.comp_first[ci]
            stop = self.comp_first[ci + 1] if ci + 1 < self.ncomp else self.n
            for k in range(first, stop):
                r = &self.ins[k]
                if r.opcode_n == 0:
                    return None                 # "an instruction without an opcode"
                # the shape: the last one's if the bytes are the same, else one per bytes
                s = self.p + r.shape_at if r.shape_at >= 0 else self.p
                if not (r.shape_n == last_shape_n and memcmp(s, last_shape, r.shape_n) == 0):
                    h = _span_hash(s, r.shape_n)
                    e = _span_find(shapes, s, r.shape_n, h)
                    if e.value == NULL:
                        got = shape_of(PyBytes_FromStringAndSize(<const char*>s, r.shape_n))
                        if got is None:
                            return None
                        _span_put(shapes, e, s, r.shape_n, h, got)
                        e = _span_find(shapes, s, r.shape_n, h)
                    shape = <object>e.value
                    last_shape = s
                    last_shape_n = r.shape_n
                s = self.p + r.opcode_at
                h = _span_hash(s, r.opcode_n)
                e = _span_find(opcodes, s, r.opcode_n, h)
                if e.value == NULL:
                    got = _ascii_or_utf8(s, r.opcode_n, 0)
                    if got is None:
                        return None
                    _span_put(opcodes, e, s, r.opcode_n, h, got)
                    e = _span_find(opcodes, s, r.opcode_n, h)
                opcode = <object>e.value
                if r.opcode_n == 9 and memcmp(s, b"parameter", 9) == 0:
                    operands_text = str(r.parameter_number)
                else:
                    # the operand ids, given one by one or packed
                    count = 0
                    i = r.start
                    while i < r.end:
                        # (the scan has walked these bytes: they are well-formed)
                        i = read_varint(self.p, i, r.end, &tag)
                        j = skip_field(self.p, i, r.end, tag & 7, &at) if i >= 0 else -1
                        if j < 0:
                            return None
                        if tag >> 3 == INS_OPERAND_IDS and (tag & 7 == WIRE_VARINT
                                                            or tag & 7 == WIRE_LEN):
                            while at < j:
                                at = read_varint(self.p, at, j, &v)
                                if at < 0:
                                    return None
                                m = _id_lookup(self.ids, self.ids_mask, self.ins, <int64_t>v)
                                if m < 0:
                                    return None     # "no instruction with id ..."
                                if count == operands_capacity[0]:
                                    grown = <Py_ssize_t*>PyMem_Realloc(
                                        operands[0], (2 * count + 8) * sizeof(Py_ssize_t))
                                    if grown == NULL:
                                        raise MemoryError()
                                    operands[0] = grown
                                    operands_capacity[0] = 2 * count + 8
                                operands[0][count] = m
                                count += 1
                                if tag & 7 == WIRE_VARINT:
                                    break
                        i = j
                    total = 0
                    ascii = True
                    for m in range(count):
                        at = operands[0][m]
                        if percent[at] == NULL:
                            pct = "%" + <object>PyList_GET_ITEM(names, at)
                            Py_INCREF(pct)
                            percent[at] = <PyObject*>pct
                        total += PyUnicode_GET_LENGTH(<object>percent[at])
                        ascii = ascii and PyUnicode_IS_ASCII(<object>percent[at])
                    if count == 0:
                        operands_text = empty
                    elif count == 1:
                        operands_text = <object>percent[operands[0][0]]
                    elif ascii:
                        operands_text = PyUnicode_New(total + 2 * (count - 1), 127)
                        d = <char*>PyUnicode_DATA(operands_text)
                        for m in range(count):
                            if m:
                                d[0] = 44       # ,
                                d[1] = 32       # (space)
                                d += 2
                            at = PyUnicode_GET_LENGTH(<object>percent[operands[0][m]])
                            memcpy(d, PyUnicode_DATA(<object>percent[operands[0][m]]), at)
                            d += at
                    else:
                        operands_text = ", ".join([<object>percent[operands[0][m]]
                                                   for m in range(count)])
                ins = <ProtoInstructionBase>xs_new_object(cls, no_calls)
                ins.computation = cname
                ins.name = <object>PyList_GET_ITEM(names, k)
                ins.shape = shape
                ins.opcode = opcode
                ins.is_root = r.id == root
                ins.line = zero
                ins.operands_text = operands_text
                ins._comp = comp
                ins._ip = message
                ins._index = k - first
                ins._called = no_calls
                out.append(ins)
                if r.calls:
                    calls.append((ins, self._called_ids(r)))
        return calls

    cdef tuple _called_ids(self, Ins* r):
        cdef Py_ssize_t i = r.start, j, at = 0
        cdef uint64_t tag = 0, v = 0
        out = []
        while i < r.end:
            i = read_varint(self.p, i, r.end, &tag)
            j = skip_field(self.p, i, r.end, tag & 7, &at) if i >= 0 else -1
            if j < 0:
                return None
            if tag >> 3 == INS_CALLED_COMPUTATION_IDS and (tag & 7 == WIRE_VARINT
                                                           or tag & 7 == WIRE_LEN):
                while at < j:
                    at = read_varint(self.p, at, j, &v)
                    if at < 0:
                        return None
                    out.append(<int64_t>v)
                    if tag & 7 == WIRE_VARINT:
                        break
            i = j
        return tuple(out)
