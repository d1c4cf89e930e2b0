"""The ``xlashape`` command: answers about XLA shapes and layouts at a terminal.

Subcommands::

    xlashape describe SHAPE        the parts of a shape, its sizes, its tiled dimensions
    xlashape explain SHAPE         why it takes the memory it takes (padding, expansion)
    xlashape show SHAPE            the seeds' pictures: letters, memory order, offsets
    xlashape index SHAPE I,J,...   logical index -> element offset (and --offset N back)
    xlashape hlo FILE|-            every instruction of an HLO dump (or OOM report) with sizes

Exit status: 0 on success, 2 on bad usage or bad input, with one line
``xlashape: error: ...`` on stderr (plus the source line and a caret for a
shape that does not parse).
"""

from __future__ import annotations

import argparse
import csv
import heapq
import json
import os
import re
import sys
import time
from typing import List, Optional, Sequence

from .errors import HloParseError, XlaShapeError

__all__ = ["main"]

PROG = "xlashape"

_INDEX_TEXT = re.compile(r"^\(?\s*-?\d+(\s*,\s*-?\d+)*\s*\)?$")
_EXAMPLE_SHAPE = "bf16[8,1,1280,16384]{3,2,0,1:T(8,128)(2,1)}"


class UsageError(Exception):
    """Bad command-line usage; reported as one line, exit status 2."""


class _Parser(argparse.ArgumentParser):
    """argparse, but a usage error is one line on stderr and exit status 2."""

    def error(self, message):  # noqa: D401 - argparse's hook
        sys.stderr.write(f"{PROG}: error: {message} (see '{self.prog} --help')\n")
        sys.exit(2)


_FMT_CACHE: dict = {}


def _fmt_bytes(n: Optional[int]) -> str:
    """Bytes as XLA's out-of-memory report prints them (``1.00G``); cached,
    since a dump repeats the same sizes many times."""
    if n is None:
        return "?"
    text = _FMT_CACHE.get(n)
    if text is None:
        from .tiling import format_bytes

        if len(_FMT_CACHE) > 1 << 16:
            _FMT_CACHE.clear()
        text = _FMT_CACHE[n] = format_bytes(n)
    return text


# -- shapes from the command line ----------------------------------------------


def _int_list(text: str, what: str) -> List[int]:
    t = text.strip().strip("()[]")
    if not t:
        return []
    out = []
    for part in t.split(","):
        part = part.strip()
        try:
            out.append(int(part))
        except ValueError:
            raise UsageError(f"{what} must be integers separated by commas, got {text!r}") from None
    return out


def _number(text: str):
    try:
        return int(text)
    except ValueError:
        pass
    try:
        return float(text)
    except ValueError:
        raise UsageError(f"--padding-value must be a number, got {text!r}") from None


def _load_shape(args, *, need_array: bool = True, always_warn: bool = False):
    """The SHAPE argument as a Shape, with ``--pad`` / ``--padding-value`` applied."""
    from .hlo_text import parse_shape

    shape = parse_shape(args.shape)
    pad = getattr(args, "pad", None)
    pv = getattr(args, "padding_value", None)
    if pad is not None or pv is not None:
        if not shape.is_array:
            raise UsageError("--pad and --padding-value apply to array shapes only, "
                             f"not to {shape}")
        layout = shape.layout
        changes = {}
        if pad is not None:
            dims = _int_list(pad, "--pad")
            if len(dims) != len(shape.dimensions):
                raise UsageError(
                    f"--pad needs one width per dimension: the shape has "
                    f"{len(shape.dimensions)} dimensions, --pad gives {len(dims)} ({pad})")
            for d, (w, s) in enumerate(zip(dims, shape.dimensions)):
                if w < s:
                    raise UsageError(f"--pad width {w} for dimension {d} is smaller "
                                     f"than its size {s}")
            changes["padded_dimensions"] = tuple(dims)
        if pv is not None:
            changes["padding_value"] = _padding_value(shape, pv)
        shape = shape.with_layout(layout.replace(**changes))
    if need_array and not shape.is_array:
        raise UsageError(f"{shape} is not an array shape; this command needs an array "
                         "(try 'xlashape describe' for tuples, tokens and buffers)")
    _warn_if_invalid(shape, always_warn)
    return shape


