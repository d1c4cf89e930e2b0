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
schema declares.

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
shardings and the other undeclared fields are not in ``attributes``.
"""

from __future__ import annotations

from typing import Dict, List, NamedTuple, Optional, Tuple

from . import protos as _pb
from .errors import ProtoDecodeError, XlaShapeError
from .hlo_module import Computation, HloModule, Instruction, call_kind
from .shape import Shape
from .shape_proto import _shape_from_message

__all__ = [
    "HloProtoModule",
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


def _at(names, one_based: int) -> str:
    return names[one_based - 1] if 0 < one_based <= len(names) else ""


def _q(text: str) -> str:
    """A string as XLA's text quotes it (CEscape-like: backslash, quote, newline)."""
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n") + '"'


def _metadata_text(md) -> str:
    parts = []
    if md.op_type:
        parts.append(f"op_type={_q(md.op_type)}")
    if md.op_name:
        parts.append(f"op_name={_q(md.op_name)}")
    if md.source_file:
        parts.append(f"source_file={_q(md.source_file)}")
    if md.source_line:
        parts.append(f"source_line={md.source_line}")
    if md.source_end_line:
        parts.append(f"source_end_line={md.source_end_line}")
    if md.source_column:
        parts.append(f"source_column={md.source_column}")
    if md.source_end_column:
        parts.append(f"source_end_column={md.source_end_column}")
    if md.deduplicated_name:
        parts.append(f"deduplicated_name={_q(md.deduplicated_name)}")
    if md.scheduling_name:
        parts.append(f"scheduling_name={_q(md.scheduling_name)}")
    if md.stack_frame_id:
        parts.append(f"stack_frame_id={md.stack_frame_id}")
    return "{" + " ".join(parts) + "}" if parts else ""


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


def _called_text(opcode: str, names: List[str]) -> List[str]:
    if not names:
        return []
    refs = ["%" + n for n in names]
    keys = _CALL_ATTRS.get(opcode)
    if opcode == "while" and len(refs) == 2:
        # XLA keeps the body first and the condition second
        return [f"condition={refs[1]}", f"body={refs[0]}"]
    if keys is not None and len(keys) == len(refs):
        return [f"{k}={r}" for k, r in zip(keys, refs)]
    if opcode == "conditional":
        return ["branch_computations={" + ", ".join(refs) + "}"]
    if opcode in _TO_APPLY and len(refs) == 1:
        return [f"to_apply={refs[0]}"]
    if opcode == "custom-call":
        return ["called_computations={" + ", ".join(refs) + "}"]
    if len(refs) == 1:
        return [f"calls={refs[0]}"]
    return ["calls={" + ", ".join(refs) + "}"]


def _attributes_text(inst, opcode: str, called: List[str]) -> str:
    parts = []
    if opcode == "get-tuple-element":
        parts.append(f"index={inst.tuple_index}")
    if opcode == "iota":
        if inst.dimensions:
            parts.append(f"iota_dimension={inst.dimensions[0]}")
    elif inst.dimensions or opcode in _ALWAYS_DIMENSIONS:
        parts.append("dimensions={" + ",".join(map(str, inst.dimensions)) + "}")
    if inst.fusion_kind:
        parts.append(f"kind={inst.fusion_kind}")
    parts.extend(_called_text(opcode, called))
    if inst.comparison_direction:
        parts.append(f"direction={inst.comparison_direction}")
    if inst.custom_call_target:
        parts.append(f"custom_call_target={_q(inst.custom_call_target)}")
    if inst.custom_call_has_side_effect:
        parts.append("custom_call_has_side_effect=true")
    if inst.channel_id > 0:
        parts.append(f"channel_id={inst.channel_id}")
    if inst.is_host_transfer:
        parts.append("is_host_transfer=true")
    if inst.HasField("metadata"):
        md = _metadata_text(inst.metadata)
        if md:
            parts.append("metadata=" + md)
    if inst.backend_config:
        try:
            cfg = inst.backend_config.decode("utf-8")
        except UnicodeDecodeError:
            cfg = inst.backend_config.decode("latin-1")
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
    if isinstance(proto, _pb.HloModuleProto):
        wrapped = _pb.HloProto()
        wrapped.hlo_module.CopyFrom(proto)
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
            try:
                got = _shape_from_message(msg, where, 0)
            except ProtoDecodeError:
                raise
            except XlaShapeError as e:  # pragma: no cover - conversion wraps its errors
                raise ProtoDecodeError(f"{where}: {e}") from None
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
        for ii, ip in enumerate(cp.instructions):
            iw = f"{where}.instructions[{ii}]"
            if not ip.HasField("shape"):
                raise ProtoDecodeError(f"{iw} ({ip.name!r}): no shape")
            s = shape(ip.shape, f"{iw}.shape")
            opcode = ip.opcode
            operands = []
            for k, oid in enumerate(ip.operand_ids):
                name = inst_names.get(oid)
                if name is None:
                    raise ProtoDecodeError(
                        f"{iw}.operand_ids[{k}]: no instruction with id {oid}")
                operands.append(name)
            called = []
            for k, cid in enumerate(ip.called_computation_ids):
                name = comp_names.get(cid)
                if name is None:
                    raise ProtoDecodeError(
                        f"{iw}.called_computation_ids[{k}]: no computation with id {cid}")
                called.append(name)
            if opcode == "parameter":
                operands_text = str(ip.parameter_number)
            else:
                operands_text = ", ".join("%" + n for n in operands)
            attrs = _attributes_text(ip, opcode, called)
            ins = Instruction(cp.name, ip.name, s, opcode, is_root=ip.id == cp.root_id,
                              line=0, operands_text=operands_text, attributes_text=attrs,
                              comp=comp)
            comp.instructions.append(ins)
            for key, callee in _callees(opcode, called):
                if key == "calls" and opcode == "fusion":
                    module.fused_computations.add(callee)
                elif key == "to_apply":
                    module.applied_computations.add(callee)
                kinds.setdefault(callee, set()).add(call_kind(opcode, key))
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


def _callees(opcode: str, called: List[str]):
    keys = [t.split("=", 1)[0] for t in _called_text(opcode, called)]
    if opcode == "while" and len(called) == 2:
        return [("body", called[0]), ("condition", called[1])]
    if len(keys) == len(called):
        return list(zip(keys, called))
    key = keys[0] if keys else "calls"
    return [(key, c) for c in called]


def read_hlo_proto_module(source) -> HloProtoModule:
    """An :class:`HloProtoModule` from a ``*.hlo.pb`` / ``*.hlo.pb.gz`` path,
    the bytes of an ``HloProto`` or ``HloModuleProto``, or such a message.

    Malformed bytes, and ids that refer to nothing, raise
    :class:`~xlashape.errors.ProtoDecodeError` naming the file and field.
    """
    if isinstance(source, (_pb.HloProto, _pb.HloModuleProto)):
        return module_from_proto(source)
    return module_from_proto(_pb.read_hlo_proto(source))

