"""Readers for the files of an XLA dump that say *when* buffers live, which
values are read where, and *where* in the user's program they come from.

``*-live-range.txt`` (XLA's ``HloLiveRange`` of the scheduled module):

- ``InstructionSequence``: the schedule, one ``T:name`` line per instruction
  (``T`` is the position in program order, nested computations flattened in);
- ``BufferLiveRange``: every value as ``label:start-end`` (``label`` is the
  defining instruction plus the shape index, ``while.2{1}``; both ends
  inclusive);
- ``Live ranges at T (peak)`` and a "Stack trace breakdown for peak usage":
  XLA's own peak of that file, which counts every value (tuple tables and
  thread-local scalars too), so it is *not* ``memory_analysis()``'s peak.

The module text (``*.txt``) carries, per instruction, ``metadata={op_name=...
source_file=... source_line=... stack_frame_id=N}`` and, at its top, the
``FileNames`` / ``FunctionNames`` / ``FileLocations`` / ``StackFrames``
tables that ``stack_frame_id`` points into. :func:`read_locations` turns both
into an op path and a ``file:line`` per instruction.

``*-buffer-assignment-values.txt`` (the dataflow values the buffer assignment
placed): per value its positions, its uses (instruction, operand number,
index) and its defining instruction as XLA printed it;
:func:`read_values_file` keeps them as :class:`ValueRecord` (what the peak's
sharing rule reads: :mod:`xlashape.peak`).

The readers stream their input line by line (memory stays proportional to
the number of values / instructions, not to the file's size) and never raise
on a malformed line: it is skipped.
"""

import re
from collections import OrderedDict
from itertools import chain
from typing import Dict, Iterable, List, NamedTuple, Optional, Tuple

from .errors import ShapeValueError
from ._files import open_text
from .hlo_blocks import lines_holding
from .hlo_syntax import _match_close
from .hlo_text import DQ_STRING, unescape_string

__all__ = ["LiveRanges", "read_live_ranges", "Location", "read_locations", "LocationScanner",
           "ValueUse", "ValueRecord", "read_values_file", "parse_instruction_text"]

# numbers in these files are int64: at most 19 digits (a longer run of digits
# is a malformed line, skipped; int() of thousands of digits raises ValueError)
#: the most program positions a live-range file may have (16M: 128 MB an
#: int64 array over them)
MAX_POSITIONS = 1 << 24

_RANGE = re.compile(r"\s*(\S.*?):(-?\d{1,19})-(-?\d{1,19})\s*$")
_PEAK = re.compile(r"\s*Live ranges at (\d{1,19}) \(peak\):")
_PEAK_LINE = re.compile(r"\s*(\S.*?): (\d{1,19}) bytes")
_MAX = re.compile(r"HloLiveRange \(max (\d{1,19})\)")
_HEADER_STARTS = frozenset("HIBLS")


class LiveRanges:
    """One ``*-live-range.txt``: ``sequence`` (instruction names in program
    order), ``ranges`` (``label -> (start, end)``, labels always carry their
    shape index, ``{}`` for a whole value), ``max_time``, and XLA's own peak
    of this file: ``xla_peak_time`` and ``xla_peak_buffers`` (``(label,
    bytes)`` pairs, as listed)."""

    __slots__ = ("sequence", "ranges", "max_time", "xla_peak_time", "xla_peak_buffers")

    def __init__(self):
        self.sequence: List[str] = []
        self.ranges: Dict[str, Tuple[int, int]] = {}
        self.max_time = 0
        self.xla_peak_time: Optional[int] = None
        self.xla_peak_buffers: List[Tuple[str, int]] = []

    @property
    def xla_peak_bytes(self) -> Optional[int]:
        """The sum this file prints as its peak (``None`` if it has none)."""
        if self.xla_peak_time is None:
            return None
        return sum(b for _, b in self.xla_peak_buffers)

    def instruction_at(self, time: int) -> Optional[str]:
        if 0 <= time < len(self.sequence):
            return self.sequence[time]
        return None

    def __repr__(self):
        return (f"<LiveRanges {len(self.sequence)} instructions, {len(self.ranges)} values, "
                f"XLA's peak at {self.xla_peak_time}>")


def label_key(name: str, index: Tuple[int, ...]) -> str:
    """The live-range file's label of a value: ``name{i,j}`` (``name{}``)."""
    return name + "{" + ",".join(str(i) for i in index) + "}"


def read_live_ranges(source) -> LiveRanges:
    """Read a ``*-live-range.txt`` (a path, or an iterable of lines)."""
    if isinstance(source, (str, bytes)) or hasattr(source, "__fspath__"):
        with open_text(source) as f:
            return _read_live_ranges(f)
    return _read_live_ranges(source)


