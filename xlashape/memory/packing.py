"""The accounting step that packs a module's temporaries as XLA does.

From what a dump gives -- the values of each temporary allocation with
their sizes, the live ranges in schedule order (``*-live-range.txt``), the
values' positions and uses (``*-buffer-assignment-values.txt``) and the
module text, but not XLA's offsets nor the temporary allocations' sizes --
:class:`HeapModel` rebuilds the placement of every temporary allocation:

- the values XLA's heap simulator packs (:mod:`xlashape.memory.heapsim`),
  which of them share memory (XLA's buffers,
  :func:`xlashape.memory.sharing.alias_buffers`; an operand's memory,
  :class:`xlashape.memory.operand_sharing.OperandSharing`), packed with the
  memory space's alignment and XLA's orders (:data:`PLATFORM_HEAPS`);
- the allocations that are temporary without the heap simulator (each XLA
  buffer holding a tuple's table of pointers gets one) and how XLA puts them
  end to end with the heap's (:mod:`xlashape.memory.buffer_order`).

The result is one :class:`~xlashape.memory.model.PackedAllocation` per
temporary allocation (:func:`pack_module`, ``ModuleMemory.packing``). What
is not rebuilt is said there (``reason``): the memory XLA:TPU's memory-space
assignment places (VMEM: its own allocator, after its prefetch decisions),
and on XLA:TPU the order of the tuple tables in device memory (libtpu's
buffer assignment makes its allocations in an order the dump does not
determine; a memory space with one such block or none is exact).

:meth:`HeapModel.pack` takes other sizes (and values moved, dropped): the
"what if" of :mod:`xlashape.memory.whatif` repacks with the same simulator.
"""

from __future__ import annotations

from typing import Callable, Dict, Iterable, List, NamedTuple, Optional, Tuple

from ..allocation_kinds import TEMPORARY, kind_of
from .buffer_order import BIGGEST_FIRST, Layout, TempUnit, temporary_layout
from .heapsim import SPAN, SPATIAL, TEMPORAL, HeapResult, HeapValue, align_up, pack, replay
from .model import PackedAllocation, PackedValue
from .operand_sharing import OperandSharing
from .sharing import MSA_COLORS, alias_buffers

__all__ = ["PLATFORM_HEAPS", "HeapModel", "ColorPacking", "pack_module", "NEEDS_MODULE"]


class HeapConfig(NamedTuple):
    """How XLA packs one memory space: the ``alignment`` of its chunks and
    the ``orders`` its heap simulator tries (the smallest heap wins)."""

    alignment: int
    orders: Tuple[str, ...]


#: per platform and memory space, found on the real corpora (every offset XLA
#: chose is a multiple of the alignment; XLA:CPU and XLA:GPU keep the smaller
#: of the kSpatial and kTemporal packings, as open-source XLA does; XLA:TPU's
#: device memory and SMEM heaps come out in the order of the longest span
#: first, its S(6) heap in XLA's order)
PLATFORM_HEAPS: Dict[str, Dict[int, HeapConfig]] = {
    "cpu": {0: HeapConfig(64, (SPATIAL, TEMPORAL))},
    "gpu": {0: HeapConfig(256, (SPATIAL, TEMPORAL))},
    "tpu": {0: HeapConfig(16384, (SPAN,)), 2: HeapConfig(4, (SPAN,)),
            6: HeapConfig(512, (SPATIAL, TEMPORAL))},
}

#: the order XLA's buffer assignment makes its allocations in, per platform
#: (``None``: not determined from a dump)
ALLOCATION_ORDER = {"cpu": BIGGEST_FIRST, "gpu": BIGGEST_FIRST, "tpu": None}

NEEDS_MODULE = ("the module text parsed whole (analyze(..., packing=True), "
                "xlashape memory --packing)")


def _label_key(label: str) -> str:
    return label if label.endswith("}") else label + "{}"


class ColorPacking:
    """One memory space's packing: the ``allocation`` index XLA gave its
    temporary allocation, the ``heap`` (:class:`~xlashape.memory.heapsim.HeapResult`,
    or ``None``), the heap's ``events`` (the replay: XLA's trace), each
    value's ``offset`` and ``size`` in the allocation (``chunks``), its
    ``size`` (``None`` when not known) and why something is not rebuilt
    (``reason``: nothing is; ``order_reason``: the offsets of the blocks
    put end to end are not)."""

    def __init__(self, color: int, allocation: int):
        self.color = color
        self.allocation = allocation
        self.heap: Optional[HeapResult] = None
        self.events = []
        self.chunks: Dict[int, Tuple[int, int]] = {}
        self.size: Optional[int] = None
        self.reason: Optional[str] = None
        self.order_reason: Optional[str] = None
        self.heap_ids: List[int] = []


