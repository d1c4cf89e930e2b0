"""Read HLO module text: dumps, hand-written modules, and TPU out-of-memory reports.

XLA writes a module as text like this (XLA's shapes and layout documentation
explains the shapes)::

    HloModule jit_f, entry_computation_layout={(bf16[8,128]{1,0})->bf16[8,128]{1,0}}

    %fused_computation (param_0: bf16[8,128]) -> bf16[8,128] {
      %param_0 = bf16[8,128]{1,0:T(8,128)(2,1)} parameter(0)
      ROOT %add.1 = bf16[8,128]{1,0:T(8,128)(2,1)} add(%param_0, %param_0)
    }

    ENTRY %main.3 (p0: bf16[8,128]) -> bf16[8,128] {
      %p0 = bf16[8,128]{1,0:T(8,128)(2,1)} parameter(0)
      ROOT %fusion = bf16[8,128]{1,0:T(8,128)(2,1)} fusion(%p0), kind=kLoop, calls=%fused_computation
    }

Each instruction is ``[ROOT] name = shape opcode(operands), attribute=value, ...``.
This module turns such text into :class:`Instruction` objects carrying real
:class:`~xlashape.Shape` objects, so sizes, padding and memory spaces can be
computed for every value in a program.

It reads line by line (:class:`HloReader`), so a dump of any size streams
through in memory bounded by its longest line (about twice that line, read
in linear time however long it is), and it is forgiving where a tool must
be: a line it cannot make sense of is reported (line number and reason) and
skipped, never fatal; the first :data:`MAX_KEPT_WARNINGS` warnings are kept
and all are counted (:class:`WarningList`). It handles what real dumps contain: nested computations and
fusions, tuples with ``/*index=N*/`` comments, tokens, attribute blocks such as
``metadata={...}`` or ``backend_config={...}`` holding braces and quoted
strings, ``//`` and ``/* */`` comments, ``ENTRY``, ``entry_computation_layout``,
the stack-frame tables newer XLA appends, and instructions written across
several lines by hand (as XLA's documentation writes them).

It also reads the text of a TPU out-of-memory error ("Ran out of memory in
memory space hbm ... Largest program allocations in hbm: 1. Size: ... Shape:
...") and yields one :class:`Instruction` per listed allocation, in the
pseudo-computation :data:`OOM_REPORT`, with the reported sizes as attributes.

>>> m = parse_hlo_module('''
... ENTRY %main {
...   %p = f32[3,5]{1,0:T(2,2)} parameter(0)
...   ROOT %n = f32[3,5]{1,0:T(2,2)} negate(f32[3,5]{1,0:T(2,2)} %p), metadata={op_name="neg"}
... }''')
>>> [(i.name, i.opcode, str(i.shape)) for i in m.instructions()]
[('p', 'parameter', 'f32[3,5]{1,0:T(2,2)}'), ('n', 'negate', 'f32[3,5]{1,0:T(2,2)}')]
>>> m.entry.root.operands[0].name, m.entry.root.metadata["op_name"]
('p', 'neg')
>>> memory_footprint(m.entry.root.shape)[:2]   # logical bytes, bytes with tile padding
(60, 96)
"""

from __future__ import annotations

import functools
import os as _os
import re
from itertools import islice
from typing import Callable, Dict, Iterable, Iterator, List, NamedTuple, Optional, Tuple

from . import hlo_text
from ._files import _not_regular, check_regular_file, open_gzip  # noqa: F401 - _not_regular: xla_dump's
from .errors import HloParseError, ShapeTypeError
from .shape import Shape
from .sizes import Footprint, memory_footprint, shape_text  # noqa: F401 - the reader's names for them

__all__ = [
    "Instruction",
    "Operand",
    "Computation",
    "HloModule",
    "HloReader",
    "HloWarning",
    "WarningList",
    "MAX_KEPT_WARNINGS",
    "Footprint",
    "EntryComputationLayout",
    "Alias",
    "BufferDonor",
    "OOM_REPORT",
    "COMPUTATION_KINDS",
    "EMBEDDED_KINDS",
    "VIEW_OPCODES",
    "RESULT_KINDS",
    "call_kind",
    "scan_calls",
    "TextBlocks",
    "EntryBlocks",
    "has_data",
    "result_kind",
    "uses_compiled_scanner",
    "parse_entry_computation_layout",
    "parse_input_output_alias",
    "parse_buffer_donor",
    "parse_hlo_module",
    "read_hlo_file",
    "open_text",
    "source_kind",
    "check_regular_file",
    "iter_instructions",
    "memory_footprint",
    "shape_text",
]

#: Name of the pseudo-computation holding the allocations listed in an
#: out-of-memory report.
OOM_REPORT = "(out-of-memory report)"

# -- lexical helpers -----------------------------------------------------------

_INSTR_START = re.compile(r"\s*(ROOT\s+)?%?([A-Za-z_][\w.\-]*)\s*=\s*")
# A line that starts a new instruction: a name, '=', then something that can
# begin a shape (or nothing yet). Attribute lines of a multi-line instruction
# ("kind=kLoop, calls=...") never look like this.
_LOOKS_LIKE_INSTR = re.compile(
    r"\s*(?:ROOT\s+)?%?[A-Za-z_][\w.\-]*\s*=\s*(?:\(|b\(|[a-z][a-z0-9]*\[|$)")
# The common case in one C-level match: name, a plain array shape, opcode, '('.
_FAST_INSTR = re.compile(
    r"\s*(ROOT\s+)?%?([A-Za-z_][\w.\-]*)\s*=\s*"
    r"([a-z][a-z0-9]*\[[0-9,<=? ]*\](?:\{(?=[\s0-9:])[^{}\"/]*\})?)"
    r"\s+([a-z][a-z0-9_\-]*)\(")
# a computation header, "[ENTRY] %name (params) -> result {", matched by
# _match_header once the caller has seen the trailing "{" (a "{" in the
# pattern after a lazy group backtracked quadratically over a long run of
# spaces: minutes for a 270 KB header, found by the fuzz harness)
_HEADER = re.compile(r"\s*(ENTRY\s+)?%?([A-Za-z_][\w.\-]*)\s*(.*)", re.S)


def _match_header(s: str):
    """``_HEADER``'s match of a stripped line that ends with ``{``."""
    return _HEADER.match(s[:-1].rstrip())
# the name, then the rest of the line (_module_rest strips it: no \s* around
# an optional comma and no lazy group before a final \s*$, which backtrack
# quadratically over a long run of spaces)
_MODULE = re.compile(r"\s*HloModule\s+%?([^\s,]+)(.*)$", re.S)


def _module_rest(m) -> str:
    """The attributes text of a _MODULE match: what follows the name,
    without the blanks around it and one leading comma."""
    rest = m.group(2).strip()
    if rest.startswith(","):
        rest = rest[1:].lstrip()
    return rest
_OPCODE = re.compile(r"\s*([a-z][a-z0-9_\-]*)\s*\(")
# An array shape whose layout (if any) has no nested braces: safe to use as a
# cache key without running the parser. Anything else goes to the parser.
_ARRAY_SHAPE = re.compile(
    r"[a-z][a-z0-9]*\[[0-9,<=? ]*\](?:\{(?=[\s0-9:])[^{}\"/]*\})?")
_LAYOUT_FOLLOWS = re.compile(r"(?:\s|/\*.*?\*/)*\{\s*[0-9:]", re.S)
_SIG = re.compile(r"[()\[\]{}\"]|/\*")
_SIG_COMMA = re.compile(r"[()\[\]{},\"]|/\*")
_STRING = re.compile(r'"(?:[^"\\]|\\.)*"', re.S)
_COMMENT = re.compile(r"/\*.*?\*/", re.S)
_META_ITEM = re.compile(r'([A-Za-z_]\w*)=("(?:[^"\\]|\\.)*"|[^\s}]+)')
_CALL_KEYS = ("calls", "to_apply", "body", "condition", "branch_computations", "true_computation",
              "false_computation", "called_computations", "select", "scatter")
