# cython: language_level=3
"""The HLO parser's compiled fast path: plain shape text -> Shape, in C.

:mod:`xlashape.hlo_text` calls :func:`fast_shape` on the whole text of
``parse_shape`` and :func:`fast_array_rest` inside its full parser (after an
element-type token). Both recognise only the overwhelmingly common plain form,
exactly as XLA prints it or close to it:

    type[dims]{m2m:T(..)..L(n)E(n)S(n)}      dims: N, ?, <=N; no layout: default
    (shape, shape, /*index=5*/shape, ...)     tuples of such arrays, tokens, opaques

and return None for anything else -- other attributes, whitespace, comments,
signs, numbers above INT64_MAX, every malformed text -- so that the full
Python parser, the reference and the only source of error messages, decides.
In a tuple they also return None unless each element passes the checks XLA's
parser runs on tuple elements (the full parser then reports which one fails).
``tests/test_hlo_text_fastpath.py`` checks on generated and mutated texts that
results are the same, slot for slot, with the fast path on and off.

Objects are made the way the classes' trusted constructors make them
(``Tile/Layout/Shape._from_parsed``): every slot filled from the classes' own
slot order and default table, without the constructors' checks, which the
scan has already made. When the text is exactly what ``str()`` prints (it
usually is: it was printed by XLA), the shape's cached text is set to it, so
printing a parsed shape costs nothing.
"""

from cpython.object cimport PyObject
from cpython.ref cimport Py_DECREF
from libc.stdint cimport INT64_MAX, INT64_MIN, int64_t, uint64_t

from .layout import COMBINE_DIMENSION as _COMBINE, Layout as _Layout, Tile as _Tile
from .primitive_types import PrimitiveType as _P
from .shape import Shape as _Shape, UNBOUNDED_SIZE as _UNBOUNDED


cdef extern from "Python.h":
    ctypedef struct _Type "PyTypeObject":
        int (*tp_descr_set)(PyObject*, PyObject*, PyObject*)
        PyObject* (*tp_alloc)(_Type*, Py_ssize_t)
    bint PyUnicode_IS_ASCII(object o)
    const char* PyUnicode_1BYTE_DATA_ptr "(const char*)PyUnicode_1BYTE_DATA" (object o)
    Py_ssize_t PyUnicode_GET_LENGTH(object o)
    object PyUnicode_FromStringAndSize(const char* s, Py_ssize_t n)

cdef extern from *:
    """
    static inline int xs_mul_overflows(int64_t a, int64_t b, int64_t* out) {
        return __builtin_mul_overflow(a, b, out);
    }
    """
    bint xs_mul_overflows(int64_t a, int64_t b, int64_t* out) noexcept nogil


# -- building objects the classes' way ----------------------------------------------

cdef object _LAYOUT_DESCRS = tuple(getattr(_Layout, name) for name in _Layout.__slots__)
cdef object _SHAPE_DESCRS = tuple(getattr(_Shape, name) for name in _Shape.__slots__)
cdef object _TILE_DESCR = _Tile._dims
# Layout's defaults, in slot order (the printed text last).
cdef object _LAYOUT_DEFAULTS = tuple(_Layout._DEFAULTS) + (None,)
cdef Py_ssize_t _L_M2M = _Layout._DEFAULTS._fields.index("minor_to_major")
cdef Py_ssize_t _L_TILES = _Layout._DEFAULTS._fields.index("tiles")
cdef Py_ssize_t _L_TAIL = _Layout._DEFAULTS._fields.index("tail_padding_alignment_in_elements")
cdef Py_ssize_t _L_BITS = _Layout._DEFAULTS._fields.index("element_size_in_bits")
cdef Py_ssize_t _L_SPACE = _Layout._DEFAULTS._fields.index("memory_space")
if len(_LAYOUT_DESCRS) != len(_LAYOUT_DEFAULTS) or _Shape.__slots__ != (
        "_element_type", "_dimensions", "_dynamic", "_layout", "_tuple_shapes", "_hash",
        "_text") or _Tile.__slots__ != ("_dims",):
    raise ImportError("xlashape._textscan was built for other Shape/Layout/Tile slots; "
                      "rebuild the package")


cdef inline object _alloc(object cls):
    cdef PyObject* p = (<_Type*>cls).tp_alloc(<_Type*>cls, 0)
    if p == NULL:
        raise MemoryError()
    obj = <object>p
    Py_DECREF(obj)
    return obj


cdef inline int _set(object descr, object obj, object value) except -1:
    return (<_Type*>(<PyObject*>descr).ob_type).tp_descr_set(
        <PyObject*>descr, <PyObject*>obj, <PyObject*>value)


