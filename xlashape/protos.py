"""XLA's protobuf messages, and readers for the files XLA writes with them.

The message classes (``ShapeProto``, ``LayoutProto``, ``HloProto``,
``BufferAssignmentProto``, ``MemoryUsageReportProto``, ...) are built when
this module is imported, from descriptors written in Python below with the
field numbers of XLA's ``xla_data.proto`` and ``service/hlo.proto``, by the
``protobuf`` runtime: there is no generated ``*_pb2`` file and no code
generation step. They live in a descriptor pool of their own, so they never
clash with the ``xla.*`` messages that jaxlib or TensorFlow register in
protobuf's default pool.

Schema: the field numbers are those of XLA as shipped in jaxlib 0.10.2
(checked against the descriptors compiled into that jaxlib, and against
openxla/xla ``xla/xla_data.proto`` at commit 011b758 and
``xla/service/hlo.proto`` at 0b8fa9f). Only the fields xlashape reads are declared; the
others (literals, shardings, windows, dimension numbers, newer fields) are
kept by protobuf as unknown fields: they survive a parse and a
re-serialization unchanged, and :func:`unknown_field_numbers` lists them.

Readers (each returns the message; bad bytes raise
:class:`~xlashape.errors.ProtoDecodeError`, an ``UnreadableInputError`` and
a ``ShapeValueError``, naming what failed):

- :func:`read_hlo_proto`: an ``HloProto`` from a ``*.hlo.pb`` /
  ``*.hlo.pb.gz`` file (``--xla_dump_hlo_as_proto``) or its bytes; a bare
  ``HloModuleProto`` (``as_serialized_hlo_module_proto()``) is read too and
  wrapped.
- :func:`read_buffer_assignment`: a ``BufferAssignmentProto`` from
  ``memory_analysis().serialized_buffer_assignment_proto`` bytes.
- :func:`read_memory_usage_report`: a ``MemoryUsageReportProto`` from a
  ``*-memory-usage-report.pb`` file or bytes.
- :func:`parse_message`: any message class here from bytes.
"""

from __future__ import annotations

import gzip
import os
import zlib
from typing import Iterable, List, Optional, Tuple, Union

from google.protobuf import descriptor_pb2, descriptor_pool
from google.protobuf import message as _pb_message

from .errors import ProtoDecodeError, UnreadableInputError

__all__ = [
    "SCHEMA_VERSION",
    "PrimitiveTypeProto",
    "DimLevelType",
    "TileProto",
    "SplitConfigProto",
    "LayoutProto",
    "ShapeProto",
    "ProgramShapeProto",
    "OpMetadata",
    "HloInstructionProto",
    "HloComputationProto",
    "HloScheduleProto",
    "HloInputOutputAliasProto",
    "HloBufferDonorProto",
    "CrossProgramPrefetch",
    "StackFrameIndexProto",
    "HloModuleProto",
    "LogicalBufferProto",
    "BufferAllocationProto",
    "HeapSimulatorTrace",
    "MemoryUsageReportProto",
    "BufferAssignmentProto",
    "HloProto",
    "parse_message",
    "read_hlo_proto",
    "read_hlo_module_proto",
    "read_buffer_assignment",
    "read_memory_usage_report",
    "unknown_field_numbers",
]

#: The XLA whose schema the declared field numbers follow.
SCHEMA_VERSION = "XLA of jaxlib 0.10.2 (openxla/xla xla_data.proto, service/hlo.proto)"

_F = descriptor_pb2.FieldDescriptorProto
_OPT, _REP = _F.LABEL_OPTIONAL, _F.LABEL_REPEATED
_SCALARS = {
    "int64": _F.TYPE_INT64,
    "int32": _F.TYPE_INT32,
    "bool": _F.TYPE_BOOL,
    "string": _F.TYPE_STRING,
    "bytes": _F.TYPE_BYTES,
    "double": _F.TYPE_DOUBLE,
    "float": _F.TYPE_FLOAT,
}

# Each message: (name, [field, ...], [nested message, ...], [nested enum, ...])
# Each field: (name, number, type, repeated?) where type is a scalar name
# above, "enum:.xla.X" or a message type name ".xla.X"; a fifth item "opt"
# marks a proto3 `optional` field (explicit presence).

