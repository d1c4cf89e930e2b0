# cython: language_level=3
"""The HLO reader's fast lane, compiled.

:class:`xlashape.hlo_reader.HloReader` is a state machine fed one line at a
time. Most lines of a dump are complete one-line instructions as XLA prints
them (``  %name = f32[8,128]{1,0:T(8,128)} add(%a, %b), metadata={...}``),
computation headers, ``}`` or blank lines: :func:`feed_simple_lines` takes
those, in C, and stops at the first line that is anything else (a section,
a comment, an instruction over several lines, a shape not parsed yet,
non-ASCII text, ...), which the reader's Python code then reads. Both work on
the same state (the reader's ``_current``, ``_ready``, ``lines_read``), and
this module decides exactly as the Python code would for every line it takes
(``tests/test_hloscan.py`` compares the two on every test module and on
mutated lines).

A consumer that needs less than an Instruction object per line (``xlashape
hlo --json`` writes a row from a few spans of the line) passes an
:class:`InstructionSink`: each instruction the scan completes is offered to
it first, as spans of its line, and becomes an object only if the sink
declines it. This module knows nothing of what a sink makes of them.

:class:`InstructionBase` holds an instruction's fields in C, so the scanner
fills them without Python attribute lookups; ``hlo_model.Instruction``
subclasses it with the properties.
"""

import gc

from .errors import ShapeIndexError, ShapeTypeError

from cpython.object cimport PyObject
from cpython.list cimport PyList_GET_ITEM, PyList_GET_SIZE
from cpython.dict cimport PyDict_GetItem
from libc.string cimport memchr, memcpy

from xlashape._ascii cimport (
    PyUnicode_DATA, PyUnicode_FromStringAndSize, PyUnicode_GET_LENGTH, PyUnicode_IS_ASCII,
    PyUnicode_Substring, memmem, ascii_chars, is_digit, is_lower, is_name_char, is_space,
    is_word, is_word_start, same_bytes,
    BACKSLASH, COLON, COMMA, CR, DASH, DOT, EQUALS, LBRACE, LBRACKET, LESS, LF, LOWER_A,
    LOWER_B, LOWER_O, LOWER_T, LPAREN, PERCENT, QUESTION, QUOTE, RBRACE, RBRACKET, RPAREN,
    SLASH, SPACE, STAR, UNDERSCORE, UPPER_O, UPPER_R, UPPER_T)

# -- strings and brackets, as hlo_syntax decides them ----------------------------------

cdef Py_ssize_t _skip_string(const char* s, Py_ssize_t i, Py_ssize_t n) nogil:
    """At a quote: the index just past the string "(?:[^"\\\\]|\\\\.)*", or -1
    if it does not close (as Python's regex would fail to match there)."""
    cdef Py_ssize_t j = i + 1
    while j < n:
        if s[j] == BACKSLASH:        # it and the next character
            if j + 1 >= n:
                return -1
            j += 2
            continue
        if s[j] == QUOTE:
            return j + 1
        j += 1
    return -1


cdef bint _quote_left(const char* s, Py_ssize_t a, Py_ssize_t b) nogil:
    """True if a quote is left once every string "..." is removed (Python's
    _STRING.sub: a quote that starts no complete string stays)."""
    cdef Py_ssize_t i = a, j
    while i < b:
        if s[i] == QUOTE:
            j = _skip_string(s, i, b)
            if j < 0:
                return True
            i = j
            continue
        i += 1
    return False


cdef bint _open_string(const char* s, Py_ssize_t n) nogil:
    """hlo_syntax._open_string(text[:n])."""
    cdef Py_ssize_t i, quotes = 0
    cdef bint backslash = False
    for i in range(n):
        if s[i] == QUOTE:
            quotes += 1
        elif s[i] == BACKSLASH:
            backslash = True
    if quotes == 0:
        return False
    if not backslash:
        return quotes % 2 == 1
    return _quote_left(s, 0, n)


cdef bint _balanced(const char* s, Py_ssize_t a, Py_ssize_t b) nogil:
    """hlo_syntax._balanced(text[a:b]), decided the same way."""
    cdef Py_ssize_t i, j
    cdef Py_ssize_t o1 = 0, c1 = 0, o2 = 0, c2 = 0, o3 = 0, c3 = 0
    cdef Py_ssize_t quotes = 0
    cdef bint backslash = False
    cdef char c
    for i in range(a, b):
        c = s[i]
        if c < LBRACKET:
            if c == LPAREN:
                o2 += 1
            elif c == RPAREN:
                c2 += 1
            elif c == QUOTE:
                quotes += 1
        elif c == LBRACKET:
            o3 += 1
        elif c == RBRACKET:
            c3 += 1
        elif c == LBRACE:
            o1 += 1
        elif c == RBRACE:
            c1 += 1
        elif c == BACKSLASH:
            backslash = True
    if o1 == c1 and o2 == c2 and o3 == c3:
        # balanced unless a string is left open
        if quotes == 0:
            return True
        if not backslash:
            return quotes % 2 == 0
        return not _quote_left(s, a, b)
    if quotes == 0:
        return False
    # counts outside the strings; a quote that opens no string: unbalanced
    o1 = c1 = o2 = c2 = o3 = c3 = 0
    i = a
    while i < b:
        c = s[i]
        if c == QUOTE:
            j = _skip_string(s, i, b)
            if j < 0:
                return False
            i = j
            continue
        if c == LBRACE:
            o1 += 1
        elif c == RBRACE:
            c1 += 1
        elif c == LPAREN:
            o2 += 1
        elif c == RPAREN:
            c2 += 1
        elif c == LBRACKET:
            o3 += 1
        elif c == RBRACKET:
            c3 += 1
        i += 1
    return o1 == c1 and o2 == c2 and o3 == c3


