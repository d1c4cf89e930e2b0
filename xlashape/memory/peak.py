"""The peak of a compiled XLA program, and what is live at it, from its dump.

XLA's ``CompiledMemoryStats`` carries four figures beyond the size fields
(XLA's PjRt executables compute them from the buffer assignment; XProf's
memory viewer replays the same data):

``total_allocation_bytes``
    the sizes of every allocation in device memory (memory space / color 0);
``indefinite_allocations``
    the same for the allocations that live for the whole program: entry
    parameters, outputs (``maybe-live-out``), constants and thread-local
    allocations (XProf's "indefinite lifetime" allocations) -- the
    thread-local ones counted in both figures by XLA up to jax 0.11 and left
    out of both from jax 0.12 on (see the platform rules);
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
on every program of the real corpora (CPU 23 compiled by each of jax 0.10.2
and 0.12.0.1 and 6 by 0.11.2, GPU 16, TPU 23; see the project README); a
figure a platform's rule has not been checked for, or an
artifact does not determine, is ``None`` with the reason in
:attr:`PeakAnalysis.reasons`, and our own heap is shown under our own names
(``heap``, ``live_at_peak``).

Platform rules (found on real compiles):

- XLA:GPU (jax 0.11.2) and XLA:TPU (libtpu 0.0.50.1): all four figures as
  above. (XLA:GPU of jax 0.12 was not checked; its totals come from the same
  XLA functions as XLA:CPU's, which leave thread-local allocations out from
  jax 0.12 on.)
- XLA:CPU, every jax checked (0.10.2, 0.11.2, 0.12.0.1): the buffer
  assignment of the executable that ``memory_analysis()`` reads carries no
  heap-simulator traces (its ``serialized_buffer_assignment_proto`` holds
  none; the dump's ``.hlo.pb``, written while compiling, does), so
  ``peak_memory_in_bytes`` and ``peak_unpadded_heap_bytes`` are the
  whole-program buffers alone, padded and unpadded (equal on the CPU, whose
  layouts have no padding). ``total_allocation_bytes`` and
  ``indefinite_allocations`` count the thread-local allocations (the scalars
  of the computations a reduce, sort or scatter calls, a few bytes each)
  with jax 0.11.2 and leave them out with jax 0.12.0.1 (its XLA's
  ``ComputeTotalAllocationBytes`` and ``ComputeIndefiniteAllocationsInBytes``
  skip ``is_thread_local``; jaxlib 0.10.2's count them, though jax 0.10.2
  reports neither field, nor ``peak_unpadded_heap_bytes``). The two versions
  write the same dump files, so where a module has thread-local allocations
  in device memory these two are ``None`` with both numbers in the reason;
  elsewhere the versions agree and the figure is printed.
"""

from array import array
from itertools import accumulate
from operator import add, itemgetter
from typing import Dict, Iterable, List, NamedTuple, Optional, Tuple

from ..allocation_kinds import TEMPORARY, is_indefinite, kind_of
from ..errors import ShapeValueError
from ..live_range import LiveRanges, Location, reads
from .figures import PEAK_FIELDS
from .model import PeakAnalysis, PeakBuffer

__all__ = ["analyze_peak", "VERIFIED", "peak_from_hlo_proto", "PeakBuilder"]

#: which XLA field each platform's rule reproduces (checked on real corpora)
VERIFIED = {
    "gpu": ("total_allocation_bytes", "indefinite_allocations", "peak_memory_in_bytes",
            "peak_unpadded_heap_bytes"),
    "cpu": ("total_allocation_bytes", "indefinite_allocations", "peak_memory_in_bytes",
            "peak_unpadded_heap_bytes"),
    "tpu": ("total_allocation_bytes", "indefinite_allocations", "peak_memory_in_bytes",
            "peak_unpadded_heap_bytes"),
}

#: the two figures whose rule changed between jax versions on the CPU
_THREAD_LOCAL_FIGURES = ("total_allocation_bytes", "indefinite_allocations")


def _cpu_figures(pa: "PeakAnalysis", fixed: int, fixed_unpadded: int, thread_local: int) -> None:
    """XLA:CPU's rule (every jax checked; see the module docstring): no heap
    traces in the executable, so both peaks are the whole-program buffers;
    the totals are printed where the versions agree (no thread-local bytes in
    device memory) and ``None`` with both versions' numbers where they do not."""
    pa.computed["peak_memory_in_bytes"] = fixed
    pa.computed["peak_unpadded_heap_bytes"] = fixed_unpadded
    for k in PEAK_FIELDS:
        if k not in VERIFIED["cpu"]:
            pa.reasons[k] = "not reproduced on CPU"
        elif k in _THREAD_LOCAL_FIGURES and thread_local:
            counted = pa.computed[k]
            pa.reasons[k] = (
                f"XLA:CPU counts this module's {thread_local} bytes of thread-local allocations "
                f"in it with jax 0.11.2 ({counted}; jaxlib 0.10.2's XLA counts them too, but jax "
                f"0.10.2 does not report the field) and leaves them out with jax 0.12.0.1 "
                f"({counted - thread_local}); the dump does not say which jax wrote it (0.11.2 "
                f"and 0.12.0.1 write the same files)")
        else:
            pa.figures[k] = pa.computed[k]


