"""Shapes and layouts to and from XLA's ``ShapeProto`` / ``LayoutProto``.

``Shape.to_proto()`` returns the bytes XLA's ``Shape::ToProto`` serializes
(``jaxlib``'s ``Shape.to_serialized_proto()``), byte for byte: fields in
field-number order, ``is_dynamic_dimension`` written for every dimension of
an array, ``tail_padding_alignment_in_elements`` always written (1 by
default), zeros left out as proto3 does. ``Shape.from_proto(data)`` reads
such bytes (or a :class:`~xlashape.protos.ShapeProto` message) back.

Fields that XLA writes and xlashape does not model (the sparse layout
fields ``dim_level_types``, ``dim_unique``, ``dim_ordered``) and fields
unknown to this schema (newer XLA) on a ``ShapeProto`` or ``LayoutProto``
are kept on the object ``from_proto`` returns (a subclass of Shape or
Layout that compares equal to the plain one), written back by its
``to_proto()``, and listed by :func:`unmodeled_fields`. Copies made by
``replace()``, ``with_layout()`` or pickling are plain objects without them.
Unknown fields inside a ``TileProto`` or ``SplitConfigProto`` are skipped,
as protobuf skips unknown fields.

Bytes that are not a valid message, or a message xlashape cannot turn into
a Shape (an element type it does not know, ``is_dynamic_dimension`` of the
wrong length, a tuple with dimensions, ...), raise
:class:`~xlashape.errors.ProtoDecodeError` (a ``ShapeValueError``) naming
the field: ``ShapeProto.tuple_shapes[1].layout.tiles[0]: ...``.

>>> from xlashape import parse_shape, Shape
>>> s = parse_shape("bf16[8,128]{1,0:T(8,128)(2,1)}")
>>> s.to_proto().hex()
'10101a030880012a140a02010032050a0308800132040a02020180010132020000'
>>> Shape.from_proto(s.to_proto()) == s
True
"""

from __future__ import annotations

from typing import List, Optional, Sequence

from . import protos as _pb
from .errors import ProtoDecodeError, ShapeTypeError, XlaShapeError
from .layout import Layout, SplitConfig, Tile
from .primitive_types import PrimitiveType
from .shape import Shape

__all__ = [
    "ProgramShape",
    "shape_to_proto",
    "shape_from_proto",
    "layout_to_proto",
    "layout_from_proto",
    "tile_to_proto",
    "tile_from_proto",
    "split_config_to_proto",
    "split_config_from_proto",
    "unmodeled_fields",
]

P = PrimitiveType
_NO_TYPE = P.PRIMITIVE_TYPE_INVALID
_INT64_MIN = -(1 << 63)

# Fields of the messages that xlashape models; everything else is "extra".
_SHAPE_MODELED = ("element_type", "dimensions", "is_dynamic_dimension", "tuple_shapes", "layout")
_LAYOUT_MODELED = (
    "minor_to_major", "tiles", "element_size_in_bits", "memory_space", "physical_shape",
    "index_primitive_type", "pointer_primitive_type", "dynamic_shape_metadata_prefix_bytes",
    "tail_padding_alignment_in_elements", "split_configs",
)


# ---------------------------------------------------------------------------
# to proto

def tile_to_proto(tile: Tile):
    """A ``TileProto`` message (``*`` is INT64_MIN, as XLA stores it)."""
    msg = _pb.TileProto()
    msg.dimensions.extend(tile.dimensions)
    return msg


def split_config_to_proto(config: SplitConfig):
    msg = _pb.SplitConfigProto()
    msg.dimension = config.dimension
    msg.split_indices.extend(config.split_indices)
    return msg


