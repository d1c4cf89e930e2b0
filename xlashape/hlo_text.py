"""HLO text for shapes and layouts: XLA's lexer and parser, in Python.

:func:`parse_shape` and :func:`parse_layout` accept exactly what XLA's
``ParseShape`` / ``ParseLayout`` (``xla/hlo/parser/hlo_parser.cc``) accept and
build the same values, quirks included:

* whitespace, ``/* ... */`` and ``// ...`` comments are allowed between tokens;
* integers follow XLA's lexer: non-negative literals up to 2**64-1 are
  bit-cast to int64 (``18446744073709551615`` is -1), and ``2x3``, ``1_2``,
  ``1.5`` are other kinds of token, never integers;
* layout attributes come in XLA's fixed order ``D T L # * E S SC P M``;
  ``D(...)`` is parsed and dropped; ``S(n)`` wraps to int8 as XLA stores it;
* an array written without a layout gets the default layout ``{n-1,...,0}``
  (tuple elements too); ``{}`` after a shape is not a layout;
* like XLA, a malformed attribute does not stop the layout parser by itself
  (``f32[2]{0:E(}`` parses, as ``f32[2]{0}``), and no validation runs
  except the one XLA runs on tuple elements.

Where XLA would abort the whole process (a negative tile entry other than
``*``, ``L(0)``, dimensions or a layout on ``token``/``opaque``) these
functions raise :class:`~xlashape.HloParseError` instead. Nesting deeper than
:data:`MAX_NESTING_DEPTH` shapes is refused with an ``HloParseError`` too (a
physical shape ``P(...)`` counts as four levels).

Errors carry XLA's wording (``expects integer``, ``expected primitive type,
saw kIdent``, ``expects layout to end with kRbrace``, ``Dimensions size is 2,
but minor to major size is 1.``, ``Extra content after shape``), the text,
and the line/column of the offending token with a caret line; a short
``(got ...)`` names what was found instead. The exception's ``errors``
attribute lists every ``(message, position)`` XLA's parser would report for
the failure, innermost first (``message`` is the first of them).

Speed: the common plain array shape (``type[dims]{m2m:T(..)L(n)E(n)S(n)}``,
and tuples of them as XLA prints them) is recognised and built by a compiled
scanner (:mod:`xlashape._textscan`, a few µs instead of ~60-100 µs), which
also hands the text to the shape when it is exactly what ``str()`` prints;
anything else, and every error, goes through the full lexer and parser here,
so results and errors are the same either way
(``tests/test_hlo_text_fastpath.py``).

>>> s = parse_shape("bf16[32,32,4096]{2,1,0:T(8,128)(2,1)S(1)}")
>>> s.dimensions, s.layout.memory_space, str(s.layout.tiles[1])
((32, 32, 4096), 1, '(2,1)')
>>> str(parse_shape("(f32[2,3], s32[])"))
'(f32[2,3]{1,0}, s32[])'
"""

from __future__ import annotations

import functools
import re
from typing import List, Optional, Tuple

from ._base import INT64_MAX, INT64_MIN, UINT64_MAX
from . import _textscan
from ._validation import validate_layout_in_shape, validate_non_layout
from .errors import (HloParseError, InvalidShapeError, ShapeIndexError, ShapeTypeError,
                     XlaShapeError)
from .layout import COMBINE_DIMENSION, Layout, SplitConfig, Tile
from .primitive_types import PrimitiveType
from .shape import Shape, UNBOUNDED_SIZE

__all__ = ["parse_shape", "parse_layout", "parse_shape_prefix", "unescape_string",
           "MAX_NESTING_DEPTH"]

P = PrimitiveType

#: Shapes nested deeper than this (tuples, buffers, physical shapes) are refused
#: with an :class:`~xlashape.HloParseError`. XLA itself overflows its stack at
#: a few thousand levels; real HLO nests a handful.
MAX_NESTING_DEPTH = 200
# A physical shape P(...) inside a layout counts as this many levels.
_PHYSICAL_SHAPE_DEPTH = 4

# ---------------------------------------------------------------------------
# Tokens. The names are XLA's TokKindToString spellings, used in messages.
(
    K_EOF, K_ERROR, K_EQUAL, K_COMMA, K_COLON, K_ASTERISK, K_QUESTION,
    K_OCTOTHORP, K_PLUS, K_TILDE, K_LSQUARE, K_RSQUARE, K_LBRACE, K_RBRACE,
    K_LPAREN, K_RPAREN, K_ARROW, K_LEQ, K_KEYWORD, K_NEGINF, K_PRIMITIVE,
    K_NAME, K_ATTRNAME, K_DIMLABELS, K_DXD, K_PAD, K_IDENT, K_STRING, K_INT,
    K_DECIMAL, K_DOTS,
) = range(31)

_KIND_NAMES = {
    K_EOF: "kEof", K_ERROR: "kError", K_EQUAL: "kEqual", K_COMMA: "kComma",
    K_COLON: "kColon", K_ASTERISK: "kAsterisk", K_QUESTION: "kQuestionMark",
    K_OCTOTHORP: "kOctothorp", K_PLUS: "kPlus", K_TILDE: "kTilde",
    K_LSQUARE: "kLsquare", K_RSQUARE: "kRsquare", K_LBRACE: "kLbrace",
    K_RBRACE: "kRbrace", K_LPAREN: "kLparen", K_RPAREN: "kRparen",
    K_ARROW: "kArrow", K_LEQ: "kLeq", K_NEGINF: "kNegInf",
    K_PRIMITIVE: "kPrimitiveType", K_NAME: "kName", K_ATTRNAME: "kAttributeName",
    K_DIMLABELS: "kDimLabels", K_DXD: "kDxD", K_PAD: "kPad", K_IDENT: "kIdent",
    K_STRING: "kString", K_INT: "kInt", K_DECIMAL: "kDecimal", K_DOTS: "kDots",
}

