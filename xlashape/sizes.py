"""One size model: the bytes XLA allocates for a buffer, from its shape.

Every reader, the memory accounting and the ``xlashape hlo`` command size
shapes here, so two views of one buffer cannot disagree:

- :func:`buffer_size`: one buffer as XLA allocates it. An array takes its
  tiled size with all padding (:func:`xlashape.tiling.physical_size_in_bytes`),
  a tuple the table of pointers XLA keeps for it (:func:`tuple_table_size`; its
  elements are buffers of their own), a token nothing.
- :func:`unpadded_size`: the same without layout padding (XLA's
  ``ShapeUtil::ByteSizeOf``, "Unpadded size" in a TPU out-of-memory report); a
  tuple's table is never padding, so it keeps its size.
- :func:`logical_size`: what XLA's ``peak_unpadded_heap_bytes`` counts for a
  buffer: ``ByteSizeOf`` with 8-byte pointers (a tuple's table: 8 bytes an
  element, whatever the chip).
- :func:`memory_footprint`: a value's arrays summed, per memory space (the
  ``hlo`` command's per-instruction sizes).

A tuple's table depends on the chip (4 bytes an element on TPU, rounded up to
512-byte granules on v4/v5e and 32-byte ones on v5p/v6e; 8 bytes an element
elsewhere): :class:`Chip` is that one fact about a TPU generation, made by
:func:`chip_of` from a name (through :func:`xlashape.devices.tpu_generation`,
the one table of names) or from the granule a buffer assignment shows.

>>> buffer_size("f32[8,1,1024]{1,2,0:T(8,128)}"), unpadded_size("f32[8,1,1024]{1,2,0:T(8,128)}")
(4194304, 32768)
>>> tuple_table_size(2), tuple_table_size(12, chip="v6e"), tuple_table_size(2, "cpu")
(512, 64, 16)
"""

from __future__ import annotations

import functools
from typing import Dict, Iterator, NamedTuple, Optional, Tuple, Union

from .devices import tpu_generation, TPU_GENERATIONS
from .errors import ShapeValueError, XlaShapeError
from .hlo_text import parse_shape
from .shape import Shape
from .shape_util import byte_size_of
from .tiling import physical_size_in_bytes

__all__ = ["HOST_MEMORY_SPACE", "Chip", "chip_of", "normalize_chip", "tuple_table_size",
           "buffer_size", "unpadded_size", "logical_size", "memory_space_of", "buffers_of",
           "SizeCache", "Footprint", "memory_footprint", "shape_text"]

#: XLA's ``Layout::kHostMemorySpace``: buffers in ``S(5)`` live in host memory
#: and count in the ``host_*`` figures (but on XLA:CPU, which counts them as
#: device memory).
HOST_MEMORY_SPACE = 5

_TPU = "tpu"

#: generations whose tuple tables are rounded up to 32 bytes (else 512), as
#: ``memory_analysis()`` shows: v5p and v6e (v4 and v5e round to 512)
_SMALL_TABLE_CHIPS = ("v5p", "v6e")


class Chip(NamedTuple):
    """What the size model needs to know of a TPU generation: its ``name``
    (``v5e``, ...; ``None`` when only the granule is known, from a buffer
    assignment's tuple table) and ``table_granule``, the bytes a tuple's table
    of pointers is rounded up to (512 or 32)."""

    name: Optional[str]
    table_granule: int

    @property
    def label(self) -> str:
        """How a sentence names it: the generation, else the granule's chips."""
        if self.name is not None:
            return self.name
        return "TPU v4/v5e" if self.table_granule == 512 else "TPU v5p/v6e"


ChipLike = Union[None, str, int, Chip]


def chip_of(chip: ChipLike) -> Optional[Chip]:
    """The :class:`Chip` for ``chip``: a generation's name in any spelling
    :func:`xlashape.devices.tpu_generation` reads (``v5e``, ``v6e:2x2``,
    ``TPU v5 lite``), a granule (512 or 32) as a buffer assignment shows it,
    a :class:`Chip`, or ``None`` (unknown: ``None``). Raises
    :class:`~xlashape.ShapeValueError` for a name that is no TPU generation.

    >>> chip_of("TPU v5 lite"), chip_of("v6e:2x2").table_granule, chip_of(32).label
    (Chip(name='v5e', table_granule=512), 32, 'TPU v5p/v6e')
    """
    if chip is None or isinstance(chip, Chip):
        return chip
    if isinstance(chip, int) and not isinstance(chip, bool):
        if chip not in (512, 32):
            raise ShapeValueError(f"a tuple-table granule is 512 or 32 bytes, not {chip}")
        return Chip(None, chip)
    name = tpu_generation(chip)
    if name is None:
        raise ShapeValueError(f"unknown TPU chip {chip!r}: expected one of "
                              f"{', '.join(TPU_GENERATIONS)}, a topology such as v6e:2x2, or "
                              "jax's device_kind (e.g. 'TPU v5 lite')")
    return Chip(name, 32 if name in _SMALL_TABLE_CHIPS else 512)