# The attributes that can name computations, per opcode (others: all of them).
_CALL_KEYS_BY_OPCODE = {
    "fusion": ("calls",), "while": ("condition", "body"), "call": ("to_apply",),
    "conditional": ("branch_computations", "true_computation", "false_computation"),
    "reduce": ("to_apply",), "reduce-window": ("to_apply",), "map": ("to_apply",),
    "sort": ("to_apply",), "scatter": ("to_apply",), "all-reduce": ("to_apply",),
    "all-reduce-start": ("to_apply",), "reduce-scatter": ("to_apply",),
    "select-and-scatter": ("select", "scatter"), "topk": ("to_apply",),
}
# A list of computations is "{a, b}": a "{" value holding another "{" or an
# "=" names none (and would make the names read grow with the square of a
# garbage line's length).
_CALL_VALUE = re.compile(r"\{[^{}=]*\}|%?[\w.\-]+")
_NAME_REF = re.compile(r"%?([A-Za-z_][\w.\-]*)")
_STACK_SECTIONS = frozenset(("FileNames", "FunctionNames", "FileLocations", "StackFrames"))
# An entry of a stack-frame section: a number, then a quoted name or a {...} record.
_SECTION_ENTRY = re.compile(r"\s*\d+\s+[\"{]")
# A comment other than the /*index=N*/ XLA prints inside long tuples.
_OTHER_COMMENT = re.compile(r"/\*(?!index=\d+\*/)")
_QUOTE_OR_COMMENT = re.compile(r'"|/\*')
_WS_RUN = re.compile(r"\s*")

# Out-of-memory report lines (TPU "Largest program allocations" listing).

_CHUNK_LINES = 4096
_MAX_STATEMENT_LINES = 2000
_MAX_STATEMENT_CHARS = 1 << 24
_SHAPE_CACHE_LIMIT = 1 << 16


class _Incomplete(Exception):
    """The statement needs more lines. ``attributes``: where the attributes
    start, when it is they that continue (their brackets do not balance yet,
    or they end with a comma); ``operands``: the operand list does not close."""

    def __init__(self, attributes: Optional[int] = None, operands: bool = False):
        super().__init__()
        self.attributes = attributes
        self.operands = operands


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


class _Malformed(Exception):
    def __init__(self, message: str, position: int = 0):
        super().__init__(message)
        self.message = message
        self.position = position


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


# -- how computations are used --------------------------------------------------

#: Computation kinds: how the instructions that call a computation use it.
#: ``entry`` (the ENTRY computation), ``fusion`` (a fusion body, ``calls=`` of a
#: fusion), ``to_apply`` (the reducer / comparator / map function of reduce,
#: reduce-window, all-reduce, reduce-scatter, scatter, select-and-scatter,
#: sort, map), ``while_body`` / ``while_condition``, ``conditional_branch``,
#: ``call`` (``to_apply=`` of a call), ``async`` (the computation an
#: async-start wraps), ``custom_call`` (``called_computations=`` of a
#: custom-call), ``called`` (another caller). ``None``: never called.
COMPUTATION_KINDS = ("entry", "fusion", "to_apply", "while_body", "while_condition",
                     "conditional_branch", "call", "async", "custom_call", "called")

#: Kinds whose instructions are not materialized in memory: they run inside
#: the calling instruction (XLA's "embedded" call context), so their values
#: get no buffers of their own.
EMBEDDED_KINDS = frozenset(("fusion", "to_apply", "custom_call"))

# Opcodes that may call computations (the others are not searched for calls).
_CALLER_OPCODES = frozenset((
    "fusion", "call", "while", "conditional", "reduce", "reduce-window", "map", "sort",
    "scatter", "select-and-scatter", "all-reduce", "all-reduce-start", "reduce-scatter",
    "custom-call", "async-start", "async-update", "async-done", "topk"))

# Results that share the buffer of an operand (or of the caller's operand):
# XLA allocates nothing new for them (a tuple only its small index table).
VIEW_OPCODES = frozenset((
    "get-tuple-element", "bitcast", "tuple", "while", "call", "conditional",
    "optimization-barrier", "domain", "add-dependency", "copy-done", "async-done",
    "async-update", "send-done", "recv-done", "all-gather-done", "all-reduce-done",
    "collective-permute-done"))

#: What an instruction's result is in memory (:attr:`Instruction.result`).
RESULT_KINDS = ("buffer", "view", "embedded", "none")


def call_kind(opcode: str, attribute: str) -> str:
    """The kind of a computation named in ``attribute`` (``calls``,
    ``to_apply``, ``body``, ...) of an instruction with ``opcode``.

    >>> call_kind("fusion", "calls"), call_kind("while", "body"), call_kind("reduce", "to_apply")
    ('fusion', 'while_body', 'to_apply')
    """
    if opcode == "fusion":
        return "fusion"
    if opcode == "while":
        if attribute == "body":
            return "while_body"
        if attribute == "condition":
            return "while_condition"
        return "called"
    if opcode == "conditional":
        return "conditional_branch"
    if opcode == "call":
        return "call"
    if opcode == "custom-call":
        return "custom_call"
    if opcode.startswith("async-") or (attribute == "calls" and opcode.endswith(
            ("-start", "-update", "-done"))):
        return "async"
    if attribute in ("to_apply", "select", "scatter"):
        return "to_apply"
    return "called"


_KIND_ORDER = {k: i for i, k in enumerate(
    ("entry", "while_body", "while_condition", "conditional_branch", "call", "async",
     "called", "fusion", "to_apply", "custom_call"))}


def _main_kind(kinds) -> Optional[str]:
    """One kind for a computation used in several ways: a use that
    materializes values wins over an embedded one."""
    if not kinds:
        return None
    return min(kinds, key=lambda k: _KIND_ORDER.get(k, 99))


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


def _calls_in(opcode: str, attrs: str):
    """``(key, callee, kind)`` for every computation an instruction's
    attribute text names, in the order of the text."""
    found = []
    for key in _CALL_KEYS_BY_OPCODE.get(opcode, _CALL_KEYS):
        if key not in attrs:
            continue
        kind = call_kind(opcode, key)
        for start, vpos in _attr_matches(attrs, key):
            vm = _CALL_VALUE.match(attrs, vpos)
            if vm is not None:
                found.append((start, key, kind, vm.group()))
    found.sort()
    for _, key, kind, value in found:
        for name in _NAME_REF.findall(value.strip("{}")):
            yield key, name, kind


# -- the data model ------------------------------------------------------------


class Operand(NamedTuple):
    """One operand of an instruction: its name, and its shape when the text
    writes it inline (``f32[2]{0} %p``), else ``None``."""

    name: str
    shape: Optional[Shape]


try:
    from ._hloscan import InstructionBase as _InstructionFields
    from ._hloscan import configure as _configure, feed_simple_lines as _feed_simple_lines
    from ._hloscan import scan_calls_chunk as _scan_calls_chunk
except ImportError:  # pragma: no cover - only without a build
    _configure = _feed_simple_lines = _scan_calls_chunk = None

    class _InstructionFields:
        __slots__ = ("computation", "name", "shape", "opcode", "is_root", "line",
                     "operands_text", "attributes_text", "_operands", "_attributes",
                     "_reader", "_comp")


