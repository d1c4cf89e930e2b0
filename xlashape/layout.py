"""XLA layouts: ``Tile``, ``SplitConfig`` and ``Layout`` (``xla/layout.h``).

All three are immutable and hashable. ``str()`` prints exactly what XLA prints;
``repr()`` shows every non-default field, including the legacy
``padded_dimensions`` / ``padding_value`` fields of XLA's older shapes
documentation, which have no HLO text syntax and so never appear in ``str()``.

>>> lay = Layout((1, 0), tiles=(Tile(8, 128), Tile(2, 1)), memory_space=1)
>>> str(lay)
'{1,0:T(8,128)(2,1)S(1)}'
>>> lay.major_to_minor
(0, 1)
"""

from __future__ import annotations

import collections
import math
import numbers
from typing import Sequence

from ._base import INT64_MAX, INT64_MIN, Frozen, as_int, int_tuple
from .errors import ShapeTypeError, InvalidShapeError
from .primitive_types import PrimitiveType, as_primitive_type

__all__ = [
    "Tile",
    "SplitConfig",
    "Layout",
    "COMBINE_DIMENSION",
    "MEMORY_SPACE_DEFAULT",
    "MEMORY_SPACE_FAST",
    "MEMORY_SPACE_HOST",
    "memory_space_name",
]

#: ``Tile::kCombineDimension``: a ``*`` entry in a tile (INT64_MIN in XLA's code).
COMBINE_DIMENSION = INT64_MIN

MEMORY_SPACE_DEFAULT = 0  # device memory (HBM on TPU/GPU)
MEMORY_SPACE_FAST = 1  # kGenericFastMemorySpace (VMEM on TPU)
MEMORY_SPACE_HOST = 5  # kHostMemorySpace

_MEMORY_SPACE_NAMES = {
    0: "device memory (HBM), the default",
    1: "fast on-chip memory (VMEM on TPU)",
    5: "host memory",
}


def memory_space_name(space: int) -> str:
    """A human description of a memory space number (``S(n)``)."""
    return _MEMORY_SPACE_NAMES.get(int(space), f"device-specific memory space {int(space)}")


class Tile(Frozen):
    """One tile of a tiled layout: bounds listed major to minor.

    An entry may be ``'*'`` (or :data:`COMBINE_DIMENSION`): combine that
    dimension with the next more-minor one before tiling.

    >>> str(Tile(8, 128)), str(Tile('*', 128))
    ('(8,128)', '(*,128)')
    """

    __slots__ = ("_dims",)

    def __init__(self, *dimensions):
        if len(dimensions) == 1 and not isinstance(dimensions[0], (numbers.Integral, str)):
            dimensions = tuple(dimensions[0])
        dims = []
        for d in dimensions:
            if type(d) is int and 0 <= d <= INT64_MAX:
                dims.append(d)
                continue
            if d == "*" or (isinstance(d, numbers.Integral) and not isinstance(d, bool)
                            and int(d) == COMBINE_DIMENSION):
                dims.append(COMBINE_DIMENSION)
                continue
            d = as_int(d, "tile dimension")
            if d < 0:
                # LayoutUtil::MakeLayout aborts on these; we refuse them.
                raise InvalidShapeError(
                    f"tile dimension must be >= 0 or '*' (combine), got {d}")
            if d > INT64_MAX:
                raise InvalidShapeError(f"tile dimension {d} does not fit in int64")
            dims.append(d)
        object.__setattr__(self, "_dims", tuple(dims))

    @classmethod
    def _from_parsed(cls, dims: tuple) -> "Tile":
        """A Tile of already-valid int dims (``COMBINE_DIMENSION`` for ``*``),
        without the constructor's checks (the HLO parser's fast path)."""
        tile = object.__new__(cls)
        _set_tile_dims(tile, dims)
        return tile

    @property
    def dimensions(self) -> tuple:
        """Tile bounds, major to minor; ``COMBINE_DIMENSION`` for ``*``."""
        return self._dims

    def dimension(self, i: int) -> int:
        return self._dims[i]

    def __len__(self) -> int:
        return len(self._dims)

    def __iter__(self):
        return iter(self._dims)

    @property
    def has_combined_dimension(self) -> bool:
        return COMBINE_DIMENSION in self._dims

    def __str__(self) -> str:
        dims = self._dims
        if dims and min(dims) >= 0:
            return "(" + ",".join(map(str, dims)) + ")"
        # '*' (and, for parity with XLA's printer, negative values, which the
        # constructor refuses)
        return "(" + ",".join("*" if d == COMBINE_DIMENSION else str(d) if d >= 0
                              else f"Invalid value {d}" for d in dims) + ")"

    def __repr__(self) -> str:
        inner = ", ".join("'*'" if d == COMBINE_DIMENSION else str(d) for d in self._dims)
        return f"Tile({inner})"

    def __eq__(self, other):
        if not isinstance(other, Tile):
            return NotImplemented
        return self._dims == other._dims

    def __hash__(self):
        return hash(("Tile", self._dims))

    def __reduce__(self):
        return (Tile, self._dims)

    def to_proto(self) -> bytes:
        """The serialized ``TileProto`` (``*`` as INT64_MIN, as XLA stores it)."""
        from .shape_proto import tile_to_proto

        return tile_to_proto(self).SerializeToString()

    @classmethod
    def from_proto(cls, data) -> "Tile":
        """A Tile from ``TileProto`` bytes or message."""
        from .shape_proto import tile_from_proto

        return tile_from_proto(data)


