"""The source of XLA's protobufs: ``.hlo.pb``, buffer-assignment and memory-usage-report bytes.

An ``HloProto`` (``--xla_dump_hlo_as_proto`` writes one per module:
``*.hlo.pb``, or ``.hlo.pb.gz``) holds the module and, after optimizations,
its buffer assignment with the heap simulator's traces. This source fills the
records from the messages' fields directly -- the entry computation, every
allocation and the values in it, the op paths of their instructions, the
traces for the peak -- without writing the module as HLO text: an
instruction's shape is built only when a record needs it.

It also reads ``memory_analysis().serialized_buffer_assignment_proto`` (a
``BufferAssignmentProto`` alone: no names, no shapes) and a
``*-memory-usage-report.pb`` (with the ``.hlo.pb`` beside it when it is there;
alone, only its memory spaces' totals and allocations by size).
"""

from __future__ import annotations

import os
from typing import Dict, List, Optional, Tuple

from .. import protos
from ..errors import ProtoDecodeError, UnreadableInputError, XlaShapeError
from ..hlo_model import Alias, BufferDonor
from ..live_range import Location
from ..shape import Shape
from ..shape_proto import _shape_from_message
from ..xla_dump import (BEFORE_SUFFIXES, HLO_PB_SUFFIXES, MEMORY_REPORT_TXT, BufferAllocation,
                        BufferValue, DumpWarning, MemorySpaceUsage, _unreadable, before_file_of,
                        platform_from_key)
from .model import space_label
from .records import CopyFacts, CopyRecord, EntryRecord, ModuleRecords, Reading
from .source_hlo import platform_hint

__all__ = ["PROTO_KINDS", "proto_kind", "hlo_proto_records", "proto_records"]

#: the messages this source reads, by the kind :func:`proto_kind` names
PROTO_KINDS = ("hlo-proto", "buffer-assignment-proto", "memory-report-proto")

_ALIAS_KINDS = {0: "may-alias", 1: "may-alias", 2: "must-alias"}


def proto_kind(source) -> Optional[Tuple[str, object]]:
    """Which of XLA's messages ``source`` (a path or bytes) holds, and the
    message, read and parsed once (:func:`xlashape.protos.read_xla_proto`);
    ``None`` if none. A gzip file past the decompression limit, or a corrupt
    one, raises :class:`~xlashape.UnreadableInputError`."""
    try:
        msg = protos.read_xla_proto(source)
    except ProtoDecodeError:
        return None
    kind = ("hlo-proto" if isinstance(msg, protos.HloProto) else
            "buffer-assignment-proto" if isinstance(msg, protos.BufferAssignmentProto) else
            "memory-report-proto")
    return kind, msg


class _Module:
    """A module message's instructions by id, each instruction's
    :class:`~xlashape.Shape` built the first time it is asked for (one object
    per distinct shape message)."""

    def __init__(self, mp):
        self.mp = mp
        self.by_id: Dict[int, object] = {ip.id: ip for cp in mp.computations
                                         for ip in cp.instructions}
        self._shapes: Dict[bytes, Shape] = {}
        self._of: Dict[int, Optional[Shape]] = {}
        names = {cp.id: cp.name for cp in mp.computations}
        entry_id = mp.entry_computation_id
        if entry_id not in names:
            by_name = [cp.id for cp in mp.computations if cp.name == mp.entry_computation_name]
            entry_id = by_name[0] if by_name else (mp.computations[-1].id if len(mp.computations)
                                                    else None)
        self.entry = next((cp for cp in mp.computations if cp.id == entry_id), None)

    def shape_of_message(self, msg, where: str) -> Shape:
        key = msg.SerializeToString()
        got = self._shapes.get(key)
        if got is None:
            got = self._shapes[key] = _shape_from_message(msg, where, 0)
        return got

    def shape(self, ip) -> Optional[Shape]:
        """The instruction's shape; ``None`` (cached) when its message is malformed."""
        got = self._of.get(ip.id, False)
        if got is False:
            try:
                got = self.shape_of_message(ip.shape, f"instruction {ip.name}")
            except XlaShapeError:
                got = None
            self._of[ip.id] = got
        return got

    def name(self, instruction_id: int, fallback: str = "") -> str:
        ip = self.by_id.get(instruction_id)
        return ip.name if ip is not None else fallback


