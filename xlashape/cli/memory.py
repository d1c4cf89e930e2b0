"""``xlashape memory PATH|-``: where a program's memory goes, as XLA accounts
for it: a terminal memory viewer for an HLO module, an XLA dump directory, a TPU
out-of-memory report or an XLA:GPU out-of-memory error (with ``--dump DIR``,
the buffers of the dump that have the size the allocator could not find).

For each module: the totals per memory space (arguments, outputs, aliased,
temporaries), XLA's ``CompiledMemoryStats`` figures, the largest
allocations and the ones wasting most to padding, each with why it is padded
and what would fix it; for an out-of-memory report, the limit, the excess,
and whether removing the padding would make it fit. ``--json`` prints the
form scripts rely on (see :func:`xlashape.memory.analyze`)."""

from __future__ import annotations

import json
import os
import pathlib
import sys
import textwrap
import time
from typing import List

from ._common import (PROG, UsageError, WarningPrinter, add_command, at_least, int64,
                      relabel, renamed, spool_stdin, warn)
from ._output import Table, write_lines
from ._sizes import fmt_bytes
from ..devices import lookup, usable_bytes
from ..errors import XlaShapeError
from ..memory import EXAMPLE_DUMP, analyze, space_label
from ..peak import PEAK_FIELDS, judge, module_peak, parse_size
from ..render import MissingMatplotlib
from ..report_html import write_html
from ..report_plot import picture_module, save_memory_picture
from .memory_diff import run_diff, take_extra as diff_extra, wants_diff

NAME = "memory"

_PROGRESS_MIN_BYTES = 16 << 20
_SPACES = Table([("memory space", 40, "<"), ("arguments", 10, ">"), ("outputs", 10, ">"),
                 ("aliased", 10, ">"), ("temporaries", 12, ">"), ("other", 10, ">"),
                 ("total", 10, ">")], indent="  ")
_MODULES = Table([("module", 40, "<"), ("arguments", 10, ">"), ("outputs", 10, ">"),
                  ("temporaries", 12, ">"), ("padding", 10, ">"), ("allocations", 11, ">")],
                 indent="  ")
_LIVE = Table([("size", 9, ">"), ("padding", 8, ">"), ("kind", 12, "<"), ("space", 5, "<"),
               ("live", 13, "<"),
               ("buffer", 30, "<"), ("JAX op path", 44, "<"), ("source", 30, "<")], indent="  ")


