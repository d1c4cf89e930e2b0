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
from typing import Callable, Dict, Iterable, Iterator, NamedTuple, Optional, Tuple

from ..allocation_kinds import library_of
from ..errors import UnreadableInputError, XlaShapeError
from .._files import open_text
from ..hlo_blocks import TextBlocks, lines_holding
from ..hlo_model import parse_buffer_donor, parse_input_output_alias
from ..hlo_module import parse_hlo_module
from ..hlo_reader import HloReader
from ..hlo_syntax import _match_close
from ..hlo_text import parse_shape_prefix
from ..hlo_warnings import HloWarning
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
                if "sharding=" in ins.attributes_text:
                    sharding = ins.attribute("sharding")
                    if sharding:
                        rec.shardings[n] = sharding
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
            if opcode in _COPY_WATCH and (opcode != "fusion" or copies.relayouts):
                copies.entry_instruction(ins, self.shapes)


class _Conditionals:
    """The names of a module's conditional instructions, from its text as it
    streams past (the heap replay's sharing rule asks for them)."""

    def __init__(self):
        self.names = set()

    def feed_block(self, block: str) -> None:
        for line in lines_holding(block, " conditional("):
            self.feed_line(line)

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


class LibraryCallScanner:
    """The custom calls to cuBLAS and cuDNN of a module
    (:data:`xlashape.allocation_kinds.LIBRARY_TARGETS`), collected in the one
    pass over its text: ``calls`` maps each one's name to its target and the
    number of elements of its result tuple (the last one is the library's
    workspace). A block costs one ``str.find`` unless it holds such a call."""

    _MARK = 'custom_call_target="__cu'

    def __init__(self):
        self.calls: Dict[str, Tuple[str, int]] = {}

    def feed_block(self, block: str) -> None:
        for line in lines_holding(block, self._MARK):
            self.feed_line(line)

    def feed_line(self, line: str) -> None:
        k = line.find(self._MARK)
        if k < 0:
            return
        target = line[k + 20: line.find('"', k + 20)]
        if library_of(target) is None:
            return
        m = _INSTR.match(line)
        if m is None:
            return
        try:
            shape, _ = parse_shape_prefix(line, m.end())
        except XlaShapeError:
            return
        self.calls[m.group(1)] = (target, len(shape.tuple_shapes) if shape.is_tuple else 0)

#: without names to look for, the locations of the last this many instructions
#: are kept while reading (the entry's root and its operands are among them)
_KEEP = 1 << 16


# -- copies ---------------------------------------------------------------------------

_COPY_OPCODES = ("copy", "transpose", "copy-start", "copy-done")
#: what follows " copy" in a copy's line: the opcode's end
_COPY_TAILS = ("(", "-start(", "-done(")
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


def _header_line(block: str, h: int):
    """(start, end) of the line of ``block`` whose "{" is at ``h`` when it is
    a computation header as XLA prints one (at column 0, ending with "{";
    not ``HloModule``, no "=" before its parameters), else None."""
    start = block.rfind("\n", 0, h) + 1
    line = block[start:h + 1]
    c = line[:1]
    if (c == "%" or c.isalpha()) and not line.startswith("HloModule") and (
            line.startswith("ENTRY") or "=" not in line.split("(", 1)[0]):
        return start, h + 1
    return None


def _header_before(block: str, k: int):
    """(start, end) of the last computation header line of ``block`` before
    position ``k`` (``k = len(block)``: the block's last line counts), or None."""
    n = len(block)
    end = k
    if k >= n and block.endswith("{"):
        got = _header_line(block, n - 1)
        if got is not None:
            return got
        end = n - 1
    while True:
        h = block.rfind("{\n", 0, end)
        if h < 0:
            return None
        got = _header_line(block, h)
        if got is not None:
            return got
        end = h + 1


