"""xlashape's copy of XLA's heap simulator (``xlashape.memory.heapsim``).

The packing cases are XLA's own: ``GlobalDecreasingSizeBestFitHeapTest`` of
``xla/service/heap_simulator/heap_simulator_test.cc`` gives each sequence of
Alloc / Free / ShareWith calls and the offsets, chunk sizes and heap size
XLA's ``GlobalDecreasingSizeBestFitHeap`` (kSpatial) returns; the replay
cases check the event order of ``HeapSimulator::RunComputation`` (values by
live range then id, defines before frees, XLA's buffers shared, an operand's
memory taken only when it ends there) and ``ComputePeakMemory`` on them.
"""

import pytest

from xlashape.memory.heapsim import (ALLOC, FREE, SHARE_WITH, SPAN, SPATIAL, TEMPORAL,
                                     BestFitHeap, Event, HeapValue, align_up, pack, replay,
                                     trace_peak)

A, B, C, D, E = range(5)


def _run(events, sizes, alignment=1, order=SPATIAL):
    return BestFitHeap(alignment, order).run(events, sizes)


def test_empty_heap():
    got = _run([], {})
    assert got.size == 0 and got.chunks == {}


def test_decreasing_size():
    # XLA: GlobalDecreasingSizeBestFitHeapTest.DecreasingSize
    ev = [Event(ALLOC, A), Event(ALLOC, B), Event(ALLOC, C), Event(ALLOC, D),
          Event(FREE, A), Event(FREE, B), Event(FREE, C), Event(FREE, D)]
    got = _run(ev, {A: 10, B: 30, C: 20, D: 40})
    assert got.size == 100
    assert got.chunks == {A: (90, 10), B: (40, 30), C: (70, 20), D: (0, 40)}


def test_decreasing_size_with_alignment():
    # XLA: DecreasingSizeWithAlignment (alignment 20)
    ev = [Event(ALLOC, A), Event(ALLOC, B), Event(ALLOC, C), Event(FREE, A), Event(ALLOC, D),
          Event(FREE, B), Event(FREE, C), Event(FREE, D)]
    got = _run(ev, {A: 10, B: 20, C: 50, D: 40}, alignment=20)
    assert got.size == 120
    assert got.chunks == {A: (60, 10), B: (100, 20), C: (0, 50), D: (60, 40)}


def test_best_fit():
    # XLA: BestFit
    ev = [Event(ALLOC, A), Event(ALLOC, B), Event(ALLOC, C), Event(FREE, A), Event(ALLOC, D),
          Event(ALLOC, E), Event(FREE, B), Event(FREE, C), Event(FREE, D), Event(FREE, E)]
    got = _run(ev, {A: 10, B: 20, C: 40, D: 30, E: 50})
    assert got.size == 140
    assert got.chunks == {A: (90, 10), B: (120, 20), C: (50, 40), D: (90, 30), E: (0, 50)}


@pytest.mark.parametrize("case", [
    # XLA: Colocated, ColocatedII, ColocatedIII, ColocatedDifferentSize1 and 2:
    # (sizes, events, heap size, chunks)
    ({A: 40, B: 20}, [(ALLOC, A), (FREE, A), (ALLOC, B), (FREE, B), (SHARE_WITH, C, A, 40),
                      (FREE, C)], 40, {A: (0, 40), B: (0, 20), C: (0, 40)}),
    ({A: 40, B: 20}, [(ALLOC, A), (FREE, A), (ALLOC, B), (SHARE_WITH, C, A, 40), (FREE, C),
                      (FREE, B)], 60, {A: (0, 40), B: (40, 20), C: (0, 40)}),
    ({A: 10, B: 30}, [(ALLOC, A), (FREE, A), (ALLOC, B), (SHARE_WITH, C, A, 10), (FREE, C),
                      (FREE, B)], 40, {A: (30, 10), B: (0, 30), C: (30, 10)}),
    ({A: 40, B: 20}, [(ALLOC, A), (FREE, A), (ALLOC, B), (SHARE_WITH, C, A, 30), (FREE, C),
                      (FREE, B)], 60, {A: (0, 40), B: (40, 20), C: (0, 40)}),
    ({A: 40, B: 20}, [(ALLOC, A), (FREE, A), (ALLOC, B), (SHARE_WITH, C, A, 50), (FREE, C),
                      (FREE, B)], 70, {A: (0, 50), B: (50, 20), C: (0, 50)}),
], ids=["colocated", "colocated-2", "colocated-3", "different-size-1", "different-size-2"])
def test_colocations(case):
    sizes, raw, size, chunks = case
    ev = [Event(k, i) if len(x) == 2 else Event(k, i, x[2], x[3])
          for x in raw for k, i in [x[:2]]]
    got = _run(ev, sizes)
    assert got.size == size
    assert got.chunks == chunks


def test_zero_sized_buffers_take_no_time_and_sit_at_zero():
    ev = [Event(ALLOC, A), Event(ALLOC, B), Event(FREE, B), Event(FREE, A)]
    got = _run(ev, {A: 0, B: 8})
    assert got.chunks == {A: (0, 0), B: (0, 8)} and got.size == 8


