"""``xlashape memory diff A B``: two compiles of one program side by side
(see :mod:`xlashape.memory_diff`). Text by default, ``--json``, ``--html``;
``--max-growth 5%`` exits 1 when B's peak (or, without a peak, its
arguments + outputs + temporaries) is more than 5% above A's."""

from __future__ import annotations

import math
import os
import pathlib
import re
import sys

from ._common import (UsageError, WarningPrinter, at_least, relabel, renamed, spool_stdin,
                      warn)
from ._output import write_lines
from ..errors import ShapeValueError, XlaShapeError
from ..memory import analyze, parse_size
from ..memory.diff import diff_modules
from ..reporters.html import write_diff_html
from ..reporters.jsondoc import diff_document
from ..reporters.text import diff_lines, growth_line


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
        sys.stdout.write(diff_document(d))
    else:
        write_lines(diff_lines(d, a_path, b_path, args.top))
    if limit is not None:
        frac, absolute = limit
        status = 0
        for name, x, y in d.growths():
            grew = y - x
            if (grew > frac * x) if frac is not None else grew > absolute:
                warn(growth_line(name, x, y, args.max_growth, absolute))
                status = 1
        return status
    return 0