cdef object _new_tile(tuple dims):
    tile = _alloc(_Tile)
    _set(_TILE_DESCR, tile, dims)
    return tile


cdef object _new_layout(tuple m2m, tuple tiles, object tail, object bits, object space):
    lay = _alloc(_Layout)
    cdef Py_ssize_t i
    for i in range(len(_LAYOUT_DESCRS)):
        if i == _L_M2M:
            value = m2m
        elif i == _L_TILES:
            value = tiles
        elif i == _L_TAIL:
            value = tail
        elif i == _L_BITS:
            value = bits
        elif i == _L_SPACE:
            value = space
        else:
            value = _LAYOUT_DEFAULTS[i]
        _set(_LAYOUT_DESCRS[i], lay, value)
    return lay


cdef object _new_shape(object et, tuple dims, tuple dyn, object layout, tuple tuple_shapes,
                       object text):
    shape = _alloc(_Shape)
    d = _SHAPE_DESCRS
    _set(d[0], shape, et)
    _set(d[1], shape, dims)
    _set(d[2], shape, dyn)
    _set(d[3], shape, layout)
    _set(d[4], shape, tuple_shapes)
    _set(d[5], shape, None)
    _set(d[6], shape, text)
    return shape


cdef enum:
    MAX_DIMS = 64      # longer dimension lists go to the full parser


# -- element types ------------------------------------------------------------------

# Every lowercase type name the lexer reads as a type keyword (not tuple,
# buffer or primitive_type_invalid), with facts the scan needs.
cdef dict _TYPES = {t.hlo_name: t for t in _P
                    if t not in (_P.TUPLE, _P.BUFFER, _P.PRIMITIVE_TYPE_INVALID)}
cdef dict _BYTE_WIDTH = {t: t.byte_width for t in _P if t.is_array_type}
cdef list _DEFAULT_LAYOUTS = []   # rank -> the shared {n-1,...,0} layout
cdef list _DEFAULT_TEXTS = []     # rank -> its text ("" for rank 0, as a shape prints it)


def default_layout(Py_ssize_t rank):
    """``{rank-1,...,1,0}``, the layout XLA's parser fills in for an array
    written without one: one shared (immutable) object per rank."""
    if rank < 0:
        raise ValueError(f"rank must be >= 0, got {rank}")
    return _default_layout(rank)


cdef object _default_layout(Py_ssize_t n):
    if n > MAX_DIMS:  # rare: not cached (a list of every rank up to n would be O(n**2))
        return _Layout(tuple(range(n - 1, -1, -1)))
    while len(_DEFAULT_LAYOUTS) <= n:
        r = len(_DEFAULT_LAYOUTS)
        lay = _Layout(tuple(range(r - 1, -1, -1)))
        _DEFAULT_LAYOUTS.append(lay)
        _DEFAULT_TEXTS.append(str(lay) if r else "")
    return _DEFAULT_LAYOUTS[n]


# -- the scanner ----------------------------------------------------------------------

cdef int64_t INT64_MAX_ = INT64_MAX
cdef int64_t INT64_MIN_ = INT64_MIN


cdef struct Scan:
    const char* s
    Py_ssize_t n
    Py_ssize_t i
    bint canon      # the text so far is exactly what str() prints
    bint no_layout  # the last array was written without a layout


cdef inline bint _digit(char c) noexcept nogil:
    return c >= c'0' and c <= c'9'


cdef inline int _number(Scan* sc, int64_t* out) noexcept nogil:
    """A run of digits at sc.i as an int64: 1, or 0 if there is no digit or the
    value exceeds INT64_MAX (the lexer would bit-cast or refuse it)."""
    cdef Py_ssize_t start = sc.i
    cdef uint64_t v = 0
    while sc.i < sc.n and _digit(sc.s[sc.i]):
        if v > <uint64_t>INT64_MAX_ // 10:
            return 0
        v = v * 10 + <uint64_t>(sc.s[sc.i] - c'0')
        if v > <uint64_t>INT64_MAX_:
            return 0
        sc.i += 1
    if sc.i == start:
        return 0
    if sc.s[start] == c'0' and sc.i - start > 1:
        sc.canon = False  # leading zeros are not printed
    out[0] = <int64_t>v
    return 1


cdef inline bint _eat(Scan* sc, char c) noexcept nogil:
    if sc.i < sc.n and sc.s[sc.i] == c:
        sc.i += 1
        return True
    return False


cdef inline int _paren_number(Scan* sc, int64_t* out) noexcept nogil:
    """``(digits)`` at sc.i."""
    if not _eat(sc, c'('):
        return 0
    if not _number(sc, out):
        return 0
    return 1 if _eat(sc, c')') else 0