def _padding_value(shape, text: str):
    """``--padding-value`` as a number the element type can hold (as the
    Python API demands when it fills the padding), else a UsageError."""
    import math
    import warnings

    import numpy as np

    value = _number(text)
    et = shape.element_type
    dt = et.dtype
    if dt is None:
        return value
    problem = None
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("error")  # numpy warns on float overflow
            stored = np.array(value, dtype=dt)
    except (ValueError, TypeError, OverflowError, RuntimeWarning) as e:
        problem = str(e)
    else:
        if et.is_integral or et.hlo_name == "pred":
            if stored.item() != value:
                problem = f"it would be stored as {stored.item()}"
        elif not et.is_complex and math.isfinite(value) and not math.isfinite(float(stored)):
            problem = f"it would be stored as {float(stored)}"
    if problem is not None:
        raise UsageError(f"--padding-value {text} cannot be held by {et.hlo_name} ({dt}): {problem}")
    return value


def _warn_if_invalid(shape, always: bool = False) -> None:
    """One stderr line if XLA's ShapeUtil::ValidateShape would reject ``shape``;
    the command goes on (its numbers may still help to see why). Unless
    ``always``, nothing is said when the layout cannot even be planned: the
    command then fails with that error itself."""
    from .errors import InvalidShapeError
    from .shape_util import validate_shape

    try:
        validate_shape(shape)
    except InvalidShapeError as e:
        if not always and shape.is_array and not shape.is_unbounded_dynamic:
            from .tiling import plan

            try:
                plan(shape)
            except XlaShapeError:
                return  # the command reports this error itself
        sys.stderr.write(f"{PROG}: warning: XLA would reject this shape: {e}\n")


# -- describe ------------------------------------------------------------------


def _dims_text(shape) -> str:
    from .shape import UNBOUNDED_SIZE

    return "[" + ",".join(_dim_text(shape, i) for i in range(len(shape.dimensions))) + "]"


def _dim_text(shape, i: int) -> str:
    """Dimension ``i`` as XLA prints it: ``?`` unbounded, ``<=N`` bounded dynamic."""
    from .shape import UNBOUNDED_SIZE

    d = shape.dimensions[i]
    if d == UNBOUNDED_SIZE:
        return "?"
    return f"<={d}" if shape.dynamic_dimensions[i] else str(d)