def layout_to_proto(layout: Layout):
    """XLA's ``Layout::ToProto`` as a ``LayoutProto`` message.

    The legacy ``padded_dimensions`` / ``padding_value`` fields have no place
    in XLA's LayoutProto today (their numbers are reserved): a layout that
    sets them raises :class:`~xlashape.errors.ShapeValueError`.
    """
    if not isinstance(layout, Layout):
        raise ShapeTypeError(f"expected a Layout, got {type(layout).__name__}")
    if layout.padded_dimensions or layout.padding_value != 0:
        raise ProtoDecodeError(
            "LayoutProto: padded_dimensions / padding_value (legacy fields of XLA's "
            "older shapes documentation) have no field in XLA's LayoutProto")
    msg = _pb.LayoutProto()
    msg.minor_to_major.extend(layout.minor_to_major)
    for tile in layout.tiles:
        msg.tiles.add().dimensions.extend(tile.dimensions)
    msg.tail_padding_alignment_in_elements = layout.tail_padding_alignment_in_elements
    msg.element_size_in_bits = layout.element_size_in_bits
    msg.memory_space = layout.memory_space
    msg.index_primitive_type = int(layout.index_primitive_type)
    msg.pointer_primitive_type = int(layout.pointer_primitive_type)
    if layout.physical_shape is not None:
        msg.physical_shape.CopyFrom(shape_to_proto(layout.physical_shape))
    msg.dynamic_shape_metadata_prefix_bytes = layout.dynamic_shape_metadata_prefix_bytes
    for config in layout.split_configs:
        sc = msg.split_configs.add()
        sc.dimension = config.dimension
        sc.split_indices.extend(config.split_indices)
    extra = getattr(layout, "_proto_extra", None)
    if extra:
        msg.MergeFromString(extra)
    return msg


def shape_to_proto(shape: Shape):
    """XLA's ``Shape::ToProto`` as a ``ShapeProto`` message."""
    if not isinstance(shape, Shape):
        raise ShapeTypeError(f"expected a Shape, got {type(shape).__name__}")
    msg = _pb.ShapeProto()
    msg.element_type = int(shape.element_type)
    if shape.is_tuple:
        for sub in shape.tuple_shapes:
            msg.tuple_shapes.add().CopyFrom(shape_to_proto(sub))
    elif shape.is_buffer:
        msg.tuple_shapes.add().CopyFrom(shape_to_proto(shape.buffer_shape))
    elif shape.is_array:
        msg.dimensions.extend(shape.dimensions)
        msg.is_dynamic_dimension.extend(shape.dynamic_dimensions)
        if shape.layout is not None:
            msg.layout.CopyFrom(layout_to_proto(shape.layout))
    extra = getattr(shape, "_proto_extra", None)
    if extra:
        msg.MergeFromString(extra)
    return msg


# ---------------------------------------------------------------------------
# from proto

def _message(cls, data, what: str):
    if isinstance(data, cls):
        return data
    if isinstance(data, (bytes, bytearray, memoryview)):
        return _pb.parse_message(cls, data, what)
    if hasattr(data, "DESCRIPTOR") and hasattr(data, "SerializeToString"):
        # a message of the same full name from another pool (jaxlib's, a *_pb2)
        if data.DESCRIPTOR.full_name == cls.DESCRIPTOR.full_name:
            return _pb.parse_message(cls, data.SerializeToString(), what)
    raise ShapeTypeError(
        f"{what}: expected bytes or an {cls.DESCRIPTOR.full_name} message, "
        f"got {type(data).__name__}")


def _primitive_type(value: int, where: str, *, allow_invalid=False) -> PrimitiveType:
    try:
        t = P(value)
    except ValueError:
        name = _PROTO_TYPE_NAMES.get(value)
        known = f" ({name}, which xlashape does not support)" if name else ""
        raise ProtoDecodeError(f"{where}: unknown element type {value}{known}") from None
    if t is _NO_TYPE and not allow_invalid:
        raise ProtoDecodeError(f"{where}: element type PRIMITIVE_TYPE_INVALID (0)")
    return t


