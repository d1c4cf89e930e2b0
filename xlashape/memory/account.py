"""The one pass: a module's records -> its model.

:func:`account` takes the :class:`~xlashape.memory.records.ModuleRecords` a
source read and makes the :class:`~xlashape.memory.model.ModuleMemory` every
view reads, with one categoriser (:mod:`xlashape.allocation_kinds`), one size
model (:mod:`xlashape.sizes`, one :class:`~xlashape.sizes.Chip` value) and
XLA's rules:

- from the entry computation alone (HLO text, or any module without a buffer
  assignment): the ``CompiledMemoryStats`` figures the text determines --
  the entry parameters' buffers (``argument_size_in_bytes``), the result's
  (``output_size_in_bytes``, a tuple's table of pointers included), the
  parameter buffers ``input_output_alias`` lets outputs reuse
  (``alias_size_in_bytes``), and their ``host_`` twins for ``S(5)``;
- from a buffer assignment: every allocation with its padded and unpadded
  bytes and the values in it, the same figures as the buffer assignment
  gives them (checked against the entry's when both are there),
  ``temp_size_in_bytes`` on CPU and GPU (on TPU ``None``: libtpu's allocator
  decides it; the device-memory temporaries are ``hbm_temp_allocation_bytes``),
  totals per memory space, and each value's size checked against the size
  model's;
- the peak and what is live at it (:mod:`xlashape.memory.peak`), from the
  live ranges or the heap simulator's traces;
- from an out-of-memory report: the limit, the excess, the listed
  allocations, and whether the program would fit without padding;
- what XLA did with the buffers (:mod:`xlashape.memory.audit`): donations
  and whether an output reuses them, copies made only to change a layout,
  moves between memory spaces.
"""

from __future__ import annotations

import heapq
from typing import Dict, Iterable, List, Optional, Tuple

from ..allocation_kinds import (OTHER, OUTPUT, PARAMETER, TEMPORARY, kind_of, oom_report_kind,
                                workspace_of)
from ..errors import HloParseError
from ..hlo_model import parse_entry_computation_layout
from ..oom_report import BREAKDOWN_HINT
from ..oom_report import parse_size as parse_report_size
from ..padding import padding_summary, summarize_padding
from ..shape import Shape
from ..sizes import (HOST_MEMORY_SPACE, Chip, SizeCache, buffers_of, chip_of, logical_size,
                     memory_footprint, memory_space_of, shape_text, tuple_table_size)
from ..tiling import format_bytes
from . import partitions
from .figures import STATS_FIELDS, TEXT_FIELDS
from .model import (TIMELINE_BUFFERS, Allocation, AutotuneInstruction, AutotuneSummary,
                    GpuOomSummary, ModuleMemory, OomSummary, Timeline, TimelineBuffer, ValueInfo)
from .audit import audit_module
from .peak import PeakBuilder
from .predict import predict
from .traces import peak_from_hlo_proto
from .records import EntryRecord, ModuleRecords

__all__ = ["Options", "account"]

_TPU = "tpu"



class Options:
    """How to account: ``top`` (allocations kept in ``largest`` /
    ``padding_wasters``), ``chip`` (the :class:`~xlashape.sizes.Chip` the user
    named, or ``None``), ``platform`` (``cpu``/``gpu``/``tpu`` when the user
    named it: it overrides what the input says), ``peak`` (compute the peak),
    ``sizes`` (the :class:`~xlashape.sizes.SizeCache` of one analysis);
    ``hlo_buffers``: join the values of one XLA buffer that live apart, so
    that ``PeakAnalysis.shares`` is the heap simulator's SHARE_WITH pairs
    exactly (:class:`~xlashape.memory.peak.PeakBuilder`; needs the module
    parsed whole: ``Reading.full_module``); ``packing``: pack the
    temporaries as XLA does (:mod:`xlashape.memory.packing`; needs the module
    parsed whole too); ``what_if``: edits to predict the figures after
    (:mod:`xlashape.memory.whatif`)."""

    def __init__(self, top: int = 10, chip=None, platform: Optional[str] = None,
                 peak: bool = True, hlo_buffers: bool = False, packing: bool = False,
                 what_if=()):
        self.top = top
        self.chip: Optional[Chip] = chip_of(chip)
        self.platform = platform
        self.peak = peak
        self.hlo_buffers = hlo_buffers
        self.packing = packing
        self.what_if = tuple(what_if or ())
        self.sizes = SizeCache()