cdef bint _needs_python(const char* s, Py_ssize_t n) nogil:
    """A // or a /* comment other than /*index=N*/ anywhere: the Python code
    strips comments first."""
    cdef Py_ssize_t i = 0, j
    cdef const char* hit
    while True:
        hit = <const char*>memchr(s + i, SLASH, n - i)
        if hit == NULL:
            return False
        i = hit - s
        if i + 1 >= n:
            return False
        if s[i + 1] == SLASH:
            return True
        if s[i + 1] == STAR:
            # /*index=N*/ is all that may appear
            j = i + 2
            if j + 6 > n or not same_bytes(s + j, b"index=", 6):
                return True
            j += 6
            if j >= n or not is_digit(s[j]):
                return True
            while j < n and is_digit(s[j]):
                j += 1
            if j + 1 >= n or s[j] != STAR or s[j + 1] != SLASH:
                return True
        i += 1


# -- the instruction object ---------------------------------------------------------------

cdef class InstructionBase:
    """The fields of an HLO instruction (see ``hlo_model.Instruction``;
    declared in ``_hloscan.pxd``)."""


cdef class InstructionSink:
    """Where :func:`feed_simple_lines` offers each instruction it completes
    before it makes an object of it (a base that takes nothing; subclass it
    in Cython, ``cimport xlashape._hloscan``).

    ``take_span`` gets the instruction as spans of its line (ASCII, not
    stripped: the name, the opcode, the text between the operand
    parentheses, the attributes after them), its Shape (the reader's cached
    object), its computation (the reader's ``Computation``, or None outside
    one), its line number and whether it is the ROOT. It returns 1 if it
    took the instruction (no object is made; the instruction is not
    appended to ``out``), 0 if not (the instruction goes to ``out``, and the
    scan stops after this line, so the consumer sees taken and declined
    instructions in the order of the text). ``take_instruction`` is the
    same for an Instruction the reader's Python code made. ``flush`` is
    called at the end of each :func:`feed_simple_lines` call that took
    anything, before the caller sees ``out``."""

    cdef int take_span(self, object shape, object comp, const char* name, Py_ssize_t name_n,
                       const char* opcode, Py_ssize_t opcode_n, const char* operands,
                       Py_ssize_t operands_n, const char* attributes, Py_ssize_t attributes_n,
                       long long line, bint is_root) except -1:
        return 0

    cdef int take_instruction(self, InstructionBase ins) except -1:
        cdef Py_ssize_t nn = 0, on = 0, otn = 0, atn = 0
        cdef const char* nm = ascii_chars(ins.name, &nn)
        cdef const char* op = ascii_chars(ins.opcode, &on)
        cdef const char* ot = ascii_chars(ins.operands_text, &otn)
        cdef const char* at = ascii_chars(ins.attributes_text, &atn)
        if nm == NULL or op == NULL or ot == NULL or at == NULL or type(ins.line) is not int:
            return 0
        if ins.computation is not None and ins._comp is None:
            return 0
        try:
            line = <long long>ins.line
        except OverflowError:
            return 0
        return self.take_span(ins.shape, ins._comp, nm, nn, op, on, ot, otn, at, atn, line,
                              ins.is_root is True)

    cdef int flush(self) except -1:
        return 0


cdef object _INSTRUCTION = None      # hlo_model.Instruction
cdef object _CALLERS = None          # opcodes whose attributes may name computations
cdef object _EMPTY = ""
cdef tuple _NO_ARGS = ()


def configure(instruction_class, caller_opcodes):
    """Called once by hlo_reader: the Instruction class to create and the
    opcodes whose calls the reader records."""
    global _INSTRUCTION, _CALLERS
    # the scanner writes InstructionBase's C fields of what it creates
    if not (isinstance(instruction_class, type) and issubclass(instruction_class, InstructionBase)):
        raise ShapeTypeError("configure() needs a subclass of InstructionBase, not "
                             f"{instruction_class!r}")
    _INSTRUCTION = instruction_class
    _CALLERS = frozenset(caller_opcodes)


# -- one line ----------------------------------------------------------------------------

cdef struct Tok:
    Py_ssize_t L                     # the line without its \r\n
    Py_ssize_t name_a, name_b, shape_a, shape_b, op_a, op_b, open_, close, at_a, at_b
    bint is_root