_SINGLE = {
    "=": K_EQUAL, ",": K_COMMA, ":": K_COLON, "*": K_ASTERISK, "#": K_OCTOTHORP,
    "+": K_PLUS, "~": K_TILDE, "[": K_LSQUARE, "]": K_RSQUARE, "{": K_LBRACE,
    "}": K_RBRACE, "(": K_LPAREN, ")": K_RPAREN,
}

_KEYWORDS = frozenset({
    "true", "false", "inf", "HloModule", "ENTRY", "ROOT", "FileLocations",
    "FileNames", "FunctionNames", "StackFrames", "maximal", "replicated",
    "manual", "last_tile_dim_replicate", "shard_as", "shard_like", "unknown",
    "unreduced",
})

# Element-type keywords: every lowercase type name except tuple and buffer
# (and not primitive_type_invalid, which XLA's name table does not contain).
_TYPE_KEYWORDS = {
    t.hlo_name: t for t in PrimitiveType
    if t not in (P.TUPLE, P.BUFFER, P.PRIMITIVE_TYPE_INVALID)
}
_TYPE_NAMES_LOWER = {name.lower(): name for name in _TYPE_KEYWORDS}

_WHITESPACE = frozenset(" \t\n\r")
_DIGITS = frozenset("0123456789")
_ALPHA = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ_")
# After a run of digits, only these characters can extend a number into one
# of the longer token patterns (float, dim labels, NxM, pad).
_NUMBER_EXTENDERS = frozenset(".eEbf?_x")


def _possessive_supported() -> bool:
    try:
        re.compile("a*+")
    except re.error:       # Python < 3.11
        return False
    return True


#: "+" where Python's regex engine has possessive repeats (3.11), else "":
#: appended to a repeat of a group that never needs to give back, so that no
#: backtracking state is kept per repetition (a group repeated per character
#: holds ~150 bytes each: hundreds of MB for a hostile line of a few MB)
POSSESSIVE = "+" if _possessive_supported() else ""


_A = re.ASCII
_IDENT_RE = re.compile(r"[a-zA-Z_][a-zA-Z0-9_.\-]*", _A)
_FLOAT_RE = re.compile(
    r"-?(?:(?:[0-9]+|[0-9]+\.[0-9]*|[0-9]*\.[0-9]+)[eE][+-]?[0-9]+)"
    r"|-?(?:[0-9]+\.[0-9]*|[0-9]*\.[0-9]+)", _A)
_DIMLABELS_RE = re.compile(r"[0-9bf?]{2,}_[0-9io?]{2,}->[0-9bf?]{2,}", _A)
_DXD_RE = re.compile(r"[0-9]+(?:x[0-9]+)+" + POSSESSIVE, _A)
_PAD_RE = re.compile(
    r"-?[0-9]+_-?[0-9]+(?:_[0-9]+)?(?:x-?[0-9]+_-?[0-9]+(?:_[0-9]+)?)*" + POSSESSIVE, _A)
_INT_RE = re.compile(r"-?[0-9]+", _A)
_NAN_PAYLOAD_RE = re.compile(r"\(0x([0-9a-fA-F]+)\)", _A)




def _quoted_pattern(q: str) -> str:
    """A string quoted with ``q``, backslash escapes inside (the language
    of ``q(?:[^q\\]|\\.)*q``), written so that Python's regex engine keeps
    no backtracking state per character: possessive where the engine has
    them (Python 3.11), else unrolled (state per escape only). The plain
    alternation holds ~150 bytes per character of a long string: an 8 MB
    op_name took 1.4 GB to match."""
    p = POSSESSIVE
    return rf"{q}[^{q}\\]*{p}(?:\\.[^{q}\\]*{p})*{p}{q}"


#: a double-quoted HLO string, escapes inside (the one pattern every reader
#: composes into its own)
DQ_STRING = _quoted_pattern('"')
_DQ_STRING_RE = re.compile(DQ_STRING)
_SQ_STRING_RE = re.compile(_quoted_pattern("'"))
_ESCAPE_RE = re.compile(
    r"\\(?:[ntrabfv\\'\"?]|[0-7]{1,3}|x[0-9a-fA-F]+|u[0-9a-fA-F]{4}|U[0-9a-fA-F]{8})",
    _A)


# One regex for the common tokens: a punctuation character, an unsigned
# integer that no longer pattern could extend, or a word that is complete
# (not followed by an identifier character, ':' or '=').
_FAST_TOKEN_RE = re.compile(
    r"[ \t\r\n]*(?:([\[\](){},:*#+~=])|([0-9]+)(?![0-9.eEbf?_x])"
    r"|([a-zA-Z_][a-zA-Z0-9_]*)(?![a-zA-Z0-9_.:=\-]))", _A)
# Words that are plain identifiers for sure (layout letters, 'b' of b(...)):
# not types, keywords, 'nan' or dim-label patterns.
_PLAIN_IDENTS = frozenset({"T", "L", "E", "S", "SC", "P", "M", "D", "C", "H", "b"})


# An array shape with a plain layout (no whitespace, comments or P(...)):
# parse_shape_prefix looks these up in parse_shape's cache.
_SIMPLE_SHAPE_RE = re.compile(
    r"[a-z][a-z0-9]*\[[0-9,<=?]*\](\{(?:-?[0-9]|:)[0-9a-zA-Z,:()*#\-]*\})?", _A)
_SPACES_RE = re.compile(r"[ \t\r\n]*")
_PAREN_RE = re.compile(r"[()\"'\n]")


