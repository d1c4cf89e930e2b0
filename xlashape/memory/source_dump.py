"""The source of XLA dump directories: each dumped module's text files, as records.

For a module ``module_NNNN.NAME....`` of a dump (``--xla_dump_to``) it reads,
each file once and in this order: the buffer assignment
(``...-buffer-assignment.txt``: the allocations and the values in them), the
live ranges (``...-live-range.txt``: the schedule and each value's range),
the module text (``...after_optimizations.txt``: the entry computation, and
the op path and source line of every instruction the buffer assignment
names), and the memory-usage report (its totals per memory space). On TPU
the values file (``...-buffer-assignment-values.txt``: each value's defining
instruction and operands) is read only if the peak's sharing rule asks.

A dump holding ``.hlo.pb`` files is read through them when it has no text
modules or when ``prefer="proto"`` (:mod:`xlashape.memory.source_proto`).
"""

from __future__ import annotations

import os
from typing import Dict, List, Optional, Tuple

from ..allocation_kinds import TEMPORARY
from ..errors import UnreadableInputError, XlaShapeError
from .._files import open_text
from ..hlo_warnings import HloWarning, WarningList
from ..live_range import read_live_ranges
from ..xla_dump import (BEFORE_SUFFIXES, HLO_PB_SUFFIXES, MEMORY_REPORT_TXT, DumpModule,
                        DumpWarning, _number, _unreadable, before_file_of, find_dump_modules,
                        iter_buffer_assignment, pair_before_files, platform_from_key)
from .sharing import MSA_COLORS, SharingFacts
from .records import ModuleRecords, Reading
from .source_hlo import read_before, read_module_text
from .source_proto import hlo_proto_records

__all__ = ["dump_records", "buffer_assignment_records", "text_buffer_assignment_records",
           "dump_protos"]

_LIVE_RANGE_SUFFIX = "-live-range.txt"
_VALUES_SUFFIX = "-buffer-assignment-values.txt"
_BA_SUFFIX = "-buffer-assignment.txt"


def dump_protos(path: str, reading: Reading, before: Optional[dict] = None
                ) -> Dict[Tuple[str, str], str]:
    """The ``*after_optimizations.hlo.pb`` (or ``.gz``) files of a dump
    directory: ``{(directory, key): path}``. A file that cannot be read as
    one (a FIFO, a dangling or looping link...) is skipped with a
    :class:`~xlashape.xla_dump.DumpWarning`, as the text route does.
    ``before``: a dict to fill with the ``before_optimizations.hlo.pb`` of
    each of them (``{(directory, key): path}``), paired as the text files are."""
    found: Dict[Tuple[str, str], str] = {}
    befores: Dict[Tuple[str, str], str] = {}
    before_pb = BEFORE_SUFFIXES[1:]
    for root, dirs, files in os.walk(path):
        dirs.sort()
        for name in sorted(files):
            for suffix in HLO_PB_SUFFIXES + (before_pb if before is not None else ()):
                if name.endswith(suffix):
                    full = os.path.join(root, name)
                    problem = _unreadable(full)
                    if problem is not None:
                        reading.warn(DumpWarning(full, problem))
                        break
                    (found if suffix in HLO_PB_SUFFIXES else befores).setdefault(
                        (root, name[: -len(suffix)]), full)
                    break
    if before is not None and befores:
        roots = {r for r, _ in found}
        for root in roots:
            keys = [k for r, k in found if r == root]
            bkeys = [k for r, k in befores if r == root]
            for after, key in pair_before_files(bkeys, keys).items():
                before[(root, after)] = befores[(root, key)]
    return found


def _prefixed(reading: Reading, name: Optional[str]):
    """``reading.warn`` with each line warning naming the file it is in (a
    dump has several files)."""
    if not name:
        return reading.warn

    def warn(w):
        reading.warn(HloWarning(w.line, f"{name}: {w.message}"))
    return warn