cdef object _array_rest(Scan* sc, object et, bint in_tuple):
    """``[dims]`` and an optional plain layout at sc.i, after the element type:
    the Shape, or None. Leaves sc.i after what it read (the caller checks what
    follows a shape written without a layout)."""
    cdef int64_t dims[MAX_DIMS]
    cdef bint dyn[MAX_DIMS]
    cdef int64_t m2m[MAX_DIMS]
    cdef int64_t v, product, bytes_
    cdef Py_ssize_t n = 0, k, j
    cdef int64_t tail = 1, bits = 0, space = 0
    cdef bint any_dyn = False
    cdef bint seen[MAX_DIMS]

    sc.no_layout = False
    if not _eat(sc, c'['):
        return None
    if not _eat(sc, c']'):
        while True:
            if n == MAX_DIMS:
                return None
            if _eat(sc, c'?'):
                dims[n] = INT64_MIN_
                dyn[n] = True
            elif _eat(sc, c'<'):
                if not _eat(sc, c'=') or not _number(sc, &v):
                    return None
                dims[n] = v
                dyn[n] = True
            else:
                if not _number(sc, &v):
                    return None
                dims[n] = v
                dyn[n] = False
            any_dyn |= dyn[n]
            n += 1
            if _eat(sc, c']'):
                break
            if not _eat(sc, c','):
                return None
    is_array = et in _BYTE_WIDTH
    if not is_array:  # token[] / opaque[]: anything more goes to the full parser
        if n or (sc.i + 1 < sc.n and sc.s[sc.i] == c'{'
                 and (_digit(sc.s[sc.i + 1]) or sc.s[sc.i + 1] == c':')):
            return None
        sc.no_layout = True
        return _new_shape(et, (), (), None, (), None)
    if in_tuple:
        # XLA's parser validates tuple elements: the element count and the
        # byte size must fit in int64 (a sticky check, as XLA's).
        product = 1
        for k in range(n):
            if dims[k] != INT64_MIN_ and xs_mul_overflows(product, dims[k], &product):
                return None
        if xs_mul_overflows(product, <int64_t>_BYTE_WIDTH[et], &bytes_):
            return None
    dims_t = tuple([dims[k] for k in range(n)])
    dyn_t = tuple([dyn[k] for k in range(n)]) if any_dyn else (False,) * n

    # A layout: '{' followed by a digit or ':' (else the '{' is not a layout).
    if not (sc.i + 1 < sc.n and sc.s[sc.i] == c'{'
            and (_digit(sc.s[sc.i + 1]) or sc.s[sc.i + 1] == c':')):
        sc.no_layout = True
        return _new_shape(et, dims_t, dyn_t, _default_layout(n), (), None)
    sc.i += 1
    k = 0
    if sc.s[sc.i] != c':':
        while True:
            if k == n or not _number(sc, &v):
                return None  # more entries than dimensions, or not a number
            m2m[k] = v
            k += 1
            if not _eat(sc, c','):
                break
    if k != n:
        return None  # "Dimensions size is n, but minor to major size is k."
    if in_tuple and n:
        for j in range(n):
            seen[j] = False
        for j in range(n):
            if m2m[j] >= n or seen[m2m[j]]:
                return None  # not a permutation
            seen[m2m[j]] = True
    tiles = ()
    if _eat(sc, c':'):
        printed_attrs = False
        if _eat(sc, c'T'):
            tile_list = []
            if sc.i >= sc.n or sc.s[sc.i] != c'(':
                return None
            while _eat(sc, c'('):
                entries = []
                while True:
                    if _eat(sc, c'*'):
                        entries.append(_COMBINE)
                    elif _number(sc, &v):
                        if v == 0 and in_tuple:
                            return None  # invalid tiles
                        entries.append(v)
                    else:
                        return None
                    if _eat(sc, c')'):
                        break
                    if not _eat(sc, c','):
                        return None
                tile_list.append(_new_tile(tuple(entries)))
            tiles = tuple(tile_list)
            printed_attrs = True
        if sc.i < sc.n and sc.s[sc.i] == c'L':
            sc.i += 1
            if not _paren_number(sc, &tail) or tail < 1:
                return None  # L(0): refused by the full parser
            if tail == 1:
                sc.canon = False
            else:
                printed_attrs = True
        if sc.i < sc.n and sc.s[sc.i] == c'E':
            sc.i += 1
            if not _paren_number(sc, &bits):
                return None
            if bits == 0:
                sc.canon = False
            else:
                printed_attrs = True
        if sc.i < sc.n and sc.s[sc.i] == c'S':
            sc.i += 1
            if not _paren_number(sc, &space):
                return None
            if space > 127:
                space = ((space + 128) & 0xFF) - 128  # XLA keeps memory_space in an int8
                sc.canon = False
            if space == 0:
                sc.canon = False
            else:
                printed_attrs = True
        if not printed_attrs:
            sc.canon = False  # ':' with nothing after it is not printed
    elif n == 0:
        sc.canon = False  # a scalar's '{}' is not printed
    if not _eat(sc, c'}'):
        return None
    layout = _new_layout(tuple([m2m[j] for j in range(n)]), tiles, tail, bits, space)
    return _new_shape(et, dims_t, dyn_t, layout, (), None)


