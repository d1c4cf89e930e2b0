"""The ``xlashape`` command: answers about XLA shapes and layouts at a terminal.

Commands::

    xlashape describe SHAPE        the parts of a shape, its sizes, its tiled dimensions
    xlashape explain SHAPE         why it takes the memory it takes (padding, expansion)
    xlashape show SHAPE            the documentation's pictures: letters, memory order, offsets
    xlashape index SHAPE I,J,...   logical index -> element offset (and --offset N back)
    xlashape hlo FILE|-            every instruction of an HLO dump (or OOM report) with sizes
    xlashape memory PATH|-         where a program's memory goes, as XLA accounts for it

A SHAPE of ``-`` is read from standard input. Exit status: 0 on success, 2 on
bad usage or bad input, with one line ``xlashape: error: ...`` on stderr (plus
the source line and a caret for a shape that does not parse), never a
traceback.

How the package is built, and how to add a command
--------------------------------------------------

Each command is one module of this package with::

    NAME = "mycommand"

    def add_parser(subparsers):      # -> argparse parser of the command
        p = _common.add_command(subparsers, NAME, "What it does", "xlashape mycommand ...")
        ...                          # its arguments (integers: type=_common.int64)
        return p

    def run(args) -> int:            # the exit status (0); raise UsageError or an
        ...                          # XlaShapeError for bad input

and, only if it takes more positionals after options, ``take_extra(args,
extra) -> bool``. Add its name to :data:`COMMAND_NAMES` below; that is all.
:func:`main` imports only the module of the command it runs (none for
``--version``; all of them for ``--help`` or a name it does not know), so
that start-up pays for nothing else. The shared pieces:

- :mod:`._common`: what every command needs, and all ``--version`` loads
  (no numpy): the parser class and ``add_command``, 64-bit integer parsing
  (``int64``, ``int_list``, ``at_least``), ``UsageError``, ``warn``,
  ``error_text`` / ``report_error``, ``spool_stdin`` (standard input as a
  temporary file, for ``-`` where a command reads a file).
- :mod:`._shape_arg`: the SHAPE argument of ``describe``, ``explain``,
  ``show`` and ``index`` (``add_shape_args`` / ``load_shape``: text, ``-`` or
  a ShapeProto ``*.pb`` file, ``--pad``, ``--padding-value``, ``--tpu``;
  ``shape, chip = load_shape(args)`` leaves ``args`` unchanged).
- :mod:`._sizes`: ``fmt_bytes`` (a byte count as XLA's out-of-memory report
  prints it) and ``tpu_note`` (the lines ``--tpu`` adds).
- :mod:`._output`: every byte a command prints goes through its writers:
  ``write_lines`` (text), ``field`` (``key   value`` lines), ``Table``
  (fixed-width rows), ``write_json`` (one document), ``JsonArrayWriter``
  (streamed list), ``CsvWriter``. They make echoed input printable (no raw
  terminal control sequences) and keep JSON ASCII.

JSON output uses the same key for the same fact in every command: ``shape``
(as XLA prints it), ``unpadded_bytes`` / ``padded_bytes`` (``hlo`` rows keep
their older ``bytes`` for the unpadded size), ``memory_space``,
``physical_dimensions``, ``padded_dimensions``.
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys
from typing import List, Optional, Sequence

from .. import __version__
from ..errors import XlaShapeError
from ._common import EXAMPLE_SHAPE, PROG, ArgumentParser, UsageError, report_error

__all__ = ["main", "build_parser", "COMMANDS", "COMMAND_NAMES", "UsageError"]

#: The commands (each the name of its module here), in the order
#: ``xlashape --help`` lists them.
COMMAND_NAMES = ("describe", "explain", "show", "index", "hlo", "memory")


def _command(name: str):
    return importlib.import_module(f".{name}", __name__)


def __getattr__(name):
    # COMMANDS, the command modules in COMMAND_NAMES' order, imports them all:
    # computed when asked for, so that importing this package does not
    if name == "COMMANDS":
        return [_command(n) for n in COMMAND_NAMES]
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def _commands_for(argv: Sequence[str]) -> Optional[List[str]]:
    """The commands main must import to parse argv: the one it names, none
    for a bare ``--version``, all (None) for help or anything else. The
    command is the first argument that is not an option (the top level has
    no option that takes a value)."""
    for arg in argv:
        if arg in ("-h", "--help"):
            return None
        if not arg.startswith("-"):
            return [arg] if arg in COMMAND_NAMES else None
    return [] if "--version" in argv else None


def build_parser(commands: Optional[Sequence[str]] = None) -> argparse.ArgumentParser:
    """The ``xlashape`` parser, with the given commands (names in
    :data:`COMMAND_NAMES`; default: all of them)."""
    parser = ArgumentParser(
        prog=PROG,
        description="Answers about XLA shapes and memory layouts: sizes, padding, "
                    "memory order, offsets, and whole HLO dumps.",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog=f"examples:\n"
               f"  {PROG} describe '{EXAMPLE_SHAPE}'\n"
               f"  {PROG} explain 'f32[8,1,1024]{{1,2,0:T(8,128)}}'\n"
               f"  {PROG} show 'f32[2,3]{{0,1}}' --pad 3,5\n"
               f"  {PROG} index 'f32[3,5]{{1,0:T(2,2)}}' 2,3\n"
               f"  {PROG} hlo module.txt --top 5\n"
               f"  {PROG} memory --example\n")
    parser.add_argument("--version", action="version", version=f"{PROG} {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=ArgumentParser)
    for name in COMMAND_NAMES if commands is None else commands:
        command = _command(name)
        command.add_parser(sub).set_defaults(_command=command)
    return parser


def main(argv: Optional[Sequence[str]] = None) -> int:
    """Run the command; returns the exit status (0 ok, 2 bad usage or input)."""
    if argv is None:
        argv = sys.argv[1:]
    parser = build_parser(_commands_for(argv))
    args, extra = parser.parse_known_args(argv)
    command = getattr(args, "_command", None)
    if extra:
        take = getattr(command, "take_extra", None)
        if take is None or not take(args, extra):
            parser.error("unrecognized arguments: " + " ".join(extra))
    if command is None:
        parser.print_help(sys.stderr)
        return 2
    try:
        return command.run(args)
    except BrokenPipeError:  # pragma: no cover - e.g. `xlashape hlo big.txt | head`
        # the reader went away: stop quietly, and keep Python from complaining
        # again when it flushes stdout at exit
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return 0
    except (UsageError, XlaShapeError, OSError) as e:
        return report_error(e)
    except KeyboardInterrupt:  # pragma: no cover
        sys.stderr.write(f"{PROG}: interrupted\n")
        return 130