def _is_header(s: str) -> bool:
    """Whether a stripped line is one the reader takes as a section header."""
    return (s.startswith(("HloLiveRange", "Stack trace breakdown")) or s == "InstructionSequence:"
            or s == "BufferLiveRange:" or (s.startswith("Live ranges at") and _PEAK.match(s) is not None))


def _read_ranges(lines, ranges: Dict[str, Tuple[int, int]]) -> Optional[str]:
    """The ``BufferLiveRange`` lines into ``ranges`` (a loop of its own: the
    section has a line per value); returns the header line that ends it."""
    headers = _HEADER_STARTS
    for line in lines:
        s = line.strip()
        if not s:
            continue
        if s[0] in headers and _is_header(s):
            return line
        # "label:start-end" (str methods)
        label, _, span = s.rpartition(":")
        start, _, end = span.partition("-")
        try:
            r = (int(start), int(end))
        except ValueError:
            m = _RANGE.match(line)   # a negative start ("-1-5") or a malformed line
            if not m:
                continue
            label, r = m.group(1), (int(m.group(2)), int(m.group(3)))
        if not label:
            continue
        if label[-1] != "}":
            label += "{}"
        ranges[label] = r
    return None


def _read_live_ranges(lines: Iterable[str]) -> LiveRanges:
    lr = LiveRanges()
    section = None
    lines = iter(lines)
    pending = None
    while True:
        if pending is not None:
            line, pending = pending, None
        else:
            line = next(lines, None)
            if line is None:
                break
        s = line.strip()
        if not s:
            continue
        if s[0] not in _HEADER_STARTS:
            pass
        elif s.startswith("HloLiveRange"):
            m = _MAX.search(s)
            if m:
                lr.max_time = int(m.group(1))
            continue
        elif s == "InstructionSequence:":
            section = "seq"
            continue
        elif s == "BufferLiveRange:":
            section = "ranges"
            continue
        elif s.startswith("Live ranges at"):
            m = _PEAK.match(line)
            if m:
                section = "peak"
                lr.xla_peak_time = int(m.group(1))
                continue
        elif s.startswith("Stack trace breakdown"):
            section = None
            continue
        if section == "seq":
            pos, _, name = s.partition(":")
            if not pos.isdigit() or len(pos) > 19 or not name:
                continue
            t = int(pos)
            if t == len(lr.sequence):
                lr.sequence.append(name)
            elif t < 1 << 24:
                while len(lr.sequence) < t:
                    lr.sequence.append("")
                lr.sequence.append(name)
        elif section == "ranges":
            pending = _read_ranges(chain((line,), lines), lr.ranges)
        elif section == "peak":
            m = _PEAK_LINE.match(line)
            if m:
                label = m.group(1)
                if not label.endswith("}"):
                    label += "{}"
                lr.xla_peak_buffers.append((label, int(m.group(2))))
    if lr.max_time == 0:
        lr.max_time = max(len(lr.sequence), max((e for _, e in lr.ranges.values()), default=0))
    # the heap is an array over program positions: a position far past the
    # schedule (a damaged file) would ask for terabytes
    last = max(lr.max_time, len(lr.sequence))
    bad = next((label for label, (s, e) in lr.ranges.items()
                if s < -1 or e < s or e > last), None)
    if lr.max_time > MAX_POSITIONS or bad is not None:
        raise ShapeValueError(
            "the live-range file's positions are out of range: "
            + (f"{bad} {lr.ranges[bad]} in a schedule of {last} positions" if bad is not None
               else f"{lr.max_time} positions (at most {MAX_POSITIONS})"))
    return lr


class Location(NamedTuple):
    """Where an instruction comes from: its ``op_name`` (JAX's op path, e.g.
    ``jit(f)/dot_general``) and ``source`` (``file:line`` of the innermost
    frame), each ``None`` when the module text does not say."""

    op_name: Optional[str]
    source: Optional[str]


_INSTR = re.compile(r"\s*(?:ROOT\s+)?%?([\w.\-]+)\s*=")
_META = re.compile(r"metadata=\{([^{}]*)\}")
_KV = re.compile(r'(\w+)=(' + DQ_STRING + r'|[^\s}]+)')
_TABLE_ROW = re.compile(r"\s*(\d{1,19})\s+(.*)$")    # the rest: .rstrip() (not \s*$)


def _kv(text: str) -> Dict[str, str]:
    """``key=value`` pairs of a ``metadata={...}`` or a table row; quoted
    values unescaped as XLA's parser reads them (XLA prints them through
    ``absl::CEscape``: JAX's ``params['w']`` is ``params[\\'w\\']`` there)."""
    out = {}
    for m in _KV.finditer(text):
        v = m.group(2)
        if v.startswith('"'):
            v = unescape_string(v[1:-1])
        out[m.group(1)] = v
    return out