def account(rec: ModuleRecords, opts: Options) -> ModuleMemory:
    """The model of one module (or out-of-memory report) from its records."""
    if rec.oom is not None:
        if rec.oom.platform == "gpu":
            return _gpu_oom(rec)
        return _tpu_oom(rec, opts)
    if rec.source == "memory-report":
        return _memory_report(rec, opts)
    mm = ModuleMemory(rec.name, rec.source, rec.path)
    mm.optimized = rec.optimized
    mm.from_proto = rec.from_proto
    mm.locations = rec.locations
    mm.warnings.extend(rec.warnings)
    text = None
    if rec.entry is not None:
        text = _entry_figures(rec.entry, opts, opts.chip, opts.platform)
        mm.warnings.extend(text.warnings)
        platform = text.platform
    else:
        platform = opts.platform
    if rec.platform is not None:
        platform = rec.platform
    if opts.platform is not None:
        platform = opts.platform
    mm.platform = platform
    if rec.allocations is None:
        if text is not None:
            text.apply(mm)
            _rank(mm, mm.allocations, opts.top)
        mm.notes.extend(rec.notes)
        mm.reasons.update(rec.reasons)
        _memory_analysis(mm, rec)
        mm.audit = audit_module(rec, mm, opts)
        partitions.apply(mm, rec)
        return mm
    _from_buffer_assignment(mm, rec, opts)
    if rec.no_module and mm.platform is None and mm.temp_size_in_bytes is not None:
        mm.hbm_temp_allocation_bytes = mm.temp_size_in_bytes
        mm.temp_size_in_bytes = None
        mm.reasons["temp_size_in_bytes"] = (
            "the platform is not known (say platform=/--platform): on TPU XLA takes it from "
            "libtpu's allocator, not from the buffer assignment; its temporaries are "
            "hbm_temp_allocation_bytes")
    if text is not None:
        mm.notes[:0] = [n for n in text.notes if not n.startswith("tuple tables sized")]
        _check_text_figures(mm, rec.entry, opts)
    mm.notes.extend(rec.notes)
    mm.reasons.update(rec.reasons)
    if opts.peak:
        _peak(mm, rec, opts)
    _memory_analysis(mm, rec)
    mm.audit = audit_module(rec, mm, opts)
    partitions.apply(mm, rec)
    if opts.packing or opts.what_if:
        predict(mm, rec, opts)
    return mm


# -- the entry computation ------------------------------------------------------------


def platform_of(shapes: Iterable[Shape]) -> Optional[str]:
    """``tpu`` when a layout among ``shapes`` is tiled (only XLA:TPU tiles
    in HBM), else ``None``."""
    def tiled(s: Shape) -> bool:
        if s.is_tuple:
            return any(tiled(x) for x in s.tuple_shapes)
        if s.is_buffer:
            s = s.buffer_shape
        return s.is_array and s.layout is not None and bool(s.layout.tiles)

    return _TPU if any(tiled(s) for s in shapes) else None


def _host_space_dropped(params, entry: EntryRecord) -> bool:
    """The entry layout puts a parameter in host memory (``S(5)``) but the
    compiled parameter instruction has no memory space: XLA:CPU's doing
    (it compiles host-memory buffers as ordinary ones)."""
    for number, (_, shape) in enumerate(params):
        if shape.is_tuple or memory_space_of(shape) != HOST_MEMORY_SPACE:
            continue
        got = entry.params.get(number)
        if got is not None and not got[1].is_tuple and memory_space_of(got[1]) == 0:
            return True
    return False


class _EntryFigures:
    """The figures the entry computation determines (see :func:`_entry_figures`)."""

    def __init__(self):
        self.platform: Optional[str] = None
        self.figures: Dict[str, int] = {k: 0 for k in TEXT_FIELDS}
        self.allocations: List[Allocation] = []
        self.spaces: Dict[int, List[int]] = {}
        self.notes: List[str] = []
        self.warnings: List[str] = []

    def add(self, figure: str, size: int, host: bool) -> None:
        name = "host_" + figure if host else figure
        self.figures[name] += size

    def apply(self, mm: ModuleMemory) -> None:
        for k, v in self.figures.items():
            setattr(mm, k, v)
        mm.allocations = self.allocations
        mm.allocation_count = len(self.allocations)
        for sp, (args, outs, aliased, total, padding) in self.spaces.items():
            t = mm.space(sp)
            t.arguments += args
            t.outputs += outs
            t.aliased += aliased
            t.total += total
            t.padding += padding
        mm.notes.extend(self.notes)
        mm.chip = self.chip