_PRIMITIVE_TYPES = [
    ("PRIMITIVE_TYPE_INVALID", 0), ("PRED", 1),
    ("S1", 30), ("S2", 26), ("S4", 21), ("S8", 2), ("S16", 3), ("S32", 4), ("S64", 5),
    ("U1", 31), ("U2", 27), ("U4", 22), ("U8", 6), ("U16", 7), ("U32", 8), ("U64", 9),
    ("F16", 10), ("F32", 11), ("BF16", 16), ("F64", 12),
    ("F8E5M2", 19), ("F8E4M3", 28), ("F8E4M3FN", 20), ("F8E4M3B11FNUZ", 23),
    ("F8E3M4", 29), ("F8E5M2FNUZ", 24), ("F8E4M3FNUZ", 25),
    ("F4E2M1FN", 32), ("F8E8M0FNU", 33), ("F6E3M2FN", 35), ("F6E2M3FN", 36),
    ("C64", 15), ("C128", 18),
    ("TUPLE", 13), ("OPAQUE_TYPE", 14), ("TOKEN", 17), ("BUFFER", 34),
]

_XLA_DATA_ENUMS = [
    ("PrimitiveType", _PRIMITIVE_TYPES),
    ("DimLevelType", [("DIM_DENSE", 0), ("DIM_COMPRESSED", 1), ("DIM_SINGLETON", 2),
                      ("DIM_LOOSE_COMPRESSED", 3)]),
]

_XLA_DATA_MESSAGES = [
    ("TileProto", [("dimensions", 1, "int64", True)], [], []),
    ("SplitConfigProto", [
        ("dimension", 1, "int64", False),
        ("split_indices", 2, "int64", True),
    ], [], []),
    ("LayoutProto", [
        ("minor_to_major", 1, "int64", True),
        ("tiles", 6, ".xla.TileProto", True),
        ("element_size_in_bits", 7, "int64", False),
        ("memory_space", 8, "int64", False),
        ("dim_level_types", 9, "enum:.xla.DimLevelType", True),
        ("physical_shape", 10, ".xla.ShapeProto", False),
        ("index_primitive_type", 11, "enum:.xla.PrimitiveType", False),
        ("pointer_primitive_type", 12, "enum:.xla.PrimitiveType", False),
        ("dim_unique", 13, "bool", True),
        ("dim_ordered", 14, "bool", True),
        ("dynamic_shape_metadata_prefix_bytes", 15, "int64", False),
        ("tail_padding_alignment_in_elements", 16, "int64", False),
        ("split_configs", 17, ".xla.SplitConfigProto", True),
    ], [], []),
    ("ShapeProto", [
        ("element_type", 2, "enum:.xla.PrimitiveType", False),
        ("dimensions", 3, "int64", True),
        ("tuple_shapes", 4, ".xla.ShapeProto", True),
        ("layout", 5, ".xla.LayoutProto", False),
        ("is_dynamic_dimension", 6, "bool", True),
    ], [], []),
    ("ProgramShapeProto", [
        ("parameters", 1, ".xla.ShapeProto", True),
        ("result", 2, ".xla.ShapeProto", False),
        ("parameter_names", 3, "string", True),
    ], [], []),
    ("OpMetadata", [
        ("op_type", 1, "string", False),
        ("op_name", 2, "string", False),
        ("source_file", 3, "string", False),
        ("source_line", 4, "int32", False),
        ("size_of_generated_code_in_bytes", 8, "int64", False),
        ("size_of_memory_working_set_in_bytes", 9, "int64", False),
        ("deduplicated_name", 12, "string", False),
        ("stack_frame_id", 15, "int32", False),
        ("scheduling_name", 16, "string", False),
        ("source_end_line", 17, "int32", False),
        ("source_column", 18, "int32", False),
        ("source_end_column", 19, "int32", False),
    ], [], []),
]

_HLO_ENUMS: list = []