def read_locations(source, names=None) -> Dict[str, Location]:
    """``instruction name -> Location`` for every instruction of a module
    text (a path, or an iterable of lines) that has ``op_name`` or a source
    position -- only those in ``names`` when it is given (memory then stays
    proportional to ``names``); ``stack_frame_id`` is resolved through the
    module's ``StackFrames`` tables."""
    if isinstance(source, (str, bytes)) or hasattr(source, "__fspath__"):
        with open_text(source) as f:
            return _read_locations(f, names)
    return _read_locations(source, names)


def _read_locations(lines: Iterable[str], names=None) -> Dict[str, Location]:
    scanner = LocationScanner(names)
    for line in lines:
        scanner.feed_line(line)
    return scanner.result()


_TABLES = ("FileNames", "FunctionNames", "FileLocations", "StackFrames")


class LocationScanner:
    """:func:`read_locations` fed as the text streams past, so that the pass
    that reads a module for another purpose collects the op paths and source
    lines too: :meth:`feed_line` for lines, :meth:`feed_block` for blocks of
    whole lines (only the lines that can hold a location are looked at), then
    :meth:`result`. ``names``: only these instructions (``None``: all);
    ``keep``: with ``names=None``, at most this many instructions, the last
    ones read (the entry computation, which XLA prints last, and its root's
    operands, in a module too big to keep every location of)."""

    def __init__(self, names=None, keep: Optional[int] = None):
        self.names = names
        self.keep = keep
        self.files: Dict[int, str] = {}
        self.locations: Dict[int, Tuple[int, int]] = {}
        self.frames: Dict[int, int] = {}
        # with keep, the oldest entry leaves first: an OrderedDict does that in
        # constant time (a dict's first entry, once entries before it were
        # deleted, is found by walking over their holes: 12 of the 12.3 CPU s
        # of `memory --json` on a 100 MB module)
        self.out: Dict[str, Location] = {} if keep is None else OrderedDict()
        self.pending: Dict[str, Tuple[Optional[str], int]] = (
            {} if keep is None else OrderedDict())
        self.table: Optional[str] = None

    def feed_block(self, block: str) -> None:
        if self.table is not None or any(t in block for t in _TABLES):
            for line in block.split("\n"):
                self.feed_line(line)
            return
        instruction = self._instruction
        for line in lines_holding(block, "metadata={"):
            instruction(line)

    def feed_line(self, line: str) -> None:
        table = self.table
        if table is not None:
            s = line.strip()
            if not s:
                self.table = None
                return
            m = _TABLE_ROW.match(line)
            if m:
                key, rest = int(m.group(1)), m.group(2).rstrip()
                if table == "FileNames":
                    self.files[key] = unescape_string(rest.strip('"'))
                elif table == "FileLocations":
                    kv = _kv(rest)
                    try:
                        self.locations[key] = (int(kv.get("file_name_id", "0")),
                                               int(kv.get("line", "0")))
                    except ValueError:
                        pass
                elif table == "StackFrames":
                    kv = _kv(rest)
                    try:
                        self.frames[key] = int(kv.get("file_location_id", "0"))
                    except ValueError:
                        pass
                return
            self.table = None
        s = line.strip()
        if s in _TABLES:
            self.table = s
            return
        if "metadata={" in line:
            self._instruction(line)

    def _instruction(self, line: str) -> None:
        """An instruction's line holding ``metadata={``."""
        m = _INSTR.match(line)
        names = self.names
        if not m or (names is not None and m.group(1) not in names):
            return
        mm = _META.search(line)
        if not mm:
            return
        text = mm.group(1)
        if "\\" in text:
            kv = _kv(text)
        else:   # no escapes: quoted values lose their quotes and nothing else
            kv = dict(_KV.findall(text))
            for key in ("op_name", "source_file", "source_line", "stack_frame_id"):
                v = kv.get(key)
                if v is not None and v[:1] == '"':
                    kv[key] = v[1:-1]
        op = kv.get("op_name")
        name = m.group(1)
        if "source_file" in kv:
            src = kv["source_file"] + (":" + kv["source_line"] if "source_line" in kv else "")
            self._put(self.out, name, Location(op, src))
        elif "stack_frame_id" in kv:
            try:
                self._put(self.pending, name, (op, int(kv["stack_frame_id"])))
            except ValueError:
                self._put(self.out, name, Location(op, None))
        elif op is not None:
            self._put(self.out, name, Location(op, None))

    def _put(self, table: dict, name: str, value) -> None:
        keep = self.keep
        if keep is not None:
            table.pop(name, None)
            if len(table) >= keep:
                table.popitem(last=False)      # the oldest
        table[name] = value

    def result(self) -> Dict[str, Location]:
        out = dict(self.out)
        for name, (op, frame) in self.pending.items():
            src = None
            loc = self.locations.get(self.frames.get(frame, -1))
            if loc is not None and loc[0] in self.files:
                src = f"{self.files[loc[0]]}:{loc[1]}"
            out[name] = Location(op, src)
        return out


