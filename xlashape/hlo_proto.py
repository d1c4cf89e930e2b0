"""HLO modules from XLA's protobuf dumps (``*.hlo.pb``), in the text reader's model.

:func:`read_hlo_proto_module` turns an ``HloProto`` (``--xla_dump_hlo_as_proto``
writes one per module: ``*.hlo.pb``, or ``*.hlo.pb.gz``) or a bare
``HloModuleProto`` (``as_serialized_hlo_module_proto()``) into the same
:class:`~xlashape.hlo_module.HloModule` / ``Computation`` / ``Instruction``
objects that :func:`~xlashape.hlo_module.parse_hlo_module` builds from text:
computations in the proto's order, the ENTRY, instructions with real
:class:`~xlashape.Shape` objects (layouts included), the root, operands,
called computations (with their kinds: fusion, while body, ...), metadata,
and the module header's ``entry_computation_layout``, ``input_output_alias``
and ``buffer_donor``. Each instruction's ``attributes_text`` is written the
way XLA's text printer writes it (``kind=kLoop, calls=%f,
metadata={op_name="..." stack_frame_id=3}``, ...) for the fields this
schema declares, the first time it is read (:class:`ProtoInstruction`).
:meth:`HloProtoModule.to_text` writes the whole module as HLO text.

The result is an :class:`HloProtoModule` (a subclass of ``HloModule``) that
also holds what only the proto has: the ``schedule`` (instruction names per
computation, in order), the stack frames (:meth:`HloProtoModule.stack_trace`),
instruction and computation ids, and the message itself (``proto``, with
``buffer_assignment`` when XLA wrote one).

Differences from the text of the same module: names and ids come from the
proto; operands are written without their shapes (``%p``, not
``f32[2]{0} %p``: look the operand up by name for its shape); instructions
that newer XLA leaves out of its text (the get-tuple-elements it prints as
``%while.6#1``) are present, as they are in the module; literals, windows,
shardings and the other undeclared fields are not in ``attributes``;
``backend_config`` is the string the compiler stored (XLA's text re-prints
it from its parsed form).
"""

from __future__ import annotations

import gc
from typing import Dict, List, NamedTuple, Optional, Tuple

from . import protos as _pb
from .errors import ProtoDecodeError
from .hlo_model import Computation, HloModule, Instruction, call_kind
from .shape import Shape
from .shape_proto import _shape_from_message

__all__ = [
    "HloProtoModule",
    "ProtoInstruction",
    "StackFrame",
    "read_hlo_proto_module",
    "module_from_proto",
]


class StackFrame(NamedTuple):
    """One frame of a stack trace (innermost first in :meth:`HloProtoModule.stack_trace`)."""

    file_name: str
    function_name: str
    line: int
    column: int
    end_line: int
    end_column: int