class HeapModel:
    """What a dump says about the temporaries of one module, ready to pack
    (see the module docstring); :attr:`reason` says why it cannot be (then
    nothing is packed). Built once, packed with the dump's sizes or others."""

    def __init__(self, rec, platform: Optional[str]):
        self.rec = rec
        self.platform = platform
        self.reason: Optional[str] = None
        self.temps = [a for a in rec.allocations or () if kind_of(a) == TEMPORARY]
        self.values: Dict[int, object] = {}
        self.ranges: Dict[int, Tuple[int, int]] = {}
        self.find = None
        self.counts: Dict[object, int] = {}
        self.sharing: Optional[OperandSharing] = None
        self.layout: Optional[Layout] = None
        self.value_records = {}
        self._packed: Optional[Dict[int, ColorPacking]] = None
        live = rec.live
        for a in rec.allocations or ():
            for v in a.values:
                self.values[v.id] = v
                if live is not None:
                    r = live.ranges.get(_label_key(v.label))
                    if r is not None:
                        self.ranges[v.id] = r
        facts = rec.facts
        values = facts.values() if facts is not None else None
        module = facts.module() if facts is not None else None
        if live is None:
            self.reason = "the dump has no live ranges (*-live-range.txt)"
        elif values is None:
            self.reason = "the dump has no values file (*-buffer-assignment-values.txt)"
        elif module is None:
            self.reason = "packing needs " + NEEDS_MODULE
        elif platform not in PLATFORM_HEAPS:
            self.reason = ("the platform is not known (say platform=/--platform): XLA packs "
                           "each differently")
        if self.reason is not None:
            return
        self.value_records = values
        self.find = alias_buffers(values, module)
        for vid in values:
            key = self.find(vid)
            self.counts[key] = self.counts.get(key, 0) + 1
        if not self.temps:
            return
        self.sharing = OperandSharing(values, module, platform)
        self.layout = temporary_layout(rec, values, module, self.find,
                                       order=ALLOCATION_ORDER.get(platform) or BIGGEST_FIRST,
                                       preset_colors=MSA_COLORS.get(platform, frozenset()))
        if ALLOCATION_ORDER.get(platform) is None:
            self.layout.problem = (
                "XLA:TPU's buffer assignment makes its allocations in an order the dump does "
                "not determine (not open-source XLA's), so where each tuple table and the "
                "heap go in this allocation is not rebuilt")

    def buffer_values(self, key) -> int:
        return self.counts.get(key, 1)

    def heap_ids(self) -> Dict[int, List[int]]:
        """The values the heap simulator packs, per memory space: those of the
        temporary allocations not in a block of their own (the tuple tables)
        nor placed by memory-space assignment."""
        out: Dict[int, List[int]] = {}
        for u in (self.layout.units if self.layout is not None else ()):
            if u.kind == "heap":
                out.setdefault(u.color, []).extend(u.ids)
        return out

    def pack(self, size_of: Optional[Callable[[int], int]] = None,
             heap_ids: Optional[Dict[int, List[int]]] = None,
             unit_sizes: Optional[Callable[[TempUnit], Optional[int]]] = None,
             ranges: Optional[Dict[int, Tuple[int, int]]] = None) -> Dict[int, ColorPacking]:
        """Each memory space's :class:`ColorPacking`: the heap simulator over
        ``heap_ids`` (default :meth:`heap_ids`) with the values' sizes
        (``size_of(id)``, default the dump's) and live ranges (``ranges``,
        default the dump's), then the blocks put end to end
        (``unit_sizes``: a tuple table's size, default the dump's). With
        every default, computed once per model."""
        if size_of is None and heap_ids is None and unit_sizes is None and ranges is None:
            if self._packed is None:
                self._packed = self._pack(None, None, None, None)
            return self._packed
        return self._pack(size_of, heap_ids, unit_sizes, ranges)

    def _pack(self, size_of, heap_ids, unit_sizes, ranges) -> Dict[int, ColorPacking]:
        if size_of is None:
            def size_of(vid):
                return self.values[vid].size
        if ranges is None:
            ranges = self.ranges
        if heap_ids is None:
            heap_ids = self.heap_ids()
        out: Dict[int, ColorPacking] = {}
        first: Dict[int, int] = {}
        for a in self.temps:
            first.setdefault(a.color, a.index)
        colors = sorted(set(first) | set(heap_ids))
        configs = PLATFORM_HEAPS.get(self.platform or "", {})
        preset = MSA_COLORS.get(self.platform or "", frozenset())
        for color in colors:
            cp = out[color] = ColorPacking(color, first.get(color))
            if color in preset:
                cp.reason = ("placed by XLA:TPU's memory-space assignment (its own allocator, "
                             "after its prefetch decisions), not by the heap simulator")
                continue
            config = configs.get(color)
            if config is None:
                cp.reason = (f"the alignment of memory space {color} on "
                             f"{(self.platform or '?').upper()} is not known")
                continue
            ids = heap_ids.get(color, [])
            missing = [vid for vid in ids if vid not in ranges]
            if missing:
                v = self.values.get(missing[0])
                cp.reason = (f"{len(missing)} values have no live range in the dump (the first: "
                             f"{v.label if v is not None else missing[0]})")
                continue
            cp.heap_ids = list(ids)
            if ids and self.sharing is not None:
                hv = [HeapValue(vid, size_of(vid), ranges[vid][0], ranges[vid][1]) for vid in ids]
                cp.events = replay(hv, buffer_of=self.find, buffer_values=self.buffer_values,
                                   candidates=self.sharing.candidates)
                cp.heap = pack(cp.events, {v.id: v.size for v in hv}, config.alignment,
                               config.orders)
            self._combine(cp, config.alignment, unit_sizes)
        return out

    def _combine(self, cp: ColorPacking, alignment: int, unit_sizes) -> None:
        """Put the memory space's blocks end to end in XLA's order."""
        units = [u for u in (self.layout.units if self.layout is not None else ())
                 if u.color == cp.color]
        if not any(u.kind == "heap" for u in units) and cp.heap is not None:
            units.append(TempUnit(cp.color, "heap", tuple(cp.heap_ids), None))
        size = 0
        placed = 0
        for u in units:
            if u.kind == "heap":
                if cp.heap is None:
                    continue
                n = cp.heap.size
            else:
                n = unit_sizes(u) if unit_sizes is not None else u.size
                if n is None:
                    cp.reason = "a tuple table's size is not known"
                    return
            base = 0 if placed == 0 else align_up(size, alignment)
            placed += 1
            if u.kind == "heap":
                for vid, (off, sz) in cp.heap.chunks.items():
                    cp.chunks[vid] = (base + off, sz)
            else:
                for vid in u.ids:
                    cp.chunks[vid] = (base, n)
            size = base + n
        cp.size = size
        if placed > 1 and self.layout is not None and self.layout.problem is not None:
            cp.order_reason = self.layout.problem