def _escapes_ok(raw: str) -> bool:
    """Whether ``absl::CUnescape`` would accept the body of a quoted string."""
    if "\\" not in raw:
        return True
    i = raw.find("\\")
    while i >= 0:
        m = _ESCAPE_RE.match(raw, i)
        if m is None:
            return False
        esc = m.group()
        if esc[1] == "x" and int(esc[2:], 16) > 0xFF:
            return False
        if esc[1] in "01234567" and int(esc[1:], 8) > 0xFF:
            return False
        i = raw.find("\\", m.end())
    return True


_SIMPLE_ESCAPES = {"n": "\n", "t": "\t", "r": "\r", "a": "\a", "b": "\b", "f": "\f",
                   "v": "\v", "\\": "\\", "'": "'", '"': '"', "?": "?"}


def unescape_string(raw: str) -> str:
    r"""The body of a quoted string of XLA's text as ``absl::CUnescape`` reads
    it: XLA prints ``op_name`` and ``source_file`` through ``absl::CEscape``,
    so JAX's ``params['w']`` is ``params[\'w\']`` in the text and a
    non-ASCII letter is the octal escapes of its UTF-8 bytes (``\303\266``
    for ``ö``). Bytes that are not UTF-8 are kept as ``\xNN``; text
    ``CUnescape`` would refuse (a lone backslash) is returned as it is.

    >>> unescape_string(r"params[\'layers\'][0][\'w1\']"), unescape_string(r"gr\303\266\303\237e")
    ("params['layers'][0]['w1']", 'größe')
    """
    if "\\" not in raw or not _escapes_ok(raw):
        return raw
    out = bytearray()
    pos = 0
    i = raw.find("\\")
    while i >= 0:
        m = _ESCAPE_RE.match(raw, i)
        out += raw[pos:i].encode("utf-8", "surrogatepass")
        esc = m.group()
        c = esc[1]
        if c in _SIMPLE_ESCAPES:
            out += _SIMPLE_ESCAPES[c].encode()
        elif c == "x":
            out.append(int(esc[2:], 16))
        elif c in "uU":
            out += chr(int(esc[2:], 16)).encode("utf-8", "surrogatepass")
        else:
            out.append(int(esc[1:], 8))
        pos = m.end()
        i = raw.find("\\", pos)
    out += raw[pos:].encode("utf-8", "surrogatepass")
    return out.decode("utf-8", "backslashreplace")


