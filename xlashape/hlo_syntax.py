"""The lexical rules of HLO statement text, shared by the reader
(:mod:`xlashape.hlo_reader`) and the instructions it makes
(:mod:`xlashape.hlo_model`): where a bracket closes, quoted strings and
comments (``/* */``, ``//``), commas at the top level, where an attribute
``key=`` starts, and the shape that starts at a position of a line (parsed
once and cached).

Every function here looks at each character a bounded number of times
(``str.find`` and C-level regular expressions), whatever the line: a line
of a gigabyte, a string that never closes or a long run of brackets costs
linear time (``tests/test_reader_long_runs.py``).

>>> _split_top('a, f(b, c), "d,e"')
['a', ' f(b, c)', ' "d,e"']
>>> _match_close('(a, ")", (b)) rest', 0)
13
"""

from __future__ import annotations

import re
from typing import Dict, List, Tuple

from . import hlo_text
from .errors import HloParseError
from .shape import Shape

# An array shape whose layout (if any) has no nested braces: safe to use as a
# cache key without running the parser. Anything else goes to the parser.
_ARRAY_SHAPE = re.compile(
    r"[a-z][a-z0-9]*\[[0-9,<=? ]*\](?:\{(?=[\s0-9:])[^{}\"/]*\})?")
# blanks and comments, then a layout's "{": the blanks matched as runs, the
# comments possessively (a group repeated per blank holds backtracking state
# per character: 8 MB of blanks after a shape took 1.1 GB); a comment ends at
# its first "*/", as XLA's lexer ends it
_LAYOUT_FOLLOWS = re.compile(r"\s*(?:/\*.*?\*/\s*)*" + hlo_text.POSSESSIVE + r"\{\s*[0-9:]", re.S)
_SIG = re.compile(r"[()\[\]{}\"]|/\*")
_SIG_COMMA = re.compile(r"[()\[\]{},\"]|/\*")
_STRING = re.compile(hlo_text.DQ_STRING, re.S)
_COMMENT = re.compile(r"/\*.*?\*/", re.S)
_QUOTE_OR_COMMENT = re.compile(r'"|/\*')

#: parsed shapes a cache keeps at most (then it starts again)
_SHAPE_CACHE_LIMIT = 1 << 16


class _Brackets:
    """What :func:`_balanced` decides about a text, kept up to date as the text
    grows piece by piece (an instruction over many lines would otherwise be
    looked at whole again at every line: quadratic). Counts of each bracket
    in all of the text and outside its complete quoted strings, and whether
    a string is open at the end (with the parity of the backslashes before
    the end inside it)."""

    __slots__ = ("raw", "outside", "in_string", "backslash")

    def __init__(self, text: str = ""):
        self.raw = [0] * 6
        self.outside = [0] * 6
        self.in_string = False
        self.backslash = False
        if text:
            self.feed(text)

    @staticmethod
    def _add(counts, text):
        c = text.count
        for k, b in enumerate("{}()[]"):
            counts[k] += c(b)

    def feed(self, text: str) -> None:
        """Append ``text``."""
        self._add(self.raw, text)
        i = 0
        n = len(text)
        find = text.find
        while i < n:
            if not self.in_string:
                q = find('"', i)
                self._add(self.outside, text[i:] if q < 0 else text[i:q])
                if q < 0:
                    return
                self.in_string = True
                self.backslash = False
                i = q + 1
                continue
            k = find('"', i)
            end = n if k < 0 else k
            b = end
            while b > i and text[b - 1] == "\\":
                b -= 1
            run = end - b + (self.backslash if b == i else 0)
            if k < 0:
                self.backslash = run % 2 == 1
                return
            # the quote closes the string unless an odd run of backslashes escapes it
            self.in_string = run % 2 == 1
            self.backslash = False
            i = k + 1

    def balanced(self) -> bool:
        """:func:`_balanced` of the text fed so far."""
        if self.in_string:
            return False
        r, o = self.raw, self.outside
        return ((r[0] == r[1] and r[2] == r[3] and r[4] == r[5])
                or (o[0] == o[1] and o[2] == o[3] and o[4] == o[5]))


_CLOSER = {"(": ")", "[": "]", "{": "}"}


