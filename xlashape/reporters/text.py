"""The terminal report of :mod:`xlashape.memory`'s model: ``xlashape memory`` and
``xlashape memory diff``, as lines of text.

Pure functions of the model (:class:`~xlashape.memory.ModuleMemory`, its
:class:`~xlashape.memory.PeakAnalysis`, a :class:`~xlashape.memory.diff.ModuleDiff`):
they open no file and compute no figure; the command prints what they return
(made printable: control characters from an artifact are escaped there).
"""

from __future__ import annotations

import os
import textwrap
from typing import List, Optional

from ..memory.figures import PEAK_FIELDS
from ..memory.model import space_label
from ..tiling import format_bytes
from .tables import Table

__all__ = ["report_lines", "module_lines", "oom_lines", "verdict_line", "diff_lines", "fmt_bytes"]


def fmt_bytes(n: Optional[int], _cache: dict = {}) -> str:  # noqa: B006 - a deliberate cache
    """Bytes as XLA's out-of-memory report prints them (``1.00G``); ``?`` for
    unknown. Cached, since a dump repeats the same sizes many times.

    >>> fmt_bytes(3 << 30), fmt_bytes(1536), fmt_bytes(None)
    ('3.00G', '1.5K', '?')
    """
    if n is None:
        return "?"
    text = _cache.get(n)
    if text is None:
        if len(_cache) > 1 << 16:
            _cache.clear()
        text = _cache[n] = format_bytes(n)
    return text

_SPACES = Table([("memory space", 40, "<"), ("arguments", 10, ">"), ("outputs", 10, ">"),
                 ("aliased", 10, ">"), ("temporaries", 12, ">"), ("other", 10, ">"),
                 ("total", 10, ">")], indent="  ")
_MODULES = Table([("module", 40, "<"), ("arguments", 10, ">"), ("outputs", 10, ">"),
                  ("temporaries", 12, ">"), ("padding", 10, ">"), ("allocations", 11, ">")],
                 indent="  ")
_LIVE = Table([("size", 9, ">"), ("padding", 8, ">"), ("kind", 12, "<"), ("space", 5, "<"),
               ("live", 13, "<"),
               ("buffer", 30, "<"), ("JAX op path", 44, "<"), ("source", 30, "<")], indent="  ")
#: the same for a partitioned program: each buffer's per-device shape, a
#: parameter's sharding beside it
_LIVE_SHARDED = Table([("size", 9, ">"), ("padding", 8, ">"), ("kind", 12, "<"), ("space", 5, "<"),
                       ("live", 13, "<"), ("buffer", 30, "<"), ("JAX op path", 44, "<"),
                       ("source", 30, "<"), ("per-device shape, sharding", 0, "<")], indent="  ")




def _size(n) -> str:
    return "-" if not n else fmt_bytes(n)


def report_lines(result, modules, display: str, top: int, verdicts=None) -> List[str]:
    """The whole report of ``modules`` (of the analysis ``result`` of the
    input shown as ``display``), with the verdicts (``id(module) -> Verdict``)."""
    out: List[str] = []
    if result.kind == "dump":
        n = len(result.modules)
        out.append(f"XLA dump {display}: {n} module{'s' if n != 1 else ''}")
    elif result.kind == "oom":
        n = len(result.modules)
        out.append(f"{display}: {n} out-of-memory report{'s' if n != 1 else ''}")
    if len(modules) > 1 and result.kind != "oom":
        out.append(_MODULES.header())
        for m in modules:
            padding = sum(t.padding for t in m.memory_spaces.values())
            out.append(_MODULES.format(_clip(m.name or "?", 40), _size(m.argument_size_in_bytes),
                                       _size(m.output_size_in_bytes),
                                       "?" if m.temp_size_in_bytes is None else _size(m.temp_size_in_bytes),
                                       _size(padding), m.allocation_count))
        out.append("")
    if result.kind == "oom" and len(modules) > 1:
        # libtpu logs a report for each allocation it tries: the last one is
        # where the compile gave up; the earlier ones in one line each
        out.append("earlier reports in the same log (libtpu tries more than one allocation):")
        for m in modules[:-1]:
            o = m.oom
            out.append(f"  {m.name or '?'}: needs {fmt_bytes(o.used)} of {fmt_bytes(o.limit)}"
                       f", {len(m.allocations)} allocations listed")
        out.append("the last report:")
        modules = modules[-1:]
    for i, m in enumerate(modules):
        if i:
            out.append("")
        if m.source == "oom":
            out.extend(oom_lines(m, top))
        else:
            out.extend(module_lines(m, top))
        v = (verdicts or {}).get(id(m))
        if v is not None:
            out.append(verdict_line(v))
    return out