class HloProtoModule(HloModule):
    """An :class:`~xlashape.hlo_module.HloModule` read from XLA's protobuf.

    Besides the text model: ``id`` (the module's id), ``proto`` (the
    ``HloProto`` message, with ``buffer_assignment`` when XLA wrote one),
    ``schedule`` (``{computation name: (instruction name, ...)}``, ``None``
    when the module is not scheduled), ``instruction_ids`` and
    ``computation_ids`` (``{id: name}``).
    """

    def __init__(self, name=None, attributes=None):
        super().__init__(name, attributes)
        self.id = 0
        self.proto = None
        self.schedule: Optional[Dict[str, Tuple[str, ...]]] = None
        self.instruction_ids: Dict[int, str] = {}
        self.computation_ids: Dict[int, str] = {}
        self._frames = None

    @property
    def buffer_assignment(self):
        """The ``BufferAssignmentProto`` message, or ``None``."""
        if self.proto is not None and self.proto.HasField("buffer_assignment"):
            return self.proto.buffer_assignment
        return None

    def to_text(self) -> str:
        """The module as HLO text that :func:`~xlashape.hlo_module.parse_hlo_module`
        reads back into the same computations, instructions, shapes,
        operands, calls and metadata (header attributes, ``ENTRY``,
        ``ROOT``; operands without their shapes)."""
        out = ["HloModule " + (self.name or "m")
               + "".join(f", {k}={v}" for k, v in self.attributes.items()), ""]
        for comp in self.computations:
            head = ("ENTRY " if comp.is_entry else "") + "%" + comp.name
            if comp.signature:
                head += " " + comp.signature
            out.append(head + " {")
            for ins in comp.instructions:
                attrs = ins.attributes_text
                out.append(f"  {'ROOT ' if ins.is_root else ''}%{ins.name} = {ins.shape} "
                           f"{ins.opcode}({ins.operands_text})" + (", " + attrs if attrs else ""))
            out.append("}")
            out.append("")
        return "\n".join(out)

    def stack_trace(self, frame_id) -> List[StackFrame]:
        """The frames of ``stack_frame_id`` (an instruction's
        ``metadata["stack_frame_id"]``, an int or its text), innermost first;
        ``[]`` for 0 or an id the module does not have."""
        index = self.proto.hlo_module.stack_frame_index if self.proto is not None else None
        try:
            fid = int(frame_id)
        except (TypeError, ValueError):
            return []
        if index is None:
            return []
        out = []
        seen = set()
        while 0 < fid <= len(index.stack_frames) and fid not in seen:
            seen.add(fid)
            frame = index.stack_frames[fid - 1]
            loc_id = frame.file_location_id
            if 0 < loc_id <= len(index.file_locations):
                loc = index.file_locations[loc_id - 1]
                out.append(StackFrame(
                    _at(index.file_names, loc.file_name_id),
                    _at(index.function_names, loc.function_name_id),
                    loc.line, loc.column, loc.end_line, loc.end_column))
            fid = frame.parent_frame_id  # 0: the outermost frame
        return out


def _slot_descriptor(cls, name):
    for klass in cls.__mro__:
        if name in klass.__dict__:
            return klass.__dict__[name]
    raise AttributeError(name)  # pragma: no cover - Instruction always has it


_ATTRIBUTES_TEXT = _slot_descriptor(Instruction, "attributes_text")


class ProtoInstruction(Instruction):
    """An :class:`~xlashape.hlo_module.Instruction` read from a proto: its
    ``attributes_text`` is written from the proto the first time it is
    read (most uses of a large module never read it)."""

    __slots__ = ("_ip", "_called")

    @property
    def attributes_text(self) -> str:
        text = _ATTRIBUTES_TEXT.__get__(self, type(self))
        if text is None:
            text = _attributes_text(self._ip, self.opcode, self._called)
            _ATTRIBUTES_TEXT.__set__(self, text)
            self._ip = None
        return text

    @attributes_text.setter
    def attributes_text(self, value) -> None:
        _ATTRIBUTES_TEXT.__set__(self, value)


def _at(names, one_based: int) -> str:
    return names[one_based - 1] if 0 < one_based <= len(names) else ""


def _q(text: str) -> str:
    """A string as XLA's text quotes it (CEscape-like: backslash, quote, newline)."""
    if "\\" in text or '"' in text or "\n" in text:
        text = text.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")
    return '"' + text + '"'


# OpMetadata fields in the order XLA's text prints them (field number -> rank),
# and which are strings (quoted).
_METADATA_ORDER = {1: 0, 2: 1, 3: 2, 4: 3, 17: 4, 18: 5, 19: 6, 12: 7, 16: 8, 15: 9}
_METADATA_STRINGS = frozenset((1, 2, 3, 12, 16))


def _metadata_text(md) -> str:
    items = []
    for fd, value in md.ListFields():
        rank = _METADATA_ORDER.get(fd.number)
        if rank is None:
            continue
        if fd.number in _METADATA_STRINGS:
            items.append((rank, f"{fd.name}={_q(value)}"))
        else:
            items.append((rank, f"{fd.name}={value}"))
    if not items:
        return ""
    items.sort()
    return "{" + " ".join(t for _, t in items) + "}"


