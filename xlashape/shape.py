"""XLA shapes (``xla/shape.h``).

A :class:`Shape` is exactly one of: an array (element type, dimensions,
dynamic flags, optional :class:`~xlashape.Layout`), a tuple of shapes, a
token, an opaque value, or a buffer ``b(...)`` wrapping one array shape.
Shapes are immutable and hashable; ``==`` is XLA's ``Shape::Equal``;
``str()`` prints XLA's text *with* the layout.

>>> s = Shape("bf16", (8, 1, 1280, 16384), Layout((3, 2, 0, 1)))
>>> str(s), s.rank, s.dtype
('bf16[8,1,1280,16384]{3,2,0,1}', 4, dtype(bfloat16))
"""

from __future__ import annotations

import numbers
from typing import Optional, Sequence

from ._base import INT64_MIN, Frozen
from .errors import InvalidShapeError, ShapeIndexError, ShapeTypeError
from .layout import Layout
from .primitive_types import PrimitiveType, as_primitive_type

__all__ = ["Shape", "UNBOUNDED_SIZE"]

#: ``Shape::kUnboundedSize``: the size of an unbounded dynamic dimension (``?``).
UNBOUNDED_SIZE = INT64_MIN

P = PrimitiveType


class Shape(Frozen):
    """An XLA shape.

    ``Shape(element_type, dimensions, layout=None, dynamic_dimensions=None)``
    builds an array shape; ``element_type`` may be a :class:`PrimitiveType`,
    an HLO name (``"f32"``) or a numpy dtype. Dimensions are ints;
    :data:`UNBOUNDED_SIZE` is an unbounded dynamic dimension (``?``), and a
    dimension flagged in ``dynamic_dimensions`` is bounded dynamic (``<=N``).
    Use :meth:`tuple`, :meth:`token`, :meth:`opaque` and :meth:`buffer` for the
    other kinds.

    Like XLA's ``Shape`` class, the constructor checks types but not validity:
    :func:`xlashape.shape_util.validate_shape` and the ``make_shape*``
    helpers do that.
    """

    # The fields, then two values computed once: the hash and the printed text
    # (None until first needed).
    __slots__ = ("_element_type", "_dimensions", "_dynamic", "_layout", "_tuple_shapes",
                 "_hash", "_text")

    def __init__(self, element_type, dimensions: Sequence[int] = (), layout: Optional[Layout] = None,
                 dynamic_dimensions: Optional[Sequence[bool]] = None, *, tuple_shapes=None):
        et = as_primitive_type(element_type)
        s = object.__setattr__
        s(self, "_element_type", et)
        s(self, "_hash", None)
        s(self, "_text", None)
        if et is P.TUPLE or et is P.BUFFER:
            shapes = tuple(tuple_shapes or ())
            for sub in shapes:
                if not isinstance(sub, Shape):
                    raise ShapeTypeError(f"tuple elements must be Shapes, got {type(sub).__name__}")
            if et is P.BUFFER:
                if len(shapes) != 1 or not shapes[0].is_array:
                    raise InvalidShapeError("a buffer shape wraps exactly one array shape")
            if tuple(dimensions) or layout is not None or dynamic_dimensions:
                raise InvalidShapeError(f"a {et.hlo_name} shape has no dimensions or layout")
            s(self, "_tuple_shapes", shapes)
            s(self, "_dimensions", ())
            s(self, "_dynamic", ())
            s(self, "_layout", None)
            return
        if tuple_shapes:
            raise InvalidShapeError(f"only tuple and buffer shapes have tuple_shapes, not {et.hlo_name}")
        s(self, "_tuple_shapes", ())
        if isinstance(dimensions, (str, bytes)):
            raise ShapeTypeError("dimensions must be a sequence of ints, not a string")
        try:
            dims = tuple(dimensions)
        except TypeError:
            raise ShapeTypeError(
                f"dimensions must be a sequence of ints, got {type(dimensions).__name__}") from None
        if not all(type(d) is int for d in dims):
            for d in dims:
                if isinstance(d, bool) or not isinstance(d, numbers.Integral):
                    raise ShapeTypeError(
                        f"dimension sizes must be ints, got {type(d).__name__} {d!r}")
            dims = tuple(int(d) for d in dims)
        if et is P.TOKEN or et is P.OPAQUE_TYPE or et is P.PRIMITIVE_TYPE_INVALID:
            if dims or layout is not None or dynamic_dimensions:
                raise InvalidShapeError(f"a {et.hlo_name} shape has no dimensions or layout")
            s(self, "_dimensions", ())
            s(self, "_dynamic", ())
            s(self, "_layout", None)
            return
        if dynamic_dimensions is None:
            dyn = tuple(d == UNBOUNDED_SIZE for d in dims)
        else:
            dyn = tuple(bool(x) for x in dynamic_dimensions)
            if len(dyn) != len(dims):
                raise InvalidShapeError(
                    f"dynamic dimensions size {len(dyn)} did not match number of dimensions {len(dims)}")
        if layout is not None and not isinstance(layout, Layout):
            raise ShapeTypeError(f"layout must be a Layout or None, got {type(layout).__name__}")
        s(self, "_dimensions", dims)
        s(self, "_dynamic", dyn)
        s(self, "_layout", layout)

    # -- other kinds -------------------------------------------------------
    @classmethod
    def tuple(cls, shapes: Sequence["Shape"] = ()) -> "Shape":
        """A tuple shape; ``Shape.tuple()`` is the nil tuple ``()``."""
        return cls(P.TUPLE, tuple_shapes=tuple(shapes))

    @classmethod
    def token(cls) -> "Shape":
        return cls(P.TOKEN)

    @classmethod
    def opaque(cls) -> "Shape":
        return cls(P.OPAQUE_TYPE)

    @classmethod
    def buffer(cls, array_shape: "Shape") -> "Shape":
        """``b(<array shape>)``."""
        return cls(P.BUFFER, tuple_shapes=(array_shape,))

    # -- accessors ---------------------------------------------------------
    @property
    def element_type(self) -> PrimitiveType:
        return self._element_type

    @property
    def dimensions(self) -> tuple:
        """Dimension sizes in dimension-number order (the bound for dynamic ones)."""
        return self._dimensions

    @property
    def dynamic_dimensions(self) -> tuple:
        """Per-dimension dynamic flags (``is_dynamic_dimension`` in XLA)."""
        return self._dynamic

    @property
    def layout(self) -> Optional[Layout]:
        return self._layout

    @property
    def tuple_shapes(self) -> tuple:
        return self._tuple_shapes if self._element_type is P.TUPLE else ()

    @property
    def buffer_shape(self) -> "Shape":
        if self._element_type is not P.BUFFER:
            raise InvalidShapeError(f"{self} is not a buffer shape")
        return self._tuple_shapes[0]

    @property
    def rank(self) -> int:
        """Number of dimensions of an array shape."""
        if not self.is_array:
            raise InvalidShapeError(f"{self.human_string()} is not an array and has no rank")
        return len(self._dimensions)

    @property
    def dtype(self):
        """The numpy dtype of the element type, or ``None``."""
        return self._element_type.dtype if self.is_array else None

    def dimension(self, i: int) -> int:
        """Size of dimension ``i``; negative ``i`` counts from the end."""
        return self._dimensions[self._dim_index(i)]

    def _dim_index(self, i) -> int:
        if isinstance(i, bool) or not isinstance(i, numbers.Integral):
            raise ShapeTypeError(f"dimension number must be an int, got {type(i).__name__}")
        n = len(self._dimensions)
        j = int(i) + n if i < 0 else int(i)
        if not 0 <= j < n:
            raise ShapeIndexError(f"dimension {i} is out of range for a shape with {n} dimensions")
        return j

    def is_dynamic_dimension(self, i: int) -> bool:
        return self._dynamic[self._dim_index(i)]

    def is_unbounded_dynamic_dimension(self, i: int) -> bool:
        j = self._dim_index(i)
        return self._dynamic[j] and self._dimensions[j] == UNBOUNDED_SIZE

    def is_bounded_dynamic_dimension(self, i: int) -> bool:
        j = self._dim_index(i)
        return self._dynamic[j] and self._dimensions[j] != UNBOUNDED_SIZE

    # -- kind predicates ---------------------------------------------------
    @property
    def is_array(self) -> bool:
        return self._element_type.is_array_type

    @property
    def is_tuple(self) -> bool:
        return self._element_type is P.TUPLE

    @property
    def is_token(self) -> bool:
        return self._element_type is P.TOKEN

    @property
    def is_opaque(self) -> bool:
        return self._element_type is P.OPAQUE_TYPE

    @property
    def is_buffer(self) -> bool:
        return self._element_type is P.BUFFER

    @property
    def is_scalar(self) -> bool:
        return self.is_array and not self._dimensions

    @property
    def is_dynamic(self) -> bool:
        """True if any dimension (recursively, for tuples) is dynamic."""
        if self._element_type in (P.TUPLE, P.BUFFER):
            return any(s.is_dynamic for s in self._tuple_shapes)
        return any(self._dynamic)

    @property
    def is_static(self) -> bool:
        return not self.is_dynamic

    @property
    def is_unbounded_dynamic(self) -> bool:
        if self._element_type in (P.TUPLE, P.BUFFER):
            return any(s.is_unbounded_dynamic for s in self._tuple_shapes)
        return any(d and n == UNBOUNDED_SIZE for d, n in zip(self._dynamic, self._dimensions))

    @property
    def has_layout(self) -> bool:
        """XLA's ``has_layout()``: only arrays (and buffers) can have one."""
        if self._element_type is P.BUFFER:
            return self._tuple_shapes[0].has_layout
        return self._layout is not None

    # -- copies ------------------------------------------------------------
    def with_layout(self, layout: Optional[Layout]) -> "Shape":
        """The same array shape with another layout (``None`` removes it)."""
        if self.is_buffer:
            return Shape.buffer(self._tuple_shapes[0].with_layout(layout))
        if not self.is_array:
            raise InvalidShapeError(f"{self.human_string()} should not have a layout.")
        return Shape(self._element_type, self._dimensions, layout, self._dynamic)

    def map_arrays(self, fn) -> "Shape":
        """A copy with every array shape ``a`` inside replaced by ``fn(a)``,
        recursing through tuples and buffers; tokens and opaque shapes are
        kept as they are.

        >>> str(Shape.tuple([Shape("f32", (2,)), Shape.token()]).map_arrays(
        ...     lambda a: a.replace(element_type="s8")))
        '(s8[2], token[])'
        """
        if self.is_tuple:
            return Shape.tuple([s.map_arrays(fn) for s in self._tuple_shapes])
        if self.is_buffer:
            return Shape.buffer(self._tuple_shapes[0].map_arrays(fn))
        if self.is_array:
            return fn(self)
        return self

    def without_layout(self) -> "Shape":
        """A copy with layouts removed (recursively for tuples)."""
        return self.map_arrays(lambda a: a.with_layout(None))

    def replace(self, **changes) -> "Shape":
        """A copy of an array shape with ``element_type``, ``dimensions``,
        ``layout`` or ``dynamic_dimensions`` changed."""
        if not self.is_array:
            raise InvalidShapeError("replace() works on array shapes")
        fields = {"element_type": self._element_type, "dimensions": self._dimensions,
                  "layout": self._layout, "dynamic_dimensions": self._dynamic}
        unknown = set(changes) - set(fields)
        if unknown:
            raise ShapeTypeError(f"Shape has no field(s) {sorted(unknown)}")
        if "dimensions" in changes and "dynamic_dimensions" not in changes:
            fields["dynamic_dimensions"] = None
        fields.update(changes)
        return Shape(**fields)

    # -- XLA's ShapeProto ----------------------------------------------------
    def to_proto(self) -> bytes:
        """The serialized ``ShapeProto``, byte for byte what XLA's
        ``Shape::ToProto`` serializes (see :mod:`xlashape.shape_proto`).

        >>> Shape("f32", (2, 3), Layout((1, 0))).to_proto().hex()
        '100b1a0202032a070a02010080010132020000'
        """
        from .shape_proto import shape_to_proto

        return shape_to_proto(self).SerializeToString()

    def to_proto_message(self):
        """The :class:`xlashape.protos.ShapeProto` message of :meth:`to_proto`."""
        from .shape_proto import shape_to_proto

        return shape_to_proto(self)

    @classmethod
    def from_proto(cls, data) -> "Shape":
        """A Shape from ``ShapeProto`` bytes (or message); fields xlashape does
        not model are kept (``xlashape.shape_proto.unmodeled_fields``). Bad
        bytes raise :class:`~xlashape.errors.ProtoDecodeError` naming the field.

        >>> str(Shape.from_proto(bytes.fromhex('100b1a0202032a070a02010080010132020000')))
        'f32[2,3]{1,0}'
        """
        from .shape_proto import shape_from_proto

        return shape_from_proto(data)

    def __reduce__(self):
        if self._element_type in (P.TUPLE, P.BUFFER):
            return (_shape_from_parts, (self._element_type, (), None, None, self._tuple_shapes))
        return (_shape_from_parts, (self._element_type, self._dimensions, self._layout,
                                    self._dynamic, None))

    # -- equality (Shape::Equal) -------------------------------------------
    def equal(self, other: "Shape", *, ignore_layout: bool = False,
              ignore_element_type: bool = False, ignore_fp_precision: bool = False,
              ignore_dynamic_dimension: bool = False, ignore_dimensions: bool = False,
              ignore_buffer: bool = False, **layout_options) -> bool:
        """XLA's ``Shape::Equal`` functor with its options.

        ``layout_options`` go to :meth:`Layout.equal` (e.g. ``ignore_tiles=True``).
        Quirks kept from XLA: with ``ignore_dynamic_dimension`` an unbounded
        dimension (``?``) matches any size; ``ignore_fp_precision`` relaxes
        floating-point types only (not complex); buffers are compared with the
        default ``Equal`` whatever the options; ``ignore_dimensions`` still
        requires the same rank.
        """
        if not isinstance(other, Shape):
            raise ShapeTypeError(f"expected a Shape, got {type(other).__name__}")
        a, b = self, other
        if a.is_tuple:
            if not (b.is_tuple and len(a._tuple_shapes) == len(b._tuple_shapes)):
                return False
            opts = dict(ignore_layout=ignore_layout, ignore_element_type=ignore_element_type,
                        ignore_fp_precision=ignore_fp_precision,
                        ignore_dynamic_dimension=ignore_dynamic_dimension,
                        ignore_dimensions=ignore_dimensions, ignore_buffer=ignore_buffer,
                        **layout_options)
            return all(x.equal(y, **opts) for x, y in zip(a._tuple_shapes, b._tuple_shapes))
        if a.is_buffer or b.is_buffer:
            if not ignore_buffer:
                return a.is_buffer and b.is_buffer and a.buffer_shape.equal(b.buffer_shape)
            return (a.buffer_shape if a.is_buffer else a).equal(
                b.buffer_shape if b.is_buffer else b)
        if not a.is_array:
            return a._element_type is b._element_type
        if not b.is_array:
            return False
        if not ignore_element_type:
            ta, tb = a._element_type, b._element_type
            if ignore_fp_precision and ta.is_floating_point and tb.is_floating_point:
                pass
            elif ta is not tb:
                return False
        if len(a._dimensions) != len(b._dimensions):
            return False
        if not ignore_dimensions:
            for i, (x, y) in enumerate(zip(a._dimensions, b._dimensions)):
                if x == y:
                    continue
                if ignore_dynamic_dimension and (
                        (a._dynamic[i] and x == UNBOUNDED_SIZE)
                        or (b._dynamic[i] and y == UNBOUNDED_SIZE)):
                    continue
                return False
        if not ignore_layout and (a._layout is not None or b._layout is not None):
            if a._layout is None or b._layout is None:
                return False
            if not a._layout.equal(b._layout, **layout_options):
                return False
        if not ignore_dynamic_dimension and a._dynamic != b._dynamic:
            return False
        return True

    def __eq__(self, other):
        if not isinstance(other, Shape):
            return NotImplemented
        return self.equal(other)

    def __hash__(self):
        h = self._hash
        if h is None:
            h = hash((self._element_type, self._dimensions, self._dynamic, self._layout,
                      self._tuple_shapes))
            object.__setattr__(self, "_hash", h)
        return h

    # -- trusted construction ------------------------------------------------
    @classmethod
    def _from_parsed(cls, element_type: PrimitiveType, dimensions: tuple, dynamic: tuple,
                     layout: Optional[Layout], tuple_shapes: tuple = (),
                     text: Optional[str] = None) -> "Shape":
        """A Shape from parts the HLO parser has already checked, without the
        constructor's checks: an array (int dims, bool flags of the same
        length, a Layout or None), a token/opaque (all empty), or a tuple
        (``TUPLE`` with ``tuple_shapes``). ``text``, when given, must be
        exactly what ``str()`` would print."""
        shape = object.__new__(cls)
        for setter, value in zip(_SHAPE_SETTERS, (
                element_type, dimensions, dynamic, layout, tuple_shapes, None, text)):
            setter(shape, value)
        return shape

    # -- text --------------------------------------------------------------
    def to_string(self, print_layout: bool = True) -> str:
        """XLA's text for this shape (``PrintHumanString[WithLayout]``)."""
        if print_layout:
            return self.__str__()
        out = []
        _print(self, False, out)
        return "".join(out)

    def human_string(self) -> str:
        """The shape without layouts (``ShapeUtil::HumanString``)."""
        return self.to_string(False)

    def __str__(self) -> str:
        """XLA's text with layouts, computed once (shapes are immutable)."""
        text = self._text
        if text is None:
            out = []
            _print(self, True, out)
            text = "".join(out)
            _set_shape_text(self, text)
        return text

    def __repr__(self) -> str:
        extra = ""
        lay = self._layout
        if lay is not None and (lay.padded_dimensions or lay.padding_value != 0):
            extra = f", layout={lay!r}"
        return f"Shape({str(self)!r}{extra})"



