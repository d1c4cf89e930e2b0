# cython: language_level=3
"""The rows of ``xlashape hlo --json`` (without ``--details``: those, and a
report's allocations, go through :func:`json_row` alone): one JSON object per
instruction, written here and nowhere else.

One row, three routes to the same bytes:

- :func:`json_row`, Python, writes any instruction (escapes, operands with
  inline shapes, ``--details``, an out-of-memory report's allocations);
- the C writer ``_row`` writes the common case from fragments kept per shape
  and per computation (:func:`write_rows` keeps them), and declines (None)
  whatever needs the Python writer;
- :class:`JsonRows`, an ``_hloscan.InstructionSink``, hands ``_row`` the
  instructions the compiled scanner reads, as spans of their lines, so that
  those never become Instruction objects; what it declines comes to
  :func:`write_rows` as an Instruction, in the order of the text.

The reader and its scanner know nothing of JSON: they offer instructions to
a sink. ``tests/test_hloscan.py`` compares the output with and without the
compiled routes (``XLASHAPE_PURE_PYTHON=1``) byte for byte.
"""

import json

from cpython.object cimport PyObject
from cpython.dict cimport PyDict_GetItem
from libc.string cimport memcpy
from libc.stdlib cimport realloc, free

from xlashape._ascii cimport (
    PyUnicode_DATA, PyUnicode_FromStringAndSize, PyUnicode_New, ascii_chars, is_space,
    same_bytes, memmem,
    BACKSLASH, COMMA, DEL, DIGIT_0, LBRACE, LBRACKET, LF, LPAREN, PERCENT, QUOTE, RBRACE,
    SLASH, SPACE)
from xlashape._hloscan cimport InstructionBase, InstructionSink, attribute_span, next_callee

from ..errors import HloParseError
from ..hlo_module import VIEW_OPCODES, HloWarning, has_data, memory_footprint, shape_text
from ._output import json_str

__all__ = ["write_rows", "json_row", "operands_or_warn", "operand_names_or_warn", "JsonRows"]


# -- the Python writer ---------------------------------------------------------------------

_JSON_SHAPES = {}
cdef object _EMPTY = ""
_KIND_JSON = {None: "null"}


def _json_int(v):
    return "null" if v is None else str(v)


def _json_shape(shape):
    hit = _JSON_SHAPES.get(id(shape))
    if hit is not None and hit[0] is shape:
        return hit[1]
    text = json_str(shape_text(shape))
    if len(_JSON_SHAPES) > 1 << 16:
        _JSON_SHAPES.clear()
    _JSON_SHAPES[id(shape)] = (shape, text)
    return text


def _json_kind(kind):
    text = _KIND_JSON.get(kind)
    if text is None:
        text = _KIND_JSON[kind] = json_str(kind)
    return text


def operands_or_warn(ins, on_warning):
    """The instruction's operands, or None (with a warning) if an inline
    operand shape does not parse."""
    try:
        return ins.operands
    except HloParseError as e:
        on_warning(HloWarning(ins.line, e.message))
        return None


def operand_names_or_warn(ins, on_warning):
    """The instruction's operand names, or None (with a warning) if an
    inline operand shape does not parse."""
    try:
        return ins.operand_names
    except HloParseError as e:
        on_warning(HloWarning(ins.line, e.message))
        return None


def _kind_and_calls(ins):
    """The ', "kind": ..., "called_computations": [...]' part of a row (each
    only when the attributes name it; "" for neither): what the C writer's
    _extra reads from the attribute text itself."""
    at = ins.attributes_text
    if not at:
        return ""
    out = ""
    if "kind=" in at:
        kind = ins.kind
        out = ', "kind": ' + ("null" if kind is None else json_str(kind))
    if ("calls=" in at or "to_apply=" in at or "body=" in at or "condition=" in at
            or "branch_computations=" in at):
        out += ', "called_computations": ' + json.dumps(list(ins.called_computations))
    return out