def _read_allocations(rec: ModuleRecords, path: Optional[str], reading: Reading, *,
                      name_file: bool = True, stream=None) -> None:
    """The buffer assignment's allocations, from the file ``path`` or the
    open ``stream`` (each line warning names the file when ``name_file``: a
    dump has several files)."""
    name = rec.allocations_file = os.path.basename(path) if path else None
    count = 0
    first = None

    def note(w):
        nonlocal count, first
        if name_file and name:
            w = HloWarning(w.line, f"{name}: {w.message}")
        count += 1
        first = first or w
        reading.warn(w)

    if stream is not None:
        rec.allocations = list(iter_buffer_assignment(stream, on_warning=note))
    else:
        with open_text(path) as f:
            rec.allocations = list(iter_buffer_assignment(f, on_warning=note))
    if not rec.allocations:
        raise UnreadableInputError(
            f"no allocations in the buffer assignment {path or ''}".rstrip()
            + (f" ({count} lines could not be read; the first: {first})" if count else ""))


def _read_peak_files(rec: ModuleRecords, ba_path: str) -> None:
    """The live-range file beside a buffer assignment, and the values file
    handed to the sharing rule (read when it first asks)."""
    if not ba_path.endswith(_BA_SUFFIX):
        return
    stem = ba_path[: -len(_BA_SUFFIX)]
    try:
        if os.path.isfile(stem + _LIVE_RANGE_SUFFIX):
            rec.live = read_live_ranges(stem + _LIVE_RANGE_SUFFIX)
    except (OSError, XlaShapeError) as e:
        rec.live_error = str(e)
        rec.live = None
    rec.facts = SharingFacts(stem + _VALUES_SUFFIX if os.path.isfile(stem + _VALUES_SUFFIX)
                             else None)


def _has_msa_heap(rec: ModuleRecords) -> bool:
    """A temporary allocation in a memory space that XLA:TPU's memory-space
    assignment places (whose heap reads the values file)."""
    if rec.platform not in ("tpu", None):
        return False
    spaces = MSA_COLORS["tpu"]
    return any(a.color in spaces and a.kind == TEMPORARY for a in rec.allocations or ())


def _value_names(rec: ModuleRecords) -> set:
    names = set()
    for a in rec.allocations or ():
        for v in a.values:
            names.add(v.name)
    return names


def module_of_dump(dm: DumpModule, reading: Reading) -> ModuleRecords:
    """The records of one module of a dump directory."""
    rec = ModuleRecords(None, "dump", dm.hlo_path)
    rec.optimized = dm.optimized
    rec.platform = platform_from_key(dm.key)
    if dm.buffer_assignment_path is not None:
        _read_allocations(rec, dm.buffer_assignment_path, reading)
        if reading.peak:
            _read_peak_files(rec, dm.buffer_assignment_path)
    # memory-space assignment's heaps (TPU VMEM) split a value over a
    # conditional's branches: a module with such a heap whose values a
    # conditional defines is parsed whole, in the one pass over its text
    full = reading.full_module or (rec.facts is not None and _has_msa_heap(rec)
                                   and rec.facts.defines_conditional())
    size = os.path.getsize(dm.hlo_path)
    name = os.path.basename(dm.hlo_path)
    if size == 0:
        rec.warnings.append(f"{name} is empty")
    else:
        try:
            with open_text(dm.hlo_path) as f:
                text = read_module_text(
                    reading.text_blocks(f, size, entry_only=not full), _prefixed(reading, name),
                    names=_value_names(rec) if dm.optimized else None, where=dm.hlo_path,
                    full=full)
        except UnreadableInputError as e:
            rec.warnings.append(str(e))
        else:
            rec.name, rec.entry, rec.locations = text.name, text.entry, text.locations
            rec.copies = text.copies
            if rec.facts is not None:
                rec.facts.give(text.conditionals, text.module)
    if dm.optimized:
        read_before(rec, dm.before_path)
    if not dm.optimized:
        rec.warnings.append("only the module before optimizations is in the dump: its layouts "
                            "are not yet the ones XLA chose, so sizes may differ from XLA's")
    if rec.name is None:
        rec.name = dm.key.split(".")[1] if dm.key.count(".") >= 1 else dm.key
    if dm.buffer_assignment_path is None:
        if dm.optimized:
            rec.warnings.append("no buffer assignment in the dump for this module: figures from "
                                "its text only")
        return rec
    rec.read_report(dm.memory_report_path)
    return rec


