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

import re
from typing import Callable, Iterable, Iterator, NamedTuple, Optional

from ..errors import UnreadableInputError, XlaShapeError
from ..hlo_module import (HloReader, HloWarning, TextBlocks, parse_buffer_donor,
                          parse_hlo_module, parse_input_output_alias)
from ..live_range import LocationScanner, parse_instruction_text
from .records import EntryRecord, ModuleRecords

__all__ = ["read_module_text", "ModuleText", "module_records", "platform_hint"]

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
    """The entry (or loose instructions) while streaming."""

    def __init__(self):
        self.rec = EntryRecord()
        self.hint_checks = 0

    def add(self, ins) -> None:
        rec = self.rec
        if ins.opcode == "parameter":
            n = ins.parameter_number
            if n is not None:
                rec.params[n] = (ins.name, ins.shape)
                if "sharding=" in ins.attributes_text:
                    sharding = ins.attribute("sharding")
                    if sharding:
                        rec.shardings[n] = sharding
        elif (rec.platform_hint is None and self.hint_checks < 256
              and ins.opcode in ("fusion", "custom-call")):
            self.hint_checks += 1
            rec.platform_hint = platform_hint(ins.attributes_text)
        if ins.is_root:
            rec.root = (ins.name, ins.opcode, ins.shape,
                        ins.operand_names if ins.opcode == "tuple" else ())
        rec.last = ins


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

    def observe_block(block):
        scanner.feed_block(block)
        conditionals.feed_block(block)

    def observe_line(line):
        scanner.feed_line(line)
        conditionals.feed_line(line)

    if isinstance(lines, TextBlocks):
        lines.observer = observe_block
    else:
        lines = _observe(lines, observe_line)
        if not full:
            lines = _entry_only(lines)
    info = _Entry()
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
    return ModuleText(name, r, found, conditionals.names, module)


def module_records(lines, warn, source: str, path: Optional[str], *, names=None) -> ModuleRecords:
    """:class:`ModuleRecords` of one module text: its entry, and the
    locations of ``names`` (default: of its entry's parameters, root and
    root operands)."""
    text = read_module_text(lines, warn, names=names, where=path)
    rec = ModuleRecords(text.name, source, path)
    rec.entry = text.entry
    rec.locations = text.locations
    return rec