def _entry_figures(entry: EntryRecord, opts: Options, chip: Optional[Chip],
                   forced_platform: Optional[str]) -> _EntryFigures:
    """The CompiledMemoryStats figures that the module text determines."""
    out = _EntryFigures()
    out.chip = chip
    params: List[Tuple[Optional[str], Shape]] = []
    result: Optional[Shape] = None
    ecl_text = entry.attributes.get("entry_computation_layout")
    if entry.layout is not None:
        names = {n: entry.params[n][0] for n in entry.params}
        params = [(names.get(i), s) for i, s in enumerate(entry.layout[0])]
        result = entry.layout[1]
    elif ecl_text is not None:
        try:
            ecl = parse_entry_computation_layout(ecl_text)
            names = {n: entry.params[n][0] for n in entry.params}
            params = [(names.get(i), s) for i, s in enumerate(ecl.parameters)]
            result = ecl.result
        except HloParseError as e:
            out.warnings.append(f"the module's entry_computation_layout does not parse ({e.message}); "
                                "the entry computation's parameters and root are used instead")
    if result is None:
        n = max(entry.params) + 1 if entry.params else 0
        params = []
        for i in range(n):
            if i in entry.params:
                params.append(entry.params[i])
            else:
                out.warnings.append(f"entry parameter {i} is missing from the text")
        if entry.root is not None:
            result = entry.root[2]
    root_operands = entry.root[3] if entry.root is not None else ()
    root_name = entry.root[0] if entry.root is not None else None
    platform = platform_of([s for _, s in params] + ([result] if result is not None else []))
    if platform is None and (forced_platform == "cpu" or _host_space_dropped(params, entry)):
        platform = "cpu"
    if platform is None:
        platform = entry.platform_hint
    if forced_platform is not None:
        platform = forced_platform
    out.platform = platform
    # XLA:CPU keeps S(5) (pinned_host) buffers in ordinary memory and counts
    # them as device memory in its CompiledMemoryStats
    host = None if platform == "cpu" else HOST_MEMORY_SPACE
    if host is None and any(memory_space_of(sub) == HOST_MEMORY_SPACE for _, p in params
                            for _, sub in buffers_of(p) if not sub.is_tuple):
        out.notes.append("XLA:CPU counts host-memory (S(5)) buffers as device memory: they are "
                         "in argument_size_in_bytes / output_size_in_bytes, as memory_analysis() "
                         "reports them")
    tables = [s for _, p in params for _, s in buffers_of(p) if s.is_tuple]
    if result is not None:
        tables += [s for _, s in buffers_of(result) if s.is_tuple]
    if platform == _TPU and chip is None and any(len(s.tuple_shapes) > 8 for s in tables):
        out.notes.append("tuple tables sized as on TPU v4/v5e (512-byte granules); on v5p/v6e "
                         "they take 32-byte granules: give the chip (--chip v6e) for those")
    aliased = {(a.parameter_number, tuple(a.parameter_index)): a for a in entry.aliases}
    by_output = {tuple(a.output_index): a for a in entry.aliases}
    param_alloc: Dict[Tuple[int, Tuple[int, ...]], Allocation] = {}
    sizes = opts.sizes

    def space(sp: int) -> List[int]:
        got = out.spaces.get(sp)
        if got is None:
            got = out.spaces[sp] = [0, 0, 0, 0, 0]   # arguments, outputs, aliased, total, padding
        return got

    for number, (name, shape) in enumerate(params):
        for idx, sub in buffers_of(shape):
            size, unpadded, problem = sizes.of(sub, platform, chip)
            if problem:
                out.warnings.append(f"parameter {number} {shape_text(sub)}: {problem}")
            sp = memory_space_of(sub) if not sub.is_tuple else 0
            a = Allocation(PARAMETER, size, unpadded, sp, shape_text(sub),
                           [name] if name else [], parameter_number=number, parameter_index=idx,
                           shape_obj=sub)
            out.allocations.append(a)
            param_alloc[(number, idx)] = a
            t = space(sp)
            t[0] += size or 0
            t[3] += size or 0
            t[4] += a.padding_in_bytes
            out.add("argument_size_in_bytes", size or 0, sp == host)
            if (number, idx) in aliased:
                a.maybe_live_out = True
                t[2] += size or 0
                out.add("alias_size_in_bytes", size or 0, sp == host)
    for key in aliased:
        if key not in param_alloc:
            out.warnings.append(f"input_output_alias names parameter {key[0]} at index "
                                f"{{{','.join(map(str, key[1]))}}}, which the entry does not have")
    if result is not None:
        for idx, sub in buffers_of(result):
            size, unpadded, problem = sizes.of(sub, platform, chip)
            if problem:
                out.warnings.append(f"output {shape_text(sub)}: {problem}")
            sp = memory_space_of(sub) if not sub.is_tuple else 0
            out.add("output_size_in_bytes", size or 0, sp == host)
            t = space(sp)
            t[1] += size or 0
            alias = by_output.get(idx)
            if alias is not None and (alias.parameter_number, tuple(alias.parameter_index)) in param_alloc:
                continue  # the output reuses the parameter's allocation
            if idx == ():
                values = [root_name] if root_name else []
            elif len(idx) == 1 and idx[0] < len(root_operands):
                values = [root_operands[idx[0]]]
            else:
                values = []
            a = Allocation(OUTPUT, size, unpadded, sp, shape_text(sub), values,
                           maybe_live_out=True, output_index=idx, shape_obj=sub)
            out.allocations.append(a)
            t[3] += size or 0
            t[4] += a.padding_in_bytes
    return out