cdef int _tokenize(const char* s, Py_ssize_t p, Py_ssize_t L, Tok* t) nogil:
    """A complete one-line instruction as the Python reader reads it without
    help (hlo_reader._FAST_INSTR for an array result, the general form for a
    tuple; operands and attributes complete): 1 and its parts in t, else 0."""
    cdef Py_ssize_t q = p, k, depth, r_a, r_b
    cdef char c
    t.L = L
    t.is_root = False
    if L - q > 4 and s[q] == UPPER_R and s[q + 1] == UPPER_O and s[q + 2] == UPPER_O \
            and s[q + 3] == UPPER_T and is_space(s[q + 4]):
        k = q + 4
        while k < L and is_space(s[k]):
            k += 1
        if k < L and (s[k] == PERCENT or is_word_start(s[k])):
            t.is_root = True
            q = k
    if q < L and s[q] == PERCENT:
        q += 1
    if q >= L or not is_word_start(s[q]):
        return 0
    t.name_a = q
    while q < L and is_name_char(s[q]):
        q += 1
    t.name_b = q
    while q < L and is_space(s[q]):
        q += 1
    if q >= L or s[q] != EQUALS:
        return 0
    q += 1
    while q < L and is_space(s[q]):
        q += 1
    if q >= L:
        return 0
    t.shape_a = q
    if s[q] == LPAREN:
        # a tuple: to the matching parenthesis, no quote inside
        depth = 0
        while q < L:
            c = s[q]
            if c == LPAREN:
                depth += 1
            elif c == RPAREN:
                depth -= 1
                if depth == 0:
                    break
            elif c == QUOTE:
                return 0
            q += 1
        if q >= L:
            return 0
        q += 1
        t.shape_b = q
        while q < L and is_space(s[q]):
            q += 1
        if q >= L or not is_lower(s[q]):
            return 0
        t.op_a = q
        while q < L and (is_lower(s[q]) or is_digit(s[q]) or s[q] == UNDERSCORE or s[q] == DASH):
            q += 1
        t.op_b = q
        while q < L and is_space(s[q]):
            q += 1
        if q >= L or s[q] != LPAREN:
            return 0
    else:
        # an array: type[dims] and a layout without nested braces
        if not is_lower(s[q]):
            return 0
        while q < L and (is_lower(s[q]) or is_digit(s[q])):
            q += 1
        if q >= L or s[q] != LBRACKET:
            return 0
        q += 1
        while q < L and (is_digit(s[q]) or s[q] == COMMA or s[q] == LESS or s[q] == EQUALS
                         or s[q] == QUESTION or s[q] == SPACE):
            q += 1
        if q >= L or s[q] != RBRACKET:
            return 0
        q += 1
        if q < L and s[q] == LBRACE:
            if q + 1 >= L or not (is_space(s[q + 1]) or is_digit(s[q + 1]) or s[q + 1] == COLON):
                return 0
            k = q + 1
            while k < L and s[k] != RBRACE and s[k] != LBRACE and s[k] != QUOTE and s[k] != SLASH:
                k += 1
            if k >= L or s[k] != RBRACE:
                return 0
            q = k + 1
        t.shape_b = q
        if q >= L or not is_space(s[q]):
            return 0
        while q < L and is_space(s[q]):
            q += 1
        if q >= L or not is_lower(s[q]):
            return 0
        t.op_a = q
        while q < L and (is_lower(s[q]) or is_digit(s[q]) or s[q] == UNDERSCORE or s[q] == DASH):
            q += 1
        t.op_b = q
        if q >= L or s[q] != LPAREN:
            return 0
    # the operands: to the matching parenthesis, no quote inside
    t.open_ = q
    depth = 0
    while q < L:
        c = s[q]
        if c == LPAREN:
            depth += 1
        elif c == RPAREN:
            depth -= 1
            if depth == 0:
                break
        elif c == QUOTE:
            return 0
        q += 1
    if q >= L:
        return 0
    t.close = q + 1
    # the attributes: ", a=1, b={...}" complete, or nothing
    r_a = t.close
    r_b = L
    while r_a < r_b and is_space(s[r_a]):
        r_a += 1
    while r_b > r_a and is_space(s[r_b - 1]):
        r_b -= 1
    t.at_a = t.at_b = 0
    if r_a < r_b:
        if s[r_a] != COMMA:
            return 0                 # not ", attr...": Python warns
        t.at_a = r_a + 1
        t.at_b = r_b
        while t.at_a < t.at_b and is_space(s[t.at_a]):
            t.at_a += 1
        if t.at_a >= t.at_b or s[t.at_b - 1] == COMMA:
            return 0                 # continued on the next line
        if not _balanced(s, t.at_a, t.at_b):
            return 0
    return 1


