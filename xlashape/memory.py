"""XLA's memory accounting, from what XLA writes.

:func:`analyze` takes an HLO module (text or file), an XLA dump directory, a
TPU out-of-memory report, or a JAX compiled object, and returns the figures
XLA reports for it, computed the way XLA computes them:

- from HLO text alone, the ``CompiledMemoryStats`` figures the text
  determines: ``argument_size_in_bytes`` (the entry parameters' buffers in
  device memory), ``output_size_in_bytes`` (the result's buffers, a tuple's
  table of pointers included), ``alias_size_in_bytes`` (the parameter
  buffers ``input_output_alias`` lets outputs reuse) and
  ``host_argument_size_in_bytes`` / ``host_output_size_in_bytes`` (buffers in
  host memory, ``S(5)``). Each buffer takes the bytes of its tiled layout
  (:func:`buffer_size`);
- from a dump directory, in addition, every allocation of XLA's buffer
  assignment with its padded and unpadded bytes and the values in it,
  ``temp_size_in_bytes`` as the buffer assignment gives it (the
  ``preallocated-temp`` allocations) on CPU and GPU -- on TPU it is ``None``:
  libtpu's allocator decides it after the buffer assignment; the device-memory
  (color 0) temporaries are ``hbm_temp_allocation_bytes`` there --, totals
  per memory space, the peak and what is live at it (:mod:`xlashape.peak`,
  in :attr:`ModuleMemory.peak`), and a warning for any value whose size
  differs from xlashape's size of its shape;
- from an out-of-memory report, the limit, the excess, the listed
  allocations, and whether the program would fit without padding.

Every allocation with padding says why (:func:`xlashape.padding.padding_report`:
which dimension and tile level) and what would make it smaller.

>>> m = analyze('''HloModule jit_f, input_output_alias={ {0}: (0, {}, may-alias) }, entry_computation_layout={(f32[8,1,1024]{1,2,0:T(8,128)}, f32[]{:T(128)})->(f32[8,1,1024]{1,2,0:T(8,128)}, s32[]{:T(128)})}
... ENTRY %main (p: f32[8,1,1024], q: f32[]) -> (f32[8,1,1024], s32[]) {
...   %p = f32[8,1,1024]{1,2,0:T(8,128)} parameter(0)
...   %q = f32[]{:T(128)} parameter(1)
...   %c = s32[]{:T(128)} constant(1)
...   ROOT %t = (f32[8,1,1024]{1,2,0:T(8,128)}, s32[]{:T(128)}) tuple(%p, %c)
... }''').modules[0]
>>> m.argument_size_in_bytes, m.output_size_in_bytes, m.alias_size_in_bytes
(4194816, 4195328, 4194304)
>>> [(a.kind, a.size_in_bytes, a.unpadded_size_in_bytes) for a in m.allocations]
[('parameter', 4194304, 32768), ('parameter', 512, 4), ('output', 512, 512), ('output', 512, 4)]

(Dimension 1, of size 1, is tiled by 128 in ``T(8,128)``: the parameter
takes 128 times its 32K. The output reuses it, as ``input_output_alias``
says; the tuple's table of two pointers takes 512 bytes on TPU.)
"""

from __future__ import annotations

import heapq
import io
import os
import pathlib
import re
from typing import Callable, Dict, Iterable, Iterator, List, NamedTuple, Optional, Tuple

from ._files import open_gzip
from .errors import (HloParseError, ProtoDecodeError, ShapeTypeError, ShapeValueError,
                     UnreadableInputError, XlaShapeError)
from .hlo_module import (
    EntryBlocks,
    HloReader,
    HloWarning,
    WarningList,
    _clip,
    open_text,
    parse_entry_computation_layout,
    parse_input_output_alias,
    check_regular_file,
    shape_text,
    source_kind,
)
from .hlo_text import parse_shape
from .oom_report import BREAKDOWN_HINT, looks_like_oom_report, read_oom_reports
from .oom_report import parse_size as _parse_report_size
from .shape_util import byte_size_of
from .padding import advice
from .tiling import format_bytes, physical_size_in_bytes
from .xla_dump import (BufferAllocation, BufferValue, DumpModule, DumpWarning, MemorySpaceUsage,
                       _number, _unreadable, find_dump_modules, iter_buffer_assignment,
                       read_memory_usage_report)
from .hlo_proto import module_from_proto
from .layout import memory_space_name
from .oom_report import buffers_of_request, distinct_reports
from .padding import origin_of, padding_summary, summarize_padding
from .devices import TPU_ALIASES
from . import protos
from .live_range import read_live_ranges, read_locations, read_value_operands
from .peak import PEAK_FIELDS, PeakAnalysis, PeakBuilder, add_locations, peak_from_hlo_proto
from .shape import Shape

__all__ = [
    "analyze",
    "MemoryAnalysis",
    "ModuleMemory",
    "Allocation",
    "ValueInfo",
    "PaddingExplanation",
    "OomSummary",
    "buffer_size",
    "unpadded_size",
    "tuple_table_size",
    "normalize_chip",
    "explain_padding",
    "HOST_MEMORY_SPACE",
    "EXAMPLE_DUMP",
]

#: XLA's ``Layout::kHostMemorySpace``: buffers in ``S(5)`` live in host memory
#: and count in the ``host_*`` figures.
HOST_MEMORY_SPACE = 5

#: A small real XLA:TPU dump directory shipped with xlashape (the first layer
#: of a convolutional network; ``xlashape memory --example`` reads it).
EXAMPLE_DUMP = os.path.join(os.path.dirname(os.path.abspath(__file__)), "examples", "tpu_dump")

_TPU = "tpu"
#: the platforms whose counting rules xlashape knows
PLATFORMS = ("cpu", "gpu", "tpu")


# -- sizes ---------------------------------------------------------------------


#: Chips whose tuple tables are rounded up to 32 bytes (else 512), as
#: ``memory_analysis()`` shows: v5p and v6e (v4 and v5e round to 512).
_SMALL_TABLE_CHIPS = ("v5p", "v6e")
_CHIP_NAMES = TPU_ALIASES  # one table of names: xlashape.devices


#: one name per memory space, in every command and view (``S(n)``)
SPACE_LABELS = {0: "device memory", 1: "VMEM (fast on-chip memory)", 2: "SMEM (scalar memory)",
                5: "host memory"}


def space_label(color: int, reported: Optional[str] = None) -> str:
    """The name of memory space ``S(color)`` (one table for every view), with
    the name XLA's memory-usage report gives it when that differs (XLA:TPU
    calls host memory ``cmem``)."""
    base = SPACE_LABELS.get(color) or (reported if reported and reported != "default"
                                       else f"memory space {color}")
    if reported and reported != "default" and reported.lower() not in base.lower():
        return f"{base}, '{reported}' in XLA's report"
    return base


def normalize_chip(chip: Optional[str]) -> Optional[str]:
    """A TPU generation as ``v4``, ``v5e``, ``v5p``, ``v6e``...: accepts a
    topology name (``v5e:2x2``), a JAX device kind (``TPU v5 lite``) or the
    short name; ``None`` stays ``None``.

    >>> normalize_chip("v6e:2x2"), normalize_chip("TPU v5 lite"), normalize_chip("V5P")
    ('v6e', 'v5e', 'v5p')
    """
    if chip is None:
        return None
    c = str(chip).strip().lower()
    if c in _CHIP_NAMES:
        return _CHIP_NAMES[c]
    c = c.split(":")[0].replace("tpu", "").strip()
    if c in ("v5lite", "v5litepod"):
        return "v5e"
    return c or None


def _table_granule(chip) -> int:
    if isinstance(chip, int):
        return chip
    return 32 if normalize_chip(chip) in _SMALL_TABLE_CHIPS else 512


