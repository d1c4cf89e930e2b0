"""The terminal report of :mod:`xlashape.memory`'s model: ``xlashape memory`` and
``xlashape memory diff``, as lines of text.

Pure functions of the model (:class:`~xlashape.memory.ModuleMemory`, its
:class:`~xlashape.memory.PeakAnalysis`, a :class:`~xlashape.memory.diff.ModuleDiff`):
they open no file and compute no figure; the command prints what they return
(made printable: control characters from an artifact are escaped there).
"""

from __future__ import annotations

import os
import re
import textwrap
from typing import List, Optional

from ..memory.diff import memory_bytes, shared
from ..memory.figures import PEAK_FIELDS
from ..memory.model import space_label
from ..tiling import format_bytes, format_bytes_apart
from .predictions import prediction_lines
from .tables import Table, clip_middle as _clip_middle, text_width, wrapped as _wrapped, wrapped_items

__all__ = ["report_lines", "module_lines", "oom_lines", "verdict_line", "max_peak_line",
           "growth_line", "diff_lines", "fmt_bytes", "common_op_prefix", "audit_lines"]


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

#: the memory-space table's figure columns (a size prints in at most 8
#: characters: "-1023.9K", "100.00G"); its first column is as wide as its
#: labels (_space_lines)
_SPACE_FIGURES = [("arguments", 9, ">"), ("outputs", 8, ">"), ("aliased", 8, ">"),
                  ("temporaries", 11, ">"), ("other", 8, ">"), ("total", 8, ">")]
_MODULES = Table([("module", 40, "<"), ("arguments", 10, ">"), ("outputs", 10, ">"),
                  ("temporaries", 12, ">"), ("padding", 10, ">"), ("allocations", 11, ">")],
                 indent="  ")
# the live-at-peak table: these columns, then the buffer, its shape, its JAX op
# path and source line (as wide as the terminal lets them be: _live_rows)
_LIVE_FIXED = [("size", 9, ">"), ("padding", 8, ">"), ("kind", 12, "<"), ("space", 5, "<"),
               ("live", 13, "<")]
_LIVE_LEAD = Table(_LIVE_FIXED, indent="  ")
#: the width of the fixed columns, their indent and the gap after them
_LIVE_LEAD_WIDTH = len(_LIVE_LEAD.header()) + 1
#: the indent of a buffer's second line when the table takes two lines a buffer
_LIVE_SECOND = " " * 8




def _size(n) -> str:
    return "-" if not n else fmt_bytes(n)


def report_lines(result, modules, display: str, top: int, verdicts=None,
                 width: Optional[int] = None) -> List[str]:
    """The whole report of ``modules`` (of the analysis ``result`` of the
    input shown as ``display``), with the verdicts (``id(module) -> Verdict``),
    for a terminal ``width`` characters wide (``None``: no limit; the
    live-at-peak table takes two lines a buffer where one does not fit)."""
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
        # libtpu logs a report for each allocation it tries, and a log may
        # hold several of XLA:GPU's failures: the last one is where it gave
        # up; the earlier ones in one line each
        why = ("libtpu tries more than one allocation" if modules[-1].platform == "tpu"
               else "the last failure is the one that stopped the program")
        out.append(f"earlier reports in the same log ({why}):")
        for m in modules[:-1]:
            out.append("  " + _earlier_report(m))
        out.append("the last report:")
        modules = modules[-1:]
    for i, m in enumerate(modules):
        if i:
            out.append("")
        if m.source == "oom":
            out.extend(oom_lines(m, top, width))
        else:
            out.extend(module_lines(m, top, width))
        v = (verdicts or {}).get(id(m))
        if v is not None:
            out.extend(v.lines())
        out.extend(prediction_lines(m, v, width))
    return out