# How each opcode names the computations it calls (called_computation_ids in order).
_CALL_ATTRS = {
    "fusion": ("calls",),
    "while": ("condition", "body"),
    "call": ("to_apply",),
    "select-and-scatter": ("select", "scatter"),
}
_TO_APPLY = frozenset(("reduce", "reduce-window", "map", "sort", "scatter", "all-reduce",
                       "all-reduce-start", "reduce-scatter", "topk"))
# Opcodes whose text always has dimensions={...}, even when empty.
_ALWAYS_DIMENSIONS = frozenset(("broadcast", "reduce", "transpose"))


def _call_keys(opcode: str, n: int) -> List[str]:
    """The attribute naming each of the *n* called computations, in
    ``called_computation_ids`` order."""
    keys = _CALL_ATTRS.get(opcode)
    if opcode == "while" and n == 2:
        return ["body", "condition"]  # XLA keeps the body first
    if keys is not None and len(keys) == n:
        return list(keys)
    if opcode == "conditional":
        return ["branch_computations"] * n
    if opcode in _TO_APPLY and n == 1:
        return ["to_apply"]
    if opcode == "custom-call":
        return ["called_computations"] * n
    return ["calls"] * n


_LIST_KEYS = frozenset(("branch_computations", "called_computations"))


def _called_text(opcode: str, names: List[str]) -> List[str]:
    if not names:
        return []
    keys = _call_keys(opcode, len(names))
    if opcode == "while" and len(names) == 2:
        return [f"condition=%{names[1]}", f"body=%{names[0]}"]
    if keys[0] in _LIST_KEYS or (keys[0] == "calls" and len(names) > 1):
        return [keys[0] + "={" + ", ".join("%" + n for n in names) + "}"]
    return [f"{k}=%{n}" for k, n in zip(keys, names)]


def _attributes_text(inst, opcode: str, called) -> str:
    f = {fd.number: value for fd, value in inst.ListFields()}
    parts = []
    if opcode == "get-tuple-element":
        parts.append(f"index={f.get(13, 0)}")
    dims = f.get(14)
    if opcode == "iota":
        if dims:
            parts.append(f"iota_dimension={dims[0]}")
    elif dims or opcode in _ALWAYS_DIMENSIONS:
        parts.append("dimensions={" + ",".join(map(str, dims or ())) + "}")
    if 11 in f:
        parts.append(f"kind={f[11]}")
    if called:
        parts.extend(_called_text(opcode, called))
    if 63 in f:
        parts.append(f"direction={f[63]}")
    if 28 in f:
        parts.append(f"custom_call_target={_q(f[28])}")
    if 65 in f:
        parts.append("custom_call_has_side_effect=true")
    if f.get(26, 0) > 0:
        parts.append(f"channel_id={f[26]}")
    if 47 in f:
        parts.append("is_host_transfer=true")
    if 7 in f:
        md = _metadata_text(f[7])
        if md:
            parts.append("metadata=" + md)
    if 43 in f:
        raw = f[43]
        try:
            cfg = raw.decode("utf-8")
        except UnicodeDecodeError:
            cfg = raw.decode("latin-1")
        parts.append("backend_config=" + (cfg if cfg.startswith("{") else _q(cfg)))
    return ", ".join(parts)


def _index_text(index) -> str:
    return "{" + ",".join(map(str, index)) + "}"