def normalize_chip(chip) -> Optional[str]:
    """The generation's short name (``v5e``...) for any spelling of it;
    ``None`` stays ``None`` (:func:`chip_of`'s name).

    >>> normalize_chip("v6e:2x2"), normalize_chip("TPU v5 lite"), normalize_chip("V5P")
    ('v6e', 'v5e', 'v5p')
    """
    c = chip_of(chip)
    return None if c is None else c.name


def tuple_table_size(count: int, platform: Optional[str] = _TPU, chip: ChipLike = None) -> int:
    """Bytes of the table of pointers XLA keeps for a tuple of ``count``
    elements: on TPU 4 bytes per element, rounded up to a multiple of 512 on
    v4 and v5e (512 bytes for 2 to 128 elements, 1024 for 129 to 256) and of
    32 on v5p and v6e (``chip``; unknown: 512), as ``memory_analysis()`` and
    the out-of-memory reports show; elsewhere one 8-byte pointer per element.

    >>> tuple_table_size(2), tuple_table_size(129), tuple_table_size(12, chip="v6e"), tuple_table_size(2, "cpu")
    (512, 1024, 64, 16)
    """
    if count <= 0:
        return 0
    if platform == _TPU:
        c = chip_of(chip)
        g = 512 if c is None else c.table_granule
        return -(-4 * count // g) * g
    return 8 * count


def _one_buffer(shape) -> Shape:
    return parse_shape(shape) if isinstance(shape, str) else shape


def buffer_size(shape, platform: Optional[str] = _TPU, chip: ChipLike = None) -> Optional[int]:
    """Bytes of one buffer of ``shape``, as XLA allocates it (see the module
    docstring). ``None`` when the size is unknown (an unbounded ``?``
    dimension).

    >>> buffer_size("f32[8,1,1024]{1,2,0:T(8,128)}"), buffer_size("(f32[2]{0}, s32[])")
    (4194304, 512)
    """
    shape = _one_buffer(shape)
    if shape.is_tuple:
        return tuple_table_size(len(shape.tuple_shapes), platform, chip)
    if shape.is_buffer:
        shape = shape.buffer_shape
    if not shape.is_array:
        return 0
    if shape.is_unbounded_dynamic:
        return None
    return physical_size_in_bytes(shape)


def unpadded_size(shape, platform: Optional[str] = _TPU, chip: ChipLike = None) -> Optional[int]:
    """Bytes of one buffer of ``shape`` without padding: an array's logical
    bytes (XLA's ``ShapeUtil::ByteSizeOf``, "Unpadded size" in the
    out-of-memory report), a tuple's table (never padding)."""
    shape = _one_buffer(shape)
    if shape.is_tuple:
        return tuple_table_size(len(shape.tuple_shapes), platform, chip)
    if shape.is_buffer:
        shape = shape.buffer_shape
    if not shape.is_array:
        return 0
    if shape.is_unbounded_dynamic:
        return None
    return byte_size_of(shape)


def logical_size(shape, allocated: int) -> int:
    """What XLA's ``peak_unpadded_heap_bytes`` counts for a buffer of
    ``shape`` that takes ``allocated`` bytes: ``ByteSizeOf`` with 8-byte
    pointers (a tuple's table: 8 bytes an element), never more than the
    buffer; ``allocated`` when the shape is unknown or cannot be sized."""
    if shape is None:
        return allocated
    try:
        shape = _one_buffer(shape)
        if shape.is_tuple:
            return 8 * len(shape.tuple_shapes)
        got = unpadded_size(shape)
    except XlaShapeError:
        return allocated
    return allocated if got is None else min(got, allocated)


def memory_space_of(shape: Shape) -> int:
    """The memory space ``S(n)`` of an array (or buffer) shape; 0 without one."""
    if shape.is_buffer:
        shape = shape.buffer_shape
    lay = shape.layout if shape.is_array else None
    return lay.memory_space if lay is not None else 0


def buffers_of(shape: Shape, index: Tuple[int, ...] = ()) -> Iterator[Tuple[Tuple[int, ...], Shape]]:
    """``(index, shape)`` of every buffer a value of ``shape`` has: a tuple's
    table first, then each element's buffers; tokens have none."""
    if shape.is_tuple:
        yield index, shape
        for i, sub in enumerate(shape.tuple_shapes):
            yield from buffers_of(sub, index + (i,))
    elif shape.is_token:
        return
    else:
        yield index, shape


Sizes = Tuple[Optional[int], Optional[int], Optional[str]]


class SizeCache:
    """``(size, unpadded size, problem)`` of buffers, remembered: per Shape
    object (:meth:`of`: a reader hands out one object per distinct shape text)
    or per shape text (:meth:`of_text`: a buffer assignment parses each value's
    shape anew, and keeping those objects alive would hold memory in
    proportion to the file). ``problem`` is why the sizes are ``None`` (a
    layout xlashape cannot size). Bounded: cleared past 65,536 entries."""

    LIMIT = 1 << 16

    def __init__(self):
        self._by_object: Dict[tuple, tuple] = {}
        self._by_value: Dict[tuple, Sizes] = {}
        self._by_text: Dict[tuple, Sizes] = {}

    @staticmethod
    def _compute(shape: Shape, platform, chip) -> Sizes:
        try:
            return buffer_size(shape, platform, chip), unpadded_size(shape, platform, chip), None
        except XlaShapeError as e:
            return None, None, str(e).splitlines()[0]

    def of(self, shape: Shape, platform, chip=None) -> Sizes:
        key = (id(shape), platform, chip)
        hit = self._by_object.get(key)
        if hit is not None and hit[0] is shape:
            return hit[1]
        # another object of an equal shape (e.g. the entry layout's parameters)
        vkey = (shape, platform, chip)
        value = self._by_value.get(vkey)
        if value is None:
            value = self._compute(shape, platform, chip)
            if len(self._by_value) > self.LIMIT:
                self._by_value.clear()
            self._by_value[vkey] = value
        if len(self._by_object) > self.LIMIT:
            self._by_object.clear()
        self._by_object[key] = (shape, value)
        return value

    def of_text(self, text: str, shape: Shape, platform, chip=None) -> Sizes:
        key = (text, platform, chip)
        hit = self._by_text.get(key)
        if hit is not None:
            return hit
        value = self._compute(shape, platform, chip)
        if len(self._by_text) > self.LIMIT:
            self._by_text.clear()
        self._by_text[key] = value
        return value


# -- per-object memos ----------------------------------------------------------------

_TEXTS: Dict[int, tuple] = {}
_FOOTPRINTS: Dict[int, tuple] = {}


def _per_object(cache: dict, shape: Shape, compute):
    """``compute(shape)``, remembered per Shape *object*. The readers hand out
    one Shape object per distinct shape text, so an identity lookup answers
    almost every call without hashing or comparing shapes. The entry keeps
    the shape alive, so its id cannot be reused while it is cached."""
    hit = cache.get(id(shape))
    if hit is not None and hit[0] is shape:
        return hit[1]
    value = compute(shape)
    if len(cache) >= 1 << 16:
        cache.clear()
    cache[id(shape)] = (shape, value)
    return value


def shape_text(shape: Shape) -> str:
    """``str(shape)`` (XLA's canonical text), remembered per Shape object:
    a dump prints the same few thousand shapes hundreds of thousands of times."""
    return _per_object(_TEXTS, shape, str)


class Footprint(NamedTuple):
    """Memory of a value: logical bytes (``ShapeUtil::ByteSizeOf`` summed over
    the arrays in it), bytes with all tiling padding
    (:func:`xlashape.tiling.physical_size_in_bytes`), the memory space (``None``
    when the arrays disagree or there are none), the same split per memory space
    as ``((space, bytes, padded_bytes), ...)``, and ``problem``: why the sizes
    are ``None`` (an unbounded ``?`` dimension, an invalid layout)."""

    bytes: Optional[int]
    padded_bytes: Optional[int]
    memory_space: Optional[int]
    by_space: tuple
    problem: Optional[str] = None


def _leaves(shape: Shape, out: list) -> list:
    if shape.is_tuple:
        for s in shape.tuple_shapes:
            _leaves(s, out)
    elif shape.is_buffer:
        out.append(shape.buffer_shape)
    elif shape.is_array:
        out.append(shape)
    return out


def memory_footprint(shape: Shape) -> Footprint:
    """Logical and padded bytes of a value's shape, per memory space.

    Tuples count the arrays in them (not the pointer table XLA keeps for a
    tuple); tokens and opaque values take nothing.

    >>> from xlashape import parse_shape
    >>> memory_footprint(parse_shape("(f32[3,5]{1,0:T(2,2)}, s32[]{:S(1)}, token[])"))
    Footprint(bytes=64, padded_bytes=100, memory_space=None, by_space=((0, 60, 96), (1, 4, 4)), problem=None)
    """
    return _per_object(_FOOTPRINTS, shape, _footprint)


def _clear_footprints() -> None:
    """Forget cached footprints (for benchmarks)."""
    _FOOTPRINTS.clear()
    _footprint.cache_clear()


memory_footprint.cache_clear = _clear_footprints


@functools.lru_cache(maxsize=1 << 14)
def _footprint(shape: Shape) -> Footprint:
    spaces: Dict[int, list] = {}
    total = padded = 0
    for leaf in _leaves(shape, []):
        space = memory_space_of(leaf)
        if leaf.is_unbounded_dynamic:
            return Footprint(None, None, space, (),
                             f"{leaf} has an unbounded dimension ('?'): its size is unknown")
        try:
            b = unpadded_size(leaf)
            p = buffer_size(leaf)
        except XlaShapeError as e:
            return Footprint(None, None, space, (), str(e).splitlines()[0])
        acc = spaces.setdefault(space, [0, 0])
        acc[0] += b
        acc[1] += p
        total += b
        padded += p
    by_space = tuple((sp, v[0], v[1]) for sp, v in sorted(spaces.items()))
    space = by_space[0][0] if len(by_space) == 1 else None
    return Footprint(total, padded, space, by_space)