class Instruction(_InstructionFields):
    """One HLO instruction (or one allocation of an out-of-memory report).

    ``computation`` (name, ``None`` outside any computation, :data:`OOM_REPORT`
    for report entries), ``name`` (without ``%``), ``shape`` (a
    :class:`~xlashape.Shape` with layout), ``opcode``, ``is_root``, ``line``
    (1-based line where it starts). ``operands`` and ``attributes`` are parsed
    on first use, so streaming over a dump only pays for what is read.
    """

    __slots__ = ()

    def __init__(self, computation, name, shape, opcode, *, is_root=False, line=0,
                 operands_text="", attributes_text="", attributes=None, reader=None,
                 comp=None):
        self._comp = comp
        self.computation = computation
        self.name = name
        self.shape = shape
        self.opcode = opcode
        self.is_root = is_root
        self.line = line
        self.operands_text = operands_text
        self.attributes_text = attributes_text
        self._operands = None
        self._attributes = attributes
        self._reader = reader

    # -- lazily parsed parts ----------------------------------------------
    @property
    def operands(self) -> Tuple[Operand, ...]:
        """Operands in order. ``parameter(N)`` and ``constant(...)`` have none
        (see :attr:`argument`)."""
        if self._operands is None:
            self._operands = self._parse_operands()
        return self._operands

    @property
    def operand_names(self) -> Tuple[str, ...]:
        """The operands' names (without ``%``), in order."""
        if self.opcode in ("parameter", "constant") or self.computation == OOM_REPORT:
            return ()
        t = self.operands_text
        if "[" not in t and "(" not in t and "/" not in t and '"' not in t:
            return tuple(x.strip().lstrip("%") for x in t.split(",") if x.strip())
        return tuple(o.name for o in self.operands)

    @property
    def computation_object(self) -> Optional["Computation"]:
        """The :class:`Computation` the instruction belongs to (``None``
        outside any computation); :attr:`computation` is its name."""
        return self._comp

    @property
    def computation_kind(self) -> Optional[str]:
        """How this instruction's computation is used: one of
        :data:`COMPUTATION_KINDS`, or ``None`` (outside any computation, a
        computation nothing calls, or a caller not read yet)."""
        c = self._comp
        return None if c is None else c.kind

    @property
    def result(self) -> str:
        """What the result is in memory: ``"buffer"`` (XLA allocates new
        memory for it), ``"view"`` (it is the buffer of an operand or of the
        caller's operand: get-tuple-element, bitcast, tuple, a parameter of a
        computation other than the entry, while, call, conditional, the
        ``*-done`` half of an asynchronous pair, ...), ``"embedded"`` (inside
        a fusion body, reducer or other computation that runs within one
        instruction: no buffer of its own), ``"none"`` (a token: no data).

        A tuple's elements are its operands' buffers; XLA only adds a small
        table of pointers to them, which counts as the tuple's own memory
        (see :func:`xlashape.memory.tuple_table_size`)."""
        c = self._comp
        return result_kind(self.opcode, self.shape, c, c is not None and c.usage()[1])

    @property
    def argument(self) -> str:
        """The raw text between the opcode's parentheses (``0`` for
        ``parameter(0)``, the literal for ``constant``)."""
        return self.operands_text.strip()

    @property
    def parameter_number(self) -> Optional[int]:
        if self.opcode != "parameter":
            return None
        try:
            return int(self.argument)
        except ValueError:
            return None

    @property
    def attributes(self) -> Dict[str, str]:
        """Attributes after the operand list, ``name -> raw text`` (strings
        keep their quotes; blocks keep their braces)."""
        if self._attributes is None:
            attrs = {}
            for part in _split_top(self.attributes_text):
                part = part.strip()
                if not part:
                    continue
                key, eq, value = part.partition("=")
                attrs[key.strip()] = value.strip() if eq else ""
            self._attributes = attrs
        return self._attributes

    def attribute(self, key: str, default: Optional[str] = None) -> Optional[str]:
        """The raw text of one attribute, or ``default``.

        Cheaper than :attr:`attributes` on long lines: it finds ``key=`` at the
        top level (not inside a quoted string) without splitting the rest.
        """
        if self._attributes is not None:
            return self._attributes.get(key, default)
        text = self.attributes_text
        if key + "=" not in text:
            return default
        for start, vpos in _attr_matches(text, key):
            if _open_string(text[:start]) or not _balanced(text[:start]):
                continue  # inside a string or a block: not a top-level attribute
            if text.startswith(("{", "("), vpos):
                end = _match_close(text, vpos)
                if end < 0:
                    break
            elif text.startswith('"', vpos):
                sm = _STRING.match(text, vpos)
                end = sm.end() if sm else len(text)
            else:
                end = text.find(",", vpos)
                if end < 0:
                    end = len(text)
            return text[vpos:end].strip()
        return self.attributes.get(key, default)

    @property
    def kind(self) -> Optional[str]:
        """``kind=`` of a fusion (``kLoop``, ``kInput``, ``kOutput``, ``kCustom``)."""
        return self.attribute("kind")

    @property
    def called_computations(self) -> Tuple[str, ...]:
        """Names in ``calls=``, ``to_apply=``, ``body=``, ``condition=`` and
        ``branch_computations=``, without ``%``."""
        out = []
        for key in ("calls", "to_apply", "condition", "body", "branch_computations"):
            v = self.attribute(key)
            if v:
                out.extend(_NAME_REF.findall(v.strip("{}")))
        return tuple(out)

    @property
    def metadata(self) -> Dict[str, str]:
        """``metadata={op_type="..." op_name="..." source_file=... source_line=...}``
        as a dict of unquoted strings."""
        raw = self.attributes.get("metadata", "")
        return {k: _unquote(v) for k, v in _META_ITEM.findall(raw)}

    def _parse_operands(self) -> Tuple[Operand, ...]:
        if self.opcode in ("parameter", "constant") or self.computation == OOM_REPORT:
            return ()
        out = []
        reader = self._reader or _default_reader()
        for part in _split_top(self.operands_text):
            part = _COMMENT.sub(" ", part).strip()
            if not part:
                continue
            shape = None
            if part[0] == "(" or _ARRAY_SHAPE.match(part) or part.startswith(("token[", "opaque[")):
                try:
                    shape, end = reader.shape_at(part, 0)
                except HloParseError as e:
                    raise HloParseError(
                        f"operand of {self.name}: {e.message}",
                        e.text, e.position) from None
                part = part[end:].strip()
            out.append(Operand(part.lstrip("%"), shape))
        return tuple(out)

    def __repr__(self):
        root = "ROOT " if self.is_root else ""
        return f"<Instruction {root}{self.name} = {self.shape} {self.opcode}(...) line {self.line}>"


class Computation:
    """A named computation: its instructions in order, whether it is the
    ``ENTRY``, its signature text ``(p: f32[2]) -> f32[2]`` and its line."""

    __slots__ = ("name", "is_entry", "signature", "line", "instructions", "kinds", "_usage")

    def __init__(self, name, is_entry=False, signature="", line=0):
        self.name = name
        self.is_entry = is_entry
        self.signature = signature
        self.line = line
        self.instructions: List[Instruction] = []
        #: every way the module uses this computation (see :data:`COMPUTATION_KINDS`)
        self.kinds: set = {"entry"} if is_entry else set()
        self._usage = (-1, None, False)

    def usage(self) -> Tuple[Optional[str], bool]:
        """``(kind, is_embedded)``, remembered until ``kinds`` grows (it only
        ever grows, as callers are read)."""
        u = self._usage
        n = len(self.kinds)
        if u[0] != n:
            kinds = self.kinds
            u = self._usage = (n, _main_kind(kinds),
                               bool(kinds) and all(k in EMBEDDED_KINDS for k in kinds))
        return u[1], u[2]

    @property
    def kind(self) -> Optional[str]:
        """How the computation is used (:data:`COMPUTATION_KINDS`); when it is
        used in several ways, a use that materializes values wins. ``None``
        if nothing calls it (or its caller has not been read yet)."""
        return self.usage()[0]

    @property
    def is_embedded(self) -> bool:
        """True if every use runs it inside one instruction (fusion body,
        reducer, ...): its values are not materialized in memory."""
        return self.usage()[1]

    @property
    def root(self) -> Optional[Instruction]:
        """The ``ROOT`` instruction (XLA's rule: else the last one)."""
        for ins in self.instructions:
            if ins.is_root:
                return ins
        return self.instructions[-1] if self.instructions else None

    def __iter__(self):
        return iter(self.instructions)

    def __len__(self):
        return len(self.instructions)

    def __repr__(self):
        entry = "ENTRY " if self.is_entry else ""
        return f"<Computation {entry}{self.name}: {len(self.instructions)} instructions>"


class HloWarning(NamedTuple):
    """A line that was skipped: 1-based ``line`` and ``message``."""

    line: int
    message: str

    def __str__(self):
        return f"line {self.line}: {self.message}"


#: How many warnings a :class:`WarningList` keeps by default (it counts them all).
MAX_KEPT_WARNINGS = 1000


class WarningList(list):
    """The first ``limit`` warnings (a list), and how many there were in all
    (:attr:`total`): what readers keep, so that a file of any number of
    unreadable lines costs bounded memory.

    >>> w = WarningList(limit=2)
    >>> for i in range(5):
    ...     w.append(HloWarning(i + 1, "bad"))
    >>> len(w), w.total, w.dropped
    (2, 5, 3)
    """

    def __init__(self, items=(), limit: int = MAX_KEPT_WARNINGS):
        super().__init__()
        self.limit = limit
        self.total = 0
        self.extend(items)

    def append(self, w) -> None:
        self.total += 1
        if len(self) < self.limit:
            super().append(w)

    def extend(self, items) -> None:
        for w in items:
            self.append(w)

    def add_uncounted(self, n: int) -> None:
        """Count ``n`` warnings that were not given (dropped earlier)."""
        self.total += n

    @property
    def dropped(self) -> int:
        """How many warnings were counted but not kept."""
        return self.total - len(self)


class EntryComputationLayout(NamedTuple):
    """The ``entry_computation_layout={(P0, P1, ...)->R}`` of a module header:
    the entry parameters' shapes and the result shape, with the layouts (and
    memory spaces) the caller sees."""

    parameters: Tuple[Shape, ...]
    result: Shape


class Alias(NamedTuple):
    """One entry of ``input_output_alias={ {1}: (0, {}, may-alias) }``: output
    element ``output_index`` shares the buffer of parameter
    ``parameter_number`` at ``parameter_index`` (``kind`` ``may-alias`` or
    ``must-alias``)."""

    output_index: Tuple[int, ...]
    parameter_number: int
    parameter_index: Tuple[int, ...]
    kind: str


class BufferDonor(NamedTuple):
    """One entry of ``buffer_donor={ (0, {}) }``: a parameter buffer the
    program may reuse for any output."""

    parameter_number: int
    parameter_index: Tuple[int, ...]