_PROTO_TYPE_NAMES = {v: k for k, v in _pb.PrimitiveTypeProto.items()}


def _wrap(where: str, fn, *args):
    try:
        return fn(*args)
    except ProtoDecodeError:
        raise
    except XlaShapeError as e:
        raise ProtoDecodeError(f"{where}: {e}") from None


def _extra_bytes(msg, modeled: Sequence[str]) -> bytes:
    """The serialized fields of *msg* outside *modeled* (unknown ones too)."""
    rest = type(msg)()
    rest.CopyFrom(msg)
    for name in modeled:
        rest.ClearField(name)
    return rest.SerializeToString()


def tile_from_proto(data, _where: str = "TileProto") -> Tile:
    msg = _message(_pb.TileProto, data, _where)
    dims = tuple(msg.dimensions)
    for d in dims:
        if d < 0 and d != _INT64_MIN:
            raise ProtoDecodeError(
                f"{_where}.dimensions: tile dimension {d} is negative (only the "
                f"combined dimension '*', {_INT64_MIN}, may be)")
    return Tile._from_parsed(dims)


def split_config_from_proto(data, _where: str = "SplitConfigProto") -> SplitConfig:
    msg = _message(_pb.SplitConfigProto, data, _where)
    return SplitConfig(msg.dimension, tuple(msg.split_indices))


def _int8(value: int) -> int:
    # XLA stores memory_space as int8_t (as the text parser, wrap)
    return ((value + 128) & 0xFF) - 128


def layout_from_proto(data, _where: str = "LayoutProto", _depth: int = 0) -> Layout:
    """XLA's ``Layout::CreateFromProto``: a Layout from a ``LayoutProto``.

    ``tail_padding_alignment_in_elements`` of 0 (absent) means 1;
    ``memory_space`` is stored in 8 bits as XLA does.
    """
    msg = _message(_pb.LayoutProto, data, _where)
    tiles = tuple(tile_from_proto(t, f"{_where}.tiles[{i}]") for i, t in enumerate(msg.tiles))
    physical = None
    if msg.HasField("physical_shape"):
        physical = _shape_from_message(msg.physical_shape, f"{_where}.physical_shape", _depth + 1)
    split_configs = tuple(
        split_config_from_proto(c, f"{_where}.split_configs[{i}]")
        for i, c in enumerate(msg.split_configs))
    index_type = _primitive_type(msg.index_primitive_type, f"{_where}.index_primitive_type",
                                 allow_invalid=True)
    pointer_type = _primitive_type(msg.pointer_primitive_type,
                                   f"{_where}.pointer_primitive_type", allow_invalid=True)
    layout = _wrap(_where, Layout,
                   tuple(msg.minor_to_major), tiles,
                   msg.tail_padding_alignment_in_elements or 1,
                   index_type, pointer_type,
                   msg.element_size_in_bits, _int8(msg.memory_space),
                   split_configs, physical, msg.dynamic_shape_metadata_prefix_bytes)
    extra = _extra_bytes(msg, _LAYOUT_MODELED)
    if extra:
        layout = _with_extra(_LayoutFromProto, layout, extra)
    return layout


_MAX_DEPTH = 200


