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
import sys
import tempfile
import time
from typing import List, Optional

from ._common import (PROG, UsageError, WarningPrinter, add_command, at_least, int64,
                      spool_stdin, warn)
from ._hlo_json import json_row, operand_names_or_warn, operands_or_warn, write_rows
from ._output import CsvWriter, JsonArrayWriter, Table, write_lines
from ._sizes import fmt_bytes
from ..hlo_module import (OOM_REPORT, Footprint, HloReader, TextBlocks,
                          memory_footprint, open_text, scan_calls, shape_text,
                          uses_compiled_scanner)
from ..layout import memory_space_name
from ..oom_report import (BREAKDOWN_HINT, distinct_reports, looks_like_oom_report, parse_size,
                          read_oom_reports)

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
        return _run(args, path, source_name, total, on_warning, warnings)
    finally:
        if temporary is not None:
            os.unlink(temporary)


def _run(args, path, source_name, total, on_warning, warnings) -> int:
    only_report, report_note = _oom_input(path, source_name)
    big = total is None or total >= _PROGRESS_MIN_BYTES
    show_progress = not args.no_progress and big and sys.stderr.isatty()
    call_kinds = scan_calls(pathlib.Path(path), progress=_scan_progress(total) if show_progress else None)
    stream = open_text(path)
    progress = _Progress(stream, total, enabled=show_progress)
    lines = TextBlocks(stream, progress.update if show_progress else None)
    reader = HloReader(on_warning, call_kinds=call_kinds, streaming=True)
    summary = HloSummary(args.top)
    mode = "json" if args.json else "csv" if args.csv else "text"
    csvw = jsonw = None
    if mode == "csv":
        csvw = CsvWriter(_CSV_HEADER + (["operands", "attributes"] if args.details else []))
    elif mode == "json":
        jsonw = JsonArrayWriter()
    last_comp = object()
    show_table = mode != "text" or not args.summary
    instructions = reader.read(lines)
    if only_report is not None:
        instructions = (i for i in instructions if i.attributes.get("report") == only_report)
    try:
        if mode == "json" and not args.details and only_report is None:
            write_rows(reader, lines, summary, jsonw, on_warning, _ALIASED_ELEMENT,
                       compiled=uses_compiled_scanner())
            return _finish(args, reader, summary, jsonw, warnings, source_name, mode, show_table)
        for ins in instructions:
            fp = memory_footprint(ins.shape)
            if ins.computation == OOM_REPORT and ins.shape.is_tuple:
                fp = _tuple_table_footprint(ins, fp)
            summary.add(ins, fp, ins.result)
            if not show_table:
                continue
            waste = None if fp.bytes is None else fp.padded_bytes - fp.bytes
            if mode == "text":
                if ins.computation != last_comp:
                    last_comp = ins.computation
                    if ins.computation is None:
                        title = "instructions outside any computation"
                    elif ins.computation == OOM_REPORT:
                        title = "allocations listed in the out-of-memory report"
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
                lines = []
                if ins.computation == OOM_REPORT:
                    a = ins.attributes
                    bits = [f"{k.replace('_', ' ')} {a[k]}" for k in ("size", "unpadded_size", "allocation_type")
                            if k in a]
                    if bits:
                        lines.append(f"  {'':<28} report: " + ", ".join(bits))
                elif args.details:
                    ops = operands_or_warn(ins, on_warning)
                    if ops is None:
                        lines.append(f"      operands: {ins.operands_text.strip()}")
                    elif not ops and ins.opcode == "parameter":
                        lines.append(f"      parameter number: {ins.argument}")
                    elif not ops and ins.opcode == "constant":
                        lines.append(f"      literal: {ins.argument}")
                    elif ops or ins.argument:
                        text = ", ".join(f"{shape_text(o.shape)} %{o.name}" if o.shape is not None
                                         else f"%{o.name}" for o in ops) or ins.argument
                        lines.append(f"      operands: {text}")
                    if ins.attributes_text:
                        lines.append(f"      attributes: {ins.attributes_text}")
                if lines:
                    write_lines(lines)
            elif mode == "csv":
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
                jsonw.raw(json_row(ins, fp, waste, args.details, on_warning))
    finally:
        progress.done()
        stream.close()
    return _finish(args, reader, summary, jsonw, warnings, source_name, mode, show_table,
                   report_note)