def _entry_record(m: _Module) -> EntryRecord:
    mp = m.mp
    rec = EntryRecord()
    cp = m.entry
    hints = 0
    if cp is not None:
        root_id = cp.root_id
        for ip in cp.instructions:
            rec.instructions += 1
            opcode = ip.opcode
            if opcode == "parameter":
                shape = m.shape(ip)
                if shape is not None:
                    rec.params[ip.parameter_number] = (ip.name, shape)
            elif rec.platform_hint is None and hints < 256 and opcode in ("fusion", "custom-call"):
                hints += 1
                rec.platform_hint = platform_hint(
                    ip.custom_call_target + " " + ip.backend_config.decode("utf-8", "replace"))
            if ip.id == root_id:
                shape = m.shape(ip)
                if shape is not None:
                    operands = (tuple(m.name(i) for i in ip.operand_ids) if opcode == "tuple"
                                else ())
                    rec.root = (ip.name, opcode, shape, operands)
    _header(m, rec)
    return rec


def _header(m: _Module, rec: EntryRecord) -> EntryRecord:
    """What a module's header says into ``rec``: the entry computation layout
    (``host_program_shape``, or the entry's ``program_shape``), the aliases
    and the buffer donors."""
    mp = m.mp
    cp = m.entry
    ps = None
    if mp.HasField("host_program_shape") and (len(mp.host_program_shape.parameters)
                                              or mp.host_program_shape.HasField("result")):
        ps, where = mp.host_program_shape, "HloModuleProto.host_program_shape"
    elif cp is not None and cp.HasField("program_shape"):
        ps, where = cp.program_shape, "entry program_shape"
    if ps is not None:
        try:
            params = tuple(m.shape_of_message(p, f"{where}.parameters[{i}]")
                           for i, p in enumerate(ps.parameters))
            rec.layout = (params, m.shape_of_message(ps.result, f"{where}.result"))
        except XlaShapeError:
            rec.layout = None
    rec.aliases = tuple(Alias(tuple(e.output_shape_index), e.parameter_number,
                              tuple(e.parameter_shape_index), _ALIAS_KINDS.get(e.kind, "may-alias"))
                        for e in mp.input_output_alias.entries)
    rec.donors = tuple(BufferDonor(e.parameter_number, tuple(e.parameter_shape_index))
                       for e in mp.buffer_donor.entries)
    return rec


_COPY_OPCODES = ("copy", "transpose", "copy-start", "copy-done")
_FORWARD_OPCODES = ("bitcast", "get-tuple-element", "copy-start", "copy-done")


def _copy_facts(m: _Module) -> CopyFacts:
    """The module's copies from the instructions' fields, as the text route's
    :class:`~xlashape.memory.source_hlo.CopyScanner` finds them: the copies
    of the entry and of every computation that is not a fusion (or async)
    body, and the fusions whose body only wraps one copy or transpose.

    A scheduled module (every optimized one) is read from the instructions
    already indexed by id and the schedule, which lists the instructions of
    every computation that is not a fusion or async body: one opcode per
    instruction, a fusion's body looked at only when a copy lies in some
    fusion body (a relayout body's root is the copy, or a bitcast of it).
    Else every computation is scanned (:func:`_copy_facts_scan`)."""
    mp = m.mp
    sequences = mp.schedule.sequences if mp.HasField("schedule") else None
    if not sequences:
        return _copy_facts_scan(m)
    where: Dict[int, int] = {}      # instruction id -> its (scheduled) computation's id
    for cid, seq in sequences.items():
        where.update(dict.fromkeys(seq.instruction_ids, cid))
    entry = m.entry
    entry_id = entry.id if entry is not None else None
    by_id = m.by_id
    copies, fusions, forwards_of = [], [], []
    in_bodies = set()          # copy/transpose instructions of fusion (or other unscheduled) bodies
    for i, ip in by_id.items():
        op = ip.opcode
        if op in _COPY_OPCODES:
            if i in where:
                copies.append(ip)
                if op in _FORWARD_OPCODES and where[i] == entry_id:
                    forwards_of.append(ip)
            elif op == "copy" or op == "transpose":
                in_bodies.add(i)
        elif op == "fusion":
            if i in where:
                fusions.append(ip)
        elif (op == "bitcast" or op == "get-tuple-element") and where.get(i, -1) == entry_id:
            forwards_of.append(ip)
    relayouts = {}
    if in_bodies and fusions:
        comps = {cp.id: cp for cp in mp.computations}
        for ip in fusions:
            if not len(ip.called_computation_ids):
                continue
            cid = ip.called_computation_ids[0]
            if cid in relayouts:
                continue
            cp = comps.get(cid)
            if cp is None:
                continue
            root = by_id.get(cp.root_id)
            if root is not None and root.opcode == "bitcast" and len(root.operand_ids):
                root = by_id.get(root.operand_ids[0])
            if root is None or root.id not in in_bodies:
                continue
            got = _relayout_body(m, cp)
            if got is not None:
                relayouts[cid] = got
        if relayouts:
            copies += [ip for ip in fusions if len(ip.called_computation_ids) and
                       ip.called_computation_ids[0] in relayouts]
    names = {}
    if any(where[ip.id] != entry_id for ip in copies):
        names = {cp.id: cp.name for cp in mp.computations}
    found: Dict[int, list] = {}
    for ip in copies:
        found.setdefault(where[ip.id], []).append(ip)
    return _copy_records(m, found, relayouts, forwards_of, names, sequences)


