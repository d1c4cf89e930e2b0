"""The proto route's peak: XProf's replay of the heap simulator's own traces.

A ``.hlo.pb`` (``--xla_dump_hlo_as_proto``) holds the buffer assignment with
the heap simulator's traces (ALLOC, FREE, SHARE_WITH per buffer, in the
order the simulator placed them): :func:`peak_from_hlo_proto` replays them
(:class:`_Replay`) into the same :class:`~xlashape.memory.model.PeakAnalysis`
the text route makes (:mod:`xlashape.memory.peak`), over the trace's events
rather than program positions, with the platform rules of that module.
"""

from typing import Dict, List, Optional, Tuple

from ..allocation_kinds import TEMPORARY, is_indefinite, kind_of
from ..protos import check_sizes
from .figures import PEAK_FIELDS
from .model import PeakAnalysis, PeakBuffer
from .peak import VERIFIED, cpu_figures

__all__ = ["peak_from_hlo_proto"]


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

    def root(self, b: int) -> int:
        """The canonical buffer ``b`` shares (itself if it shares none)."""
        canonical, seen = self.canonical, 0
        while b in canonical and seen < 1 << 20:
            b = canonical[b]
            seen += 1
        return b

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
    module's ids, no shape). A negative size, offset or shape index raises
    :class:`~xlashape.errors.ProtoDecodeError` (:func:`xlashape.protos.check_sizes`;
    ``check=False``: the caller has checked)."""
    if check:
        check_sizes(hlo, "the HLO proto")
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
        pa.shares.extend((b, r.root(b)) for b in r.canonical)
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
        cpu_figures(pa, fixed, fixed_unpadded, thread_local0)
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