def _describe_array(shape, out: List[str], indent: str = "") -> None:
    from .layout import COMBINE_DIMENSION
    from .shape import UNBOUNDED_SIZE
    from .shape_util import byte_size_of
    from .tiling import plan

    et = shape.element_type
    lay = shape.layout
    def row(key, value):
        out.append(f"{indent}{key:<15} {value}")

    row("shape", str(shape))
    dt = et.dtype
    row("element type", f"{et.hlo_name}: {et.bit_width} bit{'' if et.bit_width == 1 else 's'}, "
        f"{et.byte_width} byte"
        f"{'s' if et.byte_width != 1 else ''} per element unpacked"
        + (f" (numpy {dt})" if dt is not None else " (no numpy dtype)"))
    n = len(shape.dimensions)
    count = 1
    for d in shape.dimensions:
        count *= d if d != UNBOUNDED_SIZE else 1
    dim_desc = ", ".join(f"{i}: {_dim_text(shape, i)}" for i in range(n))
    row("dimensions", f"{_dims_text(shape)}: rank {n}"
        + (f" (dimension {dim_desc})" if n else " (a scalar)")
        + ("" if shape.is_unbounded_dynamic
           else f", {count} element{'' if count == 1 else 's'}"))
    dyn = []
    for i, (d, f) in enumerate(zip(shape.dimensions, shape.dynamic_dimensions)):
        if f:
            dyn.append(f"dimension {i} unbounded (?)" if d == UNBOUNDED_SIZE
                       else f"dimension {i} bounded dynamic, at most {d}")
    row("dynamic", "; ".join(dyn) if dyn else "none (all dimensions static)")
    if lay is None:
        row("layout", "none (XLA would use the default {" + ",".join(map(str, range(n - 1, -1, -1))) + "})")
        return
    m2m = lay.minor_to_major
    row("layout", f"{lay}")
    row("minor_to_major", "{" + ",".join(map(str, m2m)) + "}" + "  (first = most minor: changes fastest in memory)")
    row("major_to_minor", "(" + ",".join(map(str, lay.major_to_minor)) + ")"
        + "  (the order JAX/numpy users think in)")
    if n:
        order = ", ".join(f"dim {d} ({_dim_text(shape, d)})" for d in reversed(m2m)
                          if 0 <= d < n)
        row("memory order", f"major to minor: {order}")
    if lay.tiles:
        row("tiles", "T" + "".join(str(t) for t in lay.tiles))
        try:
            p = plan(shape)
            phys = [d for d in reversed(m2m)]
            for i, lv in enumerate(p.levels):
                parts = []
                for grp, gs, t in zip(lv.groups, lv.group_sizes, lv.tile):
                    if i == 0:
                        names = []
                        for j in grp:
                            a = len(phys) + lv.prepend - lv.k + j - lv.prepend
                            names.append(f"dim {phys[a]}" if 0 <= a < len(phys) else "a new size-1 dim")
                        what = "*".join(names)
                        what = f"{what} ({gs})"
                    else:
                        what = str(gs)
                    parts.append(f"{what} by {t} -> {-(-gs // t)} x {t}")
                tile = "(" + ",".join("*" if x == COMBINE_DIMENSION else str(x)
                                      for x in lay.tiles[i].dimensions) + ")"
                where = "the minor-most physical dims" if i == 0 else "the result of the previous level"
                row(f"  level {i + 1}", f"{tile} on {where}: " + "; ".join(parts))
        except XlaShapeError as e:
            row("  (tiles)", f"cannot apply: {e}")
    if lay.tail_padding_alignment_in_elements != 1:
        row("tail padding", f"L({lay.tail_padding_alignment_in_elements}): element count rounded "
            f"up to a multiple of {lay.tail_padding_alignment_in_elements}")
    bits = lay.element_size_in_bits
    row("element size", f"E({bits}): {bits} bits per element in memory" if bits
        else f"{et.byte_width * 8} bits (the type's byte width; no E(n))")
    row("memory space", f"S({lay.memory_space}): {lay.memory_space_name}")
    if lay.split_configs:
        row("split configs", "SC" + "".join(str(s) for s in lay.split_configs))
    if lay.dynamic_shape_metadata_prefix_bytes:
        row("metadata", f"M({lay.dynamic_shape_metadata_prefix_bytes}): bytes of dynamic-size "
            "metadata before the data (not counted in sizes, as in XLA)")
    if lay.padded_dimensions:
        row("padded dims", f"{list(lay.padded_dimensions)} (seeds' padded_dimensions), "
            f"padding value {lay.padding_value}")
    if shape.is_unbounded_dynamic:
        row("bytes", "unknown: an unbounded dimension (?) has no size")
        return
    logical = byte_size_of(shape)
    row("logical bytes", f"{logical} ({_fmt_bytes(logical)})  ShapeUtil::ByteSizeOf: elements x element size")
    try:
        p = plan(shape)
    except XlaShapeError as e:
        row("physical bytes", f"unknown: {e}")
        return
    phys = p.size_in_bytes
    ratio = f", {phys / logical:.1f}x" if logical else ""
    row("physical bytes", f"{phys} ({_fmt_bytes(phys)})  with all tile padding{ratio}")
    row("physical dims", "[" + ",".join(map(str, p.physical_dimensions)) + "]"
        + f"  (major to minor, after tiling; {p.element_count} slot"
        + ("" if p.element_count == 1 else "s") + ")")


def cmd_describe(args) -> int:
    from .hlo_module import memory_footprint
    from .layout import memory_space_name

    shape = _load_shape(args, need_array=False, always_warn=True)
    out: List[str] = []
    if shape.is_array:
        _describe_array(shape, out)
    elif shape.is_buffer:
        out.append(f"{str(shape):<15} a buffer b(...) holding one array:")
        _describe_array(shape.buffer_shape, out, "  ")
    elif shape.is_token:
        out.append("token[]: an ordering token; it holds no data (0 bytes)")
    elif shape.is_opaque:
        out.append("opaque[]: an opaque handle; its size is the pointer size")
    else:
        fp = memory_footprint(shape)
        leaves = shape.tuple_shapes
        out.append(f"{'shape':<15} {shape}")
        out.append(f"{'tuple':<15} {len(leaves)} elements "
                   f"(XLA keeps a table of {len(leaves)} pointers for the tuple itself)")
        for i, sub in enumerate(leaves):
            sfp = memory_footprint(sub)
            out.append(f"  {{{i}}} {sub}: {_fmt_bytes(sfp.bytes)} logical, "
                       f"{_fmt_bytes(sfp.padded_bytes)} with padding")
        unknown = "unknown: an unbounded dynamic dimension (?) has no size"
        out.append(f"{'logical bytes':<15} " + (unknown if fp.bytes is None else
                   f"{fp.bytes} ({_fmt_bytes(fp.bytes)}) in the arrays"))
        out.append(f"{'physical bytes':<15} " + (unknown if fp.padded_bytes is None else
                   f"{fp.padded_bytes} ({_fmt_bytes(fp.padded_bytes)}) with all tile padding"))
        for sp, b, pb in fp.by_space:
            out.append(f"  S({sp}) {memory_space_name(sp)}: {_fmt_bytes(b)} logical, "
                       f"{_fmt_bytes(pb)} padded")
    print("\n".join(out))
    return 0


