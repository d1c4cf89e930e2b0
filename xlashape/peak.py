"""The peak of a compiled XLA program, and what is live at it, from its dump.

XLA's ``CompiledMemoryStats`` carries four figures beyond the size fields
(XLA's PjRt executables compute them from the buffer assignment; XProf's
memory viewer replays the same data):

``total_allocation_bytes``
    the sizes of every allocation in device memory (memory space / color 0);
``indefinite_allocations``
    the same for the allocations that live for the whole program: entry
    parameters, outputs (``maybe-live-out``), constants and thread-local
    allocations (XProf's "indefinite lifetime" allocations);
``peak_memory_in_bytes``
    the buffers that live for the whole program (parameters, outputs and
    constants, in every memory space, each allocation counted by its largest
    value; thread-local scratch is left out), plus the highest point of the
    highest heap: the heap simulator fills each temporary allocation (one per
    memory space: device memory, VMEM, SMEM, ...) and leaves a trace of it;
    XLA takes the largest of their peaks, not their sum. A heap is XProf's
    replay of the trace: a buffer counts from its ALLOC to its FREE, a buffer
    that shares another's memory (SHARE_WITH) counts once;
``peak_unpadded_heap_bytes``
    the same with each buffer's size without layout padding (a tuple's table
    of pointers: 8 bytes an element), each heap at its own highest point.

The traces are in the ``.hlo.pb`` (``--xla_dump_hlo_as_proto``:
:func:`peak_from_hlo_proto`). The same heaps follow from the text files
(:func:`analyze_peak`): each value's offset and size in
``*-buffer-assignment.txt``, its live range in ``*-live-range.txt`` (both ends
counted), and which values share memory: values at one offset whose live
ranges meet -- on GPU always, on TPU only a loop-carried (phi) value or one
whose instruction reads the other directly (``*-buffer-assignment-values.txt``);
tuple pointer tables are not in the traces. Both routes give XLA's numbers
on every program of the real corpora (CPU 23, GPU 16, TPU 23; see the
project README); a figure a platform's rule has not been checked for, or an
artifact does not determine, is ``None`` with the reason in
:attr:`PeakAnalysis.reasons`, and our own heap is shown under our own names
(``heap``, ``live_at_peak``).

Platform rules (found on real compiles):

- XLA:GPU and XLA:TPU: all four figures as above.
- XLA:CPU (jaxlib 0.10): the executable's buffer assignment carries no heap
  traces, so ``peak_memory_in_bytes`` is the parameters, outputs and
  constants alone; ``total_allocation_bytes``, ``indefinite_allocations`` and
  ``peak_unpadded_heap_bytes`` are not reported by that XLA.
"""

import re
from array import array
from itertools import accumulate
from operator import add, itemgetter
from typing import Dict, Iterable, List, NamedTuple, Optional, Tuple

from .errors import ShapeValueError

from .hlo_module import open_text
from .live_range import (LiveRanges, Location, read_live_ranges, read_locations,
                         read_value_operands, reads)
from .protos import check_sizes
from .xla_dump import iter_buffer_assignment

__all__ = ["PeakBuffer", "PeakAnalysis", "analyze_peak", "peak_of_dump", "category", "VERIFIED",
           "Verdict", "judge", "module_peak", "parse_size", "peak_from_hlo_proto", "PeakBuilder",
           "add_locations"]

#: which XLA field each platform's rule reproduces (checked on real corpora)
VERIFIED = {
    "gpu": ("total_allocation_bytes", "indefinite_allocations", "peak_memory_in_bytes",
            "peak_unpadded_heap_bytes"),
    "cpu": ("peak_memory_in_bytes",),
    "tpu": ("total_allocation_bytes", "indefinite_allocations", "peak_memory_in_bytes",
            "peak_unpadded_heap_bytes"),
}

PEAK_FIELDS = ("total_allocation_bytes", "indefinite_allocations", "peak_memory_in_bytes",
               "peak_unpadded_heap_bytes")