def json_row(ins, fp, waste, details, on_warning, report=None):
    """One instruction as a JSON object (``fp``: its memory footprint,
    ``waste``: padded minus unpadded bytes or None); with ``report`` (a
    dict), one allocation of an out-of-memory report, whose ``"report"``
    holds the report's own figures in place of operands. Built by hand: json.dumps
    on a dict per instruction was the slowest step of ``hlo --json`` on big
    dumps. Strings go through json's own (C) string encoder; numbers are
    ints or null."""
    comp = ins.computation
    parts = [
        '{"computation": ', "null" if comp is None else json_str(comp),
        ', "name": ', json_str(ins.name),
        ', "opcode": ', json_str(ins.opcode),
        ', "shape": ', _json_shape(ins.shape),
        ', "bytes": ', _json_int(fp.bytes),
        ', "padded_bytes": ', _json_int(fp.padded_bytes),
        ', "waste": ', _json_int(waste),
        ', "memory_space": ', _json_int(fp.memory_space),
        ', "line": ', str(ins.line),
        ', "is_root": ', "true" if ins.is_root else "false",
        ', "computation_kind": ', _json_kind(ins.computation_kind),
        ', "result": ', '"', ins.result, '"',
    ]
    if len(fp.by_space) > 1:
        parts += [', "memory_spaces": ', json.dumps(
            [{"memory_space": sp_, "bytes": b, "padded_bytes": pb}
             for sp_, b, pb in fp.by_space])]
    if report is not None:
        parts += [', "report": ', json.dumps(report)]
    else:
        names = (ins.operand_names if "[" not in ins.operands_text
                 else operand_names_or_warn(ins, on_warning))
        if names is not None:
            parts += [', "operand_names": ', "[" + ", ".join(map(json_str, names)) + "]"]
        if details:
            ops = operands_or_warn(ins, on_warning)
            if ops is not None:
                parts += [', "operands": ', json.dumps(
                    [{"name": o.name,
                      "shape": None if o.shape is None else shape_text(o.shape)}
                     for o in ops])]
            if ins.opcode in ("parameter", "constant"):
                parts += [', "argument": ', json_str(ins.argument)]
            parts += [', "attributes": ', json.dumps(ins.attributes)]
        parts.append(_kind_and_calls(ins))
    parts.append("}")
    return "".join(parts)


def _describe_computation(comp):
    """The row fragments of a computation: head, kind part, embedded."""
    kind, embedded = comp.usage()
    return ('{"computation": ' + json_str(comp.name),
            ', "computation_kind": ' + _json_kind(kind), embedded)


# -- the rows of a whole module ------------------------------------------------------------

