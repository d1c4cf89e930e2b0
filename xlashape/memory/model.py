"""The model: what the accounting makes of one input, and every view reads.

Plain result types, filled by :mod:`xlashape.memory.account` from the records
of :mod:`xlashape.memory.records`; nothing here reads a file, and the views
(:mod:`xlashape.reporters`) read nothing else:

- :class:`MemoryAnalysis`: what :func:`xlashape.memory.analyze` returns, the
  modules (or out-of-memory reports) of one input and the readers' warnings;
- :class:`ModuleMemory`: one module's figures under XLA's names (or ``None``
  with the reason), its memory spaces, every :class:`Allocation` (with the
  :class:`ValueInfo` of each value in it), the largest and most padded ones,
  the JAX op path and source line of its instructions (``locations``), and
  its :class:`PeakAnalysis`;
- :class:`PeakAnalysis`: the peak figures, the heap over program order per
  memory space, what is live at the peak (:class:`PeakBuffer`), the
  allocation timeline of the peak's heap (:class:`TimelineBuffer`);
- :class:`OomSummary` / :class:`GpuOomSummary`: what an out-of-memory report
  says and what follows from it; :class:`PaddingExplanation`: why a buffer is
  padded and the fixes, with the sizes they give;
- :class:`ModuleAudit`: what XLA did with the program's buffers -- each
  donation (:class:`Donation`) and whether an output reuses it, the copies
  made only to change a layout (:class:`LayoutCopy`), the moves between
  memory spaces (:class:`SpaceMove`);
- :class:`PackedAllocation`: xlashape's own packing of a temporary allocation
  (:mod:`xlashape.memory.packing`), :class:`WhatIf`: a prediction of the
  figures after edits (:mod:`xlashape.memory.whatif`), never XLA's.
"""

from __future__ import annotations

from typing import Callable, Dict, Iterator, List, NamedTuple, Optional, Tuple

from ..allocation_kinds import OUTPUT, PARAMETER, TEMPORARY
from ..errors import XlaShapeError
from ..hlo_warnings import WarningList
from ..layout import memory_space_name
from ..live_range import Location
from ..padding import Fix, advice, origin_of
from ..shape import Shape
from ..tiling import format_bytes
from .figures import HEADER_FIELDS, PEAK_FIELDS, STATS_FIELDS, host_twin
# the audit's and the predictions' types, in modules of their own, are the
# model's too
from .model_audit import DONATION_WHY, Donation, LayoutCopy, ModuleAudit, SpaceMove
from .model_predictions import FixPrediction, PackedAllocation, PackedValue, WhatIf

__all__ = ["PaddingExplanation", "ValueInfo", "Allocation", "SpaceTotals", "OomSummary",
           "GpuOomSummary", "AutotuneSummary", "AutotuneInstruction", "ModuleMemory",
           "MemoryAnalysis", "PeakBuffer", "PeakAnalysis",
           "TimelineBuffer", "Timeline", "TIMELINE_BUFFERS", "SMALL_BUFFER_BYTES", "HEAP_POINTS",
           "space_label", "space_tag", "SPACE_LABELS", "explain_padding", "SCHEMA_VERSION",
           "distinct_bytes", "Donation", "LayoutCopy", "HeapOverAllocation", "SpaceMove",
           "ModuleAudit", "DONATION_WHY", "PackedValue", "PackedAllocation", "WhatIf",
           "FixPrediction"]


#: the version of the ``--json`` documents and :meth:`MemoryAnalysis.to_json`
#: (2: a temporary allocation's kind is ``"temporary"``, no longer ``"temp"``)
SCHEMA_VERSION = 2

#: one name per memory space, in every command and view (``S(n)``)
SPACE_LABELS = {0: "device memory", 1: "VMEM (fast on-chip memory)", 2: "SMEM (scalar memory)",
                5: "host memory"}


#: a short name per memory space, for a tag beside each buffer (TPU: its
#: on-chip memories by name; elsewhere device memory is the GPU's or the host's RAM)
_SPACE_TAGS = {"tpu": {0: "HBM", 1: "VMEM", 2: "SMEM", 5: "host"}}
_SPACE_TAGS_OTHER = {0: "device", 5: "host"}


def space_tag(color: int, platform: Optional[str] = None) -> str:
    """A short name of memory space ``S(color)`` on ``platform``: ``HBM``,
    ``VMEM``, ``SMEM``, ``host`` on TPU; ``device`` / ``host`` elsewhere;
    ``S(n)`` for another.

    >>> space_tag(1, "tpu"), space_tag(0, "tpu"), space_tag(0, "gpu"), space_tag(6, "tpu")
    ('VMEM', 'HBM', 'device', 'S(6)')
    """
    return _SPACE_TAGS.get(platform or "", _SPACE_TAGS_OTHER).get(color, f"S({color})")