_REASONS = {
    ("cpu", "total_allocation_bytes"): "XLA:CPU (jaxlib 0.10) does not report it",
    ("cpu", "indefinite_allocations"): "XLA:CPU (jaxlib 0.10) does not report it",
    ("cpu", "peak_unpadded_heap_bytes"): "XLA:CPU (jaxlib 0.10) does not report it",
}

#: at most this many points per memory space in the JSON heap (each the
#: highest of ``step`` consecutive program positions)
HEAP_POINTS = 4096


def _buckets(values, step: int) -> List[int]:
    if step == 1:
        return list(values)
    return [max(values[i:i + step]) for i in range(0, len(values), step)]


_RANGE_OF = itemgetter(0)

#: buffers smaller than this share one line in the live-at-peak listing
SMALL_BUFFER_BYTES = 16 * 1024


def category(allocation) -> str:
    """XProf's category of an allocation (one rule for every view):
    ``parameter``, ``output``, ``thread-local``, ``constant`` or ``temporary``."""
    if allocation.is_entry_computation_parameter:
        return "parameter"
    if allocation.maybe_live_out:
        return "output"
    if allocation.is_thread_local:
        return "thread-local"
    if allocation.is_constant:
        return "constant"
    return "temporary"


def is_indefinite(allocation) -> bool:
    """Lives for the whole program (XProf's ``IsIndefinite``)."""
    return bool(allocation.is_thread_local or allocation.is_entry_computation_parameter
                or allocation.is_constant or allocation.maybe_live_out)


class PeakBuffer(NamedTuple):
    """One buffer live at the peak: its ``label`` (``instruction{index}``),
    defining ``instruction``, ``allocation`` number, memory space ``color``,
    ``size`` and ``unpadded_size`` in bytes, ``offset`` in the allocation,
    live range ``start``-``end`` (``None`` for buffers that live for the whole
    program), ``kind`` (:func:`category`), ``shape`` (XLA's text), ``op_name``
    (JAX's op path) and ``source`` (``file:line``)."""

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
    ``xla_live_range_peak``: the peak the live-range file prints.
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

    @property
    def live_at_peak_bytes(self) -> int:
        return sum(b.size for b in self.live_at_peak)

    def by_op_path(self) -> List[Tuple[str, int, int]]:
        """Bytes live at the peak per JAX op path (the instruction's name
        where the module has no ``op_name``), largest first."""
        groups: Dict[str, List[int]] = {}
        for b in self.live_at_peak:
            g = groups.setdefault(b.op_name or b.instruction, [0, 0])
            g[0] += b.size
            g[1] += 1
        return sorted(((k, v[0], v[1]) for k, v in groups.items()), key=lambda x: (-x[1], x[0]))

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
            "xla_live_range_peak": (None if self.xla_live_range_peak is None else
                                    {"time": self.xla_live_range_peak[0],
                                     "bytes": self.xla_live_range_peak[1]}),
            "heap": heap,
        }

    def __repr__(self):
        return (f"<PeakAnalysis {self.platform}: peak {self.figures['peak_memory_in_bytes']}, "
                f"at {self.peak_instruction}>")


def analyze_peak(allocations: Iterable, live: Optional[LiveRanges], platform: Optional[str], *,
                 locations: Optional[Dict[str, Location]] = None, unpadded=None,
                 operands: Optional[Dict[int, str]] = None) -> PeakAnalysis:
    """Compute the peak figures from the buffer assignment's allocations
    (:class:`~xlashape.xla_dump.BufferAllocation` records, read once) and the
    live ranges (``None`` when the dump has no ``*-live-range.txt``: then only
    the fields that need no heap are given).

    ``unpadded(value) -> int`` gives a value's size without padding (default:
    its size); ``locations`` maps instruction names to op path and source;
    ``operands`` (from the values file) says which values may share memory on
    TPU. :class:`PeakBuilder` does the same one allocation at a time.
    """
    builder = PeakBuilder(live, platform, unpadded=unpadded, operands=operands)
    for a in allocations:
        builder.add(a)
    return builder.finish(locations)


class _Heap(NamedTuple):
    """One temporary allocation's heap, as :class:`PeakBuilder` keeps it:
    the last position a buffer ends at, the heap at each position (padded
    and unpadded bytes), its highest point (bytes and first position), the
    highest unpadded bytes and the buffers live at the highest point."""

    color: int
    end: int
    padded: array
    unpadded: array
    best: int
    time: Optional[int]
    best_unpadded: int
    live: List[PeakBuffer]


