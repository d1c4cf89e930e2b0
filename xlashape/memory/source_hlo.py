"""The source of HLO module text: a module's entry computation, as records.

The memory figures need a module's header (``entry_computation_layout``,
``input_output_alias``, ``buffer_donor``) and its entry computation's
parameters and root; the views need the op path and source line of the
instructions they name. :func:`read_module_text` reads both in one pass over
the text, streaming: the bodies of fusions and other computations, most of a
big dump, are skipped by the block reader (:class:`xlashape.hlo_module.EntryBlocks`)
and only scanned for the locations asked for.
"""

from __future__ import annotations

import os
import re
from typing import Callable, Iterable, Iterator, NamedTuple, Optional, Tuple

from ..errors import UnreadableInputError, XlaShapeError
from ..hlo_module import (HloReader, HloWarning, TextBlocks, _calls_in, open_text,
                          parse_buffer_donor, parse_entry_computation_layout, parse_hlo_module,
                          parse_input_output_alias)
from ..live_range import LocationScanner, parse_instruction_text
from ..xla_dump import before_file_of
from .records import CopyFacts, CopyRecord, EntryRecord, ModuleRecords

__all__ = ["read_module_text", "ModuleText", "module_records", "platform_hint",
           "read_module_header", "read_before", "CopyScanner"]

# what XLA:GPU and XLA:CPU write into their modules' custom-call targets and
# backend configs (the compiled text of the corpora: cuBLAS/cuDNN/cuSOLVER
# calls and the stream a GPU op runs on; XLA:CPU's LAPACK calls, its loop
# partitions and its YNNPACK/oneDNN fusions)
_GPU_MARKS = ("operation_queue_id", "__cublas", "__cudnn", "cusolver", "xla.gpu.", "__triton")
_CPU_MARKS = ("outer_dimension_partitions", "lapack_", "__ynn", "__onednn", "xla.cpu.")


def platform_hint(attributes: str) -> Optional[str]:
    """``gpu`` / ``cpu`` when an instruction's attributes (a custom call's
    target, a backend config) are ones only that compiler writes."""
    if any(m in attributes for m in _GPU_MARKS):
        return "gpu"
    if any(m in attributes for m in _CPU_MARKS):
        return "cpu"
    return None


def _entry_only(lines: Iterable[str]) -> Iterator[str]:
    """The lines of a module with those of every computation but the entry
    blanked (line numbers kept): the memory figures need the header and the
    entry's parameters and root only, and in a big dump the fusion bodies
    and other computations are most of the text. A computation is skipped
    from a header line as XLA prints it (at column 0, ending with "{") to
    the "}" at column 0 that closes it; anything else is read."""
    skipping = False
    for line in lines:
        if skipping:
            if line[:1] == "}":
                skipping = False
            yield ""
            continue
        c = line[:1]
        if (c == "%" or c.isalpha()) and line.rstrip().endswith("{") and \
                not line.startswith(("ENTRY", "HloModule")) and \
                "=" not in line.split("(", 1)[0]:
            skipping = True
            yield ""
            continue
        yield line


def _observe(lines: Iterable[str], observe) -> Iterator[str]:
    for line in lines:
        observe(line)
        yield line


class _Entry:
    """The entry (or loose instructions) while streaming; its copies and the
    instructions that pass a buffer on go to ``copies``
    (:class:`CopyScanner`, which knows the fusion bodies that only relayout)."""

    def __init__(self, copies: Optional["CopyScanner"] = None):
        self.rec = EntryRecord()
        self.hint_checks = 0
        self.copies = copies
        self.shapes = {}        # name -> Shape, for the operands of copies

    def add(self, ins) -> None:
        rec = self.rec
        opcode = ins.opcode
        if opcode == "parameter":
            n = ins.parameter_number
            if n is not None:
                rec.params[n] = (ins.name, ins.shape)
        elif (rec.platform_hint is None and self.hint_checks < 256
              and opcode in ("fusion", "custom-call")):
            self.hint_checks += 1
            rec.platform_hint = platform_hint(ins.attributes_text)
        if ins.is_root:
            rec.root = (ins.name, opcode, ins.shape,
                        ins.operand_names if opcode == "tuple" else ())
        rec.last = ins
        copies = self.copies
        if copies is not None:
            self.shapes[ins.name] = ins.shape
            if opcode in _COPY_WATCH:
                copies.entry_instruction(ins, self.shapes)