# -- explain -------------------------------------------------------------------


def cmd_explain(args) -> int:
    from .tiling import format_bytes, format_expansion, padding_report

    shape = _load_shape(args)
    rep = padding_report(shape)
    if args.json:
        obj = {
            "shape": str(rep.shape),
            "unpadded_bytes": rep.unpadded_bytes,
            "padded_bytes": rep.padded_bytes,
            "expansion": rep.expansion,
            "physical_dimensions": list(rep.physical_dimensions),
            "sources": [
                {k: (list(v) if isinstance(v, tuple) else v) for k, v in (
                    ("kind", s.kind), ("level", s.level), ("dimensions", s.dimensions),
                    ("size", s.size), ("padded_size", s.padded_size), ("factor", s.factor),
                    ("description", s.description))}
                for s in rep.sources],
            "suggestions": [str(s) for s in rep.suggestions],
        }
        if shape.layout.padded_dimensions:
            obj["padded_dimensions"] = list(shape.layout.padded_dimensions)
        print(json.dumps(obj, indent=2))
        return 0
    out = [str(rep.shape)]
    out.append(f"  unpadded size  {format_bytes(rep.unpadded_bytes)} ({rep.unpadded_bytes} bytes)")
    out.append(f"  padded size    {format_bytes(rep.padded_bytes)} ({rep.padded_bytes} bytes)")
    out.append(f"  {format_expansion(rep.expansion)}")
    out.append("  physical dims  [" + ",".join(map(str, rep.physical_dimensions)) + "]")
    if rep.sources:
        out.append("where the padding comes from:")
        for s in rep.sources:
            out.append(f"  - {s.description}")
    else:
        out.append("no padding: every slot of the buffer holds an element")
    if rep.suggestions:
        out.append("suggestions:")
        for s in rep.suggestions:
            out.append(f"  - {s}")
    print("\n".join(out))
    return 0


# -- show ----------------------------------------------------------------------


def cmd_show(args) -> int:
    from .render import MissingMatplotlib, PictureLimits, save_picture, show_text

    shape = _load_shape(args)
    try:
        limits = PictureLimits(args.rows, args.cols, args.slices, args.slots)
    except ValueError as e:
        raise UsageError(str(e)) from None
    from .tiling import plan

    plan(shape)  # validate before drawing anything
    text = show_text(shape, limits, offsets=not args.no_offsets)
    # Files first: a bad path or a missing matplotlib fails before any output.
    wrote = []
    for path, fmt in ((args.png, "png"), (args.svg, "svg")):
        if path:
            try:
                save_picture(shape, path, fmt)
            except MissingMatplotlib as e:
                raise UsageError(str(e)) from None
            wrote.append(f"wrote {path}")
    print(text)
    for line in wrote:
        print(line)
    return 0


# -- index ---------------------------------------------------------------------


def _byte_text(p, off: int) -> str:
    bits = p.element_bits
    start = off * bits
    if bits % 8 == 0 and start % 8 == 0:
        return f"byte offset {start // 8}"
    if bits == 1:
        return f"byte offset {start // 8}, bit {start % 8}"
    return f"byte offset {start // 8}, bits {start % 8}-{start % 8 + bits - 1} (low bits first)"


def cmd_index(args) -> int:
    from .tiling import plan

    shape = _load_shape(args)
    p = plan(shape)
    if not args.index and args.offset is None:
        raise UsageError("give a logical index (e.g. 2,3) or --offset N")
    print(str(shape))
    for text in args.index:
        idx = tuple(_int_list(text, "an index"))
        off = p.linear_index(idx)
        print(f"({','.join(map(str, idx))}) -> element offset {off}, {_byte_text(p, off)}")
    for off in args.offset or ():
        ix = p.multidimensional_index(off)
        where = "padding" if ix is None else "(" + ",".join(map(str, ix)) + ")"
        print(f"element offset {off} ({_byte_text(p, off)}) -> {where}")
    return 0


# -- hlo -----------------------------------------------------------------------


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

    def done(self):
        if self.shown:
            sys.stderr.write("\r" + " " * 60 + "\r")
            sys.stderr.flush()


_PROGRESS_MIN_BYTES = 16 << 20
_json_str = json.encoder.encode_basestring  # C-accelerated when available
_JSON_SHAPES: dict = {}


def _json_int(v) -> str:
    return "null" if v is None else str(v)


def _json_shape(shape, shape_text) -> str:
    hit = _JSON_SHAPES.get(id(shape))
    if hit is not None and hit[0] is shape:
        return hit[1]
    text = _json_str(shape_text(shape))
    if len(_JSON_SHAPES) > 1 << 16:
        _JSON_SHAPES.clear()
    _JSON_SHAPES[id(shape)] = (shape, text)
    return text