_HLO_MESSAGES = [
    ("HloInstructionProto", [
        ("name", 1, "string", False),
        ("opcode", 2, "string", False),
        ("shape", 3, ".xla.ShapeProto", False),
        ("metadata", 7, ".xla.OpMetadata", False),
        ("parameter_number", 9, "int64", False),
        ("fusion_kind", 11, "string", False),
        ("tuple_index", 13, "int64", False),
        ("dimensions", 14, "int64", True),
        ("channel_id", 26, "int64", False),
        ("custom_call_target", 28, "string", False),
        ("outfeed_shape", 29, ".xla.ShapeProto", False),
        ("id", 35, "int64", False),
        ("operand_ids", 36, "int64", True),
        ("control_predecessor_ids", 37, "int64", True),
        ("called_computation_ids", 38, "int64", True),
        ("backend_config", 43, "bytes", False),
        ("is_host_transfer", 47, "bool", False),
        ("constrain_layout", 56, "bool", False),
        ("operand_shapes_with_layout", 57, ".xla.ShapeProto", True),
        ("comparison_direction", 63, "string", False),
        ("custom_call_has_side_effect", 65, "bool", False),
        ("comparison_type", 72, "string", False),
        ("async_execution_thread", 79, "string", False),
        ("is_composite", 89, "bool", False),
    ], [], []),
    ("HloComputationProto", [
        ("name", 1, "string", False),
        ("instructions", 2, ".xla.HloInstructionProto", True),
        ("program_shape", 4, ".xla.ProgramShapeProto", False),
        ("id", 5, "int64", False),
        ("root_id", 6, "int64", False),
        ("is_fusion_computation", 7, "bool", False),
        ("execution_thread", 8, "string", False),
    ], [], []),
    ("HloScheduleProto", [
        ("sequences", 1, ".xla.HloScheduleProto.SequencesEntry", True),
    ], [
        ("InstructionSequence", [("instruction_ids", 1, "int64", True)], [], []),
        ("SequencesEntry", [
            ("key", 1, "int64", False),
            ("value", 2, ".xla.HloScheduleProto.InstructionSequence", False),
        ], [], [], "map"),
    ], []),
    ("HloInputOutputAliasProto", [
        ("entries", 1, ".xla.HloInputOutputAliasProto.AliasEntryProto", True),
    ], [
        ("AliasEntryProto", [
            ("output_shape_index", 1, "int64", True),
            ("parameter_number", 2, "int64", False),
            ("parameter_shape_index", 3, "int64", True),
            ("kind", 4, "enum:.xla.Kind", False),
        ], [], []),
    ], []),
    ("HloBufferDonorProto", [
        ("entries", 1, ".xla.HloBufferDonorProto.BufferDonorEntryProto", True),
    ], [
        ("BufferDonorEntryProto", [
            ("parameter_number", 1, "int64", False),
            ("parameter_shape_index", 2, "int64", True),
        ], [], []),
    ], []),
    ("CrossProgramPrefetch", [
        ("parameter", 1, "int64", False),
        ("index", 2, "int64", True),
        ("offset", 3, "int64", False),
    ], [], []),
    ("StackFrameIndexProto", [
        ("file_names", 1, "string", True),
        ("function_names", 2, "string", True),
        ("file_locations", 3, ".xla.StackFrameIndexProto.FileLocation", True),
        ("stack_frames", 4, ".xla.StackFrameIndexProto.StackFrame", True),
    ], [
        ("FileLocation", [
            ("file_name_id", 1, "int32", False),
            ("function_name_id", 2, "int32", False),
            ("line", 3, "int32", False),
            ("column", 4, "int32", False),
            ("end_line", 5, "int32", False),
            ("end_column", 6, "int32", False),
        ], [], []),
        ("StackFrame", [
            ("file_location_id", 1, "int32", False),
            ("parent_frame_id", 2, "int32", False),
        ], [], []),
    ], []),
    ("HloModuleProto", [
        ("name", 1, "string", False),
        ("entry_computation_name", 2, "string", False),
        ("computations", 3, ".xla.HloComputationProto", True),
        ("host_program_shape", 4, ".xla.ProgramShapeProto", False),
        ("id", 5, "int64", False),
        ("entry_computation_id", 6, "int64", False),
        ("schedule", 7, ".xla.HloScheduleProto", False),
        ("input_output_alias", 8, ".xla.HloInputOutputAliasProto", False),
        ("cross_program_prefetches", 10, ".xla.CrossProgramPrefetch", True),
        ("is_dynamic", 11, "bool", False),
        ("use_auto_spmd_partitioning", 16, "bool", False),
        ("stack_frame_index", 17, ".xla.StackFrameIndexProto", False),
        ("buffer_donor", 18, ".xla.HloBufferDonorProto", False),
        ("device_type", 21, "string", False),
    ], [], []),
    ("LogicalBufferProto", [
        ("id", 1, "int64", False),
        ("size", 2, "int64", False),
        ("defined_at", 3, ".xla.LogicalBufferProto.Location", False),
        ("color", 4, "int64", False),
    ], [
        ("Location", [
            ("instruction_name", 2, "string", False),
            ("shape_index", 3, "int64", True),
            ("instruction_id", 4, "int64", False),
        ], [], []),
    ], []),
    ("BufferAllocationProto", [
        ("index", 1, "int64", False),
        ("size", 2, "int64", False),
        ("is_thread_local", 3, "bool", False),
        ("is_entry_computation_parameter", 5, "bool", False),
        ("parameter_number", 6, "int64", False),
        ("maybe_live_out", 7, "bool", False),
        ("color", 8, "int64", False),
        ("assigned", 9, ".xla.BufferAllocationProto.Assigned", True),
        ("parameter_shape_index", 10, "int64", True),
        ("is_tuple", 11, "bool", False),
        ("is_constant", 12, "bool", False),
        ("is_parameter_aliased_with_output", 13, "bool", False),
    ], [
        ("Assigned", [
            ("logical_buffer_id", 1, "int64", False),
            ("offset", 2, "int64", False),
            ("size", 3, "int64", False),
            ("element_type", 4, "enum:.xla.PrimitiveType", False),
        ], [], []),
    ], []),
    ("HeapSimulatorTrace", [
        ("events", 1, ".xla.HeapSimulatorTrace.Event", True),
        ("whole_module_simulation", 2, "bool", False),
        ("buffer_allocation_index", 3, "int64", False),
    ], [
        ("Event", [
            ("kind", 1, "enum:.xla.HeapSimulatorTrace.Event.Kind", False),
            ("buffer_id", 2, "int64", False),
            ("computation_name", 3, "string", False),
            ("instruction_name", 4, "string", False),
            ("share_with_canonical_id", 5, "int64", False),
        ], [], [("Kind", [("ALLOC", 0), ("FREE", 1), ("SHARE_WITH", 2)])]),
    ], []),
    ("MemoryUsageReportProto", [
        ("memory_space_allocation_entries", 1,
         ".xla.MemoryUsageReportProto.AllocationEntryInMemorySpace", True),
    ], [
        ("AllocationEntry", [
            ("index", 1, "int64", False),
            ("size", 2, "int64", False),
            ("cumulative_size", 3, "int64", False),
            ("cumulative_percentage", 4, "double", False),
            ("defining_positions", 5, "string", True),
            ("hlo_text", 6, "string", False),
        ], [], []),
        ("AllocationEntryInMemorySpace", [
            ("total_bytes", 1, "int64", False),
            ("memory_space_color", 2, "int32", False, "opt"),
            ("allocation_entries", 3,
             ".xla.MemoryUsageReportProto.AllocationEntry", True),
        ], [], []),
    ], []),
    ("BufferAssignmentProto", [
        ("logical_buffers", 1, ".xla.LogicalBufferProto", True),
        ("buffer_aliases", 2, ".xla.BufferAssignmentProto.BufferAlias", True),
        ("buffer_allocations", 3, ".xla.BufferAllocationProto", True),
        ("heap_simulator_traces", 4, ".xla.HeapSimulatorTrace", True),
        ("peak_buffers", 5, ".xla.BufferAssignmentProto.PeakBuffers", True),
    ], [
        ("BufferAlias", [
            ("source_buffer_id", 1, "int64", False),
            ("location", 2, ".xla.LogicalBufferProto.Location", False),
        ], [], []),
        ("PeakBuffers", [
            ("index", 1, "int64", False),
            ("logical_buffer_ids", 2, "int64", True),
        ], [], []),
    ], []),
    ("HloProto", [
        ("hlo_module", 1, ".xla.HloModuleProto", False),
        ("buffer_assignment", 3, ".xla.BufferAssignmentProto", False),
    ], [], []),
]