def _close_at(block: str, pos: int) -> Optional[int]:
    """Where the line that closes the computation open at ``pos`` starts (a
    line starting with "}"), or None when it is not in ``block``."""
    if block.startswith("}", pos):
        return pos
    k = block.find("\n}", pos)
    return None if k < 0 else k + 1


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

    A block costs a few ``str.find`` calls unless it holds a copy: the
    ``calls=`` callees (fusion and async bodies: a copy inside one is not an
    instruction of its own), and the four copy opcodes. Only a line holding
    one is parsed, with the line defining its operand (searched backwards in
    its computation, whose blocks are kept by reference until it closes);
    a small computation holding a copy or transpose is parsed whole when it
    closes, to tell whether it is a fusion body that only relayouts (one
    ``copy`` or ``transpose``, parameters and bitcasts besides: XLA:CPU wraps
    a relayout so). The entry's copies come from the reader, with every
    operand's shape. XLA prints a computation before its callers, so a
    relayout body is known before the fusions that call it are read."""

    def __init__(self):
        self.facts = CopyFacts()
        self.relayouts = {}     # fusion body name -> (opcode, from Shape, to Shape, dimensions)
        self.called = set()     # those of pending_comps named by calls= (fusion, async bodies)
        self.pending = []       # CopyRecord of computations other than the entry
        self.pending_comps = set()
        # the computation open at the end of the last block: (name, is the
        # entry, its text so far as (block, start, end) references, holds a
        # copy or transpose), or None
        self.open = None
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
        elif opcode == "fusion" and first is not None and self.relayouts:
            attrs = ins.attributes_text
            k = attrs.find("calls=")
            m = _NAME_CHARS.match(attrs, k + 6) if k >= 0 else None
            got = self.relayouts.get(m.group(1)) if m else None
            if got is not None:
                op, frm, to, dims = got
                self.facts.copies.append(CopyRecord(
                    ins.name, "fusion", None, ins.shape, first,
                    _element_of(first, shapes.get), op, frm, to, dims))

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
        find = block.find
        hits = []
        k = find(" copy")
        while k >= 0:
            if block.startswith(_COPY_TAILS, k + 5):
                hits.append(k)
            k = find(" copy", k + 5)
        k = find(" transpose(")
        while k >= 0:
            hits.append(k)
            k = find(" transpose(", k + 11)
        # the computations met in this block (by where their text starts in
        # it), each [name, is the entry, earlier pieces, start, holds a copy or
        # transpose, where its closing "}" is or None]
        met: dict = {}
        if self.open is not None and self.open[3]:
            self._comp_of(block, 0, met)       # it may close here
        hits.sort()
        for k in hits:
            c = self._comp_of(block, k, met)
            if c is not None and not c[1]:
                self._hit(block, c, k, None)
                if block.startswith((" copy(", " transpose("), k):
                    c[4] = True
        # the relayout bodies closing here, before the calls= that name them
        for c in met.values():
            if c[4] and c[5] is not None:
                self._finish(block, c)
        # the fusion (and async) bodies among the computations that matter:
        # those holding a copy, and the relayout bodies (XLA prints a
        # computation before its callers, so both are known by now)
        if self.pending_comps or self.relayouts:
            watched, relayouts = self.pending_comps, self.relayouts
            k = find("calls=")
            while k >= 0:
                m = _NAME_CHARS.match(block, k + 6)
                if m:
                    callee = m.group(1)
                    if callee in watched:
                        self.called.add(callee)
                    if callee in relayouts:
                        c = self._comp_of(block, k, met)
                        if c is not None and not c[1]:
                            self._hit(block, c, k, callee)
                k = find("calls=", k + 6)
        self._carry(block, met)

    def _comp_of(self, block: str, k: int, met: dict):
        """The computation holding position ``k`` of ``block`` (see
        :meth:`feed_block`), or None outside any."""
        found = _header_before(block, k)
        if found is None:
            # before any header of this block: the computation carried over
            if self.open is None or (k > 0 and _close_at(block, 0) is not None
                                     and _close_at(block, 0) < k):
                return None
            c = met.get(0)
            if c is None:
                name, entry, pieces, copies = self.open
                c = met[0] = [name, entry, pieces, 0, copies, _close_at(block, 0)]
            return c
        start, end = found
        body = min(end + 1, len(block))
        c = met.get(body)
        if c is None:
            close = _close_at(block, end)
            name, entry = _header_name(block[start:end])
            c = met[body] = [name, entry, [], body, False, close]
        if c[5] is not None and k >= c[5]:
            return None
        return c

    def _carry(self, block: str, met: dict) -> None:
        """The computation open at the block's end, for the next block."""
        n = len(block)
        found = _header_before(block, n)
        if found is None:
            if self.open is None or _close_at(block, 0) is not None:
                self.open = None
                return
            name, entry, pieces, copies = self.open
            c = met.get(0)
            copies = copies or (c is not None and c[4])
            self.open = (name, entry, pieces if entry else pieces + [(block, 0, n)], copies)
            return
        start, end = found
        if _close_at(block, end) is not None:
            self.open = None
            return
        body = min(end + 1, n)
        c = met.get(body)
        name, entry = (c[0], c[1]) if c is not None else _header_name(block[start:end])
        self.open = (name, entry, [] if entry else [(block, body, n)],
                     c is not None and c[4])

    def _hit(self, block: str, comp, k: int, callee: Optional[str]) -> None:
        """A copy (or a fusion calling a relayout body, ``callee``) on the
        line of ``block`` holding position ``k``, in computation ``comp``."""
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
            where = comp[2] + [(block, comp[3], start)]

            def lookup(name):
                # the definition is earlier in the same computation
                key = "%" + name + " = "
                for b, ps, pe in reversed(where):
                    d = b.rfind(key, ps, pe)
                    if d >= 0 and (d == 0 or b[d - 1] in " \n"):
                        de = b.find("\n", d)
                        defined = _instructions_of(b[d:de if de >= 0 else len(b)])
                        if defined and defined[0].name == name:
                            return defined[0].shape
                return None
            operand_shape = _element_of(first, lookup)
        self.pending_comps.add(comp[0])
        if callee is None:
            self.pending.append(CopyRecord(ins.name, opcode, comp[0], ins.shape, first,
                                           operand_shape, dimensions=_dimensions(ins)))
        else:
            op, frm, to, dims = self.relayouts[callee]
            self.pending.append(CopyRecord(ins.name, "fusion", comp[0], ins.shape, first,
                                           operand_shape, op, frm, to, dims))

    def _finish(self, block: str, comp) -> None:
        """A computation holding a copy or transpose closed in ``block``: is
        it a small body that only relayouts?"""
        name, entry, pieces, start, _, close = comp
        size = close - start + sum(pe - ps for _, ps, pe in pieces)
        if entry or size > _SMALL_BODY:
            return
        text = "\n".join([b[ps:pe] for b, ps, pe in pieces] + [block[start:close]])
        inner = _instructions_of(text)
        shapes = {i.name: i.shape for i in inner}
        copies = [i for i in inner if i.opcode in ("copy", "transpose")]
        if len(copies) == 1 and all(i.opcode in _RELAYOUT_COMPANIONS for i in inner
                                    if i is not copies[0]):
            c = copies[0]
            names = c.operand_names
            frm = shapes.get(names[0]) if names else None
            self.relayouts[name] = (c.opcode, frm, c.shape, _dimensions(c))

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
    #: its custom calls to cuBLAS / cuDNN: name -> (target, result tuple's arity)
    library_calls: Optional[dict] = None


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
    HLO instruction (an out-of-memory report is read by ``source_oom``)."""
    scanner = LocationScanner(names) if names is not None else LocationScanner(keep=_KEEP)
    conditionals = _Conditionals()
    copies = CopyScanner()
    library = LibraryCallScanner()

    def observe_block(block):
        scanner.feed_block(block)
        conditionals.feed_block(block)
        copies.feed_block(block)
        library.feed_block(block)

    def observe_line(line):
        scanner.feed_line(line)
        conditionals.feed_line(line)
        copies.feed_line(line)
        library.feed_line(line)

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
        name, attrs, warnings = module.name, module.attributes, module.warnings
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
        name, attrs, warnings = reader.module_name, reader.module_attributes, reader.warnings
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
    return ModuleText(name, r, found, conditionals.names, module, copies.result(),
                      library.calls)


def module_records(lines, warn, source: str, path: Optional[str], *, names=None) -> ModuleRecords:
    """:class:`ModuleRecords` of one module text: its entry, and the
    locations of ``names`` (default: of its entry's parameters, root and
    root operands)."""
    text = read_module_text(lines, warn, names=names, where=path)
    rec = ModuleRecords(text.name, source, path)
    rec.entry = text.entry
    rec.locations = text.locations
    rec.copies = text.copies
    rec.library_calls = text.library_calls or {}
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


_DONATION_ATTRS = re.compile(r"[\s,](input_output_alias|buffer_donor)=\{")


def read_module_header(lines, where: Optional[str] = None) -> Optional[EntryRecord]:
    """The donations a module's header marks (its ``HloModule`` line's
    ``input_output_alias`` and ``buffer_donor``, parsed, and their text in
    ``attributes``) as an :class:`~xlashape.memory.records.EntryRecord`
    without instructions: what the audit needs of the module before
    optimizations, where jax marks its donations. Reads ``lines`` (an open
    file, or any iterable of lines) only up to that line, and of the line
    only those two attributes (the entry layout before them may be long);
    ``None`` when it is not among the first lines."""
    for count, line in enumerate(lines):
        if line.startswith("HloModule"):
            rec = EntryRecord()
            for m in _DONATION_ATTRS.finditer(line):
                end = _match_close(line, m.end() - 1)
                if end > 0:
                    rec.attributes[m.group(1)] = line[m.end() - 1:end]
            try:
                rec.aliases = parse_input_output_alias(rec.attributes.get("input_output_alias", ""))
                rec.donors = parse_buffer_donor(rec.attributes.get("buffer_donor", ""))
            except (ValueError, XlaShapeError):  # pragma: no cover - the patterns cannot fail
                pass
            return rec
        if count > 64:
            return None
    return None
    return None
