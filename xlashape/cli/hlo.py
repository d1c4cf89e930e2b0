"""``xlashape hlo FILE|-``: every instruction of an HLO module (or every
allocation of a TPU out-of-memory report: of a libtpu log holding several, the
last; an error that lists no buffers, TPU's two-line one or XLA:GPU's, points
to ``xlashape memory``) with its shape, logical and padded
bytes, padding waste and memory space, how its computation is used (entry,
fusion body, reducer, while body, ...) and whether its result is a new
buffer or a view of another; totals per memory space (new buffers only) and
the top N buffers by padding waste.

Streams: a dump of any size is read in two passes over the file, the first
(fast, a few regular expressions over big blocks) to learn how each
computation is used, since XLA prints a computation before its callers.
Standard input is first copied to a temporary file for that."""

from __future__ import annotations

import heapq
import os
import pathlib
import re
import sys
import tempfile
import time
from typing import List, NamedTuple, Optional

from ._common import (PROG, UsageError, WarningPrinter, add_command, at_least, int64,
                      spool_stdin, warn)
from ._hlo_json import json_row, operand_names_or_warn, operands_or_warn, write_rows
from ._output import CsvWriter, JsonArrayWriter, Table, write_lines
from ._sizes import fmt_bytes
from ..hlo_module import (Footprint, HloReader, TextBlocks, has_data, memory_footprint, open_text,
                          scan_calls, shape_text, uses_compiled_scanner)
from ..layout import memory_space_name
from ..oom_report import (BREAKDOWN_HINT, OOM_REPORT, distinct_reports, looks_like_oom_report,
                          parse_size, read_oom_reports)

NAME = "hlo"

_PROGRESS_MIN_BYTES = 16 << 20

# The instruction table of the text output, and the totals table.
_ROWS = Table([("name", 28, "<"), ("opcode", 18, "<"), ("result", 8, "<"), ("bytes", 9, ">"),
               ("padded", 9, ">"), ("waste", 9, ">"), ("mem", 4, ">"), ("shape", 0, "<")],
              indent="  ")
_TOTALS = Table([("memory space", 42, "<"), ("buffers", 7, ">"), ("bytes", 9, ">"),
                 ("padded", 9, ">"), ("waste", 9, ">")], indent="  ")
_CSV_HEADER = ["computation", "name", "opcode", "shape", "bytes", "padded_bytes",
               "waste", "memory_space", "line", "computation_kind", "result", "operand_names"]

# How the text output names a computation kind in a computation's title.
_KIND_TEXT = {
    "entry": "the entry computation",
    "fusion": "a fusion body: its values live inside the fusion, not in memory",
    "to_apply": "a reducer / comparator / map function: runs inside its caller, not in memory",
    "custom_call": "called by a custom-call: runs inside it, not in memory",
    "while_body": "a while loop's body",
    "while_condition": "a while loop's condition",
    "conditional_branch": "a branch of a conditional",
    "call": "called by a call",
    "async": "wrapped by an asynchronous start/done pair",
    "called": "called",
}

# Start instructions whose tuple result holds an operand's buffer (element
# 0; element 1 for copy-start) besides the buffers they allocate.
_ALIASED_ELEMENT = {"copy-start": 1, "all-gather-start": 0, "collective-permute-start": 0,
                    "async-start": 0, "send": 0}