def test_choose_best_keeps_the_smaller_heap_and_the_first_on_a_tie():
    # b (20) lives [0,3], a (30) [1,2], c (30) [4,5]: spatial packs a and c
    # first at 0 and b above: 50; temporal packs b (the longest) first at 0,
    # then a at 20 and c at 0: 50 as well -> the first order (spatial) wins
    ev = [Event(ALLOC, B), Event(ALLOC, A), Event(FREE, A), Event(FREE, B), Event(ALLOC, C),
          Event(FREE, C)]
    sizes = {A: 30, B: 20, C: 30}
    spatial = _run(ev, sizes, order=SPATIAL)
    temporal = _run(ev, sizes, order=TEMPORAL)
    assert spatial.size == temporal.size == 50
    assert spatial.chunks[B] == (30, 20) and temporal.chunks[B] == (0, 20)
    assert pack(ev, sizes).order == SPATIAL
    assert pack(ev, sizes, orders=(TEMPORAL, SPATIAL)).order == TEMPORAL


def test_span_order_packs_the_longest_span_first_whatever_its_size():
    # XLA:TPU's order (found on its dumps): span, then id; no size
    ev = [Event(ALLOC, A), Event(ALLOC, B), Event(FREE, A), Event(FREE, B)]
    got = _run(ev, {A: 10, B: 100}, order=SPAN)
    assert got.chunks[A] == (0, 10) and got.chunks[B] == (10, 100)
    assert _run(ev, {A: 10, B: 100}, order=SPATIAL).chunks[B] == (0, 100)


def test_bad_arguments():
    with pytest.raises(ValueError):
        BestFitHeap(0)
    with pytest.raises(ValueError):
        BestFitHeap(1, "nope")
    assert align_up(0, 64) == 0 and align_up(1, 64) == 64 and align_up(64, 64) == 64


def test_replay_orders_by_live_range_then_id_defines_before_frees():
    # values 7 [0,2], 3 [0,2], 5 [2,3]: at 0 define 3 then 7 (same range:
    # by id), at 2 define 5 before freeing 3 and 7
    ev = replay([HeapValue(7, 8, 0, 2), HeapValue(3, 8, 0, 2), HeapValue(5, 8, 2, 3)])
    assert ev == [Event(ALLOC, 3), Event(ALLOC, 7), Event(ALLOC, 5), Event(FREE, 3),
                  Event(FREE, 7), Event(FREE, 5)]


def test_replay_shares_an_xla_buffer_and_an_operand_that_ends_there():
    buffers = {1: "loop", 2: "loop", 3: 3, 4: 4}
    counts = {"loop": 2, 3: 1, 4: 1}
    vals = [HeapValue(1, 16, 0, 1), HeapValue(3, 16, 1, 2), HeapValue(2, 16, 3, 4),
            HeapValue(4, 16, 2, 5)]
    ev = replay(vals, buffer_of=buffers.get, buffer_values=counts.get,
                candidates=lambda v: {4: [3]}.get(v, []))
    # 2 joins the first placed value of its buffer; 4 takes 3's memory (3 ends
    # where 4 starts): 3 is freed first, then shared
    assert Event(SHARE_WITH, 2, 1) in ev
    i = ev.index(Event(SHARE_WITH, 4, 3))
    assert ev[i - 1] == Event(FREE, 3)
    assert ev.count(Event(FREE, 3)) == 1
    got = pack(ev, {v.id: v.size for v in vals})
    assert got.chunks[4] == got.chunks[3] and got.chunks[2] == got.chunks[1]


def test_replay_takes_no_operand_that_lives_on_or_belongs_to_a_bigger_buffer():
    vals = [HeapValue(1, 16, 0, 3), HeapValue(2, 16, 1, 4)]
    ev = replay(vals, candidates=lambda v: [1] if v == 2 else [])
    assert all(e.kind != SHARE_WITH for e in ev)     # 1 does not end at 1
    vals = [HeapValue(1, 16, 0, 1), HeapValue(2, 16, 1, 4)]
    ev = replay(vals, buffer_of=lambda v: v, buffer_values=lambda k: 2 if k == 1 else 1,
                candidates=lambda v: [1] if v == 2 else [])
    assert all(e.kind != SHARE_WITH for e in ev)     # 1's buffer has two values


def test_trace_peak_counts_a_shared_buffer_once():
    ev = [Event(ALLOC, A), Event(ALLOC, B), Event(FREE, A), Event(SHARE_WITH, C, A),
          Event(FREE, B), Event(FREE, C)]
    assert trace_peak(ev, {A: 10, B: 5, C: 10}) == (15, 1)
    assert trace_peak([], {}) == (0, -1)


def test_the_array_best_fit_is_the_loop():
    """Both ways of finding the gap (the loop for a few chunks, numpy for
    many) give the same offset on random chunk sets."""
    import random

    import numpy as np

    from xlashape.memory import heapsim

    rng = random.Random(5)
    heap = BestFitHeap(1)
    for _ in range(400):
        align = rng.choice((1, 4, 64, 256))
        heap.alignment = align
        used = [(rng.randrange(0, 4000) * rng.choice((1, 8)), rng.randrange(1, 300))
                for _ in range(rng.randrange(1, 120))]
        size = rng.randrange(1, 400)
        biggest = size + rng.choice((0, 0, 50))
        loop = heap._best_fit(list(used), size, biggest)
        offsets = np.array([u[0] for u in used], dtype=np.int64)
        sizes = np.array([u[1] for u in used], dtype=np.int64)
        assert heapsim._best_fit_array(offsets, sizes, size, biggest, align) == loop