def space_label(color: int, reported: Optional[str] = None) -> str:
    """The name of memory space ``S(color)`` (one table for every view), with
    the name XLA's memory-usage report gives it when that differs (XLA:TPU
    calls host memory ``cmem``)."""
    base = SPACE_LABELS.get(color) or (reported if reported and reported != "default"
                                       else f"memory space {color}")
    if reported and reported != "default" and reported.lower() not in base.lower():
        return f"{base}, '{reported}' in XLA's report"
    return base


class PaddingExplanation(NamedTuple):
    """Why a buffer is padded and what would make it smaller: ``sources``
    (one sentence per padding source, largest first), ``fixes``
    (:class:`xlashape.padding.Fix`: ``kind``, ``text`` and the
    ``size_in_bytes`` the buffer would take; smallest first), ``note`` (about
    where its layout comes from), ``origin`` (see :data:`xlashape.padding.ORIGINS`)
    and the ``shape`` explained, from :func:`xlashape.padding.advice`."""

    sources: Tuple[str, ...]
    fixes: Tuple[Fix, ...]
    note: Optional[str] = None
    origin: Optional[str] = None
    shape: Optional[str] = None

    def to_json(self) -> dict:
        return {"shape": self.shape, "sources": list(self.sources),
                "fixes": [f.to_json() for f in self.fixes], "origin": self.origin,
                "note": self.note}


_EXPLAINED: Dict[tuple, Optional[PaddingExplanation]] = {}


def explain_padding(shape, origin: Optional[str] = None) -> Optional[PaddingExplanation]:
    """:class:`PaddingExplanation` for an array shape (a :class:`~xlashape.Shape`
    or its text) with padding, else ``None`` (no padding, not an array, or a
    layout xlashape cannot plan). ``origin`` (see :data:`xlashape.padding.ORIGINS`)
    decides the fixes: none for a compiler scratch buffer, the default layout
    first for a requested one (:func:`xlashape.padding.advice`). Remembered
    per shape and origin."""
    key = (shape, origin)
    if key in _EXPLAINED:
        return _EXPLAINED[key]
    result = None
    try:
        adv = advice(shape, origin=origin)
        if adv is not None:
            result = PaddingExplanation(adv.sources, adv.fixes, adv.note, origin, str(adv.shape))
    except XlaShapeError:
        result = None
    if len(_EXPLAINED) > 1 << 14:
        _EXPLAINED.clear()
    _EXPLAINED[key] = result
    return result


def distinct_bytes(chunks) -> int:
    """The bytes of memory the ``(offset, size)`` chunks of one allocation
    cover, each byte counted once: values that share memory (a loop's carried
    value, buffers the heap simulator placed at one offset at different
    times) are not added up. A chunk without an offset counts whole.

    >>> distinct_bytes([(0, 64), (0, 64), (32, 64), (None, 8)])
    104
    """
    spans = []
    loose = 0
    for offset, size in chunks:
        if not size:
            continue
        if offset is None:
            loose += size
        else:
            spans.append((offset, offset + size))
    spans.sort()
    total, end = 0, None
    for lo, hi in spans:
        if end is None or lo >= end:
            total += hi - lo
            end = hi
        elif hi > end:
            total += hi - end
            end = hi
    return total + loose


class ValueInfo(NamedTuple):
    """A value held by an allocation: ``name`` (the instruction; ``label``
    adds the ``{index}`` into its result when not the whole of it), its
    ``size_in_bytes`` and ``offset`` in the allocation (``None`` when not
    known), its ``shape`` text and ``unpadded_size_in_bytes``; ``id`` (the
    number XLA gives the value in the buffer assignment, ``None`` when not
    known) and ``shape_object`` (the parsed :class:`~xlashape.Shape`);
    ``workspace``: the library (``cuBLAS`` / ``cuDNN``) whose workspace it is
    -- the last element of the result of XLA:GPU's custom call to it
    (:func:`xlashape.allocation_kinds.workspace_of`) -- else ``None``."""

    name: str
    label: str
    size_in_bytes: Optional[int]
    offset: Optional[int]
    shape: Optional[str]
    unpadded_size_in_bytes: Optional[int]
    id: Optional[int] = None
    shape_object: Optional[Shape] = None
    workspace: Optional[str] = None

    @property
    def described(self) -> str:
        """``label shape`` (``custom-call.1{1} s8[33554432]{0}``), with
        ``(cuBLAS workspace)`` for a workspace."""
        text = f"{self.label} {self.shape}" if self.shape else self.label
        return text + (f" ({self.workspace} workspace)" if self.workspace else "")

    @property
    def padding_in_bytes(self) -> int:
        if self.size_in_bytes is None or self.unpadded_size_in_bytes is None:
            return 0
        return max(0, self.size_in_bytes - self.unpadded_size_in_bytes)

    def to_json(self) -> dict:
        return {"name": self.name, "label": self.label, "size_in_bytes": self.size_in_bytes,
                "offset": self.offset, "shape": self.shape,
                "unpadded_size_in_bytes": self.unpadded_size_in_bytes, "id": self.id,
                "workspace": self.workspace}