def _header_attributes(mp, entry_shape) -> Dict[str, str]:
    attrs: Dict[str, str] = {}
    if mp.HasField("schedule") and len(mp.schedule.sequences):
        attrs["is_scheduled"] = "true"
    if entry_shape is not None:
        params = ", ".join(str(p) for p in entry_shape[0])
        attrs["entry_computation_layout"] = "{(" + params + ")->" + str(entry_shape[1]) + "}"
    if mp.HasField("input_output_alias") and len(mp.input_output_alias.entries):
        kinds = {0: "may-alias", 1: "may-alias", 2: "must-alias"}
        items = [f"{_index_text(e.output_shape_index)}: ({e.parameter_number}, "
                 f"{_index_text(e.parameter_shape_index)}, {kinds.get(e.kind, 'may-alias')})"
                 for e in mp.input_output_alias.entries]
        attrs["input_output_alias"] = "{ " + ", ".join(items) + " }"
    if mp.HasField("buffer_donor") and len(mp.buffer_donor.entries):
        items = [f"({e.parameter_number}, {_index_text(e.parameter_shape_index)})"
                 for e in mp.buffer_donor.entries]
        attrs["buffer_donor"] = "{ " + ", ".join(items) + " }"
    return attrs


def _program_shape(ps, where: str, shapes) -> Tuple[Tuple[Shape, ...], Shape]:
    params = tuple(shapes(p, f"{where}.parameters[{i}]") for i, p in enumerate(ps.parameters))
    result = shapes(ps.result, f"{where}.result")
    return params, result


def module_from_proto(proto) -> HloProtoModule:
    """An :class:`HloProtoModule` from an ``HloProto`` or ``HloModuleProto``
    message of :mod:`xlashape.protos`."""
    # Hundreds of thousands of new objects, none of them garbage: the cyclic
    # collector's passes over them would cost more than building them.
    enabled = gc.isenabled()
    gc.disable()
    try:
        return _module_from_proto(proto)
    finally:
        if enabled:
            gc.enable()