class ValueUse(NamedTuple):
    """One use of a value: the ``instruction`` that reads it, as its
    ``operand`` number, at ``index`` in that operand's shape."""

    instruction: str
    operand: int
    index: Tuple[int, ...]


class ValueRecord(NamedTuple):
    """One value of a ``*-buffer-assignment-values.txt``: its ``positions``
    (``(instruction, shape index)`` pairs: where the value appears, its
    defining instruction first), its ``uses`` (:class:`ValueUse`), and its
    defining instruction as XLA printed it: ``opcode``, ``operands`` (names,
    in order) and, for a custom-call, its ``target`` (``custom_call_target``;
    ``""`` otherwise)."""

    positions: Tuple[Tuple[str, Tuple[int, ...]], ...]
    uses: Tuple[ValueUse, ...]
    opcode: str
    operands: Tuple[str, ...]
    target: str


def read_values_file(source) -> Dict[int, ValueRecord]:
    """``value id -> ValueRecord`` from a ``*-buffer-assignment-values.txt``
    (a path, or an iterable of lines): XLA's dataflow values with their
    positions, uses and defining instructions (what the heap simulator's
    sharing rule and memory-space assignment's trace need; see
    :mod:`xlashape.peak`). Malformed lines are skipped."""
    if isinstance(source, (str, bytes)) or hasattr(source, "__fspath__"):
        with open_text(source) as f:
            return _read_values_file(f)
    return _read_values_file(source)


_NAME_REF = re.compile(r"%([\w.\-]+)")
_TARGET = re.compile(r'custom_call_target="([^"]*)"')
_USE = re.compile(r"(\S+), operand (\d{1,9})(?: \{([\d,]*)\})?$")


def _index(text: str) -> Tuple[int, ...]:
    return tuple(int(x) for x in text.split(",") if x.strip().isdigit() and len(x.strip()) < 10)


def parse_instruction_text(text: str) -> Tuple[str, Tuple[str, ...], str]:
    """``(opcode, operand names, attributes)`` of one instruction as XLA
    prints it (``%name = shape opcode(operands), attributes``); ``("", (),
    "")`` if it does not parse."""
    eq = text.find("= ")
    if eq < 0:
        return "", (), ""
    pos = eq + 2
    while pos < len(text) and text[pos] == " ":
        pos += 1
    if text.startswith("(", pos):          # a tuple shape
        pos = _match_close(text, pos)
        if pos < 0:
            return "", (), ""
    else:
        sp = text.find(" ", pos)
        if sp < 0:
            return "", (), ""
        pos = sp
    while pos < len(text) and text[pos] == " ":
        pos += 1
    paren = text.find("(", pos)
    opcode = text[pos:paren] if paren > pos else ""
    if not opcode or not all(c.isalnum() or c == "-" for c in opcode):
        return "", (), ""
    end = _match_close(text, paren)
    if end < 0:
        return opcode, (), ""
    operands = tuple(_NAME_REF.findall(text, paren, end))
    return opcode, operands, text[end:].lstrip(", ").rstrip()


def _read_values_file(lines: Iterable[str]) -> Dict[int, ValueRecord]:
    out: Dict[int, ValueRecord] = {}
    current = None
    positions: list = []
    uses: list = []
    section = None

    def flush(line_text: str) -> None:
        opcode, operands, attributes = parse_instruction_text(line_text)
        target = ""
        if opcode == "custom-call":
            m = _TARGET.search(attributes)
            target = m.group(1) if m else ""
        out[current] = ValueRecord(tuple(positions), tuple(uses), opcode, operands, target)

    for line in lines:
        c = line[:1]
        if c == "<":
            if current is not None and current not in out:
                flush("")
            end = line.find(" ")
            try:
                current = int(line[1:end]) if 0 < end < 21 else None
            except ValueError:
                current = None
            positions, uses, section = [], [], None
        elif c != " " or current is None:
            continue
        elif line.startswith(" positions:"):
            section = "positions"
        elif line.startswith(" uses:"):
            section = "uses"
        elif line.startswith(" from instruction:"):
            flush(line[len(" from instruction:"):].strip())
            current = None
        elif section == "positions":
            name, _, index = line.strip().partition(" ")
            if name:
                positions.append((name, _index(index.strip("{} \n"))))
        elif section == "uses":
            m = _USE.match(line.strip())
            if m:
                uses.append(ValueUse(m.group(1), int(m.group(2)), _index(m.group(3) or "")))
    if current is not None and current not in out:
        flush("")
    return out
