"""``xlashape memory diff A B``: two compiles of one program side by side
(see :mod:`xlashape.memory_diff`). Text by default, ``--json``, ``--html``;
``--max-growth 5%`` exits 1 when B's peak (or, without a peak, its
arguments + outputs + temporaries) is more than 5% above A's."""

from __future__ import annotations

import sys

from ._common import UsageError, warn
from ._output import write_lines
from ._sizes import fmt_bytes
from ..memory import analyze, parse_size
from ..memory.diff import diff_modules
from ..reporters.html import write_diff_html
from ..reporters.jsondoc import diff_document
from ..reporters.text import diff_lines


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


def _growth_limit(text: str):
    t = text.strip()
    if t.endswith("%"):
        try:
            return float(t[:-1]) / 100, None
        except ValueError:
            raise UsageError(f"--max-growth: not a percentage: {text!r} (write e.g. 5%)") from None
    return None, parse_size(t)


def run_diff(args) -> int:
    paths = getattr(args, "diff", None) or []
    if len(paths) != 2:
        raise UsageError("memory diff takes two inputs: xlashape memory diff A B (dump "
                         f"directories, HLO files or out-of-memory reports); got {len(paths)}")
    a_path, b_path = paths
    kw = dict(top=args.top, chip=args.chip, platform=args.platform,
              prefer="proto" if getattr(args, "proto", False) else "text")
    ra, rb = analyze(a_path, **kw), analyze(b_path, **kw)
    a, b = _pick(ra, args.module, a_path), _pick(rb, args.module, b_path)
    d = diff_modules(a, b)
    if args.html is not None:
        with open(args.html, "w", encoding="utf-8") as f:
            write_diff_html(f, d, a_path, b_path)
    if args.json:
        sys.stdout.write(diff_document(d))
    else:
        write_lines(diff_lines(d, a_path, b_path, args.top))
    if getattr(args, "max_growth", None) is not None:
        frac, absolute = _growth_limit(args.max_growth)
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