_ALIAS_ENTRY = re.compile(
    r"\{([\d,\s]*)\}\s*:\s*\(\s*(\d+)\s*(?:,\s*\{([\d,\s]*)\}\s*)?(?:,\s*([\w\-]+)\s*)?\)")
_DONOR_ENTRY = re.compile(r"\(\s*(\d+)\s*(?:,\s*\{([\d,\s]*)\}\s*)?\)")


def _index(text: Optional[str]) -> Tuple[int, ...]:
    return tuple(int(x) for x in (text or "").replace(" ", "").split(",") if x)


def parse_entry_computation_layout(text: str) -> EntryComputationLayout:
    """``{(f32[2]{0}, s32[]{:T(128)})->f32[2]{0}}`` (the attribute's value, as
    the header prints it) as an :class:`EntryComputationLayout`.

    >>> ecl = parse_entry_computation_layout("{(f32[2]{0}, s32[])->(f32[2]{0})}")
    >>> [str(p) for p in ecl.parameters], str(ecl.result)
    (['f32[2]{0}', 's32[]'], '(f32[2]{0})')
    """
    t = text.strip()
    if t.startswith("{") and t.endswith("}"):
        t = t[1:-1].strip()
    if not t.startswith("("):
        raise HloParseError("entry_computation_layout must be '{(parameters)->result}'", text, 0)
    params, end = hlo_text.parse_shape_prefix(t, 0)
    rest = t[end:].lstrip()
    if not rest.startswith("->"):
        raise HloParseError("entry_computation_layout must be '{(parameters)->result}': "
                            "no '->' after the parameters", text, 0)
    rest = rest[2:].strip()
    result, end = hlo_text.parse_shape_prefix(rest, 0)
    if rest[end:].strip():
        raise HloParseError("unexpected text after the result shape of "
                            "entry_computation_layout: " + _clip(rest[end:]), text, 0)
    return EntryComputationLayout(tuple(params.tuple_shapes), result)


def parse_input_output_alias(text: str) -> Tuple[Alias, ...]:
    """``{ {0}: (1, {}, may-alias) }`` as :class:`Alias` entries.

    >>> parse_input_output_alias("{ {0}: (0, {}, may-alias), {1,2}: (3, {0}, must-alias) }")
    (Alias(output_index=(0,), parameter_number=0, parameter_index=(), kind='may-alias'), Alias(output_index=(1, 2), parameter_number=3, parameter_index=(0,), kind='must-alias'))
    """
    return tuple(Alias(_index(m.group(1)), int(m.group(2)), _index(m.group(3)),
                       m.group(4) or "may-alias")
                 for m in _ALIAS_ENTRY.finditer(text))


def parse_buffer_donor(text: str) -> Tuple[BufferDonor, ...]:
    """``{ (0, {}), (2, {1}) }`` as :class:`BufferDonor` entries."""
    return tuple(BufferDonor(int(m.group(1)), _index(m.group(2)))
                 for m in _DONOR_ENTRY.finditer(text))


class HloModule:
    """A parsed module: ``name``, ``attributes`` (raw text after the name on the
    ``HloModule`` line, e.g. ``entry_computation_layout``), ``computations`` in
    order, and the ``warnings`` for skipped lines. The header attributes XLA's
    memory accounting depends on are also given parsed:
    :attr:`entry_computation_layout`, :attr:`input_output_alias`,
    :attr:`buffer_donor`."""

    def __init__(self, name=None, attributes=None):
        self.name = name
        self.attributes: Dict[str, str] = attributes or {}
        self.computations: List[Computation] = []
        self.warnings: WarningList = WarningList()
        self.fused_computations: set = set()
        self.applied_computations: set = set()
        self.lines_read = 0
        self.mode: Optional[str] = None

    @property
    def entry_computation_layout(self) -> Optional[EntryComputationLayout]:
        """The header's ``entry_computation_layout``, parsed (``None`` if absent).
        Raises :class:`~xlashape.HloParseError` if it does not parse."""
        text = self.attributes.get("entry_computation_layout")
        return None if text is None else parse_entry_computation_layout(text)

    @property
    def input_output_alias(self) -> Tuple[Alias, ...]:
        """The header's ``input_output_alias`` entries (donated parameters
        whose buffers the outputs reuse); ``()`` if absent."""
        return parse_input_output_alias(self.attributes.get("input_output_alias", ""))

    @property
    def buffer_donor(self) -> Tuple[BufferDonor, ...]:
        """The header's ``buffer_donor`` entries; ``()`` if absent."""
        return parse_buffer_donor(self.attributes.get("buffer_donor", ""))

    @property
    def entry(self) -> Optional[Computation]:
        for c in self.computations:
            if c.is_entry:
                return c
        return None

    def computation(self, name: str) -> Computation:
        """The computation called ``name`` (with or without ``%``)."""
        name = name.lstrip("%")
        for c in self.computations:
            if c.name == name:
                return c
        raise KeyError(f"no computation named {name!r}; the module has "
                       f"{[c.name for c in self.computations]}")

    def instructions(self) -> Iterator[Instruction]:
        for c in self.computations:
            yield from c.instructions

    def instruction(self, name: str) -> Instruction:
        name = name.lstrip("%")
        for ins in self.instructions():
            if ins.name == name:
                return ins
        raise KeyError(f"no instruction named {name!r}")

    def __repr__(self):
        n = sum(len(c) for c in self.computations)
        return f"<HloModule {self.name}: {len(self.computations)} computations, {n} instructions>"


# -- sizes ---------------------------------------------------------------------


def has_data(shape: Shape) -> bool:
    """True unless the shape holds only tokens (or nothing)."""
    if shape.is_tuple:
        return any(has_data(s) for s in shape.tuple_shapes)
    return not shape.is_token


def result_kind(opcode: str, shape: Shape, computation: Optional["Computation"],
                embedded: bool) -> str:
    """:attr:`Instruction.result` from its parts (``embedded``: the
    computation's :meth:`Computation.usage` says so)."""
    if embedded:
        return "embedded"
    if not has_data(shape):
        return "none"
    if opcode == "parameter":
        return "view" if computation is not None and not computation.is_entry else "buffer"
    if opcode in VIEW_OPCODES:
        return "view"
    return "buffer"


# -- the reader ----------------------------------------------------------------