def pack_module(rec, platform: Optional[str], model: Optional[HeapModel] = None
                ) -> Optional[List[PackedAllocation]]:
    """The :class:`~xlashape.memory.model.PackedAllocation` of each temporary
    allocation of a dump's module (``None`` without a buffer assignment;
    ``model``: its :class:`HeapModel`, when already built)."""
    if rec.allocations is None:
        return None
    if model is None:
        model = HeapModel(rec, platform)
    if not model.temps:
        return []
    by_index = {a.index: a for a in model.temps}
    if model.reason is not None:
        return [PackedAllocation(a.index, a.color, None, (), None, model.reason)
                for a in model.temps]
    packed = model.pack()
    out = []
    done = set()
    for color, cp in sorted(packed.items()):
        if cp.allocation is None:
            continue
        done.add(cp.allocation)
        a = by_index[cp.allocation]
        if cp.reason is not None:
            out.append(PackedAllocation(a.index, a.color, None, (), None, cp.reason))
            continue
        values = tuple(PackedValue(vid, off, sz) for vid, (off, sz) in sorted(cp.chunks.items()))
        dump = {v.id: (v.offset, v.size) for v in a.values}
        same = (a.size == cp.size and len(dump) == len(cp.chunks)
                and all(dump.get(v.id) == (v.offset, v.size) for v in values))
        out.append(PackedAllocation(a.index, a.color, cp.size, values, same, None,
                                    cp.order_reason))
    for a in model.temps:
        if a.index not in done:
            out.append(PackedAllocation(a.index, a.color, None, (), None,
                                        "a second temporary allocation of its memory space "
                                        "(XLA's per-heap size limit), not rebuilt"))
    out.sort(key=lambda p: p.allocation)
    return out