def add_parser(subparsers):
    p = add_command(
        subparsers, NAME,
        "Read an HLO module (a dump file, or - for stdin) or the text of a TPU "
        "out-of-memory error, and report every instruction's shape, logical and padded "
        "bytes, padding waste and memory space, with totals and the top N by waste",
        f"{PROG} hlo module.after_optimizations.txt --top 5\n"
        f"  {PROG} hlo - --json < oom_message.txt")
    p.add_argument("file", metavar="FILE", help="HLO text file (.gz ok), or - for stdin")
    fmt = p.add_mutually_exclusive_group()
    fmt.add_argument("--json", action="store_true",
                     help="print a JSON list of instructions (computation, name, opcode, shape, "
                          "bytes, padded_bytes, waste, memory_space, line, ...)")
    fmt.add_argument("--csv", action="store_true", help="print CSV rows (header first)")
    p.add_argument("--top", type=int64, default=10, metavar="N",
                   help="list the N values with the most padding waste (default 10; 0: none)")
    p.add_argument("--summary", action="store_true",
                   help="print only the totals and the top N, not every instruction")
    p.add_argument("--details", action="store_true",
                   help="also give each instruction's operands (with their shapes when written "
                        "inline) and attributes (kind=, calls=, metadata={...}, ...)")
    p.add_argument("--max-warnings", type=int64, default=20, metavar="N",
                   help="print at most N skipped-line warnings (default 20; 0: none)")
    p.add_argument("--no-progress", action="store_true", help="never print progress")
    return p


class _Progress:
    """Counts characters read; on a terminal, prints progress for big inputs."""

    def __init__(self, lines, total: Optional[int], enabled: bool):
        self.lines = lines
        self.total = total
        self.enabled = enabled
        self.read = 0
        self.shown = False

    def __iter__(self):
        if not self.enabled:
            yield from self.lines
            return
        last = time.monotonic()
        n = 0
        for line in self.lines:
            self.read += len(line)
            n += 1
            if n & 0x3FFF == 0:
                now = time.monotonic()
                if now - last > 0.5:
                    last = now
                    mb = self.read / 1e6
                    if self.total:
                        msg = f"{mb:.1f} of {self.total / 1e6:.1f} MB ({100 * self.read / self.total:.0f}%)"
                    else:
                        msg = f"{mb:.1f} MB"
                    sys.stderr.write(f"\r{PROG}: reading {msg} ")
                    sys.stderr.flush()
                    self.shown = True
            yield line

    def update(self, done: int) -> None:
        """Characters read so far (the TextBlocks callback)."""
        if not self.enabled:
            return
        self.read = done
        now = time.monotonic()
        if now - self._last > 0.5:
            self._last = now
            mb = done / 1e6
            if self.total:
                msg = f"{mb:.1f} of {self.total / 1e6:.1f} MB ({100 * done / self.total:.0f}%)"
            else:
                msg = f"{mb:.1f} MB"
            sys.stderr.write(f"\r{PROG}: reading {msg} ")
            sys.stderr.flush()
            self.shown = True

    _last = 0.0

    def done(self):
        if self.shown:
            sys.stderr.write("\r" + " " * 60 + "\r")
            sys.stderr.flush()


def _without_aliased_element(opcode, shape, fp):
    """The footprint of a start instruction's tuple without the element that
    is its operand's buffer."""
    aliased = _ALIASED_ELEMENT[opcode]
    acc = {}
    for i, sub in enumerate(shape.tuple_shapes):
        if i == aliased:
            continue
        for sp, b, pb in memory_footprint(sub).by_space:
            a = acc.setdefault(sp, [0, 0])
            a[0] += b
            a[1] += pb
    by_space = tuple((sp, b, pb) for sp, (b, pb) in sorted(acc.items()))
    return Footprint(sum(b for _, b, _ in by_space), sum(pb for _, _, pb in by_space),
                     by_space[0][0] if len(by_space) == 1 else None, by_space)