def tuple_table_size(count: int, platform: Optional[str] = _TPU, chip=None) -> int:
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
        g = _table_granule(chip)
        return -(-4 * count // g) * g
    return 8 * count


def buffer_size(shape, platform: Optional[str] = _TPU, chip=None) -> Optional[int]:
    """Bytes of one buffer of ``shape``, as XLA allocates it: an array takes
    its tiled size with all padding (:func:`xlashape.tiling.physical_size_in_bytes`),
    a tuple its table of pointers (:func:`tuple_table_size`; its elements are
    buffers of their own), a token nothing. ``None`` when the size is unknown
    (an unbounded ``?`` dimension).

    >>> buffer_size("f32[8,1,1024]{1,2,0:T(8,128)}"), buffer_size("(f32[2]{0}, s32[])")
    (4194304, 512)
    """

    if isinstance(shape, str):

        shape = parse_shape(shape)
    if shape.is_tuple:
        return tuple_table_size(len(shape.tuple_shapes), platform, chip)
    if shape.is_buffer:
        shape = shape.buffer_shape
    if not shape.is_array:
        return 0
    if shape.is_unbounded_dynamic:
        return None
    return physical_size_in_bytes(shape)


def unpadded_size(shape, platform: Optional[str] = _TPU, chip=None) -> Optional[int]:
    """Bytes of one buffer of ``shape`` without padding: an array's logical
    bytes (XLA's ``ShapeUtil::ByteSizeOf``, "Unpadded size" in the
    out-of-memory report), a tuple's table (never padded)."""

    if isinstance(shape, str):

        shape = parse_shape(shape)
    if shape.is_tuple:
        return tuple_table_size(len(shape.tuple_shapes), platform, chip)
    if shape.is_buffer:
        shape = shape.buffer_shape
    if not shape.is_array:
        return 0
    if shape.is_unbounded_dynamic:
        return None
    return byte_size_of(shape)


def _space(shape: Shape) -> int:
    if shape.is_buffer:
        shape = shape.buffer_shape
    lay = shape.layout if shape.is_array else None
    return lay.memory_space if lay is not None else 0


def _buffers(shape: Shape, index: Tuple[int, ...] = ()) -> Iterator[Tuple[Tuple[int, ...], Shape]]:
    """``(index, shape)`` of every buffer a value of ``shape`` has: a tuple's
    table first, then each element's buffers; tokens have none."""
    if shape.is_tuple:
        yield index, shape
        for i, sub in enumerate(shape.tuple_shapes):
            yield from _buffers(sub, index + (i,))
    elif shape.is_token:
        return
    else:
        yield index, shape


def _sizes_by_text(cache: dict, text: str, shape: Shape, platform, chip=None
                   ) -> Tuple[Optional[int], Optional[int], Optional[str]]:
    """:func:`_sizes_cached` keyed by the shape's text: a buffer assignment
    parses every value's shape anew, and keeping those objects alive in the
    cache would hold memory in proportion to the file."""
    key = (text, platform, chip)
    hit = cache.get(key)
    if hit is not None:
        return hit
    try:
        value = (buffer_size(shape, platform, chip), unpadded_size(shape, platform, chip), None)
    except XlaShapeError as e:
        value = (None, None, str(e).splitlines()[0])
    if len(cache) > 1 << 16:
        cache.clear()
    cache[key] = value
    return value


def _sizes_cached(cache: dict, shape: Shape, platform, chip=None
                  ) -> Tuple[Optional[int], Optional[int], Optional[str]]:
    key = (id(shape), platform, chip)
    hit = cache.get(key)
    if hit is not None and hit[0] is shape:
        return hit[1]
    try:
        value = (buffer_size(shape, platform, chip), unpadded_size(shape, platform, chip), None)
    except XlaShapeError as e:
        value = (None, None, str(e).splitlines()[0])
    if len(cache) > 1 << 16:
        cache.clear()
    cache[key] = (shape, value)
    return value


# -- padding explanations --------------------------------------------------------


class PaddingExplanation(NamedTuple):
    """Why a buffer is padded and what would make it smaller: ``sources``
    (one sentence per padding source, largest first) and ``fixes`` (layouts
    or reshapes that would really be smaller, each with the size it would
    take), from :func:`xlashape.padding.padding_report`."""

    sources: Tuple[str, ...]
    fixes: Tuple[str, ...]
    note: Optional[str] = None
    origin: Optional[str] = None


_EXPLAINED: Dict[tuple, Optional[PaddingExplanation]] = {}


def explain_padding(shape, origin: Optional[str] = None) -> Optional[PaddingExplanation]:
    """:class:`PaddingExplanation` for an array shape with padding, else
    ``None`` (no padding, not an array, or a layout xlashape cannot plan).
    ``origin`` (see :data:`xlashape.padding.ORIGINS`) decides the fixes: none
    for a compiler scratch buffer, the default layout first for a requested
    one (:func:`xlashape.padding.advice`)."""

    key = (shape if isinstance(shape, str) else shape_text(shape), origin)
    if key in _EXPLAINED:
        return _EXPLAINED[key]
    result = None
    try:
        if isinstance(shape, str):

            shape = parse_shape(shape)
        if shape.is_buffer:
            shape = shape.buffer_shape
        if shape.is_array and not shape.is_unbounded_dynamic:
            adv = advice(shape, origin=origin)
            if adv is not None:
                result = PaddingExplanation(adv.sources, tuple(str(f) for f in adv.fixes),
                                            adv.note, origin)
    except XlaShapeError:
        result = None
    if len(_EXPLAINED) > 1 << 14:
        _EXPLAINED.clear()
    _EXPLAINED[key] = result
    return result


# -- results ---------------------------------------------------------------------


class ValueInfo(NamedTuple):
    """A value held by an allocation: ``name`` (the instruction; ``label``
    adds the ``{index}`` into its result when not the whole of it), its
    ``size_in_bytes`` and ``offset`` in the allocation (``None`` when not
    known), its ``shape`` text and ``unpadded_size_in_bytes``."""

    name: str
    label: str
    size_in_bytes: Optional[int]
    offset: Optional[int]
    shape: Optional[str]
    unpadded_size_in_bytes: Optional[int]

    @property
    def padding_in_bytes(self) -> int:
        if self.size_in_bytes is None or self.unpadded_size_in_bytes is None:
            return 0
        return max(0, self.size_in_bytes - self.unpadded_size_in_bytes)


class Allocation:
    """One allocation: ``kind`` (``parameter``, ``output``, ``temp``,
    ``thread-local``, ``constant``; from an out-of-memory report also what
    the report calls it), ``size_in_bytes`` (padding included),
    ``unpadded_size_in_bytes``, ``memory_space`` (``S(n)``; XLA's colour in
    a buffer assignment), ``shape`` (as XLA prints it: the buffer's shape,
    or for an allocation holding several values the largest one's), and
    ``values`` (the names of the instructions whose values it holds).

    Also: ``index`` (XLA's allocation number, or the rank in an
    out-of-memory report), ``maybe_live_out`` (it may hold an output),
    ``parameter_number`` / ``parameter_index`` (an entry parameter's
    buffer), ``output_index`` (an output buffer read from HLO text),
    ``value_details`` (:class:`ValueInfo` per value), ``label`` /
    ``allocation_type`` / ``op_name`` (from an out-of-memory report),
    ``size_text`` (the size as a report prints it) and :meth:`explanation`.
    """

    __slots__ = ("kind", "size_in_bytes", "unpadded_size_in_bytes", "memory_space", "shape",
                 "values", "index", "maybe_live_out", "parameter_number", "parameter_index",
                 "output_index", "value_details", "label", "allocation_type", "op_name",
                 "size_text", "_shape_obj")

    def __init__(self, kind: str, size_in_bytes: Optional[int], unpadded_size_in_bytes: Optional[int],
                 memory_space: int, shape: Optional[str], values=(), *, index=None,
                 maybe_live_out=False, parameter_number=None, parameter_index=None,
                 output_index=None, value_details=(), label=None, allocation_type=None,
                 op_name=None, size_text=None, shape_obj=None):
        self.kind = kind
        self.size_in_bytes = size_in_bytes
        self.unpadded_size_in_bytes = unpadded_size_in_bytes
        self.memory_space = memory_space
        self.shape = shape
        self.values = list(values)
        self.index = index
        self.maybe_live_out = maybe_live_out
        self.parameter_number = parameter_number
        self.parameter_index = parameter_index
        self.output_index = output_index
        self.value_details = list(value_details)
        self.label = label
        self.allocation_type = allocation_type
        self.op_name = op_name
        self.size_text = size_text
        self._shape_obj = shape_obj

    @property
    def padding_in_bytes(self) -> int:
        """Bytes lost to padding (``size - unpadded size``; 0 when unknown)."""
        if self.size_in_bytes is None or self.unpadded_size_in_bytes is None:
            return 0
        return max(0, self.size_in_bytes - self.unpadded_size_in_bytes)

    def explanation(self) -> Optional[PaddingExplanation]:
        """Why it is padded and what would fix it, for an allocation whose
        padding comes from one array shape (its own, or the most padded
        value in it); ``None`` without padding."""
        if self.padding_in_bytes <= 0:
            return None
        shape = self.padded_shape()
        if shape is None:
            return None
        own = shape == self.shape
        return explain_padding(shape, origin_of(shape, kind=self.kind if own else "temp",
                                                memory_space=self.memory_space, platform=None))

    def padded_shape(self) -> Optional[str]:
        """The shape whose padding the allocation carries: its own for a
        single buffer, else the value with the most padding."""
        if self.value_details:
            best = max(self.value_details, key=lambda v: v.padding_in_bytes)
            if best.padding_in_bytes > 0 and best.shape:
                return best.shape
        return self.shape

    def to_json(self, explain: bool = True) -> dict:
        d = {
            "kind": self.kind,
            "size_in_bytes": self.size_in_bytes,
            "unpadded_size_in_bytes": self.unpadded_size_in_bytes,
            "memory_space": self.memory_space,
            "shape": self.shape,
            "values": list(self.values),
        }
        if self.index is not None:
            d["index"] = self.index
        d["padding_in_bytes"] = self.padding_in_bytes
        d["maybe_live_out"] = bool(self.maybe_live_out)
        if self.parameter_number is not None:
            d["parameter_number"] = self.parameter_number
            d["parameter_index"] = list(self.parameter_index or ())
        if self.output_index is not None:
            d["output_index"] = list(self.output_index)
        for key in ("label", "allocation_type", "op_name", "size_text"):
            v = getattr(self, key)
            if v is not None:
                d[key] = v
        if self.value_details:
            d["value_details"] = [
                {"name": v.name, "label": v.label, "size_in_bytes": v.size_in_bytes,
                 "offset": v.offset, "shape": v.shape,
                 "unpadded_size_in_bytes": v.unpadded_size_in_bytes}
                for v in self.value_details]
        if explain:
            e = self.explanation()
            if e is not None:
                d["padding"] = {"shape": self.padded_shape(), "sources": list(e.sources),
                                "fixes": list(e.fixes), "origin": e.origin, "note": e.note}
        return d

    def __repr__(self):
        return (f"<Allocation {self.kind} {self.size_in_bytes} bytes "
                f"(unpadded {self.unpadded_size_in_bytes}) S({self.memory_space}) {self.shape}>")


class SpaceTotals:
    """Bytes of one memory space, by what they hold."""

    __slots__ = ("memory_space", "name", "arguments", "outputs", "aliased", "temporaries",
                 "thread_local", "constants", "other", "total", "padding", "reported_total")

    def __init__(self, memory_space: int, name: Optional[str] = None):
        self.memory_space = memory_space
        self.name = name or memory_space_name(memory_space)
        self.arguments = self.outputs = self.aliased = self.temporaries = 0
        self.thread_local = self.constants = self.other = self.total = self.padding = 0
        self.reported_total: Optional[int] = None

    def to_json(self) -> dict:
        d = {k: getattr(self, k) for k in ("memory_space", "name", "arguments", "outputs",
                                           "aliased", "temporaries", "thread_local",
                                           "constants", "other", "total", "padding")}
        if self.reported_total is not None:
            d["reported_total"] = self.reported_total
        return d


class OomSummary(NamedTuple):
    """What an out-of-memory report says, and what xlashape concludes:
    ``form`` (``detailed`` / ``short``), ``memory_space``, ``used`` /
    ``limit`` / ``excess`` in bytes (as printed, rounded), ``padding_bytes``
    (the padding the report shows: the HLO temporaries' padded minus
    unpadded size when it gives them, else the listed allocations' extra
    memory due to padding; ``None`` when it shows none), ``padding_basis``
    (which of the two), ``fits_without_padding`` (``None`` if unknown) and
    ``note`` (one sentence saying so, or where the breakdown is)."""

    form: str
    memory_space: str
    used: Optional[int]
    limit: Optional[int]
    excess: Optional[int]
    padding_bytes: Optional[int]
    padding_basis: Optional[str]
    fits_without_padding: Optional[bool]
    note: str

    def to_json(self) -> dict:
        return dict(self._asdict())


class ModuleMemory:
    """The memory figures of one module (see the module docstring).

    The ``CompiledMemoryStats`` fields have XLA's names:
    ``argument_size_in_bytes``, ``output_size_in_bytes``,
    ``alias_size_in_bytes``, ``temp_size_in_bytes`` (``None`` without a
    buffer assignment), ``host_argument_size_in_bytes``,
    ``host_output_size_in_bytes``; from an out-of-memory report
    ``memory_used_bytes`` / ``memory_limit_bytes`` (else ``None``), and
    there the figures the report prints (rounded), ``None`` where it has none.

    Also: ``name``, ``source`` (``hlo``, ``dump``, ``oom``, ``jax``), ``path``,
    ``platform`` (``tpu`` when the layouts are tiled), ``memory_spaces``
    (:class:`SpaceTotals` per ``S(n)``), ``warnings`` (strings),
    ``largest`` / ``padding_wasters`` (the top allocations by size and by
    padding), ``oom`` (:class:`OomSummary`), ``memory_analysis`` (XLA's own
    figures when analysed from a JAX compiled object) and :attr:`allocations`.
    """

    def __init__(self, name: Optional[str], source: str, path: Optional[str] = None):
        self.name = name
        self.source = source
        self.path = path
        self.argument_size_in_bytes: Optional[int] = 0
        self.output_size_in_bytes: Optional[int] = 0
        self.alias_size_in_bytes: Optional[int] = 0
        self.temp_size_in_bytes: Optional[int] = None
        self.host_argument_size_in_bytes: Optional[int] = 0
        self.host_output_size_in_bytes: Optional[int] = 0
        self.host_alias_size_in_bytes: Optional[int] = 0
        self.host_temp_size_in_bytes: Optional[int] = None
        #: TPU: the buffer assignment's preallocated temporaries in device
        #: memory (color 0) -- xlashape's figure, not XLA's temp_size_in_bytes
        self.hbm_temp_allocation_bytes: Optional[int] = None
        #: why a field of XLA's is None (field name -> sentence)
        self.reasons: Dict[str, str] = {}
        #: an out-of-memory report that a later report of the same log replaces
        #: (libtpu logs one per allocation it tries; the last is where it gave up)
        self.superseded = False
        self.memory_used_bytes: Optional[int] = None
        self.memory_limit_bytes: Optional[int] = None
        self.platform: Optional[str] = None
        self.chip = None
        self.notes: List[str] = []
        self.optimized = True
        self.memory_spaces: Dict[int, SpaceTotals] = {}
        self.warnings: List[str] = []
        self.largest: List[Allocation] = []
        self.padding_wasters: List[Allocation] = []
        #: :class:`xlashape.padding.PaddingSummary`: how much is padding, whether it matters
        self.padding_summary = None
        self.oom: Optional[OomSummary] = None
        self.memory_analysis: Optional[dict] = None
        self.allocation_count = 0
        self.value_count = 0
        self._allocations: Optional[List[Allocation]] = None
        self._text_source = None
        #: read from XLA's protobuf (a ``.hlo.pb``, a serialized buffer
        #: assignment or memory-usage report) rather than its text files
        self.from_proto = False
        self._reread: Optional[Callable[[], Iterator[Allocation]]] = None
        #: the peak and what is live at it (:class:`~xlashape.peak.PeakAnalysis`),
        #: for a dump with a buffer assignment; else ``None``
        self.peak = None

    @property
    def allocations(self) -> List[Allocation]:
        """Every allocation (a list, built on first use; for a big buffer
        assignment :meth:`iter_allocations` streams instead)."""
        if self._allocations is None:
            self._allocations = list(self.iter_allocations())
        return self._allocations

    def iter_allocations(self) -> Iterator[Allocation]:
        """The allocations one by one; for a dump this reads the buffer
        assignment file again, so memory stays flat."""
        if self._allocations is not None:
            return iter(self._allocations)
        if self._reread is not None:
            return self._reread()
        return iter(())

    def add_to_figure(self, figure: str, size: int, host: bool) -> None:
        """Add ``size`` to XLA's ``figure`` (``"argument_size_in_bytes"``,
        ...) or, for host memory, to its ``host_`` twin."""
        name = "host_" + figure if host else figure
        setattr(self, name, getattr(self, name) + size)

    def space(self, memory_space: int) -> SpaceTotals:
        t = self.memory_spaces.get(memory_space)
        if t is None:
            t = self.memory_spaces[memory_space] = SpaceTotals(memory_space)
        return t

    def figures(self) -> Dict[str, Optional[int]]:
        """The ``CompiledMemoryStats`` fields computed here, by XLA's names."""
        return {k: getattr(self, k) for k in _STATS_FIELDS}

    def header_json(self) -> dict:
        """The module's JSON object without ``allocations`` (the CLI streams those)."""
        d = {"name": self.name}
        for k in _JSON_FIELDS:
            d[k] = getattr(self, k)
        return d

    def extra_json(self) -> dict:
        d = {"source": self.source, "from_proto": self.from_proto, "platform": self.platform,
             "notes": list(self.notes),
             "reasons": dict(self.reasons),
             "hbm_temp_allocation_bytes": self.hbm_temp_allocation_bytes,
             "memory_spaces": [self.memory_spaces[k].to_json() for k in sorted(self.memory_spaces)],
             "warnings": list(self.warnings)}
        if self.path is not None:
            d["path"] = self.path
        if self.oom is not None:
            d["oom"] = self.oom.to_json()
            d["superseded"] = self.superseded
        if self.memory_analysis is not None:
            d["memory_analysis"] = dict(self.memory_analysis)
        if self.peak is not None:
            d["peak"] = self.peak.to_json()
        return d

    def to_json(self) -> dict:
        """The module as ``xlashape memory --json`` prints it."""
        d = self.header_json()
        d.update(self.extra_json())
        d["allocations"] = [a.to_json() for a in self.iter_allocations()]
        return d

    def __repr__(self):
        return (f"<ModuleMemory {self.name} ({self.source}): arguments {self.argument_size_in_bytes}, "
                f"outputs {self.output_size_in_bytes}, temporaries {self.temp_size_in_bytes}>")


_STATS_FIELDS = ("argument_size_in_bytes", "output_size_in_bytes", "alias_size_in_bytes",
                 "temp_size_in_bytes", "host_argument_size_in_bytes", "host_output_size_in_bytes",
                 "host_alias_size_in_bytes", "host_temp_size_in_bytes")
_JSON_FIELDS = ("argument_size_in_bytes", "output_size_in_bytes", "alias_size_in_bytes",
                "temp_size_in_bytes", "host_argument_size_in_bytes", "host_output_size_in_bytes",
                "memory_used_bytes", "memory_limit_bytes")


class MemoryAnalysis:
    """What :func:`analyze` found: ``modules`` (:class:`ModuleMemory`, one per
    module or report), ``kind`` of input (``hlo``, ``dump``, ``oom``, ``jax``),
    ``path``, and ``warnings`` (:class:`~xlashape.hlo_module.HloWarning` with
    line numbers, for lines that could not be read, and
    :class:`~xlashape.xla_dump.DumpWarning` for files of a dump that were
    skipped; the first 1000 are kept, ``warnings.total`` counts them all)."""

    def __init__(self, kind: str, path: Optional[str] = None):
        self.kind = kind
        self.path = path
        self.modules: List[ModuleMemory] = []
        self.warnings: List = WarningList()

    def to_json(self) -> dict:
        return {"modules": [m.to_json() for m in self.modules]}

    def __iter__(self):
        return iter(self.modules)

    def __len__(self):
        return len(self.modules)

    def __getitem__(self, i):
        return self.modules[i]

    def __repr__(self):
        return f"<MemoryAnalysis {self.kind}: {len(self.modules)} modules>"


# -- input dispatch --------------------------------------------------------------

_SNIFF_BYTES = 1 << 16


def analyze(source, *, top: int = 10, chip: Optional[str] = None, platform: Optional[str] = None,
            peak: bool = True, on_warning: Optional[Callable[[HloWarning], None]] = None,
            progress: Optional[Callable[[int, Optional[int]], None]] = None,
            prefer: str = "text", dump=None) -> MemoryAnalysis:
    """XLA's memory figures for ``source``: a path (an HLO text file, ``.gz``
    too; an XLA dump directory; a TPU out-of-memory report or libtpu log), the
    text of one of those, or a JAX compiled object
    (``jax.jit(f).lower(...).compile()``: its ``as_text()`` is analysed and
    its ``memory_analysis()`` kept beside, in ``memory_analysis``).

    XLA's protobufs too, as a path or bytes: a ``*.hlo.pb`` / ``.hlo.pb.gz``
    (``--xla_dump_hlo_as_proto``: the module and its buffer assignment, the
    peak from the heap simulator's traces), the bytes of
    ``memory_analysis().serialized_buffer_assignment_proto`` (a
    ``BufferAssignmentProto`` alone: the figures that need the module's
    shapes or the traces are ``None`` with the reason), and a
    ``*-memory-usage-report.pb`` (the ``.hlo.pb`` beside it is read when it
    is there; alone, only its memory spaces' totals). A dump directory with
    both the text files and the ``.hlo.pb`` is read from the text unless
    ``prefer="proto"``; one with the protos only is read from them.

    ``top``: how many allocations to keep in each module's ``largest`` and
    ``padding_wasters``. ``chip``: the TPU generation (``v5e``, ``v6e:2x2``,
    ``TPU v5 lite``, ...), which the text does not say but which sets the
    size of a tuple's table of pointers (:func:`tuple_table_size`); without
    it, v4/v5e sizes are assumed for HLO text, and a dump's buffer assignment
    shows which applies. ``platform`` (``cpu``, ``gpu``, ``tpu``) overrides
    the platform read from the dump's file names and the layouts: XLA counts
    the peak and host memory differently on each. ``peak=False`` skips the
    peak and what is live at it (:attr:`ModuleMemory.peak` stays ``None``),
    which reads the dump's buffer assignment, live ranges and values once
    more. ``on_warning`` receives each
    :class:`~xlashape.hlo_module.HloWarning` (lines that could not be read);
    ``progress(bytes_read, total_bytes)`` is called now and then on long
    inputs.

    ``dump``: for an XLA:GPU out-of-memory error, the dump directory of the
    same program: the allocations of the requested size are named
    (:func:`match_oom_dump`).

    A ``str`` is a path or text as :func:`~xlashape.hlo_module.source_kind`
    decides (pass a ``pathlib.Path`` to name any file).

    Raises :class:`~xlashape.UnreadableInputError` for input that is none of
    these (empty, binary, a directory without modules, another kind of file,
    not a regular file: a FIFO, a device), ``OSError`` for a path that cannot
    be read.
    """
    if dump is not None:
        result = analyze(source, top=top, chip=chip, platform=platform, peak=peak,
                         on_warning=on_warning, progress=progress)
        match_oom_dump(result, dump, top=top)
        return result
    if platform is not None:
        platform = platform.lower()
        if platform not in PLATFORMS:
            raise ShapeValueError(f"unknown platform {platform!r}: expected one of "
                                     + ", ".join(PLATFORMS))
    if prefer not in ("text", "proto"):
        raise ShapeValueError(f"prefer={prefer!r}: expected 'text' or 'proto'")
    ctx = _Context(top, on_warning, progress, normalize_chip(chip))
    ctx.platform = platform
    ctx.peak = peak
    ctx.prefer = prefer
    if hasattr(source, "as_text") and hasattr(source, "memory_analysis"):
        return _analyze_jax(source, ctx)
    if isinstance(source, (bytes, bytearray, memoryview)):
        data = bytes(source)
        sniffed = _sniff_kind(data[:_SNIFF_BYTES], "", maybe_proto=True)
        found = _proto_kind(data) if sniffed == "proto" else None
        if found is not None:
            return _analyze_proto(found[0], found[1], None, ctx)
        if sniffed in _PROTO_KINDS:
            return _analyze_proto(sniffed, data, None, ctx)
        source, kind = _decode(data, "the given bytes"), "text"   # bytes are never a path
    else:
        kind = source_kind(source)
    if kind == "path":
        path = os.fspath(source)
        if os.path.isdir(path):
            return _analyze_dump_dir(path, ctx)
        return _analyze_file(check_regular_file(path), ctx)
    if kind == "text":
        return _analyze_text(source, ctx, None)
    raise ShapeTypeError("analyze() takes a path, HLO or report text, or a JAX compiled object, "
                    f"not {type(source).__name__}")


class _Context:
    def __init__(self, top, on_warning, progress, chip=None):
        self.top = top
        self.chip = chip
        self._on_warning = on_warning
        self.progress = progress
        self.warnings: List = WarningList()    # the first ones, and warnings.total
        self.sizes: dict = {}
        self.platform: Optional[str] = None
        self.peak = True
        self.prefer = "text"

    def warn(self, w) -> None:
        self.warnings.append(w)
        if self._on_warning is not None:
            self._on_warning(w)


def _decode(data: bytes, what: str) -> str:
    if b"\0" in data[:_SNIFF_BYTES]:
        raise UnreadableInputError(f"{what} is binary but none of XLA's protobufs xlashape reads "
                                   "(HloProto, BufferAssignmentProto, MemoryUsageReportProto), "
                                   "nor text: expected an HLO module, a buffer assignment or an "
                                   "out-of-memory report")
    return data.decode("utf-8", "replace")


def _sniff_kind(head, name: str = "", maybe_proto: bool = False) -> Optional[str]:
    """The kind of input whose first bytes (or text) are ``head``: ``hlo``,
    ``oom``, ``buffer-assignment``, ``memory-report`` (text), ``hlo-proto``,
    ``buffer-assignment-proto``, ``memory-report-proto`` (XLA's protobufs,
    told by the file ``name``), ``proto`` (bytes that neither the name nor
    the text tells, when ``maybe_proto``: :func:`_proto_kind` reads which
    message), or ``None``."""
    if isinstance(head, (bytes, bytearray)):
        base = name[: -len(".gz")] if name.endswith(".gz") else name
        binary = b"\0" in head or base.endswith(".pb")
        if not binary:
            text_kind = _sniff_kind(head.decode("utf-8", "replace"))
            if text_kind is not None:
                return text_kind
        if base.endswith(".hlo.pb"):
            return "hlo-proto"
        if base.endswith("memory-usage-report.pb"):
            return "memory-report-proto"
        if base.endswith("buffer-assignment.pb") or base.endswith("buffer_assignment.pb"):
            return "buffer-assignment-proto"
        return "proto" if maybe_proto else None
    if looks_like_oom_report(head):
        return "oom"
    stripped = head.lstrip()
    if stripped.startswith("BufferAssignment:") or stripped.startswith("allocation 0: size"):
        return "buffer-assignment"
    if stripped.startswith("Memory Space:"):
        return "memory-report"
    if "HloModule" in head or "ENTRY" in head:
        return "hlo"

    if re.search(r"(?m)^\s*(ROOT\s+)?%?[A-Za-z_][\w.\-]*\s*=\s*[(a-z]", head):
        return "hlo"
    return None


def _analyze_file(path: str, ctx: _Context) -> MemoryAnalysis:
    size = os.path.getsize(path) if os.path.isfile(path) else None
    with open(path, "rb") as f:
        raw = f.read(_SNIFF_BYTES)
    if path.endswith(".gz"):
        with open_gzip(path) as f:           # a corrupt stream: UnreadableInputError
            raw = f.read(_SNIFF_BYTES)
    if not raw.strip():
        raise UnreadableInputError(f"{path} is empty: expected an HLO module, an XLA dump "
                                   "directory or a TPU out-of-memory report")

    kind = _sniff_kind(raw, os.path.basename(path), maybe_proto=True)
    if kind == "proto":
        found = _proto_kind(path)            # read and parsed once
        if found is not None:
            return _analyze_proto(found[0], found[1], path, ctx)
        kind = None
    if kind in _PROTO_KINDS:
        return _analyze_proto(kind, path, path, ctx)
    head = _decode(raw, path)
    if kind == "oom":
        with open_text(path) as f:
            return _analyze_oom(f, ctx, path)
    if kind == "buffer-assignment":
        return _analyze_buffer_assignment_file(path, ctx)
    if kind == "memory-report":
        raise UnreadableInputError(
            f"{path} is a memory-usage report: give the dump directory it belongs to "
            "(xlashape reads the buffer assignment and module text next to it)")
    if kind != "hlo":
        raise UnreadableInputError(
            f"{path} is not an HLO module, an XLA dump directory or a TPU out-of-memory report "
            f"(it starts with {_clip(head.strip().splitlines()[0] if head.strip() else '', 50)!r})")
    result = MemoryAnalysis("hlo", path)
    with open_text(path) as f:
        mm = _module_from_lines(_entry_blocks(f, size, ctx), ctx, "hlo", path)
    result.modules.append(mm)
    result.warnings = ctx.warnings
    return result


def _analyze_text(text: str, ctx: _Context, path: Optional[str]) -> MemoryAnalysis:
    if not text.strip():
        raise UnreadableInputError("the input is empty: expected an HLO module, an XLA dump "
                                   "directory or a TPU out-of-memory report")
    if "\0" in text[:_SNIFF_BYTES]:
        raise UnreadableInputError("the input is binary, not text: expected an HLO module or "
                                   "a TPU out-of-memory report")
    kind = _sniff_kind(text[:_SNIFF_BYTES])
    if kind == "oom":
        return _analyze_oom(text.splitlines(), ctx, path)
    if kind == "buffer-assignment":
        result = MemoryAnalysis("dump", path)
        result.modules.append(_module_from_buffer_assignment(lambda: io.StringIO(text), None, ctx,
                                                             None, path))
        result.warnings = ctx.warnings
        return result
    if kind != "hlo":
        first = text.strip().splitlines()[0]
        raise UnreadableInputError(
            "the input is not an HLO module or a TPU out-of-memory report "
            f"(it starts with {_clip(first, 50)!r})")
    result = MemoryAnalysis("hlo", path)
    result.modules.append(_module_from_lines(text.splitlines(), ctx, "hlo", path))
    result.warnings = ctx.warnings
    return result


def _entry_blocks(stream, total: Optional[int], ctx: _Context):
    progress = None
    if ctx.progress is not None:
        def progress(done):
            ctx.progress(done, total)
    return EntryBlocks(stream, progress)


def _with_progress(lines, total: Optional[int], ctx: _Context):
    if ctx.progress is None:
        return lines
    return _progress_lines(lines, total, ctx.progress)


def _progress_lines(lines, total, progress):
    done = 0
    n = 0
    for line in lines:
        done += len(line)
        n += 1
        if n & 0x3FFF == 0:
            progress(done, total)
        yield line
    progress(done, total)


# -- HLO text ----------------------------------------------------------------------


class _EntryInfo:
    """What the memory figures need from a module, collected while streaming."""

    def __init__(self):
        self.params: Dict[int, Tuple[str, Shape]] = {}
        self.root = None          # (name, opcode, shape, operand names)
        self.last = None
        self.tiled = False
        self.instructions = 0
        self.platform_hint: Optional[str] = None
        self.hint_checks = 0


def _entry_only(lines: Iterable[str]) -> Iterator[str]:
    """The lines of a module with those of every computation but the entry
    blanked (line numbers kept): the memory figures need the header and the
    entry's parameters and root only, and in a big dump the fusion bodies
    and other computations are most of the text. A computation is skipped
    from a header line as XLA prints it (at column 0, ending with "{") to
    the "}" at column 0 that closes it; anything else is read."""
    skipping = False
    for line in lines:
        if skipping:
            if line[:1] == "}":
                skipping = False
            yield ""
            continue
        c = line[:1]
        if (c == "%" or c.isalpha()) and line.rstrip().endswith("{") and \
                not line.startswith(("ENTRY", "HloModule")) and \
                "=" not in line.split("(", 1)[0]:
            skipping = True
            yield ""
            continue
        yield line


def _module_from_lines(lines: Iterable[str], ctx: _Context, source: str,
                       path: Optional[str]) -> ModuleMemory:
    """Stream a module's text; keep only the entry's parameters and root."""
    warn = ctx.warn
    if source == "dump" and path:
        name = os.path.basename(path)

        def warn(w):
            # a dump has several files: say which one the line is in
            ctx.warn(HloWarning(w.line, f"{name}: {w.message}"))
    # no call graph: the figures need the entry only, whose kind ENTRY says
    reader = HloReader(warn, call_kinds={}, streaming=True)
    info = _EntryInfo()
    loose = _EntryInfo()      # instructions outside any computation (a fragment)

    if not isinstance(lines, EntryBlocks):
        lines = _entry_only(lines)
    for ins in reader.read(lines):
        info.instructions += 1
        comp = ins._comp
        if comp is None:
            target = loose
        elif comp.is_entry:
            target = info
        else:
            continue
        if ins.opcode == "parameter":
            n = ins.parameter_number
            if n is not None:
                target.params[n] = (ins.name, ins.shape)
        elif (target.platform_hint is None and target.hint_checks < 256
              and ins.opcode in ("fusion", "custom-call")):
            target.hint_checks += 1
            target.platform_hint = _platform_hint(ins.attributes_text)
        if ins.is_root:
            target.root = (ins.name, ins.opcode, ins.shape, ins.operand_names if ins.opcode == "tuple" else ())
        target.last = ins
    if reader.mode == "oom":
        raise UnreadableInputError("the input is an out-of-memory report, not an HLO module")
    if info.instructions == 0 and not reader.module_attributes.get("entry_computation_layout"):
        where = path or "the input"
        skipped = reader.warnings.total
        raise UnreadableInputError(
            f"no HLO instructions found in {where}" +
            (f" ({skipped} lines could not be read; the first: {reader.warnings[0]})" if skipped else ""))
    entry = info if (info.params or info.root or info.last) else loose
    if entry.root is None and entry.last is not None:
        ins = entry.last
        entry.root = (ins.name, ins.opcode, ins.shape,
                      ins.operand_names if ins.opcode == "tuple" else ())
    mm = ModuleMemory(reader.module_name, source, path)
    mm._text_source = (dict(reader.module_attributes), entry)
    _text_figures(mm, reader.module_attributes, entry, ctx, ctx.chip)
    return mm


# what XLA:GPU and XLA:CPU write into their modules' custom-call targets and
# backend configs (the compiled text of the corpora: cuBLAS/cuDNN/cuSOLVER
# calls and the stream a GPU op runs on; XLA:CPU's LAPACK calls, its loop
# partitions and its YNNPACK/oneDNN fusions)
_GPU_MARKS = ("operation_queue_id", "__cublas", "__cudnn", "cusolver", "xla.gpu.", "__triton")
_CPU_MARKS = ("outer_dimension_partitions", "lapack_", "__ynn", "__onednn", "xla.cpu.")


def _platform_hint(attributes: str) -> Optional[str]:
    if any(m in attributes for m in _GPU_MARKS):
        return "gpu"
    if any(m in attributes for m in _CPU_MARKS):
        return "cpu"
    return None


def _host_space_dropped(params, entry) -> bool:
    """The entry layout puts a parameter in host memory (``S(5)``) but the
    compiled parameter instruction has no memory space: XLA:CPU's doing
    (it compiles host-memory buffers as ordinary ones)."""
    for number, (_, shape) in enumerate(params):
        if shape.is_tuple or _space(shape) != HOST_MEMORY_SPACE:
            continue
        got = entry.params.get(number)
        if got is not None and not got[1].is_tuple and _space(got[1]) == 0:
            return True
    return False


def _platform_of(shapes: Iterable[Shape]) -> Optional[str]:
    def tiled(s: Shape) -> bool:
        if s.is_tuple:
            return any(tiled(x) for x in s.tuple_shapes)
        if s.is_buffer:
            s = s.buffer_shape
        return s.is_array and s.layout is not None and bool(s.layout.tiles)

    shapes = list(shapes)
    if any(tiled(s) for s in shapes):
        return _TPU
    return None


def _text_figures(mm: ModuleMemory, attrs: Dict[str, str], entry: _EntryInfo, ctx: _Context,
                  chip) -> None:
    """The CompiledMemoryStats figures that the module text determines."""
    params: List[Tuple[Optional[str], Shape]] = []
    result: Optional[Shape] = None
    ecl_text = attrs.get("entry_computation_layout")
    if ecl_text is not None:
        try:
            ecl = parse_entry_computation_layout(ecl_text)
            names = {n: entry.params[n][0] for n in entry.params}
            params = [(names.get(i), s) for i, s in enumerate(ecl.parameters)]
            result = ecl.result
        except HloParseError as e:
            mm.warnings.append(f"the module's entry_computation_layout does not parse ({e.message}); "
                               "the entry computation's parameters and root are used instead")
    if result is None:
        n = max(entry.params) + 1 if entry.params else 0
        params = []
        for i in range(n):
            if i in entry.params:
                params.append(entry.params[i])
            else:
                mm.warnings.append(f"entry parameter {i} is missing from the text")
        if entry.root is not None:
            result = entry.root[2]
    root_operands = entry.root[3] if entry.root is not None else ()
    root_name = entry.root[0] if entry.root is not None else None
    mm.platform = _platform_of([s for _, s in params] + ([result] if result is not None else []))
    if mm.platform is None and (ctx.platform == "cpu" or _host_space_dropped(params, entry)):
        mm.platform = "cpu"
    if mm.platform is None:
        mm.platform = entry.platform_hint
    if ctx.platform is not None:
        mm.platform = ctx.platform
    platform = mm.platform
    # XLA:CPU keeps S(5) (pinned_host) buffers in ordinary memory and counts
    # them as device memory in its CompiledMemoryStats
    host = None if platform == "cpu" else HOST_MEMORY_SPACE
    if host is None and any(_space(sub) == HOST_MEMORY_SPACE for _, p in params
                            for _, sub in _buffers(p) if not sub.is_tuple):
        mm.notes.append("XLA:CPU counts host-memory (S(5)) buffers as device memory: they are "
                        "in argument_size_in_bytes / output_size_in_bytes, as memory_analysis() "
                        "reports them")
    mm.chip = chip
    tables = [s for _, p in params for _, s in _buffers(p) if s.is_tuple]
    if result is not None:
        tables += [s for _, s in _buffers(result) if s.is_tuple]
    if platform == _TPU and chip is None and any(len(s.tuple_shapes) > 8 for s in tables):
        mm.notes.append("tuple tables sized as on TPU v4/v5e (512-byte granules); on v5p/v6e "
                        "they take 32-byte granules: give the chip (--chip v6e) for those")
    try:
        aliases = parse_input_output_alias(attrs.get("input_output_alias", ""))
    except (ValueError, XlaShapeError):  # pragma: no cover - the regex cannot fail
        aliases = ()
    aliased = {(a.parameter_number, tuple(a.parameter_index)): a for a in aliases}
    by_output = {tuple(a.output_index): a for a in aliases}
    allocations: List[Allocation] = []
    param_alloc: Dict[Tuple[int, Tuple[int, ...]], Allocation] = {}
    sizes = ctx.sizes
    for number, (name, shape) in enumerate(params):
        for idx, sub in _buffers(shape):
            size, unpadded, problem = _sizes_cached(sizes, sub, platform, chip)
            if problem:
                mm.warnings.append(f"parameter {number} {shape_text(sub)}: {problem}")
            sp = _space(sub) if not sub.is_tuple else 0
            a = Allocation("parameter", size, unpadded, sp, shape_text(sub),
                           [name] if name else [], parameter_number=number, parameter_index=idx,
                           shape_obj=sub)
            allocations.append(a)
            param_alloc[(number, idx)] = a
            t = mm.space(sp)
            t.arguments += size or 0
            t.total += size or 0
            t.padding += a.padding_in_bytes
            mm.add_to_figure("argument_size_in_bytes", size or 0, sp == host)
            if (number, idx) in aliased:
                a.maybe_live_out = True
                t.aliased += size or 0
                mm.add_to_figure("alias_size_in_bytes", size or 0, sp == host)
    for key in aliased:
        if key not in param_alloc:
            mm.warnings.append(f"input_output_alias names parameter {key[0]} at index "
                               f"{{{','.join(map(str, key[1]))}}}, which the entry does not have")
    if result is not None:
        for idx, sub in _buffers(result):
            size, unpadded, problem = _sizes_cached(sizes, sub, platform, chip)
            if problem:
                mm.warnings.append(f"output {shape_text(sub)}: {problem}")
            sp = _space(sub) if not sub.is_tuple else 0
            mm.add_to_figure("output_size_in_bytes", size or 0, sp == host)
            t = mm.space(sp)
            t.outputs += size or 0
            alias = by_output.get(idx)
            if alias is not None and (alias.parameter_number, tuple(alias.parameter_index)) in param_alloc:
                continue  # the output reuses the parameter's allocation
            if idx == ():
                values = [root_name] if root_name else []
            elif len(idx) == 1 and idx[0] < len(root_operands):
                values = [root_operands[idx[0]]]
            else:
                values = []
            a = Allocation("output", size, unpadded, sp, shape_text(sub), values,
                           maybe_live_out=True, output_index=idx, shape_obj=sub)
            allocations.append(a)
            t.total += size or 0
            t.padding += a.padding_in_bytes
    mm._allocations = allocations
    mm.allocation_count = len(allocations)
    _rank(mm, allocations, ctx.top)


def _rank(mm: ModuleMemory, allocations: Iterable[Allocation], top: int) -> None:
    allocations = list(allocations)
    mm.largest = heapq.nlargest(top, allocations, key=lambda a: a.size_in_bytes or 0)
    # "most padding" lists only padding that matters (padding.padding_summary)
    summary = padding_summary(allocations, top=top)
    mm.padding_summary = summary
    mm.padding_wasters = summary.listed


# -- dumps -------------------------------------------------------------------------


def _dump_protos(path: str, ctx: _Context) -> Dict[Tuple[str, str], str]:
    """The ``*after_optimizations.hlo.pb`` (or ``.gz``) files of a dump
    directory: ``{(directory, key): path}``. A file that cannot be read as
    one (a FIFO, a device, a dangling or looping link) is left out with a
    :class:`~xlashape.xla_dump.DumpWarning`, as the text files are."""
    found: Dict[Tuple[str, str], str] = {}
    for root, dirs, files in os.walk(path):
        dirs.sort()
        for name in sorted(files):
            for suffix in _HLO_PB_SUFFIXES:
                if name.endswith(suffix):
                    pb = os.path.join(root, name)
                    problem = _unreadable(pb)
                    if problem is not None:
                        ctx.warn(DumpWarning(pb, problem))
                    else:
                        found.setdefault((root, name[: -len(suffix)]), pb)
    return found


def _analyze_dump_dir(path: str, ctx: _Context) -> MemoryAnalysis:
    modules = find_dump_modules(path, on_warning=ctx.warn)
    pbs = _dump_protos(path, ctx)
    if pbs and (ctx.prefer == "proto" or not modules):
        # the proto route: each module's .hlo.pb, the text files for the
        # modules that have none
        result = MemoryAnalysis("dump", path)
        done = set()
        for (root, key), pb in sorted(pbs.items(), key=lambda kv: (_number(kv[0][1]) or 0, kv[1])):
            rep = os.path.join(root, key + _MEMORY_REPORT_TXT)
            result.modules.append(_module_from_proto(
                protos.read_hlo_proto(pb), pb, ctx, key=key,
                report=rep if os.path.exists(rep) else None))
            done.add(os.path.join(root, key + "after_optimizations.txt"))
        for dm in modules:
            if dm.hlo_path not in done and dm.optimized:
                result.modules.append(_module_from_dump(dm, ctx))
        result.warnings = ctx.warnings
        return result
    if not modules:
        try:
            with os.scandir(path) as it:
                empty = next(it, None) is None
        except OSError:
            empty = False
        if empty:
            raise UnreadableInputError(f"{path} is an empty directory: expected an XLA dump "
                                       "(XLA_FLAGS=--xla_dump_to=DIR writes one)")
        skipped = [w for w in ctx.warnings if isinstance(w, DumpWarning)]
        raise UnreadableInputError(
            f"no XLA modules in {path}: a dump directory holds files named "
            "module_NNNN.NAME...after_optimizations.txt (XLA_FLAGS=--xla_dump_to=DIR writes them)"
            + "".join(f"; {w.path} was {w.message}" for w in skipped[:3])
            + (f" (and {len(skipped) - 3} more)" if len(skipped) > 3 else ""))
    result = MemoryAnalysis("dump", path)
    for dm in modules:
        result.modules.append(_module_from_dump(dm, ctx))
    result.warnings = ctx.warnings
    return result


def _platform_from_key(key: str) -> Optional[str]:
    if re.search(r"(?:^|\.)cl_\d+\.$", key):
        return _TPU
    if key.endswith("cpu_"):
        return "cpu"
    if key.endswith("gpu_") or "sm_" in key:
        return "gpu"
    return None


def _module_from_dump(dm, ctx: _Context) -> ModuleMemory:
    size = os.path.getsize(dm.hlo_path)
    if size == 0:
        mm = ModuleMemory(None, "dump", dm.hlo_path)
        mm.warnings.append(f"{os.path.basename(dm.hlo_path)} is empty")
    else:
        try:
            with open_text(dm.hlo_path) as f:
                mm = _module_from_lines(_entry_blocks(f, size, ctx), ctx, "dump", dm.hlo_path)
        except UnreadableInputError as e:
            mm = ModuleMemory(None, "dump", dm.hlo_path)
            mm.warnings.append(str(e))
    mm.source = "dump"
    mm.optimized = dm.optimized
    if not dm.optimized:
        mm.warnings.append("only the module before optimizations is in the dump: its layouts "
                           "are not yet the ones XLA chose, so sizes may differ from XLA's")
    key_platform = _platform_from_key(dm.key)
    if key_platform is not None:
        mm.platform = key_platform
    if ctx.platform is not None:
        mm.platform = ctx.platform
    if mm.name is None:
        mm.name = dm.key.split(".")[1] if dm.key.count(".") >= 1 else dm.key
    if dm.buffer_assignment_path is None:
        if dm.optimized:
            mm.warnings.append("no buffer assignment in the dump for this module: figures from "
                               "its text only")
        return mm
    def open_ba():
        return open_text(dm.buffer_assignment_path)

    open_ba.name = os.path.basename(dm.buffer_assignment_path)
    peak_warnings: List[str] = []
    builder = _peak_builder(dm.buffer_assignment_path, mm.platform, ctx, peak_warnings)
    bm = _module_from_buffer_assignment(open_ba, dm.memory_report_path, ctx, mm, dm.hlo_path,
                                        builder)
    bm.warnings.extend(peak_warnings)
    _finish_peak(bm, builder, dm.hlo_path if dm.optimized else None)
    src = getattr(mm, "_text_source", None)
    if src is not None:
        _check_text_figures(mm, bm, src, ctx)
    return bm


def _check_text_figures(mm: ModuleMemory, bm: ModuleMemory, src, ctx: _Context) -> None:
    """The module text's figures, with the tuple tables the buffer
    assignment showed, must agree with the buffer assignment's."""
    again = ModuleMemory(mm.name, "hlo")
    quiet = _Context(ctx.top, None, None, ctx.chip)
    quiet.sizes = ctx.sizes
    _text_figures(again, src[0], src[1], quiet, bm.chip)
    for k in ("argument_size_in_bytes", "output_size_in_bytes", "alias_size_in_bytes",
              "host_argument_size_in_bytes", "host_output_size_in_bytes"):
        if getattr(again, k) != getattr(bm, k):
            bm.warnings.append(f"{k}: {getattr(bm, k)} in the buffer assignment, "
                               f"{getattr(again, k)} from the module text")


def _check_report(mm: ModuleMemory, spaces: Iterable[MemorySpaceUsage]) -> None:
    """The memory-usage report's totals per memory space, checked against
    the buffer assignment's."""
    for sp in spaces:
        t = mm.space(sp.color)
        t.name = sp.name
        t.reported_total = sp.total_bytes
        if sp.total_bytes != t.total:
            mm.warnings.append(f"memory space {sp.name} (color {sp.color}): the memory-usage "
                               f"report says {sp.total_bytes} bytes, the buffer assignment's "
                               f"allocations add up to {t.total}")


_LIVE_RANGE_SUFFIX = "-live-range.txt"
_VALUES_SUFFIX = "-buffer-assignment-values.txt"
_BA_SUFFIX = "-buffer-assignment.txt"
_MEMORY_REPORT_TXT = "after_optimizations-memory-usage-report.txt"


def _peak_builder(ba_path: str, platform: Optional[str], ctx: _Context,
                  warnings: List[str]) -> Optional[PeakBuilder]:
    """A :class:`~xlashape.peak.PeakBuilder` for a dumped module, with the
    live-range file beside its buffer assignment (and, on TPU, the values
    file) read; the buffer assignment's one pass feeds it."""
    if not ctx.peak:
        return None
    live = operands = None
    if ba_path.endswith(_BA_SUFFIX):
        stem = ba_path[: -len(_BA_SUFFIX)]
        try:
            if os.path.isfile(stem + _LIVE_RANGE_SUFFIX):
                live = read_live_ranges(stem + _LIVE_RANGE_SUFFIX)
            if platform == _TPU and os.path.isfile(stem + _VALUES_SUFFIX):
                operands = _LazyOperands(stem + _VALUES_SUFFIX)
        except (OSError, XlaShapeError) as e:
            warnings.append(f"the live ranges could not be read: {e}")
            live = operands = None
    sizes = ctx.sizes
    cache: Dict[str, int] = {}

    def unpadded(v):
        got = cache.get(v.shape_text)
        if got is not None:
            return got
        if v.shape is not None and v.shape.is_tuple:
            # a tuple's table of pointers: 8 bytes per element unpadded
            got = 8 * len(v.shape.tuple_shapes)
        elif v.shape is None:
            return v.size
        else:
            got = _sizes_by_text(sizes, v.shape_text, v.shape, platform, ctx.chip)[1]
            got = v.size if got is None else min(got, v.size)
        if len(cache) > 1 << 16:
            cache.clear()
        cache[v.shape_text] = got
        return got

    return PeakBuilder(live, platform, unpadded=unpadded, operands=operands)


class _LazyOperands:
    """The values file's operand lists, read the first time the sharing rule
    asks (only values at one offset whose live ranges meet need them: most
    dumps never do). A read that fails is kept in ``error``."""

    def __init__(self, path: str):
        self.path = path
        self.error: Optional[Exception] = None
        self._operands: Optional[Dict[int, str]] = None

    def get(self, key: int, default: str = "") -> str:
        if self._operands is None:
            try:
                self._operands = read_value_operands(self.path)
            except (OSError, XlaShapeError) as e:
                self.error = e
                self._operands = {}
        return self._operands.get(key, default)


def _finish_peak(mm: ModuleMemory, builder: Optional[PeakBuilder], hlo_path: Optional[str]) -> None:
    if builder is None:
        return
    error = getattr(builder.operands, "error", None)
    if error is not None:
        # as when it fails before the pass: no heap to replay
        mm.warnings.append(f"the live ranges could not be read: {error}")
        builder.live = builder.operands = builder.strict = None
        builder.heaps = []
        builder.missing = 0
    builder.platform = mm.platform
    mm.peak = builder.finish()
    # the schedule's instruction names, for views that name each position
    mm.peak.schedule = builder.live.sequence if builder.live is not None else None
    if hlo_path:
        try:
            add_locations(mm.peak, hlo_path)
        except (OSError, XlaShapeError) as e:
            mm.warnings.append(f"op paths and source lines could not be read: {e}")


def peak_of_hlo_proto(source, platform: Optional[str], chip=None) -> "PeakAnalysis":
    """The peak figures from a ``.hlo.pb`` (path or bytes; the heap
    simulator's own traces): :func:`xlashape.peak.peak_from_hlo_proto` with
    unpadded sizes from xlashape's size model of each buffer's shape."""
    return _peak_of_proto(protos.read_hlo_proto(source), None, platform, chip)


def _analyze_buffer_assignment_file(path: str, ctx: _Context) -> MemoryAnalysis:
    """A ``*-buffer-assignment.txt`` given on its own: read it, and the module
    text and memory report beside it when they are there."""
    base = os.path.basename(path)
    d = os.path.dirname(path) or "."
    mm = None
    report = None
    suffix = "after_optimizations-buffer-assignment.txt"
    if base.endswith(suffix):
        key = base[: -len(suffix)]
        hlo = os.path.join(d, key + "after_optimizations.txt")
        rep = os.path.join(d, key + "after_optimizations-memory-usage-report.txt")
        report = rep if os.path.exists(rep) else None
        if os.path.exists(hlo):
            dm = DumpModule(key, _number(key), hlo, True, path, report)
            result = MemoryAnalysis("dump", path)
            result.modules.append(_module_from_dump(dm, ctx))
            result.warnings = ctx.warnings
            return result
    result = MemoryAnalysis("dump", path)
    peak_warnings: List[str] = []
    builder = _peak_builder(path, ctx.platform, ctx, peak_warnings)
    mod = _module_from_buffer_assignment(lambda: open_text(path), report, ctx, mm, path, builder)
    mod.warnings.extend(peak_warnings)
    _finish_peak(mod, builder, None)
    result.modules.append(mod)
    result.warnings = ctx.warnings
    return result


def _allocation_from_ba(a, platform, sizes: dict, chip=None) -> Allocation:
    """An :class:`Allocation` from a :class:`~xlashape.xla_dump.BufferAllocation`."""
    details = []
    slots: Dict[Tuple[int, int], int] = {}
    for v in a.values:
        unp = None
        if v.shape is not None:
            _, unp, _ = _sizes_by_text(sizes, v.shape_text, v.shape, platform, chip)
        details.append(ValueInfo(v.name, v.label, v.size, v.offset, v.shape_text, unp))
        if unp is not None:
            key = (v.offset, v.size)
            slots[key] = max(slots.get(key, 0), min(unp, v.size))
    padding = sum(size - unp for (off, size), unp in slots.items())
    unpadded = max(0, a.size - padding) if details else None
    if details and all(v.unpadded_size_in_bytes is None for v in details):
        unpadded = None
    if a.size == 0:
        unpadded = 0  # nothing to pad: an empty allocation holds 0 bytes of data
    if a.parameter_number is not None:
        own = [v for v in details if not v.label.endswith("}") and v.offset == 0]
    else:
        own = []
    best = max(details, key=lambda v: (v.size_in_bytes or 0)) if details else None
    shape = (own[0].shape if own else best.shape if best is not None
             else a.parameter_shape or a.output_shape)
    values = []
    seen = set()
    for v in details:
        if v.name not in seen:
            seen.add(v.name)
            values.append(v.name)
    return Allocation(a.kind, a.size, unpadded, a.color, shape, values, index=a.index,
                      maybe_live_out=a.maybe_live_out, parameter_number=a.parameter_number,
                      parameter_index=a.parameter_index if a.parameter_number is not None else None,
                      value_details=details)


def _module_from_buffer_assignment(open_ba, report_path, ctx: _Context, text_mm: Optional[ModuleMemory],
                                   path: Optional[str], peak: Optional[PeakBuilder] = None,
                                   records: Optional[Callable[[], Iterator[BufferAllocation]]] = None
                                   ) -> ModuleMemory:
    """The figures of a buffer assignment: ``open_ba()`` opens its text, or
    ``records()`` yields its allocations (the proto route)."""
    mm = ModuleMemory(text_mm.name if text_mm else None, "dump", path)
    if text_mm is not None:
        mm.warnings.extend(text_mm.warnings)
        mm.optimized = text_mm.optimized
        mm.platform = text_mm.platform
    platform = mm.platform
    chip = mm.chip = ctx.chip
    for k in ("argument_size_in_bytes", "output_size_in_bytes", "alias_size_in_bytes",
              "host_argument_size_in_bytes", "host_output_size_in_bytes",
              "host_alias_size_in_bytes"):
        setattr(mm, k, 0)
    mm.temp_size_in_bytes = 0
    mm.host_temp_size_in_bytes = 0
    sizes = ctx.sizes
    mismatches: Dict[str, list] = {}
    largest: List = []
    wasters: List = []
    top = ctx.top
    seq = 0
    ba_warnings: List[HloWarning] = WarningList()
    tiled_seen = False

    ba_name = getattr(open_ba, "name", None)

    def allocations(on_warning=None) -> Iterator[BufferAllocation]:
        if records is not None:
            yield from records()
            return
        with open_ba() as f:
            yield from iter_buffer_assignment(f, on_warning=on_warning)

    def warn(w):
        if ba_name:
            # several files are read for a dump: say which one the line is in
            w = HloWarning(w.line, f"{ba_name}: {w.message}")
        ba_warnings.append(w)
        ctx.warn(w)

    for a in allocations(warn):
        if peak is not None:
            peak.add(a)
        mm.allocation_count += 1
        mm.value_count += len(a.values)
        if not tiled_seen and platform is None:
            for v in a.values:
                if v.shape is not None and _platform_of([v.shape]) == _TPU:
                    platform = mm.platform = _TPU
                    tiled_seen = True
                    break
        host = a.color == HOST_MEMORY_SPACE
        t = mm.space(a.color)
        t.total += a.size
        if a.parameter_number is not None:
            t.arguments += a.size
            mm.add_to_figure("argument_size_in_bytes", a.size, host)
            if a.maybe_live_out:
                t.aliased += a.size
                mm.add_to_figure("alias_size_in_bytes", a.size, host)
        if a.maybe_live_out:
            t.outputs += a.size
            mm.add_to_figure("output_size_in_bytes", a.size, host)
        if a.is_preallocated_temp:
            t.temporaries += a.size
            mm.add_to_figure("temp_size_in_bytes", a.size, host)
        elif a.is_thread_local:
            t.thread_local += a.size
        elif a.is_constant:
            t.constants += a.size
        elif a.parameter_number is None and not a.maybe_live_out:
            t.other += a.size
        # each value's size against xlashape's size of its shape
        for v in a.values:
            if v.shape is None:
                continue
            if chip is None and platform == _TPU and v.shape.is_tuple:
                # the table's size shows which rounding this chip uses
                n = len(v.shape.tuple_shapes)
                for g in (512, 32):
                    if v.size == tuple_table_size(n, _TPU, g) != tuple_table_size(
                            n, _TPU, 544 - g):
                        chip = mm.chip = g
                        mm.notes.append(f"tuple tables take {g}-byte granules in this buffer "
                                        "assignment (" + ("TPU v4/v5e" if g == 512 else
                                                          "TPU v5p/v6e") + ")")
            size, _, problem = _sizes_by_text(sizes, v.shape_text, v.shape, platform, chip)
            if problem is not None or size != v.size:
                rec = mismatches.get(v.shape_text)
                if rec is None:
                    mismatches[v.shape_text] = [v.size, size, problem, v.label, v.line, 1]
                else:
                    rec[5] += 1
        alloc = _allocation_from_ba(a, platform, sizes, chip)
        t.padding += alloc.padding_in_bytes
        seq += 1
        item = (alloc.size_in_bytes or 0, -seq, alloc)
        if len(largest) < top:
            heapq.heappush(largest, item)
        elif top and item > largest[0]:
            heapq.heapreplace(largest, item)
        if alloc.padding_in_bytes > 0:
            item = (alloc.padding_in_bytes, -seq, alloc)
            if len(wasters) < top:
                heapq.heappush(wasters, item)
            elif top and item > wasters[0]:
                heapq.heapreplace(wasters, item)
    if text_mm is not None:
        mm.notes[:0] = [n for n in text_mm.notes if not n.startswith("tuple tables sized")]
    if mm.platform == _TPU:
        # XLA:TPU's temp_size_in_bytes comes from libtpu's allocator, which
        # runs after the buffer assignment: no dump file determines it
        mm.hbm_temp_allocation_bytes = mm.space(0).temporaries
        mm.temp_size_in_bytes = None
        mm.reasons["temp_size_in_bytes"] = (
            "XLA:TPU takes it from libtpu's allocator, which runs after the buffer assignment: "
            "no dump file determines it (memory_analysis() on the compiled program gives it, "
            "as does the 'HLO temp' line under 'Program hbm requirement' in libtpu's INFO log, "
            "TPU_LOG_DIR); the buffer assignment's device-memory temporaries are "
            "hbm_temp_allocation_bytes")
    if mm.allocation_count == 0:
        raise UnreadableInputError(
            f"no allocations in the buffer assignment {path or ''}".rstrip()
            + (f" ({ba_warnings.total} lines could not be read; the first: {ba_warnings[0]})"
               if ba_warnings else ""))
    mm.largest = [x[2] for x in sorted(largest, reverse=True)]
    spaces = mm.memory_spaces.values()
    summary = summarize_padding(sum(t.padding for t in spaces), sum(t.total for t in spaces),
                                [x[2] for x in wasters], top=top)
    mm.padding_summary = summary
    mm.padding_wasters = summary.listed
    for text, (got, ours, problem, label, line, count) in mismatches.items():
        times = f" ({count} values)" if count > 1 else ""
        if problem is not None:
            mm.warnings.append(f"value {label} (line {line}) has shape {text}{times}: XLA gives it "
                               f"{got} bytes, xlashape cannot size it: {problem}")
        elif "{" not in text:
            # reducers XLA:TPU generates (e.g. a gather's bounds check) keep
            # layout-less scalars, which it sizes by a layout it does not print
            mm.notes.append(f"value {label} (line {line}) has shape {text}{times} without a "
                            f"layout: XLA gives it {got} bytes, xlashape {ours} (the size of "
                            "its elements; the layout XLA used for it is not in the dump)")
        else:
            mm.warnings.append(f"value {label} (line {line}) has shape {text}{times}: XLA gives it "
                               f"{got} bytes, xlashape's size of the shape is {ours} bytes "
                               "(a layout feature xlashape does not model, or a bug)")
    if report_path is not None:
        try:
            _check_report(mm, read_memory_usage_report(pathlib.Path(report_path)))
        except (OSError, UnreadableInputError) as e:
            mm.warnings.append(f"the memory-usage report could not be read: {e}")

    def reread():
        for a in allocations():
            yield _allocation_from_ba(a, platform, sizes, mm.chip)

    mm._reread = reread
    return mm


# -- protobuf inputs (--xla_dump_hlo_as_proto, serialized_buffer_assignment_proto) ----

_PROTO_KINDS = ("hlo-proto", "buffer-assignment-proto", "memory-report-proto")
_HLO_PB_SUFFIXES = ("after_optimizations.hlo.pb", "after_optimizations.hlo.pb.gz")


def _proto_kind(source) -> Optional[Tuple[str, object]]:
    """Which of XLA's messages ``source`` (a path or bytes) holds, and the
    message, read and parsed once (:func:`xlashape.protos.read_xla_proto`);
    ``None`` if none. A gzip file past the decompression limit, or a corrupt
    one, raises ``UnreadableInputError``."""
    try:
        msg = protos.read_xla_proto(source)
    except ProtoDecodeError:
        return None
    kind = ("hlo-proto" if isinstance(msg, protos.HloProto) else
            "buffer-assignment-proto" if isinstance(msg, protos.BufferAssignmentProto) else
            "memory-report-proto")
    return kind, msg


def _proto_allocations(ba, module, platform) -> Callable[[], Iterator[BufferAllocation]]:
    """The allocations of a ``BufferAssignmentProto`` as the records the text
    route reads from ``*-buffer-assignment.txt``: each logical buffer a value,
    named, shaped and labelled from ``module`` (an
    :class:`~xlashape.hlo_proto.HloProtoModule`; ``None``: ids only, no shapes)."""
    shapes: Dict[str, Shape] = {}
    params: Dict[int, Shape] = {}
    names: Dict[int, str] = {}
    if module is not None:
        names = module.instruction_ids
        for comp in module.computations:
            for ins in comp.instructions:
                shapes[ins.name] = ins.shape
                if comp.is_entry and ins.opcode == "parameter" and ins.parameter_number is not None:
                    params[ins.parameter_number] = ins.shape
    logical = {lb.id: lb for lb in ba.logical_buffers}
    texts: Dict[int, str] = {}

    def value(a, assigned) -> BufferValue:
        lb = logical.get(assigned.logical_buffer_id)
        loc = lb.defined_at if lb is not None else None
        name = (names.get(loc.instruction_id) or loc.instruction_name) if loc is not None else ""
        name = name or f"buffer.{assigned.logical_buffer_id}"
        index = tuple(loc.shape_index) if loc is not None else ()
        shape = whole = shapes.get(name)
        try:
            for i in index:
                shape = shape.tuple_shapes[i] if shape is not None and i >= 0 else None
        except (IndexError, AttributeError):
            shape = None
        text = ""
        if shape is not None:
            text = texts.get(id(shape))
            if text is None:
                text = texts[id(shape)] = str(shape)
        label = name + ("{" + ",".join(map(str, index)) + "}"
                        if whole is not None and whole.is_tuple else "")
        return BufferValue(assigned.logical_buffer_id, name, index, False,
                           lb.color if lb is not None else a.color, assigned.size,
                           assigned.offset, text, shape, 0, label)

    def records() -> Iterator[BufferAllocation]:
        for a in ba.buffer_allocations:
            r = BufferAllocation(a.index, a.size, "")
            r.color = a.color
            r.maybe_live_out = a.maybe_live_out
            r.is_thread_local = a.is_thread_local
            r.is_constant = a.is_constant
            r.parameter_number = a.parameter_number if a.is_entry_computation_parameter else None
            r.parameter_index = tuple(a.parameter_shape_index)
            p = params.get(a.parameter_number) if a.is_entry_computation_parameter else None
            r.parameter_shape = str(p) if p is not None else None
            # BufferAllocation::IsPreallocatedTempBuffer
            r.is_preallocated_temp = not (a.is_entry_computation_parameter or a.maybe_live_out
                                          or a.is_thread_local or a.is_constant)
            r.kind = ("parameter" if r.parameter_number is not None else
                      "temp" if r.is_preallocated_temp else
                      "thread-local" if a.is_thread_local else
                      "constant" if a.is_constant else "output")
            r.values = [value(a, x) for x in a.assigned]
            yield r

    return records


def _report_spaces(report) -> List[MemorySpaceUsage]:
    return [MemorySpaceUsage(space_label(e.memory_space_color), e.memory_space_color,
                             e.total_bytes) for e in report.memory_space_allocation_entries]


def _module_from_proto(hlo, path: Optional[str], ctx: _Context, *, key: str = "",
                       report=None, optimized: bool = True) -> ModuleMemory:
    """A module's figures from an ``HloProto``: the text figures from its
    module, the allocations from its buffer assignment, the peak from its heap
    simulator traces. ``report``: the memory-usage report's path (text) or
    ``MemoryUsageReportProto``."""
    try:
        module = module_from_proto(hlo)
    except XlaShapeError as e:
        raise UnreadableInputError(f"{path or 'the HLO proto'}: {e}") from None
    protos.check_sizes(hlo, path or "the HLO proto")
    if report is not None and not isinstance(report, str):
        protos.check_sizes(report, path or "the memory-usage report")
    lines = module.to_text().splitlines()
    mm = _module_from_lines(lines, ctx, "dump", path)
    mm.optimized = optimized
    platform = _platform_from_key(key) if key else None
    if platform is not None:
        mm.platform = platform
    if ctx.platform is not None:
        mm.platform = ctx.platform
    mm.from_proto = True
    if not hlo.HasField("buffer_assignment"):
        mm.warnings.append("the HLO proto holds no buffer assignment (XLA writes one into the "
                           "module after optimizations): figures from its module only")
        return mm
    ba = hlo.buffer_assignment
    records = _proto_allocations(ba, module, mm.platform)
    bm = _module_from_buffer_assignment(None, report if isinstance(report, str) else None, ctx,
                                        mm, path, None, records=records)
    bm.from_proto = True
    if report is not None and not isinstance(report, str):
        _check_report(bm, _report_spaces(report))
    if ctx.peak:
        bm.peak = _peak_of_proto(hlo, module, bm.platform, bm.chip, check=False)  # checked above
        bm.peak.schedule = None
        if bm.peak.live_at_peak:
            # op paths and source lines, from the module text made above
            names = {b.instruction for b in bm.peak.live_at_peak}
            found = read_locations(lines, names=names)
            bm.peak.live_at_peak = [b._replace(op_name=found[b.instruction].op_name,
                                               source=found[b.instruction].source)
                                    if b.instruction in found else b
                                    for b in bm.peak.live_at_peak]
    src = getattr(mm, "_text_source", None)
    if src is not None:
        _check_text_figures(mm, bm, src, ctx)
    return bm


def _analyze_proto(kind: str, source, path: Optional[str], ctx: _Context) -> MemoryAnalysis:
    """``.hlo.pb`` / ``.hlo.pb.gz``, ``serialized_buffer_assignment_proto``
    or ``*-memory-usage-report.pb`` (a path or the bytes)."""
    result = MemoryAnalysis("dump", path)
    where = path or "the given bytes"
    if kind == "hlo-proto":
        hlo = protos.read_hlo_proto(source)
        key = report = None
        if path is not None:
            base = os.path.basename(path)
            for suffix in _HLO_PB_SUFFIXES:
                if base.endswith(suffix):
                    key = base[: -len(suffix)]
                    rep = os.path.join(os.path.dirname(path), key + _MEMORY_REPORT_TXT)
                    report = rep if os.path.exists(rep) else None
        result.modules.append(_module_from_proto(hlo, path, ctx, key=key or "", report=report))
    elif kind == "memory-report-proto":
        if path is not None:
            base = os.path.basename(path)
            stem = base[: -len(".gz")] if base.endswith(".gz") else base
            if stem.endswith("-memory-usage-report.pb"):
                hlo_pb = os.path.join(os.path.dirname(path),
                                      stem[: -len("-memory-usage-report.pb")] + ".hlo.pb")
                beside = os.path.lexists(hlo_pb) and hlo_pb.endswith(_HLO_PB_SUFFIXES[0])
                problem = _unreadable(hlo_pb) if beside else None
                if problem is not None:         # a FIFO, a dangling link: the report alone
                    ctx.warn(DumpWarning(hlo_pb, problem))
                elif beside:
                    key = os.path.basename(hlo_pb)[: -len(_HLO_PB_SUFFIXES[0])]
                    mm = _module_from_proto(protos.read_hlo_proto(hlo_pb), hlo_pb, ctx, key=key,
                                            report=protos.read_memory_usage_report(source))
                    result.modules.append(mm)
                    result.warnings = ctx.warnings
                    return result
        result.modules.append(_module_from_memory_report(protos.read_memory_usage_report(source),
                                                          where, ctx))
    else:
        ba = protos.read_buffer_assignment(source)
        if not len(ba.buffer_allocations):
            raise UnreadableInputError(f"{where}: a BufferAssignmentProto without allocations")
        protos.check_sizes(ba, where)
        mm = ModuleMemory(None, "dump", path)
        mm.platform = ctx.platform
        mm.from_proto = True
        bm = _module_from_buffer_assignment(None, None, ctx, mm, path, None,
                                            records=_proto_allocations(ba, None, ctx.platform))
        bm.from_proto = True
        bm.notes.append("a BufferAssignmentProto alone (memory_analysis()."
                        "serialized_buffer_assignment_proto): no module, so no names or shapes")
        need = ("the buffer assignment alone names no instructions or shapes: give the "
                "dump's .hlo.pb (--xla_dump_hlo_as_proto), which holds the module too")
        if bm.platform is None and bm.temp_size_in_bytes is not None:
            bm.hbm_temp_allocation_bytes = bm.temp_size_in_bytes
            bm.temp_size_in_bytes = None
            bm.reasons["temp_size_in_bytes"] = (
                "the platform is not known (say platform=/--platform): on TPU XLA takes it from "
                "libtpu's allocator, not from the buffer assignment; its temporaries are "
                "hbm_temp_allocation_bytes")
        if ctx.peak:
            hlo = protos.HloProto()
            hlo.buffer_assignment.CopyFrom(ba)
            pa = peak_from_hlo_proto(hlo, bm.platform, check=False)   # checked above
            for k in ("peak_memory_in_bytes", "peak_unpadded_heap_bytes"):
                if k == "peak_memory_in_bytes" and bm.platform == "cpu":
                    continue  # XLA:CPU: the whole-program buffers alone
                if k in pa.figures or k in pa.reasons:
                    pa.figures[k] = None
                    pa.reasons[k] = (
                        ("no heap simulator traces in this buffer assignment "
                         "(serialized_buffer_assignment_proto carries none): " if
                         k == "peak_memory_in_bytes" else
                         "the unpadded sizes need the buffers' shapes: ") + need)
            bm.peak = pa
        result.modules.append(bm)
    result.warnings = ctx.warnings
    return result


def _module_from_memory_report(report, where: str, ctx: _Context) -> ModuleMemory:
    """A ``*-memory-usage-report.pb`` alone: its memory spaces' totals and
    allocations by size; which allocation is an argument, an output or a
    temporary it does not say."""
    protos.check_sizes(report, where)
    mm = ModuleMemory(None, "memory-report", where)
    mm.platform = ctx.platform
    mm.from_proto = True
    allocs = []
    for e in report.memory_space_allocation_entries:
        t = mm.space(e.memory_space_color)
        t.reported_total = t.total = e.total_bytes
        for x in e.allocation_entries:
            allocs.append(Allocation("other", x.size, None, e.memory_space_color, None,
                                     list(x.defining_positions), index=x.index))
    mm.allocation_count = len(allocs)
    why = ("the memory-usage report lists allocations by size only, not which hold arguments, "
           "outputs or temporaries: give the dump's .hlo.pb or directory")
    for k in ("argument_size_in_bytes", "output_size_in_bytes", "alias_size_in_bytes",
              "temp_size_in_bytes", "host_argument_size_in_bytes", "host_output_size_in_bytes",
              "host_alias_size_in_bytes", "host_temp_size_in_bytes"):
        setattr(mm, k, None)
        mm.reasons[k] = why
    _rank(mm, allocs, ctx.top)
    return mm


def _peak_of_proto(hlo, module, platform: Optional[str], chip=None, *, check: bool = True
                   ) -> PeakAnalysis:
    """:func:`~xlashape.peak.peak_from_hlo_proto` with unpadded sizes from
    xlashape's size model of each logical buffer's shape (``module``: the
    :class:`~xlashape.hlo_proto.HloProtoModule`, or ``None`` to read the
    shapes from the proto)."""
    shapes = {}
    for comp in hlo.hlo_module.computations:
        for ins in comp.instructions:
            shapes[ins.id] = ins.shape
    cache: dict = {}
    sizes: dict = {}

    def unpadded(lb):
        sp = shapes.get(lb.defined_at.instruction_id)
        if sp is None:
            return lb.size
        for i in lb.defined_at.shape_index:
            if not 0 <= i < len(sp.tuple_shapes):     # never from the end
                return lb.size
            sp = sp.tuple_shapes[i]
        if len(sp.tuple_shapes):
            return 8 * len(sp.tuple_shapes)
        key = (sp.SerializeToString(deterministic=True), lb.size)
        got = cache.get(key)
        if got is None:
            try:
                got = _sizes_cached(sizes, Shape.from_proto(sp), platform, chip)[1]
            except XlaShapeError:
                got = None
            cache[key] = got = lb.size if got is None else min(got, lb.size)
        return got

    describe = None
    if module is not None:
        names = module.instruction_ids
        by_name = {i.name: i.shape for c in module.computations for i in c.instructions}
        texts: dict = {}

        def describe(lb):
            loc = lb.defined_at
            name = names.get(loc.instruction_id) or loc.instruction_name
            whole = shape = by_name.get(name)
            try:
                for i in loc.shape_index:
                    shape = shape.tuple_shapes[i] if shape is not None and i >= 0 else None
            except (IndexError, AttributeError):
                shape = None
            label = name + ("{" + ",".join(map(str, loc.shape_index)) + "}"
                            if whole is not None and whole.is_tuple else "")
            text = ""
            if shape is not None:
                text = texts.get(id(shape))
                if text is None:
                    text = texts[id(shape)] = str(shape)
            return name, label, text

    return peak_from_hlo_proto(hlo, platform, unpadded=unpadded, describe=describe, check=check)


# -- out-of-memory reports -----------------------------------------------------------


_OOM_KINDS = {"hlo temp": "temp", "scoped": "scoped", "global": "global", "overlays": "overlays"}


def _analyze_oom(lines, ctx: _Context, path: Optional[str]) -> MemoryAnalysis:
    reports = read_oom_reports(lines, on_warning=ctx.warn)
    if not reports:
        raise UnreadableInputError(f"no out-of-memory report found in {path or 'the input'}")
    result = MemoryAnalysis("oom", path)
    # libtpu logs the same report again when it suppresses the crash
    for r in distinct_reports(reports):
        if r.platform == "gpu":
            result.modules.append(_module_from_gpu_oom(r, path))
        else:
            result.modules.append(_module_from_oom(r, ctx, path))
    for m in result.modules[:-1]:
        m.superseded = True
    result.warnings = ctx.warnings
    return result


def _module_from_oom(r, ctx: _Context, path: Optional[str]) -> ModuleMemory:
    mm = ModuleMemory(r.module_name, "oom", path)
    mm.platform = _TPU
    mm.memory_used_bytes = r.used_bytes
    mm.memory_limit_bytes = r.limit_bytes
    mm.argument_size_in_bytes = r.argument_bytes
    mm.output_size_in_bytes = r.output_bytes
    mm.alias_size_in_bytes = r.alias_bytes
    mm.host_argument_size_in_bytes = None
    mm.host_output_size_in_bytes = None
    mm.host_alias_size_in_bytes = None
    allocations = []
    sizes = ctx.sizes
    chip = ctx.chip
    if chip is None:
        # a tuple's table in the report shows the chip's rounding
        for e in r.allocations:
            if e.shape is not None and e.shape.is_tuple:
                n = len(e.shape.tuple_shapes)
                for g in (512, 32):
                    if e.size_text == format_bytes(tuple_table_size(n, _TPU, g)) != format_bytes(
                            tuple_table_size(n, _TPU, 544 - g)):
                        chip = g
                if chip is not None:
                    mm.notes.append(f"tuple tables take {chip}-byte granules in this report ("
                                    + ("TPU v4/v5e" if chip == 512 else "TPU v5p/v6e") + ")")
                    break
    mm.chip = chip
    for e in r.allocations:
        size = e.size
        unpadded = e.unpadded_size
        sp = 0
        text = e.shape_text
        if e.shape is not None:
            text = shape_text(e.shape)
            sp = _space(e.shape)
            exact, exact_unpadded, _ = _sizes_cached(sizes, e.shape, _TPU, chip)
            if exact is not None and format_bytes(exact) == e.size_text:
                size = exact
                # the report gives no unpadded size for arguments and outputs:
                # the shape does
                if exact_unpadded is not None and (
                        e.unpadded_text is None
                        or format_bytes(exact_unpadded) == e.unpadded_text):
                    unpadded = exact_unpadded
            elif exact is not None:
                mm.warnings.append(
                    f"allocation {e.rank} ({e.section}, line {e.line}): the report says "
                    f"{e.size_text}, xlashape's size of {text} is {format_bytes(exact)} ({exact} bytes)")
        if unpadded is None and e.padding is not None and size is not None:
            unpadded = size - e.padding
        label = e.label or ""
        if e.section == "arguments and outputs":
            kind = "parameter" if label.startswith("Argument") else (
                "output" if label.startswith("Output") else "other")
        else:
            at = (e.allocation_type or "").strip()
            kind = _OOM_KINDS.get(at.lower(), at.lower() or "other")
        name = e.instruction_name
        allocations.append(Allocation(
            kind, size, unpadded, sp, text, [name] if name else [], index=e.rank,
            label=e.label, allocation_type=e.allocation_type, op_name=e.op_name,
            size_text=e.size_text, shape_obj=e.shape))
    mm._allocations = allocations
    mm.allocation_count = len(allocations)
    _rank(mm, allocations, ctx.top)
    # would it fit without the padding? The temporaries' padding is the
    # "HLO temp" line's padded minus unpadded size when the report prints it,
    # else the listed temporaries' extra memory; the arguments' and outputs'
    # comes from their shapes (the report lists those with a shape only).

    parts = []
    temp_padding = None
    if r.temp_padded_text is not None and r.temp_unpadded_text is not None:
        temp_padding = (_parse_report_size(r.temp_padded_text)
                        - _parse_report_size(r.temp_unpadded_text))
        parts.append(("the HLO temporaries", temp_padding))
    else:
        listed = [a for a in allocations if a.kind not in ("parameter", "output")
                  and a.unpadded_size_in_bytes is not None]
        if listed:
            temp_padding = sum(a.padding_in_bytes for a in listed)
            parts.append(("the listed temporaries", temp_padding))
    io = [a for a in allocations if a.kind in ("parameter", "output")
          and a.unpadded_size_in_bytes is not None]
    if io:
        parts.append(("the listed arguments and outputs", sum(a.padding_in_bytes for a in io)))
    padding = sum(p for _, p in parts) if parts else None
    basis = " and ".join(w for w, _ in parts) if parts else None
    fits = None
    used, limit = r.used_bytes, r.limit_bytes
    over = used is not None and limit is not None and used > limit
    if r.form == "short":
        note = ("the two-line message gives totals only, so how much of them is padding is "
                "not known (see the warning for where the breakdown is)")
    elif padding is None:
        note = "the report does not say how much of the memory is padding"
    elif padding == 0:
        note = f"{basis} carry no padding: removing padding would not help"
        fits = False if over else None
    elif used is None or limit is None:
        note = f"padding in {basis}: {format_bytes(padding)}"
    else:
        without = used - padding
        fits = without <= limit
        what = ", ".join(f"{format_bytes(p)} in {w}" for w, p in parts if p)
        if fits:
            note = (f"without the padding ({what}) it would need about "
                    f"{format_bytes(without)} of {format_bytes(limit)}: it would fit")
        else:
            note = (f"without the padding ({what}) it would still need about "
                    f"{format_bytes(without)} of {format_bytes(limit)}: "
                    f"{format_bytes(without - limit)} too much")
        if temp_padding is not None and not (r.temp_padded_text and r.temp_unpadded_text):
            note += " (temporaries the report does not list may be padded too)"
    mm.oom = OomSummary(r.form, r.memory_space, used, limit, r.excess_bytes, padding, basis, fits, note)
    if r.form == "short":
        mm.warnings.append("the per-buffer breakdown is not in this message: " + BREAKDOWN_HINT)
    return mm


class GpuOomSummary(NamedTuple):
    """What XLA:GPU's out-of-memory messages say (the ``oom`` of a module
    read from them; see :class:`xlashape.oom_report.GpuOomReport`):
    the fields of :class:`OomSummary` (``used``: what XLA's
    rematerialization pass says the program needs, when it was logged) and
    ``requested_bytes`` / ``requested_text`` (the allocation that failed),
    ``allocator`` (``GPU_0_bfc``), ``origin`` (``allocator`` or
    ``autotuner``), ``memory_limit_source``, ``remat_target_bytes``, and
    ``matching_buffers``: given the dump of the same program
    (``analyze(..., dump=DIR)``), the allocations of that size."""

    form: str
    memory_space: str
    used: Optional[int]
    limit: Optional[int]
    excess: Optional[int]
    padding_bytes: Optional[int]
    padding_basis: Optional[str]
    fits_without_padding: Optional[bool]
    note: str
    requested_bytes: Optional[int]
    requested_text: Optional[str]
    requested_exact: bool
    allocator: Optional[str]
    origin: str
    memory_limit_source: Optional[str]
    remat_target_bytes: Optional[int]
    matching_buffers: Optional[list]

    def to_json(self) -> dict:
        return dict(self._asdict())


def _module_from_gpu_oom(r, path: Optional[str]) -> ModuleMemory:
    mm = ModuleMemory(r.executable_name, "oom", path)
    mm.platform = "gpu"
    mm.memory_limit_bytes = r.memory_limit_bytes
    mm.memory_used_bytes = r.used_bytes
    for k in ("argument_size_in_bytes", "output_size_in_bytes", "alias_size_in_bytes",
              "host_argument_size_in_bytes", "host_output_size_in_bytes",
              "host_alias_size_in_bytes"):
        setattr(mm, k, None)
    mm._allocations = []
    what = ("XLA's autotuner ran out of memory while trying configurations (the program "
            "itself may fit)" if r.origin == "autotuner"
            else "the allocation failed when the program ran" if r.requested_text
            else "no allocation failed in this text: XLA's rematerialization warns that the "
                 "program needs more than it aimed at; the allocator decides when it runs")
    note = what
    mm.oom = GpuOomSummary(
        "gpu", "device", r.used_bytes, r.memory_limit_bytes, r.excess_bytes, None, None, None,
        note, r.requested_bytes, r.requested_text, r.requested_exact, r.allocator, r.origin,
        r.memory_limit_source, None if r.remat is None else r.remat.target_bytes, None)
    mm._gpu_report = r
    if r.memory_limit_bytes is None:
        mm.notes.append("the memory limit is not in this text: XLA's log of the same run gives "
                        "it (the allocator's stats or XLA's scheduler's 'base limit')")
    return mm


def match_oom_dump(result: MemoryAnalysis, dump, *, top: int = 10) -> None:
    """Given the dump of the same program (a directory, or what
    :func:`analyze` made of it), name in each XLA:GPU out-of-memory module of
    ``result`` the allocations whose size is the failed request
    (``oom.matching_buffers``: module, allocation index, kind, size, the
    values in it), largest first."""
    dumped = dump if isinstance(dump, MemoryAnalysis) else analyze(dump, top=top)
    for mm in result.modules:
        r = getattr(mm, "_gpu_report", None)
        if r is None:
            continue
        found = []
        # the dump's module of the failed executable, when the message names it
        named = [dm for dm in dumped.modules if r.executable_name and dm.name == r.executable_name]
        for dm in named or dumped.modules:
            for a in buffers_of_request(r, dm.iter_allocations()):
                found.append({"module": dm.name, "index": a.index, "kind": a.kind,
                              "size_in_bytes": a.size_in_bytes, "shape": a.shape,
                              "names": list(a.values)[:8]})
        mm.oom = mm.oom._replace(matching_buffers=found)
        if not found:
            mm.notes.append(f"no allocation of the dump has the requested size "
                            f"({r.requested_text}): is it the dump of the same program?")


# -- JAX compiled objects ------------------------------------------------------------


def _analyze_jax(compiled, ctx: _Context) -> MemoryAnalysis:
    text = compiled.as_text()
    if not isinstance(text, str) or not text.strip():
        raise UnreadableInputError("the compiled object's as_text() gave no HLO text")
    result = _analyze_text(text, ctx, None)
    result.kind = "jax"
    stats = compiled.memory_analysis()
    mm = result.modules[0]
    mm.source = "jax"
    if stats is not None:
        mm.memory_analysis = {k: getattr(stats, k) for k in dir(stats)
                              if (k.endswith("_in_bytes") or k in PEAK_FIELDS)
                              and isinstance(getattr(stats, k), int)
                              and not isinstance(getattr(stats, k), bool)}
        # what the module text cannot determine, XLA's own object says:
        # its temporaries (the text has no buffer assignment)
        for k in ("temp_size_in_bytes", "host_temp_size_in_bytes"):
            if mm.memory_analysis.get(k) is not None:
                setattr(mm, k, mm.memory_analysis[k])
        for k in ("argument_size_in_bytes", "output_size_in_bytes", "alias_size_in_bytes",
                  "host_argument_size_in_bytes", "host_output_size_in_bytes"):
            theirs = mm.memory_analysis.get(k)
            if theirs is not None and theirs != getattr(mm, k):
                mm.warnings.append(f"{k}: memory_analysis() says {theirs}, the module text gives "
                                   f"{getattr(mm, k)}")
    return result