def add_parser(subparsers):
    p = add_command(
        subparsers, NAME,
        "Show where a program's memory goes, as XLA accounts for it: read an HLO module, "
        "an XLA dump directory (XLA_FLAGS=--xla_dump_to=DIR), a TPU out-of-memory report or "
        "an XLA:GPU out-of-memory error, "
        "and print the totals per memory space, XLA's memory figures, the largest allocations "
        "and the padding wasters with their fixes",
        f"{PROG} memory --example                       # a small real TPU dump shipped with xlashape\n"
        f"  {PROG} memory DUMP_DIR                          # XLA_FLAGS=--xla_dump_to=DUMP_DIR\n"
        f"  {PROG} memory module.after_optimizations.txt --json\n"
        f"  {PROG} memory - < oom_message.txt\n"
        f"  {PROG} memory gpu_oom.txt --dump DIR                # which buffers have the failed size\n"
        f"  {PROG} memory DUMP_DIR --html report.html     # a page to look at, offline\n"
        f"  {PROG} memory diff A B --max-growth 5%        # two compiles of one program")
    p.add_argument("path", metavar="PATH", nargs="?",
                   help="an HLO text file (.gz ok), an XLA dump directory, a TPU out-of-memory "
                        "report or libtpu log, an XLA:GPU out-of-memory error or log, or - for "
                        "standard input")
    p.add_argument("--example", action="store_true",
                   help="read the small real XLA:TPU dump shipped with xlashape")
    p.add_argument("--example-path", action="store_true",
                   help="print the directory of that dump and exit")
    p.add_argument("--json", action="store_true",
                   help='print {"modules": [{"name", "argument_size_in_bytes", ..., '
                        '"allocations": [...]}]}')
    p.add_argument("--top", type=int64, default=5, metavar="N",
                   help="list the N largest allocations and the N biggest padding wasters "
                        "per module (default 5)")
    p.add_argument("--chip", metavar="TPU",
                   help="the TPU generation (v4, v5e, v5p, v6e; or a topology such as v6e:2x2): "
                        "it sets the size of tuple tables, which HLO text does not say "
                        "(default: v4/v5e sizes; a dump's buffer assignment shows them)")
    p.add_argument("--dump", metavar="DIR",
                   help="for an XLA:GPU out-of-memory error: the dump directory of the same "
                        "program (XLA_FLAGS=--xla_dump_to=DIR); names the buffers that have "
                        "the size the allocator could not find")
    p.add_argument("--device", metavar="GPU|TPU",
                   help="judge the peak against this device's usable memory (h100, h200, a100, "
                        "v5e, v6e, ...; GPUs: jax's default 75%% of device memory)")
    p.add_argument("--limit", metavar="SIZE",
                   help="judge the peak against SIZE bytes (80G, 16GiB, 80GB, 1048576)")
    p.add_argument("--max-peak", metavar="SIZE",
                   help="exit with status 1 when a module's peak (the one the verdict judges: "
                        "device memory over program order, or an out-of-memory report's "
                        "figure) exceeds SIZE (for CI)")
    p.add_argument("--platform", choices=("cpu", "gpu", "tpu"),
                   help="the platform the dump was compiled for, when its file names do not say "
                        "(XLA counts the peak and host memory differently on each)")
    p.add_argument("--proto", action="store_true",
                   help="read a dump directory through its .hlo.pb files (--xla_dump_hlo_as_proto: "
                        "the module, its buffer assignment and the heap simulator's traces) "
                        "rather than its text files (the default when both are there)")
    p.add_argument("--module", metavar="NAME",
                   help="only the modules whose name contains NAME (a dump holds many)")
    p.add_argument("--max-warnings", type=int64, default=20, metavar="N",
                   help="print at most N warnings (unreadable lines, files of a dump that were "
                        "skipped; default 20)")
    p.add_argument("--html", metavar="FILE",
                   help="also write a self-contained HTML page (heap over program order, the "
                        "buffers live at the peak, a sortable table of every allocation) to FILE")
    p.add_argument("--png", metavar="FILE",
                   help="also draw the heap over program order and the buffers live at the peak "
                        "to a PNG file (needs matplotlib)")
    p.add_argument("--svg", metavar="FILE", help="the same picture as an SVG file")
    p.add_argument("--max-growth", metavar="PCT|SIZE",
                   help="memory diff A B: exit with status 1 when B's peak or total "
                        "(arguments + outputs + temporaries - aliased) is more than PCT (5%%) "
                        "or SIZE above A's (for CI)")
    p.add_argument("--no-progress", action="store_true", help="never print progress")
    return p


def example_path() -> str:
    """The small real XLA:TPU dump directory shipped with xlashape."""
    return EXAMPLE_DUMP


class _Progress:
    """On a terminal, ``xlashape: reading 12.3 of 980.0 MB (1%)`` on stderr."""

    def __init__(self, enabled: bool):
        self.enabled = enabled
        self.shown = False
        self.last = 0.0

    def __call__(self, done: int, total) -> None:
        if not self.enabled:
            return
        now = time.monotonic()
        if now - self.last < 0.5:
            return
        self.last = now
        mb = done / 1e6
        msg = (f"{mb:.1f} of {total / 1e6:.1f} MB ({100 * done / total:.0f}%)" if total
               else f"{mb:.1f} MB")
        sys.stderr.write(f"\r{PROG}: reading {msg} ")
        sys.stderr.flush()
        self.shown = True

    def done(self):
        if self.shown:
            sys.stderr.write("\r" + " " * 60 + "\r")
            sys.stderr.flush()
            self.shown = False


def take_extra(args, extra) -> bool:
    return diff_extra(args, extra)