def _fit(a: array, n: int) -> array:
    """``a`` cut or padded with zeros to ``n`` positions."""
    if len(a) > n:
        return a[:n]
    return a + array("q", bytes(8 * (n - len(a))))


#: the largest allocation or value the heap sums accept (2**50 bytes = 1 PiB:
#: thousands of them still add up inside int64)
MAX_BYTES = 1 << 50


class PeakBuilder:
    """:func:`analyze_peak` fed one allocation at a time (``add``), so the
    pass that reads the buffer assignment for the size figures can compute
    the peak too; ``finish()`` returns the :class:`PeakAnalysis`."""

    def __init__(self, live: Optional[LiveRanges], platform: Optional[str], *, unpadded=None,
                 operands: Optional[Dict[int, str]] = None):
        self.live = live
        self.platform = platform
        self.unpadded = unpadded
        self.operands = operands
        # which values at one offset share memory in the simulator's trace (a
        # SHARE_WITH): on GPU every two whose live ranges meet; on TPU only a
        # loop-carried (phi) value, or one whose instruction reads the other
        # directly (a value read through another position, e.g. a copy-done,
        # gets its own ALLOC) -- rules fitted on the real corpora
        self.strict = operands if platform == "tpu" else None
        self.total0 = self.indefinite0 = self.fixed = self.fixed_unpadded = 0
        self.fixed_buffers: List[PeakBuffer] = []
        self.heaps: List[Tuple[object, List[list]]] = []
        self.missing = 0
        self._ucache: Dict[str, Tuple[int, int, str]] = {}

    def add(self, a) -> None:
        if not 0 <= a.size <= MAX_BYTES or any(not 0 <= v.size <= MAX_BYTES for v in a.values):
            # sums over the heap are int64 (a damaged buffer assignment)
            raise ShapeValueError(f"allocation {a.index}: a size outside 0..{MAX_BYTES} bytes")
        if a.color == 0:
            self.total0 += a.size
            if is_indefinite(a):
                self.indefinite0 += a.size
        unpadded = self.unpadded
        if is_indefinite(a):
            if a.is_thread_local or not a.values:
                return
            v = max(a.values, key=lambda v: v.size)
            u = unpadded(v) if unpadded else v.size
            self.fixed += v.size
            self.fixed_unpadded += u
            self.fixed_buffers.append(PeakBuffer(v.label, v.name, a.index, a.color, v.size, u,
                                                 v.offset, None, None, category(a), v.shape_text,
                                                 None, None))
            return
        live = self.live
        if live is None:
            return
        ranges = live.ranges
        # the heap of this allocation: values at one offset whose live
        # ranges meet are one buffer in the simulator's trace (SHARE_WITH)
        by_offset: Dict[int, List] = {}
        ucache = self._ucache
        for v in a.values:
            shape_text = v.shape_text
            if shape_text.startswith("("):
                continue  # tuple pointer tables are not in the heap trace
            label = v.label
            r = ranges.get(label if label.endswith("}") else label + "{}")
            if r is None:
                self.missing += 1
                continue
            # per shape text: (size, unpadded size, the one string kept for it)
            c = ucache.get(shape_text)
            if c is None or c[0] != v.size:
                c = (v.size, v.size if unpadded is None else unpadded(v),
                     shape_text if c is None else c[2])
                if len(ucache) > 1 << 16:
                    ucache.clear()
                ucache[shape_text] = c
            rec = (r, v, c)
            got = by_offset.get(v.offset)
            if got is None:
                by_offset[v.offset] = [rec]
            else:
                got.append(rec)
        # the heap's buffers as int64 columns (start, end, size, unpadded) and,
        # per buffer, its values ((start, end, value) or a list of them when
        # values share the buffer)
        starts, ends, sizes, unps = array("q"), array("q"), array("q"), array("q")
        members: List = []
        strict = self.strict
        for vals in by_offset.values():
            if len(vals) > 1:
                vals.sort(key=_RANGE_OF)
            last = None     # the last value of the current buffer
            for (s, e), v, (size, u, st) in vals:
                if last is not None and s <= ends[-1] and (
                        strict is None or v.is_phi
                        or reads(strict.get(v.id, ""), last.name)):
                    if e > ends[-1]:
                        ends[-1] = e
                    if size > sizes[-1]:
                        sizes[-1], unps[-1] = size, u
                    got = members[-1]
                    if type(got) is tuple:
                        members[-1] = [got, (s, e, v, st)]
                    else:
                        got.append((s, e, v, st))
                else:
                    starts.append(s)
                    ends.append(e)
                    sizes.append(size)
                    unps.append(u)
                    members.append((s, e, v, st))
                last = v
        # this heap over the program (prefix sums), its highest point and the
        # buffers live there: all that finish() needs of it, so no per-value
        # record outlives this allocation
        end = max(live.max_time, max(ends, default=0))
        n = max(end, max(starts, default=0)) + 1
        dp = array("q", bytes(8 * n))
        du = array("q", bytes(8 * n))
        for st, e, size, unp in zip(starts, ends, sizes, unps):
            st = max(st, 0)
            e = min(e, n - 1) + 1
            dp[st] += size
            du[st] += unp
            if e < n:
                dp[e] -= size
                du[e] -= unp
        hp = array("q", accumulate(dp))   # the heap at each program position
        hu = array("q", accumulate(du))
        best = max(hp, default=0)
        t = hp.index(best) if best > 0 else None
        best_u = max(hu, default=0)  # its own highest point, not the padded peak's
        at_best: List[PeakBuffer] = []
        if t is not None:
            kind = category(a)
            for i, (cs, ce) in enumerate(zip(starts, ends)):
                if not (cs <= t <= ce):
                    continue
                # the value of the buffer that is live at t (the last one)
                m = members[i]
                if type(m) is not tuple:
                    m = [x for x in m if x[0] <= t <= x[1]][-1]
                s, e, v, st = m
                at_best.append(PeakBuffer(v.label, v.name, a.index, a.color, sizes[i], unps[i],
                                          v.offset, s, e, kind, st, None, None))
        self.heaps.append(_Heap(a.color, end, hp, hu, best, t, best_u, at_best))

    def finish(self, locations: Optional[Dict[str, Location]] = None) -> PeakAnalysis:
        platform, live, heaps = self.platform, self.live, self.heaps
        fixed, fixed_unpadded = self.fixed, self.fixed_unpadded
        pa = PeakAnalysis(platform)
        pa.computed["total_allocation_bytes"] = self.total0
        pa.computed["indefinite_allocations"] = self.indefinite0
        if live is not None and live.xla_peak_time is not None:
            pa.xla_live_range_peak = (live.xla_peak_time, live.xla_peak_bytes)
        if live is not None:
            n = max(live.max_time, max((h.end for h in heaps), default=0)) + 1
            heap_peak = heap_peak_unpadded = 0
            highest = None
            fixed_by_color: Dict[int, Tuple[int, int]] = {}
            for b in self.fixed_buffers:
                p, u = fixed_by_color.get(b.color, (0, 0))
                fixed_by_color[b.color] = (p + b.size, u + b.unpadded_size)
            per_color: Dict[int, Tuple[array, array]] = {}
            for h in heaps:
                hp, hu = h.padded, h.unpadded
                if len(hp) != n:   # every heap over the same positions
                    hp, hu = _fit(hp, n), _fit(hu, n)
                got = per_color.get(h.color)
                if got is None:
                    per_color[h.color] = (hp, hu)
                else:
                    per_color[h.color] = (array("q", map(add, got[0], hp)),
                                          array("q", map(add, got[1], hu)))
                # XLA takes the highest of the heaps (one per memory space's
                # temporary allocation), not their sum
                if h.best > heap_peak:
                    highest = h
                heap_peak = max(heap_peak, h.best)
                heap_peak_unpadded = max(heap_peak_unpadded, h.best_unpadded)
            for color in set(per_color) | set(fixed_by_color):
                tp, tu = per_color.get(color) or (array("q", bytes(8 * n)), array("q", bytes(8 * n)))
                fp, fu = fixed_by_color.get(color, (0, 0))
                if fp:
                    tp = array("q", map(fp.__add__, tp))
                if fu:
                    tu = array("q", map(fu.__add__, tu))
                pa.heap[color] = {"padded": tp, "unpadded": tu}
            pa.computed["peak_memory_in_bytes"] = fixed + heap_peak
            pa.computed["peak_unpadded_heap_bytes"] = fixed_unpadded + heap_peak_unpadded
            # the view: XLA's peak is the whole-program buffers plus the highest
            # heap at its highest point: list exactly those
            live_now = list(self.fixed_buffers)
            if highest is not None:
                pa.peak_time = highest.time
                pa.peak_memory_space = highest.color
                pa.peak_instruction = live.instruction_at(highest.time)
                live_now.extend(highest.live)
            live_now.sort(key=lambda b: (-b.size, b.label))
            if locations:
                live_now = [b._replace(op_name=locations[b.instruction].op_name,
                                       source=locations[b.instruction].source)
                            if b.instruction in locations else b for b in live_now]
            pa.live_at_peak = live_now
        else:
            pa.computed["peak_memory_in_bytes"] = fixed if platform == "cpu" else None

        if platform == "cpu":
            # XLA:CPU's executable keeps no heap traces: its peak is the
            # whole-program buffers alone
            pa.computed["peak_memory_in_bytes"] = fixed
            if live is not None:
                pa.computed["peak_unpadded_heap_bytes"] = fixed_unpadded

        verified = VERIFIED.get(platform or "", ())
        missing = self.missing
        for k in PEAK_FIELDS:
            if (platform == "tpu" and k.startswith("peak") and live is not None
                    and self.operands is None):
                pa.reasons[k] = ("on TPU the heap replay needs the dump's "
                                 "*-buffer-assignment-values.txt (which values share memory), or "
                                 "the .hlo.pb (--xla_dump_hlo_as_proto)")
            elif missing and k.startswith("peak") and platform != "cpu":
                pa.reasons[k] = (f"{missing} values of the buffer assignment have no live range "
                                 "in the live-range file: the heap cannot be replayed")
            elif k in verified and pa.computed[k] is not None:
                pa.figures[k] = pa.computed[k]
            elif k in verified:
                pa.reasons[k] = ("needs the dump's *-live-range.txt (XLA writes it with "
                                 "--xla_dump_to), or the .hlo.pb's heap simulator traces "
                                 "(--xla_dump_hlo_as_proto)")
            elif platform is None:
                pa.reasons[k] = ("the platform (CPU, GPU, TPU) is not known: XLA counts it "
                                 "differently on each; say --platform")
            else:
                pa.reasons[k] = _REASONS.get((platform, k), f"not reproduced on {platform.upper()}")
        return pa


