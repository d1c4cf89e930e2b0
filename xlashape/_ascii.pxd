# cython: language_level=3
"""Bytes of ASCII text, by name, and the character classes the compiled HLO
scanner (``_hloscan.pyx``) and the ``hlo --json`` row writer
(``cli/_hlo_json.pyx``) test them with. Declarations and inline functions
only: nothing here exists at run time.

The classes are Python's for ASCII text: ``is_space`` is ``str.isspace()``
(``\\t\\n\\v\\f\\r``, the four separators FS..US, and the space), ``is_word``
is ``\\w``, ``is_name_char`` the characters of an HLO name
(``[\\w.\\-]``)."""

cdef extern from "Python.h":
    bint PyUnicode_IS_ASCII(object o)
    void* PyUnicode_DATA(object o)
    Py_ssize_t PyUnicode_GET_LENGTH(object o)
    object PyUnicode_Substring(object s, Py_ssize_t start, Py_ssize_t end)
    object PyUnicode_New(Py_ssize_t size, Py_UCS4 maxchar)
    object PyUnicode_FromStringAndSize(const char* s, Py_ssize_t n)

cdef extern from "string.h" nogil:
    void* memmem(const void* haystack, size_t hn, const void* needle, size_t nn)


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


cdef inline bint is_space(char c) nogil:
    return c == SPACE or (TAB <= c <= CR) or (FS <= c <= US)


cdef inline bint is_word_start(char c) nogil:
    """[A-Za-z_]"""
    return (UPPER_A <= c <= UPPER_Z) or (LOWER_A <= c <= LOWER_Z) or c == UNDERSCORE


cdef inline bint is_word(char c) nogil:
    """\\w of ASCII: [A-Za-z0-9_]"""
    return (UPPER_A <= c <= UPPER_Z) or (LOWER_A <= c <= LOWER_Z) or c == UNDERSCORE \
        or (DIGIT_0 <= c <= DIGIT_9)


cdef inline bint is_name_char(char c) nogil:
    """[\\w.\\-]"""
    return (UPPER_A <= c <= UPPER_Z) or (LOWER_A <= c <= LOWER_Z) or c == UNDERSCORE \
        or (DIGIT_0 <= c <= DIGIT_9) or c == DOT or c == DASH


cdef inline bint is_lower(char c) nogil:
    return LOWER_A <= c <= LOWER_Z


cdef inline bint is_digit(char c) nogil:
    return DIGIT_0 <= c <= DIGIT_9


cdef inline bint same_bytes(const char* a, const char* b, Py_ssize_t n) nogil:
    cdef Py_ssize_t i
    for i in range(n):
        if a[i] != b[i]:
            return False
    return True


cdef inline const char* ascii_chars(object text, Py_ssize_t* n):
    """The characters of an ASCII str, their count in ``n``; NULL for
    anything else (another type, or text with non-ASCII characters)."""
    if type(text) is not str or not PyUnicode_IS_ASCII(text):
        return NULL
    n[0] = PyUnicode_GET_LENGTH(text)
    return <const char*>PyUnicode_DATA(text)