class _Conditionals:
    """The names of a module's conditional instructions, from its text as it
    streams past (the heap replay's sharing rule asks for them)."""

    def __init__(self):
        self.names = set()

    def feed_block(self, block: str) -> None:
        pos = block.find(" conditional(")
        while pos >= 0:
            start = block.rfind("\n", 0, pos) + 1
            end = block.find("\n", pos)
            if end < 0:
                end = len(block)
            self.feed_line(block[start:end])
            pos = block.find(" conditional(", end)

    def feed_line(self, line: str) -> None:
        if " conditional(" in line:
            m = _INSTR.match(line)
            if m:
                try:
                    if parse_instruction_text(line)[0] == "conditional":
                        self.names.add(m.group(1))
                except XlaShapeError:
                    pass


_INSTR = re.compile(r"\s*(?:ROOT\s+)?%?([\w.\-]+)\s*=")

#: without names to look for, the locations of the last this many instructions
#: are kept while reading (the entry's root and its operands are among them)
_KEEP = 1 << 16


# -- copies ---------------------------------------------------------------------------

_COPY_OPCODES = ("copy", "transpose", "copy-start", "copy-done")
_COPY_HITS = tuple(f" {op}(" for op in _COPY_OPCODES)
#: what the entry's instructions pass on without computing
_FORWARD_OPCODES = ("bitcast", "get-tuple-element", "copy-start", "copy-done")
_COPY_WATCH = frozenset(_COPY_OPCODES + _FORWARD_OPCODES + ("fusion",))
#: a fusion body of more characters than this does more than wrap one copy
_SMALL_BODY = 4096
#: what a fusion body that only relayouts may hold besides its one copy
_RELAYOUT_COMPANIONS = frozenset(("parameter", "bitcast"))


def _instructions_of(text: str):
    """The instructions of a few lines of HLO text (a hit's line, a small
    computation), warnings dropped."""
    reader = HloReader(lambda w: None, call_kinds={}, streaming=True)
    return list(reader.read(text.split("\n")))


def _dimensions(ins) -> Optional[Tuple[int, ...]]:
    if ins.opcode != "transpose":
        return None
    m = _DIMS.search(ins.attributes_text)
    if not m:
        return None
    return tuple(int(x) for x in m.group(1).split(",") if x.strip().isdigit())


_DIMS = re.compile(r"dimensions=\{([\d,\s]*)\}")
_NAME_CHARS = re.compile(r"%?([\w.\-]+)")


def _element_of(name: str, lookup) -> Optional[object]:
    """The shape of operand ``name`` (``lookup(name)``); XLA:TPU writes an
    element of a multi-output instruction's result as ``%sort.7#0``."""
    got = lookup(name)
    if got is None and "#" in name:
        base, _, k = name.rpartition("#")
        whole = lookup(base)
        if whole is not None and whole.is_tuple and k.isdigit() and int(k) < len(
                whole.tuple_shapes):
            got = whole.tuple_shapes[int(k)]
    return got


def _split_element(name: str) -> Tuple[str, Optional[int]]:
    """``("sort.7", 0)`` for ``sort.7#0``; ``(name, None)`` otherwise."""
    base, sep, k = name.rpartition("#")
    if sep and k.isdigit() and base:
        return base, int(k)
    return name, None


def _header_name(line: str) -> Tuple[str, bool]:
    """(name, is the entry) of a computation's header line."""
    text = line.strip()
    entry = text.startswith("ENTRY")
    if entry:
        text = text[5:].lstrip()
    m = _NAME_CHARS.match(text)
    return (m.group(1) if m else ""), entry