class _Lexer:
    """XLA's HloLexer over a Python string (positions are character offsets).

    After :meth:`lex`, ``kind`` is the token kind, ``start``/``end`` its
    extent, ``int_val`` the value of an integer and ``ptype`` the element type
    of a primitive-type keyword; ``ident`` holds the text of an identifier.
    """

    __slots__ = ("text", "n", "pos", "kind", "start", "end", "prev_end", "int_val", "ptype",
                 "ident")

    def __init__(self, text: str, pos: int = 0):
        self.text = text
        self.n = len(text)
        self.pos = pos
        self.kind = K_EOF
        self.start = pos
        self.end = pos
        self.prev_end = pos
        self.int_val = 0
        self.ptype = None
        self.ident = None

    def lex(self) -> int:
        self.prev_end = self.end
        self.ident = None
        # Fast path for the tokens shapes are made of; anything unusual
        # (signs, '?', '<=', comments, names, keywords...) takes _lex().
        m = _FAST_TOKEN_RE.match(self.text, self.pos)
        if m is not None:
            group = m.lastindex
            if group == 1:
                self.start = m.start(1)
                self.pos = self.end = m.end()
                self.kind = kind = _SINGLE[m.group(1)]
                return kind
            if group == 2:
                digits = m.group(2)
                if len(digits) < 19:
                    self.start = m.start(2)
                    self.pos = self.end = m.end()
                    self.int_val = int(digits)
                    self.kind = K_INT
                    return K_INT
            else:
                word = m.group(3)
                ptype = _TYPE_KEYWORDS.get(word)
                if ptype is not None:
                    self.start = m.start(3)
                    self.pos = self.end = m.end()
                    self.ptype = ptype
                    self.kind = K_PRIMITIVE
                    return K_PRIMITIVE
                if word in _PLAIN_IDENTS:
                    self.start = m.start(3)
                    self.pos = self.end = m.end()
                    self.ident = word
                    self.kind = K_IDENT
                    return K_IDENT
        kind = self._lex()
        self.kind = kind
        self.end = self.pos
        return kind

    def look_ahead(self) -> int:
        if self.kind in (K_EOF, K_ERROR):
            return self.kind
        saved = (self.pos, self.kind, self.start, self.end, self.prev_end, self.int_val,
                 self.ptype, self.ident)
        kind = self.lex()
        (self.pos, self.kind, self.start, self.end, self.prev_end, self.int_val, self.ptype,
         self.ident) = saved
        return kind

    # -- the scanner -------------------------------------------------------
    def _lex(self) -> int:  # noqa: C901 - one switch, as in XLA
        text, n = self.text, self.n
        while True:
            pos = self.pos
            self.start = pos
            if pos >= n:
                return K_EOF
            c = text[pos]
            if c in _WHITESPACE:
                self.pos = pos + 1
                continue
            single = _SINGLE.get(c)
            if single is not None:
                self.pos = pos + 1
                return single
            if c in _DIGITS or c == "-" or c == "?":
                if c == "-" and pos + 1 < n and text[pos + 1] == ">":
                    self.pos = pos + 2
                    return K_ARROW
                return self._lex_number(pos, c)
            if c in _ALPHA:
                return self._lex_identifier(pos)
            if c == "/":
                nxt = text[pos + 1] if pos + 1 < n else ""
                if nxt == "*":
                    close = text.find("*/", pos + 2)
                    if close < 0 or "\0" in text[pos + 2:close]:
                        self.pos = pos + 1
                        return K_ERROR
                    self.pos = close + 2
                    continue
                if nxt == "/":
                    i = pos + 2
                    while i < n and text[i] not in "\n\r":
                        if text[i] == "\0":
                            self.pos = i
                            return K_ERROR
                        i += 1
                    self.pos = i
                    continue
                self.pos = pos + 1
                return K_ERROR
            if c == "<":
                if pos + 1 < n and text[pos + 1] == "=":
                    self.pos = pos + 2
                    return K_LEQ
                self.pos = pos + 1
                return K_ERROR
            if c == "%":
                m = _IDENT_RE.match(text, pos + 1)
                if m is None:
                    self.pos = pos + 1
                    return K_ERROR
                self.pos = m.end()
                return K_NAME
            if c == ".":
                if text.startswith("...", pos):
                    self.pos = pos + 3
                    return K_DOTS
                self.pos = pos + (2 if text.startswith("..", pos) else 1)
                return K_ERROR
            if c == '"' or c == "'":
                m = (_DQ_STRING_RE if c == '"' else _SQ_STRING_RE).match(text, pos)
                if m is None or not _escapes_ok(text[pos + 1:m.end() - 1]):
                    self.pos = pos + 1
                    return K_ERROR
                self.pos = m.end()
                return K_STRING
            # NUL, non-ASCII or any other character.
            self.pos = pos + (0 if c == "\0" else 1)
            return K_ERROR

    def _lex_number(self, pos: int, c: str) -> int:
        text, n = self.text, self.n
        # Fast path: a plain integer that no longer pattern could extend.
        i = pos + 1 if c == "-" else pos
        j = i
        while j < n and text[j] in _DIGITS:
            j += 1
        if j > i and (j >= n or text[j] not in _NUMBER_EXTENDERS):
            return self._finish_int(pos, j, c == "-")
        if c == "?" and (pos + 1 >= n or text[pos + 1] not in "0123456789bf?"):
            self.pos = pos + 1
            return K_QUESTION
        # XLA's order: float, dim labels, NxM, pad, int, -inf, -nan.
        m = _FLOAT_RE.match(text, pos)
        if m is not None:
            self.pos = m.end()
            return K_DECIMAL
        m = _DIMLABELS_RE.match(text, pos)
        if m is not None:
            self.pos = m.end()
            return K_DIMLABELS
        m = _DXD_RE.match(text, pos)
        if m is not None:
            self.pos = m.end()
            return K_DXD
        m = _PAD_RE.match(text, pos)
        if m is not None:
            self.pos = m.end()
            return K_PAD
        m = _INT_RE.match(text, pos)
        if m is not None:
            kind = self._finish_int(pos, m.end(), c == "-")
            if kind == K_INT:
                return kind
        if text.startswith("-inf", pos):
            self.pos = pos + 4
            return K_NEGINF
        if text.startswith("-nan", pos):
            self.pos = pos + 4
            if self.pos < n and text[self.pos] == "(":
                return self._nan_payload()
            return K_DECIMAL
        self.pos = pos + 1
        return K_QUESTION if c == "?" else K_ERROR

    def _finish_int(self, pos: int, end: int, negative: bool) -> int:
        digits = self.text[pos + 1 if negative else pos:end].lstrip("0")
        if len(digits) > 20:  # cannot fit in 64 bits; never convert huge strings
            self.pos = pos + 1
            return K_ERROR
        value = -int(digits or "0") if negative else int(digits or "0")
        if negative:
            if value < INT64_MIN:
                self.pos = pos + 1
                return K_ERROR
        else:
            if value > UINT64_MAX:
                self.pos = pos + 1
                return K_ERROR
            if value > INT64_MAX:  # XLA bit-casts uint64 to int64
                value -= 2**64
        self.int_val = value
        self.pos = end
        return K_INT

    def _nan_payload(self) -> int:
        m = _NAN_PAYLOAD_RE.match(self.text, self.pos)
        if m is None:
            return K_ERROR
        self.pos = m.end()
        digits = m.group(1).lstrip("0")
        if len(digits) > 16:
            return K_ERROR
        value = int(m.group(1), 16)
        if value <= 0 or value > (1 << 52) - 1:
            return K_ERROR
        return K_DECIMAL

    def _lex_identifier(self, pos: int) -> int:
        text = self.text
        m = _IDENT_RE.match(text, pos)
        end = m.end()
        nxt = text[end] if end < self.n else ""
        if nxt == ":":
            self.pos = end + 1
            return K_NAME
        if nxt == "=":
            self.pos = end + 1
            return K_ATTRNAME
        word = m.group()
        self.pos = end
        ptype = _TYPE_KEYWORDS.get(word)
        if ptype is not None:
            self.ptype = ptype
            return K_PRIMITIVE
        if word == "nan":
            if nxt == "(":
                return self._nan_payload()
            return K_DECIMAL
        if word in _KEYWORDS:
            return K_KEYWORD
        dm = _DIMLABELS_RE.match(text, pos)
        if dm is not None:
            self.pos = dm.end()
            return K_DIMLABELS
        self.ident = word
        return K_IDENT


# ---------------------------------------------------------------------------
class _Fatal(Exception):
    """An input on which XLA aborts the process; reported as HloParseError."""

    def __init__(self, message: str, position: int):
        super().__init__(message)
        self.message = message
        self.position = position


def _default_layout(rank: int) -> Layout:
    """``{rank-1,...,1,0}``, the layout XLA's parser fills in (one shared
    object per rank, the same the fast path uses)."""
    return _textscan.default_layout(rank)