cdef int _header(reader, str line, Py_ssize_t base, const char* s, Py_ssize_t p,
                 Py_ssize_t L, Py_ssize_t lineno) except -2:
    """A computation header as the Python reader reads it: 1 (read: the
    reader's current computation is the new one), 0 (not a header: go on
    with the instruction form), -1 (Python must decide)."""
    cdef Py_ssize_t e = L, q, k, name_a, name_b, sig_a, sig_b
    cdef bint is_entry = False
    while e > p and is_space(s[e - 1]):
        e -= 1
    if e <= p or s[e - 1] != LBRACE:
        return 0
    # "=" before the first "(": an instruction, not a header
    for q in range(p, e):
        if s[q] == LPAREN:
            break
        if s[q] == EQUALS:
            return 0
    q = p
    if e - q > 5 and same_bytes(s + q, b"ENTRY", 5) and is_space(s[q + 5]):
        k = q + 5
        while k < e and is_space(s[k]):
            k += 1
        if k < e and (s[k] == PERCENT or is_word_start(s[k])):
            is_entry = True
            q = k
    if q < e and s[q] == PERCENT:
        q += 1
    if q >= e or not is_word_start(s[q]):
        return -1
    name_a = q
    while q < e and is_name_char(s[q]):
        q += 1
    name_b = q
    while q < e and is_space(s[q]):
        q += 1
    sig_a = q
    sig_b = e - 1                    # the final "{"
    while sig_b > sig_a and is_space(s[sig_b - 1]):
        sig_b -= 1
    for k in range(sig_a, sig_b):
        if s[k] == LBRACE or s[k] == RBRACE:
            return -1
    if L - p >= 9 and same_bytes(s + p, b"HloModule", 9):
        return -1
    if not (is_entry or sig_a == sig_b or s[sig_a] == LPAREN):
        return -1
    reader._current = reader._new_computation(
        PyUnicode_Substring(line, base + name_a, base + name_b), is_entry,
        PyUnicode_Substring(line, base + sig_a, base + sig_b), lineno)
    return 1


cdef object _make_instruction(object line, Py_ssize_t base, Tok* t, object shape, object comp,
                              object comp_name, Py_ssize_t lineno, object reader):
    cdef InstructionBase ins = <InstructionBase>_INSTRUCTION.__new__(_INSTRUCTION)
    ins.computation = comp_name
    ins.name = PyUnicode_Substring(line, base + t.name_a, base + t.name_b)
    ins.shape = shape
    ins.opcode = PyUnicode_Substring(line, base + t.op_a, base + t.op_b)
    ins.is_root = bool(t.is_root)
    ins.line = lineno
    ins.operands_text = PyUnicode_Substring(line, base + t.open_ + 1, base + t.close - 1)
    ins.attributes_text = (PyUnicode_Substring(line, base + t.at_a, base + t.at_b)
                           if t.at_b > t.at_a else _EMPTY)
    ins._operands = None
    ins._attributes = None
    ins._reader = reader
    ins._comp = comp
    return ins


cdef object _stmt(object line, Py_ssize_t base, Py_ssize_t L):
    if base == 0 and L == PyUnicode_GET_LENGTH(line):
        return line
    return PyUnicode_Substring(line, base, base + L)


# -- recording calls ------------------------------------------------------------------------

cdef Py_ssize_t _call_matches(const char* s, Py_ssize_t a, Py_ssize_t b, const char* key,
                              Py_ssize_t kn, Py_ssize_t* starts, Py_ssize_t* vals,
                              Py_ssize_t cap) nogil:
    """hlo_model._calls_in for one key: every ``(?:^|,)\\s*KEY\\s*=\\s*`` in
    s[a:b] whose value matches ``\\{[^{}=]*\\}|%?[\\w.\\-]+``: the match start in
    starts, the value's bounds in vals (pairs); the count (-1: more than cap)."""
    cdef Py_ssize_t pos = a, j, e, k, count = 0
    cdef Py_ssize_t stop_from = -1, stop_at = -1
    cdef const char* hit
    while pos + kn <= b:
        hit = <const char*>memmem(s + pos, b - pos, key, kn)
        if hit == NULL:
            break
        pos = hit - s
        j = pos
        while j > a and is_space(s[j - 1]):
            j -= 1
        if not (j == a or s[j - 1] == COMMA):
            pos += 1
            continue
        e = pos + kn
        while e < b and is_space(s[e]):
            e += 1
        if e >= b or s[e] != EQUALS:
            pos += 1
            continue
        e += 1
        while e < b and is_space(s[e]):
            e += 1
        pos = e                       # as Python: the next match after the "="
        if e < b and s[e] == LBRACE:
            # the first "}" ("{" or "=" first: not a list of names) from
            # e + 1, remembered: many "{" that do not close are scanned once
            k = e + 1
            if stop_from <= k <= stop_at:
                k = stop_at
            else:
                stop_from = k
                while k < b and s[k] != RBRACE and s[k] != LBRACE and s[k] != EQUALS:
                    k += 1
                stop_at = k
            if k >= b or s[k] != RBRACE:
                continue
            k += 1
        else:
            k = e
            if k < b and s[k] == PERCENT:
                k += 1
            while k < b and is_name_char(s[k]):
                k += 1
            if k == e or (k == e + 1 and s[e] == PERCENT):
                continue
        if count >= cap:
            return -1
        starts[count] = j - 1 if j > a else a
        vals[2 * count] = e
        vals[2 * count + 1] = k
        count += 1
    return count