def add_locations(pa: PeakAnalysis, hlo_path: str) -> None:
    """Fill the op paths and source lines of the buffers listed at the peak
    from the module text (read once more, keeping nothing of the other
    instructions)."""
    if not pa.live_at_peak:
        return
    locations = read_locations(hlo_path, names={b.instruction for b in pa.live_at_peak})
    pa.live_at_peak = [b._replace(op_name=locations[b.instruction].op_name,
                                  source=locations[b.instruction].source)
                       if b.instruction in locations else b for b in pa.live_at_peak]


def peak_of_dump(buffer_assignment_path: str, platform: Optional[str], *,
                 live_range_path: Optional[str] = None, hlo_path: Optional[str] = None,
                 values_path: Optional[str] = None, unpadded=None) -> PeakAnalysis:
    """:func:`analyze_peak` for the files of one dumped module (the live-range
    file, the module text and the values file are optional; without the values
    file, values at one offset whose live ranges meet are taken to share)."""
    live = read_live_ranges(live_range_path) if live_range_path else None
    operands = read_value_operands(values_path) if values_path and platform == "tpu" else None
    with open_text(buffer_assignment_path) as f:
        pa = analyze_peak(iter_buffer_assignment(f), live, platform, unpadded=unpadded,
                          operands=operands)
    if hlo_path:
        add_locations(pa, hlo_path)
    return pa


