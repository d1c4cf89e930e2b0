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
- :func:`read_xla_proto`: whichever of the three a file or bytes holds.
- :func:`parse_message`: any message class here from bytes.

A path is read once, into one buffer, and bytes given are not copied; which
message (an ``HloProto`` or a bare module, ...) comes from the first fields of
the wire format, so XLA's files are parsed once. Anything but a regular file
(a FIFO, whose ``open`` would wait forever; a device) is refused before it is
opened. Gzip input is unpacked piece by piece up to a limit,
:data:`MAX_DECOMPRESSED_BYTES` (256 MiB) unless ``max_decompressed_bytes=``
or the environment variable ``XLASHAPE_MAX_DECOMPRESSED_BYTES`` says
otherwise: a gzip "bomb" costs about the limit, then raises
``UnreadableInputError`` saying how to raise it; and what protobuf's parse of
gzip input would take is estimated from the wire format first, and refused
over the larger of the limit and :data:`PARSE_BYTES_PER_COMPRESSED_BYTE`
times the compressed size (16 KB of gzip can unpack to 16 MiB of empty
messages that would take gigabytes to parse; the estimate is a walk of the
wire format in C, ``_protowire``, about a tenth of protobuf's parse). A corrupt or cut-off stream
raises ``UnreadableInputError`` naming the file. :func:`check_sizes`
refuses the negative sizes, offsets and shape indices no XLA writes (the
memory accounting calls it before it counts).
"""

from __future__ import annotations

import os
import re
from typing import Iterable, List, Optional, Tuple, Union

from google.protobuf import descriptor_pb2, descriptor_pool
from google.protobuf import message as _pb_message

from ._files import GZIP_MAGIC, check_regular_file, gunzip
from .errors import (ProtoDecodeError, ShapeMemoryError, ShapeTypeError, ShapeValueError,
                     UnreadableInputError)

try:
    from . import _protowire
except ImportError:  # pragma: no cover - only without a build
    _protowire = None

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
    "MAX_DECOMPRESSED_BYTES",
    "MAX_DECOMPRESSED_ENV",
    "max_decompressed_bytes",
    "parse_message",
    "read_hlo_proto",
    "read_xla_proto",
    "check_sizes",
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

#: The most bytes a gzip-compressed proto (``*.hlo.pb.gz``, or gzip bytes) may
#: unpack to, unless ``max_decompressed_bytes=`` or the environment variable
#: :data:`MAX_DECOMPRESSED_ENV` says otherwise: 256 MiB. A gzip "bomb" of 1 MB
#: unpacks to 1 GB; with the limit, reading one costs about the limit before
#: it is refused. (An uncompressed file has no such limit: it costs what it
#: weighs.)
MAX_DECOMPRESSED_BYTES = 256 << 20

#: The environment variable that sets the limit for every reader (so for
#: ``xlashape memory`` and ``memory.analyze`` too): bytes, or with a suffix
#: ``K``, ``M``, ``G`` (KiB, MiB, GiB), e.g. ``XLASHAPE_MAX_DECOMPRESSED_BYTES=2G``.
MAX_DECOMPRESSED_ENV = "XLASHAPE_MAX_DECOMPRESSED_BYTES"

_UNITS = {"": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30}
_SIZE_TEXT = re.compile(r"(\d+)\s*([KMG]?)(?:i?B)?", re.I)


def max_decompressed_bytes(value: Optional[int] = None) -> int:
    """The limit on a decompressed proto: ``value`` if given, else
    :data:`MAX_DECOMPRESSED_ENV` if set, else :data:`MAX_DECOMPRESSED_BYTES`.

    >>> max_decompressed_bytes(), max_decompressed_bytes(1 << 30)
    (268435456, 1073741824)
    """
    if value is None:
        text = os.environ.get(MAX_DECOMPRESSED_ENV, "").strip()
        if not text:
            return MAX_DECOMPRESSED_BYTES
        m = _SIZE_TEXT.fullmatch(text)
        if m is None:
            raise ShapeValueError(
                f"{MAX_DECOMPRESSED_ENV}={text!r}: expected a number of bytes, "
                "optionally with K, M or G (KiB, MiB, GiB)")
        return int(m.group(1)) * _UNITS[m.group(2).upper()]
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise ShapeValueError(
            f"max_decompressed_bytes={value!r}: expected a number of bytes (an int >= 0)")
    return value


def _limit_hint(limit: int) -> str:
    return (f"; set {MAX_DECOMPRESSED_ENV}=N (bytes, or with K, M, G) or pass "
            f"max_decompressed_bytes=N to the reader to read it anyway "
            f"(at least {limit + 1} bytes)")


def parse_message(cls, data: BytesLike, what: Optional[str] = None):
    """Parse *data* as a message of class *cls* (one of this module's).

    Malformed bytes (a cut-off field, a bad wire type, a length past the
    end, invalid UTF-8 in a string field, nesting deeper than protobuf
    allows) raise :class:`ProtoDecodeError` naming *what* and the
    message type. Fields this module does not declare are kept as unknown
    fields, as protobuf does.
    """
    what = what or cls.DESCRIPTOR.name
    msg = cls()
    _parse_into(msg, data, what)
    return msg


def _parse_into(msg, data: BytesLike, what: str, budget: Optional["_Budget"] = None) -> None:
    """``msg.ParseFromString(data)`` (no copy of ``data``), with protobuf's
    errors as :class:`ProtoDecodeError`; for gzip input (``budget``), only
    if what the parse would take (:func:`_parse_cost`) fits."""
    if not isinstance(data, (bytes, bytearray, memoryview)):
        raise UnreadableInputError(
            f"{what}: expected bytes, got {type(data).__name__}")
    if budget is not None:
        budget.check(msg.DESCRIPTOR, data, what)
    try:
        try:
            msg.ParseFromString(data)
        except TypeError:
            if isinstance(data, bytes):
                raise
            msg.ParseFromString(bytes(data))   # an older protobuf that takes bytes only
    except _pb_message.DecodeError as e:
        raise ProtoDecodeError(
            f"{what}: not a valid {msg.DESCRIPTOR.full_name} "
            f"({len(data)} bytes): {e}") from None
    except (ValueError, TypeError, RecursionError, OverflowError) as e:
        raise ProtoDecodeError(
            f"{what}: not a valid {msg.DESCRIPTOR.full_name} "
            f"({len(data)} bytes): {type(e).__name__}: {e}") from None
    except MemoryError:
        raise ShapeMemoryError(
            f"{what}: out of memory parsing {len(data)} bytes as {msg.DESCRIPTOR.full_name}"
        ) from None


def _load_bytes(source: Source, what: str, limit: Optional[int] = None
                ) -> Tuple[BytesLike, str, Optional["_Budget"]]:
    """The bytes of *source* (a path or bytes), gunzipped if gzip (at most
    ``max_decompressed_bytes(limit)`` of them); a label naming it; and, for
    gzip input, the :class:`_Budget` its parse must fit in (``None`` for
    bytes that were not compressed: they cost what they weigh).

    A path is read once, into one buffer: anything but a regular file (a
    FIFO, whose ``open`` would wait forever; a device; a directory) is
    refused first. Bytes given are used as they are, not copied."""
    if isinstance(source, (bytes, bytearray, memoryview)):
        label = what
        if bytes(source[:2]) == GZIP_MAGIC:
            n = max_decompressed_bytes(limit)
            return gunzip(source, n, label, hint=_limit_hint(n)), label, _Budget(n, len(source))
        return source, label, None
    if not isinstance(source, (str, os.PathLike)):
        raise UnreadableInputError(
            f"{what}: expected a path or bytes, got {type(source).__name__}")
    path = os.fspath(source)
    if isinstance(path, bytes):
        path = os.fsdecode(path)
    label = f"{what} {os.path.basename(path)!r}"
    try:
        check_regular_file(path)
        fh = open(path, "rb", buffering=0)
    except (OSError, UnreadableInputError) as e:
        raise UnreadableInputError(f"{label}: cannot read: {e}") from None
    with fh:
        try:
            head = fh.read(2)
            if head != GZIP_MAGIC:
                fh.seek(0)
                return fh.readall(), label, None      # one buffer of the file's size
            size = os.fstat(fh.fileno()).st_size
        except OSError as e:
            raise UnreadableInputError(f"{label}: cannot read: {e}") from None
        n = max_decompressed_bytes(limit)
        return gunzip(fh, n, label, first=head, hint=_limit_hint(n)), label, _Budget(n, size)


#: What protobuf's parse may take for gzip input, per byte of the compressed
#: input, beyond :func:`max_decompressed_bytes`: XLA's modules take about 7
#: bytes per byte of message and compress 3-11 times (the largest product
#: measured: 66), so 256 leaves them room, and a gzip input of 1 MB that
#: unpacks to 256 MiB of empty messages (protobuf: hundreds of bytes each,
#: for 2 bytes of input) is refused before it is parsed.
PARSE_BYTES_PER_COMPRESSED_BYTE = 256


class _Budget:
    """The memory a parse of gzip input may take: the larger of the limit and
    :data:`PARSE_BYTES_PER_COMPRESSED_BYTE` times the compressed size;
    :meth:`check` estimates a parse from the wire format (:func:`_parse_cost`)
    and refuses one over it, before protobuf allocates anything."""

    def __init__(self, limit: int, compressed: int):
        self.limit = limit
        self.compressed = compressed
        self.bytes = max(limit, PARSE_BYTES_PER_COMPRESSED_BYTE * compressed)

    def check(self, descriptor, data: BytesLike, what: str) -> None:
        if len(data) * _MOST_PER_BYTE <= self.bytes:
            return                   # no message of that size can take more
        cost, where = _parse_cost(data, descriptor, self.bytes)
        if cost is None:
            raise ProtoDecodeError(f"{what}: not a valid {descriptor.full_name} "
                                   f"({len(data)} bytes): {where}")
        if cost > self.bytes:
            raise UnreadableInputError(
                f"{what}: parsing its {len(data)} bytes (unpacked from {self.compressed}) as "
                f"{descriptor.full_name} would take more than {self.bytes} bytes of memory, "
                f"the limit for this gzip input (the larger of {self.limit} and "
                f"{PARSE_BYTES_PER_COMPRESSED_BYTE} times its compressed size): a gzip bomb?"
                + _limit_hint(self.limit))


# The memory protobuf's parse takes, as the estimate counts it: a message
# its fixed part (_message_cost) plus a pointer if repeated; a repeated
# number 16 bytes (8, in an array that may be twice the size it holds); a
# string, bytes or unknown field its bytes.
_REPEATED_NUMBER = 16
_POINTER = 16
# protobuf's (upb's) limit on nested messages
_MAX_DEPTH = 100


def _message_cost(descriptor) -> int:
    return 24 + 16 * len(descriptor.fields)


_TABLES: dict = {}


def _fields_of(descriptor) -> dict:
    """``{field number: (kind, repeated)}`` of a message, kind ``None``
    (string, bytes), ``0`` (a number) or ``(cost, fields, per_byte)`` of a
    message, ``per_byte`` ``None`` if it holds messages, else the most its
    content can take per byte (so that the estimate need not read it: 1 for
    strings, numbers kept in the message and unknown fields, 17 if it has a
    repeated field); built once per message type."""
    got = _TABLES.get(descriptor.full_name)
    if got is not None:
        return got
    fields: dict = {}
    _TABLES[descriptor.full_name] = fields
    for f in descriptor.fields:
        if f.type == f.TYPE_MESSAGE:
            sub = f.message_type
            per_byte = (None if any(g.type == g.TYPE_MESSAGE for g in sub.fields) else
                        _REPEATED_NUMBER + 1 if any(_is_repeated(g) for g in sub.fields) else 1)
            kind = (_message_cost(sub), _fields_of(sub), per_byte)
        elif f.type in (f.TYPE_STRING, f.TYPE_BYTES):
            kind = None
        else:
            kind = 0
        fields[f.number] = (kind, _is_repeated(f))
    return fields


def _most_per_byte() -> int:
    """The most the estimate counts per byte of input: a repeated message of
    the costliest type in 2 bytes (its tag and a zero length)."""
    costs = [_message_cost(d) for d in _POOL.FindFileByName(
        "xlashape/hlo_subset.proto").message_types_by_name.values()]
    return max(max(costs) + _POINTER, 2 * (_REPEATED_NUMBER + 1)) // 2 + 1


def _parse_cost(data: BytesLike, descriptor, stop: int) -> Tuple[Optional[int], str]:
    """:func:`_parse_cost_py`, in C (``_protowire.parse_cost``, the same walk,
    some 60 times faster) when ``data`` is a buffer of bytes."""
    if _protowire is not None:
        table = _COST_TABLES.get(descriptor.full_name)
        if table is None:
            table = _COST_TABLES[descriptor.full_name] = _protowire.CostTable(
                _fields_of(descriptor), _POINTER, _REPEATED_NUMBER, _MAX_DEPTH)
        got = _protowire.parse_cost(data, table, _message_cost(descriptor), stop)
        if got is not None:
            return got
    return _parse_cost_py(data, descriptor, stop)


_COST_TABLES: dict = {}


def _parse_cost_py(data: BytesLike, descriptor, stop: int) -> Tuple[Optional[int], str]:
    """An estimate (from above: about 1.5 times what XLA's messages take) of
    the memory protobuf's parse of ``data`` as ``descriptor`` takes, read from
    the wire format (nothing parsed), counting messages, repeated numbers and
    bytes; it stops once past ``stop``. ``(None, why)`` for bytes that are no
    such message (a cut-off field, a group, a bad wire type)."""
    total = _message_cost(descriptor)
    stack: list = []
    i, end, fields = 0, len(data), _fields_of(descriptor)
    while True:
        if i >= end:
            if not stack:
                return total, ""
            i, end, fields = stack.pop()
            continue
        start = i
        b = data[i]
        i += 1
        tag = b & 0x7F
        shift = 7
        while b & 0x80:
            if i >= end or shift > 63:
                return None, f"a tag cut off at byte {start}"
            b = data[i]
            i += 1
            tag |= (b & 0x7F) << shift
            shift += 7
        wire = tag & 7
        if wire == 2:
            if i >= end:
                return None, f"a length cut off at byte {i}"
            b = data[i]
            i += 1
            n = b & 0x7F
            shift = 7
            while b & 0x80:
                if i >= end or shift > 63:
                    return None, f"a length cut off at byte {i}"
                b = data[i]
                i += 1
                n |= (b & 0x7F) << shift
                shift += 7
            j = i + n
            if j > end:
                return None, f"a field of {n} bytes at byte {start} runs past its end"
            f = fields.get(tag >> 3)
            kind = f[0] if f is not None else None
            if kind is None:              # a string, bytes, an unknown field
                total += n + (_POINTER if f is not None and f[1] else 0)
                i = j
            elif kind == 0:               # packed numbers: at most one per byte
                total += _REPEATED_NUMBER * n
                i = j
            elif kind[2] is not None:     # a message of numbers and strings alone
                total += kind[0] + (_POINTER if f[1] else 0) + kind[2] * n
                i = j
            else:
                total += kind[0] + (_POINTER if f[1] else 0)
                if n:
                    if len(stack) >= _MAX_DEPTH:
                        return None, (f"messages nested deeper than protobuf reads "
                                      f"({_MAX_DEPTH}) at byte {start}")
                    stack.append((j, end, fields))
                    end, fields = j, kind[1]
                else:
                    i = j
            if total > stop:
                return total, ""
        elif wire == 0:
            while True:
                if i >= end:
                    return None, f"a number cut off at byte {i}"
                b = data[i]
                i += 1
                if not b & 0x80:
                    break
            f = fields.get(tag >> 3)
            if f is not None and f[1]:
                total += _REPEATED_NUMBER
                if total > stop:
                    return total, ""
        elif wire == 1 or wire == 5:
            i += 8 if wire == 1 else 4
            if i > end:
                return None, f"a fixed-size field cut off at byte {start}"
        else:
            return None, (f"wire type {wire} at byte {start} (a group, which XLA's messages "
                          "do not have, or no wire type)")


def _require_nonempty(data: BytesLike, label: str, kind: str) -> None:
    if not len(data):
        raise ProtoDecodeError(f"{label}: empty, not a serialized {kind}")


def read_hlo_proto(source, *, max_decompressed_bytes: Optional[int] = None):
    """Read an ``HloProto`` (``*.hlo.pb``, ``*.hlo.pb.gz``, or their bytes).

    XLA's ``--xla_dump_hlo_as_proto`` writes an ``HloProto``: the module in
    ``hlo_module`` and, for the optimized module, the buffer assignment in
    ``buffer_assignment`` (with ``heap_simulator_traces``). Bytes of a bare
    ``HloModuleProto`` (what ``as_serialized_hlo_module_proto()`` returns)
    are recognised (field 1 then holds a name, not a module) and parsed
    straight into the ``hlo_module`` of an ``HloProto`` with no buffer
    assignment. Which of the two it is comes from the first field's bytes,
    and the bytes are parsed once (a second time, as the other message, only
    when the first reading finds no module). An ``HloProto`` message is
    returned as it is.

    A gzip file or gzip bytes may unpack to at most
    ``max_decompressed_bytes`` (default :func:`max_decompressed_bytes`):
    more raises :class:`~xlashape.errors.UnreadableInputError` naming the
    limit and how to raise it.
    """
    if isinstance(source, HloProto):
        return source
    return _read_hlo_proto(source, max_decompressed_bytes)[0]


def _read_hlo_proto(source, max_decompressed_bytes: Optional[int] = None
                    ) -> Tuple["HloProto", Optional[BytesLike]]:
    """:func:`read_hlo_proto` of a path or bytes, and the serialized bytes
    of its ``hlo_module`` when they are one piece of the input (all of it
    for a bare module, the one field 1 of an ``HloProto``), else ``None``."""
    data, label, budget = _load_bytes(source, "HLO proto", max_decompressed_bytes)
    out, bare = _hlo_and_kind(data, label, budget)
    if bare:
        return out, data
    spans = _protowire.field_spans(data, 1) if _protowire is not None else None
    if spans is not None and len(spans) == 1:   # (given twice, protobuf merges them)
        return out, memoryview(data)[spans[0][0]:spans[0][1]]
    return out, None


def _hlo_from_bytes(data: BytesLike, label: str, budget: Optional["_Budget"] = None):
    return _hlo_and_kind(data, label, budget)[0]


def _hlo_and_kind(data: BytesLike, label: str, budget: Optional["_Budget"] = None):
    """The HloProto of ``data``, and whether ``data`` was a bare module."""
    _require_nonempty(data, label, "xla.HloProto")
    error: Optional[ProtoDecodeError] = None
    for bare in ((True, False) if _starts_like_bare_module(data) else (False, True)):
        out = HloProto()
        try:
            # a bare module parsed in place, as field 1 of the HloProto
            _parse_into(out.hlo_module if bare else out, data, label, budget)
        except ProtoDecodeError as e:        # (over the budget: raised as it is)
            if not bare:
                error = e
            continue
        if len(out.hlo_module.computations):
            return out, bare
        del out
    # In an HloProto field 1 is the module and field 3 the buffer assignment;
    # in an HloModuleProto field 1 is the name and field 3 the computations.
    if error is not None:
        raise error
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


def _top_fields(data: BytesLike, most: int, start: int = 0, end: Optional[int] = None
                ) -> List[Tuple[int, int, int, int]]:
    """The first ``most`` fields of the message in ``data[start:end]``, as
    ``(number, wire type, start, end)`` of each value, read from the wire
    format alone (nothing parsed); the list stops at the first field that
    is not well-formed (a bad tag, a group, a length past ``end``)."""
    end = len(data) if end is None else end
    out = []
    i = start
    while i < end and len(out) < most:
        tag, i = _read_varint(data, i, end)
        if tag is None or tag >> 3 == 0:
            break
        wire = tag & 7
        if wire == 0:
            value, j = _read_varint(data, i, end)
            if value is None:
                break
        elif wire == 1:
            j = i + 8
        elif wire == 5:
            j = i + 4
        elif wire == 2:
            n, i = _read_varint(data, i, end)
            if n is None:
                break
            j = i + n
        else:                        # groups (3, 4) and 6, 7: none in XLA's messages
            break
        if j > end:
            break
        out.append((tag >> 3, wire, i, j))
        i = j
    return out


def _read_varint(data: BytesLike, i: int, end: int) -> Tuple[Optional[int], int]:
    value = shift = 0
    while i < end and shift < 64:
        b = data[i]
        i += 1
        value |= (b & 0x7F) << shift
        if not b & 0x80:
            return value, i
        shift += 7
    return None, i


def _starts_like_bare_module(data: BytesLike) -> bool:
    """True if *data* reads best as a bare ``HloModuleProto``, not an ``HloProto``.

    XLA writes fields in the order of their numbers, and both messages start
    with field 1 (length-delimited, byte 0x0a). In an HloProto it holds the
    module, whose own first field is its name (0x0a again) or another field
    tag (a byte below 0x20 for fields 1-3); in a bare HloModuleProto it holds
    the module's name, whose first character is printable. A message that
    does not start with field 1 is no HloProto XLA wrote (one starts with
    its module) but may be a module without a name."""
    first = _top_fields(data, 1)
    if not first:
        return False
    number, wire, start, end = first[0]
    if number != 1:
        return True
    return wire == 2 and start < end and data[start] >= 0x20


def _likely_classes(data: BytesLike) -> Tuple[type, ...]:
    """:func:`read_xla_proto`'s candidates for ``data``, the likeliest first,
    from the first fields of the wire format (nothing parsed)."""
    hlo_first = (HloProto, BufferAssignmentProto, MemoryUsageReportProto)
    fields = _top_fields(data, 16)
    if not fields:
        return hlo_first
    number, wire, start, end = fields[0]
    if number != 1 or wire != 2 or start == end:
        # a bare module without a name, an HloProto without a module, or a
        # buffer assignment without logical buffers: all start with 2 or 3
        return (hlo_first if any(n in (5, 6, 11) and w == 0 for n, w, _, _ in fields)
                else (BufferAssignmentProto, HloProto, MemoryUsageReportProto))
    tag = data[start]
    if tag == 0x0A or tag >= 0x21:
        # an HloProto's module begins with its name; a bare module's name is text
        return hlo_first
    # LogicalBufferProto (id, size, defined_at, color) or
    # AllocationEntryInMemorySpace (total_bytes, color, allocation_entries):
    # field 3 inside tells a Location (name, shape index, id) from an
    # AllocationEntry (index, size, cumulative size, ...)
    if any(n in (2, 3, 4, 5) for n, _, _, _ in fields):
        return (BufferAssignmentProto, MemoryUsageReportProto, HloProto)
    for n, w, s, e in _top_fields(data, 8, start, end):
        if n == 3 and w == 2 and s < e:
            if data[s] in (0x12, 0x1A, 0x20):
                return (BufferAssignmentProto, MemoryUsageReportProto, HloProto)
            return (MemoryUsageReportProto, BufferAssignmentProto, HloProto)
    return (BufferAssignmentProto, MemoryUsageReportProto, HloProto)


def _holds_a_module(msg) -> bool:
    comps = msg.hlo_module.computations
    # protobuf keeps fields of the wrong wire type as unknown ones, so other
    # messages can parse as a module: require instructions with opcodes
    return bool(len(comps)) and all(len(c.instructions) and all(i.opcode for i in c.instructions)
                                    for c in comps)


def read_xla_proto(source, *, max_decompressed_bytes: Optional[int] = None):
    """Whichever of XLA's messages ``source`` (a path or bytes; gzip is
    unpacked) holds, with the field that message cannot be without: an
    ``HloProto`` (or a bare ``HloModuleProto``, wrapped) with computations
    whose instructions have opcodes, a ``BufferAssignmentProto`` with
    allocations, or a ``MemoryUsageReportProto`` with memory spaces.

    The file is read once; which message to try first comes from the first
    fields of the wire format, so XLA's own files are parsed once. Bytes
    that are none of the three raise :class:`ProtoDecodeError`.
    """
    data, label, budget = _load_bytes(source, "protobuf", max_decompressed_bytes)
    _require_nonempty(data, label, "XLA protobuf")
    for cls in _likely_classes(data):
        try:
            if cls is HloProto:
                msg = _hlo_from_bytes(data, label, budget)
                if _holds_a_module(msg):
                    return msg
            else:
                msg = cls()
                _parse_into(msg, data, label, budget)
                if len(msg.buffer_allocations if cls is BufferAssignmentProto
                       else msg.memory_space_allocation_entries):
                    return msg
        except ProtoDecodeError:
            pass
        msg = None
    raise ProtoDecodeError(
        f"{label}: none of XLA's protobufs xlashape reads (an HloProto with a module, a "
        "BufferAssignmentProto with allocations, a MemoryUsageReportProto with memory spaces)")


def read_hlo_module_proto(source, *, max_decompressed_bytes: Optional[int] = None):
    """The ``HloModuleProto`` of :func:`read_hlo_proto`'s result."""
    return read_hlo_proto(source, max_decompressed_bytes=max_decompressed_bytes).hlo_module


def read_buffer_assignment(source, *, max_decompressed_bytes: Optional[int] = None):
    """A ``BufferAssignmentProto`` from bytes or a file (gzip unpacked, at
    most ``max_decompressed_bytes``); a ``BufferAssignmentProto`` message
    is returned as it is.

    ``compiled.memory_analysis().serialized_buffer_assignment_proto`` is
    such bytes (where the backend fills it in).
    """
    if isinstance(source, BufferAssignmentProto):
        return source
    data, label, budget = _load_bytes(source, "buffer assignment proto", max_decompressed_bytes)
    _require_nonempty(data, label, "xla.BufferAssignmentProto")
    msg = BufferAssignmentProto()
    _parse_into(msg, data, label, budget)
    return msg


def read_memory_usage_report(source, *, max_decompressed_bytes: Optional[int] = None):
    """A ``MemoryUsageReportProto`` from a ``*-memory-usage-report.pb`` file
    (or ``.pb.gz``, at most ``max_decompressed_bytes`` unpacked) or its
    bytes; such a message is returned as it is."""
    if isinstance(source, MemoryUsageReportProto):
        return source
    data, label, budget = _load_bytes(source, "memory usage report proto",
                                      max_decompressed_bytes)
    _require_nonempty(data, label, "xla.MemoryUsageReportProto")
    msg = MemoryUsageReportProto()
    _parse_into(msg, data, label, budget)
    return msg


def check_sizes(msg, what: str) -> None:
    """Refuse sizes, offsets and shape indices that cannot be: a negative
    size or offset of a buffer allocation, of a buffer assigned to one or of
    a logical buffer, a negative shape index of a logical buffer's
    position (``BufferAssignmentProto``, alone or in an ``HloProto``); a
    negative total or allocation size (``MemoryUsageReportProto``). XLA
    writes none; a file that has one is malformed, and reading on would
    print negative figures or index a tuple from its end.
    Raises :class:`ProtoDecodeError` naming ``what``, the field and the value.
    """
    if isinstance(msg, HloProto):
        if not msg.HasField("buffer_assignment"):
            return
        msg, prefix = msg.buffer_assignment, "buffer_assignment."
    else:
        prefix = ""

    def bad(field, value, kind="size"):
        raise ProtoDecodeError(f"{what}: {prefix}{field} is {value}: a {kind} cannot be "
                               "negative (a malformed file: XLA writes none)")

    if isinstance(msg, BufferAssignmentProto):
        # all at once (XLA's files pass); the loops below only name the field
        lbs, allocs = msg.logical_buffers, msg.buffer_allocations
        if min((min([lb.size for lb in lbs], default=0),
                min([k for lb in lbs for k in lb.defined_at.shape_index], default=0),
                min([k for al in msg.buffer_aliases for k in al.location.shape_index], default=0),
                min([a.size for a in allocs], default=0),
                min([v for a in allocs for x in a.assigned for v in (x.size, x.offset)],
                    default=0))) >= 0:
            return
        for i, lb in enumerate(msg.logical_buffers):
            if lb.size < 0:
                bad(f"logical_buffers[{i}].size", lb.size)
            if any(k < 0 for k in lb.defined_at.shape_index):
                bad(f"logical_buffers[{i}].defined_at.shape_index",
                    list(lb.defined_at.shape_index), "shape index")
        for i, alias in enumerate(msg.buffer_aliases):
            if any(k < 0 for k in alias.location.shape_index):
                bad(f"buffer_aliases[{i}].location.shape_index",
                    list(alias.location.shape_index), "shape index")
        for i, a in enumerate(msg.buffer_allocations):
            if a.size < 0:
                bad(f"buffer_allocations[{i}].size", a.size)
            for j, x in enumerate(a.assigned):
                if x.size < 0:
                    bad(f"buffer_allocations[{i}].assigned[{j}].size", x.size)
                if x.offset < 0:
                    bad(f"buffer_allocations[{i}].assigned[{j}].offset", x.offset, "offset")
    elif isinstance(msg, MemoryUsageReportProto):
        for i, space in enumerate(msg.memory_space_allocation_entries):
            if space.total_bytes < 0:
                bad(f"memory_space_allocation_entries[{i}].total_bytes", space.total_bytes)
            for j, e in enumerate(space.allocation_entries):
                for field in ("size", "cumulative_size"):
                    if getattr(e, field) < 0:
                        bad(f"memory_space_allocation_entries[{i}].allocation_entries[{j}]."
                            f"{field}", getattr(e, field))
    else:
        raise ShapeTypeError(f"check_sizes: expected an HloProto, BufferAssignmentProto or "
                             f"MemoryUsageReportProto, got {type(msg).__name__}")


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


_MOST_PER_BYTE = _most_per_byte()