def run(args) -> int:
    if wants_diff(args):
        return run_diff(args)
    # sizes and device names are checked before anything is printed
    if args.max_growth is not None:
        raise UsageError("--max-growth compares two compiles: xlashape memory diff A B "
                         "--max-growth PCT|SIZE")
    spec = _limit_of(args)
    most = parse_size(args.max_peak) if args.max_peak is not None else None
    at_least(args.top, 0, "--top")
    at_least(args.max_warnings, 0, "--max-warnings")
    display = None
    if args.example_path:
        write_lines([example_path()])
        return 0
    if args.example:
        if args.path is not None:
            raise UsageError("give either PATH or --example, not both")
        path = example_path()
        if not os.path.isdir(path):
            raise UsageError(f"the example dump is not installed ({path} is missing)")
        display = "xlashape/examples/tpu_dump"
        if not args.json:
            write_lines(["(the example: a real XLA:TPU dump shipped with xlashape, the first "
                         "layer of a convolutional network on 8 RGB 64x64 images; "
                         "--example-path prints where it is)", ""])
    elif args.path is None:
        raise UsageError("give a PATH (an HLO file, a dump directory, an out-of-memory report, "
                         "or - for standard input), or --example")
    else:
        path = args.path

    on_warning = WarningPrinter(args.max_warnings)   # printed as they come
    temporary = None
    display = display or path
    if path == "-":
        temporary = path = spool_stdin()
        display = "<stdin>"
    try:
        if not os.path.exists(path):
            raise FileNotFoundError(2, "no such file or directory", display)
        size = os.path.getsize(path) if os.path.isfile(path) else None
        big = size is None or size >= _PROGRESS_MIN_BYTES
        progress = _Progress(not args.no_progress and big and sys.stderr.isatty())
        try:
            # a Path: whatever its name, it is a file (hlo_module.source_kind)
            result = analyze(pathlib.Path(path), top=args.top, chip=args.chip,
                             platform=args.platform, prefer="proto" if args.proto else "text",
                             on_warning=on_warning, progress=progress, dump=args.dump)
        except (OSError, XlaShapeError) as e:
            if temporary is None:
                raise
            raise renamed(e, temporary, display) from None
        finally:
            progress.done()
            on_warning.summary("warning")
        if args.dump is not None and not any(m.source == "oom" and m.platform == "gpu"
                                             for m in result.modules):
            raise UsageError("--dump DIR goes with an XLA:GPU out-of-memory error (it names the "
                             "buffers of the size the allocator could not find); "
                             f"{display} holds none")
        if display != path:
            relabel(result, path, display)
        modules = result.modules
        if args.module is not None:
            modules = [m for m in modules if m.name is not None and args.module in m.name]
            if not modules:
                names = sorted({m.name for m in result.modules if m.name})
                raise UsageError(f"no module named like {args.module!r}; the input has "
                                 + (", ".join(names[:20]) + (" ..." if len(names) > 20 else "")
                                    if names else "no named modules"))
        verdicts = _verdicts(spec, modules)
        if args.html is not None:
            with open(args.html, "w", encoding="utf-8") as f:
                write_html(f, modules, title=display, verdicts=verdicts,
                           resolve=lambda p: path + p[len(display):]
                           if display != path and p.startswith(display) else p)
        if args.png is not None or args.svg is not None:
            _pictures(args, modules)
        if args.json:
            _write_json(modules, verdicts)
        else:
            _write_text(result, modules, display, args.top, verdicts)
        if most is not None:
            over = [(m, module_peak(m)) for m in modules]
            over = [(m, p) for m, p in over if p is not None and p[0] > most]
            if over:
                for m, p in over:
                    warn(f"{m.name or '?'}: peak {fmt_bytes(p[0])} ({p[1]} {p[0]}) exceeds "
                         f"--max-peak {args.max_peak}")
                return 1
        return 0
    finally:
        if temporary is not None:
            os.unlink(temporary)


def _limit_of(args):
    """``(bytes, name)`` from --limit / --device / --chip, or ``None``."""
    if args.limit is not None:
        return parse_size(args.limit), f"--limit {args.limit}"
    if args.device is not None or args.chip is not None:
        d = lookup(args.device if args.device is not None else args.chip)
        return usable_bytes(d), d.name + (f" ({fmt_bytes(d.memory_bytes)}, jax's 75%)"
                                          if d.platform == "gpu" and d.basis == "estimated" else "")
    return None


def _pictures(args, modules) -> None:
    m = picture_module(modules)
    if m is None:
        raise UsageError("--png/--svg draw the heap over program order, which needs a dump's "
                         "buffer assignment and live ranges (XLA_FLAGS=--xla_dump_to=DIR); "
                         "this input has none")
    for path, fmt in ((args.png, "png"), (args.svg, "svg")):
        if path is not None:
            try:
                save_memory_picture(m, path, fmt)
            except MissingMatplotlib as e:
                raise UsageError(str(e)) from None


def _verdicts(spec, modules) -> dict:
    """``id(module) -> Verdict`` against ``spec`` (from :func:`_limit_of`)."""
    if spec is None:
        return {}
    limit, name = spec
    out = {}
    for m in modules:
        v = judge(m, limit, name)
        if v is not None:
            out[id(m)] = v
    return out