_HLO_FILE_ENUMS = [
    ("Kind", [("UNDEFINED_ALIAS", 0), ("MAY_ALIAS", 1), ("MUST_ALIAS", 2)]),
]


def _add_enum(container, name, values):
    e = container.add()
    e.name = name
    for vname, number in values:
        v = e.value.add()
        v.name = vname
        v.number = number


def _add_message(container, spec):
    name, fields, nested, enums = spec[:4]
    m = container.add()
    m.name = name
    if len(spec) > 4 and spec[4] == "map":
        m.options.map_entry = True
    for ename, values in enums:
        _add_enum(m.enum_type, ename, values)
    for sub in nested:
        _add_message(m.nested_type, sub)
    for field in fields:
        fname, number, ftype, repeated = field[:4]
        f = m.field.add()
        f.name = fname
        f.number = number
        f.json_name = _json_name(fname)
        f.label = _REP if repeated else _OPT
        if ftype in _SCALARS:
            f.type = _SCALARS[ftype]
        elif ftype.startswith("enum:"):
            f.type = _F.TYPE_ENUM
            f.type_name = ftype[5:]
        else:
            f.type = _F.TYPE_MESSAGE
            f.type_name = ftype
        if len(field) > 4 and field[4] == "opt":
            # proto3 `optional`: a synthetic one-field oneof named "_<field>"
            f.proto3_optional = True
            f.oneof_index = len(m.oneof_decl)
            m.oneof_decl.add().name = "_" + fname
    return m