def write_rows(reader, lines, summary, jsonw, on_warning, aliased, bint compiled=True):
    """Read ``lines`` with ``reader`` (an ``HloReader``) and write every
    instruction's row to ``jsonw`` (a ``JsonArrayWriter``), adding each to
    ``summary`` (``cli.hlo.HloSummary``: its per-shape counts, top list and
    counters). ``aliased``: the start opcodes whose tuple holds an operand's
    buffer (the summary counts those in Python). With ``compiled``, the
    compiled scanner's instructions go through :class:`JsonRows` and the
    C writer; without, every row is :func:`json_row`'s."""
    cdef JsonRows sink = None
    if compiled:
        sink = JsonRows({}, summary.per_shape, VIEW_OPCODES, frozenset(aliased), summary.top,
                        _describe_computation)
        sink.embedded_state = summary.embedded_state
        sink.write = jsonw.raw_prefixed
        reader.instruction_sink = sink
    shapes = sink.shapes if sink is not None else {}
    raw = jsonw.raw
    add = summary.add
    views = VIEW_OPCODES
    heap = summary.heap
    top = summary.top
    raw_prefixed = jsonw.raw_prefixed
    try:
        for ins in reader.read(lines):
            if sink is not None:
                written = sink.drain()
                if written:
                    raw_prefixed(written)
            shape = ins.shape
            si = shapes.get(id(shape))
            if si is None or si[0] is not shape:
                fp = memory_footprint(shape)
                waste = None if fp.bytes is None else fp.padded_bytes - fp.bytes
                frag = "".join((', "shape": ', json_str(shape_text(shape)),
                                ', "bytes": ', _json_int(fp.bytes),
                                ', "padded_bytes": ', _json_int(fp.padded_bytes),
                                ', "waste": ', _json_int(waste),
                                ', "memory_space": ', _json_int(fp.memory_space)))
                spaces = ""
                if len(fp.by_space) > 1:
                    spaces = ', "memory_spaces": ' + json.dumps(
                        [{"memory_space": sp_, "bytes": b, "padded_bytes": pb}
                         for sp_, b, pb in fp.by_space])
                if len(shapes) > 1 << 16:
                    shapes.clear()
                si = shapes[id(shape)] = (shape, fp, frag, spaces, has_data(shape), waste)
            comp = ins.computation_object
            if comp is None:
                if not compiled:
                    fp = si[1]
                    add(ins, fp, ins.result)
                    raw(json_row(ins, fp, si[5], False, on_warning))
                    continue
                head, kind_part, embedded = ('{"computation": null', ', "computation_kind": null',
                                             False)
            elif sink is not None and sink.comp is comp and sink.nkinds == len(comp.kinds):
                head, kind_part, embedded = sink.head, sink.kind_part, sink.embedded
            else:
                head, kind_part, embedded = _describe_computation(comp)
                if sink is not None:
                    sink.comp, sink.nkinds = comp, len(comp.kinds)
                    sink.head, sink.kind_part, sink.embedded = head, kind_part, embedded
            opcode = ins.opcode
            if embedded:
                result = "embedded"
            elif not si[4]:
                result = "none"
            elif opcode == "parameter":
                result = "view" if comp is not None and not comp.is_entry else "buffer"
            elif opcode in views:
                result = "view"
            else:
                result = "buffer"
            add(ins, si[1], result)
            if sink is not None and top:
                # equal waste never displaces an earlier entry: only more goes to Python
                sink.threshold = heap[0][0] + 1 if len(heap) >= top else 1
            row = None
            if compiled:
                row = _row_of(ins, head, si[2], kind_part, result, si[3], _kind_and_calls(ins))
            if row is None:
                row = json_row(ins, si[1], si[5], False, on_warning)
            raw(row)
        if sink is not None:
            raw_prefixed(sink.drain())
    finally:
        if sink is not None:
            reader.instruction_sink = None
    if sink is not None:
        summary.count += sink.count
        summary.views += sink.n_views
        summary.embedded += sink.n_embedded
        summary.tokens += sink.n_tokens


# -- the C writer ----------------------------------------------------------------------------

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


cdef inline bint _next_operand(const char* ot, Py_ssize_t otn, Py_ssize_t* pos,
                               Py_ssize_t* start, Py_ssize_t* end) noexcept nogil:
    """The next operand name in ot[:otn] from pos[0] (a comma-separated
    list): [start, end) without the blanks around it and its leading %s,
    pos[0] moved past its comma; False when none is left. Empty items are
    skipped, as Instruction.operand_names skips them."""
    cdef Py_ssize_t a = pos[0], b, i, e
    while a <= otn:
        b = a
        while b < otn and ot[b] != COMMA:
            b += 1
        i = a
        while i < b and is_space(ot[i]):
            i += 1
        e = b
        while e > i and is_space(ot[e - 1]):
            e -= 1
        a = b + 1
        if e > i:
            while i < e and ot[i] == PERCENT:
                i += 1
            pos[0] = a
            start[0] = i
            end[0] = e
            return True
    pos[0] = a
    return False