def verdict_line(v) -> str:
    what = "" if v.peak_name == "peak_memory_in_bytes" else f" ({v.peak_name})"
    if v.fits:
        return (f"fits: peak {fmt_bytes(v.peak_bytes)}{what} of {fmt_bytes(v.limit_bytes)} "
                f"({100 * v.fraction:.1f}%) on {v.limit_name}")
    return (f"does not fit by {fmt_bytes(-v.margin_bytes)}: peak {fmt_bytes(v.peak_bytes)}{what} "
            f"of {fmt_bytes(v.limit_bytes)} on {v.limit_name}")


def _peak_text(m, top: int) -> List[str]:
    pa = m.peak
    out = []
    figs = []
    for k in PEAK_FIELDS:
        val = pa.figures[k]
        figs.append(f"{k} {val}" if val is not None else f"{k} null")
    out.append("peak figures: " + ", ".join(figs))
    for k, why in pa.reasons.items():
        out.extend(_wrapped(f"{k} is null: {why}"))
    if pa.live_at_peak:
        fixed = sum(b.size for b in pa.live_at_peak if b.start is None)
        out.append(f"the peak: {fmt_bytes(pa.live_at_peak_bytes)} = {fmt_bytes(fixed)} that lives "
                   f"for the whole program + {fmt_bytes(pa.live_at_peak_bytes - fixed)} of "
                   "temporaries")
        if pa.peak_time is not None:
            out.append(f"  the temporaries' heap, S({pa.peak_memory_space}) "
                       f"{space_label(pa.peak_memory_space)}, is highest at "
                       + (f"event {pa.peak_time} of the heap simulator's trace"
                          if getattr(pa, "time_axis", "") == "trace events" else
                          f"position {pa.peak_time} in program order")
                       + f": {pa.peak_instruction or '?'}")
        if m.platform == "cpu":
            out.append("  (XLA:CPU's peak_memory_in_bytes leaves the temporaries out: its "
                       "executable keeps no heap traces)")
        out.append("heap over program order per memory space (whole-program buffers included):")
        for color in sorted(pa.heap):
            h = pa.heap[color]["padded"]
            if not h:
                continue
            out.append((f"  S({color}) {_clip(space_label(color), 28):<28} highest "
                        f"{fmt_bytes(max(h)):>8}  " + _sparkline(h)).rstrip())
        shown, rest_n, rest_b = pa.listed(max(top, 1) * 2)
        out.append(f"live at the peak: {len(pa.live_at_peak)} buffers, "
                   f"{fmt_bytes(pa.live_at_peak_bytes)}")
        sharded = any(b.sharding for b in pa.live_at_peak)
        table = _LIVE_SHARDED if sharded else _LIVE
        out.append(table.header().rstrip())
        for b in shown:
            live = "whole program" if b.start is None else f"{b.start}-{b.end}"
            cells = [fmt_bytes(b.size), _size(b.padding), b.kind, f"S({b.color})", live,
                     _clip(b.label, 30), _clip(b.op_name or "", 44), _clip(b.source or "", 30)]
            if sharded:
                cells.append(b.shape + (f" sharding={b.sharding}" if b.sharding else ""))
            out.append(table.format(*cells).rstrip())
        if rest_n:
            out.append(f"  ... and {rest_n} smaller buffers, {fmt_bytes(rest_b)}")
        groups = pa.by_op_path()
        if groups:
            out.append("by JAX op path:")
            for k, b, c in groups[: max(top, 1) * 2]:
                out.append(f"  {fmt_bytes(b):>9} {100 * b / max(pa.live_at_peak_bytes, 1):5.1f}%  "
                           f"{c:>4} buffer{'s' if c != 1 else ' '}  {_clip(k, 80)}")
            if len(groups) > max(top, 1) * 2:
                out.append(f"  ... {len(groups) - max(top, 1) * 2} more op paths")
    if pa.xla_live_range_peak is not None:
        t, b = pa.xla_live_range_peak
        out.append(f"  (the live-range file's own peak, {b} bytes at position {t}, counts every "
                   "value, tuple tables and thread-local scratch too: not memory_analysis()'s)")
    return out