def _earlier_report(m) -> str:
    """One line for a report a later one of the same log supersedes."""
    o = m.oom
    if o.form == "gpu":
        what = ("XLA's autotuner" if o.autotune is not None else
                "XLA's rematerialization" if o.requested_text is None else "the allocator")
        if o.requested_text is not None:
            text = f"{o.requested_text}" + (f" in {o.allocator}" if o.allocator else "")
        else:
            text = f"the program needs {fmt_bytes(o.used)}"
        return f"{m.name or 'XLA:GPU'}: {text} ({what})" + (
            f", limit {fmt_bytes(o.limit)}" if o.limit is not None else "")
    return (f"{m.name or '?'}: needs {fmt_bytes(o.used)} of {fmt_bytes(o.limit)}"
            f", {len(m.allocations)} allocations listed")


def verdict_line(v) -> str:
    """The verdict's first line (:meth:`~xlashape.memory.Verdict.lines`)."""
    return v.lines()[0]


def max_peak_line(name, peak: int, peak_name: str, most: int, most_text: str) -> str:
    """``--max-peak``'s failure: the peak (with its bytes) and the limit as
    given, with its bytes too where it prints as the peak does."""
    limit = most_text
    if fmt_bytes(most) == fmt_bytes(peak) and most_text.strip() != str(most):
        limit += f" ({most} bytes)"
    return f"{name or '?'}: peak {fmt_bytes(peak)} ({peak_name} {peak} bytes) exceeds --max-peak {limit}"


def growth_line(name: str, x: int, y: int, limit_text: str, limit_bytes: Optional[int]) -> str:
    """``--max-growth``'s failure for figure ``name`` (``x`` -> ``y``
    bytes); ``limit_bytes`` for a size limit (its bytes are shown when the
    growth prints as it does)."""
    grew = y - x
    shown = fmt_bytes(grew)
    limit = limit_text
    if limit_bytes is not None:
        shown, b = format_bytes_apart(grew, limit_bytes)
        if b != fmt_bytes(limit_bytes):
            limit = f"{limit_text} ({limit_bytes} bytes)"
    return (f"{name} grew by {shown} ({x} -> {y} bytes"
            + (f", {100 * grew / x:+.1f}%" if x else "") + f"), more than --max-growth {limit}")


def _peak_text(m, top: int, width: Optional[int] = None) -> List[str]:
    pa = m.peak
    out = []
    figs = []
    for k in PEAK_FIELDS:
        val = pa.figures[k]
        figs.append(f"{k} {val}" if val is not None else f"{k} null")
    out.extend(wrapped_items("peak figures:", figs, text_width(width)))
    for k, why in pa.reasons.items():
        out.extend(_wrapped(f"{k} is null: {why}", text_width(width)))
    if pa.live_at_peak:
        fixed = sum(b.size for b in pa.live_at_peak if b.start is None)
        out.append(f"the peak: {fmt_bytes(pa.live_at_peak_bytes)} = {fmt_bytes(fixed)} that lives "
                   f"for the whole program + {fmt_bytes(pa.live_at_peak_bytes - fixed)} of "
                   "temporaries")
        if pa.peak_time is not None:
            out.extend(_wrapped(f"the temporaries' heap, S({pa.peak_memory_space}) "
                                f"{space_label(pa.peak_memory_space)}, is highest at "
                                + (f"event {pa.peak_time} of the heap simulator's trace"
                                   if getattr(pa, "time_axis", "") == "trace events" else
                                   f"position {pa.peak_time} in program order")
                                + f": {pa.peak_instruction or '?'}", text_width(width)))
        if m.platform == "cpu":
            out.append("  (XLA:CPU's peak_memory_in_bytes leaves the temporaries out: its "
                       "executable keeps no heap traces)")
        out.append("heap over program order per memory space (whole-program buffers included):")
        over = {x.memory_space: x for x in m.heaps_over_allocations()}
        for color in sorted(pa.heap):
            h = pa.heap[color]["padded"]
            if not h:
                continue
            out.append((f"  S({color}) {_clip(space_label(color), 28):<28} highest "
                        f"{fmt_bytes(max(h)):>8}  " + _sparkline(h)).rstrip())
            if color in over:
                out.extend(_wrapped(over[color].sentence(), text_width(width), "    "))
        shown, rest_n, rest_b = pa.listed(max(top, 1) * 2)
        out.append(f"live at the peak: {len(pa.live_at_peak)} buffers, "
                   f"{fmt_bytes(pa.live_at_peak_bytes)}")
        out.extend(_live_rows(shown, width))
        prefix = common_op_prefix(b.op_name for b in shown)
        if rest_n:
            out.append(f"  ... and {rest_n} smaller buffers, {fmt_bytes(rest_b)}")
        rows, rest = pa.op_path_rows(max(top, 1) * 2)
        bare_bytes, bare_count, bare_names = pa.without_op_path()
        if rows or bare_count:
            out.append("by JAX op path:")
            room = None if width is None else max(width - 34, 20)
            whole = max(pa.live_at_peak_bytes, 1)

            def row(b, c, text):
                return (f"  {fmt_bytes(b):>9} {100 * b / whole:5.1f}%  "
                        f"{c:>4} buffer{'s' if c != 1 else ' '}  {text}")

            for k, b, c in rows:
                if prefix is not None and k.startswith(prefix):
                    k = k[len(prefix):]   # said once above the live-at-peak table
                lines = [k] if room is None or len(k) <= room else _wrap_path(k, room)
                out.append(row(b, c, lines[0]))
                out.extend(" " * 34 + x for x in lines[1:])
            if rest:
                out.append(row(sum(g[1] for g in rest), sum(g[2] for g in rest),
                               f"{len(rest)} more op path{'s' if len(rest) != 1 else ''}, "
                               f"{fmt_bytes(rest[0][1])} or less each"))
            if bare_count:
                names = ", ".join(bare_names[:2]) + (f" and {len(bare_names) - 2} more"
                                                     if len(bare_names) > 2 else "")
                out.append(row(bare_bytes, bare_count, _clip(f"no op path: {names}", room)))
    if pa.xla_live_range_peak is not None:
        t, b = pa.xla_live_range_peak
        out.extend(_wrapped(f"(the live-range file's own peak, {fmt_bytes(b)} ({b} bytes) at "
                            f"position {t}, counts every value, tuple tables and thread-local "
                            "scratch too: not memory_analysis()'s)", text_width(width)))
    return out