def _check_text_figures(mm: ModuleMemory, entry: EntryRecord, opts: Options) -> None:
    """The module text's figures, with the tuple tables the buffer
    assignment showed, must agree with the buffer assignment's."""
    again = _entry_figures(entry, opts, mm.chip, opts.platform)
    for k in TEXT_FIELDS:
        if again.figures[k] != getattr(mm, k):
            mm.warnings.append(f"{k}: {getattr(mm, k)} in the buffer assignment, "
                               f"{again.figures[k]} from the module text")


def _rank(mm: ModuleMemory, allocations: Iterable[Allocation], top: int) -> None:
    allocations = list(allocations)
    mm.largest = heapq.nlargest(top, allocations, key=lambda a: a.size_in_bytes or 0)
    # "most padding" lists only padding that matters (padding.padding_summary)
    summary = padding_summary(allocations, top=top)
    mm.padding_summary = summary
    mm.padding_wasters = summary.listed


# -- a buffer assignment ----------------------------------------------------------------


def _allocation(a, platform, sizes: SizeCache, chip=None, library_calls=None) -> Allocation:
    """An :class:`Allocation` of the model from a buffer assignment's record:
    its values (each cuBLAS / cuDNN workspace marked, from ``library_calls``:
    the module's custom calls to them), and its own shape only when it holds
    one array (see :class:`~xlashape.memory.model.Allocation`)."""
    details = []
    slots: Dict[Tuple[int, int], int] = {}
    for v in a.values:
        unp = None
        if v.shape is not None:
            _, unp, _ = sizes.of_text(v.shape_text, v.shape, platform, chip)
        ws = None
        if library_calls:
            call = library_calls.get(v.name)
            if call is not None:
                ws = workspace_of(call[0], v.index, call[1], v.shape)
        details.append(ValueInfo(v.name, v.label, v.size, v.offset, v.shape_text, unp, v.id,
                                 v.shape, ws))
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
    if own:
        shape = own[0].shape
    elif not details:
        shape = a.parameter_shape or a.output_shape
    elif len(details) == 1 or (all(v.offset == 0 for v in details)
                               and len({v.shape for v in details}) == 1):
        shape = details[0].shape   # one array (under several names: a loop's carried value)
    else:
        shape = None               # an arena: values of several shapes at their offsets
    values = []
    seen = set()
    for v in details:
        if v.name not in seen:
            seen.add(v.name)
            values.append(v.name)
    return Allocation(kind_of(a), a.size, unpadded, a.color, shape, values, index=a.index,
                      maybe_live_out=a.maybe_live_out, parameter_number=a.parameter_number,
                      parameter_index=a.parameter_index if a.parameter_number is not None else None,
                      value_details=details)