def _write_json(modules, verdicts=None) -> None:
    """``{"modules": [...]}``, each module's allocations streamed one by one
    (a dump's buffer assignment is read again for them, never held whole)."""
    out = sys.stdout.write
    # a log's superseded out-of-memory reports after the one that counts
    modules = [m for m in modules if not m.superseded] + [m for m in modules if m.superseded]
    out('{"modules": [')
    for i, m in enumerate(modules):
        head = dict(m.header_json())
        head.update(m.extra_json())
        v = (verdicts or {}).get(id(m))
        head["verdict"] = v.to_json() if v is not None else None
        text = json.dumps(head, ensure_ascii=True)
        out(("\n" if i == 0 else ",\n") + text[:-1] + ', "allocations": [')
        first = True
        for a in m.iter_allocations():
            out(("\n  " if first else ",\n  ") + json.dumps(a.to_json(), ensure_ascii=True))
            first = False
        out("]}")
    out("\n]}\n")


# -- text -------------------------------------------------------------------------------


def _size(n) -> str:
    return "-" if not n else fmt_bytes(n)


def _write_text(result, modules, display: str, top: int, verdicts=None) -> None:
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
            out.extend(_oom_text(m, top))
        else:
            out.extend(_module_text(m, top))
        v = (verdicts or {}).get(id(m))
        if v is not None:
            out.append(_verdict_line(v))
    write_lines(out)


def _verdict_line(v) -> str:
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
        out.append(_LIVE.header().rstrip())
        for b in shown:
            live = "whole program" if b.start is None else f"{b.start}-{b.end}"
            out.append(_LIVE.format(fmt_bytes(b.size), _size(b.padding), b.kind, f"S({b.color})", live,
                                    _clip(b.label, 30), _clip(b.op_name or "", 44),
                                    _clip(b.source or "", 30)).rstrip())
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


def _module_text(m, top: int) -> List[str]:
    out = []
    where = {"hlo": "HLO text", "dump": "XLA dump", "jax": "a JAX compiled object"}.get(m.source, m.source)
    bits = [where]
    if m.source == "dump":
        bits.append("buffer assignment read" if m.allocation_count
                    else "no buffer assignment: figures from the module text")
        if not m.optimized:
            bits.append("before optimizations")
    if getattr(m, "from_proto", False):
        bits.append("read from XLA's protobuf")
    platform = {"tpu": "TPU (tiled layouts)", "cpu": "CPU", "gpu": "GPU"}.get(m.platform or "")
    if platform:
        bits.append(platform)
    out.append(f"module {m.name or '?'} ({', '.join(bits)})")
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
    if m.source == "dump":
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
        out.append(f"memory_analysis() of the compiled object: {theirs}")
    for k, why in m.reasons.items():
        out.extend(_wrapped(f"{k} is null: {why}"))
    if m.hbm_temp_allocation_bytes is not None:
        out.append(f"  hbm_temp_allocation_bytes {m.hbm_temp_allocation_bytes} (xlashape's figure: the "
                   "buffer assignment's preallocated temporaries in device memory, S(0))")
    if m.largest and top:
        out.append("largest allocations:")
        for rank, a in enumerate(m.largest, 1):
            out.extend(_allocation_lines(rank, a, numbered=m.source == "dump"))
    ps = getattr(m, "padding_summary", None)
    if m.padding_wasters and top:
        out.append("most padding" + (f" ({ps.text})" if ps is not None else "") + ":")
        for rank, a in enumerate(m.padding_wasters, 1):
            out.extend(_allocation_lines(rank, a, explain=True, numbered=m.source == "dump"))
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
                 ", as the allocator rounded it" if "rounded" in " ".join(
                     getattr(m, "_gpu_report").messages) else ", from the rounded figure") + ")")
    out = [f"XLA:GPU out-of-memory error{'' if not m.name else ' in ' + m.name}"]
    if o.requested_text is not None:
        out.append(f"  request that failed: {size}{where}"
                   + (" (XLA's autotuner)" if o.origin == "autotuner" else ""))
    if o.limit is not None:
        out.append(f"  memory limit: {fmt_bytes(o.limit)} ({o.limit} bytes, from "
                   f"{o.memory_limit_source})")
    r = getattr(m, "_gpu_report", None)
    if r is not None and r.remat is not None:
        rm = r.remat
        out.append("  XLA's rematerialization: the program needs "
                   + (f"{fmt_bytes(rm.reduced_to_bytes)}" if rm.reduced_to_bytes is not None else "?")
                   + (f" (down from {fmt_bytes(rm.original_bytes)})"
                      if rm.original_bytes not in (None, rm.reduced_to_bytes) else "")
                   + (f", it aimed at {fmt_bytes(rm.target_bytes)}" if rm.target_bytes else ""))
    if r is not None and r.in_use_bytes is not None:
        out.append(f"  in use in the allocator when it failed: {fmt_bytes(r.in_use_bytes)}")
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


def _oom_text(m, top: int) -> List[str]:
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