cdef object _row(const char* nm, Py_ssize_t nn, const char* op, Py_ssize_t on,
                 const char* ot, Py_ssize_t otn, long long line, bint root,
                 str head, str shape_part, str kind_part, str result, str spaces_part,
                 str extra, JsonRows dest=None):
    """The row, as :func:`json_row` writes it, or None when that writer must
    do it (escapes, operands with inline shapes). With ``dest``, ",\\n" and
    the row are appended to its buffer instead (True)."""
    cdef Py_ssize_t hn = 0, spn = 0, kpn = 0, rsn = 0, ssn = 0, exn = 0
    cdef const char* hd = ascii_chars(head, &hn)
    cdef const char* sp = ascii_chars(shape_part, &spn)
    cdef const char* kp = ascii_chars(kind_part, &kpn)
    cdef const char* rs = ascii_chars(result, &rsn)
    cdef const char* ss = ascii_chars(spaces_part, &ssn)
    cdef const char* ex = ascii_chars(extra, &exn)
    if hd == NULL or sp == NULL or kp == NULL or rs == NULL or ss == NULL or ex == NULL:
        return None
    if not _json_plain(nm, nn) or not _json_plain(op, on) or line < 0:
        return None
    cdef bint no_operands = (on == 9 and same_bytes(op, b"parameter", 9)) or \
        (on == 8 and same_bytes(op, b"constant", 8))
    cdef Py_ssize_t i, a, b, count = 0, names_len = 0
    # the operand names: split at commas, strip, drop a leading %
    if not no_operands:
        for i in range(otn):
            if ot[i] == LBRACKET or ot[i] == LPAREN or ot[i] == SLASH or ot[i] == QUOTE \
                    or ot[i] == BACKSLASH or ot[i] == DEL or (ot[i] < SPACE and not is_space(ot[i])):
                return None
        a = 0
        while _next_operand(ot, otn, &a, &i, &b):
            names_len += (b - i) + 2 + (2 if count else 0)
            count += 1
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
        while _next_operand(ot, otn, &a, &i, &b):
            if count:
                w = _put(w, b", ", 2)
            w = _put(w, b'"', 1)
            w = _put(w, ot + i, b - i)
            w = _put(w, b'"', 1)
            count += 1
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


cdef object _row_of(InstructionBase ins, str head, str shape_part, str kind_part, str result,
                    str spaces_part, str extra):
    """_row for an Instruction the reader's Python code made (None: the
    Python writer must write it)."""
    cdef Py_ssize_t nn = 0, on = 0, otn = 0
    cdef const char* nm = ascii_chars(ins.name, &nn)
    cdef const char* op = ascii_chars(ins.opcode, &on)
    cdef const char* ot = ascii_chars(ins.operands_text, &otn)
    cdef long long line
    if nm == NULL or op == NULL or ot == NULL or type(ins.line) is not int:
        return None
    try:
        line = <long long>ins.line
    except OverflowError:
        return None
    return _row(nm, nn, op, on, ot, otn, line, ins.is_root is True, head, shape_part,
                kind_part, result, spaces_part, extra)


cdef inline bint _has(const char* s, Py_ssize_t n, const char* w, Py_ssize_t wn) nogil:
    return n >= wn and memmem(s, n, w, wn) != NULL


cdef object _extra(const char* s, Py_ssize_t n):
    """The ', "kind": ..., "called_computations": [...]' part of an hlo --json
    row for attribute text s[:n] (as :func:`json_row` writes it), or None
    when Python must decide."""
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
        end = attribute_span(s, n, b"kind", 4, &a)
        if end == -2:
            return None
        if end == -1:
            parts.append(', "kind": null')
        else:
            b = end
            while a < b and is_space(s[a]):
                a += 1
            while b > a and is_space(s[b - 1]):
                b -= 1
            if not _json_plain(s + a, b - a):
                return None
            parts.append(', "kind": "' + PyUnicode_FromStringAndSize(s + a, b - a) + '"')
    if (_has(s, n, b"calls=", 6) or _has(s, n, b"to_apply=", 9) or _has(s, n, b"body=", 5)
            or _has(s, n, b"condition=", 10) or _has(s, n, b"branch_computations=", 20)):
        names = []
        for ki in range(5):
            end = attribute_span(s, n, keys[ki], lens[ki], &a)
            if end == -2:
                return None
            if end == -1:
                continue
            b = end
            while a < b and is_space(s[a]):
                a += 1
            while b > a and is_space(s[b - 1]):
                b -= 1
            # v.strip("{}"), then every name
            while a < b and (s[a] == LBRACE or s[a] == RBRACE):
                a += 1
            while b > a and (s[b - 1] == LBRACE or s[b - 1] == RBRACE):
                b -= 1
            i = a
            while next_callee(s, &i, b, &a, &k):
                names.append('"' + PyUnicode_FromStringAndSize(s + a, k - a) + '"')
        parts.append(', "called_computations": [' + ", ".join(names) + "]")
    if not parts:
        return _EMPTY
    return "".join(parts)