def _relayout_body(m: _Module, cp):
    """``(opcode, from, to, dimensions)`` when a fusion body only wraps one
    copy or transpose (parameters and bitcasts besides), else None."""
    if len(cp.instructions) > 64:
        return None
    copies = [ip for ip in cp.instructions if ip.opcode in ("copy", "transpose")]
    if len(copies) != 1 or any(ip.opcode not in ("parameter", "bitcast")
                               for ip in cp.instructions if ip is not copies[0]):
        return None
    c = copies[0]
    frm = m.by_id.get(c.operand_ids[0]) if len(c.operand_ids) else None
    return (c.opcode, m.shape(frm) if frm is not None else None, m.shape(c),
            tuple(c.dimensions) if c.opcode == "transpose" else None)


def _copy_records(m: _Module, found: Dict[int, list], relayouts: dict, forwards_of: list,
                  names: Dict[int, str], sequences) -> CopyFacts:
    """The records of the copies ``found`` per computation id (in program
    order when scheduled), and the entry's forwards."""
    facts = CopyFacts()
    mp = m.mp
    entry = m.entry
    roots = {cp.root_id for cp in mp.computations} if found or forwards_of else set()
    forwards = facts.forwards

    def operand(ip):
        """The first operand's name as XLA's text writes it (an element of a
        multi-output result, a get-tuple-element that is no root, as
        ``%sort.7#0``) and its message."""
        if not len(ip.operand_ids):
            return None, None
        first = m.by_id.get(ip.operand_ids[0])
        if first is None:
            return None, None
        if first.opcode == "get-tuple-element" and first.id not in roots and \
                len(first.operand_ids):
            base = m.by_id.get(first.operand_ids[0])
            if base is not None:
                name = f"{base.name}#{first.tuple_index}"
                forwards.setdefault(name, (base.name, first.tuple_index))
                return name, first
        return first.name, first

    for ip in forwards_of:
        name, _ = operand(ip)
        if name is not None:
            op = ip.opcode
            forwards[ip.name] = (name, ip.tuple_index if op == "get-tuple-element" else None)
    entry_id = entry.id if entry is not None else None
    for cid in sorted(found, key=lambda c: c != entry_id):
        where = None if cid == entry_id else names.get(cid)
        instructions = found[cid]
        seq = sequences.get(cid) if sequences else None
        if seq is not None:
            # program order, as the text prints a scheduled module
            position = {iid: i for i, iid in enumerate(seq.instruction_ids)}
            instructions.sort(key=lambda ip: position.get(ip.id, -1))
        for ip in instructions:
            op = ip.opcode
            name, first = operand(ip)
            shape = m.shape(ip)
            if shape is None:
                continue
            if op == "fusion":
                wop, frm, to, dims = relayouts[ip.called_computation_ids[0]]
                facts.copies.append(CopyRecord(
                    ip.name, "fusion", where, shape, name,
                    m.shape(first) if first is not None else None, wop, frm, to, dims))
            else:
                facts.copies.append(CopyRecord(
                    ip.name, op, where, shape, name,
                    m.shape(first) if first is not None else None,
                    dimensions=tuple(ip.dimensions) if op == "transpose" else None))
    return facts


