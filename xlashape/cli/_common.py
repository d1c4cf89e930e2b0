"""What every command shares, and all that ``xlashape --version`` loads
besides the package's top: the argument parser, numbers from the command
line, warnings, turning an error into the one line the user sees, and
standard input as a file.

Rules every command follows through these helpers:

- Integers on the command line are 64-bit (:func:`int64` as an argparse
  ``type``, :func:`int_list` for ``I,J,...``): anything outside
  ``[-2**63, 2**63-1]`` is a usage error, not a silently huge value.
- A bad input is a :class:`UsageError` or an ``XlaShapeError``; :func:`error_text`
  makes its one line (plus source line and caret for text that does not
  parse), printable.
- Warnings go through :func:`warn` (one printable line on stderr); a
  reader's, through :class:`WarningPrinter` (at most ``--max-warnings``).

``xlashape --version`` imports this module (for the parser) and must not load
numpy, so nothing here needs the model: the helpers that do live in
:mod:`._shape_arg` (the SHAPE argument) and :mod:`._sizes` (``fmt_bytes``,
``tpu_note``), imported only by the commands that use them.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import sys
from typing import List

from ..limits import INT64_MAX, INT64_MIN   # the command line's integers are XLA's (int64)
from ..errors import HloParseError
from ._output import printable

PROG = "xlashape"
EXAMPLE_SHAPE = "bf16[8,1,1280,16384]{3,2,0,1:T(8,128)(2,1)}"

#: An integer as the command line writes it (sign, digits, spaces around).
INT_TEXT = re.compile(r"\s*[+-]?[0-9]+\s*$")


class UsageError(Exception):
    """Bad command-line usage or input; reported as one line, exit status 2."""


class ArgumentParser(argparse.ArgumentParser):
    """argparse, but a usage error is one printable line on stderr and exit
    status 2."""

    def error(self, message):  # noqa: D401 - argparse's hook
        sys.stderr.write(printable(f"{PROG}: error: {message} (see '{self.prog} --help')") + "\n")
        sys.exit(2)


def add_command(subparsers, name: str, help_: str, example: str) -> argparse.ArgumentParser:
    """A subcommand parser with the help text as its description and
    ``example`` (one or more lines, each a full command) as its epilog."""
    return subparsers.add_parser(
        name, help=help_, description=help_ + ".",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog=("example:\n  " if "\n" not in example else "examples:\n  ") + example)


# -- numbers -----------------------------------------------------------------------


def parse_int(text: str, what: str) -> int:
    """``text`` as a 64-bit integer, or a :class:`UsageError` naming ``what``."""
    if not INT_TEXT.match(text):
        raise UsageError(f"{what} must be an integer, got {text!r}")
    n = int(text)
    if not INT64_MIN <= n <= INT64_MAX:
        raise UsageError(f"{what} {text.strip()} is outside the 64-bit integer range "
                         f"[{INT64_MIN}, {INT64_MAX}]")
    return n


def int64(text: str) -> int:
    """argparse ``type`` for integer options: a 64-bit integer or a one-line
    usage error."""
    try:
        return parse_int(text, "the value")
    except UsageError as e:
        raise argparse.ArgumentTypeError(str(e)) from None


def at_least(value: int, minimum: int, option: str, note: str = "") -> int:
    if value < minimum:
        raise UsageError(f"{option} must be >= {minimum}{note}, got {value}")
    return value


def int_list(text: str, what: str) -> List[int]:
    """``2,3`` or ``(2,3)`` or ``[2,3]`` as 64-bit integers."""
    t = text.strip().strip("()[]")
    if not t:
        return []
    out = []
    for part in t.split(","):
        if not INT_TEXT.match(part):
            raise UsageError(f"{what} must be integers separated by commas, got {text!r}")
        n = int(part)
        if not INT64_MIN <= n <= INT64_MAX:
            raise UsageError(f"{what} {text.strip()}: {part.strip()} is outside the 64-bit "
                             f"integer range [{INT64_MIN}, {INT64_MAX}]")
        out.append(n)
    return out


# -- standard input as a file ------------------------------------------------------------


def spool_stdin() -> str:
    """The path of a new temporary file holding all of standard input (the
    caller removes it): ``hlo -`` and ``memory -`` read their input as a file
    (more than once, or its start before the rest)."""
    # here, not at the top: tempfile (with random and weakref) adds
    # about 2 ms, 5%, to `xlashape --version`, which imports this module;
    # shutil costs nothing (argparse imports it to build the parser)
    import tempfile

    tmp = tempfile.NamedTemporaryFile(prefix="xlashape-stdin-", suffix=".txt", delete=False)
    try:
        shutil.copyfileobj(sys.stdin.buffer, tmp, 1 << 20)
    except BaseException:
        tmp.close()
        os.unlink(tmp.name)
        raise
    tmp.close()
    return tmp.name



def relabel(result, path: str, display: str) -> None:
    """Name the input ``display`` (``<stdin>``) in an analysis
    (:class:`~xlashape.memory.MemoryAnalysis`) of the file ``path`` that
    holds it (:func:`spool_stdin`'s), so no temporary path is printed."""
    result.path = display
    for m in result.modules:
        if m.path is not None and m.path.startswith(path):
            m.path = display + m.path[len(path):]


# -- warnings and errors ---------------------------------------------------------------


#: the width of output that goes to no terminal (a pipe, a file) when
#: COLUMNS does not say: shutil's own fallback
DEFAULT_COLUMNS = 80


def terminal_width() -> int:
    """The columns the output may take: ``COLUMNS`` when it is set (a
    positive number), else the terminal's width when standard output is
    one, else :data:`DEFAULT_COLUMNS` (``shutil.get_terminal_size``'s order,
    but asked of the stream the command writes to)."""
    try:
        columns = int(os.environ.get("COLUMNS", "0"))
    except ValueError:
        columns = 0
    if columns > 0:
        return columns
    try:
        if sys.stdout.isatty():
            return shutil.get_terminal_size((DEFAULT_COLUMNS, 24)).columns or DEFAULT_COLUMNS
    except (AttributeError, ValueError, OSError):
        pass
    return DEFAULT_COLUMNS


def warn(message: str) -> None:
    """One ``xlashape: warning: ...`` line on stderr, made printable."""
    sys.stderr.write(printable(f"{PROG}: warning: {message}") + "\n")


class WarningPrinter:
    """An ``on_warning`` for the readers: prints the first ``limit`` warnings
    as they come (:func:`warn`), counts them all (:attr:`total`);
    :meth:`summary` says how many were not shown."""

    def __init__(self, limit: int):
        self.limit = limit
        self.total = 0

    def __call__(self, w) -> None:
        self.total += 1
        if self.total <= self.limit:
            warn(str(w))

    def summary(self, what: str) -> None:
        """``N more WHATs not shown (see --max-warnings)``, if any were not
        (``what`` singular: ``warning``, ``skipped line``)."""
        n = self.total - self.limit
        if n > 0:
            warn(f"{n} more {what}{'s' if n != 1 else ''} not shown (see --max-warnings)")


def error_text(e: BaseException) -> str:
    """The text after ``xlashape: error: ``: one line, printable; for text
    that does not parse, plus the source line and a caret under the
    offending character (still under it once the line is made printable)."""
    if isinstance(e, OSError):
        msg = e.strerror or str(e)
        return printable(f"{msg}: {e.filename}" if e.filename else msg)
    if isinstance(e, HloParseError):
        if e.text:
            # message (line, column), the source line, a caret: keep the caret
            # under its character once escapes make the line longer
            head, src, caret = str(e).rsplit("\n", 2)
            col = len(caret) - 1
            src = src.replace("\t", " ")  # a terminal would widen a tab past the caret
            return "\n".join((printable(head), printable(src),
                              " " * len(printable(src[:col])) + "^"))
        return printable(str(e))
    text = str(e)
    if isinstance(e, KeyError) and len(e.args) == 1:
        text = str(e.args[0])
    text = " ".join(text.split()) if "\n" not in text else text.splitlines()[0]
    return printable(text)


def renamed(e: BaseException, path: str, name: str) -> BaseException:
    """``e``; or, when its one-line message names the file ``path`` (standard
    input spooled by :func:`spool_stdin`), a :class:`UsageError` that names
    ``name`` (``<stdin>``) there instead: no temporary path is printed."""
    text = error_text(e)
    if path not in text or "\n" in text:
        return e
    return UsageError(text.replace(path, name))


def report_error(e: BaseException) -> int:
    sys.stderr.write(f"{PROG}: error: {error_text(e)}\n")
    return 2