def _operands_of(ins, on_warning):
    """The instruction's operands, or None (with a warning) if an inline
    operand shape does not parse."""
    from .hlo_module import HloWarning

    try:
        return ins.operands
    except HloParseError as e:
        on_warning(HloWarning(ins.line, e.message))
        return None


class HloSummary:
    """Totals per memory space and the top instructions by padding waste,
    kept per computation so that fusion bodies and reducers (not materialized
    in memory) can be left out once the whole module has been read."""

    def __init__(self, top: int):
        self.top = top
        self.per_comp = {}   # computation -> {space: [bytes, padded, count]}
        self.heaps = {}      # computation -> heap of (waste, seq, record)
        self.count = 0
        self.unknown = 0
        self._seq = 0

    def add(self, ins, fp) -> None:
        self.count += 1
        if fp.bytes is None:
            self.unknown += 1
            return
        spaces = self.per_comp.setdefault(ins.computation, {})
        for sp, b, pb in fp.by_space:
            acc = spaces.setdefault(sp, [0, 0, 0])
            acc[0] += b
            acc[1] += pb
            acc[2] += 1
        waste = fp.padded_bytes - fp.bytes
        if waste > 0 and self.top > 0:
            heap = self.heaps.setdefault(ins.computation, [])
            self._seq += 1
            item = (waste, -self._seq, (ins.computation, ins.name, ins.opcode, ins.shape,
                                        fp.bytes, fp.padded_bytes, ins.line))
            if len(heap) < self.top:
                heapq.heappush(heap, item)
            elif item > heap[0]:
                heapq.heapreplace(heap, item)

    def report(self, excluded: set) -> List[str]:
        from .layout import memory_space_name

        totals = {}
        for comp, spaces in self.per_comp.items():
            if comp in excluded:
                continue
            for sp, (b, pb, c) in spaces.items():
                acc = totals.setdefault(sp, [0, 0, 0])
                acc[0] += b
                acc[1] += pb
                acc[2] += c
        out = []
        skipped = sorted(c for c in self.per_comp if c in excluded)
        out.append("totals per memory space (sums of result shapes; aliasing not modelled):")
        out.append(f"  {'memory space':<42} {'results':>7} {'bytes':>9} {'padded':>9} {'waste':>9}")
        for sp in sorted(totals):
            b, pb, c = totals[sp]
            out.append(f"  {f'S({sp}) ' + memory_space_name(sp):<42} {c:>7} {_fmt_bytes(b):>9} "
                       f"{_fmt_bytes(pb):>9} {_fmt_bytes(pb - b):>9}")
        if not totals:
            out.append("  (no arrays)")
        if skipped:
            what = ("fusion body / reducer computation" if len(skipped) == 1
                    else "fusion bodies / reducer computations")
            out.append(f"  ({len(skipped)} {what} left out: "
                       "their values are not materialized in memory)")
        items = []
        for comp, heap in self.heaps.items():
            if comp not in excluded:
                items.extend(heap)
        items.sort(reverse=True)
        items = items[: self.top]
        if items:
            out.append(f"top {len(items)} by padding waste:")
            for rank, (waste, _, rec) in enumerate(items, 1):
                comp, name, opcode, shape, b, pb, line = rec
                where = f"{comp}, line {line}" if comp else f"line {line}"
                exp = f"{pb / b:.1f}x" if b else "inf"
                out.append(f"  {rank:>2}. {name} = {opcode} ({where}): waste {_fmt_bytes(waste)}, "
                           f"{_fmt_bytes(b)} -> {_fmt_bytes(pb)} ({exp})")
                out.append(f"      {shape}")
        elif self.top > 0:
            out.append("no padding waste found")
        if self.unknown:
            out.append(f"{self.unknown} values of unknown size (unbounded '?' dimensions or "
                       "invalid layouts) are not counted")
        return out