class HloReader:
    """Streaming reader: feed it lines, get :class:`Instruction` objects.

    ``on_warning(HloWarning)`` is called for every skipped line (default: they
    are collected in :attr:`warnings`). Shape strings are parsed once and
    cached, which makes repeated shapes (the common case in dumps) cheap.

    After (or during) reading, :attr:`module_name`, :attr:`module_attributes`,
    :attr:`computations` (name -> :class:`Computation` without instructions),
    :attr:`fused_computations` / :attr:`applied_computations` (names called by
    ``calls=`` of a fusion, or by ``to_apply=``), :attr:`call_kinds` (name ->
    set of :data:`COMPUTATION_KINDS`) and :attr:`lines_read` describe what was
    seen.

    XLA prints a computation before the instructions that call it, so while
    streaming, how a computation is used is known only once its caller has
    been read. ``call_kinds`` (from :func:`scan_calls`, a fast first pass
    over the same text) makes it known from the start: then every
    instruction's :attr:`~Instruction.computation_kind` and
    :attr:`~Instruction.result` are right the moment it is yielded.

    ``streaming=True`` keeps memory flat on a module of any size: the
    computations are counted (:attr:`computation_count`) but not kept in
    :attr:`computations` once read, and when ``call_kinds`` are given (they
    are complete), the calls read are not recorded again (``call_kinds``,
    ``fused_computations`` and ``applied_computations`` stay as given).

    >>> r = HloReader()
    >>> [i.name for i in r.read(["ENTRY e {", "  ROOT x = f32[] constant(1)", "}"])]
    ['x']
    """

    def __init__(self, on_warning: Optional[Callable[[HloWarning], None]] = None, *,
                 call_kinds: Optional[Dict[str, set]] = None, streaming: bool = False):
        self._on_warning = on_warning
        #: the first MAX_KEPT_WARNINGS skipped lines (``warnings.total``: all of them)
        self.warnings: WarningList = WarningList()
        self._cache: Dict[str, Shape] = {}
        self.module_name: Optional[str] = None
        self.module_attributes: Dict[str, str] = {}
        self.computations: Dict[str, Computation] = {}
        self.fused_computations: set = set()
        self.applied_computations: set = set()
        self._streaming = streaming
        # whether the calls read are recorded (not when streaming with the
        # complete call graph already given)
        self._record = not (streaming and call_kinds is not None)
        self.call_kinds: Dict[str, set] = (
            call_kinds if not self._record else {k: set(v) for k, v in (call_kinds or {}).items()})
        self.computation_count = 0
        self._in_comment = False
        self._current: Optional[Computation] = None
        self._pending: Optional[list] = None
        self._ready: Optional[list] = None
        self._skipping = False
        #: the out-of-memory report parser (xlashape.oom_report), once the
        #: input may be a report
        self._oom = None
        self._oom_count = 0
        self._oom_report = 0
        self._use_fast = True
        #: an ``_hloscan.InstructionSink`` the compiled scanner offers each
        #: instruction it reads before making an Instruction of it (``xlashape
        #: hlo --json`` sets one: cli/_hlo_json.pyx); None: every instruction
        #: is yielded
        self.instruction_sink = None
        self.lines_read = 0
        self.mode: Optional[str] = None  # None until known: "hlo" or "oom"
        self._pending_warnings: List[HloWarning] = []
        self._pending_dropped = 0

    # -- shapes --------------------------------------------------------------
    def shape_at(self, text: str, pos: int) -> Tuple[Shape, int]:
        """Parse the shape starting at ``text[pos]``: ``(shape, end)``, cached."""
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
            s = self._cache.get(key)
            if s is not None:
                return s, end
            try:
                # parse just the shape's own text: cheaper than handing the
                # parser the rest of a long line
                shape = hlo_text.parse_shape(key)
            except HloParseError:
                shape = None  # re-parse below for positions in the whole text
            if shape is not None:
                if len(self._cache) >= _SHAPE_CACHE_LIMIT:
                    self._cache.clear()
                self._cache[key] = shape
                return shape, end
        shape, end = hlo_text.parse_shape_prefix(text, pos)
        if len(self._cache) >= _SHAPE_CACHE_LIMIT:
            self._cache.clear()
        self._cache[text[pos:end]] = shape
        return shape, end

    # -- warnings ------------------------------------------------------------
    def _warn(self, line: int, message: str) -> None:
        w = HloWarning(line, message)
        if self.mode is None:
            # Not yet known whether this is HLO or an out-of-memory report (where
            # prose lines are expected): hold the warning until we know.
            if len(self._pending_warnings) < MAX_KEPT_WARNINGS:
                self._pending_warnings.append(w)
            else:
                self._pending_dropped += 1
            return
        if self.mode == "oom":
            return
        self._emit(w)

    def _emit(self, w: HloWarning) -> None:
        self.warnings.append(w)
        if self._on_warning is not None:
            self._on_warning(w)

    def _set_mode(self, mode: str) -> None:
        if self.mode is None:
            self.mode = mode
            if mode == "hlo":
                self._oom = None       # not a report: the compiled scanner may take over
            pending, self._pending_warnings = self._pending_warnings, []
            dropped, self._pending_dropped = self._pending_dropped, 0
            if mode == "hlo":
                for w in pending:
                    self._emit(w)
                # held while the kind of input was unknown, past what is kept
                self.warnings.add_uncounted(dropped)

    # -- statements ----------------------------------------------------------
    def _parse_instruction(self, stmt: str, line: int, computation) -> Instruction:
        fm = _FAST_INSTR.match(stmt)
        shape = None
        if fm is not None:
            key = fm.group(3)
            shape = self._cache.get(key)
            if shape is None:
                try:
                    shape = hlo_text.parse_shape(key)
                except HloParseError:
                    shape = None  # the general path reports it with positions
                else:
                    if len(self._cache) >= _SHAPE_CACHE_LIMIT:
                        self._cache.clear()
                    self._cache[key] = shape
        if shape is not None:
            is_root = fm.group(1) is not None
            name = fm.group(2)
            opcode = fm.group(4)
            open_ = fm.end() - 1
        else:
            m = _INSTR_START.match(stmt)
            if m is None:
                raise _Malformed("expected 'name = shape opcode(operands)'")
            is_root = m.group(1) is not None
            name = m.group(2)
            pos = m.end()
            if pos >= len(stmt):
                raise _Incomplete
            try:
                shape, pos = self.shape_at(stmt, pos)
            except HloParseError as e:
                if e.position >= len(stmt.rstrip()) - 1:
                    raise _Incomplete from None
                raise _Malformed(f"bad shape: {e.message}", e.position) from None
            om = _OPCODE.match(stmt, pos)
            if om is None:
                if not stmt[pos:].strip():
                    raise _Incomplete
                raise _Malformed("expected an opcode and '(' after the shape", _skip_ws(stmt, pos))
            opcode = om.group(1)
            open_ = om.end() - 1
        close = _match_close(stmt, open_)
        if close < 0:
            raise _Incomplete(operands=True)
        operands_text = stmt[open_ + 1:close - 1]
        # the attributes by offsets: one copy of a long line's attributes, not three
        a = _WS_RUN.match(stmt, close).end()
        end = len(stmt.rstrip())
        attrs = ""
        if a < end:
            if stmt[a] != ",":
                raise _Malformed(
                    "expected ',' or the end of the instruction after the operands, got "
                    f"{stmt[a:min(a + 20, end)]!r}", a)
            start = _WS_RUN.match(stmt, a + 1).end()
            attrs = stmt[start:end]
            if not attrs or attrs.endswith(",") or not _balanced(attrs):
                # an attribute (block) continues on the next line
                raise _Incomplete(attributes=start)
        ins = Instruction(None if computation is None else computation.name, name, shape,
                          opcode, is_root=is_root, line=line, operands_text=operands_text,
                          attributes_text=attrs, reader=self, comp=computation)
        if attrs and self._record and (opcode in _CALLER_OPCODES
                                       or opcode.endswith(("-start", "-done"))):
            self._record_calls(opcode, attrs)
        return ins

    def _record_calls(self, opcode: str, attrs: str) -> None:
        for key, callee, kind in _calls_in(opcode, attrs):
            if key == "calls" and opcode == "fusion":
                self.fused_computations.add(callee)
            elif key == "to_apply":
                self.applied_computations.add(callee)
            _add_call_kind(self.call_kinds, callee, kind)
            c = self.computations.get(callee)
            if c is not None:
                c.kinds.add(kind)

    def _new_computation(self, name: str, is_entry: bool, signature: str, line: int) -> Computation:
        c = Computation(name, is_entry, signature, line)
        known = self.call_kinds.get(name)
        if known:
            c.kinds.update(known)
        self.computation_count += 1
        if not self._streaming:
            self.computations[name] = c
        return c

    def _read_header(self, text: str) -> None:
        m = _MODULE.match(text)
        self.module_name = m.group(1)
        attrs = {}
        for part in _split_top(_module_rest(m)):
            k, eq, v = part.strip().partition("=")
            if k:
                attrs[k.strip()] = v.strip()
        self.module_attributes = attrs

    # -- the line loop -----------------------------------------------------------
    #
    # The reader is a state machine fed one line at a time (``_feed``), its
    # state in attributes: the computation being read (``_current``), an
    # instruction spread over several lines (``_pending``: see _new_pending;
    # each new line is checked against what is still open, not the whole
    # statement again), a complete instruction held until the next line shows it
    # does not continue with ", attr=..." (``_ready``: [instruction, start
    # line, text]), a stack-frame section being skipped (``_skipping``), an
    # out-of-memory entry being collected (``_oom``), a /* comment still
    # open (``_in_comment``). ``read`` drives it; when the compiled scanner
    # (xlashape._hloscan) is built, it takes every line that is a complete
    # one-line instruction as XLA prints it, or a "}" or blank line, and
    # leaves the rest to ``_feed``: the two share this state, so the result
    # is the same (tests/test_hloscan.py checks it).

    def read(self, lines: Iterable[str]) -> Iterator[Instruction]:
        """Yield the instructions of the text given as an iterable of lines."""
        fast = _fast_scanner() if self._use_fast else None
        feed = self._feed
        if fast is None:
            # EntryBlocks: an int is a number of lines left out (only counted)
            blocks = isinstance(lines, EntryBlocks)
            for chunk in (lines.blocks() if blocks else (lines,)):
                if blocks:
                    if type(chunk) is int:
                        self.lines_read += chunk
                        continue
                    chunk = chunk.split("\n") if "\n" in chunk else (chunk,)
                lineno = self.lines_read
                for raw in chunk:
                    lineno += 1
                    self.lines_read = lineno
                    out = feed(raw, lineno)
                    if out:
                        yield from out
        else:
            out: List[Instruction] = []
            sink = self.instruction_sink
            for chunk in _line_chunks(lines):
                i = 0
                if type(chunk) is int:
                    # EntryBlocks: this many lines left out (only counted)
                    self.lines_read += chunk
                    continue
                if type(chunk) is str:
                    # a block of whole lines: offsets into it; len + 1 when done
                    n = len(chunk)
                    find = chunk.find
                    while i <= n:
                        i = fast(self, chunk, i, out, sink)
                        if out:
                            yield from out
                            out.clear()
                        if i <= n:
                            j = find("\n", i)
                            if j < 0:
                                j = n
                            lineno = self.lines_read + 1
                            self.lines_read = lineno
                            got = feed(chunk[i:j], lineno)
                            i = j + 1
                            if got:
                                yield from got
                    continue
                n = len(chunk)
                while i < n:
                    i = fast(self, chunk, i, out, sink)
                    if out:
                        yield from out
                        out.clear()
                    if i < n:
                        lineno = self.lines_read + 1
                        self.lines_read = lineno
                        got = feed(chunk[i], lineno)
                        i += 1
                        if got:
                            yield from got
        yield from self._finish()

    def _oom_instruction(self, a) -> Optional[Instruction]:
        """An allocation of an out-of-memory report (``oom_report.OomAllocation``)
        as an instruction of the pseudo-computation :data:`OOM_REPORT`: the
        instruction its XLA label names, with the report's figures as
        attributes (``report``: which report of the input, from 1)."""
        if a.shape is None:
            return None
        if a.report != self._oom_report:
            self._oom_report, self._oom_count = a.report, 0     # numbered per report
        self._oom_count += 1
        label = a.label or ""
        lm = re.match(r"%?([A-Za-z_][\w.\-]*)\s*=\s*(?:[^=]*?\s)?([a-z][a-z0-9_\-]*)\(", label)
        if lm:
            name, opcode = lm.group(1), lm.group(2)
        else:
            name, opcode = f"allocation.{self._oom_count}", ""
        attrs = {"size": a.size_text, "unpadded_size": a.unpadded_text,
                 "allocation_type": a.allocation_type, "op_name": a.op_name, "label": a.label}
        attrs = {k: v for k, v in attrs.items() if v is not None}
        attrs["report"] = a.report
        return Instruction(OOM_REPORT, name, a.shape, opcode, line=a.line,
                           attributes=attrs, reader=self)

    def _finish(self) -> List[Instruction]:
        """What is left when the input ends."""
        out = []
        if self._ready is not None:
            out.append(self._ready[0])
            self._ready = None
        if self._pending is not None:
            self._warn(self._pending[0], "incomplete instruction at the end of the input: "
                       + _clip(" ".join(self._pending[1])))
            self._pending = None
        if self._oom is not None:
            out.extend(i for i in map(self._oom_instruction, self._oom.finish()) if i is not None)
        if self.mode is None and self._pending_warnings:
            self._set_mode("hlo")  # nothing recognisable: report everything
        return out

    def _feed(self, raw: str, lineno: int) -> Optional[List[Instruction]]:
        """Read one line; the instructions it completes (or ``None``)."""
        out = None
        line = raw.rstrip("\r\n")
        if self._in_comment or ("/*" in line and _OTHER_COMMENT.search(line) is not None):
            line, self._in_comment = _blank_comments(line, self._in_comment)
        if "//" in line:
            line = _strip_line_comment(line)

        ready = self._ready
        if ready is not None:
            if line.lstrip().startswith(","):
                stmt = ready[2] + " " + line.strip()
                try:
                    self._ready = [self._parse_instruction(stmt, ready[1], self._current),
                                   ready[1], stmt]
                except _Incomplete as e:
                    self._pending = _new_pending(ready[1], stmt, stmt, e)
                    self._ready = None
                except _Malformed as e:
                    self._warn(ready[1], e.message)
                    self._ready = None
                return None
            out = [ready[0]]
            self._ready = None

        if self._skipping:
            # a stack-frame section: numbered entries until something else
            if _SECTION_ENTRY.match(line) is not None or not line.strip():
                return out
            self._skipping = False

        pending = self._pending
        if pending is not None:
            s = line.strip()
            closes_block = s.startswith("}") and not pending[2].balanced()
            starts_new = not closes_block and (
                          _LOOKS_LIKE_INSTR.match(line) is not None or s.startswith("}")
                          or s.startswith("HloModule") or s in _STACK_SECTIONS
                          or (s.endswith("{") and _match_header(s) and "=" not in s))
            if not starts_new and s:
                pending[1].append(s)
                pending[2].feed(" " + s)
                pending[3] += 1 + len(s)
                attrs = pending[4]
                if attrs is not None:
                    attrs.feed(" " + s)
                if ((attrs is not None and (s.endswith(",") or not attrs.balanced()))
                        or (pending[5] and not any(c in s for c in ')]}"'))):
                    # what _parse_instruction would answer, known without
                    # reading the whole statement again: still incomplete
                    if len(pending[1]) > _MAX_STATEMENT_LINES or pending[3] > _MAX_STATEMENT_CHARS:
                        self._warn(pending[0], "instruction does not end (too many lines)")
                        self._pending = None
                    return out
                stmt = " ".join(pending[1])
                try:
                    ins = self._parse_instruction(stmt, pending[0], self._current)
                    self._ready = [ins, pending[0], stmt]
                    self._pending = None
                except _Incomplete as e:
                    if len(pending[1]) > _MAX_STATEMENT_LINES or len(stmt) > _MAX_STATEMENT_CHARS:
                        self._warn(pending[0], "instruction does not end (too many lines)")
                        self._pending = None
                    else:
                        pending[4] = None if e.attributes is None else _Brackets(stmt[e.attributes:])
                        pending[5] = e.operands
                except _Malformed as e:
                    self._warn(pending[0], e.message)
                    self._pending = None
                return out
            if not s:
                return out
            self._warn(pending[0], "incomplete instruction: " + _clip(" ".join(pending[1])))
            self._pending = None

        s = line.strip()
        if not s or s.startswith("/*") and s.endswith("*/"):
            return out

        # -- HLO structure --------------------------------------------------
        if _LOOKS_LIKE_INSTR.match(line) is not None:
            s = None            # a long line is not held twice while it is parsed
            try:
                ins = self._parse_instruction(line, lineno, self._current)
                self._ready = [ins, lineno, line]
                if self.mode is None:
                    self._set_mode("hlo")
            except _Incomplete as e:
                self._pending = _new_pending(lineno, line.strip(), line, e)
            except _Malformed as e:
                self._warn(lineno, f"{e.message} (column {e.position + 1})")
            return out
        if s.startswith("HloModule"):
            m = _MODULE.match(s)
            if m:
                self._set_mode("hlo")
                self._read_header(s)
                self._current = None
                return out
        if s[0] == "}":
            self._current = None
            return out
        if s[-1] == "{" and "=" not in s.split("(", 1)[0]:
            m = _match_header(s)
            if m:
                is_entry = m.group(1) is not None
                name = m.group(2)
                if is_entry or m.group(3).startswith("(") or not m.group(3):
                    self._current = self._new_computation(name, is_entry, m.group(3), lineno)
                    if is_entry and self.mode is None:
                        self._set_mode("hlo")
                    return out
        if s in _STACK_SECTIONS:
            self._skipping = True
            self._current = None
            return out

        # -- out-of-memory report (read by xlashape.oom_report) -----------------
        if self.mode != "hlo":
            parser = self._oom
            if parser is None:
                from .oom_report import _TpuParser

                parser = self._oom = _TpuParser(self._emit)
            got = parser.feed(raw, lineno)
            if parser.reports:
                self._set_mode("oom")
            if got:
                out = (out or []) + [i for i in map(self._oom_instruction, got) if i is not None]
            if self.mode == "oom":
                return out
        self._warn(lineno, "not an HLO instruction, computation header or '}': " + _clip(s))
        return out