# -- the verdict ---------------------------------------------------------------------

_UNITS = {"": 1, "b": 1, "k": 1 << 10, "kb": 10 ** 3, "kib": 1 << 10, "m": 1 << 20, "mb": 10 ** 6,
          "mib": 1 << 20, "g": 1 << 30, "gb": 10 ** 9, "gib": 1 << 30, "t": 1 << 40,
          "tb": 10 ** 12, "tib": 1 << 40}
# on the text with its blanks collapsed (\s* on both sides of the optional
# unit backtracked quadratically over a long run of spaces)
_SIZE = re.compile(r"(\d+(?:\.\d*)?|\.\d+)(?:e(\d{1,3}))? ?([a-zA-Z]*)$")


def parse_size(text: str) -> int:
    """A byte count as a user writes it: ``80G`` / ``79.1G`` / ``16GiB``
    (powers of 1024, as XLA prints sizes), ``80GB`` (powers of 1000), or a
    plain number of bytes. Raises :class:`~xlashape.ShapeValueError`."""
    m = _SIZE.match(" ".join(str(text).split()))
    unit = m.group(3).lower() if m else ""
    if not m or unit not in _UNITS:
        raise ShapeValueError(f"not a size: {text!r} (write e.g. 80G, 16GiB, 80GB or 1048576)")
    try:
        value = float(m.group(1)) * (10.0 ** int(m.group(2)) if m.group(2) else 1.0) * _UNITS[unit]
    except OverflowError:           # 10.0 ** 400
        value = float("inf")
    if not value < 2.0 ** 63:       # inf from a huge exponent or mantissa too
        raise ShapeValueError(f"not a size: {text!r} (more bytes than a 64-bit count holds)")
    return int(round(value))