def _match_close(text: str, pos: int) -> int:
    """Index just past the bracket matching ``text[pos]``; -1 if text ends first.

    Quoted strings and ``/* */`` comments are skipped; bracket kinds are only
    counted, not matched, which is enough for well-formed XLA output and never
    loops or recurses on bad input.
    """
    # Fast path, all in C: try each closer of the same kind in turn until the
    # brackets of that kind balance, provided no quote (which could hide a
    # bracket) lies in between. Operand lists and tuple shapes end up here.
    opener = text[pos:pos + 1]
    closer = _CLOSER.get(opener)
    if closer is not None:
        find, count = text.find, text.count
        j = find(closer, pos + 1)
        opens = closes = 0
        start = pos
        while j >= 0:
            opens += count(opener, start, j)
            closes += 1
            if opens == closes:
                if find('"', pos, j) < 0:
                    return j + 1
                break
            start = j
            j = find(closer, j + 1)
        else:
            if find('"', pos) < 0:
                return -1
    return _match_close_slow(text, pos)


def _match_close_slow(text: str, pos: int) -> int:
    depth = 0
    search = _SIG.search
    i = pos
    while True:
        m = search(text, i)
        if m is None:
            return -1
        c = m.group()
        j = m.start()
        if c == '"':
            s = _STRING.match(text, j)
            if s is None:
                return -1
            i = s.end()
            continue
        if c == "/*":
            k = text.find("*/", j + 2)
            if k < 0:
                return -1
            i = k + 2
            continue
        if c in "([{":
            depth += 1
        else:
            depth -= 1
            if depth <= 0:
                return j + 1
        i = j + 1


def _split_top(text: str) -> List[str]:
    """Split at commas outside brackets, strings and comments."""
    if not text:
        return []
    parts = []
    depth = 0
    start = 0
    i = 0
    search = _SIG_COMMA.search
    while True:
        m = search(text, i)
        if m is None:
            break
        c = m.group()
        j = m.start()
        if c == '"':
            s = _STRING.match(text, j)
            i = len(text) if s is None else s.end()
            continue
        if c == "/*":
            k = text.find("*/", j + 2)
            i = len(text) if k < 0 else k + 2
            continue
        if c == ",":
            if depth == 0:
                parts.append(text[start:j])
                start = j + 1
        elif c in "([{":
            depth += 1
        else:
            depth -= 1
        i = j + 1
    parts.append(text[start:])
    return parts


def _strip_line_comment(line: str) -> str:
    """Drop a ``//`` comment that is outside quoted strings."""
    i = 0
    while True:
        j = line.find("//", i)
        if j < 0:
            return line
        q = line.find('"', i, j)
        if q < 0:
            return line[:j]
        s = _STRING.match(line, q)
        if s is None:
            return line
        i = s.end()


def _blank_comments(line: str, in_comment: bool) -> Tuple[str, bool]:
    """``line`` with every ``/* ... */`` comment (outside quoted strings)
    replaced by spaces, so columns stay where they were. ``in_comment``: the
    line starts inside a comment opened on an earlier line. Returns the new
    line and whether a comment is still open at its end."""
    out = []
    i = 0
    n = len(line)
    if in_comment:
        j = line.find("*/")
        if j < 0:
            return " " * n, True
        out.append(" " * (j + 2))
        i = j + 2
    while i < n:
        m = _QUOTE_OR_COMMENT.search(line, i)
        if m is None:
            out.append(line[i:])
            break
        j = m.start()
        if m.group() == '"':
            sm = _STRING.match(line, j)
            end = n if sm is None else sm.end()
            out.append(line[i:end])
            i = end
            continue
        out.append(line[i:j])
        k = line.find("*/", j + 2)
        if k < 0:
            out.append(" " * (n - j))
            return "".join(out), True
        out.append(" " * (k + 2 - j))
        i = k + 2
    return "".join(out), False


def _unquote(value: str) -> str:
    # XLA writes quoted metadata through absl::CEscape (octal escapes too)
    if len(value) >= 2 and value[0] == '"' and value[-1] == '"':
        return hlo_text.unescape_string(value[1:-1])
    return value


