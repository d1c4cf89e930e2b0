# cython: language_level=3
"""What other compiled modules may use of the HLO line scanner: the
instruction's C fields, the sink the scan offers instructions to, and the
lookup of one attribute in an instruction's attribute text."""


cdef class InstructionBase:
    cdef public object computation
    cdef public object name
    cdef public object shape
    cdef public object opcode
    cdef public object is_root
    cdef public object line
    cdef public object operands_text
    cdef public object attributes_text
    cdef public object _operands
    cdef public object _attributes
    cdef public object _reader
    cdef public object _comp


cdef class InstructionSink:
    cdef int take_span(self, object shape, object comp, const char* name, Py_ssize_t name_n,
                       const char* opcode, Py_ssize_t opcode_n, const char* operands,
                       Py_ssize_t operands_n, const char* attributes, Py_ssize_t attributes_n,
                       long long line, bint is_root) except -1
    cdef int take_instruction(self, InstructionBase ins) except -1
    cdef int flush(self) except -1


# Instruction.attribute(key) on attribute text s[:n]: the end of the value
# (its start in vstart, neither stripped), -1 when there is no such
# attribute, -2 when the Python code must decide.
cdef Py_ssize_t attribute_span(const char* s, Py_ssize_t n, const char* key, Py_ssize_t kn,
                               Py_ssize_t* vstart) noexcept nogil


# The next computation name in a call attribute's value s[pos[0]:end]:
# [start, stop), pos[0] moved past it; False when none is left.
cdef bint next_callee(const char* s, Py_ssize_t* pos, Py_ssize_t end, Py_ssize_t* start,
                      Py_ssize_t* stop) noexcept nogil