class Verdict(NamedTuple):
    """Whether a program fits: ``peak_bytes`` against ``limit_bytes``,
    ``fits``, ``margin_bytes`` (limit - peak: negative when it does not fit),
    ``peak_name`` (which figure was used: XLA's ``peak_memory_in_bytes``, an
    out-of-memory report's ``memory_used_bytes``, or xlashape's own
    ``device_memory_peak_bytes``) and ``limit_name`` (the device or ``--limit``)."""

    peak_bytes: int
    limit_bytes: int
    peak_name: str
    limit_name: str

    @property
    def fits(self) -> bool:
        return self.peak_bytes <= self.limit_bytes

    @property
    def margin_bytes(self) -> int:
        return self.limit_bytes - self.peak_bytes

    @property
    def fraction(self) -> float:
        return self.peak_bytes / self.limit_bytes if self.limit_bytes else float("inf")

    def to_json(self) -> dict:
        d = self._asdict()
        d.update(fits=self.fits, margin_bytes=self.margin_bytes)
        return d


def module_peak(module) -> Optional[Tuple[int, str]]:
    """The peak to judge a module against a device's memory, and its name:
    an out-of-memory report's ``memory_used_bytes``; from a dump, the
    highest point of device memory (S(0)) over program order, named
    ``peak_memory_in_bytes`` when it is XLA's figure and
    ``device_memory_peak_bytes`` when XLA's peak also counts other memory
    (TPU VMEM, host memory); else ``memory_analysis()``'s
    ``peak_memory_in_bytes``."""
    if getattr(module, "memory_used_bytes", None) is not None:
        return module.memory_used_bytes, "memory_used_bytes"
    pa = getattr(module, "peak", None)
    if pa is not None:
        dev = pa.heap.get(0)
        if dev is not None and dev["padded"]:
            high = max(dev["padded"])
            if high == pa.figures.get("peak_memory_in_bytes"):
                return high, "peak_memory_in_bytes"
            return high, "device_memory_peak_bytes"
        if pa.figures.get("peak_memory_in_bytes") is not None:
            return pa.figures["peak_memory_in_bytes"], "peak_memory_in_bytes"
    ma = getattr(module, "memory_analysis", None) or {}
    if ma.get("peak_memory_in_bytes"):
        return ma["peak_memory_in_bytes"], "peak_memory_in_bytes"
    return None


