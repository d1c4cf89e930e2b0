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

from typing import Callable, Iterable, Iterator, Optional

from ..errors import UnreadableInputError, XlaShapeError
from ..hlo_module import (EntryBlocks, HloReader, HloWarning, parse_buffer_donor,
                          parse_input_output_alias)
from ..live_range import LocationScanner
from .records import EntryRecord, ModuleRecords

__all__ = ["read_module_text", "module_records", "platform_hint"]

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


def _observe(lines: Iterable[str], scanner: LocationScanner) -> Iterator[str]:
    for line in lines:
        scanner.feed_line(line)
        yield line


#: without names to look for, the locations of the last this many instructions
#: are kept while reading (the entry's root and its operands are among them)
_KEEP = 1 << 16


class _Entry:
    """The entry (or loose instructions) while streaming."""

    def __init__(self):
        self.rec = EntryRecord()
        self.hint_checks = 0


def read_module_text(lines, warn: Callable[[HloWarning], None], *, names=None,
                     where: Optional[str] = None):
    """``(module name, EntryRecord, locations)`` of a module's text:
    ``lines`` is an :class:`~xlashape.hlo_module.EntryBlocks` over an open
    file or any iterable of lines; ``names`` (a set) are the instructions
    whose op paths and source lines to collect; without it, those of the
    entry's parameters, its root and the root's operands (from the last
    :data:`_KEEP` located instructions: XLA prints the entry last).

    Raises :class:`~xlashape.UnreadableInputError` when the text holds no
    HLO instruction, or is an out-of-memory report."""
    scanner = LocationScanner(names) if names is not None else LocationScanner(keep=_KEEP)
    if isinstance(lines, EntryBlocks):
        lines.observer = scanner.feed_block
    else:
        lines = _entry_only(_observe(lines, scanner))
    # no call graph: the figures need the entry only, whose kind ENTRY says
    reader = HloReader(warn, call_kinds={}, streaming=True)
    info = _Entry()
    loose = _Entry()      # instructions outside any computation (a fragment)
    instructions = 0
    for ins in reader.read(lines):
        instructions += 1
        comp = ins._comp
        if comp is None:
            target = loose
        elif comp.is_entry:
            target = info
        else:
            continue
        rec = target.rec
        if ins.opcode == "parameter":
            n = ins.parameter_number
            if n is not None:
                rec.params[n] = (ins.name, ins.shape)
        elif (rec.platform_hint is None and target.hint_checks < 256
              and ins.opcode in ("fusion", "custom-call")):
            target.hint_checks += 1
            rec.platform_hint = platform_hint(ins.attributes_text)
        if ins.is_root:
            rec.root = (ins.name, ins.opcode, ins.shape,
                        ins.operand_names if ins.opcode == "tuple" else ())
        rec.last = ins
    if reader.mode == "oom":
        raise UnreadableInputError("the input is an out-of-memory report, not an HLO module")
    attrs = reader.module_attributes
    if instructions == 0 and not attrs.get("entry_computation_layout"):
        skipped = reader.warnings.total
        raise UnreadableInputError(
            f"no HLO instructions found in {where or 'the input'}" +
            (f" ({skipped} lines could not be read; the first: {reader.warnings[0]})" if skipped else ""))
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
    return reader.module_name, r, found


def module_records(lines, warn, source: str, path: Optional[str], *, names=None) -> ModuleRecords:
    """:class:`ModuleRecords` of one module text: its entry, and the
    locations of ``names`` (default: of its entry's parameters, root and
    root operands)."""
    name, entry, locations = read_module_text(lines, warn, names=names, where=path)
    rec = ModuleRecords(name, source, path)
    rec.entry = entry
    rec.locations = locations
    return rec