def _tuple_table_footprint(ins, fp):
    """A tuple-shaped allocation of an out-of-memory report is the tuple's
    table of pointers, not its elements (those are allocations of their
    own): the size the report prints, unpadded as it prints it (else 8 bytes
    an element)."""
    padded = parse_size(ins.attributes.get("size"))
    if padded is None:
        return fp
    unpadded = parse_size(ins.attributes.get("unpadded_size"))
    if unpadded is None:
        unpadded = min(8 * len(ins.shape.tuple_shapes), padded)
    return Footprint(unpadded, padded, 0, ((0, unpadded, padded),), None)


def _oom_input(path: str, source_name: str):
    """For an out-of-memory report: ``(report, note)``, the number of the
    report whose allocations to list (the one that counts, see
    :func:`xlashape.oom_report.counted_report`: a libtpu log holds one report
    per allocation attempt, and adding them all up counts the program
    several times) and a line saying so; ``(None, None)`` for HLO. A report
    that lists no allocations (TPU's two-line exception, XLA:GPU's errors) is
    a usage error pointing to ``xlashape memory``, which reads its totals."""
    with open_text(path) as f:
        head = f.read(1 << 16)
    if not looks_like_oom_report(head) or "HloModule" in head or "ENTRY " in head:
        return None, None
    with open_text(path) as f:
        reports = read_oom_reports(f)
    listed = [r for r in distinct_reports(reports) if r.allocations]
    target = "- < (the same input)" if source_name == "<stdin>" else source_name
    if not listed:
        if not reports:
            return None, None
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
    number = chosen.allocations[0].report
    note = None
    total = len(distinct_reports([r for r in reports if r.platform == "tpu"]))
    if total > 1:
        note = (f"the last of {total} reports in this log (libtpu reports each allocation it "
                f"tries; the earlier ones are left out, adding them up would count the "
                f"program more than once): report at line {chosen.line}")
    return number, note


def _finish(args, reader, summary, jsonw, warnings, source_name, mode, show_table,
            report_note=None) -> int:
    if jsonw is not None:
        jsonw.close()
    warnings.summary("skipped line")
    if summary.count == 0:
        raise UsageError(f"no HLO instructions or out-of-memory allocations found in {source_name}"
                         + (f" ({warnings.total} lines skipped)" if warnings.total else ""))
    if mode == "text":
        head = []
        if reader.module_name:
            head.append(f"module {reader.module_name}: ")
        ncomp = reader.computation_count
        n = summary.count
        head.append(f"{n} instruction{'s' if n != 1 else ''}" if reader.mode != "oom"
                    else f"{n} allocation{'s' if n != 1 else ''} from an out-of-memory report")
        if ncomp:
            head.append(f" in {ncomp} computation{'s' if ncomp != 1 else ''}")
        head.append(f", {reader.lines_read} line{'s' if reader.lines_read != 1 else ''}")
        skipped = reader.warnings.total
        if skipped:
            head.append(f", {skipped} line{'s' if skipped != 1 else ''} skipped")
        if warnings.total > skipped:
            head.append(f", {warnings.total - skipped} other warning"
                        + ("s" if warnings.total - skipped != 1 else ""))
        write_lines(([""] if show_table else []) + ["".join(head)]
                    + ([report_note] if report_note else []) + summary.report())
    elif report_note:
        warn(report_note)
    return 0


def _scan_progress(total):
    def show(done):
        msg = f"{done / 1e6:.1f} of {total / 1e6:.1f} MB" if total else f"{done / 1e6:.1f} MB"
        sys.stderr.write(f"\r{PROG}: finding how computations are called: {msg} ")
        sys.stderr.flush()
    return show