class CopyScanner:
    """The copies of a module, collected in the one pass over its text
    (:class:`~xlashape.memory.records.CopyFacts`): fed the text as it
    streams past (:meth:`feed_block` / :meth:`feed_line`, as the op paths'
    scanner is) and the entry's parsed instructions
    (:meth:`entry_instruction`, from the reader of the same pass).

    From the text it finds, cheaply (``str.find`` for the opcodes and for
    ``calls=``): the fusion bodies (``calls=`` callees: a copy inside one is
    not an instruction of its own), the small fusion bodies whose only work
    is one ``copy`` or ``transpose`` (parameters and bitcasts besides: XLA:CPU
    wraps a relayout so), and the copies of the computations other than the
    entry (loop bodies, branches), each parsed alone with its operand's shape
    when its definition is in the same block of text. The entry's are taken
    from the reader, with every operand's shape."""

    def __init__(self):
        self.facts = CopyFacts()
        self.relayouts = {}     # fusion body name -> (opcode, from Shape, to Shape, dimensions)
        self.called = set()     # computations named by calls= (fusion and async bodies)
        self.pending = []       # CopyRecord of computations other than the entry
        self.comp = None        # the open computation's name
        self.entry = False
        self.body = []          # the open computation's text, while it is small
        self.body_len = 0
        # where the open computation's text is (not the entry's): (block, start,
        # end), the blocks themselves (no copy), to find a copy's operand
        self.pieces = []
        self.lines = []         # feed_line's lines not yet fed

    # -- the entry, from the reader ------------------------------------------------

    def entry_instruction(self, ins, shapes) -> None:
        opcode = ins.opcode
        names = ins.operand_names
        first = names[0] if names else None
        forwards = self.facts.forwards
        if first is not None and "#" in first:
            # an element of a multi-output result: a tuple element of it
            base, k = _split_element(first)
            if k is not None:
                forwards.setdefault(first, (base, k))
        if opcode in _FORWARD_OPCODES and first is not None:
            index = None
            if opcode == "get-tuple-element":
                text = ins.attribute("index") or ""
                index = int(text) if text.isdigit() else None
            forwards[ins.name] = (first, index)
        if opcode in _COPY_OPCODES:
            self.facts.copies.append(CopyRecord(ins.name, opcode, None, ins.shape, first,
                                                _element_of(first, shapes.get) if first else None,
                                                dimensions=_dimensions(ins)))
        elif opcode == "fusion" and first is not None:
            for _, callee, _ in _calls_in("fusion", ins.attributes_text):
                got = self.relayouts.get(callee)
                if got is not None:
                    op, frm, to, dims = got
                    self.facts.copies.append(CopyRecord(
                        ins.name, "fusion", None, ins.shape, first,
                        _element_of(first, shapes.get), op, frm, to, dims))
                break

    # -- the text ----------------------------------------------------------------------

    def feed_line(self, line: str) -> None:
        self.lines.append(line)
        if line[:1] == "}":
            self.flush()

    def flush(self) -> None:
        if self.lines:
            block = "\n".join(self.lines)
            self.lines = []
            self.feed_block(block)

    def feed_block(self, block: str) -> None:
        n = len(block)
        pos = 0
        while pos <= n:
            if self.comp is None:
                found = self._header(block, pos)
                if found is None:
                    return
                start, end = found
                self.comp, self.entry = _header_name(block[start:end])
                self.body = [block[start:end]] if not self.entry else []
                self.body_len = end - start
                pos = end + 1
                continue
            if block.startswith("}", pos):
                close = pos
            else:
                close = block.find("\n}", pos)
                if close >= 0:
                    close += 1
            end = n if close < 0 else close
            self._segment(block, pos, end)
            if close < 0:
                return
            self._finish()
            nl = block.find("\n", close)
            pos = n + 1 if nl < 0 else nl + 1

    @staticmethod
    def _header(block: str, pos: int):
        """(start, end) of the next computation header line at or after
        ``pos`` (a line at column 0 that ends with "{"), or None."""
        n = len(block)
        k = pos
        while True:
            k = block.find("{\n", k)
            end = k + 1 if k >= 0 else (n if block.endswith("{") and n > pos else -1)
            if end < 0:
                return None
            start = block.rfind("\n", 0, end - 1) + 1
            if start >= pos:
                line = block[start:end]
                c = line[:1]
                if (c == "%" or c.isalpha()) and not line.startswith("HloModule") and (
                        line.startswith("ENTRY") or "=" not in line.split("(", 1)[0]):
                    return start, end
            if k < 0:
                return None
            k += 2

    def _segment(self, block: str, s: int, e: int) -> None:
        """Text ``block[s:e]`` of the open computation."""
        find = block.find
        if not self.entry:
            self.pieces.append((block, s, e))
        k = find("calls=", s, e)
        while k >= 0:
            m = _NAME_CHARS.match(block, k + 6)
            if m:
                callee = m.group(1)
                self.called.add(callee)
                if not self.entry and callee in self.relayouts:
                    self._hit(block, s, k, callee)
            k = find("calls=", k + 6, e)
        if self.entry:
            return
        for hit in _COPY_HITS:
            k = find(hit, s, e)
            while k >= 0:
                self._hit(block, s, k, None)
                k = find(hit, k + len(hit), e)
        if self.body is not None:
            self.body_len += e - s
            if self.body_len > _SMALL_BODY:
                self.body = None
            else:
                self.body.append(block[s:e])

    def _hit(self, block: str, s: int, k: int, callee: Optional[str]) -> None:
        """A copy (or a fusion calling a relayout body, ``callee``) on the
        line of ``block`` holding position ``k``, in the open computation."""
        start = block.rfind("\n", 0, k) + 1
        end = block.find("\n", k)
        got = _instructions_of(block[start:end if end >= 0 else len(block)])
        if not got:
            return
        ins = got[0]
        opcode = ins.opcode
        if callee is None and opcode not in _COPY_OPCODES:
            return
        if callee is not None and opcode != "fusion":
            return
        names = ins.operand_names
        first = names[0] if names else None
        operand_shape = None
        if first is not None:
            def lookup(name):
                # the definition is earlier in the same computation: in this
                # block before the hit's line, or in the computation's earlier blocks
                key = "%" + name + " = "
                for b, ps, pe in reversed(self.pieces):
                    limit = start if b is block and ps <= start <= pe else pe
                    d = b.rfind(key, ps, limit)
                    if d >= 0 and (d == 0 or b[d - 1] in " \n"):
                        de = b.find("\n", d)
                        defined = _instructions_of(b[d:de if de >= 0 else len(b)])
                        if defined and defined[0].name == name:
                            return defined[0].shape
                return None
            operand_shape = _element_of(first, lookup)
        if callee is None:
            self.pending.append(CopyRecord(ins.name, opcode, self.comp, ins.shape, first,
                                           operand_shape, dimensions=_dimensions(ins)))
        else:
            op, frm, to, dims = self.relayouts[callee]
            self.pending.append(CopyRecord(ins.name, "fusion", self.comp, ins.shape, first,
                                           operand_shape, op, frm, to, dims))

    def _finish(self) -> None:
        """The open computation closed: is it a body that only relayouts?"""
        body = self.body
        if body is not None and not self.entry and any(
                h in piece for piece in body for h in (" copy(", " transpose(")):
            inner = _instructions_of("\n".join(body) + "\n}")
            shapes = {i.name: i.shape for i in inner}
            copies = [i for i in inner if i.opcode in ("copy", "transpose")]
            if len(copies) == 1 and all(i.opcode in _RELAYOUT_COMPANIONS for i in inner
                                        if i is not copies[0]):
                c = copies[0]
                names = c.operand_names
                frm = shapes.get(names[0]) if names else None
                self.relayouts[self.comp] = (c.opcode, frm, c.shape, _dimensions(c))
        self.comp = None
        self.entry = False
        self.body = []
        self.body_len = 0
        self.pieces = []

    def result(self) -> CopyFacts:
        """The copies: the entry's, then those of other computations that are
        not fusion bodies."""
        self.flush()
        facts = self.facts
        called = self.called
        facts.copies.extend(r for r in self.pending if r.computation not in called)
        self.pending = []
        return facts


