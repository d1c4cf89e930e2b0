"""Small private helpers every xlashape module may use (the bottom layer).

The integer limits of XLA's int64 fields (from :mod:`xlashape.limits`), argument checks with one wording
each (``as_int``, ``int_tuple``, ``check_index``), the immutability mixin of
the metadata classes, and the bits an element takes in memory. Nothing here
knows about shapes beyond reading their attributes, so every module can
import it without an import cycle.
"""

from __future__ import annotations

import numbers
from typing import Iterable

from .errors import ShapeIndexError, ShapeTypeError

from .limits import INT64_MAX, INT64_MIN, UINT64_MAX  # noqa: F401 - the package's names for them


def as_int(value, what: str) -> int:
    """``value`` as a Python int; bools and non-integers are a ShapeTypeError."""
    if type(value) is int:  # the common case, without the ABC machinery
        return value
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise ShapeTypeError(f"{what} must be an int, got {type(value).__name__} {value!r}")
    return int(value)


def int_tuple(values, what: str) -> tuple:
    """A sequence of ints as a tuple (each entry checked with :func:`as_int`)."""
    if type(values) is not tuple:
        if type(values) is not list and (
                isinstance(values, (str, bytes)) or not isinstance(values, Iterable)):
            raise ShapeTypeError(
                f"{what} must be a sequence of ints, got {type(values).__name__}")
        values = tuple(values)
    for v in values:
        if type(v) is not int:
            return tuple(as_int(v, f"{what} entry") for v in values)
    return values


def int_list(values, what: str) -> list:
    """Like :func:`int_tuple`, as a new list."""
    return list(int_tuple(values, what))


def check_index(index, shape, what: str = "index", scalar_ok: bool = False) -> tuple:
    """A logical index into the array ``shape``, checked: a sequence of ints
    (a bare int too for a rank-1 shape when ``scalar_ok``), one entry per
    dimension, each in ``0 <= i < size``. Returns it as a tuple of ints.

    Errors: ShapeTypeError for a non-sequence or a non-int entry,
    ShapeIndexError for the wrong length or an entry out of bounds
    (``index 7 is out of bounds for axis 1 with size 4``).
    """
    if scalar_ok and isinstance(index, numbers.Integral) and not isinstance(index, bool):
        index = (index,)
    if isinstance(index, (str, bytes)) or not isinstance(index, Iterable):
        raise ShapeTypeError(f"{what} must be a sequence of ints, got {type(index).__name__}")
    idx = tuple(index)
    for axis, i in enumerate(idx):
        if type(i) is not int:
            if isinstance(i, bool) or not isinstance(i, numbers.Integral):
                raise ShapeTypeError(f"{what} entry must be an int, got {type(i).__name__} "
                                     f"{i!r} at axis {axis}")
            idx = tuple(int(x) for x in idx)
            break
    dims = shape.dimensions
    if len(idx) != len(dims):
        raise ShapeIndexError(
            f"{what} {list(idx)} has {len(idx)} entries but the shape "
            f"{shape.human_string()} has {len(dims)} dimensions")
    for axis, (i, size) in enumerate(zip(idx, dims)):
        if not 0 <= i < size:
            raise ShapeIndexError(f"index {i} is out of bounds for axis {axis} with size {size}")
    return idx


def element_bits(element_type, layout) -> int:
    """Bits one element takes in memory: the layout's ``E(n)`` when set and
    non-zero, else the type's byte width times 8 (XLA's ``ElementSizeInBits``;
    8 for PRED and the sub-byte types without ``E(n)``)."""
    if layout is not None and layout.element_size_in_bits:
        return layout.element_size_in_bits
    return element_type.byte_width * 8


class Frozen:
    """Mixin of the immutable metadata classes (Tile, SplitConfig, Layout,
    Shape): attributes are set once, in the constructor, through
    ``object.__setattr__``."""

    __slots__ = ()

    def __setattr__(self, name, value):
        raise AttributeError(f"{type(self).__name__} is immutable; use replace()")

    def __delattr__(self, name):
        raise AttributeError(f"{type(self).__name__} is immutable")