class TextBlocks:
    """A text stream to read in big blocks rather than line by line: what
    ``HloReader.read`` gets faster from a big file (the stream must have
    been opened with newline translation, as ``open()`` does by default, so
    that its lines end with "\\n"). ``progress(characters read)`` is called
    after each block; ``observer(block)`` sees every block of whole lines
    as it is read (the whole text, before a subclass leaves parts out: a
    second reader of the same pass, such as the op paths'
    :class:`xlashape.live_range.LocationScanner`).

    >>> import io
    >>> [i.name for i in HloReader().read(TextBlocks(io.StringIO("a = f32[] constant(1)\\n")))]
    ['a']
    """

    def __init__(self, stream, progress: Optional[Callable[[int], None]] = None,
                 block: int = 1 << 20, observer: Optional[Callable[[str], None]] = None):
        self.stream = stream
        self.progress = progress
        self.block = block
        self.observer = observer

    def blocks(self) -> Iterator[str]:
        """Blocks of whole lines: each a str of lines joined by "\\n" (the
        last line of a block without its "\\n")."""
        observer = self.observer
        if observer is None:
            return self._blocks()
        return self._observed(observer)

    def _observed(self, observer) -> Iterator[str]:
        for block in self._blocks():
            observer(block)
            yield block

    def _blocks(self) -> Iterator[str]:
        # A line longer than a block is carried as a list of pieces, joined
        # once when its end arrives: each character is copied a bounded
        # number of times and searched for "\n" once, so a line of any length
        # is read in linear time (carry + data, re-searched, was quadratic).
        read = self.stream.read
        carry: List[str] = []
        done = 0
        while True:
            data = read(self.block)
            if not data:
                break
            done += len(data)
            if self.progress is not None:
                self.progress(done)
            cut = data.rfind("\n")
            if cut < 0:
                carry.append(data)
                continue
            if carry:
                # the long line alone (the reader then keeps no second copy
                # of it as a slice of a bigger block), then the lines after it
                first = data.find("\n")
                carry.append(data[:first])
                block = "".join(carry)
                carry.clear()
                yield block
                del block
                if first < cut:
                    yield data[first + 1:cut]
            else:
                yield data[:cut]
            if cut + 1 < len(data):
                carry.append(data[cut + 1:])
        if carry:
            block = "".join(carry)
            carry.clear()
            yield block

    def __iter__(self) -> Iterator[str]:
        for block in self.blocks():
            if "\n" in block:
                yield from block.split("\n")
            else:
                yield block             # a long line comes alone: not copied again