cdef class JsonRows(InstructionSink):
    """The compiled scanner's sink for ``hlo --json``: the rows of the
    instructions it takes are written in C from fragments kept per shape
    (``shapes``: id -> (shape, footprint, fragment, spaces fragment, has
    data, waste)) and of the current computation (``describe(computation)``
    gives them), into one buffer (``drain()``, or ``write`` at each
    ``flush``); the summary's counts are kept here (``per_shape`` shared
    with the Python summary; the counters below). An instruction it cannot
    take (a new shape, padding large enough for the top list, escapes, ...)
    goes to :func:`write_rows`, which keeps these up to date
    (``threshold``: the smallest padding the top list would take)."""

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

    cdef int flush(self) except -1:
        if self.write is not None and self.blen > 0:
            self.write(self.drain())
        return 0

    cdef int take_span(self, object shape, object comp, const char* nm, Py_ssize_t nn,
                       const char* op, Py_ssize_t on, const char* ot, Py_ssize_t otn,
                       const char* at, Py_ssize_t atn, long long line, bint root) except -1:
        """Write the row of one instruction and count it, if this sink can;
        else 0 (and nothing is changed)."""
        return _take(self, shape, comp, nm, nn, op, on, ot, otn, at, atn, line, root)


cdef inline bint _one_of(const char* op, Py_ssize_t on, tuple names):
    cdef bytes b
    for b in names:
        if len(b) == on and same_bytes(op, <const char*>b, on):
            return True
    return False


cdef int _take(JsonRows sink, object shape, object comp, const char* nm, Py_ssize_t nn,
               const char* op, Py_ssize_t on, const char* ot, Py_ssize_t otn,
               const char* at, Py_ssize_t atn, long long line, bint root) except -1:
    cdef PyObject* hit = PyDict_GetItem(sink.shapes, id(shape))
    if hit is NULL:
        return 0
    cdef tuple si = <tuple>hit
    if si[0] is not shape:
        return 0
    if comp is None:
        return 0
    if comp is not sink.comp or len(comp.kinds) != sink.nkinds:
        if sink.describe is None:
            return 0
        sink.head, sink.kind_part, sink.embedded = sink.describe(comp)
        sink.comp = comp
        sink.nkinds = len(comp.kinds)
    cdef str result
    if sink.embedded:
        result = "embedded"
    elif not si[4]:
        result = "none"
    elif on == 9 and same_bytes(op, b"parameter", 9):
        result = "buffer" if comp.is_entry else "view"
    elif _one_of(op, on, sink.views):
        result = "view"
    else:
        result = "buffer"
    cdef object waste = si[5]
    if result == "buffer":
        if waste is None:
            return 0
        if _one_of(op, on, sink.aliased) and shape.is_tuple:
            return 0
        if waste > 0 and sink.top > 0 and waste >= sink.threshold:
            return 0
    cdef object extra = _extra(at, atn)
    if extra is None:
        return 0
    if _row(nm, nn, op, on, ot, otn, line, root, sink.head, si[2], sink.kind_part, result,
            si[3], extra, sink) is None:
        return 0
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
    return 1