def _from_buffer_assignment(mm: ModuleMemory, rec: ModuleRecords, opts: Options) -> None:
    """The figures, memory spaces and allocations of a buffer assignment."""
    platform = mm.platform
    chip = mm.chip = opts.chip
    mm.buffer_assignment = True
    for k in STATS_FIELDS:
        setattr(mm, k, 0)
    sizes = opts.sizes
    mismatches: Dict[str, list] = {}
    allocations: List[Allocation] = []
    tiled_seen = False
    for a in rec.allocations:
        mm.allocation_count += 1
        mm.value_count += len(a.values)
        if not tiled_seen and platform is None:
            for v in a.values:
                if v.shape is not None and platform_of([v.shape]) == _TPU:
                    platform = mm.platform = _TPU
                    tiled_seen = True
                    break
        kind = kind_of(a)
        host = a.color == HOST_MEMORY_SPACE
        t = mm.space(a.color)
        t.total += a.size
        if kind == PARAMETER:
            t.arguments += a.size
            mm.add_to_figure("argument_size_in_bytes", a.size, host)
            if a.maybe_live_out:
                t.aliased += a.size
                mm.add_to_figure("alias_size_in_bytes", a.size, host)
        if a.maybe_live_out:
            t.outputs += a.size
            mm.add_to_figure("output_size_in_bytes", a.size, host)
        if kind == TEMPORARY:
            t.temporaries += a.size
            mm.add_to_figure("temp_size_in_bytes", a.size, host)
        elif kind == "thread-local":
            t.thread_local += a.size
        elif kind == "constant":
            t.constants += a.size
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
                        chip = mm.chip = chip_of(g)
                        mm.notes.append(f"tuple tables take {g}-byte granules in this buffer "
                                        f"assignment ({chip.label})")
            size, _, problem = sizes.of_text(v.shape_text, v.shape, platform, chip)
            if problem is not None or size != v.size:
                rec_ = mismatches.get(v.shape_text)
                if rec_ is None:
                    mismatches[v.shape_text] = [v.size, size, problem, v.label, v.line, 1]
                else:
                    rec_[5] += 1
        alloc = _allocation(a, platform, sizes, chip, rec.library_calls)
        t.padding += alloc.padding_in_bytes
        allocations.append(alloc)
    mm.allocations = allocations
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
    mm.largest = heapq.nlargest(opts.top, allocations, key=lambda a: a.size_in_bytes or 0)
    spaces = mm.memory_spaces.values()
    wasters = heapq.nlargest(opts.top, (a for a in allocations if a.padding_in_bytes > 0),
                             key=lambda a: a.padding_in_bytes)
    summary = summarize_padding(sum(t.padding for t in spaces), sum(t.total for t in spaces),
                                wasters, top=opts.top)
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
    if rec.memory_report is not None:
        _check_report(mm, rec.memory_report)
    elif rec.memory_report_error is not None:
        mm.warnings.append(f"the memory-usage report could not be read: {rec.memory_report_error}")


def _check_report(mm: ModuleMemory, spaces) -> None:
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


# -- the peak ---------------------------------------------------------------------------


def _peak(mm: ModuleMemory, rec: ModuleRecords, opts: Options) -> None:
    if rec.buffer_assignment_proto is not None:
        # the traces' logical buffers are the buffer assignment's values
        value_of = {v.id: v for a in rec.allocations for v in a.values}
        unpadded = _value_unpadded(mm, opts)
        none = (None, None, None)

        def unpadded_of(lb):
            v = value_of.get(lb.id)
            return lb.size if v is None else unpadded(v)

        def describe(lb):
            v = value_of.get(lb.id)
            return none if v is None else (v.name, v.label, v.shape_text)

        pa = peak_from_hlo_proto(rec.buffer_assignment_proto, mm.platform,
                                 unpadded=unpadded_of, describe=describe,
                                 check=False)   # the proto source has checked its sizes
        for k, why in rec.peak_reasons.items():
            pa.figures[k] = None
            pa.reasons[k] = why
    else:
        pa = _peak_of_live_ranges(mm, rec, opts)
    if pa.live_at_peak and rec.locations:
        found = rec.locations
        pa.live_at_peak = [b._replace(op_name=found[b.instruction].op_name,
                                      source=found[b.instruction].source)
                           if b.instruction in found else b for b in pa.live_at_peak]
    if pa.live_at_peak and rec.library_calls:
        workspaces = {v.label: v.workspace for a in mm.allocations for v in a.value_details
                      if v.workspace}
        pa.live_at_peak = [b._replace(workspace=workspaces[b.label]) if b.label in workspaces
                           else b for b in pa.live_at_peak]
    mm.peak = pa


def _value_unpadded(mm: ModuleMemory, opts: Options):
    """A value's bytes as ``peak_unpadded_heap_bytes`` counts them
    (:func:`xlashape.sizes.logical_size` of its shape, never more than its
    size), remembered per shape text and size: the one rule of both routes."""
    platform, chip = mm.platform, mm.chip
    cache: Dict[tuple, int] = {}
    sizes = opts.sizes

    def unpadded(v):
        key = (v.shape_text, v.size)
        got = cache.get(key)
        if got is not None:
            return got
        if v.shape is None:
            return v.size
        if v.shape.is_tuple:
            got = logical_size(v.shape, v.size)
        else:
            got = sizes.of_text(v.shape_text, v.shape, platform, chip)[1]
            got = v.size if got is None else min(got, v.size)
        if len(cache) > 1 << 16:
            cache.clear()
        cache[key] = got
        return got

    return unpadded