def _attr_matches(text: str, key: str):
    """Where ``key=`` starts an attribute in ``text``: ``(start, value start)``
    for each match of ``(?:^|,)\\s*KEY\\s*=\\s*`` (start: the comma, or 0), in
    order. Found with str.find: a regular expression starting with ``(?:^|,)``
    tries every position of long attribute lines, which is slow."""
    n = len(text)
    k = len(key)
    pos = text.find(key)
    while pos >= 0:
        j = pos
        while j > 0 and text[j - 1].isspace():
            j -= 1
        if j == 0 or text[j - 1] == ",":
            e = pos + k
            while e < n and text[e].isspace():
                e += 1
            if e < n and text[e] == "=":
                e += 1
                while e < n and text[e].isspace():
                    e += 1
                yield (j - 1 if j > 0 else 0), e
                pos = text.find(key, e)
                continue
        pos = text.find(key, pos + 1)


def _string_end(text: str, q: int) -> int:
    """Where the quoted string that opens at ``text[q]`` ends (the index past
    its closing quote), or -1 if it never closes: what ``_STRING.match(text,
    q)`` finds, by ``str.find`` and the parity of the backslashes before each
    later quote (each character is looked at once)."""
    j = q + 1
    find = text.find
    while True:
        k = find('"', j)
        if k < 0:
            return -1
        b = k
        while b > q + 1 and text[b - 1] == "\\":
            b -= 1
        if (k - b) % 2 == 0:
            return k + 1
        j = k + 1


def _without_strings(text: str) -> str:
    """``text`` without its complete quoted strings, as ``_STRING.sub("",
    text)`` gives it, in one pass. (The regular expression retries at every
    later quote once a string does not close, which is quadratic in a long
    line; but a string that never closes has every later quote escaped inside
    it, so none of them opens one either: the rest is kept as it is.)"""
    out = []
    i = 0
    find = text.find
    while True:
        q = find('"', i)
        end = -1 if q < 0 else _string_end(text, q)
        if end < 0:
            out.append(text[i:])
            return "".join(out)
        out.append(text[i:q])
        i = end


def _open_string(text: str) -> bool:
    """True if ``text`` ends inside a quoted string. A ``"`` preceded by an odd
    number of backslashes is escaped and does not open or close a string."""
    if '"' not in text:
        return False
    if "\\" not in text:
        return text.count('"') % 2 == 1
    return '"' in _without_strings(text)


def _balanced(text: str) -> bool:
    """True if every bracket opened in ``text`` (outside strings) is closed."""
    c = text.count
    if c("{") == c("}") and c("(") == c(")") and c("[") == c("]"):
        # Counts that agree are taken as balanced without looking at strings:
        # only a string hiding a bracket that exactly cancels an unclosed one
        # could fool this, and then the next line is reported, not lost.
        return not _open_string(text)
    if '"' in text:
        text = _without_strings(text)
        if '"' in text:
            return False  # an unterminated string
    return (text.count("{") == text.count("}") and text.count("(") == text.count(")")
            and text.count("[") == text.count("]"))


def _skip_ws(text: str, pos: int) -> int:
    while pos < len(text) and text[pos].isspace():
        pos += 1
    return pos


def _shape_at(text: str, pos: int, cache: Dict[str, Shape]) -> Tuple[Shape, int]:
    """Parse the shape starting at ``text[pos]``: ``(shape, end)``; shapes
    are looked up in, and added to, ``cache`` (text -> Shape)."""
    key = None
    end = -1
    c = text[pos:pos + 1]
    if c == "(":
        end = _match_close(text, pos)
        if end > 0:
            key = text[pos:end]
    else:
        m = _ARRAY_SHAPE.match(text, pos)
        if m is not None:
            end = m.end()
            nxt = text[end:end + 1]
            if not nxt or nxt not in "{/ \t\r\n" or not _LAYOUT_FOLLOWS.match(text, end):
                key = m.group()
    if key is not None:
        s = cache.get(key)
        if s is not None:
            return s, end
        try:
            # parse just the shape's own text: cheaper than handing the
            # parser the rest of a long line
            shape = hlo_text.parse_shape(key)
        except HloParseError:
            shape = None  # re-parse below for positions in the whole text
        if shape is not None:
            if len(cache) >= _SHAPE_CACHE_LIMIT:
                cache.clear()
            cache[key] = shape
            return shape, end
    shape, end = hlo_text.parse_shape_prefix(text, pos)
    if len(cache) >= _SHAPE_CACHE_LIMIT:
        cache.clear()
    cache[text[pos:end]] = shape
    return shape, end