def _kind_name(lx: _Lexer) -> str:
    if lx.kind == K_KEYWORD:
        return "kw_" + lx.text[lx.start:lx.end]
    return _KIND_NAMES[lx.kind]


def _a(word: str) -> str:
    return ("an " if word[0] in "aeiou" else "a ") + word


def _describe(lx: _Lexer) -> str:
    if lx.kind == K_EOF:
        return "end of input"
    tok = lx.text[lx.start:max(lx.end, lx.start + 1)]
    if len(tok) > 24:
        tok = tok[:21] + "..."
    return repr(tok)


_INVALID = Shape(P.PRIMITIVE_TYPE_INVALID)


def _validate_layouts(shape: Shape) -> None:
    validate_layout_in_shape(shape, allow_missing_layouts=True)


# ---------------------------------------------------------------------------
# The fast path (xlashape/_textscan.pyx, compiled): the overwhelmingly common
# plain array shape ``type[dims]{m2m:T(..)..L(n)E(n)S(n)}`` (and tuples of
# them, as XLA prints them) is recognised and built in C. It accepts only text
# on which the full parser certainly builds the same value without recording
# an error; anything else, including every error, returns None and the full
# parser runs, so messages and positions come from one place only.

# The tests switch the fast path off to obtain the full parser's answers.
_USE_FAST_PATH = True


def _fast_shape(text: str) -> Optional[Shape]:
    """parse_shape's fast path: the whole of ``text`` is one plain array
    shape, or a tuple of them; None otherwise (the full parser decides)."""
    if not _USE_FAST_PATH or type(text) is not str:
        return None
    return _textscan.fast_shape(text)


