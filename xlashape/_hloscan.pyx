# cython: language_level=3
"""The HLO reader's fast lane, compiled.

:class:`xlashape.hlo_module.HloReader` is a state machine fed one line at a
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

For ``xlashape hlo --json`` a :class:`JsonSink` goes further: the rows of
the lines taken here are written here, from fragments the command keeps per
shape and per computation, without an Instruction object per line.

:class:`InstructionBase` holds an instruction's fields in C, so the scanner
fills them without Python attribute lookups; ``hlo_module.Instruction``
subclasses it with the properties.
"""

import gc

from .errors import ShapeIndexError, ShapeTypeError

from cpython.object cimport PyObject
from cpython.list cimport PyList_GET_ITEM, PyList_GET_SIZE
from cpython.dict cimport PyDict_GetItem
from libc.string cimport memcpy, memchr
from libc.stdlib cimport realloc, free

cdef extern from "Python.h":
    bint PyUnicode_IS_ASCII(object o)
    void* PyUnicode_DATA(object o)
    Py_ssize_t PyUnicode_GET_LENGTH(object o)
    object PyUnicode_Substring(object s, Py_ssize_t start, Py_ssize_t end)
    object PyUnicode_New(Py_ssize_t size, Py_UCS4 maxchar)
    object PyUnicode_FromStringAndSize(const char* s, Py_ssize_t n)

cdef extern from "string.h" nogil:
    void* memmem(const void* haystack, size_t hn, const void* needle, size_t nn)


# -- the bytes the scanner looks for, by name -----------------------------------------

cdef enum:
    TAB = 9             # \t; TAB..CR: the C0 whitespace \t \n \v \f \r
    LF = 10             # \n
    CR = 13             # \r
    FS = 28             # FS..US: the four separators Python's str.isspace() also counts
    US = 31
    SPACE = 32          # below it: control characters
    QUOTE = 34          # "
    PERCENT = 37        # %
    LPAREN = 40         # (
    RPAREN = 41         # )
    STAR = 42           # *
    COMMA = 44          # ,
    DASH = 45           # -
    DOT = 46            # .
    SLASH = 47          # /
    DIGIT_0 = 48        # 0
    DIGIT_9 = 57        # 9
    COLON = 58          # :
    LESS = 60           # <
    EQUALS = 61         # =
    QUESTION = 63       # ?
    UPPER_A = 65        # A
    UPPER_O = 79        # O
    UPPER_R = 82        # R
    UPPER_T = 84        # T
    UPPER_Z = 90        # Z
    LBRACKET = 91       # [
    BACKSLASH = 92      # \
    RBRACKET = 93       # ]
    UNDERSCORE = 95     # _
    LOWER_A = 97        # a
    LOWER_B = 98        # b
    LOWER_O = 111       # o
    LOWER_T = 116       # t
    LOWER_Z = 122       # z
    LBRACE = 123        # {
    RBRACE = 125        # }
    DEL = 127           # the last ASCII code


# -- character classes (ASCII; Python's \s, \w for ASCII text) -------------------------

cdef inline bint _ws(char c) nogil:
    return c == SPACE or (TAB <= c <= CR) or (FS <= c <= US)


cdef inline bint _alpha_(char c) nogil:
    return (UPPER_A <= c <= UPPER_Z) or (LOWER_A <= c <= LOWER_Z) or c == UNDERSCORE


cdef inline bint _name_char(char c) nogil:
    return (UPPER_A <= c <= UPPER_Z) or (LOWER_A <= c <= LOWER_Z) or c == UNDERSCORE \
        or (DIGIT_0 <= c <= DIGIT_9) or c == DOT or c == DASH


cdef inline bint _lower(char c) nogil:
    return LOWER_A <= c <= LOWER_Z


cdef inline bint _digit(char c) nogil:
    return DIGIT_0 <= c <= DIGIT_9


cdef inline bint _same(const char* a, const char* b, Py_ssize_t n) nogil:
    cdef Py_ssize_t i
    for i in range(n):
        if a[i] != b[i]:
            return False
    return True