cdef int _record_calls(reader, const char* s, Py_ssize_t op_a, Py_ssize_t op_b,
                       Py_ssize_t a, Py_ssize_t b) except -1:
    """reader._record_calls(opcode, attrs) for the opcodes whose calls are one
    or two known attributes (fusion, reduce & co., call, while): 1 if done
    here, 0 if the Python code must do it."""
    cdef Py_ssize_t on = op_b - op_a
    cdef const char* op = s + op_a
    cdef const char* k1 = NULL
    cdef const char* k2 = NULL
    cdef Py_ssize_t n1 = 0, n2 = 0
    cdef object kind1 = None, kind2 = None
    cdef bint fusion = False
    if on == 6 and same_bytes(op, b"fusion", 6):
        k1, n1, kind1, fusion = b"calls", 5, "fusion", True
    elif on == 5 and same_bytes(op, b"while", 5):
        k1, n1, kind1 = b"condition", 9, "while_condition"
        k2, n2, kind2 = b"body", 4, "while_body"
    elif on == 4 and same_bytes(op, b"call", 4):
        k1, n1, kind1 = b"to_apply", 8, "call"
    elif ((on == 6 and same_bytes(op, b"reduce", 6)) or (on == 13 and same_bytes(op, b"reduce-window", 13))
          or (on == 3 and same_bytes(op, b"map", 3)) or (on == 4 and same_bytes(op, b"sort", 4))
          or (on == 7 and same_bytes(op, b"scatter", 7)) or (on == 10 and same_bytes(op, b"all-reduce", 10))
          or (on == 16 and same_bytes(op, b"all-reduce-start", 16))
          or (on == 14 and same_bytes(op, b"reduce-scatter", 14)) or (on == 4 and same_bytes(op, b"topk", 4))):
        k1, n1, kind1 = b"to_apply", 8, "to_apply"
    else:
        return 0
    cdef Py_ssize_t starts1[16]
    cdef Py_ssize_t vals1[32]
    cdef Py_ssize_t starts2[16]
    cdef Py_ssize_t vals2[32]
    cdef Py_ssize_t c1 = _call_matches(s, a, b, k1, n1, starts1, vals1, 16)
    cdef Py_ssize_t c2 = 0
    if k2 != NULL:
        c2 = _call_matches(s, a, b, k2, n2, starts2, vals2, 16)
    if c1 < 0 or c2 < 0:
        return 0
    # in the order of the text, as Python sorts them
    cdef Py_ssize_t i1 = 0, i2 = 0
    while i1 < c1 or i2 < c2:
        if i2 >= c2 or (i1 < c1 and starts1[i1] < starts2[i2]):
            _record_value(reader, s, vals1[2 * i1], vals1[2 * i1 + 1], kind1, fusion, k1)
            i1 += 1
        else:
            _record_value(reader, s, vals2[2 * i2], vals2[2 * i2 + 1], kind2, False, k2)
            i2 += 1
    return 1


cdef inline int _add_kind(object kinds, object kind, object callee) except -1:
    """kinds.add(kind) for the set of a computation's call kinds (a value of
    a call_kinds dict, which the caller may have filled)."""
    if type(kinds) is not set:
        raise ShapeTypeError(f"call_kinds[{callee!r}] must be a set of call kinds, not "
                             f"{type(kinds).__name__}")
    (<set>kinds).add(kind)
    return 0


cdef bint next_callee(const char* s, Py_ssize_t* pos, Py_ssize_t end, Py_ssize_t* start,
                      Py_ssize_t* stop) noexcept nogil:
    """The next computation name (%?[A-Za-z_][\\w.\\-]*, without its %) in
    s[pos[0]:end], a call attribute's value: [start, stop), pos[0] moved
    past it; False when none is left. The value's outer braces are skipped
    as any other character that starts no name."""
    cdef Py_ssize_t i = pos[0], k
    while i < end:
        if s[i] == PERCENT and i + 1 < end and is_word_start(s[i + 1]):
            i += 1
        if is_word_start(s[i]):
            k = i
            while k < end and is_name_char(s[k]):
                k += 1
            start[0] = i
            stop[0] = k
            pos[0] = k
            return True
        i += 1
    pos[0] = end
    return False


cdef int _record_value(reader, const char* s, Py_ssize_t v_a, Py_ssize_t v_b, object kind,
                       bint fusion, const char* key) except -1:
    """The callees in one value: value.strip("{}"), then every name
    (next_callee)."""
    cdef Py_ssize_t pos, a, b
    cdef object callee
    cdef PyObject* got
    cdef bint to_apply = key[0] == LOWER_T and key[1] == LOWER_O      # "to_apply"
    while v_a < v_b and (s[v_a] == LBRACE or s[v_a] == RBRACE):
        v_a += 1
    while v_b > v_a and (s[v_b - 1] == LBRACE or s[v_b - 1] == RBRACE):
        v_b -= 1
    pos = v_a
    while next_callee(s, &pos, v_b, &a, &b):
        callee = PyUnicode_FromStringAndSize(s + a, b - a)
        if fusion:
            reader.fused_computations.add(callee)
        elif to_apply:
            reader.applied_computations.add(callee)
        got = PyDict_GetItem(reader.call_kinds, callee)
        if got is NULL:
            reader.call_kinds[callee] = {kind}
        else:
            _add_kind(<object>got, kind, callee)
        comp = reader.computations.get(callee)
        if comp is not None:
            comp.kinds.add(kind)
    return 0