class HloSummary:
    """Totals per memory space of the results XLA allocates new buffers for
    (:attr:`~xlashape.hlo_module.Instruction.result` ``"buffer"``), and the
    top buffers by padding waste. Views (tuples, get-tuple-elements,
    bitcasts, loop and call results, parameters of called computations) and
    the values of fusion bodies and reducers are counted apart."""

    def __init__(self, top: int):
        self.top = top
        self.totals = {}      # space -> [bytes, padded, count]
        self.per_shape = {}   # id(shape) -> [shape, footprint, count]
        self.heap = []        # (waste, -seq, record)
        self.count = 0
        self.unknown = 0
        self.views = 0
        self.embedded = 0
        self.tokens = 0
        # [the last computation an embedded value was counted in, how many]:
        # computations come one after the other, so counting the changes
        # counts them without keeping their names (shared with the C writer)
        self.embedded_state = [None, 0]
        self._seq = 0

    def add(self, ins, fp, result: str) -> None:
        self.count += 1
        if result != "buffer":
            if result == "view":
                self.views += 1
            elif result == "embedded":
                self.embedded += 1
                st = self.embedded_state
                if st[0] is not ins.computation_object:
                    st[0] = ins.computation_object
                    st[1] += 1
            else:
                self.tokens += 1
            return
        if fp.bytes is None:
            self.unknown += 1
            return
        shape = ins.shape
        if ins.opcode in _ALIASED_ELEMENT and shape.is_tuple:
            fp = _without_aliased_element(ins.opcode, shape, fp)
            for sp, b, pb in fp.by_space:
                acc = self.totals.setdefault(sp, [0, 0, 0])
                acc[0] += b
                acc[1] += pb
                acc[2] += 1
        else:
            rec = self.per_shape.get(id(shape))
            if rec is None or rec[0] is not shape:
                rec = self.per_shape[id(shape)] = [shape, fp, 0]
            rec[2] += 1
            if fp.padded_bytes == fp.bytes:
                return
        waste = fp.padded_bytes - fp.bytes
        if waste > 0 and self.top > 0:
            heap = self.heap
            if len(heap) < self.top or waste >= heap[0][0]:
                self._seq += 1
                item = (waste, -self._seq, (ins.computation, ins.name, ins.opcode, shape,
                                            fp.bytes, fp.padded_bytes, ins.line))
                if len(heap) < self.top:
                    heapq.heappush(heap, item)
                elif item > heap[0]:
                    heapq.heapreplace(heap, item)

    def _fold(self) -> None:
        """Add the per-shape counts into the totals."""
        for shape, fp, count in self.per_shape.values():
            for sp, b, pb in fp.by_space:
                acc = self.totals.setdefault(sp, [0, 0, 0])
                acc[0] += b * count
                acc[1] += pb * count
                acc[2] += count
        self.per_shape = {}

    def report(self) -> List[str]:
        self._fold()
        out = ["totals per memory space (new buffers, each counted once; XLA also reuses "
               "memory between buffers not live together: see 'xlashape memory'):",
               _TOTALS.header()]
        for sp in sorted(self.totals):
            b, pb, c = self.totals[sp]
            out.append(_TOTALS.format(f"S({sp}) " + memory_space_name(sp), c, fmt_bytes(b),
                                      fmt_bytes(pb), fmt_bytes(pb - b)))
        if not self.totals:
            out.append("  (no buffers)")
        left = []
        if self.views:
            left.append(f"{self.views} view{'s' if self.views != 1 else ''} of other buffers "
                        "(tuples, get-tuple-elements, bitcasts, loop/call results, parameters "
                        "of called computations)")
        if self.embedded:
            n = self.embedded_state[1]
            what = ("fusion body / reducer computation" if n == 1
                    else "fusion bodies / reducer computations")
            left.append(f"{self.embedded} value{'s' if self.embedded != 1 else ''} in {n} {what} "
                        "(not materialized in memory)")
        if self.tokens:
            left.append(f"{self.tokens} token{'s' if self.tokens != 1 else ''} (no data)")
        if left:
            out.append("  left out: " + "; ".join(left))
        items = sorted(self.heap, reverse=True)[: self.top]
        if items:
            out.append(f"top {len(items)} by padding waste:")
            for rank, (waste, _, rec) in enumerate(items, 1):
                comp, name, opcode, shape, b, pb, line = rec
                where = f"{comp}, line {line}" if comp else f"line {line}"
                exp = f"{pb / b:.1f}x" if b else "inf"
                out.append(f"  {rank:>2}. {name} = {opcode} ({where}): waste {fmt_bytes(waste)}, "
                           f"{fmt_bytes(b)} -> {fmt_bytes(pb)} ({exp})")
                out.append(f"      {shape}")
        elif self.top > 0:
            out.append("no padding waste found")
        if self.unknown:
            out.append(f"{self.unknown} values of unknown size (unbounded '?' dimensions or "
                       "invalid layouts) are not counted")
        return out