class _Parser:
    """A mirror of XLA's HloParserImpl restricted to shapes and layouts.

    Every ``_parse_*`` method returns a success flag the way XLA's do, and
    records messages in ``errors`` the way XLA's ``Error``/``TokenError`` do.
    Where XLA ignores a sub-parser's failure (inside layouts), so does this.
    """

    __slots__ = ("lx", "errors", "depth")

    def __init__(self, text: str, pos: int = 0):
        self.lx = _Lexer(text, pos)
        self.errors: List[Tuple[str, int]] = []
        self.depth = 0

    # -- error helpers -----------------------------------------------------
    def _error(self, pos: int, message: str) -> bool:
        self.errors.append((message, pos))
        return False

    def _token_error(self, message: str) -> bool:
        lx = self.lx
        hint = f" (got {_describe(lx)})"
        if lx.kind == K_IDENT and lx.ident is not None:
            lower = lx.ident.lower()
            if lower in _TYPE_NAMES_LOWER:
                hint = (f" (got {lx.ident!r}; element type names are lowercase: "
                        f"{_TYPE_NAMES_LOWER[lower]!r})")
        return self._error(lx.start, message + hint)

    def _expect(self, kind: int, message: str) -> bool:
        if self.lx.kind != kind:
            return self._token_error(message)
        self.lx.lex()
        return True

    def _eat(self, kind: int) -> bool:
        if self.lx.kind != kind:
            return False
        self.lx.lex()
        return True

    def _int(self) -> Optional[int]:
        lx = self.lx
        if lx.kind != K_INT:
            self._token_error("expects integer")
            return None
        value = lx.int_val
        lx.lex()
        return value

    def _list(self, start: int, end: int, item) -> bool:
        """XLA's ParseList(start, end, kComma, item)."""
        if not self._expect(start, "expects a list starting with " + _KIND_NAMES[start]):
            return False
        if self.lx.kind != end:
            while True:
                if not item():
                    return False
                if not self._eat(K_COMMA):
                    break
        return self._expect(end, "expects a list to end with " + _KIND_NAMES[end])

    # -- shapes ------------------------------------------------------------
    def parse_shape(self) -> Tuple[bool, Shape]:
        """``ParseShape``: (ok, shape). On failure the shape is whatever XLA
        would have built so far (it matters only inside ``P(...)``)."""
        lx = self.lx
        self.depth += 1
        try:
            if self.depth > MAX_NESTING_DEPTH:
                return self._error(lx.start, "maximum recursion depth exceeded (shapes nested "
                                   f"more than {MAX_NESTING_DEPTH} deep)"), _INVALID
            if lx.kind == K_IDENT and lx.ident == "b" and lx.look_ahead() == K_LPAREN:
                return self._parse_buffer()
            if lx.kind == K_LPAREN:
                return self._parse_tuple()
            return self._parse_array()
        finally:
            self.depth -= 1

    def _parse_buffer(self) -> Tuple[bool, Shape]:
        lx = self.lx
        lx.lex()
        lx.lex()
        inner_start = lx.start
        ok, inner = self.parse_shape()
        if not ok:
            return False, _INVALID
        if not inner.is_array:
            return self._error(
                inner_start,
                f"a buffer shape b(...) must wrap an array shape, got {inner.human_string()}"
            ), _INVALID
        result = Shape.buffer(inner)
        return self._expect(K_RPAREN, "expects ')' at the end of buffer shape."), result

    def _parse_tuple(self) -> Tuple[bool, Shape]:
        lx = self.lx
        lx.lex()
        shapes = []
        starts = []
        if lx.kind != K_RPAREN:
            while True:
                starts.append(lx.start)
                ok, sub = self.parse_shape()
                if not ok:
                    return False, _INVALID
                shapes.append(sub)
                if not self._eat(K_COMMA):
                    break
        # XLA validates each element as it builds the tuple
        # (ValidateShapeWithOptionalLayout): the non-layout checks of every
        # element first, then their layouts.
        for check in (validate_non_layout, _validate_layouts):
            for i, sub in enumerate(shapes):
                try:
                    check(sub)
                except InvalidShapeError as e:
                    return self._error(
                        starts[i], f"tuple element {i} is not a valid shape: {e}"), _INVALID
        result = Shape.tuple(shapes)
        return self._expect(K_RPAREN, "expects ')' at the end of tuple."), result

    def _parse_array(self) -> Tuple[bool, Shape]:
        lx = self.lx
        if lx.kind != K_PRIMITIVE:
            return self._token_error("expected primitive type, saw " + _kind_name(lx)), _INVALID
        ptype = lx.ptype
        # Fast path (tuple elements, text after leading whitespace): a plain
        # array shape right after the type token, built in C. Without a
        # layout, it applies only when the next character cannot lead to one.
        if _USE_FAST_PATH and type(lx.text) is str:
            found = _textscan.fast_array_rest(lx.text, lx.end, ptype)
            if found is not None:
                shape, end = found
                lx.pos = lx.end = end
                lx.lex()
                return True, shape
        lx.lex()

        dims: List[int] = []
        dyn: List[bool] = []
        dim_pos: List[int] = []

        def item() -> bool:
            dim_pos.append(lx.start)
            if lx.kind == K_QUESTION:
                lx.lex()
                dims.append(UNBOUNDED_SIZE)
                dyn.append(True)
                return True
            is_dynamic = False
            if lx.kind == K_LEQ:
                is_dynamic = True
                lx.lex()
            value = self._int()
            if value is None:
                return False
            dims.append(value)
            dyn.append(is_dynamic)
            return True

        if not self._list(K_LSQUARE, K_RSQUARE, item):
            return False, _INVALID
        is_array = ptype.is_array_type
        for i, (d, is_dynamic) in enumerate(zip(dims, dyn)):
            if not (d >= 0 or (is_dynamic and d == INT64_MIN)):
                # XLA fails here without a message; this is MakeShape's wording.
                self._error(dim_pos[i], f"Invalid dimension size {d}, is_dynamic="
                            f"{'true' if is_dynamic else 'false'}")
                if is_array:
                    return False, Shape(ptype, dims[:i], None, dyn[:i])
                return False, Shape(ptype)
            if not is_array:
                raise _Fatal(f"{_a(ptype.hlo_name)} shape has no dimensions; write "
                             f"{ptype.hlo_name}[]", dim_pos[i])
        n = len(dims)

        def partial() -> Shape:
            # What XLA's result holds when the layout part fails: the default layout.
            return Shape(ptype, dims, _default_layout(n), dyn) if is_array else Shape(ptype)

        if lx.kind == K_LBRACE and lx.look_ahead() in (K_INT, K_COLON):
            layout_pos = lx.start
            ok, layout = self.parse_layout()
            if not ok:
                return False, partial()
            if not is_array:
                raise _Fatal(f"{_a(ptype.hlo_name)} shape cannot have a layout", layout_pos)
            if len(layout.minor_to_major) != n:
                return self._error(
                    lx.start, f"Dimensions size is {n}, but minor to major size "
                    f"is {len(layout.minor_to_major)}."), partial()
            if layout.physical_shape is not None:
                return self._error(
                    lx.start, "Layout has physical shape, but is not for a sparse array: "
                    f"{layout}"), partial()
            return True, Shape(ptype, dims, layout, dyn)
        return True, partial()

    # -- layouts -----------------------------------------------------------
    def parse_layout(self) -> Tuple[bool, Optional[Layout]]:
        """``ParseLayout``. Errors recorded by attribute parsers that XLA
        ignores are dropped again when the layout as a whole succeeds."""
        n_errors = len(self.errors)
        ok, layout = self._parse_layout()
        if ok:
            del self.errors[n_errors:]
        return ok, layout

    def _ident_is(self, word: str) -> bool:
        lx = self.lx
        return lx.kind == K_IDENT and lx.ident == word

    def _parse_layout(self) -> Tuple[bool, Optional[Layout]]:  # noqa: C901
        lx = self.lx
        m2m: List[int] = []
        tiles: List[List[int]] = []
        tile_pos: List[List[int]] = []
        tail_padding = [1, -1]  # value, position
        index_type = P.PRIMITIVE_TYPE_INVALID
        pointer_type = P.PRIMITIVE_TYPE_INVALID
        element_bits = [0, -1]
        memory_space = [0, -1]
        splits: List[Tuple[int, List[int]]] = []
        physical = None
        metadata = [0, -1]

        if not self._expect(K_LBRACE, "expects layout to start with kLbrace"):
            return False, None
        if lx.kind != K_RBRACE:
            if lx.kind == K_INT:
                while True:
                    value = self._int()
                    if value is None:
                        return False, None
                    m2m.append(value)
                    if not self._eat(K_COMMA):
                        break
            if lx.kind == K_COLON:
                lx.lex()
                if self._ident_is("D"):
                    lx.lex()
                    self._parse_dim_level_types()
                if self._ident_is("T"):
                    lx.lex()
                    self._parse_tiles(tiles, tile_pos)
                if self._ident_is("L"):
                    lx.lex()
                    self._int_attribute(tail_padding, "multiple padded to in elements")
                if lx.kind == K_OCTOTHORP:
                    lx.lex()
                    index_type = self._parse_index_type(index_type, "#", "index")
                if lx.kind == K_ASTERISK:
                    lx.lex()
                    pointer_type = self._parse_index_type(pointer_type, "*", "pointer")
                if self._ident_is("E"):
                    lx.lex()
                    self._int_attribute(element_bits, "element size in bits")
                if self._ident_is("S"):
                    lx.lex()
                    self._int_attribute(memory_space, "memory space")
                if self._ident_is("SC"):
                    lx.lex()
                    self._parse_split_configs(splits)
                if self._ident_is("P"):
                    lx.lex()
                    physical = self._parse_physical_shape()
                if self._ident_is("M"):
                    lx.lex()
                    self._int_attribute(metadata, "dynamic shape metadata prefix bytes")
        if not self._expect(K_RBRACE, "expects layout to end with kRbrace"):
            return False, None

        # LayoutUtil::MakeLayout aborts on these two; we refuse them instead.
        for t, positions in zip(tiles, tile_pos):
            for d, p in zip(t, positions):
                if d < 0 and d != COMBINE_DIMENSION:
                    raise _Fatal(f"tile dimension {d} is negative; a tile entry must be "
                                 ">= 0 or '*'", p)
        if tail_padding[0] < 1:
            raise _Fatal("tail padding alignment L(n) must be >= 1, got "
                         f"{tail_padding[0]}", tail_padding[1])
        space = memory_space[0]
        space = ((space + 128) & 0xFF) - 128  # XLA keeps memory_space in an int8
        try:
            layout = Layout(
                m2m,
                tiles=[Tile(*t) for t in tiles],
                tail_padding_alignment_in_elements=tail_padding[0],
                index_primitive_type=index_type,
                pointer_primitive_type=pointer_type,
                element_size_in_bits=element_bits[0],
                memory_space=space,
                split_configs=[SplitConfig(d, idx) for d, idx in splits],
                physical_shape=physical,
                dynamic_shape_metadata_prefix_bytes=metadata[0],
            )
        except XlaShapeError as e:  # pragma: no cover - every field is checked above
            raise _Fatal(str(e), lx.prev_end) from None
        return True, layout

    def _parse_dim_level_types(self) -> bool:
        lx = self.lx

        def item() -> bool:
            if lx.kind == K_IDENT and lx.ident in ("D", "C", "S", "H"):
                lx.lex()
                if lx.kind == K_PLUS:
                    lx.lex()
                if lx.kind == K_TILDE:
                    lx.lex()
                return True
            return self._error(lx.start, "expected a DimLevelType abbreviation (D, C, or S)")

        return self._list(K_LPAREN, K_RPAREN, item)

    def _parse_tiles(self, tiles: list, tile_pos: list) -> bool:
        lx = self.lx
        while True:
            current: List[int] = []
            positions: List[int] = []
            tiles.append(current)
            tile_pos.append(positions)

            def item() -> bool:
                pos = lx.start
                value = self._int()
                if value is not None:
                    current.append(value)
                    positions.append(pos)
                    return True
                if lx.kind == K_ASTERISK:
                    current.append(COMBINE_DIMENSION)
                    positions.append(pos)
                    lx.lex()
                    return True
                return False

            if not self._list(K_LPAREN, K_RPAREN, item):
                return False
            if lx.kind != K_LPAREN:
                return True

    def _int_attribute(self, slot: list, description: str) -> bool:
        if not self._expect(K_LPAREN, f"expects {description} to start with kLparen"):
            return False
        pos = self.lx.start
        value = self._int()
        if value is None:
            return False
        slot[0] = value
        slot[1] = pos
        return self._expect(K_RPAREN, f"expects {description} to end with kRparen")

    def _parse_index_type(self, current: PrimitiveType, symbol: str, what: str) -> PrimitiveType:
        lx = self.lx
        kind_name = "kOctothorp" if symbol == "#" else "kAsterisk"
        self._expect(K_LPAREN, f"expects {kind_name} to be followed by kLparen")
        if lx.kind != K_PRIMITIVE:
            self._token_error("expected primitive type, saw " + _kind_name(lx))
        else:
            current = lx.ptype
            lx.lex()
            if not current.is_unsigned_integral:
                self._token_error("expecting an unsigned integer type")
        self._expect(K_RPAREN, f"expects {what} primitive type to be followed by kRparen")
        return current

    def _parse_split_configs(self, splits: list) -> bool:
        lx = self.lx
        while True:
            if not self._expect(K_LPAREN, "expects split configs to start with kLparen"):
                return False
            dimension = self._int()
            if dimension is None:
                return False
            indices: List[int] = []
            splits.append((dimension, indices))

            def item() -> bool:
                value = self._int()
                if value is None:
                    return False
                indices.append(value)
                return True

            if not self._list(K_COLON, K_RPAREN, item):
                return False
            if lx.kind != K_LPAREN:
                return True

    def _parse_physical_shape(self) -> Shape:
        # The physical shape exists as soon as 'P' is seen, even if what
        # follows is malformed (XLA emplaces it first).
        if not self._expect(K_LPAREN, "expects physical shape to start with kLparen"):
            return _INVALID
        # A physical shape costs several Python frames per level, so it counts
        # as _PHYSICAL_SHAPE_DEPTH levels against MAX_NESTING_DEPTH.
        self.depth += _PHYSICAL_SHAPE_DEPTH - 1
        try:
            _, shape = self.parse_shape()  # XLA ignores the result here
        finally:
            self.depth -= _PHYSICAL_SHAPE_DEPTH - 1
        self._expect(K_RPAREN, "expects physical shape to end with kRparen")
        return shape