# -- one attribute of an instruction -------------------------------------------------

cdef Py_ssize_t attribute_span(const char* s, Py_ssize_t n, const char* key, Py_ssize_t kn,
                               Py_ssize_t* vstart) noexcept nogil:
    """Instruction.attribute(key) on attribute text s[:n]: the end of the
    value (its start in vstart, both before stripping), -1 when there is no
    such attribute and -2 when the Python code must decide (it would fall
    back to parsing every attribute)."""
    cdef Py_ssize_t pos = 0, j, e, start, depth, k
    cdef char opener, closer, c
    cdef const char* hit
    cdef char keq[64]
    if kn + 1 > 64:
        return -2
    memcpy(keq, key, kn)
    keq[kn] = EQUALS
    if n < kn + 1 or memmem(s, n, keq, kn + 1) == NULL:
        return -1                    # key + "=" does not occur at all
    while pos + kn <= n:
        hit = <const char*>memmem(s + pos, n - pos, key, kn)
        if hit == NULL:
            break
        pos = hit - s
        j = pos
        while j > 0 and is_space(s[j - 1]):
            j -= 1
        if not (j == 0 or s[j - 1] == COMMA):
            pos += 1
            continue
        e = pos + kn
        while e < n and is_space(s[e]):
            e += 1
        if e >= n or s[e] != EQUALS:
            pos += 1
            continue
        e += 1
        while e < n and is_space(s[e]):
            e += 1
        start = j - 1 if j > 0 else 0
        if _open_string(s, start) or not _balanced(s, 0, start):
            pos = e
            continue
        vstart[0] = e
        if e < n and (s[e] == LBRACE or s[e] == LPAREN):
            opener = s[e]
            closer = RBRACE if opener == LBRACE else RPAREN
            depth = 0
            k = e
            while k < n:
                c = s[k]
                if c == QUOTE:
                    return -2            # a quote: Python's string-aware scan
                if c == opener:
                    depth += 1
                elif c == closer:
                    depth -= 1
                    if depth == 0:
                        return k + 1
                k += 1
            return -2
        if e < n and s[e] == QUOTE:
            k = _skip_string(s, e, n)
            return n if k < 0 else k
        k = e
        while k < n and s[k] != COMMA:
            k += 1
        return k
    return -2



# -- the scan ---------------------------------------------------------------------------------

def feed_simple_lines(reader, chunk, Py_ssize_t i, out, sink=None):
    """Read lines from ``chunk`` while they are complete one-line
    instructions, computation headers, ``}`` or blank lines, with the reader
    in its plain state; append the instructions completed to ``out``; return
    where the first line not read starts (the reader's Python code reads it).

    ``chunk`` is a list of lines (``i``: an index into it) or a block of text
    (a str of whole lines separated by "\\n", the last without one; ``i``:
    the offset of a line start, and ``len(chunk) + 1`` once all are read).

    With a ``sink`` (an :class:`InstructionSink`), each completed
    instruction is offered to it first; one it declines is appended to
    ``out`` and the scan stops after the line being read, so what the sink
    took and what is in ``out`` stay in the order of the text."""
    cdef Py_ssize_t n
    cdef bint block = type(chunk) is str
    # the scan reads the chunk's memory directly: only an exact str or a list,
    # and no offset before its start
    if not block and not isinstance(chunk, list):
        raise ShapeTypeError("feed_simple_lines() reads a list of lines or a str, not "
                             f"{type(chunk).__name__}")
    if not isinstance(out, list):
        raise ShapeTypeError("feed_simple_lines() needs a list to append instructions to, "
                             f"not {type(out).__name__}")
    if sink is not None and not isinstance(sink, InstructionSink):
        raise ShapeTypeError("the sink of feed_simple_lines() (HloReader.instruction_sink) "
                             f"must be an _hloscan.InstructionSink, not {type(sink).__name__}")
    if i < 0:
        raise ShapeIndexError(f"feed_simple_lines() start {i} is negative")
    if block:
        n = PyUnicode_GET_LENGTH(chunk)
        if i > n or not PyUnicode_IS_ASCII(chunk):
            return i
    else:
        n = PyList_GET_SIZE(<list>chunk)
        if i >= n:
            return i
    if reader._pending is not None or reader._skipping or reader._in_comment:
        return i
    # the scan makes no reference cycles; collecting in the middle of it
    # (every few hundred objects) costs more than the scan itself
    cdef bint gc_was = gc.isenabled()
    if gc_was:
        gc.disable()
    try:
        i = _scan(reader, chunk, block, i, n, <list>out, <InstructionSink>sink)
        if sink is not None:
            # before the instructions in out: what the sink took comes first
            (<InstructionSink>sink).flush()
        return i
    finally:
        if gc_was:
            gc.enable()