# -- strings and brackets, as hlo_module decides them ----------------------------------

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
    """hlo_module._open_string(text[:n])."""
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
    """hlo_module._balanced(text[a:b]), decided the same way."""
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
            if j + 6 > n or not _same(s + j, b"index=", 6):
                return True
            j += 6
            if j >= n or not _digit(s[j]):
                return True
            while j < n and _digit(s[j]):
                j += 1
            if j + 1 >= n or s[j] != STAR or s[j + 1] != SLASH:
                return True
        i += 1


# -- the instruction object ---------------------------------------------------------------

cdef class InstructionBase:
    """The fields of an HLO instruction (see ``hlo_module.Instruction``)."""

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


cdef object _INSTRUCTION = None      # hlo_module.Instruction
cdef object _CALLERS = None          # opcodes whose attributes may name computations
cdef object _EMPTY = ""
cdef tuple _NO_ARGS = ()


def configure(instruction_class, caller_opcodes):
    """Called once by hlo_module: the Instruction class to create and the
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
    help (hlo_module._FAST_INSTR for an array result, the general form for a
    tuple; operands and attributes complete): 1 and its parts in t, else 0."""
    cdef Py_ssize_t q = p, k, depth, r_a, r_b
    cdef char c
    t.L = L
    t.is_root = False
    if L - q > 4 and s[q] == UPPER_R and s[q + 1] == UPPER_O and s[q + 2] == UPPER_O \
            and s[q + 3] == UPPER_T and _ws(s[q + 4]):
        k = q + 4
        while k < L and _ws(s[k]):
            k += 1
        if k < L and (s[k] == PERCENT or _alpha_(s[k])):
            t.is_root = True
            q = k
    if q < L and s[q] == PERCENT:
        q += 1
    if q >= L or not _alpha_(s[q]):
        return 0
    t.name_a = q
    while q < L and _name_char(s[q]):
        q += 1
    t.name_b = q
    while q < L and _ws(s[q]):
        q += 1
    if q >= L or s[q] != EQUALS:
        return 0
    q += 1
    while q < L and _ws(s[q]):
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
        while q < L and _ws(s[q]):
            q += 1
        if q >= L or not _lower(s[q]):
            return 0
        t.op_a = q
        while q < L and (_lower(s[q]) or _digit(s[q]) or s[q] == UNDERSCORE or s[q] == DASH):
            q += 1
        t.op_b = q
        while q < L and _ws(s[q]):
            q += 1
        if q >= L or s[q] != LPAREN:
            return 0
    else:
        # an array: type[dims] and a layout without nested braces
        if not _lower(s[q]):
            return 0
        while q < L and (_lower(s[q]) or _digit(s[q])):
            q += 1
        if q >= L or s[q] != LBRACKET:
            return 0
        q += 1
        while q < L and (_digit(s[q]) or s[q] == COMMA or s[q] == LESS or s[q] == EQUALS
                         or s[q] == QUESTION or s[q] == SPACE):
            q += 1
        if q >= L or s[q] != RBRACKET:
            return 0
        q += 1
        if q < L and s[q] == LBRACE:
            if q + 1 >= L or not (_ws(s[q + 1]) or _digit(s[q + 1]) or s[q + 1] == COLON):
                return 0
            k = q + 1
            while k < L and s[k] != RBRACE and s[k] != LBRACE and s[k] != QUOTE and s[k] != SLASH:
                k += 1
            if k >= L or s[k] != RBRACE:
                return 0
            q = k + 1
        t.shape_b = q
        if q >= L or not _ws(s[q]):
            return 0
        while q < L and _ws(s[q]):
            q += 1
        if q >= L or not _lower(s[q]):
            return 0
        t.op_a = q
        while q < L and (_lower(s[q]) or _digit(s[q]) or s[q] == UNDERSCORE or s[q] == DASH):
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
    while r_a < r_b and _ws(s[r_a]):
        r_a += 1
    while r_b > r_a and _ws(s[r_b - 1]):
        r_b -= 1
    t.at_a = t.at_b = 0
    if r_a < r_b:
        if s[r_a] != COMMA:
            return 0                 # not ", attr...": Python warns
        t.at_a = r_a + 1
        t.at_b = r_b
        while t.at_a < t.at_b and _ws(s[t.at_a]):
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
    while e > p and _ws(s[e - 1]):
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
    if e - q > 5 and _same(s + q, b"ENTRY", 5) and _ws(s[q + 5]):
        k = q + 5
        while k < e and _ws(s[k]):
            k += 1
        if k < e and (s[k] == PERCENT or _alpha_(s[k])):
            is_entry = True
            q = k
    if q < e and s[q] == PERCENT:
        q += 1
    if q >= e or not _alpha_(s[q]):
        return -1
    name_a = q
    while q < e and _name_char(s[q]):
        q += 1
    name_b = q
    while q < e and _ws(s[q]):
        q += 1
    sig_a = q
    sig_b = e - 1                    # the final "{"
    while sig_b > sig_a and _ws(s[sig_b - 1]):
        sig_b -= 1
    for k in range(sig_a, sig_b):
        if s[k] == LBRACE or s[k] == RBRACE:
            return -1
    if L - p >= 9 and _same(s + p, b"HloModule", 9):
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
    """hlo_module._calls_in for one key: every ``(?:^|,)\\s*KEY\\s*=\\s*`` in
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
        while j > a and _ws(s[j - 1]):
            j -= 1
        if not (j == a or s[j - 1] == COMMA):
            pos += 1
            continue
        e = pos + kn
        while e < b and _ws(s[e]):
            e += 1
        if e >= b or s[e] != EQUALS:
            pos += 1
            continue
        e += 1
        while e < b and _ws(s[e]):
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
            while k < b and _name_char(s[k]):
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
    if on == 6 and _same(op, b"fusion", 6):
        k1, n1, kind1, fusion = b"calls", 5, "fusion", True
    elif on == 5 and _same(op, b"while", 5):
        k1, n1, kind1 = b"condition", 9, "while_condition"
        k2, n2, kind2 = b"body", 4, "while_body"
    elif on == 4 and _same(op, b"call", 4):
        k1, n1, kind1 = b"to_apply", 8, "call"
    elif ((on == 6 and _same(op, b"reduce", 6)) or (on == 13 and _same(op, b"reduce-window", 13))
          or (on == 3 and _same(op, b"map", 3)) or (on == 4 and _same(op, b"sort", 4))
          or (on == 7 and _same(op, b"scatter", 7)) or (on == 10 and _same(op, b"all-reduce", 10))
          or (on == 16 and _same(op, b"all-reduce-start", 16))
          or (on == 14 and _same(op, b"reduce-scatter", 14)) or (on == 4 and _same(op, b"topk", 4))):
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


cdef int _record_value(reader, const char* s, Py_ssize_t v_a, Py_ssize_t v_b, object kind,
                       bint fusion, const char* key) except -1:
    """The callees in one value: value.strip("{}"), then every %?[A-Za-z_][\\w.\\-]*."""
    cdef Py_ssize_t i, k
    cdef object callee
    cdef PyObject* got
    cdef bint to_apply = key[0] == LOWER_T and key[1] == LOWER_O      # "to_apply"
    while v_a < v_b and (s[v_a] == LBRACE or s[v_a] == RBRACE):
        v_a += 1
    while v_b > v_a and (s[v_b - 1] == LBRACE or s[v_b - 1] == RBRACE):
        v_b -= 1
    i = v_a
    while i < v_b:
        if s[i] == PERCENT and i + 1 < v_b and _alpha_(s[i + 1]):
            i += 1
        if _alpha_(s[i]):
            k = i
            while k < v_b and _name_char(s[k]):
                k += 1
            callee = PyUnicode_FromStringAndSize(s + i, k - i)
            if fusion:
                reader.fused_computations.add(callee)
            elif to_apply:
                reader.applied_computations.add(callee)
            got = PyDict_GetItem(reader.call_kinds, callee)
            if got is NULL:
                reader.call_kinds[callee] = {kind}
            else:
                (<set>got).add(kind)
            comp = reader.computations.get(callee)
            if comp is not None:
                comp.kinds.add(kind)
            i = k
            continue
        i += 1
    return 0


# -- `xlashape hlo --json` rows -------------------------------------------------------------

cdef inline bint _json_plain(const char* s, Py_ssize_t n) nogil:
    """True if the ASCII text needs no JSON escape."""
    cdef Py_ssize_t i
    for i in range(n):
        if s[i] < SPACE or s[i] == QUOTE or s[i] == BACKSLASH or s[i] == DEL:
            return False
    return True


cdef inline char* _put(char* w, const char* s, Py_ssize_t n) nogil:
    memcpy(w, s, n)
    return w + n


cdef Py_ssize_t _itoa(long long v, char* buf) nogil:
    cdef char tmp[24]
    cdef Py_ssize_t n = 0, k
    if v == 0:
        buf[0] = DIGIT_0
        return 1
    while v > 0:
        tmp[n] = DIGIT_0 + v % 10
        v //= 10
        n += 1
    for k in range(n):
        buf[k] = tmp[n - 1 - k]
    return n


cdef inline const char* _ascii(object text, Py_ssize_t* n):
    """The characters of an ASCII str (NULL if it is not one)."""
    if type(text) is not str or not PyUnicode_IS_ASCII(text):
        return NULL
    n[0] = PyUnicode_GET_LENGTH(text)
    return <const char*>PyUnicode_DATA(text)


cdef object _row(const char* nm, Py_ssize_t nn, const char* op, Py_ssize_t on,
                 const char* ot, Py_ssize_t otn, long long line, bint root,
                 str head, str shape_part, str kind_part, str result, str spaces_part,
                 str extra, JsonSink dest=None):
    """The row, as cli/hlo.py's _json_row writes it, or None when the Python
    writer must do it (escapes, operands with inline shapes). With ``dest``,
    ",\\n" and the row are appended to its buffer instead (True)."""
    cdef Py_ssize_t hn = 0, spn = 0, kpn = 0, rsn = 0, ssn = 0, exn = 0
    cdef const char* hd = _ascii(head, &hn)
    cdef const char* sp = _ascii(shape_part, &spn)
    cdef const char* kp = _ascii(kind_part, &kpn)
    cdef const char* rs = _ascii(result, &rsn)
    cdef const char* ss = _ascii(spaces_part, &ssn)
    cdef const char* ex = _ascii(extra, &exn)
    if hd == NULL or sp == NULL or kp == NULL or rs == NULL or ss == NULL or ex == NULL:
        return None
    if not _json_plain(nm, nn) or not _json_plain(op, on) or line < 0:
        return None
    cdef bint no_operands = (on == 9 and _same(op, b"parameter", 9)) or \
        (on == 8 and _same(op, b"constant", 8))
    cdef Py_ssize_t i, a, b, count = 0, names_len = 0
    # the operand names: split at commas, strip, drop a leading %
    if not no_operands:
        for i in range(otn):
            if ot[i] == LBRACKET or ot[i] == LPAREN or ot[i] == SLASH or ot[i] == QUOTE \
                    or ot[i] == BACKSLASH or ot[i] == DEL or (ot[i] < SPACE and not _ws(ot[i])):
                return None
        a = 0
        while a <= otn:
            b = a
            while b < otn and ot[b] != COMMA:
                b += 1
            i = a
            while i < b and _ws(ot[i]):
                i += 1
            while b > i and _ws(ot[b - 1]):
                b -= 1
            if b > i:
                while i < b and ot[i] == PERCENT:
                    i += 1
                names_len += (b - i) + 2 + (2 if count else 0)
                count += 1
            while b < otn and ot[b] != COMMA:
                b += 1
            a = b + 1
    cdef char buf[32]
    cdef Py_ssize_t line_n = _itoa(line, buf)
    cdef Py_ssize_t total = (hn + 11 + nn + 14 + on + 1 + spn + 10 + line_n + 13
                             + (4 if root else 5) + kpn + 13 + rsn + 1 + ssn
                             + 20 + names_len + 1 + exn + 1)
    cdef object out = None
    cdef char* w0
    cdef char* w
    if dest is None:
        out = PyUnicode_New(total, DEL)   # ASCII: code points up to 127
        w0 = <char*>PyUnicode_DATA(out)
    else:
        dest._reserve(total + 2)
        w0 = dest.buf + dest.blen
        w0[0] = COMMA
        w0[1] = LF
        w0 += 2
    w = w0
    w = _put(w, hd, hn)
    w = _put(w, b', "name": "', 11)
    w = _put(w, nm, nn)
    w = _put(w, b'", "opcode": "', 14)
    w = _put(w, op, on)
    w = _put(w, b'"', 1)
    w = _put(w, sp, spn)
    w = _put(w, b', "line": ', 10)
    w = _put(w, buf, line_n)
    w = _put(w, b', "is_root": ', 13)
    if root:
        w = _put(w, b"true", 4)
    else:
        w = _put(w, b"false", 5)
    w = _put(w, kp, kpn)
    w = _put(w, b', "result": "', 13)
    w = _put(w, rs, rsn)
    w = _put(w, b'"', 1)
    w = _put(w, ss, ssn)
    w = _put(w, b', "operand_names": [', 20)
    if not no_operands:
        count = 0
        a = 0
        while a <= otn:
            b = a
            while b < otn and ot[b] != COMMA:
                b += 1
            i = a
            while i < b and _ws(ot[i]):
                i += 1
            while b > i and _ws(ot[b - 1]):
                b -= 1
            if b > i:
                while i < b and ot[i] == PERCENT:
                    i += 1
                if count:
                    w = _put(w, b", ", 2)
                w = _put(w, b'"', 1)
                w = _put(w, ot + i, b - i)
                w = _put(w, b'"', 1)
                count += 1
            while b < otn and ot[b] != COMMA:
                b += 1
            a = b + 1
    w = _put(w, b"]", 1)
    w = _put(w, ex, exn)
    w = _put(w, b"}", 1)
    if w - w0 != total:
        # the length is computed above exactly; anything else is a bug here
        raise AssertionError(f"json_row wrote {w - w0} of {total} characters")
    if dest is not None:
        dest.blen += total + 2
        return True
    return out


def json_row(InstructionBase ins, str head, str shape_part, str kind_part, str result,
             str spaces_part, str extra):
    """The JSON object of one ``hlo --json`` row, or None when a name, an
    opcode or the operand list needs the Python writer (escapes, operands
    with inline shapes). ``head`` is ``{"computation": ...``; the parts are
    already JSON (ASCII)."""
    cdef Py_ssize_t nn = 0, on = 0, otn = 0
    cdef const char* nm = _ascii(ins.name, &nn)
    cdef const char* op = _ascii(ins.opcode, &on)
    cdef const char* ot = _ascii(ins.operands_text, &otn)
    if nm == NULL or op == NULL or ot == NULL or type(ins.line) is not int:
        return None
    try:
        line = <long long>ins.line
    except OverflowError:
        return None
    return _row(nm, nn, op, on, ot, otn, line, ins.is_root is True, head, shape_part,
                kind_part, result, spaces_part, extra)


cdef Py_ssize_t _attribute(const char* s, Py_ssize_t n, const char* key, Py_ssize_t kn,
                           Py_ssize_t* vstart) nogil:
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
        while j > 0 and _ws(s[j - 1]):
            j -= 1
        if not (j == 0 or s[j - 1] == COMMA):
            pos += 1
            continue
        e = pos + kn
        while e < n and _ws(s[e]):
            e += 1
        if e >= n or s[e] != EQUALS:
            pos += 1
            continue
        e += 1
        while e < n and _ws(s[e]):
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


cdef inline bint _has(const char* s, Py_ssize_t n, const char* w, Py_ssize_t wn) nogil:
    return n >= wn and memmem(s, n, w, wn) != NULL


cdef object _extra(const char* s, Py_ssize_t n):
    """The ', "kind": ..., "called_computations": [...]' part of an hlo --json
    row for attribute text s[:n] (as cli/hlo.py writes it), or None when
    Python must decide."""
    cdef Py_ssize_t a, b, end, i, k
    cdef list parts = []
    cdef list names
    cdef int ki
    cdef const char* keys[5]
    cdef Py_ssize_t lens[5]
    if n == 0:
        return _EMPTY
    keys[0] = b"calls"; lens[0] = 5
    keys[1] = b"to_apply"; lens[1] = 8
    keys[2] = b"condition"; lens[2] = 9
    keys[3] = b"body"; lens[3] = 4
    keys[4] = b"branch_computations"; lens[4] = 19
    if _has(s, n, b"kind=", 5):
        end = _attribute(s, n, b"kind", 4, &a)
        if end == -2:
            return None
        if end == -1:
            parts.append(', "kind": null')
        else:
            b = end
            while a < b and _ws(s[a]):
                a += 1
            while b > a and _ws(s[b - 1]):
                b -= 1
            if not _json_plain(s + a, b - a):
                return None
            parts.append(', "kind": "' + PyUnicode_FromStringAndSize(s + a, b - a) + '"')
    if (_has(s, n, b"calls=", 6) or _has(s, n, b"to_apply=", 9) or _has(s, n, b"body=", 5)
            or _has(s, n, b"condition=", 10) or _has(s, n, b"branch_computations=", 20)):
        names = []
        for ki in range(5):
            end = _attribute(s, n, keys[ki], lens[ki], &a)
            if end == -2:
                return None
            if end == -1:
                continue
            b = end
            while a < b and _ws(s[a]):
                a += 1
            while b > a and _ws(s[b - 1]):
                b -= 1
            # v.strip("{}"), then every %?[A-Za-z_][\w.\-]*
            while a < b and (s[a] == LBRACE or s[a] == RBRACE):
                a += 1
            while b > a and (s[b - 1] == LBRACE or s[b - 1] == RBRACE):
                b -= 1
            i = a
            while i < b:
                if s[i] == PERCENT and i + 1 < b and _alpha_(s[i + 1]):
                    i += 1
                if _alpha_(s[i]):
                    k = i
                    while k < b and _name_char(s[k]):
                        k += 1
                    names.append('"' + PyUnicode_FromStringAndSize(s + i, k - i) + '"')
                    i = k
                    continue
                i += 1
        parts.append(', "called_computations": [' + ", ".join(names) + "]")
    if not parts:
        return _EMPTY
    return "".join(parts)


cdef class JsonSink:
    """What ``hlo --json`` needs to write rows in C: the fragments per shape
    (``shapes``: id -> (shape, footprint, fragment, spaces fragment, has
    data, waste)) and of the current computation (``describe(computation)``
    gives them), the rows written (``drain()``) and the summary's counts
    (``per_shape`` shared with the Python summary; the counters below). An
    instruction the sink cannot take (a new shape, padding large enough for
    the top list, escapes, ...) goes to the Python code, which keeps these
    up to date (``threshold``: the smallest padding the top list would take)."""

    cdef public dict shapes
    cdef public dict per_shape
    cdef public object comp
    cdef public Py_ssize_t nkinds
    cdef public str head
    cdef public str kind_part
    cdef public bint embedded
    cdef public tuple views
    cdef public tuple aliased
    cdef public long long threshold
    cdef public Py_ssize_t top
    cdef public Py_ssize_t count, n_views, n_embedded, n_tokens
    cdef public list embedded_state
    cdef public object describe
    cdef public object write
    cdef char* buf
    cdef Py_ssize_t blen, bcap

    def __cinit__(self, *args, **kwargs):
        self.buf = NULL
        self.blen = self.bcap = 0

    def __dealloc__(self):
        if self.buf != NULL:
            free(self.buf)
            self.buf = NULL

    cdef int _reserve(self, Py_ssize_t n) except -1:
        cdef Py_ssize_t cap
        cdef char* nb
        if self.blen + n <= self.bcap:
            return 0
        cap = max(self.bcap * 2, self.blen + n, 1 << 16)
        nb = <char*>realloc(self.buf, cap)
        if nb == NULL:
            raise MemoryError("no memory for the rows of hlo --json")
        self.buf = nb
        self.bcap = cap
        return 0

    def drain(self):
        """The rows written since the last drain, each preceded by ",\\n"
        (a str), and the buffer emptied; "" when there are none."""
        if self.blen == 0:
            return ""
        out = PyUnicode_FromStringAndSize(self.buf, self.blen)
        self.blen = 0
        if self.bcap > 1 << 22:          # do not keep a big buffer around
            free(self.buf)
            self.buf = NULL
            self.bcap = 0
        return out

    def __init__(self, dict shapes, dict per_shape, views, aliased, Py_ssize_t top,
                 describe=None):
        self.shapes = shapes
        self.per_shape = per_shape
        self.comp = None
        self.nkinds = -1
        self.head = ""
        self.kind_part = ""
        self.embedded = False
        self.views = tuple(v.encode() for v in views)
        self.aliased = tuple(v.encode() for v in aliased)
        self.threshold = 1
        self.top = top
        self.count = self.n_views = self.n_embedded = self.n_tokens = 0
        # [last computation counted, count] of computations with embedded values
        self.embedded_state = [None, 0]
        self.describe = describe
        # write(text): where drained rows go at the end of each scan, so
        # memory stays flat however long the scan runs without an instruction
        # for the Python code
        self.write = None


cdef inline bint _one_of(const char* op, Py_ssize_t on, tuple names):
    cdef bytes b
    for b in names:
        if len(b) == on and _same(op, <const char*>b, on):
            return True
    return False


cdef bint _take(JsonSink sink, object shape, object comp, const char* nm, Py_ssize_t nn,
                const char* op, Py_ssize_t on, const char* ot, Py_ssize_t otn,
                const char* at, Py_ssize_t atn, long long line, bint root) except -1:
    """Write the row of one instruction and count it, if the sink can; else
    False (and nothing is changed)."""
    cdef PyObject* hit = PyDict_GetItem(sink.shapes, id(shape))
    if hit is NULL:
        return False
    cdef tuple si = <tuple>hit
    if si[0] is not shape:
        return False
    if comp is None:
        return False
    if comp is not sink.comp or len(comp.kinds) != sink.nkinds:
        if sink.describe is None:
            return False
        sink.head, sink.kind_part, sink.embedded = sink.describe(comp)
        sink.comp = comp
        sink.nkinds = len(comp.kinds)
    cdef str result
    if sink.embedded:
        result = "embedded"
    elif not si[4]:
        result = "none"
    elif on == 9 and _same(op, b"parameter", 9):
        result = "buffer" if comp.is_entry else "view"
    elif _one_of(op, on, sink.views):
        result = "view"
    else:
        result = "buffer"
    cdef object waste = si[5]
    if result == "buffer":
        if waste is None:
            return False
        if _one_of(op, on, sink.aliased) and shape.is_tuple:
            return False
        if waste > 0 and sink.top > 0 and waste >= sink.threshold:
            return False
    cdef object extra = _extra(at, atn)
    if extra is None:
        return False
    if _row(nm, nn, op, on, ot, otn, line, root, sink.head, si[2], sink.kind_part, result,
            si[3], extra, sink) is None:
        return False
    sink.count += 1
    cdef list rec
    if result == "buffer":
        hit = PyDict_GetItem(sink.per_shape, id(shape))
        if hit is not NULL and (<list>hit)[0] is shape:
            rec = <list>hit
            rec[2] += 1
        else:
            sink.per_shape[id(shape)] = [shape, si[1], 1]
    elif result == "view":
        sink.n_views += 1
    elif result == "embedded":
        sink.n_embedded += 1
        st = sink.embedded_state
        if st[0] is not comp:
            st[0] = comp
            st[1] += 1
    else:
        sink.n_tokens += 1
    return True


cdef bint _take_instruction(JsonSink sink, InstructionBase ins) except -1:
    """_take for an Instruction the Python reader made."""
    cdef Py_ssize_t nn = 0, on = 0, otn = 0, atn = 0
    cdef const char* nm = _ascii(ins.name, &nn)
    cdef const char* op = _ascii(ins.opcode, &on)
    cdef const char* ot = _ascii(ins.operands_text, &otn)
    cdef const char* at = _ascii(ins.attributes_text, &atn)
    if nm == NULL or op == NULL or ot == NULL or at == NULL or type(ins.line) is not int:
        return False
    if ins.computation is not None and ins._comp is None:
        return False
    return _take(sink, ins.shape, ins._comp, nm, nn, op, on, ot, otn, at, atn,
                 <long long>ins.line, ins.is_root is True)


# -- the scan ---------------------------------------------------------------------------------

def feed_simple_lines(reader, chunk, Py_ssize_t i, list out, JsonSink sink=None):
    """Read lines from ``chunk`` while they are complete one-line
    instructions, computation headers, ``}`` or blank lines, with the reader
    in its plain state; append the instructions completed to ``out``; return
    where the first line not read starts (the reader's Python code reads it).

    ``chunk`` is a list of lines (``i``: an index into it) or a block of text
    (a str of whole lines separated by "\\n", the last without one; ``i``:
    the offset of a line start, and ``len(chunk) + 1`` once all are read).

    With a ``sink`` (``hlo --json``), a completed instruction the sink can
    take becomes a row in the sink's buffer instead; one it cannot take is
    appended to ``out`` and the scan stops after the line being read, so
    rows and instructions stay in order."""
    cdef Py_ssize_t n
    cdef bint block = type(chunk) is str
    # the scan reads the chunk's memory directly: only an exact str or a list,
    # and no offset before its start
    if not block and not isinstance(chunk, list):
        raise ShapeTypeError("feed_simple_lines() reads a list of lines or a str, not "
                             f"{type(chunk).__name__}")
    if out is None:
        raise ShapeTypeError("feed_simple_lines() needs a list to append instructions to")
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
    if (reader._pending is not None or reader._skipping or reader._in_comment
            or reader._oom is not None or reader.mode != "hlo"):
        return i
    # the scan makes no reference cycles; collecting in the middle of it
    # (every few hundred objects) costs more than the scan itself
    cdef bint gc_was = gc.isenabled()
    if gc_was:
        gc.disable()
    try:
        i = _scan(reader, chunk, block, i, n, out, sink)
        if sink is not None and sink.write is not None and sink.blen > 0:
            # before the instructions in out: the rows come first in the output
            sink.write(sink.drain())
        return i
    finally:
        if gc_was:
            gc.enable()


cdef Py_ssize_t _scan(reader, object chunk, bint block, Py_ssize_t i, Py_ssize_t n, list out,
                      JsonSink sink) except -1:
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
        while p < L and _ws(s[p]):
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
            if sink is None or not _take_instruction(sink, <InstructionBase>ready[0]):
                out.append(ready[0])
                stop = sink is not None
            ready = None
        elif held:
            hs = <const char*>PyUnicode_DATA(h_line) + h_base
            if sink is None or not _take(sink, h_shape, h_comp, hs + ht.name_a,
                                         ht.name_b - ht.name_a, hs + ht.op_a, ht.op_b - ht.op_a,
                                         hs + ht.open_ + 1, ht.close - ht.open_ - 2,
                                         hs + ht.at_a, ht.at_b - ht.at_a, h_lineno,
                                         ht.is_root):
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


# -- the call-graph pass (hlo_module.scan_calls) ---------------------------------------------

cdef extern from "string.h" nogil:
    void* memrchr(const void* s, int c, size_t n)

cdef inline bint _bword(char c) nogil:
    # bytes \w: [A-Za-z0-9_]
    return (UPPER_A <= c <= UPPER_Z) or (LOWER_A <= c <= LOWER_Z) or c == UNDERSCORE \
        or (DIGIT_0 <= c <= DIGIT_9)


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
        if i + kn <= n and _same(s + i, keys[j], kn):
            return kn
    return 0


def scan_calls_chunk(bytes chunk, dict kinds, call_kind):
    """hlo_module._scan_chunk in C: every ", key=value" naming computations
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
            while k < n and (_bword(s[k]) or s[k] == DOT or s[k] == DASH):
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
                if (_ws(s[q]) or s[q] == RPAREN or s[q] == RBRACKET or s[q] == RBRACE) \
                        and _lower(s[q + 1]):
                    k = q + 1
                    while k < pos and (_lower(s[k]) or _digit(s[k]) or s[k] == UNDERSCORE
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
            if s[k] == PERCENT and k + 1 < v_b and _alpha_(s[k + 1]):
                k += 1
            if _alpha_(s[k]):
                q = k
                while q < v_b and (_bword(s[q]) or s[q] == DOT or s[q] == DASH):
                    q += 1
                name = chunk[k:q].decode("utf-8", "replace")
                found = PyDict_GetItem(kinds, name)
                if found is NULL:
                    kinds[name] = {kind}
                else:
                    (<set>found).add(kind)
                k = q
                continue
            k += 1
        i = v_b