def _shape_from_message(msg, where: str, depth: int) -> Shape:
    if depth > _MAX_DEPTH:
        raise ProtoDecodeError(f"{where}: shapes nested deeper than {_MAX_DEPTH}")
    et = _primitive_type(msg.element_type, f"{where}.element_type")
    dims = tuple(msg.dimensions)
    dyn = tuple(msg.is_dynamic_dimension)
    if et is P.TUPLE or et is P.BUFFER:
        if dims or dyn or msg.HasField("layout"):
            raise ProtoDecodeError(
                f"{where}: a {et.hlo_name} shape has dimensions, dynamic dimensions or a layout")
        subs = tuple(_shape_from_message(s, f"{where}.tuple_shapes[{i}]", depth + 1)
                     for i, s in enumerate(msg.tuple_shapes))
        if et is P.TUPLE:
            shape = Shape.tuple(subs)
        else:
            if len(subs) != 1 or not subs[0].is_array:
                raise ProtoDecodeError(
                    f"{where}.tuple_shapes: a buffer shape wraps exactly one array shape, "
                    f"got {len(subs)} shape(s)")
            shape = Shape.buffer(subs[0])
    else:
        if msg.tuple_shapes:
            raise ProtoDecodeError(
                f"{where}.tuple_shapes: only tuple and buffer shapes have tuple_shapes, "
                f"not {et.hlo_name}")
        if not et.is_array_type:
            if dims or dyn or msg.HasField("layout"):
                raise ProtoDecodeError(
                    f"{where}: a {et.hlo_name} shape has no dimensions or layout")
            shape = Shape(et)
        else:
            if dyn and len(dyn) != len(dims):
                raise ProtoDecodeError(
                    f"{where}.is_dynamic_dimension: {len(dyn)} entries for "
                    f"{len(dims)} dimensions")
            for i, d in enumerate(dims):
                if d < 0 and not (d == _INT64_MIN and dyn and dyn[i]):
                    raise ProtoDecodeError(
                        f"{where}.dimensions[{i}]: size {d} is negative (only an unbounded "
                        f"dynamic dimension, {_INT64_MIN}, may be)")
            layout = None
            if msg.HasField("layout"):
                layout = layout_from_proto(msg.layout, f"{where}.layout", depth)
            shape = _wrap(where, Shape, et, dims, layout, dyn if dyn else None)
    extra = _extra_bytes(msg, _SHAPE_MODELED)
    if extra:
        shape = _with_extra(_ShapeFromProto, shape, extra)
    return shape


def shape_from_proto(data) -> Shape:
    """A Shape from ``ShapeProto`` bytes or message (XLA's ``Shape(proto)``)."""
    msg = _message(_pb.ShapeProto, data, "ShapeProto")
    return _shape_from_message(msg, "ShapeProto", 0)


# ---------------------------------------------------------------------------
# fields kept, not modeled

class _LayoutFromProto(Layout):
    """A Layout read from a LayoutProto with fields xlashape does not model."""

    __slots__ = ("_proto_extra",)


class _ShapeFromProto(Shape):
    """A Shape read from a ShapeProto with fields xlashape does not model."""

    __slots__ = ("_proto_extra",)


def _with_extra(cls, obj, extra: bytes):
    out = object.__new__(cls)
    for klass in type(obj).__mro__:
        for slot in getattr(klass, "__slots__", ()):
            if slot != "_proto_extra":
                object.__setattr__(out, slot, getattr(obj, slot))
    object.__setattr__(out, "_proto_extra", extra)
    return out


def unmodeled_fields(obj) -> List[str]:
    """What a Shape or Layout read by ``from_proto`` carries that xlashape
    does not model: ``"ShapeProto.tuple_shapes[0].layout.dim_level_types"``
    for a known field, ``"... field 99"`` for an unknown one. Empty for
    everything else."""
    out: List[str] = []
    if isinstance(obj, Shape):
        _unmodeled_shape(obj, "ShapeProto", out)
    elif isinstance(obj, Layout):
        _unmodeled_layout(obj, "LayoutProto", out)
    else:
        raise ShapeTypeError(f"expected a Shape or Layout, got {type(obj).__name__}")
    return out


def _describe_extra(cls, extra: bytes, where: str, out: List[str]) -> None:
    msg = cls()
    msg.ParseFromString(extra)
    for fd, _ in msg.ListFields():
        out.append(f"{where}.{fd.name}")
    for number in _pb._unknown_numbers(msg):
        out.append(f"{where} field {number}")