def _peak_of_live_ranges(mm: ModuleMemory, rec: ModuleRecords, opts: Options):
    """The text route: the buffer assignment's values, their live ranges and
    (on TPU) which values may share memory."""
    platform = mm.platform
    live = rec.live
    if rec.live_error is not None:
        mm.warnings.append(f"the live ranges could not be read: {rec.live_error}")
    unpadded = _value_unpadded(mm, opts)
    builder = PeakBuilder(live, platform, unpadded=unpadded, facts=rec.facts,
                          hlo_buffers=opts.hlo_buffers)
    for a in rec.allocations:
        builder.add(a)
    error = getattr(rec.facts, "error", None)
    if error is not None:
        # as when it fails before the pass: no heap to replay
        mm.warnings.append(f"the live ranges could not be read: {error}")
        builder.live = builder.facts = builder.undecided = None
        builder.heaps = []
        builder.shares = []
        builder.missing = 0
    pa = builder.finish()
    pa.schedule = live.sequence if (live is not None and builder.live is not None) else None
    if builder.live is not None:
        pa.timeline = _timeline(rec, pa)
    return pa


def _timeline(rec: ModuleRecords, pa) -> Optional[Timeline]:
    """XProf's buffer allocation timeline of the largest temporary allocation
    in the memory space of the peak: each value's offset and live range."""
    if pa.peak_memory_space is None:
        return None
    best = None
    for a in rec.allocations:
        if a.color != pa.peak_memory_space or kind_of(a) != TEMPORARY or not a.values:
            continue
        if best is None or a.size > best.size:
            best = a
    if best is None:
        return None
    ranges = rec.live.ranges
    rects = []
    for v in best.values:
        if v.shape_text.startswith("("):
            continue
        label = v.label if v.label.endswith("}") else v.label + "{}"
        r = ranges.get(label)
        if r is not None and v.size > 0:
            rects.append(TimelineBuffer(v.size, v.offset, r[0], r[1], v.label, v.shape_text))
    if not rects:
        return None
    rects.sort(key=lambda x: -x.size)
    n = max(len(rec.live.sequence), max(x.end for x in rects) + 1, 1)
    return Timeline(best.index, best.color, best.size, n, tuple(rects[:TIMELINE_BUFFERS]),
                    max(0, len(rects) - TIMELINE_BUFFERS))


# -- jax ----------------------------------------------------------------------------------


def _memory_analysis(mm: ModuleMemory, rec: ModuleRecords) -> None:
    """XLA's own ``memory_analysis()`` of the compile (a JAX object), beside
    the figures: each figure the records determine is checked against it (a
    difference is a warning); one they cannot determine (the temporaries of
    a module text alone; on TPU, ``temp_size_in_bytes``, which libtpu's
    allocator decides) is XLA's, taken from it, with a note saying so."""
    if rec.memory_analysis is None:
        return
    ma = mm.memory_analysis = dict(rec.memory_analysis)
    if rec.allocations is None:
        # the text has no buffer assignment
        for k in ("temp_size_in_bytes", "host_temp_size_in_bytes"):
            if ma.get(k) is not None:
                setattr(mm, k, ma[k])
    for k in TEXT_FIELDS:
        theirs = ma.get(k)
        if theirs is not None and theirs != getattr(mm, k):
            mm.warnings.append(f"{k}: memory_analysis() says {theirs}, the module text gives "
                               f"{getattr(mm, k)}")
    if rec.allocations is None:
        return
    figures = {k: getattr(mm, k) for k in ("temp_size_in_bytes", "host_temp_size_in_bytes")}
    sides = [(figures, mm.reasons)]
    if mm.peak is not None:
        sides.append((mm.peak.figures, mm.peak.reasons))
    for got, reasons in sides:
        for k in list(got):
            theirs = ma.get(k)
            if theirs is None:
                if got[k] is None and k in reasons:
                    # the compile's own figures are at hand: say they lack it too
                    reasons[k] += "; the compile's memory_analysis() does not report it either"
                continue
            ours = got[k]
            if ours is None:
                got[k] = theirs
                why = reasons.pop(k, None)
                mm.notes.append(f"{k} {theirs} is the compile's memory_analysis()"
                                + (f" (the dump alone does not determine it: {why})" if why
                                   else ""))
            elif ours != theirs:
                mm.warnings.append(f"{k}: memory_analysis() says {theirs}, the dump gives {ours}")
    for k, v in figures.items():
        setattr(mm, k, v)