def _copy_facts_scan(m: _Module) -> CopyFacts:
    """:func:`_copy_facts` of a module without a schedule: every
    computation's instructions scanned once."""
    mp = m.mp
    entry = m.entry
    inside = set()          # fusion and async bodies: no instruction there is one of its own
    found: Dict[int, list] = {}       # computation id -> its copy instructions
    candidates: Dict[int, object] = {}   # a body of one copy/transpose, parameters and bitcasts
    entry_forwards = []
    for cp in mp.computations:
        here = []
        alone = True
        count = 0
        is_entry = cp is entry
        for ip in cp.instructions:
            op = ip.opcode
            if op == "fusion" or op.startswith("async-"):
                inside.update(ip.called_computation_ids)
                alone = False
            elif op in _COPY_OPCODES:
                here.append(ip)
                if op == "copy" or op == "transpose":
                    count += 1
                else:
                    alone = False
                if is_entry and op in _FORWARD_OPCODES:
                    entry_forwards.append(ip)
            elif op == "bitcast" or op == "get-tuple-element":
                if is_entry:
                    entry_forwards.append(ip)
                if op != "bitcast":
                    alone = False
            elif op != "parameter":
                alone = False
        if here:
            found[cp.id] = here
        if alone and count == 1:
            candidates[cp.id] = here[0]
    relayouts = {}
    for cid, c in candidates.items():
        if cid not in inside:
            continue
        frm = m.by_id.get(c.operand_ids[0]) if len(c.operand_ids) else None
        relayouts[cid] = (c.opcode, m.shape(frm) if frm is not None else None, m.shape(c),
                          tuple(c.dimensions) if c.opcode == "transpose" else None)
    if relayouts:
        for cp in mp.computations:
            if cp.id in inside:
                continue
            for ip in cp.instructions:
                if ip.opcode == "fusion" and len(ip.called_computation_ids) and \
                        ip.called_computation_ids[0] in relayouts:
                    found.setdefault(cp.id, []).append(ip)
    names = {cp.id: cp.name for cp in mp.computations}
    found = {cid: ips for cid, ips in found.items() if cid not in inside}
    return _copy_records(m, found, relayouts, entry_forwards, names, None)


def _locations(m: _Module, instructions) -> Dict[str, Location]:
    """Op path and ``file:line`` of ``instructions`` (their messages), from
    their metadata and the module's stack frame tables (as the text route
    reads them from ``metadata={...}`` and ``FileNames`` / ``StackFrames``)."""
    index = m.mp.stack_frame_index
    files, locs, frames = index.file_names, index.file_locations, index.stack_frames
    out: Dict[str, Location] = {}
    for ip in instructions:
        if not ip.HasField("metadata"):
            continue
        name = ip.name
        md = ip.metadata
        op = md.op_name or None
        if md.source_file:
            out[name] = Location(op, md.source_file + (f":{md.source_line}" if md.source_line
                                                       else ""))
        elif md.stack_frame_id:
            src = None
            fid = md.stack_frame_id
            if 0 < fid <= len(frames):
                lid = frames[fid - 1].file_location_id
                if 0 < lid <= len(locs):
                    loc = locs[lid - 1]
                    if 0 < loc.file_name_id <= len(files):
                        src = f"{files[loc.file_name_id - 1]}:{loc.line}"
            out[name] = Location(op, src)
        elif op is not None:
            out[name] = Location(op, None)
    return out


def _sub(shape: Optional[Shape], index) -> Optional[Shape]:
    for i in index:
        if shape is None or not shape.is_tuple or not 0 <= i < len(shape.tuple_shapes):
            return None
        shape = shape.tuple_shapes[i]
    return shape