def open_input(file: str, no_progress: bool):
    """``(path, display name, size, temporary file or None)`` for FILE:
    standard input (``-``) is first copied to a temporary file, so it can be
    read twice as a file can. Refuses a directory with a clear message."""
    if file == "-":
        spooled = spool_stdin()
        return spooled, "<stdin>", os.path.getsize(spooled), spooled
    if os.path.isdir(file):
        raise UsageError(f"{file} is a directory; 'hlo' reads one module file "
                         "(for a dump directory use 'xlashape memory')")
    if file.endswith((".hlo.pb", ".hlo.pb.gz")) and os.path.isfile(file):
        # XLA's HloProto: read it, then go on with its text (imported here:
        # protobuf's runtime is loaded only for such a file)
        from ..hlo_proto import read_hlo_proto_module

        text = read_hlo_proto_module(file).to_text()
        tmp = tempfile.NamedTemporaryFile("w", prefix="xlashape-proto-", suffix=".txt",
                                          delete=False, encoding="utf-8")
        try:
            tmp.write(text)
        finally:
            tmp.close()
        return tmp.name, file, os.path.getsize(tmp.name), tmp.name
    try:
        size = os.path.getsize(file)
    except OSError:
        size = None
    return file, file, size, None


def _refuse_binary(path: str, name: str) -> None:
    try:
        with open_text(path) as f:
            head = f.read(1 << 16)
    except (OSError, EOFError) as e:
        if isinstance(e, FileNotFoundError):
            raise
        raise UsageError(f"{name} cannot be read: {e}") from None
    if "\0" in head:
        raise UsageError(f"{name} is a binary file, not HLO text or an out-of-memory report")


def run(args) -> int:
    if args.json and args.csv:
        raise UsageError("choose one of --json and --csv")
    at_least(args.top, 0, "--top")
    at_least(args.max_warnings, 0, "--max-warnings", " (0 shows none)")

    warnings = on_warning = WarningPrinter(args.max_warnings)   # printed as they come
    path, source_name, total, temporary = open_input(args.file, args.no_progress)
    try:
        _refuse_binary(path, source_name)
        report = _oom_input(path, source_name, on_warning)
        if report is not None:
            return _run_report(args, report, source_name, warnings)
        return _run(args, path, source_name, total, on_warning, warnings)
    finally:
        if temporary is not None:
            os.unlink(temporary)


def _run(args, path, source_name, total, on_warning, warnings) -> int:
    big = total is None or total >= _PROGRESS_MIN_BYTES
    show_progress = not args.no_progress and big and sys.stderr.isatty()
    call_kinds = scan_calls(pathlib.Path(path), progress=_scan_progress(total) if show_progress else None)
    stream = open_text(path)
    progress = _Progress(stream, total, enabled=show_progress)
    lines = TextBlocks(stream, progress.update if show_progress else None)
    reader = HloReader(on_warning, call_kinds=call_kinds, streaming=True)
    summary = HloSummary(args.top)
    mode = _mode(args)
    show_table = mode != "text" or not args.summary
    try:
        if mode == "json" and not args.details:
            jsonw = JsonArrayWriter()
            write_rows(reader, lines, summary, jsonw, on_warning, _ALIASED_ELEMENT,
                       compiled=uses_compiled_scanner())
        else:
            jsonw = _list(args, mode, show_table, summary, reader.read(lines), on_warning)
    finally:
        progress.done()
        stream.close()
    return _finish(args, summary, jsonw, warnings, source_name, mode, show_table,
                   module_name=reader.module_name, computations=reader.computation_count,
                   lines=reader.lines_read, skipped=reader.warnings.total)


def _mode(args) -> str:
    return "json" if args.json else "csv" if args.csv else "text"