class ModuleText(NamedTuple):
    """What one pass over a module's text gives: its ``name``, the ``entry``
    (:class:`~xlashape.memory.records.EntryRecord`), the ``locations`` asked
    for, the names of its ``conditionals``, and the whole ``module``
    (:class:`~xlashape.hlo_module.HloModule`) when it was parsed whole."""

    name: Optional[str]
    entry: EntryRecord
    locations: dict
    conditionals: set
    module: Optional[object]
    #: the module's copies (:class:`~xlashape.memory.records.CopyFacts`)
    copies: Optional[CopyFacts] = None


def read_module_text(lines, warn: Callable[[HloWarning], None], *, names=None,
                     where: Optional[str] = None, full: bool = False) -> ModuleText:
    """One pass over a module's text (:class:`ModuleText`): ``lines`` is a
    :class:`~xlashape.hlo_module.TextBlocks` (an ``EntryBlocks`` unless
    ``full``) over an open file, or any iterable of lines; ``names`` (a set)
    are the instructions whose op paths and source lines to collect; without
    it, those of the entry's parameters, its root and the root's operands
    (from the last :data:`_KEEP` located instructions: XLA prints the entry
    last). ``full``: parse every computation (the sharing rule of a module
    whose values a conditional defines needs its branches); else the entry
    alone is parsed, the rest only scanned.

    Raises :class:`~xlashape.UnreadableInputError` when the text holds no
    HLO instruction, or is an out-of-memory report."""
    scanner = LocationScanner(names) if names is not None else LocationScanner(keep=_KEEP)
    conditionals = _Conditionals()
    copies = CopyScanner()

    def observe_block(block):
        scanner.feed_block(block)
        conditionals.feed_block(block)
        copies.feed_block(block)

    def observe_line(line):
        scanner.feed_line(line)
        conditionals.feed_line(line)
        copies.feed_line(line)

    if isinstance(lines, TextBlocks):
        lines.observer = observe_block
    else:
        lines = _observe(lines, observe_line)
        if not full:
            lines = _entry_only(lines)
    info = _Entry(copies)
    loose = _Entry()      # instructions outside any computation (a fragment)
    instructions = 0
    module = None
    if full:
        module = parse_hlo_module(lines, on_warning=warn)
        for comp in module.computations:
            for ins in comp.instructions:
                instructions += 1
                if comp.is_entry:
                    info.add(ins)
                elif comp.name is None:
                    loose.add(ins)
        name, attrs, mode, warnings = module.name, module.attributes, module.mode, module.warnings
    else:
        # no call graph: the figures need the entry only, whose kind ENTRY says
        reader = HloReader(warn, call_kinds={}, streaming=True)
        for ins in reader.read(lines):
            instructions += 1
            comp = ins._comp
            if comp is None:
                loose.add(ins)
            elif comp.is_entry:
                info.add(ins)
        name, attrs, mode, warnings = (reader.module_name, reader.module_attributes, reader.mode,
                                       reader.warnings)
    if mode == "oom":
        raise UnreadableInputError("the input is an out-of-memory report, not an HLO module")
    if instructions == 0 and not attrs.get("entry_computation_layout"):
        skipped = warnings.total
        raise UnreadableInputError(
            f"no HLO instructions found in {where or 'the input'}" +
            (f" ({skipped} lines could not be read; the first: {warnings[0]})" if skipped else ""))
    r = info.rec if (info.rec.params or info.rec.root or info.rec.last) else loose.rec
    if r.root is None and r.last is not None:
        ins = r.last
        r.root = (ins.name, ins.opcode, ins.shape,
                  ins.operand_names if ins.opcode == "tuple" else ())
    r.last = None
    r.instructions = instructions
    r.attributes = dict(attrs)
    try:
        r.aliases = parse_input_output_alias(attrs.get("input_output_alias", ""))
        r.donors = parse_buffer_donor(attrs.get("buffer_donor", ""))
    except (ValueError, XlaShapeError):  # pragma: no cover - the patterns cannot fail
        pass
    found = scanner.result()
    if names is None:
        wanted = {n for n, _ in r.params.values()}
        if r.root is not None:
            wanted.add(r.root[0])
            wanted.update(r.root[3])
        found = {n: loc for n, loc in found.items() if n in wanted}
    return ModuleText(name, r, found, conditionals.names, module, copies.result())