# -- reports --------------------------------------------------------------------------------


def _memory_report(rec: ModuleRecords, opts: Options) -> ModuleMemory:
    """A ``*-memory-usage-report.pb`` alone: its memory spaces' totals and
    allocations by size; which allocation is an argument, an output or a
    temporary it does not say."""
    mm = ModuleMemory(None, "memory-report", rec.path)
    mm.platform = opts.platform
    mm.from_proto = True
    allocs = []
    for color, total, entries in rec.report_allocations:
        t = mm.space(color)
        t.reported_total = t.total = total
        for index, size, positions in entries:
            allocs.append(Allocation(OTHER, size, None, color, None, list(positions), index=index))
    mm.allocations = allocs
    mm.allocation_count = len(allocs)
    why = ("the memory-usage report lists allocations by size only, not which hold arguments, "
           "outputs or temporaries: give the dump's .hlo.pb or directory")
    for k in STATS_FIELDS:
        setattr(mm, k, None)
        mm.reasons[k] = why
    _rank(mm, allocs, opts.top)
    return mm


def _tpu_oom(rec: ModuleRecords, opts: Options) -> ModuleMemory:
    r = rec.oom
    mm = ModuleMemory(r.module_name or rec.name, "oom", rec.path)
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
    sizes = opts.sizes
    chip = opts.chip
    if chip is None:
        # a tuple's table in the report shows the chip's rounding
        for e in r.allocations:
            if e.shape is not None and e.shape.is_tuple:
                n = len(e.shape.tuple_shapes)
                for g in (512, 32):
                    if e.size_text == format_bytes(tuple_table_size(n, _TPU, g)) != format_bytes(
                            tuple_table_size(n, _TPU, 544 - g)):
                        chip = chip_of(g)
                if chip is not None:
                    mm.notes.append(f"tuple tables take {chip.table_granule}-byte granules in "
                                    f"this report ({chip.label})")
                    break
    mm.chip = chip
    for e in r.allocations:
        size = e.size
        unpadded = e.unpadded_size
        sp = 0
        text = e.shape_text
        if e.shape is not None:
            text = shape_text(e.shape)
            sp = memory_space_of(e.shape)
            exact, exact_unpadded, _ = sizes.of(e.shape, _TPU, chip)
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
        kind = oom_report_kind(e.label, e.allocation_type, e.section)
        name = e.instruction_name
        allocations.append(Allocation(
            kind, size, unpadded, sp, text, [name] if name else [], index=e.rank,
            label=e.label, allocation_type=e.allocation_type, op_name=e.op_name,
            size_text=e.size_text, shape_obj=e.shape))
    mm.allocations = allocations
    mm.allocation_count = len(allocations)
    _rank(mm, allocations, opts.top)
    mm.oom = _fits_without_padding(r, allocations)
    if r.form == "short":
        mm.warnings.append("the per-buffer breakdown is not in this message: " + BREAKDOWN_HINT)
    return mm