def _list(args, mode, show_table, summary, rows, on_warning, reports=False):
    """Write the rows of ``rows`` (instructions; with ``reports``, the
    :class:`_ReportRow` of a report) in ``mode`` (``text``, ``csv``,
    ``json``), adding each to ``summary``; the JSON writer to close (None
    for the others)."""
    csvw = jsonw = None
    if mode == "csv":
        csvw = CsvWriter(_CSV_HEADER + (["operands", "attributes"] if args.details else []))
    elif mode == "json":
        jsonw = JsonArrayWriter()
    last_comp = object()
    for ins in rows:
        report = ins.report if reports else None
        fp = memory_footprint(ins.shape)
        if report is not None and ins.shape.is_tuple:
            fp = _tuple_table_footprint(ins.allocation, fp)
        summary.add(ins, fp, ins.result)
        if not show_table:
            continue
        waste = None if fp.bytes is None else fp.padded_bytes - fp.bytes
        if mode == "text":
            if ins.computation != last_comp:
                last_comp = ins.computation
                if report is not None:
                    title = "allocations listed in the out-of-memory report"
                elif ins.computation is None:
                    title = "instructions outside any computation"
                else:
                    kind = ins.computation_kind     # "entry" for the ENTRY computation
                    title = ("ENTRY computation " if kind == "entry"
                             else "computation ") + ins.computation
                    if kind is not None and kind != "entry":
                        title += f" ({_KIND_TEXT.get(kind, kind)})"
                write_lines([title, _ROWS.header()])
            sp = "-" if fp.memory_space is None else str(fp.memory_space)
            if fp.memory_space is None and len(fp.by_space) > 1:
                sp = "mix"
            root = "ROOT " if ins.is_root else ""
            _ROWS.row(root + ins.name, ins.opcode, ins.result, fmt_bytes(fp.bytes),
                      fmt_bytes(fp.padded_bytes), fmt_bytes(waste), sp, shape_text(ins.shape))
            out = []
            if report is not None:
                bits = [f"{k.replace('_', ' ')} {report[k]}"
                        for k in ("size", "unpadded_size", "allocation_type") if k in report]
                if bits:
                    out.append(f"  {'':<28} report: " + ", ".join(bits))
            elif args.details:
                ops = operands_or_warn(ins, on_warning)
                if ops is None:
                    out.append(f"      operands: {ins.operands_text.strip()}")
                elif not ops and ins.opcode == "parameter":
                    out.append(f"      parameter number: {ins.argument}")
                elif not ops and ins.opcode == "constant":
                    out.append(f"      literal: {ins.argument}")
                elif ops or ins.argument:
                    text = ", ".join(f"{shape_text(o.shape)} %{o.name}" if o.shape is not None
                                     else f"%{o.name}" for o in ops) or ins.argument
                    out.append(f"      operands: {text}")
                if ins.attributes_text:
                    out.append(f"      attributes: {ins.attributes_text}")
            if out:
                write_lines(out)
        elif mode == "csv":
            if report is not None:
                names = ()        # an allocation has no operands, nor attributes text
                row = [ins.computation, ins.name, ins.opcode, shape_text(ins.shape), fp.bytes,
                       fp.padded_bytes, waste, fp.memory_space, ins.line, None, ins.result, ""]
                if args.details:
                    row += ["", ""]
            else:
                names = operand_names_or_warn(ins, on_warning)
                row = [ins.computation or "", ins.name, ins.opcode, shape_text(ins.shape),
                       fp.bytes, fp.padded_bytes, waste, fp.memory_space, ins.line,
                       ins.computation_kind, ins.result,
                       None if names is None else " ".join(names)]
                if args.details:
                    ops = operands_or_warn(ins, on_warning)
                    row.append(ins.operands_text.strip() if ops is None
                               else " ".join(o.name for o in ops))
                    row.append(ins.attributes_text)
            csvw.row(row)
        else:
            jsonw.raw(json_row(ins, fp, waste, args.details, on_warning, report=report))
    return jsonw


# -- an out-of-memory report ---------------------------------------------------------

