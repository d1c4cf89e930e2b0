"""XLA's heap simulator, written again: how the buffer assignment packs temporaries.

XLA's buffer assignment (``BufferAssigner``) gives every value that is
neither an entry parameter, a constant, thread-local nor live out of the
program a place in one block per memory space, the temporary allocation
(``preallocated-temp``). It replays the program (``HeapSimulator``) and
hands the values to a packing algorithm; this module is that replay and
those algorithms, on plain numbers (:class:`HeapValue`), so that any source
of sizes and live ranges can use them (:mod:`xlashape.memory.packing` feeds
it a dump's values, :mod:`xlashape.memory.whatif` the same values resized).

The replay (:func:`replay`, ``HeapSimulator::RunComputation``): the values
are sorted by live range (start, end, value id); at each program position
the values that start there are defined, in that order, then those that
end there are freed. A value whose XLA buffer (``HloAliasAnalysis``: a while
loop's values, a conditional's, an in-place operation's operand and output)
already has a placed value shares its memory (``SHARE_WITH``); a value alone
in its buffer may take the memory of an operand's value that ends where it
starts, is alone in its buffer and that XLA's
``CanShareOperandBufferWithUser`` allows (the caller says which:
``candidates``), in operand order; any other value is allocated. Each
allocation, free and share is one tick of the algorithm's clock (a size-0
value makes none): two buffers overlap in time when their ticks do.

The packing (:class:`BestFitHeap`, ``GlobalDecreasingSizeBestFitHeap``):
the allocated buffers are placed one by one, in decreasing size
(``kSpatial``: size, then longer live range first, then value id) or
decreasing live range (``kTemporal``: the span of the buffer with the
values that share it, then size, then id). Each takes the smallest free
gap (then the lowest) among the memory not used by a placed buffer that
overlaps it or one of the values sharing it in time, at an offset rounded
up to the memory space's alignment, large enough for the largest of them;
the gap above every used chunk is unbounded. A sharing value gets its
buffer's chunk, of that largest size. The heap's size is the highest chunk
end. XLA packs with both orders and keeps the smaller heap
(``ChooseBestHeapAlgorithm``, the first on a tie): :func:`pack`.
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right, insort
from typing import Callable, Dict, Iterable, List, NamedTuple, Optional, Sequence, Tuple

import numpy as np

__all__ = ["HeapValue", "Event", "ALLOC", "FREE", "SHARE_WITH", "replay", "BestFitHeap",
           "HeapResult", "pack", "SPATIAL", "TEMPORAL", "SPAN", "align_up", "trace_peak"]

#: the packing orders XLA's buffer assignment tries (``kSpatial``, ``kTemporal``),
#: and the one XLA:TPU's shows (``SPAN``: the span of a buffer with the values
#: that share it, longest first, then value id; no size)
SPATIAL = "spatial"
TEMPORAL = "temporal"
SPAN = "span"

ALLOC, FREE, SHARE_WITH = 0, 1, 2


class HeapValue(NamedTuple):
    """One value the heap simulator places: XLA's value ``id``, its ``size``
    in bytes and its live range (``start``, ``end``: program positions, both
    included, as the dump's live-range file gives them)."""

    id: int
    size: int
    start: int
    end: int


class Event(NamedTuple):
    """One event of the replay: ``kind`` (:data:`ALLOC`, :data:`FREE`,
    :data:`SHARE_WITH`), the value ``id``, for a share the value whose memory
    it takes (``share_with``), and the ``size`` the algorithm is told
    (``None``: the value's, or for a share the shared value's, as the heap
    simulator passes it)."""

    kind: int
    id: int
    share_with: Optional[int] = None
    size: Optional[int] = None


def align_up(n: int, alignment: int) -> int:
    """``n`` rounded up to a multiple of ``alignment``."""
    if alignment <= 1:
        return n
    return -(-n // alignment) * alignment


def replay(values: Iterable[HeapValue], *, buffer_of: Optional[Callable[[int], object]] = None,
           buffer_values: Optional[Callable[[object], int]] = None,
           candidates: Optional[Callable[[int], Sequence[int]]] = None) -> List[Event]:
    """The events of ``HeapSimulator::RunComputation`` over ``values`` (see the
    module docstring). ``buffer_of(id)``: the value's XLA buffer (a key; by
    default each value is its own); ``buffer_values(key)``: how many values
    the buffer has in the whole program (default 1); ``candidates(id)``: the
    values of the value's operands, in operand order, whose memory XLA's
    ``CanShareOperandBufferWithUser`` lets it take (default none)."""
    values = sorted(values, key=lambda v: (v.start, v.end, v.id))
    if not values:
        return []
    by_id = {v.id: v for v in values}
    end_of = {v.id: v.end for v in values}
    last = max(v.end for v in values)
    first = min(v.start for v in values)
    defined: Dict[int, List[int]] = {}
    freed: Dict[int, List[int]] = {}
    for v in values:
        defined.setdefault(v.start, []).append(v.id)
        freed.setdefault(v.end, []).append(v.id)
    if buffer_of is None:
        def buffer_of(i):
            return i
    if buffer_values is None:
        def buffer_values(key):
            return 1
    events: List[Event] = []
    first_of: Dict[object, int] = {}
    for t in range(first, last + 1):
        starting = defined.get(t)
        ending = freed.get(t)
        if starting:
            for vid in starting:
                key = buffer_of(vid)
                canonical = first_of.get(key)
                if canonical is not None:
                    events.append(Event(SHARE_WITH, vid, canonical))
                    continue
                shared = False
                if candidates is not None and buffer_values(key) == 1:
                    for op in candidates(vid):
                        if op == vid or op not in by_id:
                            continue
                        if buffer_values(buffer_of(op)) > 1:
                            continue
                        if end_of[op] != t or not ending or op not in ending:
                            continue
                        # the operand's memory is freed right before the
                        # user takes it; its range now ends with the user's
                        events.append(Event(FREE, op))
                        ending.remove(op)
                        events.append(Event(SHARE_WITH, vid, op))
                        end_of[op] = end_of[vid]
                        shared = True
                        break
                if not shared:
                    events.append(Event(ALLOC, vid))
                    first_of[key] = vid
        if ending:
            for vid in ending:
                events.append(Event(FREE, vid))
    return events


class HeapResult(NamedTuple):
    """What a packing gives: the heap's ``size`` in bytes, each value's
    ``chunks`` (``id -> (offset, size)``; a sharing value has its buffer's
    chunk), the ``order`` that packed it (:data:`SPATIAL` or
    :data:`TEMPORAL`) and the ``shares`` (``(value, value whose memory it
    takes)``, in replay order)."""

    size: int
    chunks: Dict[int, Tuple[int, int]]
    order: str
    shares: Tuple[Tuple[int, int], ...]


class _Interval:
    __slots__ = ("id", "size", "start", "end", "colocations", "need_allocation",
                 "lo", "hi")

    def __init__(self, vid, size, start, need_allocation):
        self.id = vid
        self.size = size
        self.start = start
        self.end = -1
        self.colocations: List[int] = []
        self.need_allocation = need_allocation
        self.lo = self.hi = 0


class _Placed:
    """The chunks placed so far, by the span of time (ticks) each is used:
    a stabbing tree over the ticks (the chunks in use at a tick) and the
    starts in order (the chunks that start inside a span). Chunks are
    numbered; their offsets and sizes are kept as lists and as numpy arrays
    (``capacity``: how many chunks at most)."""

    def __init__(self, ticks: int, capacity: int):
        size = 1
        while size < max(ticks, 1):
            size *= 2
        self.size = size
        self.nodes: Dict[int, List[int]] = {}
        self.starts: List[Tuple[int, int]] = []    # (start, chunk number)
        self.offsets: List[int] = []
        self.sizes: List[int] = []
        self.offsets_array = np.zeros(max(capacity, 1), dtype=np.int64)
        self.sizes_array = np.zeros(max(capacity, 1), dtype=np.int64)

    def add(self, start: int, end: int, offset: int, size: int) -> None:
        k = len(self.offsets)
        self.offsets.append(offset)
        self.sizes.append(size)
        self.offsets_array[k] = offset
        self.sizes_array[k] = size
        lo, hi = start + self.size, end + self.size + 1
        nodes = self.nodes
        while lo < hi:
            if lo & 1:
                nodes.setdefault(lo, []).append(k)
                lo += 1
            if hi & 1:
                hi -= 1
                nodes.setdefault(hi, []).append(k)
            lo >>= 1
            hi >>= 1
        insort(self.starts, (start, k))

    def overlapping(self, start: int, end: int, out: List[int]) -> None:
        """Append the numbers of the chunks in use at some tick of ``[start, end]``."""
        i = start + self.size
        nodes = self.nodes
        while i:
            got = nodes.get(i)
            if got:
                out.extend(got)
            i >>= 1
        starts = self.starts
        k = bisect_right(starts, (start, 1 << 62))
        stop = bisect_left(starts, (end + 1, -1))
        out.extend(s[1] for s in starts[k:stop])


_KEYS = {
    SPATIAL: lambda iv: (-iv.size, iv.start - iv.end, iv.id),
    TEMPORAL: lambda iv: (iv.lo - iv.hi, -iv.size, iv.id),
    SPAN: lambda iv: (iv.lo - iv.hi, iv.id),
}


class BestFitHeap:
    """``GlobalDecreasingSizeBestFitHeap`` (one heap, no size limit) fed the
    events of :func:`replay`: ``sizes`` gives each value's size, ``alignment``
    the memory space's, ``order`` :data:`SPATIAL` or :data:`TEMPORAL`."""

    def __init__(self, alignment: int = 1, order: str = SPATIAL):
        if alignment < 1:
            raise ValueError(f"alignment {alignment}: expected a positive number of bytes")
        if order not in _KEYS:
            raise ValueError(f"order {order!r}: expected one of {', '.join(map(repr, _KEYS))}")
        self.alignment = alignment
        self.order = order

    def run(self, events: Sequence[Event], sizes: Dict[int, int]) -> HeapResult:
        intervals: Dict[int, _Interval] = {}
        zero: List[int] = []
        shares = []
        t = 0
        for e in events:
            if e.kind == ALLOC:
                size = sizes[e.id] if e.size is None else e.size
                if size == 0:
                    zero.append(e.id)
                    continue
                intervals[e.id] = _Interval(e.id, size, t, True)
                t += 1
            elif e.kind == SHARE_WITH:
                shares.append((e.id, e.share_with))
                size = sizes[e.share_with] if e.size is None else e.size
                if size == 0:
                    zero.append(e.id)
                    continue
                intervals[e.share_with].colocations.append(e.id)
                intervals[e.id] = _Interval(e.id, size, t, False)
                t += 1
            else:
                got = intervals.get(e.id)
                if got is None:
                    continue
                if got.end == -1:
                    got.end = t
                    t += 1
        for iv in intervals.values():
            if iv.end == -1:      # never freed: live to the end
                iv.end = t
                t += 1
        colocs = {vid: self._transitive(iv, intervals) for vid, iv in intervals.items()}
        for vid, iv in intervals.items():
            lo, hi = iv.start, iv.end
            for c in colocs[vid]:
                other = intervals[c]
                lo = min(lo, other.start)
                hi = max(hi, other.end)
            iv.lo, iv.hi = lo, hi
        key = _KEYS[self.order]
        placed = _Placed(t + 1, len(intervals))
        chunks: Dict[int, Tuple[int, int]] = {vid: (0, 0) for vid in zero}
        heap_size = 0
        align = self.alignment
        for iv in sorted(intervals.values(), key=key):
            if not iv.need_allocation:
                continue
            members = colocs[iv.id]
            biggest = max([iv.size] + [intervals[c].size for c in members])
            used: List[int] = []
            placed.overlapping(iv.start, iv.end, used)
            for c in members:
                other = intervals[c]
                placed.overlapping(other.start, other.end, used)
            if len(used) > _VECTOR_FROM:
                idx = np.array(used, dtype=np.int64)
                offset = _best_fit_array(placed.offsets_array[idx], placed.sizes_array[idx],
                                         iv.size, biggest, align)
            else:
                offs, szs = placed.offsets, placed.sizes
                offset = self._best_fit([(offs[k], szs[k]) for k in used], iv.size, biggest)
            chunk = (offset, biggest)
            heap_size = max(heap_size, offset + biggest)
            chunks[iv.id] = chunk
            placed.add(iv.start, iv.end, offset, biggest)
            for c in members:
                chunks[c] = chunk
                other = intervals[c]
                placed.add(other.start, other.end, offset, biggest)
        return HeapResult(heap_size, chunks, self.order, tuple(shares))

    @staticmethod
    def _transitive(iv: _Interval, intervals: Dict[int, _Interval]) -> List[int]:
        out: List[int] = []
        seen = set()
        work = [iv]
        while work:
            item = work.pop()
            for c in item.colocations:
                if c not in seen:
                    seen.add(c)
                    out.append(c)
                    work.append(intervals[c])
        return out

    def _best_fit(self, used: List[Tuple[int, int]], size: int, biggest: int) -> int:
        """The offset of the smallest free gap (then the lowest) that holds
        ``biggest`` bytes at its aligned start, among the gaps of at least
        ``size`` bytes between the ``used`` chunks and the unbounded one above
        them."""
        if not used:
            return 0
        align = self.alignment
        chunks = sorted(set(used))
        free_start = 0
        best = -1
        best_size = 0
        cur_lo, n = chunks[0]
        cur_hi = cur_lo + n
        for lo, n in chunks:
            if lo < cur_hi:
                hi = lo + n
                if hi > cur_hi:
                    cur_hi = hi
                continue
            # the gap before the used range [cur_lo, cur_hi)
            if cur_lo - free_start >= size:
                start = -(-free_start // align) * align
                if cur_lo - biggest >= start:
                    gap = cur_lo - free_start
                    if best < 0 or gap < best_size:
                        best, best_size = start, gap
            end = -(-cur_hi // align) * align
            if end > free_start:
                free_start = end
            cur_lo, cur_hi = lo, lo + n
        if cur_lo - free_start >= size:
            start = -(-free_start // align) * align
            if cur_lo - biggest >= start:
                gap = cur_lo - free_start
                if best < 0 or gap < best_size:
                    best, best_size = start, gap
        if best >= 0:
            return best
        end = -(-cur_hi // align) * align
        return -(-max(free_start, end) // align) * align


#: from this many used chunks on, :func:`_best_fit_array` finds the gap
_VECTOR_FROM = 48


def _best_fit_array(offsets, sizes, size: int, biggest: int, align: int) -> int:
    """:meth:`BestFitHeap._best_fit` on numpy arrays of the used chunks'
    offsets and sizes (the same answer; for the many chunks live at once in a
    large program)."""
    order = np.lexsort((sizes, offsets))
    lo = offsets[order]
    hi = lo + sizes[order]
    reach = np.maximum.accumulate(hi)
    # a used range starts where a chunk begins at or above everything before it
    new = np.empty(len(lo), dtype=bool)
    new[0] = True
    new[1:] = lo[1:] >= reach[:-1]
    starts = lo[new]
    ends_before = np.empty(len(starts), dtype=np.int64)
    ends_before[0] = 0
    if len(starts) > 1:
        prev = reach[:-1][new[1:]]
        ends_before[1:] = -(-prev // align) * align
    free = np.maximum.accumulate(ends_before)
    gap = starts - free
    aligned = -(-free // align) * align
    ok = (gap >= size) & (starts - biggest >= aligned)
    if ok.any():
        g = np.where(ok, gap, np.iinfo(np.int64).max)
        return int(aligned[int(np.argmin(g))])
    last = -(-int(reach[-1]) // align) * align
    return -(-max(int(free[-1]), last) // align) * align


def pack(events: Sequence[Event], sizes: Dict[int, int], alignment: int = 1,
         orders: Sequence[str] = (SPATIAL, TEMPORAL)) -> HeapResult:
    """XLA's ``ChooseBestHeapAlgorithm`` over :class:`BestFitHeap` with each
    of ``orders``: the smallest heap, the first order on a tie."""
    best = None
    for order in orders:
        got = BestFitHeap(alignment, order).run(events, sizes)
        if best is None or got.size < best.size:
            best = got
    return best


def trace_peak(events: Sequence[Event], sizes: Dict[int, int]) -> Tuple[int, int]:
    """The highest bytes live during a replay's events (XLA's
    ``ComputePeakMemory`` over one heap-simulator trace: a buffer counts
    from its allocation until the last value sharing its memory is freed, a
    shared buffer once) and the index of the event that reached it (-1 for
    an empty trace)."""
    canonical: Dict[int, int] = {}
    refs: Dict[int, int] = {}
    live = peak = 0
    at = -1
    for i, e in enumerate(events):
        if e.kind == ALLOC:
            refs[e.id] = refs.get(e.id, 0) + 1
            if refs[e.id] == 1:
                live += sizes[e.id]
        elif e.kind == SHARE_WITH:
            root = e.share_with
            while root in canonical:
                root = canonical[root]
            canonical[e.id] = root
            refs[root] = refs.get(root, 0) + 1
            if refs[root] == 1:
                live += sizes[root]
        else:
            root = e.id
            while root in canonical:
                root = canonical[root]
            canonical.pop(e.id, None)
            refs[root] = refs.get(root, 0) - 1
            if refs[root] == 0:
                live -= sizes[root]
        if live > peak:
            peak, at = live, i
    return peak, at