def _module_from_proto(proto) -> HloProtoModule:
    if isinstance(proto, _pb.HloModuleProto):
        wrapped = _pb.HloProto()
        wrapped.hlo_module.CopyFrom(proto)  # a copy: the caller keeps theirs
        proto = wrapped
    if not isinstance(proto, _pb.HloProto):
        raise ProtoDecodeError(
            f"expected an xla.HloProto or xla.HloModuleProto message, got {type(proto).__name__}")
    mp = proto.hlo_module
    cache: Dict[bytes, Shape] = {}

    def shape(msg, where):
        key = msg.SerializeToString()
        got = cache.get(key)
        if got is None:
            got = _shape_from_message(msg, where, 0)
            cache[key] = got
        return got

    comp_names: Dict[int, str] = {}
    for ci, cp in enumerate(mp.computations):
        comp_names[cp.id] = cp.name
    entry_id = mp.entry_computation_id
    if entry_id not in comp_names:
        by_name = [cp.id for cp in mp.computations if cp.name == mp.entry_computation_name]
        entry_id = by_name[0] if by_name else (mp.computations[-1].id if len(mp.computations)
                                                else None)

    module = HloProtoModule(mp.name)
    module.id = mp.id
    module.proto = proto
    module.mode = "hlo"
    module.computation_ids = dict(comp_names)
    computations: Dict[str, Computation] = {}
    # First pass: every instruction's id and name (operands may refer forward
    # across computations only through called computations, but ids are
    # module-wide).
    inst_names: Dict[int, str] = {}
    for ci, cp in enumerate(mp.computations):
        for ii, ip in enumerate(cp.instructions):
            inst_names[ip.id] = ip.name
    module.instruction_ids = inst_names

    kinds: Dict[str, set] = {}
    for ci, cp in enumerate(mp.computations):
        where = f"HloModuleProto.computations[{ci}]"
        is_entry = cp.id == entry_id
        signature = ""
        if cp.HasField("program_shape"):
            ps = cp.program_shape
            params, result = _program_shape(ps, f"{where}.program_shape", shape)
            names = list(ps.parameter_names)
            signature = "(" + ", ".join(
                f"{names[i] if i < len(names) else f'p{i}'}: {p.human_string()}"
                for i, p in enumerate(params)) + f") -> {result.human_string()}"
        comp = Computation(cp.name, is_entry, signature, 0)
        computations[cp.name] = comp
        root_id = cp.root_id
        cname = cp.name
        append = comp.instructions.append
        for ii, ip in enumerate(cp.instructions):
            # (an instruction without a shape has element type 0 there: refused)
            sm = ip.shape
            s = cache.get(sm.SerializeToString())
            if s is None:
                s = shape(sm, f"{where}.instructions[{ii}].shape")
            opcode = ip.opcode
            if opcode == "parameter":
                operands_text = str(ip.parameter_number)
            else:
                try:
                    operands_text = ", ".join(["%" + inst_names[oid] for oid in ip.operand_ids])
                except KeyError:
                    k, oid = next((k, o) for k, o in enumerate(ip.operand_ids)
                                  if o not in inst_names)
                    raise ProtoDecodeError(f"{where}.instructions[{ii}].operand_ids[{k}]: "
                                           f"no instruction with id {oid}") from None
            called = ()
            if ip.called_computation_ids:
                try:
                    called = [comp_names[cid] for cid in ip.called_computation_ids]
                except KeyError:
                    k, cid = next((k, c) for k, c in enumerate(ip.called_computation_ids)
                                  if c not in comp_names)
                    raise ProtoDecodeError(
                        f"{where}.instructions[{ii}].called_computation_ids[{k}]: "
                        f"no computation with id {cid}") from None
                for key, callee in zip(_call_keys(opcode, len(called)), called):
                    if key == "calls" and opcode == "fusion":
                        module.fused_computations.add(callee)
                    elif key == "to_apply":
                        module.applied_computations.add(callee)
                    kinds.setdefault(callee, set()).add(call_kind(opcode, key))
            ins = ProtoInstruction(cname, ip.name, s, opcode, is_root=ip.id == root_id,
                                   line=0, operands_text=operands_text, attributes_text=None,
                                   comp=comp)
            ins._ip = ip
            ins._called = called
            append(ins)
        module.computations.append(comp)
    for name, ks in kinds.items():
        c = computations.get(name)
        if c is not None:
            c.kinds.update(ks)

    entry_shape = None
    if mp.HasField("host_program_shape") and (len(mp.host_program_shape.parameters)
                                              or mp.host_program_shape.HasField("result")):
        entry_shape = _program_shape(mp.host_program_shape,
                                     "HloModuleProto.host_program_shape", shape)
    elif entry_id is not None:
        ecp = [cp for cp in mp.computations if cp.id == entry_id][0]
        if ecp.HasField("program_shape"):
            entry_shape = _program_shape(ecp.program_shape, "entry program_shape", shape)
    module.attributes = _header_attributes(mp, entry_shape)

    if mp.HasField("schedule") and len(mp.schedule.sequences):
        sched: Dict[str, Tuple[str, ...]] = {}
        for cid, seq in sorted(mp.schedule.sequences.items()):
            cname = comp_names.get(cid)
            if cname is None:
                raise ProtoDecodeError(
                    f"HloModuleProto.schedule.sequences: no computation with id {cid}")
            names = []
            for k, iid in enumerate(seq.instruction_ids):
                n = inst_names.get(iid)
                if n is None:
                    raise ProtoDecodeError(
                        f"HloModuleProto.schedule.sequences[{cid}].instruction_ids[{k}]: "
                        f"no instruction with id {iid}")
                names.append(n)
            sched[cname] = tuple(names)
        module.schedule = sched
    return module


def read_hlo_proto_module(source) -> HloProtoModule:
    """An :class:`HloProtoModule` from a ``*.hlo.pb`` / ``*.hlo.pb.gz`` path,
    the bytes of an ``HloProto`` or ``HloModuleProto``, or such a message.

    Malformed bytes, and ids that refer to nothing, raise
    :class:`~xlashape.errors.ProtoDecodeError` naming the file and field.
    """
    if isinstance(source, (_pb.HloProto, _pb.HloModuleProto)):
        return module_from_proto(source)
    return module_from_proto(_pb.read_hlo_proto(source))