def cmd_hlo(args) -> int:
    from .hlo_module import OOM_REPORT, HloReader, memory_footprint, shape_text, _open_text

    if args.json and args.csv:
        raise UsageError("choose one of --json and --csv")
    if args.top < 0:
        raise UsageError(f"--top must be >= 0, got {args.top}")
    warnings = []

    def on_warning(w):
        warnings.append(w)
        if len(warnings) <= args.max_warnings:
            sys.stderr.write(f"{PROG}: warning: {w}\n")

    if args.file == "-":
        import io

        stream = io.TextIOWrapper(sys.stdin.buffer, encoding="utf-8", errors="replace")
        total = None
        closer = None
        source_name = "<stdin>"
    else:
        stream = _open_text(args.file)
        closer = stream
        source_name = args.file
        try:
            total = os.path.getsize(args.file)
        except OSError:
            total = None
    big = total is None or total >= _PROGRESS_MIN_BYTES
    progress = _Progress(stream, total, enabled=(not args.no_progress and big and sys.stderr.isatty()))
    reader = HloReader(on_warning)
    summary = HloSummary(args.top)
    out = sys.stdout
    write = out.write
    mode = "json" if args.json else "csv" if args.csv else "text"
    csvw = None
    if mode == "csv":
        csvw = csv.writer(out, lineterminator="\n")
        csvw.writerow(["computation", "name", "opcode", "shape", "bytes", "padded_bytes",
                       "waste", "memory_space", "line"]
                      + (["operands", "attributes"] if args.details else []))
    elif mode == "json":
        write("[")
    first = True
    last_comp = object()
    show_table = mode != "text" or not args.summary
    try:
        for ins in reader.read(progress):
            fp = memory_footprint(ins.shape)
            summary.add(ins, fp)
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
                        c = reader.computations.get(ins.computation)
                        title = ("ENTRY computation " if c is not None and c.is_entry
                                 else "computation ") + ins.computation
                    write(f"{title}\n")
                    write(f"  {'name':<28} {'opcode':<18} {'bytes':>9} {'padded':>9} {'waste':>9} "
                          f"{'mem':>4}  shape\n")
                sp = "-" if fp.memory_space is None else str(fp.memory_space)
                if fp.memory_space is None and len(fp.by_space) > 1:
                    sp = "mix"
                root = "ROOT " if ins.is_root else ""
                write(f"  {root + ins.name:<28} {ins.opcode:<18} {_fmt_bytes(fp.bytes):>9} "
                      f"{_fmt_bytes(fp.padded_bytes):>9} {_fmt_bytes(waste):>9} {sp:>4}  {shape_text(ins.shape)}\n")
                if ins.computation == OOM_REPORT:
                    a = ins.attributes
                    bits = [f"{k.replace('_', ' ')} {a[k]}" for k in ("size", "unpadded_size", "allocation_type")
                            if k in a]
                    if bits:
                        write(f"  {'':<28} report: " + ", ".join(bits) + "\n")
                elif args.details:
                    ops = _operands_of(ins, on_warning)
                    if ops is None:
                        write(f"      operands: {ins.operands_text.strip()}\n")
                    elif not ops and ins.opcode == "parameter":
                        write(f"      parameter number: {ins.argument}\n")
                    elif not ops and ins.opcode == "constant":
                        write(f"      literal: {ins.argument}\n")
                    elif ops or ins.argument:
                        text = ", ".join(f"{shape_text(o.shape)} %{o.name}" if o.shape is not None
                                         else f"%{o.name}" for o in ops) or ins.argument
                        write(f"      operands: {text}\n")
                    if ins.attributes_text:
                        write(f"      attributes: {ins.attributes_text}\n")
            elif mode == "csv":
                row = [ins.computation or "", ins.name, ins.opcode, shape_text(ins.shape),
                       "" if fp.bytes is None else fp.bytes,
                       "" if fp.padded_bytes is None else fp.padded_bytes,
                       "" if waste is None else waste,
                       "" if fp.memory_space is None else fp.memory_space, ins.line]
                if args.details:
                    ops = _operands_of(ins, on_warning)
                    row.append(ins.operands_text.strip() if ops is None
                               else " ".join(o.name for o in ops))
                    row.append(ins.attributes_text)
                csvw.writerow(row)
            else:
                # Built by hand: json.dumps on a dict per instruction was the
                # slowest step of `hlo --json` on big dumps. Strings go through
                # json's own (C) string encoder; numbers are ints or null.
                comp = ins.computation
                parts = [
                    '{"computation": ', "null" if comp is None else _json_str(comp),
                    ', "name": ', _json_str(ins.name),
                    ', "opcode": ', _json_str(ins.opcode),
                    ', "shape": ', _json_shape(ins.shape, shape_text),
                    ', "bytes": ', _json_int(fp.bytes),
                    ', "padded_bytes": ', _json_int(fp.padded_bytes),
                    ', "waste": ', _json_int(waste),
                    ', "memory_space": ', _json_int(fp.memory_space),
                    ', "line": ', str(ins.line),
                    ', "is_root": ', "true" if ins.is_root else "false",
                ]
                if len(fp.by_space) > 1:
                    parts += [', "memory_spaces": ', json.dumps(
                        [{"memory_space": sp_, "bytes": b, "padded_bytes": pb}
                         for sp_, b, pb in fp.by_space])]
                if comp == OOM_REPORT:
                    parts += [', "report": ', json.dumps(dict(ins.attributes))]
                else:
                    if args.details:
                        ops = _operands_of(ins, on_warning)
                        if ops is not None:
                            parts += [', "operands": ', json.dumps(
                                [{"name": o.name,
                                  "shape": None if o.shape is None else shape_text(o.shape)}
                                 for o in ops])]
                        if ins.opcode in ("parameter", "constant"):
                            parts += [', "argument": ', _json_str(ins.argument)]
                        parts += [', "attributes": ', json.dumps(ins.attributes)]
                    at = ins.attributes_text
                    if "kind=" in at:
                        kind = ins.kind
                        parts += [', "kind": ', "null" if kind is None else _json_str(kind)]
                    if ("calls=" in at or "to_apply=" in at or "body=" in at or "condition=" in at
                            or "branch_computations=" in at):
                        parts += [', "called_computations": ', json.dumps(list(ins.called_computations))]
                parts.append("}")
                write(("\n" if first else ",\n") + "".join(parts))
            first = False
    finally:
        progress.done()
        if closer is not None:
            closer.close()
    if mode == "json":
        write("\n]\n" if not first else "]\n")
    if len(warnings) > args.max_warnings:
        sys.stderr.write(f"{PROG}: warning: {len(warnings) - args.max_warnings} more "
                         "skipped lines not shown (see --max-warnings)\n")
    if summary.count == 0:
        raise UsageError(f"no HLO instructions or out-of-memory allocations found in {source_name}"
                         + (f" ({len(warnings)} lines skipped)" if warnings else ""))
    if mode == "text":
        excluded = reader.fused_computations | reader.applied_computations
        head = []
        if reader.module_name:
            head.append(f"module {reader.module_name}: ")
        ncomp = len(reader.computations)
        n = summary.count
        head.append(f"{n} instruction{'s' if n != 1 else ''}" if reader.mode != "oom"
                    else f"{n} allocation{'s' if n != 1 else ''} from an out-of-memory report")
        if ncomp:
            head.append(f" in {ncomp} computation{'s' if ncomp != 1 else ''}")
        head.append(f", {reader.lines_read} line{'s' if reader.lines_read != 1 else ''}")
        skipped = len(reader.warnings)
        if skipped:
            head.append(f", {skipped} line{'s' if skipped != 1 else ''} skipped")
        if len(warnings) > skipped:
            head.append(f", {len(warnings) - skipped} other warning"
                        + ("s" if len(warnings) - skipped != 1 else ""))
        if show_table:
            write("\n")
        write("".join(head) + "\n")
        write("\n".join(summary.report(excluded)) + "\n")
    return 0