def _allocations(ba, m: Optional[_Module], reading_platform):
    """The allocations of a ``BufferAssignmentProto`` as the records the text
    route reads from ``*-buffer-assignment.txt``: each logical buffer a value,
    named, shaped and labelled from the module ``m`` (``None``: ids only, no
    shapes); and the messages of the instructions that define them."""
    params: Dict[int, Shape] = {}
    if m is not None and m.entry is not None:
        for ip in m.entry.instructions:
            if ip.opcode == "parameter":
                s = m.shape(ip)
                if s is not None:
                    params[ip.parameter_number] = s
    logical = {lb.id: lb for lb in ba.logical_buffers}
    texts: Dict[int, str] = {}
    # (instruction id, shape index) -> (name, index, shape, text, label): a
    # position's facts, for each of the logical buffers defined there
    described: Dict[tuple, tuple] = {}

    def position(lb_id: int, loc):
        key = (loc.instruction_id, tuple(loc.shape_index)) if loc is not None else None
        got = described.get(key) if key is not None else None
        if got is not None:
            return got
        ip = m.by_id.get(loc.instruction_id) if m is not None and loc is not None else None
        name = ip.name if ip is not None else (loc.instruction_name if loc is not None else "")
        name = name or f"buffer.{lb_id}"
        index = key[1] if key is not None else ()
        if ip is not None:
            used[ip.id] = ip
        whole = m.shape(ip) if ip is not None else None
        shape = _sub(whole, index)
        text = ""
        if shape is not None:
            text = texts.get(id(shape))
            if text is None:
                text = texts[id(shape)] = str(shape)
        label = name + ("{" + ",".join(map(str, index)) + "}"
                        if whole is not None and whole.is_tuple else "")
        got = (name, index, shape, text, label)
        if key is not None and name:
            described[key] = got
        return got

    used: Dict[int, object] = {}
    out: List[BufferAllocation] = []
    for a in ba.buffer_allocations:
        param = a.is_entry_computation_parameter
        p = params.get(a.parameter_number) if param else None
        r = BufferAllocation.from_flags(
            a.index, a.size, a.color, parameter_number=a.parameter_number if param else None,
            parameter_index=a.parameter_shape_index, parameter_shape=str(p) if p is not None else None,
            maybe_live_out=a.maybe_live_out, is_thread_local=a.is_thread_local,
            is_constant=a.is_constant)
        values = r.values
        for assigned in a.assigned:
            lb_id = assigned.logical_buffer_id
            lb = logical.get(lb_id)
            name, index, shape, text, label = position(lb_id, lb.defined_at if lb is not None
                                                       else None)
            values.append(BufferValue(lb_id, name, index, False,
                                      lb.color if lb is not None else a.color, assigned.size,
                                      assigned.offset, text, shape, 0, label))
        out.append(r)
    return out, list(used.values())


def _report_spaces(report) -> List[MemorySpaceUsage]:
    return [MemorySpaceUsage(space_label(e.memory_space_color), e.memory_space_color,
                             e.total_bytes) for e in report.memory_space_allocation_entries]


def _before_record(before, rec: ModuleRecords) -> None:
    """The header of the module before optimizations (a ``.hlo.pb`` path):
    the donations jax marked."""
    if before is None:
        return
    try:
        rec.before = _header(_Module(protos.read_hlo_proto(before).hlo_module), EntryRecord())
    except (OSError, XlaShapeError, ValueError) as e:
        rec.warnings.append(f"the module before optimizations ({os.path.basename(before)}) "
                            f"could not be read: {e}")


def _records_of_hlo(hlo, path: Optional[str], reading: Reading, *, key: str = "",
                    report=None, optimized: bool = True, before=None) -> ModuleRecords:
    """A module's records from an ``HloProto`` message. ``report``: the
    memory-usage report's path (text) or ``MemoryUsageReportProto``;
    ``before``: the path of the module's ``.hlo.pb`` before optimizations."""
    protos.check_sizes(hlo, path or "the HLO proto")
    if report is not None and not isinstance(report, str):
        protos.check_sizes(report, path or "the memory-usage report")
    mp = hlo.hlo_module
    try:
        m = _Module(mp)
    except (XlaShapeError, ValueError) as e:  # pragma: no cover - fields are typed
        raise UnreadableInputError(f"{path or 'the HLO proto'}: {e}") from None
    rec = ModuleRecords(mp.name or None, "dump", path)
    rec.from_proto = True
    rec.optimized = optimized
    rec.platform = platform_from_key(key) if key else None
    rec.entry = _entry_record(m)
    if rec.entry.instructions == 0 and rec.entry.layout is None:
        raise UnreadableInputError(f"no HLO instructions found in {path or 'the HLO proto'}")
    rec.copies = _copy_facts(m)
    _before_record(before, rec)
    if not hlo.HasField("buffer_assignment"):
        rec.warnings.append("the HLO proto holds no buffer assignment (XLA writes one into the "
                            "module after optimizations): figures from its module only")
        return rec
    ba = hlo.buffer_assignment
    rec.allocations, defining = _allocations(ba, m, reading.platform)
    rec.locations = _locations(m, defining)
    if isinstance(report, str):
        rec.read_report(report)
    elif report is not None:
        rec.memory_report = _report_spaces(report)
    if reading.peak:
        rec.buffer_assignment_proto = hlo
    return rec