class Allocation:
    """One allocation: ``kind`` (``parameter``, ``output``, ``temporary``,
    ``thread-local``, ``constant``: :mod:`xlashape.allocation_kinds`; from an
    out-of-memory report also what the report calls it), ``size_in_bytes`` (padding included),
    ``unpadded_size_in_bytes``, ``memory_space`` (``S(n)``; XLA's colour in
    a buffer assignment), ``shape`` (as XLA prints it: the allocation's own
    shape when it holds one array -- one value, or values that all share its
    memory as one array, as a loop's carried value does, or an entry
    parameter's -- and ``None`` for an *arena*: a temporary allocation whose
    values of several shapes the heap simulator packed at their offsets),
    and ``values`` (the names of the instructions whose values it holds).
    :attr:`value_count`, :attr:`largest_value` and :attr:`holds` (one label
    every view prints: the shape, or "an arena of N values, the largest
    ...") say what it is; :attr:`workspaces`, the cuBLAS / cuDNN
    workspaces among its values.

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

    @property
    def value_count(self) -> int:
        """How many values it holds (of the buffer assignment; else the
        instructions named)."""
        return len(self.value_details) if self.value_details else len(self.values)

    @property
    def is_arena(self) -> bool:
        """It holds values of several shapes (no one shape is its own)."""
        return self.shape is None and len(self.value_details) > 1

    @property
    def largest_value(self) -> Optional[ValueInfo]:
        """Its largest value (the first of equal ones), ``None`` without values."""
        if not self.value_details:
            return None
        if len(self.value_details) == 1:
            return self.value_details[0]
        # an array before a tuple's table of pointers of the same size
        return max(self.value_details,
                   key=lambda v: (v.size_in_bytes or 0, not (v.shape or "").startswith("(")))

    @property
    def workspaces(self) -> List[ValueInfo]:
        """Its values that are cuBLAS / cuDNN workspaces."""
        return [v for v in self.value_details if v.workspace]

    @property
    def holds(self) -> Optional[str]:
        """What it holds, in one line every view prints: its shape (with
        ``(cuBLAS workspace of custom-call.1)`` when it is one), or for an
        arena ``arena of 355 values, the largest f32[8,1024,32768]{2,1,0}
        (1.00G, fusion.3)`` and its workspaces; ``None`` when nothing says."""
        if not self.is_arena:
            if self.shape is None:
                return None
            if len(self.value_details) == 1 and self.value_details[0].workspace:
                v = self.value_details[0]
                return f"{self.shape} ({v.workspace} workspace of {v.name})"
            return self.shape
        big = self.largest_value
        text = (f"arena of {len(self.value_details):,} values, the largest "
                f"{big.shape or '?'} ({format_bytes(big.size_in_bytes or 0)}, {big.label}"
                + (f": {big.workspace} workspace)" if big.workspace else ")"))
        ws = self.workspaces
        if ws:
            libs = sorted({v.workspace for v in ws})
            text += (f"; {len(ws)} {'/'.join(libs)} workspace{'s' if len(ws) != 1 else ''} "
                     f"({format_bytes(distinct_bytes((v.offset, v.size_in_bytes) for v in ws))}"
                     f"{' of memory' if len(ws) > 1 else ''})")
        return text

    def padded_value(self) -> Optional[ValueInfo]:
        """The value whose padding an arena's padding explanation is about
        (its most padded one); ``None`` when the allocation is one array."""
        if not self.is_arena:
            return None
        best = max(self.value_details, key=lambda v: v.padding_in_bytes)
        return best if best.padding_in_bytes > 0 and best.shape else None

    def explanation(self) -> Optional[PaddingExplanation]:
        """Why it is padded and what would fix it, for an allocation whose
        padding comes from one array shape (its own, or the most padded
        value in it); ``None`` without padding."""
        if self.padding_in_bytes <= 0:
            return None
        shape, own = self._padded()
        if shape is None:
            return None
        return explain_padding(shape, origin_of(shape, kind=self.kind if own else TEMPORARY,
                                                memory_space=self.memory_space, platform=None))

    def _padded(self):
        """The shape whose padding the allocation carries (a Shape object
        when the reader parsed one, else its text) and whether it is the
        allocation's own."""
        if self.value_details:
            best = max(self.value_details, key=lambda v: v.padding_in_bytes)
            if best.padding_in_bytes > 0 and best.shape:
                obj = best.shape_object
                # the allocation's own array: its shape, or in a parameter's or an
                # output's allocation holding several values the one that fills it
                own = best.shape == self.shape or (
                    self.shape is None and self.kind in (PARAMETER, OUTPUT)
                    and not best.offset and best.size_in_bytes == self.size_in_bytes)
                return (obj if obj is not None else best.shape), own
        if self._shape_obj is not None:
            return self._shape_obj, True
        return self.shape, True

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
            "holds": self.holds,
            "value_count": self.value_count,
            "values": list(self.values),
        }
        big = self.largest_value
        if big is not None:
            d["largest_value"] = {"name": big.name, "label": big.label, "shape": big.shape,
                                  "size_in_bytes": big.size_in_bytes}
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
            d["value_details"] = [v.to_json() for v in self.value_details]
        if explain:
            e = self.explanation()
            if e is not None:
                d["padding"] = e.to_json()
        return d

    def __repr__(self):
        return (f"<Allocation {self.kind} {self.size_in_bytes} bytes "
                f"(unpadded {self.unpadded_size_in_bytes}) S({self.memory_space}) {self.shape}>")