def judge(module, limit_bytes: int, limit_name: str) -> Optional[Verdict]:
    """:class:`Verdict` of ``module`` against ``limit_bytes`` (``None`` when
    no peak is known for it)."""
    got = module_peak(module)
    if got is None:
        return None
    return Verdict(got[0], limit_bytes, got[1], limit_name)


# -- the proto route: the heap simulator's own trace ---------------------------------


class _Replay:
    """XProf's replay of one heap-simulator trace: ALLOC adds a buffer, FREE
    drops its canonical buffer when the last sharer is freed, SHARE_WITH adds
    the canonical buffer again when it had been freed."""

    def __init__(self, sizes: Dict[int, Tuple[int, int]]):
        self.sizes = sizes
        self.canonical: Dict[int, int] = {}
        self.refs: Dict[int, int] = {}
        self.padded = self.unpadded = 0
        self.peak = self.peak_unpadded = 0
        self.peak_event = -1
        self.timeline: List[int] = []

    def _root(self, b: int) -> int:
        seen = 0
        while b in self.canonical and seen < 1 << 20:
            b = self.canonical[b]
            seen += 1
        return b

    def _add(self, b: int, i: int) -> None:
        p, u = self.sizes.get(b, (0, 0))
        self.padded += p
        self.unpadded += u
        if self.padded > self.peak:
            self.peak, self.peak_event = self.padded, i
        self.peak_unpadded = max(self.peak_unpadded, self.unpadded)

    def run(self, events) -> "_Replay":
        for i, e in enumerate(events):
            self.timeline.append(self.padded)
            if e.kind == 0:      # ALLOC
                r = self._root(e.buffer_id)
                self.refs[r] = self.refs.get(r, 0) + 1
                self._add(r, i)
            elif e.kind == 1:    # FREE
                r = self._root(e.buffer_id)
                n = self.refs.get(r, 0) - 1
                self.refs[r] = n
                if n == 0:
                    p, u = self.sizes.get(r, (0, 0))
                    self.padded -= p
                    self.unpadded -= u
            elif e.kind == 2:    # SHARE_WITH
                self.canonical[e.buffer_id] = e.share_with_canonical_id
                r = self._root(e.share_with_canonical_id)
                n = self.refs.get(r, 0) + 1
                self.refs[r] = n
                if n == 1:
                    self._add(r, i)
        self.timeline.append(self.padded)
        return self

    def live_after(self, events, stop: int) -> List[int]:
        """The canonical buffers live just after event ``stop`` (a fresh
        replay up to it)."""
        again = _Replay(self.sizes)
        again.run(events[: stop + 1])
        return [b for b, n in again.refs.items() if n > 0]