def _fits_without_padding(r, allocations: List[Allocation]) -> OomSummary:
    """Would it fit without the padding? The temporaries' padding is the
    "HLO temp" line's padded minus unpadded size when the report prints it,
    else the listed temporaries' extra memory; the arguments' and outputs'
    comes from their shapes (the report lists those with a shape only)."""
    parts = []
    temp_padding = None
    if r.temp_padded_text is not None and r.temp_unpadded_text is not None:
        temp_padding = (parse_report_size(r.temp_padded_text)
                        - parse_report_size(r.temp_unpadded_text))
        parts.append(("the HLO temporaries", temp_padding))
    else:
        listed = [a for a in allocations if a.kind not in (PARAMETER, OUTPUT)
                  and a.unpadded_size_in_bytes is not None]
        if listed:
            temp_padding = sum(a.padding_in_bytes for a in listed)
            parts.append(("the listed temporaries", temp_padding))
    io = [a for a in allocations if a.kind in (PARAMETER, OUTPUT)
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
    return OomSummary(r.form, r.memory_space, used, limit, r.excess_bytes, padding, basis, fits, note)


def _gpu_oom(rec: ModuleRecords) -> ModuleMemory:
    r = rec.oom
    mm = ModuleMemory(r.executable_name or rec.name, "oom", rec.path)
    mm.platform = "gpu"
    mm.memory_limit_bytes = r.memory_limit_bytes
    mm.memory_used_bytes = r.used_bytes
    for k in TEXT_FIELDS:
        setattr(mm, k, None)
    autotune = _autotune_summary(r) if r.autotune is not None else None
    advice: Tuple[str, ...] = ()
    if autotune is not None:
        what, advice = _autotune_note(r, autotune)
    elif r.origin == "autotuner":
        what = ("XLA's autotuner ran out of memory while trying configurations (the program "
                "itself may fit)")
    else:
        what = ("the allocation failed when the program ran" if r.requested_text
                else "no allocation failed in this text: XLA's rematerialization warns that the "
                     "program needs more than it aimed at; the allocator decides when it runs")
    remat = r.remat
    mm.oom = GpuOomSummary(
        "gpu", "device", r.used_bytes, r.memory_limit_bytes, r.excess_bytes, None, None, None,
        what, r.requested_bytes, r.requested_text, r.requested_exact, r.allocator, r.origin,
        r.memory_limit_source, None if remat is None else remat.target_bytes, None,
        r.in_use_bytes, None if remat is None else remat.reduced_to_bytes,
        None if remat is None else remat.original_bytes,
        r.allocator_rounded, autotune, r.io_bytes, advice)
    if autotune is not None and autotune.from_example:
        mm.notes.append("the exception does not name the instructions, and counts only its "
                        "example: XLA's log of the same run names each one (config_assigner's "
                        "'Could not get config for HLO' lines)")
    limit = r.memory_limit_bytes
    if limit is None:
        mm.notes.append("the memory limit is not in this text: XLA's log of the same run gives "
                        "it (the allocator's stats or XLA's scheduler's 'base limit')")
    elif r.io_bytes is not None and r.io_bytes > limit:
        mm.notes.append(f"XLA's scheduler: the program's arguments and outputs alone take "
                        f"{format_bytes(r.io_bytes)} ({r.io_bytes} bytes), more than the "
                        f"{format_bytes(limit)} limit: the program cannot run as written"
                        + (", whatever configuration the autotuner picks"
                           if autotune is not None else ""))
    return mm


def _autotune_summary(r) -> AutotuneSummary:
    """XLA:GPU's autotuner failure (one event) from its report: the
    instructions the log names, the configurations that failed."""
    a = r.autotune
    failed = []
    for b in a.named:
        size = None if b.shape is None else memory_footprint(b.shape).padded_bytes
        failed.append(AutotuneInstruction(b.instruction, b.shape_text, size, b.configs_failed,
                                          b.out_of_memory, tuple(b.requests)))
    counted = a.counted()
    requested: List[str] = []
    for b in counted:
        requested.extend(x for x in b.requests if x not in requested)
    return AutotuneSummary(a.failed_instructions, a.instructions,
                           sum(b.configs_failed for b in counted),
                           sum(b.out_of_memory for b in counted), tuple(requested),
                           tuple(failed), not a.named, r.attempts)


def _autotune_note(r, a: AutotuneSummary) -> Tuple[str, Tuple[str, ...]]:
    """The sentence that says what happened, and what to do."""
    asked = " or ".join(a.requested) or "?"
    limit = r.memory_limit_bytes
    many = (f"{a.failed_instructions} of the program's {a.instructions} autotuned instructions"
            if a.failed_instructions is not None else
            f"{len(a.failed)} instruction{'s' if len(a.failed) != 1 else ''}" if a.failed
            else "an instruction")
    names = ", ".join(f.name for f in a.failed)
    over = limit is not None and r.requested_bytes is not None and r.requested_bytes > limit
    note = (f"XLA's autotuner ran out of memory while compiling: it could not time any "
            f"configuration of {many}" + (f" ({names})" if names else "")
            + f"; each configuration it tried asked for {asked}"
            + (f", more than the {format_bytes(limit)} limit" if over else "")
            + ", so the compile failed (one event, at compile time: the program never ran)")
    what = next((f for f in a.failed if f.shape is not None), None)
    piece = (f" (its output alone, {what.shape}, is {format_bytes(what.size_in_bytes)})"
             if what is not None and what.size_in_bytes is not None else "")
    advice = (
        f"make the instruction smaller: timing one configuration needs {asked}{piece}"
        + (f", more than the device's {format_bytes(limit)}" if over else "")
        + "; compute it in pieces (a smaller tile of its output: split a dimension with "
          "lax.map or a scan over blocks, or shard it over devices)",
        "XLA_FLAGS=--xla_gpu_autotune_level=0 compiles without timing configurations (XLA takes "
        "a default one); the program still needs its own buffers when it runs",
        "XLA_PYTHON_CLIENT_MEM_FRACTION (jax's default 0.75) sets the limit XLA compiles for: a "
        "higher fraction gives the autotuner more room, up to the device's memory",
    )
    return note, advice