class HeapOverAllocation(NamedTuple):
    """A memory space whose heap rises above what its allocations hold
    (:meth:`ModuleMemory.heaps_over_allocations`): its ``memory_space``,
    the heap's top ``heap_bytes``, the ``allocated_bytes`` of its
    allocations, ``memory_at_peak`` (the bytes the buffers live at the peak
    take, each shared byte once; ``None`` outside the peak's space) and
    ``shared``, two buffers live at the peak at one offset (or ``None``)."""

    memory_space: int
    heap_bytes: int
    allocated_bytes: int
    memory_at_peak: Optional[int]
    shared: Optional[Tuple[str, str]]

    def sentence(self) -> str:
        """What it means, in the words every view prints."""
        text = (f"at its highest XLA's heap simulator counts {format_bytes(self.heap_bytes)} "
                f"live, more than the {format_bytes(self.allocated_bytes)} the buffer "
                f"assignment allocates in S({self.memory_space}): it counts each of the buffers "
                "live at once that the assignment places at the same offsets (an in-place "
                "update writes its operand's memory)")
        if self.memory_at_peak is not None:
            text += (f"; the buffers live at the peak take {format_bytes(self.memory_at_peak)} "
                     "of memory")
            if self.shared:
                text += f" ({self.shared[0]} and {self.shared[1]} share theirs)"
        return text


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

    Also: ``name``, ``source`` (``hlo``, ``dump``, ``oom``, ``jax``,
    ``memory-report``), ``buffer_assignment`` (whether the figures come from
    XLA's buffer assignment), ``path``, ``platform`` (``tpu`` when the layouts are
    tiled), ``chip`` (:class:`xlashape.sizes.Chip` or ``None``),
    ``memory_spaces`` (:class:`SpaceTotals` per ``S(n)``), ``warnings`` and
    ``notes`` (strings), :attr:`allocations`, ``largest`` /
    ``padding_wasters`` (the top allocations by size and by padding),
    ``padding_summary``, ``oom`` (:class:`OomSummary`), ``memory_analysis``
    (XLA's own figures when analysed from a JAX compiled object), ``peak``
    (:class:`PeakAnalysis`) and ``locations`` (instruction name ->
    :class:`xlashape.live_range.Location`: JAX op path and ``file:line``, for
    the instructions the module's allocations and peak name).

    A partitioned program (SPMD, or replicated) runs one copy of the module
    per device: its figures are one device's, ``devices`` says how many
    devices the program was compiled for (``None`` where the input does not
    say; ``num_partitions`` x ``replica_count`` of the module), ``device_kind``
    their kind when a JAX object said it (``TPU v5 lite``, ``cpu``), and
    ``parameter_shardings`` each entry parameter's sharding as XLA prints it.
    ``verdict``: will it fit, when ``analyze()`` was given a device or a limit.

    In a notebook the module displays as the memory page
    (:meth:`_repr_html_`), and ``str()`` is the terminal report.
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
        self.allocations: List[Allocation] = []
        self.largest: List[Allocation] = []
        self.padding_wasters: List[Allocation] = []
        #: :class:`xlashape.padding.PaddingSummary`: how much is padding, whether it matters
        self.padding_summary = None
        self.oom: Optional[OomSummary] = None
        self.memory_analysis: Optional[dict] = None
        self.allocation_count = 0
        self.value_count = 0
        #: the figures and allocations come from XLA's buffer assignment (a
        #: dump, its protobuf, or a JAX lowered function compiled with a dump)
        self.buffer_assignment = False
        #: read from XLA's protobuf (a ``.hlo.pb``, a serialized buffer
        #: assignment or memory-usage report) rather than its text files
        self.from_proto = False
        #: the peak and what is live at it (:class:`PeakAnalysis`), for a
        #: dump with a buffer assignment; else ``None``
        self.peak: Optional[PeakAnalysis] = None
        #: what XLA did with the buffers (:class:`ModuleAudit`): donations,
        #: layout copies, moves between memory spaces; ``None`` for an
        #: out-of-memory report or a memory-usage report alone
        self.audit: Optional[ModuleAudit] = None
        self.locations: Dict[str, Location] = {}
        self.devices: Optional[int] = None
        self.device_kind: Optional[str] = None
        self.parameter_shardings: Dict[int, str] = {}
        #: the :class:`~xlashape.memory.verdict.Verdict` against the device
        #: or limit given to ``analyze(..., device=/limit=)``, else ``None``
        self.verdict = None
        #: xlashape's packing of the temporary allocations (:class:`PackedAllocation`),
        #: when asked for (``analyze(..., packing=True)``); else ``None``
        self.packing: Optional[List["PackedAllocation"]] = None
        #: a prediction after edits (:class:`WhatIf`), when asked for
        self.what_if: Optional["WhatIf"] = None
        #: the padding fixes' predicted peaks (:class:`FixPrediction`), with the packing
        self.fix_predictions: List["FixPrediction"] = []

    def iter_allocations(self) -> Iterator[Allocation]:
        """The allocations one by one (:attr:`allocations`)."""
        return iter(self.allocations)

    def location(self, name: Optional[str]) -> Optional[Location]:
        """The op path and source line of instruction ``name`` (``None`` when
        the module does not say)."""
        return self.locations.get(name) if name else None

    def add_to_figure(self, figure: str, size: int, host: bool) -> None:
        """Add ``size`` to XLA's ``figure`` (``"argument_size_in_bytes"``,
        ...) or, for host memory, to its ``host_`` twin."""
        name = host_twin(figure) if host else figure
        setattr(self, name, getattr(self, name) + size)

    def space(self, memory_space: int) -> SpaceTotals:
        t = self.memory_spaces.get(memory_space)
        if t is None:
            t = self.memory_spaces[memory_space] = SpaceTotals(memory_space)
        return t

    def heaps_over_allocations(self) -> List["HeapOverAllocation"]:
        """The memory spaces whose heap (XLA's heap simulator's count, which
        the heap over program order follows) rises above the bytes the
        buffer assignment allocates in that space: buffers live at once that
        the assignment places at the same offsets (an in-place update writes
        its operand's memory) are each counted by the simulator. For the
        space of the peak, the memory its live buffers take (each shared
        byte once) and two of them that share memory."""
        pa = self.peak
        out: List[HeapOverAllocation] = []
        if pa is None:
            return out
        for color in sorted(pa.heap):
            h = pa.heap[color]["padded"]
            t = self.memory_spaces.get(color)
            if not len(h) or t is None or not t.total or max(h) <= t.total:
                continue
            taken, pair = None, None
            if color == pa.peak_memory_space and pa.peak_time is not None:
                live = [b for b in pa.live_at_peak if b.color == color]
                per: Dict[int, list] = {}
                for b in live:
                    per.setdefault(b.allocation, []).append(b)
                taken = sum(distinct_bytes((b.offset, b.size) for b in bs) for bs in per.values())
                for bs in per.values():
                    bs = sorted(bs, key=lambda b: (b.offset, -b.size))
                    for x, y in zip(bs, bs[1:]):
                        if y.offset < x.offset + x.size:
                            pair = (x.label, y.label)
                            break
                    if pair:
                        break
            out.append(HeapOverAllocation(color, int(max(h)), t.total, taken, pair))
        return out

    def figures(self) -> Dict[str, Optional[int]]:
        """The ``CompiledMemoryStats`` fields computed here, by XLA's names."""
        return {k: getattr(self, k) for k in STATS_FIELDS}

    def header_json(self) -> dict:
        """The module's JSON object without ``allocations`` (the CLI streams those)."""
        d = {"name": self.name}
        for k in HEADER_FIELDS:
            d[k] = getattr(self, k)
        return d

    def extra_json(self) -> dict:
        d = {"source": self.source, "from_proto": self.from_proto,
             "buffer_assignment": self.buffer_assignment, "platform": self.platform,
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
        d["devices"] = self.devices
        d["device_kind"] = self.device_kind
        d["parameter_shardings"] = {str(k): v for k, v in sorted(self.parameter_shardings.items())}
        d["verdict"] = None if self.verdict is None else self.verdict.to_json()
        if self.peak is not None:
            d["peak"] = self.peak.to_json()
            d["heaps_over_allocations"] = [x._asdict() for x in self.heaps_over_allocations()]
        if self.audit is not None:
            d["audit"] = self.audit.to_json()
        d["packing"] = None if self.packing is None else [p.to_json() for p in self.packing]
        d["what_if"] = None if self.what_if is None else self.what_if.to_json()
        d["fix_predictions"] = [f.to_json() for f in self.fix_predictions]
        return d

    def to_json(self) -> dict:
        """The module as ``xlashape memory --json`` prints it."""
        d = self.header_json()
        d.update(self.extra_json())
        d["allocations"] = [a.to_json() for a in self.allocations]
        return d

    def __repr__(self):
        return (f"<ModuleMemory {self.name} ({self.source}): arguments {self.argument_size_in_bytes}, "
                f"outputs {self.output_size_in_bytes}, temporaries {self.temp_size_in_bytes}>")

    def __str__(self) -> str:
        """The terminal report of this module (``xlashape memory``'s text)."""
        return _view("text")(self)

    def _repr_html_(self) -> str:
        """The memory page of this module as an HTML fragment (a notebook
        shows it inline)."""
        return _view("html")(self)


class MemoryAnalysis:
    """What :func:`analyze` found: ``modules`` (:class:`ModuleMemory`, one per
    module or report), ``kind`` of input (``hlo``, ``dump``, ``oom``, ``jax``),
    ``path``, and ``warnings`` (:class:`~xlashape.hlo_module.HloWarning` with
    line numbers, for lines that could not be read, and
    :class:`~xlashape.xla_dump.DumpWarning` for files of a dump that were
    skipped; the first 1000 are kept, ``warnings.total`` counts them all).

    ``print(analysis)`` prints the terminal report of ``xlashape memory``;
    a notebook shows the memory page inline (:meth:`_repr_html_`, an HTML
    fragment that restyles nothing around it)."""

    def __init__(self, kind: str, path: Optional[str] = None):
        self.kind = kind
        self.path = path
        self.modules: List[ModuleMemory] = []
        self.warnings: List = WarningList()

    def to_json(self) -> dict:
        return {"schema_version": SCHEMA_VERSION, "modules": [m.to_json() for m in self.modules]}

    def __iter__(self):
        return iter(self.modules)

    def __len__(self):
        return len(self.modules)

    def __getitem__(self, i):
        return self.modules[i]

    def __repr__(self):
        return f"<MemoryAnalysis {self.kind}: {len(self.modules)} modules>"

    def __str__(self) -> str:
        """The terminal report (``xlashape memory``'s text)."""
        return _view("text")(self)

    def _repr_html_(self) -> str:
        """The memory page as an HTML fragment, for a notebook: no
        ``<html>``/``<body>``, every style scoped to the fragment."""
        return _view("html")(self)


#: How the model is displayed: ``"text"`` and ``"html"`` -> a function of a
#: :class:`MemoryAnalysis` or :class:`ModuleMemory` giving the terminal
#: report / the page's HTML fragment. The views (:mod:`xlashape.reporters`)
#: read the model, so the model cannot import them: the public API
#: (:mod:`xlashape.memory`, a layer above the views) fills this table when
#: it is imported (:mod:`xlashape.memory.display`), which importing this
#: module always does first (it is its package).
VIEWS: Dict[str, Callable] = {}


def _view(kind: str) -> Callable:
    try:
        return VIEWS[kind]
    except KeyError:   # pragma: no cover - the package fills it on import
        raise XlaShapeError(f"no {kind} view of the memory model is installed "
                            "(import xlashape.memory)") from None




class AutotuneInstruction(NamedTuple):
    """One instruction XLA's autotuner could not configure: its ``name``, its
    output ``shape`` (as XLA's log prints it) and ``size_in_bytes`` (``None``
    when the log does not give the shape), ``configs_failed`` (how many
    configurations failed) and ``out_of_memory`` (how many of them ran out
    of memory), ``requested`` (what they asked for, as printed)."""

    name: str
    shape: Optional[str]
    size_in_bytes: Optional[int]
    configs_failed: int
    out_of_memory: int
    requested: Tuple[str, ...]

    def to_json(self) -> dict:
        d = self._asdict()
        d["requested"] = list(self.requested)
        return d


class AutotuneSummary(NamedTuple):
    """XLA's autotuner ran out of memory while compiling (one event, however
    many lines repeat it): ``failed_instructions`` of ``instructions`` (XLA's
    counts, ``None`` when the text has no summary), ``configs_failed`` and
    ``out_of_memory`` (configurations, over the instructions named, or the
    exception's example when it names none: ``from_example``),
    ``requested`` (the sizes asked for, as printed), ``failed``
    (:class:`AutotuneInstruction` per instruction the log names) and
    ``repeats`` (the out-of-memory lines of the text: each configuration's
    failure, printed again by the exception)."""

    failed_instructions: Optional[int]
    instructions: Optional[int]
    configs_failed: int
    out_of_memory: int
    requested: Tuple[str, ...]
    failed: Tuple[AutotuneInstruction, ...]
    from_example: bool
    repeats: int

    def to_json(self) -> dict:
        d = self._asdict()
        d["requested"] = list(self.requested)
        d["failed"] = [f.to_json() for f in self.failed]
        return d


class GpuOomSummary(NamedTuple):
    """What XLA:GPU's out-of-memory messages say (the ``oom`` of a module
    read from them; see :class:`xlashape.oom_report.GpuOomReport`):
    the fields of :class:`OomSummary` (``used``: what XLA's
    rematerialization pass says the program needs, when it was logged) and
    ``requested_bytes`` / ``requested_text`` (the allocation that failed),
    ``allocator`` (``GPU_0_bfc``), ``origin`` (``allocator`` or
    ``autotuner``), ``memory_limit_source``, ``remat_target_bytes``, and
    ``matching_buffers``: given the dump of the same program
    (``analyze(..., dump=DIR)``), the allocations of that size; ``autotune``
    (:class:`AutotuneSummary`, when the autotuner ran out), ``io_bytes``
    (the program's arguments and outputs, as XLA's scheduler logs them) and
    ``advice`` (what to do, one sentence each)."""

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
    #: what the allocator had in use when it failed (its stats), if logged
    in_use_bytes: Optional[int] = None
    #: XLA's rematerialization: what the program needs after it, and before
    remat_reduced_to_bytes: Optional[int] = None
    remat_original_bytes: Optional[int] = None
    #: the messages say the allocator rounded the request (its figure is exact)
    allocator_rounded: bool = False
    autotune: Optional[AutotuneSummary] = None
    io_bytes: Optional[int] = None
    advice: Tuple[str, ...] = ()

    def to_json(self) -> dict:
        d = dict(self._asdict())
        d["autotune"] = None if self.autotune is None else self.autotune.to_json()
        d["advice"] = list(self.advice)
        return d




#: at most this many points per memory space in the JSON heap (each the
#: highest of ``step`` consecutive program positions)
HEAP_POINTS = 4096


def _buckets(values, step: int) -> List[int]:
    if step == 1:
        return list(values)
    return [max(values[i:i + step]) for i in range(0, len(values), step)]


#: buffers smaller than this share one line in the live-at-peak listing
SMALL_BUFFER_BYTES = 16 * 1024


class PeakBuffer(NamedTuple):
    """One buffer live at the peak: its ``label`` (``instruction{index}``),
    defining ``instruction``, ``allocation`` number, memory space ``color``,
    ``size`` and ``unpadded_size`` in bytes, ``offset`` in the allocation,
    live range ``start``-``end`` (``None`` for buffers that live for the whole
    program), ``kind`` (:func:`xlashape.allocation_kinds.kind_of`), ``shape`` (XLA's text), ``op_name``
    (JAX's op path), ``source`` (``file:line``); ``workspace``: the
    library (``cuBLAS`` / ``cuDNN``) whose workspace it is, else ``None``;
    for an entry parameter of a partitioned program, ``sharding`` as XLA
    prints it (``{devices=[8,1]<=[8]}``: ``shape`` is then one device's part)."""

    label: str
    instruction: str
    allocation: int
    color: int
    size: int
    unpadded_size: int
    offset: int
    start: Optional[int]
    end: Optional[int]
    kind: str
    shape: str
    op_name: Optional[str]
    source: Optional[str]
    workspace: Optional[str] = None
    sharding: Optional[str] = None

    @property
    def padding(self) -> int:
        return self.size - self.unpadded_size

    def to_json(self) -> dict:
        d = self._asdict()
        d["padding"] = self.padding
        return d




class PeakAnalysis:
    """The peak of one module (see the module docstring).

    ``figures``: the XLA fields (``total_allocation_bytes``,
    ``indefinite_allocations``, ``peak_memory_in_bytes``,
    ``peak_unpadded_heap_bytes``), each XLA's value or ``None``;
    ``reasons``: why a field is ``None``; ``computed``: the same four as this
    module's rule computes them whatever the platform (our numbers, for
    comparison). ``heap``: per memory space, the heap over program order
    (``padded`` / ``unpadded`` arrays of int64, one entry per position of the
    schedule, the whole-program buffers included; the JSON form keeps at most
    :data:`HEAP_POINTS` of them, each the highest of ``step`` positions); ``peak_time`` /
    ``peak_memory_space`` / ``peak_instruction``: the heap XLA's peak
    takes (the highest one) and where in program order it is highest;
    ``live_at_peak``: the :class:`PeakBuffer` list that makes XLA's peak (the
    whole-program buffers of every memory space and that heap's buffers
    there), largest first;
    ``by_op_path``: ``(op path, bytes, count)`` groups of it;
    ``xla_live_range_peak``: the peak the live-range file prints;
    ``schedule``: the instruction at each position of program order (the
    live-range file's, ``None`` on the proto route); ``timeline``: the
    :class:`Timeline` of the temporary allocation where the peak is (each
    buffer's offset and live range), ``None`` without live ranges.
    """

    def __init__(self, platform: Optional[str]):
        self.platform = platform
        self.figures: Dict[str, Optional[int]] = {k: None for k in PEAK_FIELDS}
        self.reasons: Dict[str, str] = {}
        self.computed: Dict[str, Optional[int]] = {k: None for k in PEAK_FIELDS}
        self.heap: Dict[int, Dict[str, list]] = {}
        self.peak_time: Optional[int] = None
        #: what ``peak_time`` and ``heap`` count: ``"program order"`` (the
        #: schedule's positions) or ``"trace events"`` (the proto route)
        self.time_axis = "program order"
        self.peak_instruction: Optional[str] = None
        self.peak_memory_space: Optional[int] = None
        self.live_at_peak: List[PeakBuffer] = []
        self.xla_live_range_peak: Optional[Tuple[int, int]] = None
        self.small_buffer_bytes = SMALL_BUFFER_BYTES
        self.schedule: Optional[List[str]] = None
        self.timeline: Optional[Timeline] = None
        #: ``(value id, canonical value id)`` pairs: each value that shares
        #: another's memory in the heap simulator's trace (SHARE_WITH) and the
        #: first value of that memory (the text route's decision, or the
        #: .hlo.pb's trace)
        self.shares: List[Tuple[int, int]] = []

    @property
    def live_at_peak_bytes(self) -> int:
        return sum(b.size for b in self.live_at_peak)

    def by_op_path(self) -> List[Tuple[str, int, int]]:
        """Bytes live at the peak per JAX op path, ``(op path, bytes,
        buffers)``, largest first; the buffers without one (no metadata:
        XLA's own copies, a loop's tuple...) are :meth:`without_op_path`."""
        groups: Dict[str, List[int]] = {}
        for b in self.live_at_peak:
            if not b.op_name:
                continue
            g = groups.setdefault(b.op_name, [0, 0])
            g[0] += b.size
            g[1] += 1
        return sorted(((k, v[0], v[1]) for k, v in groups.items()), key=lambda x: (-x[1], x[0]))

    def without_op_path(self) -> Tuple[int, int, List[str]]:
        """The buffers live at the peak that have no JAX op path: ``(bytes,
        count, their instructions, largest first)``."""
        rest = [b for b in self.live_at_peak if not b.op_name]
        names: List[str] = []
        for b in rest:
            if b.instruction not in names:
                names.append(b.instruction)
        return sum(b.size for b in rest), len(rest), names

    def op_path_rows(self, limit: int = 15, cover: float = 0.99
                     ) -> Tuple[List[Tuple[str, int, int]], List[Tuple[str, int, int]]]:
        """The op paths worth a row of their own and the rest (for one row
        that sums them), each a list of :meth:`by_op_path` groups: the
        largest first, at most ``limit``, and none once the rows above hold
        ``cover`` of the bytes that have an op path."""
        groups = self.by_op_path()
        total = sum(g[1] for g in groups)
        rows: List[Tuple[str, int, int]] = []
        held = 0
        for g in groups:
            if len(rows) >= max(limit, 1) or (rows and held >= cover * total):
                break
            rows.append(g)
            held += g[1]
        return rows, groups[len(rows):]

    def listed(self, top: int = 20) -> Tuple[List[PeakBuffer], int, int]:
        """The live-at-peak buffers worth a line (at most ``top``, none below
        :attr:`small_buffer_bytes`), and the count and bytes of the rest."""
        shown = [b for b in self.live_at_peak if b.size >= self.small_buffer_bytes][:top]
        rest = self.live_at_peak[len(shown):]
        return shown, len(rest), sum(b.size for b in rest)

    def to_json(self) -> dict:
        heap = []
        for color in sorted(self.heap):
            h = self.heap[color]
            n = len(h["padded"])
            step = max(1, -(-n // HEAP_POINTS))
            heap.append({"color": color, "peak_bytes": max(h["padded"], default=0),
                         "length": n, "step": step,
                         "padded": _buckets(h["padded"], step),
                         "unpadded": _buckets(h["unpadded"], step)})
        return {
            "platform": self.platform,
            **{k: self.figures[k] for k in PEAK_FIELDS},
            "reasons": dict(self.reasons),
            "computed": dict(self.computed),
            "peak_time": self.peak_time,
            "time_axis": self.time_axis,
            "peak_instruction": self.peak_instruction,
            "peak_memory_space": self.peak_memory_space,
            "live_at_peak_bytes": self.live_at_peak_bytes,
            "live_at_peak": [b.to_json() for b in self.live_at_peak],
            "by_op_path": [{"op_path": k, "bytes": v, "count": n} for k, v, n in self.by_op_path()],
            "without_op_path": dict(zip(("bytes", "count", "instructions"),
                                        self.without_op_path())),
            "xla_live_range_peak": (None if self.xla_live_range_peak is None else
                                    {"time": self.xla_live_range_peak[0],
                                     "bytes": self.xla_live_range_peak[1]}),
            "heap": heap,
            "timeline": None if self.timeline is None else self.timeline.to_json(),
        }

    def __repr__(self):
        return (f"<PeakAnalysis {self.platform}: peak {self.figures['peak_memory_in_bytes']}, "
                f"at {self.peak_instruction}>")




class TimelineBuffer(NamedTuple):
    """One buffer of a :class:`Timeline`: ``size`` and ``offset`` in its
    allocation, live range ``start``-``end`` (both ends counted, positions of
    program order), its ``label`` and ``shape`` text."""

    size: int
    offset: int
    start: int
    end: int
    label: str
    shape: str


class Timeline(NamedTuple):
    """XProf's buffer allocation timeline of one temporary allocation: its
    ``allocation`` number, memory space ``color`` and ``size``, the
    ``positions`` of program order, and its ``buffers`` (the largest
    :data:`TIMELINE_BUFFERS`, largest first; ``dropped`` counts the rest)."""

    allocation: int
    color: int
    size: int
    positions: int
    buffers: Tuple[TimelineBuffer, ...]
    dropped: int

    def to_json(self) -> dict:
        d = self._asdict()
        d["buffers"] = [b._asdict() for b in self.buffers]
        return d


#: at most this many buffers (the largest) in a :class:`Timeline`
TIMELINE_BUFFERS = 3000