def dump_records(path: str, reading: Reading) -> List[ModuleRecords]:
    """The records of every module of a dump directory (text route; the
    proto route for the modules that have only a ``.hlo.pb``, or for all
    with ``reading.prefer == "proto"``)."""
    skipped = WarningList(limit=3)     # the files left out, named if no module remains

    def skip(w):
        skipped.append(w)
        reading.warn(w)

    modules = find_dump_modules(path, on_warning=skip)
    befores: dict = {}
    pbs = dump_protos(path, reading, befores)
    if pbs and (reading.prefer == "proto" or not modules):
        out = []
        done = set()
        before_text = {dm.hlo_path: dm.before_path for dm in modules if dm.optimized}
        for (root, key), pb in sorted(pbs.items(), key=lambda kv: (_number(kv[0][1]) or 0, kv[1])):
            rep = os.path.join(root, key + MEMORY_REPORT_TXT)
            text = os.path.join(root, key + "after_optimizations.txt")
            got = hlo_proto_records(pb, reading, key=key,
                                    report=rep if os.path.isfile(rep) else None,
                                    before=befores.get((root, key)))
            if got.before is None:
                # no .hlo.pb of the module before optimizations: its text
                read_before(got, before_text.get(text))
            out.append(got)
            done.add(text)
        for dm in modules:
            if dm.hlo_path not in done and dm.optimized:
                out.append(module_of_dump(dm, reading))
        return out
    if not modules:
        try:
            with os.scandir(path) as it:
                empty = next(it, None) is None
        except OSError:
            empty = False
        if empty:
            raise UnreadableInputError(f"{path} is an empty directory: expected an XLA dump "
                                       "(XLA_FLAGS=--xla_dump_to=DIR writes one)")
        raise UnreadableInputError(
            f"no XLA modules in {path}" + (
                f" that can be read ({'; '.join(map(str, skipped))}"
                + (f"; and {skipped.dropped} more files skipped" if skipped.dropped else "") + ")"
                if skipped.total else "")
            + ": a dump directory holds files named module_NNNN.NAME...after_optimizations.txt "
            "(XLA_FLAGS=--xla_dump_to=DIR writes them)")
    return [module_of_dump(dm, reading) for dm in modules]


def buffer_assignment_records(path: str, reading: Reading) -> ModuleRecords:
    """A ``*-buffer-assignment.txt`` given on its own: the dumped module it
    belongs to when its text is beside it, else the buffer assignment alone
    (and its live ranges)."""
    base = os.path.basename(path)
    d = os.path.dirname(path) or "."
    report = None
    suffix = "after_optimizations" + _BA_SUFFIX
    if base.endswith(suffix):
        key = base[: -len(suffix)]
        hlo = os.path.join(d, key + "after_optimizations.txt")
        rep = os.path.join(d, key + MEMORY_REPORT_TXT)
        report = rep if os.path.isfile(rep) else None
        if os.path.isfile(hlo):
            return module_of_dump(DumpModule(key, _number(key), hlo, True, path, report,
                                             before_file_of(hlo)), reading)
    rec = ModuleRecords(None, "dump", path)
    rec.platform = reading.platform
    _read_allocations(rec, path, reading, name_file=False)
    if reading.peak:
        _read_peak_files(rec, path)
    rec.read_report(report)
    return rec


def text_buffer_assignment_records(stream, reading: Reading) -> ModuleRecords:
    """A buffer assignment given as text (no file, so nothing beside it)."""
    rec = ModuleRecords(None, "dump", None)
    rec.platform = reading.platform
    _read_allocations(rec, None, reading, stream=stream)
    return rec