# what an XLA label names: "broadcast.3115 = broadcast(param.7), ..." (the
# result shape may come between "=" and the opcode)
_LABEL = re.compile(r"%?([A-Za-z_][\w.\-]*)\s*=\s*(?:[^=]*?\s)?([a-z][a-z0-9_\-]*)\(")
# a line of HLO (an instruction) in the head of an input without a header
_HLO_LINE = re.compile(r"(?m)^\s*(?:ROOT\s+)?%?[A-Za-z_][\w.\-]*\s*=\s*[(a-z]")


class _ReportRow:
    """One allocation of an out-of-memory report as a row of the listing: its
    instruction (the one its XLA label names, else ``allocation.N``, N its
    number among the report's allocations with a shape), its shape, the
    line of the report it is on, and the report's own figures (``report``:
    what the JSON rows give under ``"report"``). An allocation is memory
    XLA allocated: its result is ``"buffer"`` (``"none"`` for a token)."""

    __slots__ = ("allocation", "name", "opcode", "shape", "line", "result", "report")
    computation = OOM_REPORT
    computation_object = None
    computation_kind = None
    is_root = False

    def __init__(self, allocation, number: int):
        self.allocation = allocation
        m = _LABEL.match(allocation.label or "")
        self.name, self.opcode = (m.group(1), m.group(2)) if m else (f"allocation.{number}", "")
        self.shape = allocation.shape
        self.line = allocation.line
        self.result = "buffer" if has_data(self.shape) else "none"
        report = {"size": allocation.size_text, "unpadded_size": allocation.unpadded_text,
                  "allocation_type": allocation.allocation_type, "op_name": allocation.op_name,
                  "label": allocation.label}
        report = {k: v for k, v in report.items() if v is not None}
        report["report"] = allocation.report
        self.report = report


class _Report(NamedTuple):
    """The report of an input to list: its rows, the input's lines, how many
    warnings the reading gave, and a line to print about the choice."""

    rows: list
    lines: int
    warnings: int
    note: Optional[str]


def _run_report(args, report: "_Report", source_name: str, warnings) -> int:
    """List the allocations of an out-of-memory report, as rows of the
    module's instructions are listed."""
    summary = HloSummary(args.top)
    mode = _mode(args)
    show_table = mode != "text" or not args.summary
    jsonw = _list(args, mode, show_table, summary, report.rows, warnings, reports=True)
    return _finish(args, summary, jsonw, warnings, source_name, mode, show_table, module_name=None,
                   computations=0, lines=report.lines, skipped=report.warnings,
                   note=report.note, report=True)


def _tuple_table_footprint(allocation, fp):
    """A tuple-shaped allocation of an out-of-memory report is the tuple's
    table of pointers, not its elements (those are allocations of their
    own): the size the report prints, unpadded as it prints it (else 8 bytes
    an element)."""
    padded = parse_size(allocation.size_text)
    if padded is None:
        return fp
    unpadded = parse_size(allocation.unpadded_text)
    if unpadded is None:
        unpadded = min(8 * len(allocation.shape.tuple_shapes), padded)
    return Footprint(unpadded, padded, 0, ((0, unpadded, padded),), None)