def _json_name(name: str) -> str:
    head, *rest = name.split("_")
    return head + "".join(p[:1].upper() + p[1:] for p in rest)


def _file(name, enums, messages, deps=()):
    fd = descriptor_pb2.FileDescriptorProto()
    fd.name = name
    fd.package = "xla"
    fd.syntax = "proto3"
    fd.dependency.extend(deps)
    for ename, values in enums:
        _add_enum(fd.enum_type, ename, values)
    for spec in messages:
        _add_message(fd.message_type, spec)
    return fd


def _build_pool():
    pool = descriptor_pool.DescriptorPool()
    # File names of our own (not XLA's), so nothing can confuse the two.
    pool.AddSerializedFile(_file(
        "xlashape/xla_data_subset.proto", _XLA_DATA_ENUMS, _XLA_DATA_MESSAGES
    ).SerializeToString())
    pool.AddSerializedFile(_file(
        "xlashape/hlo_subset.proto", _HLO_FILE_ENUMS, _HLO_MESSAGES,
        deps=["xlashape/xla_data_subset.proto"]).SerializeToString())
    return pool


_POOL = _build_pool()


def _class_of(desc):
    try:
        from google.protobuf.message_factory import GetMessageClass
    except ImportError:  # protobuf < 4.22: the factory object
        from google.protobuf.message_factory import MessageFactory

        return MessageFactory(_POOL).GetPrototype(desc)
    return GetMessageClass(desc)


def _attach_nested(cls, desc) -> None:
    """Nested messages and enums as class attributes (``HeapSimulatorTrace.Event.Kind``),
    as generated code has them; the upb runtime does this itself, the
    pure-Python one does not."""
    from google.protobuf.internal.enum_type_wrapper import EnumTypeWrapper

    for nested in desc.nested_types:
        sub = _class_of(nested)
        if not hasattr(cls, nested.name):
            setattr(cls, nested.name, sub)
        _attach_nested(sub, nested)
    for enum in desc.enum_types:
        if not hasattr(cls, enum.name):
            setattr(cls, enum.name, EnumTypeWrapper(enum))
        for value in enum.values:
            if not hasattr(cls, value.name):
                setattr(cls, value.name, value.number)


def _message_class(full_name: str):
    desc = _POOL.FindMessageTypeByName(full_name)
    cls = _class_of(desc)
    _attach_nested(cls, desc)
    return cls


TileProto = _message_class("xla.TileProto")
SplitConfigProto = _message_class("xla.SplitConfigProto")
LayoutProto = _message_class("xla.LayoutProto")
ShapeProto = _message_class("xla.ShapeProto")
ProgramShapeProto = _message_class("xla.ProgramShapeProto")
OpMetadata = _message_class("xla.OpMetadata")
HloInstructionProto = _message_class("xla.HloInstructionProto")
HloComputationProto = _message_class("xla.HloComputationProto")
HloScheduleProto = _message_class("xla.HloScheduleProto")
HloInputOutputAliasProto = _message_class("xla.HloInputOutputAliasProto")
HloBufferDonorProto = _message_class("xla.HloBufferDonorProto")
CrossProgramPrefetch = _message_class("xla.CrossProgramPrefetch")
StackFrameIndexProto = _message_class("xla.StackFrameIndexProto")
HloModuleProto = _message_class("xla.HloModuleProto")
LogicalBufferProto = _message_class("xla.LogicalBufferProto")
BufferAllocationProto = _message_class("xla.BufferAllocationProto")
HeapSimulatorTrace = _message_class("xla.HeapSimulatorTrace")
MemoryUsageReportProto = _message_class("xla.MemoryUsageReportProto")
BufferAssignmentProto = _message_class("xla.BufferAssignmentProto")
HloProto = _message_class("xla.HloProto")