_RANGE_OF = itemgetter(0)


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
        self.total0 = self.indefinite0 = self.thread_local0 = self.fixed = self.fixed_unpadded = 0
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
                if a.is_thread_local:
                    self.thread_local0 += a.size
        unpadded = self.unpadded
        if is_indefinite(a):
            if a.is_thread_local or not a.values:
                return
            v = max(a.values, key=lambda v: v.size)
            u = unpadded(v) if unpadded else v.size
            self.fixed += v.size
            self.fixed_unpadded += u
            self.fixed_buffers.append(PeakBuffer(v.label, v.name, a.index, a.color, v.size, u,
                                                 v.offset, None, None, kind_of(a), v.shape_text,
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
            kind = kind_of(a)
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
        if platform == "cpu":
            # XLA:CPU's executable keeps no heap traces: its peaks are the
            # whole-program buffers alone, with or without live ranges
            _cpu_figures(pa, fixed, fixed_unpadded, self.thread_local0)
            return pa

        verified = VERIFIED.get(platform or "", ())
        missing = self.missing
        for k in PEAK_FIELDS:
            if (platform == "tpu" and k.startswith("peak") and live is not None
                    and self.operands is None):
                pa.reasons[k] = ("on TPU the heap replay needs the dump's "
                                 "*-buffer-assignment-values.txt (which values share memory), or "
                                 "the .hlo.pb (--xla_dump_hlo_as_proto)")
            elif missing and k.startswith("peak"):
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
                pa.reasons[k] = f"not reproduced on {platform.upper()}"
        return pa


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

    def run(self, events) -> "_Replay":
        # one loop with its state in locals (a trace has an event per buffer
        # and use: the replay is most of the proto route's peak)
        sizes, canonical, refs = self.sizes, self.canonical, self.refs
        padded, unpadded = self.padded, self.unpadded
        peak, peak_unpadded, peak_event = self.peak, self.peak_unpadded, self.peak_event
        append = self.timeline.append
        none = (0, 0)
        limit = 1 << 20
        for i, e in enumerate(events):
            append(padded)
            kind = e.kind
            if kind > 2:
                continue
            b = e.buffer_id
            if kind == 2:        # SHARE_WITH: b now counts as its canonical buffer
                c = e.share_with_canonical_id
                canonical[b] = c
                b = c
            seen = 0
            while b in canonical and seen < limit:
                b = canonical[b]
                seen += 1
            if kind == 1:        # FREE
                n = refs.get(b, 0) - 1
                refs[b] = n
                if n == 0:
                    p, u = sizes.get(b, none)
                    padded -= p
                    unpadded -= u
                continue
            n = refs.get(b, 0) + 1
            refs[b] = n
            if kind == 0 or n == 1:     # an ALLOC, or a SHARE_WITH of a freed buffer
                p, u = sizes.get(b, none)
                padded += p
                unpadded += u
                if padded > peak:
                    peak, peak_event = padded, i
                if unpadded > peak_unpadded:
                    peak_unpadded = unpadded
        append(padded)
        self.padded, self.unpadded = padded, unpadded
        self.peak, self.peak_unpadded, self.peak_event = peak, peak_unpadded, peak_event
        return self

    def live_after(self, events, stop: int) -> List[int]:
        """The canonical buffers live just after event ``stop`` (a fresh
        replay up to it)."""
        again = _Replay(self.sizes)
        again.run(events[: stop + 1])
        return [b for b, n in again.refs.items() if n > 0]


def peak_from_hlo_proto(hlo, platform: Optional[str], *, unpadded=None,
                        describe=None) -> PeakAnalysis:
    """The same figures as :func:`analyze_peak`, from an ``HloProto`` (the
    ``.hlo.pb`` XLA writes with ``--xla_dump_hlo_as_proto``; read it with
    :func:`xlashape.protos.read_hlo_proto`) or a ``BufferAssignmentProto``
    alone: the buffer assignment's
    allocations and the heap simulator's own traces. ``unpadded(logical
    buffer proto) -> int`` gives sizes without padding (default: the size).

    ``heap`` holds, per memory space, the heap over the trace's events (not
    program positions); ``peak_time`` / ``peak_instruction`` are the event
    where the highest heap peaks (its index in the trace, its instruction).
    ``live_at_peak``: the whole-program buffers and the buffers of that trace
    live at that event; ``describe(logical buffer proto) -> (instruction,
    label, shape text)`` names them (default: the instruction from the
    module's ids, no shape)."""
    pa = PeakAnalysis(platform)
    pa.time_axis = "trace events"
    module = getattr(hlo, "hlo_module", None)
    ba = hlo.buffer_assignment if module is not None else hlo
    sizes: Dict[int, Tuple[int, int]] = {}
    color_of: Dict[int, int] = {}
    for lb in ba.logical_buffers:
        u = unpadded(lb) if unpadded else lb.size
        sizes[lb.id] = (lb.size, u)
        color_of[lb.id] = lb.color
    if describe is None:
        ids = ({i.id: i.name for c in module.computations for i in c.instructions}
               if module is not None else {})

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
        name, label, shape = describe(lb) if lb is not None else (None, None, None)
        if name is None:
            name = label = str(lb_id)
            shape = ""
        return PeakBuffer(label, name, a.index if a is not None else -1,
                          a.color if a is not None else 0, p, u, offset, None, None,
                          kind_of(a) if a is not None else TEMPORARY, shape, None, None)

    total0 = indefinite0 = thread_local0 = fixed = fixed_unpadded = 0
    fixed_by_color: Dict[int, int] = {}
    live_now: List[PeakBuffer] = []
    for a in ba.buffer_allocations:
        if a.color == 0:
            total0 += a.size
            if is_indefinite(a):
                indefinite0 += a.size
                if a.is_thread_local:
                    thread_local0 += a.size
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
        _cpu_figures(pa, fixed, fixed_unpadded, thread_local0)
        return pa
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
            pa.reasons[k] = f"not reproduced on {platform.upper()}"
    return pa