def _oom_input(path: str, source_name: str, on_warning) -> Optional[_Report]:
    """The out-of-memory report to list when FILE is one (:class:`_Report`;
    read by :mod:`xlashape.oom_report`, the one reader of that format), or
    None when it is HLO.

    What to read is told from the first 64 KB: HLO when they hold a module
    header, ``ENTRY`` or (without a report) an instruction; a report when
    they look like one (:func:`~xlashape.oom_report.looks_like_oom_report`);
    otherwise (a log whose report, if any, comes later) the whole input is
    read for a report, and is HLO if it holds none.

    Of a log holding several reports, the rows are those of the one that
    counts (see :func:`xlashape.oom_report.counted_report`: a libtpu log
    holds one report per allocation attempt, and adding them all up counts
    the program several times), with a note saying so. A report that lists
    no allocations (TPU's two-line exception, XLA:GPU's errors) is a usage
    error pointing to ``xlashape memory``, which reads its totals."""
    with open_text(path) as f:
        head = f.read(1 << 16)
    if "HloModule" in head or "ENTRY " in head:
        return None
    if not looks_like_oom_report(head) and _HLO_LINE.search(head) is not None:
        return None
    counted = [0]

    def lines(f):
        for counted[0], line in enumerate(f, 1):
            yield line

    seen = [0]

    def warned(w):
        seen[0] += 1
        on_warning(w)

    with open_text(path) as f:
        reports = read_oom_reports(lines(f), on_warning=warned)
    listed = [r for r in distinct_reports(reports) if r.allocations]
    target = "- < (the same input)" if source_name == "<stdin>" else source_name
    if not listed:
        if not reports:
            return None
        r = reports[-1]
        if r.platform == "gpu" and r.autotune is not None:
            what = (f"XLA:GPU's autotuner out-of-memory error (while compiling, each "
                    f"configuration it tried asked for {r.requested_text})")
            hint = ""
        elif r.platform == "gpu":
            what = ((f"XLA:GPU's out-of-memory error (a request of {r.requested_text} failed"
                     + (f" in {r.allocator}" if r.allocator else "") + ")")
                    if r.requested_text else "XLA's rematerialization warning")
            hint = ("; with the dump of the same program (XLA_FLAGS=--xla_dump_to=DIR), "
                    f"'{PROG} memory {target} --dump DIR' also names the buffers of that size"
                    if r.requested_text else "")
        else:
            what = (f"TPU's two-line out-of-memory error (needs {r.used_text} of {r.limit_text})"
                    if r.form == "short" else "an out-of-memory report that lists no allocations")
            hint = f"; {BREAKDOWN_HINT}" if r.form == "short" else ""
        raise UsageError(f"{source_name} is {what}: it lists no buffers to show here; "
                         f"'{PROG} memory {target}' reports what it says{hint}")
    chosen = listed[-1]
    note = None
    total = len(distinct_reports([r for r in reports if r.platform == "tpu"]))
    if total > 1:
        note = (f"the last of {total} reports in this log (libtpu reports each allocation it "
                f"tries; the earlier ones are left out, adding them up would count the "
                f"program more than once): report at line {chosen.line}")
    shaped = [a for a in chosen.allocations if a.shape is not None]
    rows = [_ReportRow(a, k) for k, a in enumerate(shaped, 1)]
    return _Report(rows, counted[0], seen[0], note)


def _finish(args, summary, jsonw, warnings, source_name, mode, show_table, *, module_name,
            computations, lines, skipped, note=None, report=False) -> int:
    if jsonw is not None:
        jsonw.close()
    warnings.summary("skipped line")
    if summary.count == 0:
        raise UsageError(f"no HLO instructions or out-of-memory allocations found in {source_name}"
                         + (f" ({warnings.total} lines skipped)" if warnings.total else ""))
    if mode == "text":
        head = []
        if module_name:
            head.append(f"module {module_name}: ")
        n = summary.count
        head.append(f"{n} allocation{'s' if n != 1 else ''} from an out-of-memory report" if report
                    else f"{n} instruction{'s' if n != 1 else ''}")
        if computations:
            head.append(f" in {computations} computation{'s' if computations != 1 else ''}")
        head.append(f", {lines} line{'s' if lines != 1 else ''}")
        if skipped:
            head.append(f", {skipped} line{'s' if skipped != 1 else ''} skipped")
        if warnings.total > skipped:
            head.append(f", {warnings.total - skipped} other warning"
                        + ("s" if warnings.total - skipped != 1 else ""))
        write_lines(([""] if show_table else []) + ["".join(head)]
                    + ([note] if note else []) + summary.report())
    elif note:
        warn(note)
    return 0


def _scan_progress(total):
    def show(done):
        msg = f"{done / 1e6:.1f} of {total / 1e6:.1f} MB" if total else f"{done / 1e6:.1f} MB"
        sys.stderr.write(f"\r{PROG}: finding how computations are called: {msg} ")
        sys.stderr.flush()
    return show