cdef object _type_at(Scan* sc):
    """The element type whose name starts at sc.i (then sc.i is after it), or None."""
    cdef Py_ssize_t start = sc.i
    if sc.i >= sc.n or not (sc.s[sc.i] >= c'a' and sc.s[sc.i] <= c'z'):
        return None
    while sc.i < sc.n and ((sc.s[sc.i] >= c'a' and sc.s[sc.i] <= c'z') or _digit(sc.s[sc.i])):
        sc.i += 1
    return _TYPES.get(PyUnicode_FromStringAndSize(sc.s + start, sc.i - start))


cdef object _with_text(object shape, object text):
    _set(_SHAPE_DESCRS[6], shape, text)
    return shape


cdef object _tuple(Scan* sc, object text):
    cdef Py_ssize_t count = 0
    cdef int64_t index
    elements = []
    sc.i = 1
    while True:
        et = _type_at(sc)
        if et is None:
            return None
        element = _array_rest(sc, et, True)
        if element is None or sc.i >= sc.n:
            return None
        if sc.no_layout and element.dimensions:
            sc.canon = False  # str() adds the default layout
        elements.append(element)
        count += 1
        if _eat(sc, c')'):
            if sc.i != sc.n:
                return None
            break
        if not _eat(sc, c','):
            return None
        # ', ' as XLA prints it, maybe with its /*index=N*/
        if not _eat(sc, c' '):
            sc.canon = False
        if sc.i + 8 < sc.n and sc.s[sc.i] == c'/' and sc.s[sc.i + 1] == c'*':
            if PyUnicode_FromStringAndSize(sc.s + sc.i, 8) != "/*index=":
                return None
            sc.i += 8
            if not _number(sc, &index) or not _eat(sc, c'*') or not _eat(sc, c'/'):
                return None
            if index != count or count % 5:
                sc.canon = False
        elif count % 5 == 0:
            sc.canon = False
    shape = _new_shape(_P.TUPLE, (), (), None, tuple(elements), None)
    if sc.canon:
        _with_text(shape, text)
    return shape


def fast_shape(str text):
    """``parse_shape``'s fast path: the Shape if the whole of ``text`` is one
    plain array shape or a tuple of them; None for anything else."""
    if not PyUnicode_IS_ASCII(text):
        return None
    cdef Scan sc
    sc.s = PyUnicode_1BYTE_DATA_ptr(text)
    sc.n = PyUnicode_GET_LENGTH(text)
    sc.i = 0
    sc.canon = True
    if sc.n and sc.s[0] == c'(':
        return _tuple(&sc, text)
    et = _type_at(&sc)
    if et is None:
        return None
    shape = _array_rest(&sc, et, False)
    if shape is None or sc.i != sc.n:
        return None
    if sc.canon:
        if sc.no_layout and shape.layout is not None:
            # written without a layout: str() adds the default one
            _with_text(shape, text + _DEFAULT_TEXTS[len(shape.dimensions)])
        else:
            _with_text(shape, text)
    return shape


def fast_array_rest(str text, Py_ssize_t pos, object element_type):
    """The full parser's fast path after an element-type token ending at
    ``pos``: ``(shape, end)`` for a plain ``[dims]{layout}`` there, else None.
    Without a layout it applies only when the next character cannot start one
    (the full parser decides whitespace, comments and '{')."""
    if not PyUnicode_IS_ASCII(text):
        return None
    cdef Scan sc
    sc.s = PyUnicode_1BYTE_DATA_ptr(text)
    sc.n = PyUnicode_GET_LENGTH(text)
    if pos < 0 or pos > sc.n:
        return None
    sc.i = pos
    sc.canon = True
    shape = _array_rest(&sc, element_type, False)
    if shape is None:
        return None
    if sc.no_layout and sc.i < sc.n and sc.s[sc.i] in b' \t\r\n/{':
        return None  # a layout may follow: the full parser decides
    return shape, sc.i