cdef Py_ssize_t _scan(reader, object chunk, bint block, Py_ssize_t i, Py_ssize_t n, list out,
                      InstructionSink sink) except -1:
    cdef object current = reader._current
    cdef object comp_name = None if current is None else current.name
    cdef object ready = reader._ready          # [Instruction, line, text] from Python
    cdef dict cache = reader._cache
    cdef Py_ssize_t lineno = reader.lines_read
    cdef object line, key, shape, opcode
    cdef const char* s
    cdef const char* data = NULL
    cdef const char* nl
    cdef Py_ssize_t L, p, k, base, nxt
    cdef PyObject* hit = NULL
    cdef Tok t, ht                             # this line, and the one held
    cdef object h_line = None, h_shape = None, h_comp = None, h_comp_name = None
    cdef Py_ssize_t h_lineno = 0, h_base = 0
    cdef bint held = False                     # ht is the instruction held
    cdef bint stop = False
    cdef const char* hs
    cdef char c
    cdef bint record = reader._record
    if block:
        data = <const char*>PyUnicode_DATA(chunk)
        line = chunk
    while (i <= n) if block else (i < n):
        if block:
            base = i
            s = data + i
            nl = <const char*>memchr(s, LF, n - i)
            L = (n - i) if nl == NULL else (nl - s)
            nxt = i + L + 1
        else:
            line = <object>PyList_GET_ITEM(<list>chunk, i)
            if type(line) is not str or not PyUnicode_IS_ASCII(line):
                break
            base = 0
            s = <const char*>PyUnicode_DATA(line)
            L = PyUnicode_GET_LENGTH(line)
            nxt = i + 1
        while L > 0 and (s[L - 1] == LF or s[L - 1] == CR):
            L -= 1
        p = 0
        while p < L and is_space(s[p]):
            p += 1
        k = 0
        if p < L:
            c = s[p]
            if c == COMMA:             # ", attr=...": the held one continues: Python
                break
            if _needs_python(s, L):
                break
            if c != RBRACE:
                k = _header(reader, line, base, s, p, L, lineno + 1)
                if k < 0:
                    break
                if k == 0:
                    if not _tokenize(s, p, L, &t):
                        break
                    key = PyUnicode_Substring(line, base + t.shape_a, base + t.shape_b)
                    hit = PyDict_GetItem(cache, key)
                    if hit is NULL:
                        break          # a shape the Python code parses first
        # -- the line is read here: first the instruction held is complete ----------
        if ready is not None:
            if sink is None or not sink.take_instruction(<InstructionBase>ready[0]):
                out.append(ready[0])
                stop = sink is not None
            ready = None
        elif held:
            hs = <const char*>PyUnicode_DATA(h_line) + h_base
            if sink is None or not sink.take_span(h_shape, h_comp, hs + ht.name_a,
                                                  ht.name_b - ht.name_a, hs + ht.op_a,
                                                  ht.op_b - ht.op_a, hs + ht.open_ + 1,
                                                  ht.close - ht.open_ - 2, hs + ht.at_a,
                                                  ht.at_b - ht.at_a, h_lineno, ht.is_root):
                out.append(_make_instruction(h_line, h_base, &ht, h_shape, h_comp, h_comp_name,
                                             h_lineno, reader))
                stop = sink is not None
            held = False
        lineno += 1
        i = nxt
        if p == L:
            pass                       # a blank line
        elif s[p] == RBRACE:           # "}": the computation ends
            current = None
            comp_name = None
        elif k == 1:                   # a header: the new computation
            current = reader._current
            comp_name = current.name
        else:
            # an instruction: held until the next line shows it is complete
            shape = <object>hit
            if sink is None:
                ins = _make_instruction(line, base, &t, shape, current, comp_name, lineno, reader)
                ready = [ins, lineno, _stmt(line, base, L)]
            else:
                ht = t
                h_line = line
                h_base = base
                h_shape = shape
                h_comp = current
                h_comp_name = comp_name
                h_lineno = lineno
                held = True
            if t.at_b > t.at_a and record:
                if not _record_calls(reader, s, t.op_a, t.op_b, t.at_a, t.at_b):
                    opcode = PyUnicode_Substring(line, base + t.op_a, base + t.op_b)
                    if (opcode in _CALLERS or opcode.endswith("-start")
                            or opcode.endswith("-done")):
                        reader._record_calls(opcode, PyUnicode_Substring(
                            line, base + t.at_a, base + t.at_b))
        if stop:
            break
    if held:
        ready = [_make_instruction(h_line, h_base, &ht, h_shape, h_comp, h_comp_name, h_lineno,
                                   reader),
                 h_lineno, _stmt(h_line, h_base, ht.L)]
    reader._ready = ready
    reader._current = current
    reader.lines_read = lineno
    return i


# -- the call-graph pass (hlo_calls.scan_calls) ---------------------------------------------

cdef extern from "string.h" nogil:
    void* memrchr(const void* s, int c, size_t n)