def _wrapped(text: str, width: int = 100) -> List[str]:
    return textwrap.wrap(text, width, initial_indent="  ", subsequent_indent="    ",
                         break_on_hyphens=False, break_long_words=False)


_BARS = " ▁▂▃▄▅▆▇█"


def _sparkline(values, width: int = 48) -> str:
    if not values:
        return ""
    n = len(values)
    step = max(1, -(-n // width))
    cols = [max(values[i:i + step]) for i in range(0, n, step)]
    top = max(cols) or 1
    return "".join(_BARS[min(8, (v * 8 + top - 1) // top)] for v in cols)


def _clip(text: str, n: int) -> str:
    return text if len(text) <= n else text[: n - 3] + "..."


def module_lines(m, top: int) -> List[str]:
    out = []
    dumped = m.source == "dump" or m.buffer_assignment
    where = {"hlo": "HLO text", "dump": "XLA dump",
             "jax": ("a JAX program, compiled with a dump" if m.buffer_assignment
                     else "a JAX compiled object")}.get(m.source, m.source)
    bits = [where]
    if dumped:
        bits.append("buffer assignment read" if m.allocation_count
                    else "no buffer assignment: figures from the module text")
        if not m.optimized:
            bits.append("before optimizations")
    if getattr(m, "from_proto", False):
        bits.append("read from XLA's protobuf")
    platform = {"tpu": "TPU (tiled layouts)", "cpu": "CPU", "gpu": "GPU"}.get(m.platform or "")
    if platform:
        bits.append(platform)
    if m.devices is not None and m.devices > 1:
        bits.append(f"{m.devices} devices")
    out.append(f"module {m.name or '?'} ({', '.join(bits)})")
    if m.devices is not None and m.devices > 1:
        out.append(f"  every figure is per device: the program runs on {m.devices} devices"
                   + (f" ({m.device_kind})" if m.device_kind else "")
                   + ", each with its own part of every sharded array")
    if m.path and m.source == "dump":
        out.append(f"  {os.path.basename(m.path)}")
    out.append(_SPACES.header())
    for sp in sorted(m.memory_spaces):
        t = m.memory_spaces[sp]
        label = f"S({sp}) {space_label(sp, t.name if t.reported_total is not None else None)}"
        other = t.thread_local + t.constants + t.other
        out.append(_SPACES.format(_clip(label, 40), _size(t.arguments), _size(t.outputs),
                                  _size(t.aliased), _size(t.temporaries), _size(other),
                                  _size(t.total)))
    if not m.memory_spaces:
        out.append("  (no buffers)")
    if dumped:
        out.append("  (outputs include parameters the outputs reuse; other: thread-local and "
                   "constant allocations)")
    elif m.source == "memory-report":
        out.append("  (a memory-usage report alone: each memory space's total and its allocations "
                   "by size; what each holds needs the .hlo.pb or the dump directory)")
    else:
        out.append("  (from the module text alone: entry parameters and outputs; temporaries "
                   "need the buffer assignment of a dump)")
    stats = [f"argument_size_in_bytes {m.argument_size_in_bytes}",
             f"output_size_in_bytes {m.output_size_in_bytes}",
             f"alias_size_in_bytes {m.alias_size_in_bytes}",
             "temp_size_in_bytes " + ("null" if m.temp_size_in_bytes is None else str(m.temp_size_in_bytes)),
             f"host_argument_size_in_bytes {m.host_argument_size_in_bytes}",
             f"host_output_size_in_bytes {m.host_output_size_in_bytes}"]
    out.append("CompiledMemoryStats figures: " + ", ".join(stats))
    if m.memory_analysis:
        theirs = ", ".join(f"{k} {v}" for k, v in sorted(m.memory_analysis.items()))
        out.append(f"memory_analysis() of the compile: {theirs}")
    for k, why in m.reasons.items():
        out.extend(_wrapped(f"{k} is null: {why}"))
    if m.hbm_temp_allocation_bytes is not None:
        out.append(f"  hbm_temp_allocation_bytes {m.hbm_temp_allocation_bytes} (xlashape's figure: the "
                   "buffer assignment's preallocated temporaries in device memory, S(0))")
    if m.largest and top:
        out.append("largest allocations:")
        for rank, a in enumerate(m.largest, 1):
            out.extend(_allocation_lines(rank, a, numbered=dumped))
    ps = getattr(m, "padding_summary", None)
    if m.padding_wasters and top:
        out.append("most padding" + (f" ({ps.text})" if ps is not None else "") + ":")
        for rank, a in enumerate(m.padding_wasters, 1):
            out.extend(_allocation_lines(rank, a, explain=True, numbered=dumped))
    elif top and ps is not None and ps.padding_bytes:
        out.append(ps.text)
    elif top:
        out.append("no allocation is padded")
    if m.peak is not None:
        out.extend(_peak_text(m, top))
    for n in m.notes:
        out.append(f"note: {n}")
    for w in m.warnings:
        out.append(f"warning: {w}")
    return out


def _what(a) -> str:
    if a.kind == "parameter" and a.parameter_number is not None:
        idx = a.parameter_index
        what = f"parameter {a.parameter_number}" + (
            "{" + ",".join(map(str, idx)) + "}" if idx else "")
        if a.maybe_live_out:
            what += " (reused by an output)"
        return what
    if a.kind == "output" and a.output_index:
        return "output {" + ",".join(map(str, a.output_index)) + "}"
    return a.kind


def _allocation_lines(rank: int, a, explain: bool = False, numbered: bool = False) -> List[str]:
    names = a.values[:3]
    more = len(a.values) - len(names)
    vals = ", ".join(names) + (f" and {more} more" if more > 0 else "")
    idx = f"allocation {a.index}, " if a.index is not None and numbered else ""
    size = fmt_bytes(a.size_in_bytes)
    if a.padding_in_bytes > 0:
        ratio = a.size_in_bytes / a.unpadded_size_in_bytes if a.unpadded_size_in_bytes else None
        exp = (f"{ratio:.1f}x" if ratio is not None and ratio >= 1.1 else
               f"+{fmt_bytes(a.padding_in_bytes)}" if ratio is not None else "all padding")
        pad = f", unpadded {fmt_bytes(a.unpadded_size_in_bytes)} ({exp})"
    elif a.unpadded_size_in_bytes is not None:
        pad = ", no padding"
    else:
        pad = ""
    head = f"  {rank:>2}. {size:>8}  {idx}{_what(a)}, S({a.memory_space}){pad}"
    if vals:
        head += f": {vals}"
    lines = [head]
    shape = a.padded_shape() if explain else a.shape
    if shape:
        lines.append(f"      {shape}")
    if a.label and not a.values:
        lines.append(f"      {a.label}")
    if explain:
        e = a.explanation()
        if e is not None:
            for s in e.sources:
                lines.append(f"      why: {s}")
            if e.note:
                lines.append(f"      note: {e.note}")
            if e.fixes:
                lines.append(f"      fix: {e.fixes[0]}")
                for f in e.fixes[1:3]:
                    lines.append(f"       or: {f}")
    return lines


def _gpu_oom_text(m) -> List[str]:
    o = m.oom
    where = f" in {o.allocator}" if o.allocator else ""
    size = o.requested_text or "?"
    if o.requested_bytes is not None and not (o.requested_text or "").endswith("bytes"):
        size += (f" ({o.requested_bytes} bytes" + ("" if o.requested_exact else
                 ", as the allocator rounded it" if o.allocator_rounded
                 else ", from the rounded figure") + ")")
    out = [f"XLA:GPU out-of-memory error{'' if not m.name else ' in ' + m.name}"]
    if o.requested_text is not None:
        out.append(f"  request that failed: {size}{where}"
                   + (" (XLA's autotuner)" if o.origin == "autotuner" else ""))
    if o.limit is not None:
        out.append(f"  memory limit: {fmt_bytes(o.limit)} ({o.limit} bytes, from "
                   f"{o.memory_limit_source})")
    if (o.remat_reduced_to_bytes, o.remat_original_bytes, o.remat_target_bytes) != (None,) * 3:
        out.append("  XLA's rematerialization: the program needs "
                   + (f"{fmt_bytes(o.remat_reduced_to_bytes)}"
                      if o.remat_reduced_to_bytes is not None else "?")
                   + (f" (down from {fmt_bytes(o.remat_original_bytes)})"
                      if o.remat_original_bytes not in (None, o.remat_reduced_to_bytes) else "")
                   + (f", it aimed at {fmt_bytes(o.remat_target_bytes)}"
                      if o.remat_target_bytes else ""))
    if o.in_use_bytes is not None:
        out.append(f"  in use in the allocator when it failed: {fmt_bytes(o.in_use_bytes)}")
    out.append(f"  {o.note}")
    if o.matching_buffers is not None:
        if o.matching_buffers:
            out.append(f"buffers of the dump with that size ({len(o.matching_buffers)}):")
            for b in o.matching_buffers[:10]:
                names = ", ".join(b["names"][:3])
                out.append(f"  allocation {b['index']} of {b['module']}: {b['kind']}, "
                           f"{fmt_bytes(b['size_in_bytes'])}" + (f": {names}" if names else ""))
                if b.get("shape"):
                    out.append(f"      {b['shape']}")
        else:
            out.append("no buffer of the dump has that size")
    elif o.requested_text is not None:
        out.append("  (give the dump of the same program with --dump DIR to see which buffers "
                   "have that size)")
    for n in m.notes:
        out.append(f"note: {n}")
    return out


def oom_lines(m, top: int) -> List[str]:
    o = m.oom
    if o.form == "gpu":
        return _gpu_oom_text(m)
    out = [f"out-of-memory report{'' if not m.name else ' for module ' + m.name}"
           f" ({'detailed' if o.form == 'detailed' else 'the two-line exception'})"]
    if o.used is not None and o.limit is not None:
        out.append(f"  {o.memory_space}: needs {fmt_bytes(o.used)} of {fmt_bytes(o.limit)}"
                   + (f": {fmt_bytes(o.excess)} too much" if o.excess is not None else ""))
    bits = []
    for label, v in (("arguments", m.argument_size_in_bytes), ("outputs", m.output_size_in_bytes),
                     ("aliased", m.alias_size_in_bytes)):
        if v is not None:
            bits.append(f"{label} {fmt_bytes(v)}")
    if bits:
        out.append("  " + ", ".join(bits))
    verdict = {True: "would fit without padding", False: "would not fit even without padding",
               None: "whether it would fit without padding is not known"}[o.fits_without_padding]
    out.append(f"  {verdict}: {o.note}")
    listed = m.allocations
    if listed and top:
        shown = min(top, len(listed))
        out.append(f"allocations listed in the report ({len(listed)}"
                   + (f", the first {shown} shown; --top N for more" if shown < len(listed) else "")
                   + "):")
        # one numbering for the whole list (the report numbers its temporaries
        # and its arguments/outputs separately, from 1 each)
        for rank, a in enumerate(listed[:top], 1):
            out.extend(_allocation_lines(rank, a))
    if m.padding_wasters and top:
        out.append("most padding among them:")
        for rank, a in enumerate(m.padding_wasters, 1):
            out.extend(_allocation_lines(rank, a, explain=True))
    for w in m.warnings:
        out.append(f"warning: {w}")
    return out


# -- memory diff --------------------------------------------------------------------


def _delta(x, y) -> str:
    if x is None or y is None:
        return ""
    d = y - x
    if d == 0:
        return "="
    pct = f" ({100 * d / x:+.1f}%)" if x and abs(d) < 100 * x else ""
    return ("+" if d > 0 else "-") + fmt_bytes(abs(d)) + pct


def _buf(x) -> str:
    op = f"  [{x.key[0]}]" if x.key[0] else ""
    return f"{fmt_bytes(x.size):>8}  {x.kind:<10} {x.label}  {x.shape or ''}{op}"


def diff_lines(d, a_path: str, b_path: str, top: int = 5) -> List[str]:
    """``xlashape memory diff A B`` as text (a :class:`~xlashape.memory.diff.ModuleDiff`)."""
    top = max(top, 1) * 2
    a, b = d.a, d.b
    out = [f"A: {a_path}  module {a.name or '?'} ({a.source}, {(a.platform or '?').upper()})",
           f"B: {b_path}  module {b.name or '?'} ({b.source}, {(b.platform or '?').upper()})",
           "figures (A -> B):"]
    for k, (x, y, _) in d.figures.items():
        xs = "null" if x is None else str(x)
        ys = "null" if y is None else str(y)
        out.append(f"  {k:<30} {xs:>14} -> {ys:>14}  {_delta(x, y)}")
    if d.peak_a is not None or d.peak_b is not None:
        def where(m, p):
            pa = m.peak
            xla = None if pa is None else pa.figures.get("peak_memory_in_bytes")
            text = (f"peak_memory_in_bytes {fmt_bytes(xla)}" if xla is not None else
                    "?" if p is None else f"{p[1]} {fmt_bytes(p[0])}")
            if pa is not None and pa.peak_time is not None:
                text += (f"; the temporaries' heap in S({pa.peak_memory_space}) is highest at "
                         f"position {pa.peak_time} ({pa.peak_instruction or '?'})")
            return text
        out.append(f"peak: A {where(a, d.peak_a)}")
        out.append(f"      B {where(b, d.peak_b)}")
    n = lambda xs: sum(x.size for x in xs)  # noqa: E731
    sections = [
        (f"buffers added in B ({len(d.added)}, {fmt_bytes(n(d.added))}):", d.added),
        (f"buffers removed from A ({len(d.removed)}, {fmt_bytes(n(d.removed))}):", d.removed),
    ]
    for title, xs in sections:
        if xs:
            out.append(title)
            out.extend("  " + _buf(x) for x in xs[:top])
            if len(xs) > top:
                out.append(f"  ... {len(xs) - top} more")
    if not (d.added or d.removed or d.changed):
        out.append("buffers: none added, removed or resized (matched by JAX op path and "
                   "instruction name)")
    if d.changed:
        out.append(f"buffers grown or shrunk ({len(d.changed)}):")
        for x, y in d.changed[:top]:
            out.append(f"  {_delta(x.size, y.size):>16}  {x.label} -> {y.label}: "
                       f"{fmt_bytes(x.size)} -> {fmt_bytes(y.size)}")
        if len(d.changed) > top:
            out.append(f"  ... {len(d.changed) - top} more")
    if d.layouts:
        cost = sum(y.size - x.size for x, y in d.layouts)
        out.append(f"layouts changed ({len(d.layouts)}, {'+' if cost >= 0 else '-'}"
                   f"{fmt_bytes(abs(cost))}):")
        for x, y in d.layouts[:top]:
            out.append(f"  {x.label}: {x.shape} -> {y.shape} ({_delta(x.size, y.size) or '='})")
    if d.moved:
        out.append(f"buffers in another kind of allocation ({len(d.moved)}, "
                   f"{fmt_bytes(sum(y.size for _, y in d.moved))}):")
        for x, y in d.moved[:top]:
            out.append(f"  {fmt_bytes(y.size):>8}  {x.label} ({x.kind}) -> {y.label} ({y.kind})")
        if len(d.moved) > top:
            out.append(f"  ... {len(d.moved) - top} more")
    for title, xs in (("donations lost (an output no longer reuses the parameter's buffer)",
                       d.donations_lost),
                      ("donations gained", d.donations_gained)):
        if xs:
            out.append(f"{title}:")
            out.extend(f"  parameter {p}: {fmt_bytes(nb)}" for p, nb in xs)
    if d.copies_added or d.copies_removed:
        out.append(f"copies and transposes: {len(d.copies_added)} added "
                   f"({fmt_bytes(n(d.copies_added))}), {len(d.copies_removed)} removed "
                   f"({fmt_bytes(n(d.copies_removed))})")
        out.extend("  + " + _buf(x) for x in d.copies_added[:top])
    if d.live_added or d.live_removed or d.live_changed:
        out.append(f"live at the peak: {len(d.live_added)} buffers only in B "
                   f"({fmt_bytes(n(d.live_added))}), {len(d.live_removed)} only in A "
                   f"({fmt_bytes(n(d.live_removed))}), {len(d.live_changed)} changed size")
        out.extend("  + " + _buf(x) for x in d.live_added[:top])
        out.extend("  - " + _buf(x) for x in d.live_removed[:top])
    for name, x, y in d.growths():
        out.append(f"growth: {name} {x} -> {y} bytes {_delta(x, y)}")
    return out