# ---------------------------------------------------------------------------
# Public entry points.

def _check_text(text, fn: str) -> None:
    if not isinstance(text, str):
        raise ShapeTypeError(f"{fn}() expects the HLO text as a str, got {type(text).__name__}")


def _raise(parser: _Parser, text: str, fallback: str):
    errors = parser.errors
    if errors:
        message, pos = errors[0]
    else:  # pragma: no cover - every failure path records a message
        message, pos = fallback, parser.lx.start
    err = HloParseError(message, text, pos)
    err.errors = list(errors)
    raise err


def _run(text: str, pos: int, what: str):
    parser = _Parser(text, pos)
    parser.lx.lex()
    try:
        if what == "layout":
            ok, value = parser.parse_layout()
        else:
            ok, value = parser.parse_shape()
    except _Fatal as e:
        err = HloParseError(e.message, text, e.position)
        err.errors = [(e.message, e.position)]
        raise err from None
    except RecursionError:
        err = HloParseError("nesting too deep for the Python stack", text, parser.lx.start)
        err.errors = []
        raise err from None
    if not ok:
        _raise(parser, text, f"invalid {what}")
    return parser, value


@functools.lru_cache(maxsize=8192)
def _parse_shape_cached(text: str) -> Shape:
    shape = _fast_shape(text)
    if shape is not None:
        return shape
    parser, shape = _run(text, 0, "shape")
    lx = parser.lx
    if lx.kind != K_EOF:
        err = HloParseError("Extra content after shape", text, lx.start)
        err.errors = [("Extra content after shape", lx.start)]
        raise err
    return shape