def _unmodeled_shape(shape: Shape, where: str, out: List[str]) -> None:
    extra = getattr(shape, "_proto_extra", None)
    if extra:
        _describe_extra(_pb.ShapeProto, extra, where, out)
    if shape.is_tuple:
        for i, sub in enumerate(shape.tuple_shapes):
            _unmodeled_shape(sub, f"{where}.tuple_shapes[{i}]", out)
    elif shape.is_buffer:
        _unmodeled_shape(shape.buffer_shape, f"{where}.tuple_shapes[0]", out)
    elif shape.layout is not None:
        _unmodeled_layout(shape.layout, f"{where}.layout", out)


def _unmodeled_layout(layout: Layout, where: str, out: List[str]) -> None:
    extra = getattr(layout, "_proto_extra", None)
    if extra:
        _describe_extra(_pb.LayoutProto, extra, where, out)
    if layout.physical_shape is not None:
        _unmodeled_shape(layout.physical_shape, f"{where}.physical_shape", out)


# ---------------------------------------------------------------------------
# ProgramShape

class ProgramShape:
    """XLA's ``ProgramShape``: parameter shapes, their names, the result.

    >>> from xlashape import parse_shape
    >>> ps = ProgramShape([parse_shape("f32[2]{0}")], parse_shape("f32[]"), ["x"])
    >>> str(ps)
    '(x: f32[2]{0}) -> f32[]'
    >>> ProgramShape.from_proto(ps.to_proto()) == ps
    True
    """

    __slots__ = ("parameters", "result", "parameter_names")

    def __init__(self, parameters: Sequence[Shape] = (), result: Optional[Shape] = None,
                 parameter_names: Sequence[str] = ()):
        params = tuple(parameters)
        for p in params:
            if not isinstance(p, Shape):
                raise ShapeTypeError(f"parameters must be Shapes, got {type(p).__name__}")
        if result is None:
            result = Shape.tuple()
        if not isinstance(result, Shape):
            raise ShapeTypeError(f"result must be a Shape, got {type(result).__name__}")
        names = tuple(parameter_names)
        for n in names:
            if not isinstance(n, str):
                raise ShapeTypeError(f"parameter names must be str, got {type(n).__name__}")
        self.parameters = params
        self.result = result
        self.parameter_names = names

    def __eq__(self, other):
        if not isinstance(other, ProgramShape):
            return NotImplemented
        return (self.parameters == other.parameters and self.result == other.result
                and self.parameter_names == other.parameter_names)

    def __hash__(self):
        return hash((self.parameters, self.result, self.parameter_names))

    def __str__(self) -> str:
        # ProgramShape::ToString
        parts = []
        for i, p in enumerate(self.parameters):
            name = self.parameter_names[i] if i < len(self.parameter_names) else "(unknown)"
            parts.append(f"{name}: {p}")
        return "(" + ", ".join(parts) + f") -> {self.result}"

    def __repr__(self) -> str:
        return f"ProgramShape({str(self)!r})"

    def to_proto_message(self):
        msg = _pb.ProgramShapeProto()
        for p in self.parameters:
            msg.parameters.add().CopyFrom(shape_to_proto(p))
        msg.result.CopyFrom(shape_to_proto(self.result))
        msg.parameter_names.extend(self.parameter_names)
        return msg

    def to_proto(self) -> bytes:
        """The serialized ``ProgramShapeProto``."""
        return self.to_proto_message().SerializeToString()

    @classmethod
    def from_proto(cls, data) -> "ProgramShape":
        msg = _message(_pb.ProgramShapeProto, data, "ProgramShapeProto")
        params = [_shape_from_message(p, f"ProgramShapeProto.parameters[{i}]", 0)
                  for i, p in enumerate(msg.parameters)]
        result = (_shape_from_message(msg.result, "ProgramShapeProto.result", 0)
                  if msg.HasField("result") else Shape.tuple())  # absent: the nil tuple
        return cls(params, result, list(msg.parameter_names))

