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

The traces are in the ``.hlo.pb`` (``--xla_dump_hlo_as_proto``: replayed
by :func:`xlashape.memory.traces.peak_from_hlo_proto`). The same heaps follow
from the text files (:func:`analyze_peak`, :class:`PeakBuilder`): each
value's offset and size in ``*-buffer-assignment.txt`` and its live range in
``*-live-range.txt`` (both ends counted), with which values share memory
decided by XLA's rules (:mod:`xlashape.memory.sharing`); tuple pointer tables
are not in the traces. A heap the rules do not explain from the text gets
its peak fields ``None`` with the reason ("read the .hlo.pb:
--xla_dump_hlo_as_proto"), never another number. Both routes give XLA's
numbers on every program of the real corpora (CPU 23 compiled by each of jax
0.10.2 and 0.12.0.1 and 6 by 0.11.2, GPU 16, TPU 31; the tests compare the
text route's sharing pairs with every trace's); a figure a platform's rule
has not been checked for, or an artifact does not determine, is ``None``
with the reason in :attr:`PeakAnalysis.reasons`, and our own heap is shown
under our own names (``heap``, ``live_at_peak``).

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
from operator import add, gt, itemgetter
from typing import Dict, Iterable, List, NamedTuple, Optional, Tuple

from ..allocation_kinds import is_indefinite, kind_of
from ..errors import ShapeValueError
from ..live_range import LiveRanges, Location
from .figures import PEAK_FIELDS
from .model import PeakAnalysis, PeakBuffer
from .sharing import (MSA_COLORS, PROTO_HINT, VIEW_TARGETS, SharingFacts, alias_buffers,
                      computation_start, overlap)

__all__ = ["analyze_peak", "VERIFIED", "PeakBuilder", "cpu_figures"]

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


def cpu_figures(pa: "PeakAnalysis", fixed: int, fixed_unpadded: int, thread_local: int) -> None:
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
                 facts: Optional["SharingFacts"] = None) -> PeakAnalysis:
    """Compute the peak figures from the buffer assignment's allocations
    (:class:`~xlashape.xla_dump.BufferAllocation` records, read once) and the
    live ranges (``None`` when the dump has no ``*-live-range.txt``: then only
    the fields that need no heap are given).

    ``unpadded(value) -> int`` gives a value's size without padding (default:
    its size); ``locations`` maps instruction names to op path and source;
    ``facts`` (:class:`SharingFacts`: the values file and the module text,
    read if a heap needs them). :class:`PeakBuilder` does the same one
    allocation at a time.
    """
    builder = PeakBuilder(live, platform, unpadded=unpadded, facts=facts)
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
    the peak too; ``finish()`` returns the :class:`PeakAnalysis`.

    ``facts`` (a :class:`SharingFacts`) is asked only when a heap needs it:
    memory-space assignment's heaps on TPU, and ``hlo_buffers=True``, which
    also joins values of one XLA buffer that live apart (a while loop's
    values, a conditional's, an in-place operation's; see the module
    docstring) -- it changes no figure, such values all have one size, but
    makes :attr:`shares` the heap simulator's SHARE_WITH pairs."""

    def __init__(self, live: Optional[LiveRanges], platform: Optional[str], *, unpadded=None,
                 facts: Optional[SharingFacts] = None, hlo_buffers: bool = False):
        self.live = live
        self.platform = platform
        self.unpadded = unpadded
        self.facts = facts
        self.hlo_buffers = hlo_buffers
        self.total0 = self.indefinite0 = self.thread_local0 = self.fixed = self.fixed_unpadded = 0
        self.fixed_buffers: List[PeakBuffer] = []
        self.heaps: List[Tuple[object, List[list]]] = []
        self.missing = 0
        #: ``(value id, canonical value id)``: the values that share another's
        #: memory in the heap simulator's trace (SHARE_WITH), as this rule
        #: decides them
        self.shares: List[Tuple[int, int]] = []
        #: why the text files cannot decide the heap (then the peak fields are None)
        self.undecided: Optional[str] = None
        self._ucache: Dict[str, Tuple[int, int, str]] = {}
        self._time: Optional[Dict[str, int]] = None
        self._views: Optional[Dict[str, list]] = None
        self._alias = None

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
        recs = []
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
            recs.append((r, v, c))
        if a.color in MSA_COLORS.get(self.platform or "", ()):
            cols = self._assigned(a, recs)
        else:
            cols = self._simulated(a, recs)
        if cols is None:
            return
        starts, ends, sizes, unps, members = cols
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

    def _undecide(self, why: str) -> None:
        if self.undecided is None:
            self.undecided = why

    def _simulated(self, a, recs):
        """The heap simulator's heap of one allocation: ``(starts, ends,
        sizes, unpadded sizes, members)`` of its buffers (see the module
        docstring), or ``None`` when the text cannot decide it."""
        # the order in which the simulator defines values: by live range, then
        # by value id (the buffer assignment lists them by id)
        ids = [r[1].id for r in recs]
        if any(map(gt, ids, ids[1:])):
            recs.sort(key=lambda r: r[1].id)
        recs.sort(key=_RANGE_OF)
        starts, ends, sizes, unps = array("q"), array("q"), array("q"), array("q")
        members: List = []
        roots: List = []
        offsets: List[int] = []
        extents: List[int] = []
        at_offset: Dict[int, int] = {}
        for (s, e), v, (size, u, st) in recs:
            i = at_offset.get(v.offset) if size else None
            if i is not None and s <= ends[i]:
                # the chunk of a buffer still live: the simulator shared it
                # (SHARE_WITH); the buffer counts its first value's size
                if e > ends[i]:
                    ends[i] = e
                if size > extents[i]:
                    extents[i] = size
                got = members[i]
                if type(got) is tuple:
                    members[i] = [got, (s, e, v, st)]
                else:
                    got.append((s, e, v, st))
                continue
            if size:
                at_offset[v.offset] = len(starts)
            starts.append(s)
            ends.append(e)
            sizes.append(size)
            unps.append(u)
            members.append((s, e, v, st))
            roots.append(v)
            offsets.append(v.offset)
            extents.append(size)
        clash = overlap(starts, ends, offsets, extents, 0, ordered=True)
        if clash is not None:
            i, j = clash
            self._undecide(f"allocation {a.index}: {roots[i].label} and {roots[j].label} are live at "
                           "one time in overlapping memory, which no sharing rule of the heap "
                           "simulator explains from the text files")
            return None
        group = list(range(len(starts)))
        if self.hlo_buffers:
            find = self._alias_find()
            if find is not None:
                first: Dict[object, int] = {}
                for i, v in enumerate(roots):
                    # a buffer whose first value belongs to an XLA buffer
                    # already placed (a while loop's value, ...) shares it
                    key = (offsets[i], find(v.id))
                    g = first.get(key)
                    if g is not None:
                        group[i] = g
                        sizes[i], unps[i] = sizes[g], unps[g]
                    m = members[i]
                    for x in ((m,) if type(m) is tuple else m):
                        first.setdefault((offsets[i], find(x[2].id)), group[i])
        shares = self.shares
        for i, m in enumerate(members):
            g = group[i]
            if g == i and type(m) is tuple:
                continue  # one value, the first of its memory
            root = roots[g].id
            for x in ((m,) if type(m) is tuple else m):
                if x[2].id != root:
                    shares.append((x[2].id, root))
        return starts, ends, sizes, unps, members

    def _assigned(self, a, recs):
        """The heap of an allocation placed by memory-space assignment (its
        exported trace): each value from its definition to its last use (to
        each branch's last use where that is a conditional), views left out,
        no sharing. ``None`` when the text cannot decide it."""
        facts = self.facts
        values = facts.values() if facts is not None else None
        if values is None:
            self._undecide(f"allocation {a.index} (memory space {a.color}) is placed by "
                           "memory-space assignment: its heap needs each value's uses, in the "
                           "dump's *-buffer-assignment-values.txt")
            return None
        time = self._positions()
        views = self._view_uses(values, time)
        starts, ends, sizes, unps = array("q"), array("q"), array("q"), array("q")
        members: List = []
        offsets: List[int] = []
        labels: List[str] = []
        for (s, e), v, (size, u, st) in recs:
            r = values.get(v.id)
            if r is None:
                self._undecide(f"allocation {a.index}: value {v.label} is not in the values file")
                return None
            if r.opcode == "custom-call":
                if r.target in VIEW_TARGETS:
                    continue  # a view of its operands' memory: not in the trace
                over = self._over_operands(v, recs, values)
                if over is not None:
                    # a view (not in the trace) or an output written over its
                    # operand (in it): the text does not say which
                    self._undecide(f"allocation {a.index}: the custom-call {v.name} "
                                   f"(custom_call_target={r.target!r}) lies over the memory of "
                                   f"its operand {over}: it may be a view of it, which "
                                   "memory-space assignment's trace leaves out")
                    return None
            uses = r.uses
            seen = [views[x.instruction] for x in uses if x.instruction in views]
            if seen:
                # read through a view: live until the view's last reader
                uses = list(uses) + [w for ws, _ in seen for w in ws]
                e = max(e, max(t for _, t in seen))
            if not uses:
                continue  # never read: not in the trace
            last, last_use = s, None
            for x in uses:
                t = time.get(x.instruction)
                if t is not None and t > last:
                    last, last_use = t, x.instruction
            if last_use is not None and facts.is_conditional(last_use):
                spans = self._branch_spans(last_use, uses, s, e, time)
                if spans is None:
                    self._undecide(f"allocation {a.index}: {v.label} is last read by the "
                                   f"conditional {last_use}, whose branches the module text "
                                   "does not give")
                    return None
            else:
                spans = [(s, min(last, e))]
            for ss, ee in spans:
                if ee < ss:
                    self._undecide(f"allocation {a.index}: {v.label} ends before it starts in "
                                   "memory-space assignment's trace")
                    return None
                starts.append(ss)
                ends.append(ee)
                sizes.append(size)
                unps.append(u)
                members.append((ss, ee, v, st))
                offsets.append(v.offset)
                labels.append(v.label)
        # memory-space assignment lets a value take the memory of one whose
        # last use is where it starts (ends exclusive); no other overlap
        clash = overlap(starts, ends, offsets, list(sizes), 1)
        if clash is not None:
            i, j = clash
            self._undecide(f"allocation {a.index}: {labels[i]} and {labels[j]} are live at one "
                           "time in overlapping memory, which the text files do not explain")
            return None
        return starts, ends, sizes, unps, members

    @staticmethod
    def _over_operands(v, recs, values) -> Optional[str]:
        """The label of a value ``v``'s instruction reads whose chunk
        overlaps ``v``'s in this allocation, or ``None``."""
        lo, hi = v.offset, v.offset + v.size
        for _, w, _ in recs:
            if w is v or not (w.offset < hi and lo < w.offset + w.size):
                continue
            r = values.get(w.id)
            if r is not None and any(u.instruction == v.name for u in r.uses):
                return w.label
        return None

    def _positions(self) -> Dict[str, int]:
        if self._time is None:
            self._time = {name: t for t, name in enumerate(self.live.sequence) if name}
        return self._time

    def _view_uses(self, values, time) -> Dict[str, Tuple[list, int]]:
        """``view instruction -> (the uses of its memory, the last one's
        position)`` for every view of the values file (a view's readers read
        its operands' memory; a view of a view passes them on)."""
        if self._views is None:
            direct = {r.positions[0][0]: list(r.uses) for r in values.values()
                      if r.opcode == "custom-call" and r.target in VIEW_TARGETS and r.positions}
            views: Dict[str, Tuple[list, int]] = {}
            for name, uses in direct.items():
                out, todo, seen = [], list(uses), {name}
                while todo:
                    x = todo.pop()
                    out.append(x)
                    if x.instruction in direct and x.instruction not in seen:
                        seen.add(x.instruction)
                        todo.extend(direct[x.instruction])
                views[name] = (out, max((time.get(x.instruction, -1) for x in out), default=-1))
            self._views = views
        return self._views

    def _branch_spans(self, cond: str, uses, start: int, end: int, time, depth: int = 0):
        """Memory-space assignment's split of a value last read by a
        conditional: from each branch's first position to the value's last
        use in it, and from its start to just before the first branch."""
        module = self.facts.module()
        if module is None or depth > 64:
            return None
        instructions, computations = module
        ins = instructions.get(cond)
        if ins is None:
            return None
        spans = []
        earliest = end
        for c in ins.called_computations:
            first = computation_start(c, instructions, computations, time)
            if first is None:
                return None
            earliest = min(earliest, first)
            last, last_use = -1, None
            for x in uses:
                t = time.get(x.instruction)
                u = instructions.get(x.instruction)
                if t is not None and u is not None and u.computation == c and t > last:
                    last, last_use = t, x.instruction
            if last != -1:
                last = min(last, end)
                if self.facts.is_conditional(last_use):
                    more = self._branch_spans(last_use, uses, first, last, time, depth + 1)
                    if more is None:
                        return None
                    spans.extend(more)
                else:
                    spans.append((first, last))
        spans.append((start, earliest - 1))
        return spans

    def _alias_find(self):
        """XLA's buffers (HloAliasAnalysis) over the values file's values, as
        a ``find(value id)`` giving one key per buffer; ``None`` without the
        values file and the module text."""
        if self._alias is None:
            facts = self.facts
            values = facts.values() if facts is not None else None
            module = facts.module() if values is not None else None
            self._alias = (alias_buffers(values, module) if module is not None else False)
        return self._alias or None

    def finish(self, locations: Optional[Dict[str, Location]] = None) -> PeakAnalysis:
        platform, live, heaps = self.platform, self.live, self.heaps
        fixed, fixed_unpadded = self.fixed, self.fixed_unpadded
        pa = PeakAnalysis(platform)
        pa.shares = list(self.shares)
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
            cpu_figures(pa, fixed, fixed_unpadded, self.thread_local0)
            return pa

        verified = VERIFIED.get(platform or "", ())
        missing = self.missing
        undecided = self.undecided if live is not None and platform != "cpu" else None
        if undecided is not None:
            # the heap is not XLA's: no number of ours under its name or ours
            pa.computed["peak_memory_in_bytes"] = pa.computed["peak_unpadded_heap_bytes"] = None
        for k in PEAK_FIELDS:
            if undecided is not None and k.startswith("peak"):
                pa.reasons[k] = f"{undecided}; {PROTO_HINT}"
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