# The slot setters of Shape._from_parsed, in slot order.
_SHAPE_SETTERS = tuple(getattr(Shape, name).__set__ for name in Shape.__slots__)
_set_shape_text = Shape._text.__set__


def _shape_from_parts(et, dims, layout, dyn, tuple_shapes):
    if tuple_shapes is not None:
        return Shape(et, tuple_shapes=tuple_shapes)
    return Shape(et, dims, layout, dyn)


def _print(shape: Shape, print_layout: bool, out: list) -> None:
    et = shape._element_type
    if et is P.TUPLE:
        out.append("(")
        for i, sub in enumerate(shape._tuple_shapes):
            if i:
                out.append(", /*index=%d*/" % i if i % 5 == 0 else ", ")
            if print_layout:
                out.append(sub.__str__())  # the element's own (cached) text
            else:
                _print(sub, False, out)
        out.append(")")
        return
    if et is P.BUFFER:
        out.append("b(")
        _print(shape._tuple_shapes[0], print_layout, out)
        out.append(")")
        return
    dims = shape._dimensions
    if True in shape._dynamic:
        dims = ["?" if d == UNBOUNDED_SIZE else f"<={d}" if dyn else str(d)
                for d, dyn in zip(dims, shape._dynamic)]
    else:
        dims = map(str, dims)
    out.append(f"{et.hlo_name}[{','.join(dims)}]")
    if print_layout and shape._layout is not None and et.is_array_type:
        text = shape._layout.__str__()
        if shape._dimensions or text != "{}":
            out.append(text)