class SplitConfig(Frozen):
    """``SplitConfig(dimension, split_indices)``; ``dimension`` is physical (0 = major-most).

    >>> str(SplitConfig(1, (0, 4)))
    '(1:0,4)'
    """

    __slots__ = ("_dimension", "_split_indices")

    def __init__(self, dimension: int, split_indices: Sequence[int] = ()):
        object.__setattr__(self, "_dimension", as_int(dimension, "split dimension"))
        object.__setattr__(self, "_split_indices", int_tuple(split_indices, "split_indices"))

    @property
    def dimension(self) -> int:
        return self._dimension

    @property
    def split_indices(self) -> tuple:
        return self._split_indices

    def __str__(self) -> str:
        return f"({self._dimension}:{','.join(map(str, self._split_indices))})"

    def __repr__(self) -> str:
        return f"SplitConfig({self._dimension}, {self._split_indices!r})"

    def __eq__(self, other):
        if not isinstance(other, SplitConfig):
            return NotImplemented
        return (self._dimension, self._split_indices) == (other._dimension, other._split_indices)

    def __hash__(self):
        return hash(("SplitConfig", self._dimension, self._split_indices))

    def __reduce__(self):
        return (SplitConfig, (self._dimension, self._split_indices))

    def to_proto(self) -> bytes:
        """The serialized ``SplitConfigProto``."""
        from .shape_proto import split_config_to_proto

        return split_config_to_proto(self).SerializeToString()

    @classmethod
    def from_proto(cls, data) -> "SplitConfig":
        """A SplitConfig from ``SplitConfigProto`` bytes or message."""
        from .shape_proto import split_config_from_proto

        return split_config_from_proto(data)


def _same_value(a, b) -> bool:
    if a == b:
        return True
    try:
        return math.isnan(a) and math.isnan(b)
    except TypeError:
        return False


_NO_TYPE = PrimitiveType.PRIMITIVE_TYPE_INVALID

# Every field of a Layout and its default, in slot order: the constructor's
# defaults, the trusted constructor and replace()/pickling all read this table.
_DEFAULTS = collections.namedtuple("_LayoutFields", [
    "minor_to_major",
    "tiles",
    "tail_padding_alignment_in_elements",
    "index_primitive_type",
    "pointer_primitive_type",
    "element_size_in_bits",
    "memory_space",
    "split_configs",
    "physical_shape",
    "dynamic_shape_metadata_prefix_bytes",
    "padded_dimensions",
    "padding_value",
])((), (), 1, _NO_TYPE, _NO_TYPE, 0, 0, (), None, 0, (), 0)
_FIELDS = _DEFAULTS._fields
_D = _DEFAULTS


