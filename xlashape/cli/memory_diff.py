"""``xlashape memory diff A B``: two compiles of one program side by side
(see :mod:`xlashape.memory_diff`). Text by default, ``--json``, ``--html``;
``--max-growth 5%`` exits 1 when B's peak (or, without a peak, its
arguments + outputs + temporaries) is more than 5% above A's."""

from __future__ import annotations

import json
import math
import os
import pathlib
import re
import sys
from typing import List

from ._common import (UsageError, WarningPrinter, at_least, relabel, renamed, spool_stdin,
                      warn)
from ._output import write_lines
from ._sizes import fmt_bytes
from ..memory import analyze
from ..memory_diff import diff_modules
from ..errors import ShapeValueError, XlaShapeError
from ..peak import parse_size
from ..report_html import write_diff_html


def take_extra(args, extra) -> bool:
    """``memory diff A B``: argparse gives ``diff`` as PATH and A, B as extra."""
    if args.path == "diff" and not any(x.startswith("-") and x != "-" for x in extra):
        args.diff = list(extra)
        return True
    return False


def wants_diff(args) -> bool:
    """``memory diff ...`` (a file or directory named ``diff`` is ``./diff``)."""
    return getattr(args, "diff", None) is not None or args.path == "diff"


def _pick(result, name, which):
    modules = [m for m in result.modules if not m.superseded]
    if name is not None:
        modules = [m for m in modules if m.name and name in m.name]
    if not modules:
        raise UsageError(f"{which}: no module" + (f" named like {name!r}" if name else ""))
    # a dump holds helper modules too: the one with the most memory is the program
    return max(modules, key=lambda m: (m.allocation_count or 0, (m.argument_size_in_bytes or 0)
                                       + (m.output_size_in_bytes or 0)))


_PERCENT = re.compile(r"\+?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][+-]?\d+)?$")


def _growth_limit(text: str):
    """``--max-growth``: ``(fraction, None)`` for ``5%``, ``(None, bytes)``
    for a size (``512M``). A percentage is a finite number >= 0: ``nan%``
    never compares true and ``inf%`` never fails, either would turn the CI
    gate off; a negative one would fail every diff where B does not shrink."""
    t = text.strip()
    if not t.endswith("%"):
        try:
            return None, parse_size(t)
        except ShapeValueError as e:
            raise UsageError(f"--max-growth: {e} or a percentage such as 5%") from None
    number = t[:-1].strip()
    value = float(number) if _PERCENT.match(number) else None
    if value is not None and math.isfinite(value):
        return value / 100, None
    if value is not None or number.lower().lstrip("+") in ("inf", "infinity"):
        why = ("an infinite limit never fails: leave --max-growth out for no gate, "
               "or write e.g. 5%")
    elif number.startswith("-"):
        why = "it must be 0% or more (0% fails on any growth); write e.g. 5%"
    else:
        why = "write e.g. 5%"
    raise UsageError(f"--max-growth: not a percentage: {text!r} ({why})")


def run_diff(args) -> int:
    paths = getattr(args, "diff", None) or []
    if len(paths) != 2:
        raise UsageError("memory diff takes two inputs: xlashape memory diff A B (dump "
                         f"directories, HLO files or out-of-memory reports); got {len(paths)}")
    if paths == ["-", "-"]:
        raise UsageError("memory diff - -: only one of A and B can be standard input (-); "
                         "give the other as a file or directory")
    # the options and paths are checked before anything is read or printed
    limit = _growth_limit(args.max_growth) if args.max_growth is not None else None
    at_least(args.top, 0, "--top")
    at_least(args.max_warnings, 0, "--max-warnings")
    for p in paths:
        if p != "-" and not os.path.exists(p):
            raise FileNotFoundError(2, "no such file or directory", p)
    on_warning = WarningPrinter(args.max_warnings)
    kw = dict(top=args.top, chip=args.chip, platform=args.platform,
              prefer="proto" if getattr(args, "proto", False) else "text", on_warning=on_warning)
    a_path, b_path = ("<stdin>" if p == "-" else p for p in paths)
    temporary = None
    try:
        results = []
        try:
            for p in paths:
                if p == "-":
                    temporary = spool_stdin()
                # a Path: whatever its name, it is a file (hlo_module.source_kind)
                try:
                    results.append(analyze(pathlib.Path(temporary if p == "-" else p), **kw))
                except (OSError, XlaShapeError) as e:
                    if p != "-":
                        raise
                    raise renamed(e, temporary, "<stdin>") from None
        finally:
            on_warning.summary("warning")
        a, b = _pick(results[0], args.module, a_path), _pick(results[1], args.module, b_path)
        d = diff_modules(a, b)      # may read the files again (the op paths' source lines)
        if temporary is not None:
            relabel(results[paths.index("-")], temporary, "<stdin>")
    finally:
        if temporary is not None:
            os.unlink(temporary)
    if args.html is not None:
        with open(args.html, "w", encoding="utf-8") as f:
            write_diff_html(f, d, a_path, b_path)
    if args.json:
        sys.stdout.write(json.dumps(d.to_json(), ensure_ascii=True, indent=1) + "\n")
    else:
        write_lines(diff_text(d, a_path, b_path, args.top))
    if limit is not None:
        frac, absolute = limit
        status = 0
        for name, x, y in d.growths():
            grew = y - x
            if (grew > frac * x) if frac is not None else grew > absolute:
                warn(f"{name} grew by {fmt_bytes(grew)} ({x} -> {y} bytes"
                     + (f", {100 * grew / x:+.1f}%" if x else "") + f"), more than --max-growth "
                     f"{args.max_growth}")
                status = 1
        return status
    return 0


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


def diff_text(d, a_path: str, b_path: str, top: int = 5) -> List[str]:
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
