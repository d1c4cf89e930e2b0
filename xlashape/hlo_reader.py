"""Read HLO module text line by line: :class:`HloReader`, a state machine fed
one line at a time that yields :class:`~xlashape.hlo_model.Instruction`
objects as their statements complete.

It reads what real dumps contain: nested computations and fusions, tuples
with ``/*index=N*/`` comments, tokens, attribute blocks such as
``metadata={...}`` or ``backend_config={...}`` holding braces and quoted
strings, ``//`` and ``/* */`` comments, ``ENTRY``, the module header, the
stack-frame tables newer XLA appends, and instructions written across
several lines by hand (as XLA's documentation writes them). It reads HLO
only: any other text (an out-of-memory report is read by
:mod:`xlashape.oom_report`) is lines it skips, each reported with its
number and the reason (:class:`~xlashape.hlo_warnings.HloWarning`).

Its fast lane is compiled (``xlashape/_hloscan.pyx``): every line that is a
complete one-line instruction as XLA prints it, a computation header, ``}``
or a blank line is read in C, straight from blocks of text
(:class:`~xlashape.hlo_blocks.TextBlocks`); the rest comes to the Python
code here, which shares the scanner's state.
"""

from __future__ import annotations

import os as _os
import re
from itertools import islice
from typing import Callable, Dict, Iterable, Iterator, List, Optional, Tuple

from . import hlo_text
from .errors import HloParseError
from .hlo_blocks import EntryBlocks, TextBlocks
from .hlo_model import _CALLER_OPCODES, Computation, Instruction, _add_call_kind, _calls_in
from .hlo_syntax import (_SHAPE_CACHE_LIMIT, _Brackets, _balanced, _blank_comments, _match_close,
                         _shape_at, _skip_ws, _strip_line_comment, _split_top)
from .hlo_warnings import HloWarning, WarningList, _clip
from .shape import Shape

try:
    from ._hloscan import configure as _configure, feed_simple_lines as _feed_simple_lines
except ImportError:  # pragma: no cover - only without a build
    _configure = _feed_simple_lines = None

__all__ = ["HloReader", "uses_compiled_scanner"]

# -- the statements of a module --------------------------------------------------

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
_STACK_SECTIONS = frozenset(("FileNames", "FunctionNames", "FileLocations", "StackFrames"))
# An entry of a stack-frame section: a number, then a quoted name or a {...} record.
_SECTION_ENTRY = re.compile(r"\s*\d+\s+[\"{]")
# A comment other than the /*index=N*/ XLA prints inside long tuples.
_OTHER_COMMENT = re.compile(r"/\*(?!index=\d+\*/)")
_WS_RUN = re.compile(r"\s*")

_CHUNK_LINES = 4096
_MAX_STATEMENT_LINES = 2000
_MAX_STATEMENT_CHARS = 1 << 24


class _Incomplete(Exception):
    """The statement needs more lines. ``attributes``: where the attributes
    start, when it is they that continue (their brackets do not balance yet,
    or they end with a comma); ``operands``: the operand list does not close."""

    def __init__(self, attributes: Optional[int] = None, operands: bool = False):
        super().__init__()
        self.attributes = attributes
        self.operands = operands


class _Malformed(Exception):
    def __init__(self, message: str, position: int = 0):
        super().__init__(message)
        self.message = message
        self.position = position


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
    set of :data:`~xlashape.hlo_model.COMPUTATION_KINDS`) and :attr:`lines_read` describe what was
    seen.

    XLA prints a computation before the instructions that call it, so while
    streaming, how a computation is used is known only once its caller has
    been read. ``call_kinds`` (from :func:`~xlashape.hlo_calls.scan_calls`, a fast first pass
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
        self._use_fast = True
        #: an ``_hloscan.InstructionSink`` the compiled scanner offers each
        #: instruction it reads before making an Instruction of it (``xlashape
        #: hlo --json`` sets one: cli/_hlo_json.pyx); None: every instruction
        #: is yielded
        self.instruction_sink = None
        self.lines_read = 0

    # -- shapes --------------------------------------------------------------
    def shape_at(self, text: str, pos: int) -> Tuple[Shape, int]:
        """Parse the shape starting at ``text[pos]``: ``(shape, end)``, cached."""
        return _shape_at(text, pos, self._cache)

    # -- warnings ------------------------------------------------------------
    def _warn(self, line: int, message: str) -> None:
        w = HloWarning(line, message)
        self.warnings.append(w)
        if self._on_warning is not None:
            self._on_warning(w)

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
    # line, text]), a stack-frame section being skipped (``_skipping``), a
    # /* comment still open (``_in_comment``). ``read`` drives it; when the compiled scanner
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
            except _Incomplete as e:
                self._pending = _new_pending(lineno, line.strip(), line, e)
            except _Malformed as e:
                self._warn(lineno, f"{e.message} (column {e.position + 1})")
            return out
        if s.startswith("HloModule"):
            m = _MODULE.match(s)
            if m:
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
                    return out
        if s in _STACK_SECTIONS:
            self._skipping = True
            self._current = None
            return out

        self._warn(lineno, "not an HLO instruction, computation header or '}': " + _clip(s))
        return out


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



def _new_pending(line: int, first: str, parsed: str, e: "_Incomplete") -> list:
    """The reader's record of an instruction that continues on the next
    lines: [its first line, its lines, _Brackets of the joined lines, their
    length, _Brackets of its attributes when they are what continues (from
    ``parsed``, the text that raised ``e``), whether its operand list is what
    does not close]."""
    return [line, [first], _Brackets(first), len(first),
            None if e.attributes is None else _Brackets(parsed[e.attributes:]), e.operands]



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