class EntryBlocks(TextBlocks):
    """TextBlocks that leave out every computation but the entry (and the
    module header, sections and anything outside computations): what the
    memory figures need, read without the fusion bodies and other
    computations that are most of a big dump. A computation is left out from
    a header line as XLA prints it (at column 0, ending with "{", not
    ``ENTRY``) to the line that starts with "}"; its lines are counted, so
    line numbers stay right."""

    def blocks(self):
        skipping = False
        for block in super().blocks():
            n = len(block)
            pos = 0
            while pos <= n:
                if skipping:
                    if block.startswith("}", pos):
                        k = pos
                    else:
                        k = block.find("\n}", pos)
                        if k < 0:
                            yield block.count("\n", pos) + 1
                            pos = n + 1
                            break
                        k += 1
                    e = block.find("\n", k)
                    if e < 0:
                        e = n
                    yield block.count("\n", pos, k) + 1
                    pos = e + 1
                    skipping = False
                    continue
                start = pos
                found = -1
                # a header ends with "{" (as XLA prints it: no space after):
                # look only at such lines, the block's last line too
                e = pos
                while True:
                    e = block.find("{\n", e)
                    if e < 0:
                        if block.endswith("{") and n - 1 >= pos:
                            e = n - 1
                        else:
                            break
                    nl = e + 1
                    ls = block.rfind("\n", pos, e) + 1
                    if ls < pos:
                        ls = pos
                    line = block[ls:nl]
                    if (line[:1] == "%" or line[:1].isalpha()) and \
                            not line.startswith(("ENTRY", "HloModule")) and \
                            "=" not in line.split("(", 1)[0]:
                        found = ls
                        break
                    if nl >= n:
                        break
                    e = nl
                if found < 0:
                    yield block[start:] if start else block
                    pos = n + 1
                    break
                if found > start:
                    yield block[start:found - 1]
                skipping = True
                pos = found


def _line_chunks(lines):
    """Lists of lines, or (from TextBlocks) blocks of lines as one str."""
    if isinstance(lines, TextBlocks):
        yield from lines.blocks()
        return
    it = iter(lines)
    while True:
        chunk = list(islice(it, _CHUNK_LINES))
        if not chunk:
            break
        yield chunk


def _add_call_kind(call_kinds: dict, callee: str, kind: str) -> None:
    """call_kinds[callee] gains ``kind`` (a new set if it has none); a value
    that is not a set is a ShapeTypeError, as the compiled scanner says it."""
    kinds = call_kinds.get(callee)
    if kinds is None:
        call_kinds[callee] = {kind}
    elif type(kinds) is not set:
        raise ShapeTypeError(f"call_kinds[{callee!r}] must be a set of call kinds, not "
                             f"{type(kinds).__name__}")
    else:
        kinds.add(kind)


def _new_pending(line: int, first: str, parsed: str, e: "_Incomplete") -> list:
    """The reader's record of an instruction that continues on the next
    lines: [its first line, its lines, _Brackets of the joined lines, their
    length, _Brackets of its attributes when they are what continues (from
    ``parsed``, the text that raised ``e``), whether its operand list is what
    does not close]."""
    return [line, [first], _Brackets(first), len(first),
            None if e.attributes is None else _Brackets(parsed[e.attributes:]), e.operands]


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


def _clip(text: str, n: int = 60) -> str:
    # only the start of the text is looked at: a warning about a line of a
    # gigabyte costs what one about a short line does
    head = text[:8 * n + 64]
    clipped = " ".join(head.split())
    if len(clipped) <= n and len(head) == len(text):
        return clipped
    return clipped[: n - 3] + "..."


_FAST = []


def _fast_scanner():
    """The compiled scanner's entry point, or None when it is not built or
    ``XLASHAPE_PURE_PYTHON=1`` turns it off (for tests and benchmarks)."""
    if not _FAST:
        if _feed_simple_lines is not None:
            _configure(Instruction, _CALLER_OPCODES)
        _FAST.append(_feed_simple_lines)
    if _os.environ.get("XLASHAPE_PURE_PYTHON", "") not in ("", "0"):
        return None
    return _FAST[0]


def uses_compiled_scanner() -> bool:
    """True when :class:`HloReader` reads plain lines with the compiled
    scanner (``xlashape/_hloscan.pyx``): the build has it and
    ``XLASHAPE_PURE_PYTHON=1`` does not turn it off."""
    return _fast_scanner() is not None


@functools.lru_cache(maxsize=1)
def _default_reader() -> HloReader:
    return HloReader()


# -- the call graph in one fast pass -----------------------------------------------

_CALLS_B = re.compile(
    rb", (calls|to_apply|body|condition|branch_computations|true_computation|false_computation"
    rb"|called_computations|select|scatter)=(\{|%?[\w.\-]+)")
_BRACE_END_B = re.compile(rb"[{}=\n]")   # a "{" value ends at "}" (the others: not one)
_OPCODE_B = re.compile(rb"[\s)\]}]([a-z][a-z0-9_\-]*)\(")
_NAME_REF_B = re.compile(rb"%?([A-Za-z_][\w.\-]*)")
_SCAN_CHUNK = 1 << 23


def scan_calls(source, progress: Optional[Callable[[int], None]] = None) -> Dict[str, set]:
    """How each computation of a module is used, from one fast pass over its
    text: ``{computation name: frozenset of kinds}`` (see
    :data:`COMPUTATION_KINDS`; the entry computation is not listed). ``source``: a path, or the text as
    ``str`` or ``bytes``. Give the result to ``HloReader(call_kinds=...)``.

    It looks only at the attributes that name computations (``calls=``,
    ``to_apply=``, ``body=``, ``condition=``, ``branch_computations=``, ...),
    in chunks of a few MB, so memory stays flat for a file of any size;
    ``progress(bytes_read)`` is called after each chunk of a file.

    >>> scan_calls("ENTRY e {\\n  ROOT r = f32[] reduce(a, b), dimensions={0}, to_apply=add\\n}")
    {'add': frozenset({'to_apply'})}
    """
    kinds: Dict[str, set] = {}
    try:
        return _scan_calls(source, kinds, progress)
    finally:
        # one shared frozenset per combination of kinds, not a set per name:
        # a big module has hundreds of thousands of computations
        shared: Dict[frozenset, frozenset] = {}
        for name, v in kinds.items():
            f = frozenset(v)
            kinds[name] = shared.setdefault(f, f)


def _scan_calls(source, kinds, progress) -> Dict[str, set]:
    kind = source_kind(source)
    if kind == "text":
        _scan_chunk(source.encode("utf-8", "replace") if isinstance(source, str)
                    else bytes(source), kinds)
        return kinds
    if kind != "path":
        raise ShapeTypeError("scan_calls() takes a path, or the text as str or bytes, "
                             f"not {type(source).__name__}")
    with _open_binary(source) as f:
        # as TextBlocks.blocks: a line longer than a chunk is carried as
        # pieces and joined once, so each byte is searched for "\n" once
        tail: List[bytes] = []
        done = 0
        while True:
            block = f.read(_SCAN_CHUNK)
            if not block:
                break
            done += len(block)
            if progress is not None:
                progress(done)
            cut = block.rfind(b"\n")
            if cut < 0:
                tail.append(block)
                continue
            start = 0
            if tail:
                # the carried line alone (lines are scanned independently),
                # then the whole lines after it: no copy of both at once
                start = block.find(b"\n") + 1
                tail.append(block[:start])
                chunk = b"".join(tail)
                tail.clear()
                _scan_chunk(chunk, kinds)
                del chunk
            if start <= cut:
                _scan_chunk(block if start == 0 and cut + 1 == len(block)
                            else block[start:cut + 1], kinds)
            if cut + 1 < len(block):
                tail.append(block[cut + 1:])
            del block
        if tail:
            chunk = b"".join(tail)
            tail.clear()
            _scan_chunk(chunk, kinds)
    return kinds