def hlo_proto_records(source, reading: Reading, *, key: str = "", report=None,
                      before=None) -> ModuleRecords:
    """The records of a ``.hlo.pb`` / ``.hlo.pb.gz`` (a path or the bytes);
    ``before``: the ``.hlo.pb`` of the module before optimizations."""
    path = os.fspath(source) if isinstance(source, (str, os.PathLike)) else None
    return _records_of_hlo(protos.read_hlo_proto(source), path, reading, key=key, report=report,
                           before=before)


def _message(source, read):
    """``source`` when it is already a message, else ``read(source)``."""
    return source if hasattr(source, "ListFields") else read(source)


def proto_records(kind: str, source, path: Optional[str], reading: Reading) -> List[ModuleRecords]:
    """The records of one of XLA's messages (``kind`` from :func:`proto_kind`
    or the file name): a path, the bytes, or the message already read."""
    where = path or "the given bytes"
    if kind == "hlo-proto":
        key = report = None
        if path is not None:
            base = os.path.basename(path)
            for suffix in HLO_PB_SUFFIXES:
                if base.endswith(suffix):
                    key = base[: -len(suffix)]
                    rep = os.path.join(os.path.dirname(path), key + MEMORY_REPORT_TXT)
                    report = rep if os.path.isfile(rep) else None
        return [_records_of_hlo(_message(source, protos.read_hlo_proto), path, reading,
                                key=key or "", report=report,
                                before=None if path is None else
                                before_file_of(path, BEFORE_SUFFIXES[1:]))]
    if kind == "memory-report-proto":
        report = _message(source, protos.read_memory_usage_report)
        protos.check_sizes(report, where)
        if path is not None:
            base = os.path.basename(path)
            stem = base[: -len(".gz")] if base.endswith(".gz") else base
            if stem.endswith("-memory-usage-report.pb"):
                hlo_pb = os.path.join(os.path.dirname(path),
                                      stem[: -len("-memory-usage-report.pb")] + ".hlo.pb")
                if hlo_pb.endswith(HLO_PB_SUFFIXES[0]) and os.path.lexists(hlo_pb):
                    problem = _unreadable(hlo_pb)
                    if problem is not None:      # a FIFO, a dangling link: the report alone
                        reading.warn(DumpWarning(hlo_pb, problem))
                    else:
                        key = os.path.basename(hlo_pb)[: -len(HLO_PB_SUFFIXES[0])]
                        return [_records_of_hlo(protos.read_hlo_proto(hlo_pb), hlo_pb, reading,
                                                key=key, report=report,
                                                before=before_file_of(hlo_pb,
                                                                      BEFORE_SUFFIXES[1:]))]
        rec = ModuleRecords(None, "memory-report", where)
        rec.from_proto = True
        rec.report_allocations = [
            (e.memory_space_color, e.total_bytes,
             [(x.index, x.size, tuple(x.defining_positions)) for x in e.allocation_entries])
            for e in report.memory_space_allocation_entries]
        return [rec]
    ba = _message(source, protos.read_buffer_assignment)
    protos.check_sizes(ba, where)
    if not len(ba.buffer_allocations):
        raise UnreadableInputError(f"{where}: a BufferAssignmentProto without allocations")
    rec = ModuleRecords(None, "dump", path)
    rec.platform = reading.platform
    rec.from_proto = True
    rec.no_module = True
    rec.allocations, _ = _allocations(ba, None, reading.platform)
    rec.notes.append("a BufferAssignmentProto alone (memory_analysis()."
                     "serialized_buffer_assignment_proto): no module, so no names or shapes")
    if reading.peak:
        rec.buffer_assignment_proto = ba
        need = ("the buffer assignment alone names no instructions or shapes: give the "
                "dump's .hlo.pb (--xla_dump_hlo_as_proto), which holds the module too")
        if rec.platform != "cpu":
            # XLA:CPU: the whole-program buffers alone
            rec.peak_reasons["peak_memory_in_bytes"] = (
                "no heap simulator traces in this buffer assignment "
                "(serialized_buffer_assignment_proto carries none): " + need)
        rec.peak_reasons["peak_unpadded_heap_bytes"] = (
            "the unpadded sizes need the buffers' shapes: " + need)
    return [rec]