cdef Py_ssize_t _key_at(const char* s, Py_ssize_t i, Py_ssize_t n) nogil:
    """After ", " at i: the length of a call attribute's key followed by "=",
    else 0."""
    cdef const char* k
    cdef Py_ssize_t kn
    cdef int j
    cdef const char* keys[10]
    keys[0] = b"calls="; keys[1] = b"to_apply="; keys[2] = b"body="; keys[3] = b"condition="
    keys[4] = b"branch_computations="; keys[5] = b"true_computation="
    keys[6] = b"false_computation="; keys[7] = b"called_computations="; keys[8] = b"select="
    keys[9] = b"scatter="
    cdef Py_ssize_t lens[10]
    lens[0] = 6; lens[1] = 9; lens[2] = 5; lens[3] = 10; lens[4] = 20; lens[5] = 17
    lens[6] = 18; lens[7] = 20; lens[8] = 7; lens[9] = 8
    for j in range(10):
        kn = lens[j]
        if i + kn <= n and same_bytes(s + i, keys[j], kn):
            return kn
    return 0


def scan_calls_chunk(bytes chunk, dict kinds, call_kind):
    """hlo_calls._scan_chunk in C: every ", key=value" naming computations
    (key: calls, to_apply, body, condition, branch_computations,
    true/false_computation, called_computations, select, scatter), with the
    opcode of its line; kinds[name] gets call_kind(opcode, key)."""
    cdef const char* s = <const char*>chunk
    cdef Py_ssize_t n = len(chunk)
    cdef Py_ssize_t i = 0, kn, v_a, v_b, k, start, last_line = -1, eq, q, op_a = 0, op_b = 0
    cdef Py_ssize_t line_start = 0, seen = 0, stop_from = -1, stop_at = -1, pos
    cdef const char* hit
    cdef dict kind_cache = {}
    cdef object opcode = "", key, kind, name
    cdef set got
    cdef PyObject* found
    while True:
        hit = <const char*>memchr(s + i, COMMA, n - i)
        if hit == NULL:
            break
        i = hit - s + 1
        if i >= n or s[i] != SPACE:
            continue
        kn = _key_at(s, i + 1, n)
        if kn == 0:
            continue
        pos = i - 1                             # the comma: where the match starts
        # the value: \{[^{}=\n]*\} or %?[\w.\-]+
        v_a = i + 1 + kn
        if v_a < n and s[v_a] == LBRACE:
            # \{[^{}=\n]*\}: the first "}", "{", "=" or "\n" from v_a + 1,
            # remembered, so that many "{" values that do not close on one
            # long line are scanned once
            k = v_a + 1
            if stop_from <= k <= stop_at:
                k = stop_at
            else:
                stop_from = k
                while k < n and s[k] != RBRACE and s[k] != LF and s[k] != LBRACE and s[k] != EQUALS:
                    k += 1
                stop_at = k
            if k >= n or s[k] != RBRACE:
                continue
            v_b = k + 1
        else:
            k = v_a
            if k < n and s[k] == PERCENT:
                k += 1
            q = k
            while k < n and (is_word(s[k]) or s[k] == DOT or s[k] == DASH):
                k += 1
            if k == q:
                continue
            v_b = k
        # the opcode of this line: after its "=", the first [a-z][a-z0-9_-]*( that
        # follows whitespace, ")", "]" or "}" (not "b(", a buffer shape)
        # the start of this line: matches come in order, so only the text
        # since the last match is searched (once per byte, however long the line)
        hit = <const char*>memrchr(s + seen, LF, pos - seen)
        if hit != NULL:
            line_start = hit - s + 1
        seen = pos
        start = line_start
        if start != last_line:
            last_line = start
            hit = <const char*>memchr(s + start, EQUALS, pos - start)
            eq = start if hit == NULL else hit - s
            opcode = ""
            q = eq
            while q + 1 < pos:
                if (is_space(s[q]) or s[q] == RPAREN or s[q] == RBRACKET or s[q] == RBRACE) \
                        and is_lower(s[q + 1]):
                    k = q + 1
                    while k < pos and (is_lower(s[k]) or is_digit(s[k]) or s[k] == UNDERSCORE
                                       or s[k] == DASH):
                        k += 1
                    if k < pos and s[k] == LPAREN and not (k == q + 2 and s[q + 1] == LOWER_B):
                        opcode = PyUnicode_FromStringAndSize(s + q + 1, k - q - 1)
                        break
                q += 1
        key = PyUnicode_FromStringAndSize(s + i + 1, kn - 1)
        found = PyDict_GetItem(kind_cache, (opcode, key))
        if found is NULL:
            kind = call_kind(opcode, key)
            kind_cache[(opcode, key)] = kind
        else:
            kind = <object>found
        # names: value.strip(b"{}"), then every %?([A-Za-z_][\w.\-]*)
        while v_a < v_b and (s[v_a] == LBRACE or s[v_a] == RBRACE):
            v_a += 1
        while v_b > v_a and (s[v_b - 1] == LBRACE or s[v_b - 1] == RBRACE):
            v_b -= 1
        k = v_a
        while k < v_b:
            if s[k] == PERCENT and k + 1 < v_b and is_word_start(s[k + 1]):
                k += 1
            if is_word_start(s[k]):
                q = k
                while q < v_b and (is_word(s[q]) or s[q] == DOT or s[q] == DASH):
                    q += 1
                name = chunk[k:q].decode("utf-8", "replace")
                found = PyDict_GetItem(kinds, name)
                if found is NULL:
                    kinds[name] = {kind}
                else:
                    _add_kind(<object>found, kind, name)
                k = q
                continue
            k += 1
        i = v_b
