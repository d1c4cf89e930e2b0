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

import os
import pathlib
import sys
import time

from ._common import (PROG, UsageError, WarningPrinter, add_command, at_least, int64,
                      relabel, renamed, spool_stdin, terminal_width, warn)
from ._output import write_lines
from ._sizes import fmt_bytes
from ..errors import XlaShapeError
from ..memory import (EXAMPLE_DUMP, analyze, device_limit, judge, judge_what_if, module_peak,
                      parse_size)
from ..render import MissingMatplotlib
from ..reporters.html import write_html
from ..reporters.jsondoc import memory_document
from ..reporters.plot import picture_module, save_memory_picture
from ..reporters.tables import text_width, wrapped
from ..reporters.text import max_peak_line, report_lines
from .memory_diff import run_diff, take_extra as diff_extra, wants_diff

NAME = "memory"

_PROGRESS_MIN_BYTES = 16 << 20
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
    p.add_argument("--force-device", action="store_true",
                   help="judge against --device/--chip even when it is not the kind of device "
                        "the input was compiled for (a GPU dump against a TPU, a TPU report "
                        "against a GPU); without it that is an error, since the program's "
                        "layouts and sizes there would not be these")
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
    p.add_argument("--packing", action="store_true",
                   help="pack each temporary allocation as XLA's heap simulator does (xlashape's "
                        "own packing, in --json modules[].packing), and predict the peak each "
                        "padding fix would give; reads the module text whole")
    p.add_argument("--what-if", metavar="EDIT", action="append", dest="what_if",
                   help="predict the figures after EDIT (repeatable): undonate, undonate:N, "
                        "donate:N, dtype:FROM=TO, layout:NAME=LAYOUT, drop:NAME; a prediction "
                        "by xlashape, not XLA's report (--json modules[].what_if)")
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
            write_lines(wrapped("(the example: a real XLA:TPU dump shipped with xlashape, the "
                                "first layer of a convolutional network on 8 RGB 64x64 images; "
                                "--example-path prints where it is)",
                                text_width(terminal_width()), indent="") + [""])
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
                             on_warning=on_warning, progress=progress, dump=args.dump,
                             packing=args.packing, what_if=args.what_if)
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
        _check_platforms(verdicts, modules, args)
        if spec is not None:
            limit, name, basis, platform = spec
            for m in modules:
                if m.what_if is not None:
                    m.what_if.verdict = judge_what_if(m.what_if, limit, name, limit_basis=basis,
                                                      device_platform=platform,
                                                      module_platform=m.platform)
        if args.html is not None:
            with open(args.html, "w", encoding="utf-8") as f:
                write_html(f, modules, title=display, verdicts=verdicts)
        if args.png is not None or args.svg is not None:
            _pictures(args, modules)
        if args.json:
            for piece in memory_document(modules, verdicts):
                sys.stdout.write(piece)
        else:
            write_lines(report_lines(result, modules, display, args.top, verdicts,
                                     width=terminal_width()))
        tried = [m.what_if for m in modules if m.what_if is not None]
        if tried and not any(w.applied for w in tried):
            # a typo'd edit must not pass for a prediction that changed nothing
            warn("no --what-if edit applied to "
                 + ("the module" if len(tried) == 1 else f"any of the {len(tried)} modules")
                 + " (see 'not applied' above): the figures are the unedited program's")
            return 2
        if most is not None:
            over = [(m, module_peak(m)) for m in modules]
            over = [(m, p) for m, p in over if p is not None and p[0] > most]
            if over:
                for m, p in over:
                    warn(max_peak_line(m.name, p[0], p[1], most, args.max_peak))
                return 1
        return 0
    finally:
        if temporary is not None:
            os.unlink(temporary)


def _limit_of(args):
    """``(bytes, name, basis, platform)`` from --limit / --device / --chip,
    or ``None``. A limit of 0 is refused: nothing fits in it, and a verdict
    against it says nothing."""
    if args.limit is not None:
        limit = parse_size(args.limit)
        if limit <= 0:
            raise UsageError(f"--limit {args.limit}: a limit must be more than 0 bytes "
                             "(write e.g. 80G, 16GiB, 80GB or 1048576)")
        return limit, f"--limit {args.limit}", None, None
    if args.device is not None or args.chip is not None:
        return device_limit(args.device if args.device is not None else args.chip)
    return None


def _check_platforms(verdicts: dict, modules, args) -> None:
    """A verdict against another kind of device than the input's is an
    error unless --force-device says to judge anyway (the verdict then
    carries a warning)."""
    if args.force_device:
        return
    for m in modules:
        v = verdicts.get(id(m))
        if v is not None and v.platform_mismatch:
            option = "--device" if args.device is not None else "--chip"
            raise UsageError(
                f"{option} {args.device if args.device is not None else args.chip} is a "
                f"{v.device_platform.upper()} and {m.name or 'the input'} was compiled for "
                f"{v.module_platform.upper()}: its layouts and sizes there would not be these; "
                f"give the device it was compiled for, a size (--limit 80G), or --force-device "
                "to judge it anyway")


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
    limit, name, basis, platform = spec
    out = {}
    for m in modules:
        v = judge(m, limit, name, limit_basis=basis, device_platform=platform)
        if v is not None:
            out[id(m)] = v
    return out