def parse_shape(text: str) -> Shape:
    """Parse XLA's text for a shape (``xla::ParseShape``).

    The whole string must be one shape (whitespace and comments around it
    are fine). Arrays written without a layout get the default layout, as
    XLA's parser does. Results are cached by text (shapes are immutable).

    >>> parse_shape("f32[2,3]")
    Shape('f32[2,3]{1,0}')
    >>> parse_shape("bf16[8,1,1280,16384]{3,2,0,1:T(8,128)(2,1)}").layout.major_to_minor
    (1, 0, 2, 3)

    Raises :class:`~xlashape.HloParseError` for text XLA's parser rejects
    (and for the few inputs on which XLA aborts), and
    :class:`~xlashape.ShapeTypeError` if ``text`` is not a ``str``.
    """
    _check_text(text, "parse_shape")
    return _parse_shape_cached(text)


def parse_shape_prefix(text: str, pos: int = 0) -> Tuple[Shape, int]:
    """Parse one shape that starts at ``pos`` in a longer text.

    Returns ``(shape, end)`` where ``end`` is the offset just past the
    shape's last character (text after it is not examined beyond the one
    token XLA looks at to decide whether a ``{`` opens a layout). This is
    how an HLO module reader pulls result shapes out of instruction lines.
    Error positions are offsets into the whole ``text``. A ``pos`` outside
    the text raises :class:`~xlashape.ShapeIndexError`.

    >>> line = "%fusion.3 = bf16[32,32,4096]{2,1,0:T(8,128)(2,1)S(1)} fusion(%p0)"
    >>> shape, end = parse_shape_prefix(line, 12)
    >>> str(shape), line[end:]
    ('bf16[32,32,4096]{2,1,0:T(8,128)(2,1)S(1)}', ' fusion(%p0)')
    """
    _check_text(text, "parse_shape_prefix")
    if isinstance(pos, bool) or not isinstance(pos, int):
        raise ShapeTypeError(f"pos must be an int, got {type(pos).__name__}")
    if not 0 <= pos <= len(text):
        raise ShapeIndexError(f"start position {pos} is out of bounds for a text of length "
                              f"{len(text)}")
    m = _SIMPLE_SHAPE_RE.match(text, pos)
    if m is not None:
        # Fast path: a plain array shape (the usual instruction result) is
        # looked up in parse_shape's cache. It applies only when the text
        # after it cannot continue the shape (no layout may follow).
        end = m.end()
        if m.group(1) is not None or _cannot_start_layout(text, end):
            try:
                return _parse_shape_cached(m.group()), end
            except HloParseError:
                pass  # report the error with positions in the whole text
    elif text.startswith("(", pos) or text.startswith("b(", pos):
        # Tuples and buffers end at their matching ')'. If the text up to it
        # parses on its own, the in-context parse sees the same tokens and
        # ends at the same place, so parse_shape's cache can answer.
        end = _matching_paren(text, pos)
        if end is not None:
            try:
                return _parse_shape_cached(text[pos:end]), end
            except HloParseError:
                pass
    parser, shape = _run(text, pos, "shape")
    return shape, parser.lx.prev_end


def _matching_paren(text: str, pos: int) -> Optional[int]:
    depth = 0
    for m in _PAREN_RE.finditer(text, pos):
        c = m.group()
        if c == "(":
            depth += 1
        elif c == ")":
            depth -= 1
            if depth == 0:
                return m.end()
        else:  # a quote or a line break: leave it to the full parser
            return None
    return None


def _cannot_start_layout(text: str, end: int) -> bool:
    i = _SPACES_RE.match(text, end).end()
    return i >= len(text) or text[i] not in "{/"




@functools.lru_cache(maxsize=4096)
def _parse_layout_cached(text: str) -> Layout:
    parser, layout = _run(text, 0, "layout")
    lx = parser.lx
    if lx.kind != K_EOF:
        err = HloParseError("Extra content after layout", text, lx.start)
        err.errors = [("Extra content after layout", lx.start)]
        raise err
    return layout


def parse_layout(text: str) -> Layout:
    """Parse XLA's text for a layout (``xla::ParseLayout``), e.g. ``{1,0:T(8,128)}``.

    ``{}`` is the empty layout. Attributes must come in XLA's order
    (``D T L # * E S SC P M``).

    >>> lay = parse_layout("{3,2,1,0:T(42,123)(4,5)L(100)E(42)}")
    >>> lay.tail_padding_alignment_in_elements, lay.element_size_in_bits
    (100, 42)
    """
    _check_text(text, "parse_layout")
    return _parse_layout_cached(text)