def peak_from_hlo_proto(hlo, platform: Optional[str], *, unpadded=None,
                        describe=None, check: bool = True) -> PeakAnalysis:
    """The same figures as :func:`analyze_peak`, from an ``HloProto`` (the
    ``.hlo.pb`` XLA writes with ``--xla_dump_hlo_as_proto``; read it with
    :func:`xlashape.protos.read_hlo_proto`): the buffer assignment's
    allocations and the heap simulator's own traces. ``unpadded(logical
    buffer proto) -> int`` gives sizes without padding (default: the size).

    ``heap`` holds, per memory space, the heap over the trace's events (not
    program positions); ``peak_time`` / ``peak_instruction`` are the event
    where the highest heap peaks (its index in the trace, its instruction).
    ``live_at_peak``: the whole-program buffers and the buffers of that trace
    live at that event; ``describe(logical buffer proto) -> (instruction,
    label, shape text)`` names them (default: the instruction from the
    module's ids, no shape). A negative size, offset or shape index raises
    :class:`~xlashape.errors.ProtoDecodeError` (:func:`xlashape.protos.check_sizes`;
    ``check=False``: the caller has checked)."""
    if check:
        check_sizes(hlo, "the HLO proto")
    pa = PeakAnalysis(platform)
    pa.time_axis = "trace events"
    ba = hlo.buffer_assignment
    sizes: Dict[int, Tuple[int, int]] = {}
    color_of: Dict[int, int] = {}
    for lb in ba.logical_buffers:
        u = unpadded(lb) if unpadded else lb.size
        sizes[lb.id] = (lb.size, u)
        color_of[lb.id] = lb.color
    if describe is None:
        ids = {i.id: i.name for c in hlo.hlo_module.computations for i in c.instructions}

        def describe(lb):
            name = ids.get(lb.defined_at.instruction_id) or lb.defined_at.instruction_name
            return name, name + "{" + ",".join(map(str, lb.defined_at.shape_index)) + "}", ""
    logical = {lb.id: lb for lb in ba.logical_buffers}
    placed: Dict[int, Tuple[object, int]] = {}
    for a in ba.buffer_allocations:
        for x in a.assigned:
            placed[x.logical_buffer_id] = (a, x.offset)

    def buffer(lb_id: int, a, offset: int) -> PeakBuffer:
        p, u = sizes.get(lb_id, (0, 0))
        lb = logical.get(lb_id)
        name, label, shape = describe(lb) if lb is not None else (str(lb_id), str(lb_id), "")
        return PeakBuffer(label, name, a.index if a is not None else -1,
                          a.color if a is not None else 0, p, u, offset, None, None,
                          category(a) if a is not None else "temporary", shape, None, None)

    total0 = indefinite0 = fixed = fixed_unpadded = 0
    fixed_by_color: Dict[int, int] = {}
    live_now: List[PeakBuffer] = []
    for a in ba.buffer_allocations:
        if a.color == 0:
            total0 += a.size
            if is_indefinite(a):
                indefinite0 += a.size
        if is_indefinite(a) and not a.is_thread_local and len(a.assigned):
            best = max(a.assigned, key=lambda x: sizes.get(x.logical_buffer_id, (0, 0))[0])
            p, u = sizes.get(best.logical_buffer_id, (0, 0))
            fixed += p
            fixed_unpadded += u
            fixed_by_color[a.color] = fixed_by_color.get(a.color, 0) + p
            live_now.append(buffer(best.logical_buffer_id, a, best.offset))
    heap_peak = heap_peak_unpadded = 0
    device_best = None
    for trace in ba.heap_simulator_traces:
        if not len(trace.events):
            continue
        r = _Replay(sizes).run(trace.events)
        heap_peak = max(heap_peak, r.peak)
        heap_peak_unpadded = max(heap_peak_unpadded, r.peak_unpadded)
        color = color_of.get(trace.events[0].buffer_id, 0)
        base = fixed_by_color.get(color, 0)
        pa.heap.setdefault(color, {"padded": [base + x for x in r.timeline], "unpadded": []})
        if device_best is None or r.peak > device_best[0]:
            device_best = (r.peak, r.peak_event, trace.events[r.peak_event].instruction_name
                           if r.peak_event >= 0 else None, color, r, trace)
    if device_best is not None:
        pa.peak_time, pa.peak_instruction = device_best[1], device_best[2]
        pa.peak_memory_space = device_best[3]
        if device_best[1] >= 0:
            for b in device_best[4].live_after(device_best[5].events, device_best[1]):
                a, offset = placed.get(b, (None, 0))
                live_now.append(buffer(b, a, offset))
    live_now.sort(key=lambda b: (-b.size, b.label))
    pa.live_at_peak = live_now
    pa.computed["total_allocation_bytes"] = total0
    pa.computed["indefinite_allocations"] = indefinite0
    if platform == "cpu":
        pa.computed["peak_memory_in_bytes"] = fixed
        pa.computed["peak_unpadded_heap_bytes"] = fixed_unpadded
    else:
        pa.computed["peak_memory_in_bytes"] = fixed + heap_peak
        pa.computed["peak_unpadded_heap_bytes"] = fixed_unpadded + heap_peak_unpadded
    verified = VERIFIED.get(platform or "", ())
    for k in PEAK_FIELDS:
        if k in verified:
            pa.figures[k] = pa.computed[k]
        elif platform is None:
            pa.reasons[k] = ("the platform (CPU, GPU, TPU) is not known: XLA counts it "
                             "differently on each; say --platform")
        else:
            pa.reasons[k] = _REASONS.get((platform, k), f"not reproduced on {platform.upper()}")
    return pa
