"""Between xlashape and JAX's layouts (jax is imported only when these run).

JAX describes a device-local layout as ``jax.experimental.layout.Layout(
major_to_minor, tiling, sub_byte_element_size_in_bits)`` (called
``DeviceLocalLayout`` before jax 0.7); a ``jax.Array``'s ``format`` holds it
with the sharding. These functions convert both ways:

* :func:`to_jax_layout`: an xlashape :class:`~xlashape.Layout` (or a Shape,
  or HLO text) to a jax Layout. The fields jax's Layout has no place for
  (``L(n)`` tail padding, ``S(n)`` memory space, split configs, index and
  pointer types, dynamic-shape metadata, the legacy padding fields) must be
  at their defaults, else :class:`~xlashape.InvalidShapeError` names them.
* :func:`from_jax_layout`: a jax Layout to an xlashape Layout.
* :func:`shape_of`: a ``jax.Array`` to the xlashape Shape of the buffer it
  keeps on each device (its shard shape, element type and layout).

``*`` tile entries travel as XLA's own marker (the most negative int64), as
in jax's ``tiling`` tuples.
"""

from __future__ import annotations

from .errors import InvalidShapeError, ShapeTypeError
from .hlo_text import parse_layout, parse_shape
from .layout import Layout, Tile
from .primitive_types import PrimitiveType, primitive_type_from_dtype
from .shape import Shape

__all__ = ["to_jax_layout", "from_jax_layout", "shape_of"]


def _jax_layout_class():
    from jax.experimental import layout as jl
    cls = getattr(jl, "Layout", None)
    if cls is None or not hasattr(cls, "major_to_minor") and hasattr(jl, "DeviceLocalLayout"):
        cls = jl.DeviceLocalLayout      # jax < 0.7 called it this
    return cls


def _as_layout(obj):
    if isinstance(obj, str):
        obj = parse_layout(obj) if obj.lstrip().startswith("{") else parse_shape(obj)
    if isinstance(obj, Shape):
        if not obj.is_array:
            raise InvalidShapeError(f"{obj} is not an array shape; only arrays have a layout")
        et = obj.element_type
        obj = obj.layout if obj.layout is not None else \
            Layout(tuple(range(obj.rank - 1, -1, -1)))
        return obj, et
    if isinstance(obj, Layout):
        return obj, None
    raise ShapeTypeError(
        f"expected an xlashape Layout, Shape or HLO text, got {type(obj).__name__}")


def to_jax_layout(layout):
    """An xlashape Layout (or Shape / HLO text) as a jax Layout.

    ``E(n)`` becomes ``sub_byte_element_size_in_bits`` when it packs
    sub-byte elements, and 0 when it is a type's natural width (jax's
    default); a layout without tiles gets ``tiling=()``.
    """
    layout, et = _as_layout(layout)
    extra = []
    if layout.tail_padding_alignment_in_elements != 1:
        extra.append(f"L({layout.tail_padding_alignment_in_elements})")
    if layout.memory_space != 0:
        extra.append(f"S({layout.memory_space}) (jax puts memory kinds in the sharding)")
    if layout.split_configs:
        extra.append("split configs")
    if layout.index_primitive_type != PrimitiveType.PRIMITIVE_TYPE_INVALID or \
            layout.pointer_primitive_type != PrimitiveType.PRIMITIVE_TYPE_INVALID:
        extra.append("index/pointer primitive types")
    if layout.dynamic_shape_metadata_prefix_bytes:
        extra.append("dynamic shape metadata prefix bytes")
    if layout.padded_dimensions or layout.padding_value != 0:
        extra.append("the legacy padded_dimensions / padding_value fields")
    if layout.physical_shape is not None:
        extra.append("a physical shape")
    if extra:
        raise InvalidShapeError(
            f"jax's Layout has no place for {', '.join(extra)} of layout {layout}")
    bits = layout.element_size_in_bits
    if bits and bits >= 8 and (et is None or bits == et.byte_width * 8):
        bits = 0
    if bits and et is not None and bits != et.bit_width:
        raise InvalidShapeError(
            f"E({bits}) is neither the width of {et.hlo_name} nor its packed size")
    tiling = tuple(tuple(t.dimensions) for t in layout.tiles)
    return _jax_layout_class()(layout.major_to_minor, tiling, bits)


def from_jax_layout(jax_layout) -> Layout:
    """A jax Layout as an xlashape Layout (``tiling=None`` means no tiles)."""
    for name in ("major_to_minor", "tiling", "sub_byte_element_size_in_bits"):
        if not hasattr(jax_layout, name):
            raise ShapeTypeError(
                f"expected a jax Layout (major_to_minor, tiling, "
                f"sub_byte_element_size_in_bits), got {type(jax_layout).__name__}")
    tiles = [Tile(*t) for t in (jax_layout.tiling or ())]
    return Layout(tuple(reversed(tuple(jax_layout.major_to_minor))), tiles=tiles,
                  element_size_in_bits=int(jax_layout.sub_byte_element_size_in_bits or 0))


def shape_of(array) -> Shape:
    """The xlashape Shape of a ``jax.Array``'s buffer on each device.

    The dimensions are the shard shape (the whole shape on one device), the
    layout comes from ``array.format.layout`` (``array.layout`` in older
    jax).

    >>> import jax.numpy as jnp                       # doctest: +SKIP
    >>> str(shape_of(jnp.zeros((3, 5), jnp.bfloat16)))  # doctest: +SKIP
    'bf16[3,5]{1,0}'
    """
    fmt = getattr(array, "format", None)
    if fmt is None:
        fmt = getattr(array, "layout", None)
    jl = getattr(fmt, "layout", None)
    if jl is None or not hasattr(jl, "major_to_minor"):
        jl = getattr(fmt, "device_local_layout", None)
    if jl is None or not hasattr(jl, "major_to_minor"):
        raise ShapeTypeError(
            f"expected a jax.Array with a concrete layout, got {type(array).__name__}")
    et = primitive_type_from_dtype(array.dtype)
    sharding = getattr(array, "sharding", None)
    dims = tuple(sharding.shard_shape(array.shape)) if sharding is not None else \
        tuple(array.shape)
    return Shape(et, dims, from_jax_layout(jl))