_BARS = " ▁▂▃▄▅▆▇█"


def _sparkline(values, width: int = 48) -> str:
    if not values:
        return ""
    n = len(values)
    step = max(1, -(-n // width))
    cols = [max(values[i:i + step]) for i in range(0, n, step)]
    top = max(cols) or 1
    return "".join(_BARS[min(8, (v * 8 + top - 1) // top)] for v in cols)


def _clip(text: str, n: Optional[int]) -> str:
    """``text`` cut on the right to ``n`` characters (``None``: all of it)."""
    return text if n is None or len(text) <= n else text[: max(n - 3, 0)] + "..."


def _clip_left(text: str, n: Optional[int]) -> str:
    """``text`` cut on the left to ``n`` characters, its end kept (an op
    path's last names and a source's ``file:line`` say most)."""
    return text if n is None or len(text) <= n else "..." + text[len(text) - max(n - 3, 0):]




def _top_component(op: str) -> Optional[str]:
    """``jit(step)/`` of ``jit(step)/transpose(jvp())/dot_general``: the op
    path up to its first ``/`` outside parentheses, ``None`` without one."""
    depth = 0
    for i, c in enumerate(op):
        if c == "(":
            depth += 1
        elif c == ")":
            depth -= 1
        elif c == "/" and depth == 0:
            return op[:i + 1]
    return None


def common_op_prefix(ops) -> Optional[str]:
    """The first component (``jit(step)/``) every op path with one starts
    with, when at least two do; else ``None``.

    >>> common_op_prefix(["jit(f)/dot_general", "x", "jit(f)/jvp()/tanh", None])
    'jit(f)/'
    >>> common_op_prefix(["jit(f)/dot", "jit(g)/dot"]) is None
    True
    """
    firsts = [c for c in (_top_component(op) for op in ops if op) if c is not None]
    if len(firsts) < 2 or any(c != firsts[0] for c in firsts):
        return None
    return firsts[0]


def _live_rows(shown, width: Optional[int]) -> List[str]:
    """The live-at-peak table: one line a buffer (size, padding, kind,
    space, live range, buffer, shape, JAX op path, source) when the terminal
    is wide enough (``width`` ``None``: always), else the buffer on a first
    line and its shape, op path and source on the next (the op path on a
    line of its own when they do not fit together). The op paths' common
    first component (``jit(step)/``) is said once, above the table."""
    prefix = common_op_prefix(b.op_name for b in shown)
    # a partitioned program: each shape is one device's part, a parameter's
    # sharding beside it
    sharded = any(b.sharding for b in shown)
    shape_title = "shape (per device), sharding" if sharded else "shape"
    rows = []
    for b in shown:
        op = b.op_name or ""
        if prefix is not None and op.startswith(prefix):
            op = op[len(prefix):]
        live = "whole program" if b.start is None else f"{b.start}-{b.end}"
        fixed = (fmt_bytes(b.size), _size(b.padding), b.kind, f"S({b.color})", live)
        label = b.label + (f" ({b.workspace} workspace)" if b.workspace else "")
        shape = (b.shape or "") + (f" sharding={b.sharding}" if b.sharding else "")
        rows.append((fixed, label, shape, op, b.source or ""))
    out = []
    if prefix is not None:
        out.append(f"  ({prefix} left out of the JAX op paths below, which start with it)")
    wide = [max(len(r[k]) for r in rows) if rows else 0 for k in range(1, 5)]
    wide[1] = max(wide[1], len(shape_title)) if sharded else wide[1]
    total = _LIVE_LEAD_WIDTH + sum(wide) + 3 * 2
    if width is None or total <= width:
        table = Table(_LIVE_FIXED + [("buffer", wide[0], "<"), (shape_title, wide[1], "<"),
                                     ("JAX op path", wide[2], "<"), ("source", 0, "<")],
                      indent="  ", gaps=[""] + [" "] * 5 + ["  "] * 3)
        out.append(table.header().rstrip())
        for fixed, label, shape, op, source in rows:
            out.append(table.format(*fixed, label, shape, op, source).rstrip())
        return out
    room = max(width - _LIVE_LEAD_WIDTH, 10)
    out.append((_LIVE_LEAD.header() + " buffer").rstrip())
    out.append(f"{_LIVE_SECOND}{shape_title}  JAX op path  source")
    for fixed, label, shape, op, source in rows:
        if len(label) <= room:
            out.append((_LIVE_LEAD.format(*fixed) + " " + label).rstrip())
        else:
            # a name longer than the room left: whole, on a line of its own
            out.append(_LIVE_LEAD.format(*fixed).rstrip())
            out.append(_LIVE_SECOND + _clip_middle(label, width - len(_LIVE_SECOND)))
        out.extend(_LIVE_SECOND + x for x in _second_lines(shape, op, source,
                                                          width - len(_LIVE_SECOND)))
    return out


def _second_lines(shape: str, op: str, source: str, room: int) -> List[str]:
    """``shape  op path  source`` in ``room`` characters; where that does
    not fit, the shape on a line of its own and ``op path  source`` under it
    (the op path with the line that made it), each on lines of its own if
    even that does not fit: an op path longer than a line goes on over the
    next ones, broken after a ``/``, so that it is never cut."""
    text = "  ".join(x for x in (shape, op, source) if x)
    if len(text) <= room:
        return [text] if text else []
    out = [_clip(shape, room)] if shape else []
    rest = "  ".join(x for x in (op, source) if x)
    if len(rest) <= room:
        return out + ([rest] if rest else [])
    if op:
        out.extend(_wrap_path(op, room))
    if source:
        out.append(_clip_left(source, room))
    return out


def _wrap_path(op: str, room: int) -> List[str]:
    """An op path over lines of ``room`` characters, each broken after a
    ``/`` (the lines after the first indented by two); a name longer than a
    line is cut on the left."""
    parts = re.findall(r"[^/]*/|[^/]+$", op)
    lines: List[str] = []
    line = ""
    for part in parts:
        width = room - (2 if lines else 0)
        if line and len(line) + len(part) > width:
            lines.append(line)
            line = ""
        line += part
    if line:
        lines.append(line)
    return [_clip_left(lines[0], room)] + ["  " + _clip_left(x, room - 2) for x in lines[1:]]


def module_lines(m, top: int, width: Optional[int] = None) -> List[str]:
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
        out.extend(_wrapped(f"every figure is per device: the program runs on {m.devices} "
                            "devices" + (f" ({m.device_kind})" if m.device_kind else "")
                            + ", each with its own part of every sharded array",
                            text_width(width)))
    if m.path and m.source == "dump":
        out.append(f"  {os.path.basename(m.path)}")
    out.extend(_space_lines(m, width))
    if not m.memory_spaces:
        out.append("  (no buffers)")
    if dumped:
        out.extend(_wrapped("(outputs include parameters the outputs reuse; other: "
                            "thread-local and constant allocations)", text_width(width)))
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
    out.extend(wrapped_items("CompiledMemoryStats figures:", stats, text_width(width)))
    if m.memory_analysis:
        out.extend(wrapped_items("memory_analysis() of the compile:",
                                 [f"{k} {v}" for k, v in sorted(m.memory_analysis.items())],
                                 text_width(width)))
    for k, why in m.reasons.items():
        out.extend(_wrapped(f"{k} is null: {why}", text_width(width)))
    if m.hbm_temp_allocation_bytes is not None:
        out.extend(_wrapped(f"hbm_temp_allocation_bytes {m.hbm_temp_allocation_bytes} (xlashape's "
                            "figure: the buffer assignment's preallocated temporaries in device "
                            "memory, S(0))", text_width(width)))
    if m.largest and top:
        out.append("largest allocations:")
        for rank, a in enumerate(m.largest, 1):
            out.extend(_allocation_lines(rank, a, numbered=dumped, width=width))
    ps = getattr(m, "padding_summary", None)
    if m.padding_wasters and top:
        out.extend(_wrapped("most padding" + (f" ({ps.text})" if ps is not None else "") + ":",
                            text_width(width), indent=""))
        for rank, a in enumerate(m.padding_wasters, 1):
            out.extend(_allocation_lines(rank, a, explain=True, numbered=dumped, width=width))
    elif top and ps is not None and ps.padding_bytes:
        out.append(ps.text)
    elif top:
        out.append("no allocation is padded")
    if m.peak is not None:
        out.extend(_peak_text(m, top, width))
    out.extend(audit_lines(m, top, width))
    for n in m.notes:
        out.append(f"note: {n}")
    for w in m.warnings:
        out.append(f"warning: {w}")
    return out


def _space_lines(m, width: Optional[int]) -> List[str]:
    """The memory-space table: its first column as wide as its labels, and
    on a terminal too narrow for them, the labels without their
    explanation ("S(1) VMEM" for "S(1) VMEM (fast on-chip memory)")."""
    spaces = sorted(m.memory_spaces)
    labels = [f"S({sp}) " + space_label(sp, m.memory_spaces[sp].name
                                        if m.memory_spaces[sp].reported_total is not None
                                        else None) for sp in spaces]
    rest = 2 + sum(w + 1 for _, w, _ in _SPACE_FIGURES)
    first = max([len("memory space")] + [len(x) for x in labels])
    if width is not None and first + rest > width:
        labels = [x.split(" (", 1)[0] for x in labels]
        first = max([len("memory space")] + [len(x) for x in labels])
    first = min(first, 40)
    table = Table([("memory space", first, "<")] + _SPACE_FIGURES, indent="  ")
    out = [table.header()]
    for sp, label in zip(spaces, labels):
        t = m.memory_spaces[sp]
        other = t.thread_local + t.constants + t.other
        out.append(table.format(_clip(label, first), _size(t.arguments), _size(t.outputs),
                                _size(t.aliased), _size(t.temporaries), _size(other),
                                _size(t.total)))
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


def _allocation_lines(rank: int, a, explain: bool = False, numbered: bool = False,
                      width: Optional[int] = None) -> List[str]:
    w = text_width(width)
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
    # continued under "allocation ...", past the rank and the size
    lines = _wrapped(head, w, indent="", more=" " * 16)
    holds = a.holds
    if holds:
        lines.extend(_wrapped(holds, w, "      "))
    if explain:
        pv = a.padded_value()
        if pv is not None:
            lines.extend(_wrapped(f"its most padded value: {pv.described}, "
                                  f"{fmt_bytes(pv.padding_in_bytes)} of padding", w, "      "))
    if a.label and not a.values:
        lines.append(f"      {a.label}")
    if explain:
        e = a.explanation()
        if e is not None:
            for s in e.sources:
                lines.extend(_wrapped(f"why: {s}", w, "      "))
            if e.note:
                lines.extend(_wrapped(f"note: {e.note}", w, "      "))
            if e.fixes:
                lines.extend(_wrapped(f"fix: {e.fixes[0]}", w, "      "))
                for f in e.fixes[1:3]:
                    lines.extend(_wrapped(f"or: {f}", w, "       "))
    return lines


def _request_text(o) -> str:
    """The failed request as printed, with its bytes and how exact they are."""
    size = o.requested_text or "?"
    if o.requested_bytes is not None and not (o.requested_text or "").endswith("bytes"):
        size += (f" ({o.requested_bytes} bytes" + ("" if o.requested_exact else
                 ", as the allocator rounded it" if o.allocator_rounded
                 else ", from the rounded figure") + ")")
    return size


def _gpu_oom_text(m) -> List[str]:
    o = m.oom
    where = f" in {o.allocator}" if o.allocator else ""
    a = o.autotune
    if a is not None:
        out = [f"XLA:GPU out of memory while compiling (XLA's autotuner)"
               f"{'' if not m.name else ' in ' + m.name}"]
    else:
        out = [f"XLA:GPU out-of-memory error{'' if not m.name else ' in ' + m.name}"]
    out.extend(_wrapped(o.note))
    if a is not None:
        count = (f"{a.failed_instructions} of {a.instructions}" if a.failed_instructions is not None
                 else str(len(a.failed)))
        out.append(f"  instructions it could not configure: {count}"
                   + ("" if a.failed else " (the exception names none)"))
        for f in a.failed:
            size = f" ({fmt_bytes(f.size_in_bytes)})" if f.size_in_bytes is not None else ""
            out.append(f"    {f.name}  {f.shape or '?'}{size}: {f.configs_failed} "
                       f"configuration{'s' if f.configs_failed != 1 else ''} failed, "
                       f"{f.out_of_memory} out of memory")
        if a.from_example:
            out.append(f"    the exception's example: {a.configs_failed} configuration"
                       f"{'s' if a.configs_failed != 1 else ''} failed, {a.out_of_memory} out of "
                       "memory")
        out.extend(_wrapped(f"request that failed: {_request_text(o)}{where}, once per "
                            f"configuration ({a.repeats} out-of-memory line"
                            f"{'s' if a.repeats != 1 else ''} in the text, one event)"))
    elif o.requested_text is not None:
        out.append(f"  request that failed: {_request_text(o)}{where}"
                   + (" (XLA's autotuner)" if o.origin == "autotuner" else ""))
    if o.limit is not None:
        out.extend(_wrapped(f"memory limit: {fmt_bytes(o.limit)} ({o.limit} bytes, from "
                            f"{o.memory_limit_source})"))
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
    if o.advice:
        out.append("what to do:")
        for line in o.advice:
            out.extend(textwrap.wrap(line, 100, initial_indent="  - ", subsequent_indent="    ",
                                     break_on_hyphens=False, break_long_words=False))
    if o.matching_buffers is not None:
        if o.matching_buffers:
            out.append(f"buffers of the dump with that size ({len(o.matching_buffers)}):")
            for b in o.matching_buffers[:10]:
                names = ", ".join(b["names"][:3])
                out.append(f"  allocation {b['index']} of {b['module']}: {b['kind']}, "
                           f"{fmt_bytes(b['size_in_bytes'])}" + (f": {names}" if names else ""))
                if b.get("holds") or b.get("shape"):
                    out.append(f"      {b.get('holds') or b['shape']}")
        else:
            out.append("no buffer of the dump has that size")
    elif o.requested_text is not None and a is None:
        out.append("  (give the dump of the same program with --dump DIR to see which buffers "
                   "have that size)")
    for n in m.notes:
        out.extend(_wrapped(f"note: {n}", indent=""))
    return out


def oom_lines(m, top: int, width: Optional[int] = None) -> List[str]:
    o = m.oom
    if o.form == "gpu":
        return _gpu_oom_text(m)
    out = [f"out-of-memory report{'' if not m.name else ' for module ' + m.name}"
           f" ({'detailed' if o.form == 'detailed' else 'the two-line exception'})"]
    if o.used is not None and o.limit is not None:
        used, limit = format_bytes_apart(o.used, o.limit)
        out.append(f"  {o.memory_space}: needs {used} of {limit}"
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
            out.extend(_allocation_lines(rank, a, width=width))
    if m.padding_wasters and top:
        out.append("most padding among them:")
        for rank, a in enumerate(m.padding_wasters, 1):
            out.extend(_allocation_lines(rank, a, explain=True, width=width))
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
    sections = [("buffers added in B", d.added), ("buffers removed from A", d.removed)]
    for title, xs in sections:
        if xs:
            groups = shared(xs)
            values = (f"{len(xs)} values in {len(groups)} places"
                      if len(groups) != len(xs) else f"{len(xs)}")
            out.append(f"{title} ({values}, {fmt_bytes(memory_bytes(xs))} of memory):")
            for x, others in groups[:top]:
                out.append("  " + _buf(x))
                if others:
                    names = ", ".join(o.label for o in others[:3])
                    more = f" and {len(others) - 3} more" if len(others) > 3 else ""
                    out.append(f"            the same memory as {names}{more}")
            if len(groups) > top:
                out.append(f"  ... {len(groups) - top} more")
    if d.op_path_changed:
        x, y = d.op_path_changed[0]
        out.extend(_wrapped(f"the op paths changed (e.g. checkpointing, another fusion): "
                            f"{len(d.op_path_changed)} buffer"
                            f"{'s' if len(d.op_path_changed) != 1 else ''} matched by name, role "
                            f"and shape instead, e.g.", 80, ""))
        out.append(f"  A {x.label} [{x.key[0] or '-'}]")
        out.append(f"  B {y.label} [{y.key[0] or '-'}]")
    if not (d.added or d.removed or d.changed):
        out.append("buffers: none added, removed or resized (matched by JAX op path and "
                   "name, then by role and shape)")
    if d.dtypes:
        cost = memory_bytes(y for _, y in d.dtypes) - memory_bytes(x for x, _ in d.dtypes)
        out.append(f"dtype changed ({len(d.dtypes)}, {'+' if cost >= 0 else '-'}"
                   f"{fmt_bytes(abs(cost))} of memory):")
        for x, y in d.dtypes[:top]:
            out.append(f"  {x.label}: {x.shape} -> {y.shape}, {_delta(x.size, y.size)}")
        if len(d.dtypes) > top:
            out.append(f"  ... {len(d.dtypes) - top} more")
    dtypes = {(id(x), id(y)) for x, y in d.dtypes}
    resized = [(x, y) for x, y in d.changed if (id(x), id(y)) not in dtypes]
    if resized:
        out.append(f"buffers grown or shrunk ({len(resized)}):")
        for x, y in resized[:top]:
            out.append(f"  {_delta(x.size, y.size):>16}  {x.label} -> {y.label}: "
                       f"{fmt_bytes(x.size)} -> {fmt_bytes(y.size)}")
        if len(resized) > top:
            out.append(f"  ... {len(resized) - top} more")
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
            for p, nb in xs:
                out.append(f"  parameter {p}: {fmt_bytes(nb)}")
                why = getattr(d, "donation_reasons", {}).get(p)
                if why:
                    out.extend(_wrapped(f"donated but not reused: {why}", 100, "    "))
    if d.copies_added or d.copies_removed:
        out.append(f"layout copies and moves between memory spaces: {len(d.copies_added)} added "
                   f"({fmt_bytes(n(d.copies_added))}), {len(d.copies_removed)} removed "
                   f"({fmt_bytes(n(d.copies_removed))})")
        out.extend("  + " + _buf(x) for x in d.copies_added[:top])
    if d.live_added or d.live_removed or d.live_changed:
        out.append(f"live at the peak: {len(d.live_added)} buffers only in B "
                   f"({fmt_bytes(memory_bytes(d.live_added))}), {len(d.live_removed)} only in A "
                   f"({fmt_bytes(memory_bytes(d.live_removed))}), {len(d.live_changed)} changed "
                   "size")
        out.extend("  + " + _buf(x) for x in d.live_added[:top])
        out.extend("  - " + _buf(x) for x in d.live_removed[:top])
    for name, x, y in d.growths():
        out.append(f"growth: {name} {x} -> {y} bytes {_delta(x, y)}")
    return out


# -- what XLA did with your buffers (the audit) -------------------------------------------

_MOVES = {"to-host": "to host memory", "from-host": "back from host memory",
          "prefetch": "prefetched into on-chip memory", "eviction": "evicted from on-chip memory",
          "move": "between other memory spaces"}


def audit_lines(m, top: int = 5, width: Optional[int] = None) -> List[str]:
    """The "what XLA did with your buffers" section of a module
    (:class:`~xlashape.memory.model.ModuleAudit`), its sentences wrapped for
    a terminal ``width`` characters wide (at most 100): only when there is
    something to act on (a donation no output reuses, a layout copy, a move
    to or from host memory); otherwise no line."""
    a = getattr(m, "audit", None)
    if a is None or not a.something_to_say():
        return []
    n = max(top, 1)
    w = text_width(width)
    out = ["what XLA did with your buffers:"]
    if a.donations:
        unused = a.unused_donations
        out.extend(_wrapped(
            f"donations: {len(a.donations)} donated buffer{'s' if len(a.donations) != 1 else ''}, "
            + (f"{len(a.donations) - len(unused)} reused by an output, {len(unused)} not "
               f"({fmt_bytes(sum(d.bytes or 0 for d in unused))} donated for nothing)"
               if unused else "all reused by outputs"), w))
        for d in unused[:n]:
            out.extend(_wrapped(f"{d.label} {d.shape or '?'}: not reused: {d.reason}", w,
                                "    "))
            if d.fix:
                out.extend(_wrapped(f"fix: {d.fix}", w, "      "))
        if len(unused) > n:
            out.append(f"    ... {len(unused) - n} more")
    copies = a.layout_copies
    if copies:
        total = sum(c.bytes or 0 for c in copies)
        live = [c for c in copies if c.live_at_peak]
        out.extend(_wrapped(
            f"layout copies (a copy made only to change a layout): {len(copies)}, "
            f"{fmt_bytes(total)}" + (f"; live at the peak: {len(live)}, "
                                     f"{fmt_bytes(sum(c.bytes or 0 for c in live))}"
                                     if live else ""), w))
        for c in copies[:n]:
            out.append(f"    {fmt_bytes(c.bytes):>8}  {c.instruction}")
            out.extend(_wrapped(f"{c.source} -> {c.target}", w, "      "))
            out.extend(_wrapped(c.cause, w, "      "))
            if c.fix:
                out.extend(_wrapped(f"fix: {c.fix}", w, "      "))
        if len(copies) > n:
            out.append(f"    ... {len(copies) - n} more, "
                       f"{fmt_bytes(sum(c.bytes or 0 for c in copies[n:]))}")
    if a.space_moves:
        groups = {}
        for mv in a.space_moves:
            g = groups.setdefault(mv.kind, [0, 0])
            g[0] += 1
            g[1] += mv.bytes or 0
        out.extend(_wrapped("moves between memory spaces: " + "; ".join(
            f"{c} {_MOVES.get(k, k)} ({fmt_bytes(b)})" for k, (c, b) in groups.items()), w))
        for mv in a.host_moves[:n]:
            where = "" if mv.computation is None else f" in {mv.computation}"
            out.append(f"    {fmt_bytes(mv.bytes):>8}  {mv.instruction}"
                       + (f"/{mv.done}" if mv.done else ""))
            out.extend(_wrapped(f"{mv.operand or '?'} S({mv.from_space}) -> S({mv.to_space}) "
                                f"{space_label(mv.to_space)}{where}", w, "      "))
    for note in a.notes:
        out.extend(_wrapped(f"note: {note}", w, "  "))
    return out