#: name -> number of XLA's PrimitiveType enum, as the wire carries it
PrimitiveTypeProto = dict(_PRIMITIVE_TYPES)
#: name -> number of XLA's DimLevelType enum
DimLevelType = {"DIM_DENSE": 0, "DIM_COMPRESSED": 1, "DIM_SINGLETON": 2,
                "DIM_LOOSE_COMPRESSED": 3}


# ---------------------------------------------------------------------------
# Reading

BytesLike = Union[bytes, bytearray, memoryview]
Source = Union[str, "os.PathLike[str]", BytesLike]

_GZIP_MAGIC = b"\x1f\x8b"


def parse_message(cls, data: BytesLike, what: Optional[str] = None):
    """Parse *data* as a message of class *cls* (one of this module's).

    Malformed bytes (a cut-off field, a bad wire type, a length past the
    end, invalid UTF-8 in a string field, nesting deeper than protobuf
    allows) raise :class:`ProtoDecodeError` naming *what* and the
    message type. Fields this module does not declare are kept as unknown
    fields, as protobuf does.
    """
    what = what or cls.DESCRIPTOR.name
    if isinstance(data, memoryview):
        data = data.tobytes()
    elif isinstance(data, bytearray):
        data = bytes(data)
    elif not isinstance(data, bytes):
        raise UnreadableInputError(
            f"{what}: expected bytes, got {type(data).__name__}")
    msg = cls()
    try:
        msg.ParseFromString(data)
    except _pb_message.DecodeError as e:
        raise ProtoDecodeError(
            f"{what}: not a valid {cls.DESCRIPTOR.full_name} "
            f"({len(data)} bytes): {e}") from None
    except (ValueError, TypeError, RecursionError, OverflowError) as e:
        raise ProtoDecodeError(
            f"{what}: not a valid {cls.DESCRIPTOR.full_name} "
            f"({len(data)} bytes): {type(e).__name__}: {e}") from None
    return msg


def _load_bytes(source: Source, what: str) -> Tuple[bytes, str]:
    """Bytes of *source* (a path or bytes), gunzipped if gzip; and a label."""
    if isinstance(source, (bytes, bytearray, memoryview)):
        data = bytes(source)
        label = what
    elif isinstance(source, (str, os.PathLike)):
        path = os.fspath(source)
        label = f"{what} {os.path.basename(path)!r}"
        try:
            with open(path, "rb") as fh:
                data = fh.read()
        except OSError as e:
            raise UnreadableInputError(f"{label}: cannot read: {e}") from None
    else:
        raise UnreadableInputError(
            f"{what}: expected a path or bytes, got {type(source).__name__}")
    if data[:2] == _GZIP_MAGIC:
        try:
            data = gzip.decompress(data)
        except (OSError, EOFError, zlib.error) as e:
            raise ProtoDecodeError(f"{label}: bad gzip data: {e}") from None
    return data, label


def _require_nonempty(data: bytes, label: str, kind: str) -> None:
    if not data:
        raise ProtoDecodeError(f"{label}: empty, not a serialized {kind}")