class Layout(Frozen):
    """An XLA ``Layout``: dimension order, tiling, element size, memory space.

    Parameters follow XLA's field names. ``padded_dimensions`` and
    ``padding_value`` are the legacy padding fields of XLA's older shapes
    documentation: each logical dimension is padded to ``padded_dimensions[d]``
    before tiling, and ``padding_value`` is what every padding slot holds in a
    :class:`~xlashape.LayoutArray` (tile padding too).

    Equality is XLA's ``Layout::Equal`` (``dynamic_shape_metadata_prefix_bytes``
    is not compared), extended with the two padding fields.
    """

    # One slot per field, then the printed text, computed once (None until then).
    __slots__ = tuple("_" + f for f in _FIELDS) + ("_text",)
    #: Every field and its default, in slot order (for the trusted constructors).
    _DEFAULTS = _DEFAULTS

    def __init__(
        self,
        minor_to_major: Sequence[int] = _D.minor_to_major,
        tiles: Sequence = _D.tiles,
        tail_padding_alignment_in_elements: int = _D.tail_padding_alignment_in_elements,
        index_primitive_type=_D.index_primitive_type,
        pointer_primitive_type=_D.pointer_primitive_type,
        element_size_in_bits: int = _D.element_size_in_bits,
        memory_space: int = _D.memory_space,
        split_configs: Sequence = _D.split_configs,
        physical_shape=_D.physical_shape,
        dynamic_shape_metadata_prefix_bytes: int = _D.dynamic_shape_metadata_prefix_bytes,
        padded_dimensions: Sequence[int] = _D.padded_dimensions,
        padding_value=_D.padding_value,
    ):
        s = object.__setattr__
        s(self, "_text", None)
        s(self, "_minor_to_major", int_tuple(minor_to_major, "minor_to_major"))
        tl = []
        if isinstance(tiles, (Tile, str)):
            raise ShapeTypeError("tiles must be a sequence of Tile (or of sequences of ints)")
        for t in tiles:
            tl.append(t if isinstance(t, Tile) else Tile(*t))
        s(self, "_tiles", tuple(tl))
        tp = as_int(tail_padding_alignment_in_elements, "tail_padding_alignment_in_elements")
        if tp < 1:
            raise InvalidShapeError(
                f"tail_padding_alignment_in_elements must be >= 1, got {tp}")
        s(self, "_tail_padding_alignment_in_elements", tp)
        s(self, "_index_primitive_type", as_primitive_type(index_primitive_type))
        s(self, "_pointer_primitive_type", as_primitive_type(pointer_primitive_type))
        s(self, "_element_size_in_bits", as_int(element_size_in_bits, "element_size_in_bits"))
        ms = as_int(memory_space, "memory_space")
        if not -128 <= ms <= 127:
            # XLA stores memory_space as int8_t; refuse rather than wrap silently.
            raise InvalidShapeError(
                f"memory_space must fit in int8 (-128..127) as in XLA, got {ms}")
        s(self, "_memory_space", ms)
        sc = []
        for c in split_configs:
            sc.append(c if isinstance(c, SplitConfig) else SplitConfig(*c))
        s(self, "_split_configs", tuple(sc))
        if physical_shape is not None:
            from .shape import Shape  # local: shape.py imports this module

            if not isinstance(physical_shape, Shape):
                raise ShapeTypeError("physical_shape must be a Shape or None")
        s(self, "_physical_shape", physical_shape)
        mb = as_int(dynamic_shape_metadata_prefix_bytes, "dynamic_shape_metadata_prefix_bytes")
        s(self, "_dynamic_shape_metadata_prefix_bytes", mb)
        pd = int_tuple(padded_dimensions, "padded_dimensions")
        if pd and len(pd) != len(self._minor_to_major):
            raise InvalidShapeError(
                f"padded_dimensions has {len(pd)} entries but the layout has "
                f"{len(self._minor_to_major)} dimensions; they must be equal")
        if any(p < 0 for p in pd):
            raise InvalidShapeError(f"padded_dimensions must be >= 0, got {list(pd)}")
        s(self, "_padded_dimensions", pd)
        if type(padding_value) not in (int, float) and (
                isinstance(padding_value, str) or not isinstance(padding_value, numbers.Number)):
            raise ShapeTypeError(
                f"padding_value must be a number, got {type(padding_value).__name__}")
        s(self, "_padding_value", padding_value)

    # -- fields ------------------------------------------------------------
    minor_to_major = property(lambda self: self._minor_to_major,
                              doc="Dimension numbers from most minor to most major.")
    tiles = property(lambda self: self._tiles, doc="Tile levels, applied in order.")
    tail_padding_alignment_in_elements = property(
        lambda self: self._tail_padding_alignment_in_elements,
        doc="``L(n)``: the element count is rounded up to a multiple of n (default 1).")
    index_primitive_type = property(lambda self: self._index_primitive_type)
    pointer_primitive_type = property(lambda self: self._pointer_primitive_type)
    element_size_in_bits = property(
        lambda self: self._element_size_in_bits,
        doc="``E(n)``: bits per element in memory; 0 means the type's byte width.")
    memory_space = property(lambda self: self._memory_space,
                            doc="``S(n)``: 0 device/HBM, 1 fast/VMEM, 5 host, others by number.")
    split_configs = property(lambda self: self._split_configs)
    physical_shape = property(lambda self: self._physical_shape)
    dynamic_shape_metadata_prefix_bytes = property(
        lambda self: self._dynamic_shape_metadata_prefix_bytes)
    padded_dimensions = property(
        lambda self: self._padded_dimensions,
        doc="Legacy (XLA's older shapes documentation): per-dimension widths to "
        "pad to before tiling, () for none.")
    padding_value = property(
        lambda self: self._padding_value,
        doc="Legacy (XLA's older shapes documentation): the value padding slots "
        "hold (default 0).")

    @property
    def major_to_minor(self) -> tuple:
        """``minor_to_major`` reversed: the order JAX and numpy users think in."""
        return tuple(reversed(self._minor_to_major))

    @property
    def rank(self) -> int:
        return len(self._minor_to_major)

    @property
    def memory_space_name(self) -> str:
        return memory_space_name(self._memory_space)

    def minor_to_major_at(self, i: int) -> int:
        return self._minor_to_major[i]

    # -- copies ------------------------------------------------------------
    def _fields(self) -> dict:
        return {f: getattr(self, "_" + f) for f in _FIELDS}

    def replace(self, **changes) -> "Layout":
        """A copy with some fields changed (like ``dataclasses.replace``)."""
        unknown = set(changes) - set(_FIELDS)
        if unknown:
            raise ShapeTypeError(f"Layout has no field(s) {sorted(unknown)}")
        fields = self._fields()
        fields.update(changes)
        return Layout(**fields)

    def __reduce__(self):
        return (_layout_from_fields, (self._fields(),))

    # -- XLA's LayoutProto ---------------------------------------------------
    def to_proto(self) -> bytes:
        """The serialized ``LayoutProto``, byte for byte what XLA's
        ``Layout::ToProto`` serializes (see :mod:`xlashape.shape_proto`).

        >>> Layout((1, 0), tiles=[Tile(8, 128)]).to_proto().hex()
        '0a02010032050a03088001800101'
        """
        from .shape_proto import layout_to_proto

        return layout_to_proto(self).SerializeToString()

    def to_proto_message(self):
        """The :class:`xlashape.protos.LayoutProto` message of :meth:`to_proto`."""
        from .shape_proto import layout_to_proto

        return layout_to_proto(self)

    @classmethod
    def from_proto(cls, data) -> "Layout":
        """A Layout from ``LayoutProto`` bytes or message (XLA's
        ``Layout::CreateFromProto``)."""
        from .shape_proto import layout_from_proto

        return layout_from_proto(data)

    # -- equality ----------------------------------------------------------
    def equal(
        self,
        other: "Layout",
        *,
        ignore_tiles: bool = False,
        ignore_tail_padding_alignment_in_elements: bool = False,
        ignore_index_primitive_type: bool = False,
        ignore_pointer_primitive_type: bool = False,
        ignore_element_size: bool = False,
        ignore_memory_space: bool = False,
        ignore_split_configs: bool = False,
        ignore_physical_shape: bool = False,
        ignore_padding: bool = False,
        minor_to_major_only: bool = False,
    ) -> bool:
        """``Layout::Equal`` with its ``Ignore*`` options (plus ``ignore_padding``
        for the legacy padding fields)."""
        if not isinstance(other, Layout):
            raise ShapeTypeError(f"expected a Layout, got {type(other).__name__}")
        if self._minor_to_major != other._minor_to_major:
            return False
        if minor_to_major_only:
            return True
        checks = (
            (ignore_tiles, "_tiles"),
            (ignore_tail_padding_alignment_in_elements, "_tail_padding_alignment_in_elements"),
            (ignore_index_primitive_type, "_index_primitive_type"),
            (ignore_pointer_primitive_type, "_pointer_primitive_type"),
            (ignore_element_size, "_element_size_in_bits"),
            (ignore_memory_space, "_memory_space"),
            (ignore_split_configs, "_split_configs"),
            (ignore_physical_shape, "_physical_shape"),
            (ignore_padding, "_padded_dimensions"),
        )
        for ignored, attr in checks:
            if not ignored and getattr(self, attr) != getattr(other, attr):
                return False
        if not ignore_padding and not _same_value(self._padding_value, other._padding_value):
            return False
        return True

    def __eq__(self, other):
        if not isinstance(other, Layout):
            return NotImplemented
        return self.equal(other)

    def __hash__(self):
        pv = self._padding_value
        if isinstance(pv, float) and math.isnan(pv):
            pv = "nan"
        return hash((
            self._minor_to_major, self._tiles, self._tail_padding_alignment_in_elements,
            self._index_primitive_type, self._pointer_primitive_type,
            self._element_size_in_bits, self._memory_space, self._split_configs,
            self._physical_shape, self._padded_dimensions, pv,
        ))

    # -- trusted construction ------------------------------------------------
    @classmethod
    def _from_parsed(cls, minor_to_major: tuple, tiles: tuple, tail_padding: int,
                     element_bits: int, memory_space: int, text=None) -> "Layout":
        """A Layout from values the HLO parser has already checked and
        normalised (tuples of ints and Tiles, ``tail_padding >= 1``,
        ``memory_space`` in int8), without the constructor's checks; every
        other field takes its default from the same table as ``__init__``.
        ``text``, when given, must be exactly what ``str()`` would print."""
        lay = object.__new__(cls)
        for setter, value in zip(_LAYOUT_SETTERS, _DEFAULTS._replace(
                minor_to_major=minor_to_major, tiles=tiles,
                tail_padding_alignment_in_elements=tail_padding,
                element_size_in_bits=element_bits, memory_space=memory_space)):
            setter(lay, value)
        _set_layout_text(lay, text)
        return lay

    # -- text --------------------------------------------------------------
    def __str__(self) -> str:
        """XLA's ``Layout::ToString``: ``{m2m:attributes}`` with defaults omitted
        (computed once: layouts are immutable)."""
        text = self._text
        if text is None:
            text = self._format()
            _set_layout_text(self, text)
        return text

    def _format(self) -> str:
        attrs = ""
        if self._tiles:
            attrs = "T" + "".join(map(str, self._tiles))
        if self._tail_padding_alignment_in_elements != 1:
            attrs += f"L({self._tail_padding_alignment_in_elements})"
        for prefix, t in (("#", self._index_primitive_type), ("*", self._pointer_primitive_type)):
            if t is not _NO_TYPE:
                name = t.hlo_name if t.is_integral else "invalid"
                attrs += f"{prefix}({name})"
        if self._element_size_in_bits:
            attrs += f"E({self._element_size_in_bits})"
        if self._memory_space:
            attrs += f"S({self._memory_space})"
        if self._split_configs:
            attrs += "SC" + "".join(map(str, self._split_configs))
        if self._physical_shape is not None:
            attrs += f"P({self._physical_shape})"
        if self._dynamic_shape_metadata_prefix_bytes > 0:
            attrs += f"M({self._dynamic_shape_metadata_prefix_bytes})"
        body = ",".join(map(str, self._minor_to_major))
        if attrs:
            return "{" + body + ":" + attrs + "}"
        return "{" + body + "}"

    to_string = __str__

    def __repr__(self) -> str:
        extras = []
        if self._padded_dimensions:
            extras.append(f"padded_dimensions={self._padded_dimensions!r}")
        if not _same_value(self._padding_value, 0):
            extras.append(f"padding_value={self._padding_value!r}")
        if self._dynamic_shape_metadata_prefix_bytes < 0:
            extras.append("dynamic_shape_metadata_prefix_bytes="
                          f"{self._dynamic_shape_metadata_prefix_bytes}")
        tail = "".join(", " + e for e in extras)
        return f"Layout({str(self)!r}{tail})"



# The slot setters the trusted constructors use (tests compare every slot of
# what they build with what the public constructors build).
_set_tile_dims = Tile._dims.__set__
_LAYOUT_SETTERS = tuple(getattr(Layout, "_" + f).__set__ for f in _FIELDS)
_set_layout_text = Layout._text.__set__


def _layout_from_fields(fields: dict) -> Layout:
    return Layout(**fields)