# -- argument parsing ------------------------------------------------------------


def _add_shape_args(p, padding: bool = True) -> None:
    p.add_argument("shape", metavar="SHAPE",
                   help="an XLA shape as HLO text, e.g. 'f32[2,3]{0,1}' (quote it for the shell)")
    if padding:
        p.add_argument("--pad", metavar="W0,W1,...",
                       help="pad dimension d to width Wd before tiling (the seeds' padded_dimensions, "
                            "which has no HLO text syntax)")
        p.add_argument("--padding-value", metavar="V",
                       help="the value padding slots hold (default 0); shown in pictures")


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog=PROG,
        description="Answers about XLA shapes and memory layouts: sizes, padding, "
                    "memory order, offsets, and whole HLO dumps.",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog=f"examples:\n"
               f"  {PROG} describe '{_EXAMPLE_SHAPE}'\n"
               f"  {PROG} explain 'f32[8,1,1024]{{1,2,0:T(8,128)}}'\n"
               f"  {PROG} show 'f32[2,3]{{0,1}}' --pad 3,5\n"
               f"  {PROG} index 'f32[3,5]{{1,0:T(2,2)}}' 2,3\n"
               f"  {PROG} hlo module.txt --top 5\n")
    from . import __version__

    parser.add_argument("--version", action="version", version=f"{PROG} {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)

    def add(name, help_, example):
        p = sub.add_parser(name, help=help_, description=help_ + ".",
                           formatter_class=argparse.RawDescriptionHelpFormatter,
                           epilog="example:\n  " + example)
        return p

    p = add("describe", "Show the parts of a shape: element type, dimensions, layout, tiles, "
            "memory space, logical and physical bytes, physical dimensions",
            f"{PROG} describe '{_EXAMPLE_SHAPE}'")
    _add_shape_args(p)
    p.set_defaults(func=cmd_describe)

    p = add("explain", "Explain the memory a shape takes: unpadded and padded size, expansion, "
            "which dimensions and tile levels cause the padding, and what to change",
            f"{PROG} explain 'f32[8,1,1024]{{1,2,0:T(8,128)}}'   "
            "# sizes printed as XLA's out-of-memory report prints them")
    _add_shape_args(p)
    p.add_argument("--json", action="store_true", help="print a JSON object")
    p.set_defaults(func=cmd_explain)

    p = add("show", "Draw the seeds' pictures: the logical array with letters, the memory "
            "order (padding as 0), and the offset of every element with tile boundaries",
            f"{PROG} show 'f32[2,3]{{0,1}}' --pad 3,5     # a d 0 b e 0 c f 0 0 0 0 0 0 0")
    _add_shape_args(p)
    p.add_argument("--rows", type=int, default=12, help="rows of each grid to draw (default 12)")
    p.add_argument("--cols", type=int, default=16, help="columns of each grid (default 16)")
    p.add_argument("--slices", type=int, default=2, help="2-D slices of a 3-D+ array (default 2)")
    p.add_argument("--slots", type=int, default=128, help="memory slots to list (default 128)")
    p.add_argument("--no-offsets", action="store_true", help="leave out the offset grid")
    p.add_argument("--png", metavar="FILE", help="also draw the picture to a PNG file (needs matplotlib)")
    p.add_argument("--svg", metavar="FILE", help="also draw the picture to an SVG file (needs matplotlib)")
    p.set_defaults(func=cmd_show)

    p = add("index", "Map a logical index to its element offset in the physical buffer "
            "(and byte/bit offset), or an offset back to its index or 'padding'",
            f"{PROG} index 'f32[3,5]{{1,0:T(2,2)}}' 2,3 --offset 9   # 17; 9 is padding")
    _add_shape_args(p)
    p.add_argument("index", nargs="*", metavar="I,J,...", help="logical indices, comma-separated")
    p.add_argument("--offset", type=int, action="append", metavar="N",
                   help="element offset to map back (repeatable)")
    p.set_defaults(func=cmd_index)

    p = add("hlo", "Read an HLO module (a dump file, or - for stdin) or the text of a TPU "
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
    p.add_argument("--top", type=int, default=10, metavar="N",
                   help="list the N values with the most padding waste (default 10; 0: none)")
    p.add_argument("--summary", action="store_true",
                   help="print only the totals and the top N, not every instruction")
    p.add_argument("--details", action="store_true",
                   help="also give each instruction's operands (with their shapes when written "
                        "inline) and attributes (kind=, calls=, metadata={...}, ...)")
    p.add_argument("--max-warnings", type=int, default=20, metavar="N",
                   help="print at most N skipped-line warnings (default 20)")
    p.add_argument("--no-progress", action="store_true", help="never print progress")
    p.set_defaults(func=cmd_hlo)
    return parser


def _error_text(e: BaseException) -> str:
    if isinstance(e, OSError):
        msg = e.strerror or str(e)
        return f"{msg}: {e.filename}" if e.filename else msg
    if isinstance(e, HloParseError):
        return str(e)  # message (line, column) + source line + caret
    text = str(e)
    if isinstance(e, KeyError) and len(e.args) == 1:
        text = str(e.args[0])
    return " ".join(text.split()) if "\n" not in text else text.splitlines()[0]


def main(argv: Optional[Sequence[str]] = None) -> int:
    """Run the command; returns the exit status (0 ok, 2 bad usage or input)."""
    parser = build_parser()
    args, extra = parser.parse_known_args(argv)
    if extra:
        # argparse stops filling `index I,J ...` at the first option; indices
        # given after an option (`index S --pad 3,5 1,2`) arrive here.
        if getattr(args, "command", None) == "index" and all(
                _INDEX_TEXT.match(x) for x in extra):
            args.index = list(args.index) + extra
        else:
            parser.error("unrecognized arguments: " + " ".join(extra))
    if not getattr(args, "command", None):
        parser.print_help(sys.stderr)
        return 2
    try:
        return args.func(args)
    except BrokenPipeError:  # pragma: no cover - e.g. `xlashape hlo big.txt | head`
        # the reader went away: stop quietly, and keep Python from complaining
        # again when it flushes stdout at exit
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return 0
    except (UsageError, XlaShapeError, OSError) as e:
        sys.stderr.write(f"{PROG}: error: {_error_text(e)}\n")
        return 2
    except KeyboardInterrupt:  # pragma: no cover
        sys.stderr.write(f"{PROG}: interrupted\n")
        return 130


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