def read_hlo_proto(source: Source):
    """Read an ``HloProto`` (``*.hlo.pb``, ``*.hlo.pb.gz``, or their bytes).

    XLA's ``--xla_dump_hlo_as_proto`` writes an ``HloProto``: the module in
    ``hlo_module`` and, for the optimized module, the buffer assignment in
    ``buffer_assignment`` (with ``heap_simulator_traces``). Bytes of a bare
    ``HloModuleProto`` (what ``as_serialized_hlo_module_proto()`` returns)
    are recognised (field 1 then holds a name, not a module) and wrapped
    into an ``HloProto`` with no buffer assignment.
    """
    data, label = _load_bytes(source, "HLO proto")
    _require_nonempty(data, label, "xla.HloProto")
    if _starts_like_bare_module(data):
        # the module's bytes are field 1 of an HloProto: parse them as that
        out = HloProto()
        try:
            out.ParseFromString(b"\x0a" + _varint(len(data)) + data)
        except Exception:
            pass
        else:
            if out.hlo_module.computations:
                return out
    try:
        proto = parse_message(HloProto, data, label)
    except UnreadableInputError as e:
        first_error: Optional[UnreadableInputError] = e
        proto = None
    else:
        first_error = None
        if proto.hlo_module.computations:
            return proto
    # Not an HloProto holding a module: a bare HloModuleProto? (In an
    # HloProto field 1 is the module and field 3 the buffer assignment; in
    # an HloModuleProto field 1 is the name and field 3 the computations.)
    out = HloProto()
    try:
        out.ParseFromString(b"\x0a" + _varint(len(data)) + data)
        is_module = len(out.hlo_module.computations) > 0
    except Exception:
        is_module = False
    if is_module:
        return out
    if first_error is not None:
        raise first_error
    raise ProtoDecodeError(
        f"{label}: an HloProto without an HLO module (no computations)")


def _varint(n: int) -> bytes:
    out = bytearray()
    while True:
        byte = n & 0x7F
        n >>= 7
        if n:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return bytes(out)


def _starts_like_bare_module(data: bytes) -> bool:
    """True if *data* opens with a name string rather than a module message.

    Both messages start with field 1, length-delimited (byte 0x0a). In an
    HloProto it holds the module, whose own first field is its name (0x0a
    again) or another field tag (a byte below 0x20 for fields 1-3); in a bare
    HloModuleProto it holds the module's name, whose first character is
    printable."""
    if len(data) < 3 or data[0] != 0x0A:
        return False
    i = 1
    while i < len(data) and data[i] & 0x80:
        i += 1
    i += 1
    return i < len(data) and data[i] >= 0x20


def read_hlo_module_proto(source: Source):
    """The ``HloModuleProto`` of :func:`read_hlo_proto`'s result."""
    return read_hlo_proto(source).hlo_module


def read_buffer_assignment(source: Source):
    """A ``BufferAssignmentProto`` from bytes or a file.

    ``compiled.memory_analysis().serialized_buffer_assignment_proto`` is
    such bytes (where the backend fills it in).
    """
    data, label = _load_bytes(source, "buffer assignment proto")
    _require_nonempty(data, label, "xla.BufferAssignmentProto")
    return parse_message(BufferAssignmentProto, data, label)


def read_memory_usage_report(source: Source):
    """A ``MemoryUsageReportProto`` from a ``*-memory-usage-report.pb`` file
    (or ``.pb.gz``) or its bytes."""
    data, label = _load_bytes(source, "memory usage report proto")
    _require_nonempty(data, label, "xla.MemoryUsageReportProto")
    return parse_message(MemoryUsageReportProto, data, label)


def unknown_field_numbers(msg) -> List[Tuple[str, int]]:
    """Every field number in *msg* (recursively) that this module does not
    declare, as ``(message full name, field number)`` pairs, sorted."""
    found = set()
    _collect_unknown(msg, found)
    return sorted(found)


def _collect_unknown(msg, found) -> None:
    name = msg.DESCRIPTOR.full_name
    for number in _unknown_numbers(msg):
        found.add((name, number))
    for fd, value in msg.ListFields():
        if fd.type != fd.TYPE_MESSAGE:
            continue
        if _is_repeated(fd):
            if fd.message_type.GetOptions().map_entry:
                items: Iterable = value.values()
            else:
                items = value
            for item in items:
                if hasattr(item, "DESCRIPTOR"):
                    _collect_unknown(item, found)
        else:
            _collect_unknown(value, found)


def _is_repeated(fd) -> bool:
    # FieldDescriptor.label is gone in protobuf 7; is_repeated is newer than 4.21
    rep = getattr(fd, "is_repeated", None)
    if rep is not None:
        return bool(rep)
    return fd.label == fd.LABEL_REPEATED


def _unknown_numbers(msg) -> List[int]:
    """Field numbers of *msg*'s own unknown fields (not recursive)."""
    try:
        from google.protobuf.unknown_fields import UnknownFieldSet
    except ImportError:  # protobuf < 4.22: the message method
        return [f.field_number for f in msg.UnknownFields()]
    return [f.field_number for f in UnknownFieldSet(msg)]