def module_records(lines, warn, source: str, path: Optional[str], *, names=None) -> ModuleRecords:
    """:class:`ModuleRecords` of one module text: its entry, and the
    locations of ``names`` (default: of its entry's parameters, root and
    root operands)."""
    text = read_module_text(lines, warn, names=names, where=path)
    rec = ModuleRecords(text.name, source, path)
    rec.entry = text.entry
    rec.locations = text.locations
    rec.copies = text.copies
    if path is not None:
        read_before(rec, before_file_of(path))
    return rec


def read_before(rec: ModuleRecords, path: Optional[str]) -> None:
    """``rec.before``: the header of the module before optimizations (the
    donations jax marked), from its text at ``path`` (its first line only);
    a file that cannot be read is a warning of ``rec``."""
    if path is None:
        return
    try:
        with open_text(path) as f:
            rec.before = read_module_header(f, path)
    except (OSError, UnicodeDecodeError, XlaShapeError) as e:
        rec.warnings.append(f"the module before optimizations ({os.path.basename(path)}) could "
                            f"not be read: {e}")


def read_module_header(lines, where: Optional[str] = None) -> Optional[EntryRecord]:
    """The header of a module (its ``HloModule`` line: the entry computation
    layout, ``input_output_alias`` and ``buffer_donor``) as an
    :class:`~xlashape.memory.records.EntryRecord` without instructions: what
    the audit needs of the module before optimizations, where jax marks its
    donations. Reads ``lines`` (an open file, or any iterable of lines) only
    up to that line; ``None`` when it is not among the first lines."""
    for count, line in enumerate(lines):
        if line.startswith("HloModule"):
            reader = HloReader(lambda w: None, call_kinds={}, streaming=True)
            for _ in reader.read([line.rstrip("\n")]):
                pass
            attrs = reader.module_attributes
            rec = EntryRecord()
            rec.attributes = dict(attrs)
            try:
                rec.aliases = parse_input_output_alias(attrs.get("input_output_alias", ""))
                rec.donors = parse_buffer_donor(attrs.get("buffer_donor", ""))
            except (ValueError, XlaShapeError):  # pragma: no cover - the patterns cannot fail
                pass
            ecl = attrs.get("entry_computation_layout")
            if ecl:
                try:
                    got = parse_entry_computation_layout(ecl)
                    rec.layout = (got.parameters, got.result)
                except XlaShapeError:
                    rec.layout = None
            return rec
        if count > 64:
            return None
    return None