def _scan_chunk(chunk: bytes, kinds: Dict[str, set]) -> None:
    fast = _fast_scanner()
    if fast is not None:
        _scan_calls_chunk(chunk, kinds, call_kind)
        return
    _scan_chunk_python(chunk, kinds)


def _scan_chunk_python(chunk: bytes, kinds: Dict[str, set]) -> None:
    # Linear however long a line is: the start of a match's line is searched
    # for only in the text since the previous match, and the end of a "{...}"
    # value (the first "}" or newline) is remembered for the values after it.
    last_line = -1
    opcode = ""
    rfind = chunk.rfind
    line_start = seen = 0
    stop_from = stop_at = -1
    pos = 0
    n = len(chunk)
    while True:
        m = _CALLS_B.search(chunk, pos)
        if m is None:
            break
        value = m.group(2)
        if value == b"{":
            k = m.end()
            if not stop_from <= k <= stop_at:
                stop_from = k
                e = _BRACE_END_B.search(chunk, k)
                stop_at = n if e is None else e.start()
            if stop_at >= n or chunk[stop_at:stop_at + 1] != b"}":
                pos = m.start() + 1
                continue
            value = chunk[m.end() - 1:stop_at + 1]
            pos = stop_at + 1
        else:
            pos = m.end()
        mstart = m.start()
        cut = rfind(b"\n", seen, mstart)
        if cut >= 0:
            line_start = cut + 1
        seen = mstart
        start = line_start
        if start != last_line:
            last_line = start
            eq = chunk.find(b"=", start, mstart)
            om = _OPCODE_B.search(chunk, eq if eq >= 0 else start, mstart)
            while om is not None and om.group(1) == b"b":  # b(...) is a buffer shape
                om = _OPCODE_B.search(chunk, om.end(), mstart)
            opcode = om.group(1).decode() if om is not None else ""
        kind = call_kind(opcode, m.group(1).decode())
        for name in _NAME_REF_B.findall(value.strip(b"{}")):
            _add_call_kind(kinds, name.decode("utf-8", "replace"), kind)


def _open_binary(path):
    path = check_regular_file(path)
    if path.endswith(".gz"):
        return open_gzip(path, "rb")
    return open(path, "rb")


# -- entry points --------------------------------------------------------------

# One line of text that is what a reader reads, not a file name: an HLO
# instruction, header, computation header or "}", a line of an out-of-memory
# report, of a buffer assignment or of a memory-usage report.
_TEXT_LINE = re.compile(
    r"\s*(?:HloModule\s|ENTRY\s|ROOT\s|BufferAssignment:|allocation\s+\d+:|value:\s*<"
    r"|Memory Space:|%?[A-Za-z_][\w.\-]*\s*=\s*(?:\(|b\(|[a-z][a-z0-9]*\[))"
    r"|.*(?:[{}]|Ran out of memory|RESOURCE_EXHAUSTED|Largest program allocations)", re.S)


def source_kind(source) -> str:
    """How the readers that take a path or text (:func:`scan_calls`,
    :func:`xlashape.memory.analyze`,
    :func:`xlashape.xla_dump.read_memory_usage_report`) take ``source``:
    ``"path"``, ``"text"`` or ``"lines"`` (a file object or any other
    iterable of lines). (:func:`parse_hlo_module` and :func:`iter_instructions`
    take every ``str`` as text, and only an ``os.PathLike`` as a path.)

    - ``os.PathLike`` (``pathlib.Path``): always a path.
    - ``bytes`` / ``bytearray``: text.
    - ``str``: text if it holds a line break or a NUL, is blank or longer
      than any path (4096 characters), or is one line of what the readers read (an HLO instruction, header or brace, an
      out-of-memory report, a buffer assignment or memory-usage report
      line), even if a file of that name exists; otherwise a path (a missing
      one then raises ``FileNotFoundError`` naming it, rather than being read
      as one line of text). Pass a ``pathlib.Path`` to name any file.

    >>> source_kind("ROOT r = f32[] constant(1)"), source_kind("dump/module.txt")
    ('text', 'path')
    >>> import pathlib; source_kind(pathlib.Path("ENTRY e {")), source_kind(["a = f32[] abs(b)"])
    ('path', 'lines')
    """
    if isinstance(source, _os.PathLike):
        return "path"
    if isinstance(source, (bytes, bytearray)):
        return "text"
    if isinstance(source, str):
        if ("\n" in source or "\r" in source or "\0" in source or len(source) > 4096
                or not source.strip()):
            return "text"
        if _TEXT_LINE.match(source) is not None:
            return "text"
        return "path"
    return "lines"



def iter_instructions(source, *, on_warning: Optional[Callable[[HloWarning], None]] = None
                      ) -> Iterator[Instruction]:
    """Stream the instructions of HLO text: ``source`` is a string, a file
    object, or any iterable of lines; or a path (``os.PathLike``, e.g.
    ``pathlib.Path``), which is read the fastest way, in constant memory:
    a first pass learns how each computation is used (:func:`scan_calls`),
    so every instruction's :attr:`~Instruction.computation_kind` and
    :attr:`~Instruction.result` are known as it is yielded, then the file is
    read by blocks (:class:`TextBlocks`) with a streaming reader (its
    computations are not kept).

    >>> [i.opcode for i in iter_instructions("a = f32[2]{0} parameter(0)\\nb = f32[2]{0} abs(a)")]
    ['parameter', 'abs']
    """
    if isinstance(source, _os.PathLike):
        return _iter_file(source, on_warning)
    if isinstance(source, str):
        source = source.splitlines()
    return HloReader(on_warning).read(source)


def _iter_file(path, on_warning) -> Iterator[Instruction]:
    kinds = scan_calls(path)
    with open_text(path) as f:
        yield from HloReader(on_warning, call_kinds=kinds, streaming=True).read(TextBlocks(f))


def parse_hlo_module(source, *, on_warning: Optional[Callable[[HloWarning], None]] = None
                     ) -> HloModule:
    """Parse HLO module text (or an out-of-memory report) into an :class:`HloModule`.

    ``source`` is a string, a file object or an iterable of lines. Lines that
    cannot be read are skipped and listed in ``module.warnings`` (the first
    :data:`MAX_KEPT_WARNINGS`; ``module.warnings.total`` counts them all).
    """
    if isinstance(source, str):
        source = source.splitlines()
    reader = HloReader(on_warning)
    comps: Dict[Optional[str], Computation] = {}
    order: List[Computation] = []
    for ins in reader.read(source):
        c = comps.get(ins.computation)
        if c is None:
            known = ins._comp
            if known is None or reader.computations.get(known.name) is not known:
                # outside any computation, an out-of-memory report, or a name
                # defined twice: keep the instructions together by name
                known = reader.computations.get(ins.computation) if ins.computation else None
            c = Computation(ins.computation, line=ins.line) if known is None else known
            comps[ins.computation] = c
            order.append(c)
        c.instructions.append(ins)
    # computations without instructions still belong to the module
    for name, c in reader.computations.items():
        if name not in comps:
            comps[name] = c
            order.append(c)
    order.sort(key=lambda c: c.line if c.line else (1 << 62))
    module = HloModule(reader.module_name, reader.module_attributes)
    module.computations = order
    module.warnings = reader.warnings
    module.fused_computations = set(reader.fused_computations)
    module.applied_computations = set(reader.applied_computations)
    module.lines_read = reader.lines_read
    module.mode = reader.mode
    return module


def read_hlo_file(path, **kwargs) -> HloModule:
    """:func:`parse_hlo_module` on a file (``.gz`` files are decompressed)."""
    with open_text(path) as f:
        return parse_hlo_module(TextBlocks(f), **kwargs)


def open_text(path):
    """Open an HLO text file (or out-of-memory report) for reading as text:
    UTF-8, undecodable bytes replaced by U+FFFD, ``.gz`` files decompressed.
    Anything but a regular file is refused (:func:`check_regular_file`)."""
    path = check_regular_file(path)
    if path.endswith(".gz"):
        return open_gzip(path, "rt", encoding="utf-8", errors="replace")
    return open(path, "r", encoding="utf-8", errors="replace")
