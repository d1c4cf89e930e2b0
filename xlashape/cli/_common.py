"""What every command shares on the input side: the argument parser, numbers
from the command line, the SHAPE argument (text, ``-`` for standard input, or
a ``*.pb`` file of XLA's ShapeProto, with ``--pad`` / ``--padding-value``), warnings, and turning an error into the
one line the user sees.

Rules every command follows through these helpers:

- Integers on the command line are 64-bit (:func:`int64` as an argparse
  ``type``, :func:`int_list` for ``I,J,...``): anything outside
  ``[-2**63, 2**63-1]`` is a usage error, not a silently huge value.
- A bad input is a :class:`UsageError` or an ``XlaShapeError``; :func:`error_text`
  makes its one line (plus source line and caret for text that does not
  parse), printable.
- Warnings go through :func:`warn` (one printable line on stderr).

``xlashape --version`` imports this module (for the parser) and must not load
numpy, so the few helpers here that need the model (the shape parser,
``tpu``, ``tiling``, ``hlo_module``) import it inside the function; the
command modules, each imported only when its command runs, import at their
top.
"""

from __future__ import annotations

import argparse
import math
import os
import re
import sys
import warnings
from typing import List, Optional

from ..errors import HloParseError, XlaShapeError
from ._output import printable

# the command line's integers are XLA's (int64); spelled out here rather than
# imported from xlashape.layout, which would bring numpy into every start-up
INT64_MIN = -(2**63)
INT64_MAX = 2**63 - 1

PROG = "xlashape"
EXAMPLE_SHAPE = "bf16[8,1,1280,16384]{3,2,0,1:T(8,128)(2,1)}"

# Shape text read from standard input longer than this is refused (a shape is
# at most a few kilobytes; this keeps `xlashape explain - < big.bin` bounded).
MAX_STDIN_SHAPE_CHARS = 1 << 20

_INT = re.compile(r"\s*[+-]?[0-9]+\s*$")


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
    if not _INT.match(text):
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
        if not _INT.match(part):
            raise UsageError(f"{what} must be integers separated by commas, got {text!r}")
        n = int(part)
        if not INT64_MIN <= n <= INT64_MAX:
            raise UsageError(f"{what} {text.strip()}: {part.strip()} is outside the 64-bit "
                             f"integer range [{INT64_MIN}, {INT64_MAX}]")
        out.append(n)
    return out


def _number(text: str):
    if _INT.match(text):
        return int(text)
    try:
        value = float(text)
    except ValueError:
        raise UsageError(f"--padding-value must be a number, got {text!r}") from None
    if value in (float("inf"), float("-inf")) and "inf" not in text.lower():
        raise UsageError(f"--padding-value {text} is outside the range of a 64-bit float")
    return value


def _fits_64_bits(value: int, hlo_name: str) -> bool:
    return (INT64_MIN <= value <= INT64_MAX) or (hlo_name == "u64" and 0 <= value < 2**64)


def _padding_value(shape, text: str):
    """``--padding-value`` as a number the element type can hold (as the
    Python API demands when it fills the padding), else a UsageError."""
    import numpy as np

    value = _number(text)
    et = shape.element_type
    if isinstance(value, int) and not _fits_64_bits(value, et.hlo_name):
        raise UsageError(f"--padding-value {text.strip()} is outside the 64-bit integer range "
                         "(write it as a float, e.g. 1e20, for a floating-point type)")
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


# -- the SHAPE argument --------------------------------------------------------------

PAD_HELP = ("pad dimension d to width Wd before tiling: the legacy padded_dimensions field "
            "of XLA's older shapes documentation, which has no HLO text syntax")


def add_shape_args(p, padding: bool = True, tpu: bool = False) -> None:
    """The SHAPE positional (text, or - for standard input) and, unless
    ``padding`` is false, ``--pad`` and ``--padding-value``; with ``tpu``,
    ``--tpu [CHIP]`` (see :func:`load_shape`)."""
    p.add_argument("shape", metavar="SHAPE", nargs="?" if tpu else None,
                   help="an XLA shape as HLO text, e.g. 'f32[2,3]{0,1}' (quote it for the "
                        "shell), - to read it from standard input, or a FILE.pb holding "
                        "XLA's serialized ShapeProto")
    if tpu:
        from ..tpu import CHIPS

        p.add_argument("--tpu", nargs="?", const=DEFAULT_TPU, metavar="CHIP",
                       help="give SHAPE, written without a layout, the layout XLA:TPU gives a "
                            "jit parameter of that shape on CHIP "
                            f"({', '.join(CHIPS)}; default {DEFAULT_TPU})")
    if padding:
        p.add_argument("--pad", metavar="W0,W1,...", help=PAD_HELP)
        p.add_argument("--padding-value", metavar="V",
                       help="the value padding slots hold (default 0; the legacy padding_value "
                            "field); shown in pictures")


def shape_required_in_usage(p) -> None:
    """Call last in ``add_parser`` when ``add_shape_args(tpu=True)``: SHAPE is
    optional only for argparse (so that ``--tpu SHAPE`` parses); the usage
    line shows it as required."""
    usage = " ".join(p.format_usage().split()[1:])  # without "usage:"
    p.usage = usage.replace(p.prog, "%(prog)s", 1).replace("[SHAPE]", "SHAPE")


def _shape_proto_file(arg: str):
    """A Shape from a file of XLA's serialized ``ShapeProto`` when SHAPE
    names an existing ``*.pb`` file; else ``None`` (SHAPE is text)."""
    if not arg.endswith(".pb") or not os.path.isfile(arg):
        return None
    from ..shape import Shape

    try:
        with open(arg, "rb") as fh:
            data = fh.read(MAX_PROTO_SHAPE_BYTES + 1)
    except OSError as e:
        raise UsageError(f"{arg} cannot be read: {e}") from None
    if len(data) > MAX_PROTO_SHAPE_BYTES:
        raise UsageError(f"{arg} is larger than {MAX_PROTO_SHAPE_BYTES} bytes: not one ShapeProto")
    return Shape.from_proto(data)


#: The largest ShapeProto file SHAPE may name.
MAX_PROTO_SHAPE_BYTES = 1 << 24


def read_shape_text(text: str) -> str:
    """The SHAPE argument's text: itself, or standard input for ``-``."""
    if text != "-":
        return text
    data = sys.stdin.buffer.read(MAX_STDIN_SHAPE_CHARS + 1)
    if len(data) > MAX_STDIN_SHAPE_CHARS:
        raise UsageError(f"the shape on standard input is longer than {MAX_STDIN_SHAPE_CHARS} "
                         "bytes; give one shape as HLO text")
    shape_text = data.decode("utf-8", errors="replace").strip()
    if not shape_text:
        raise UsageError("no shape on standard input (SHAPE '-' reads one shape as HLO text)")
    return shape_text


DEFAULT_TPU = "v5e"
_WRITTEN_LAYOUT = re.compile(r"\]\s*\{")


def _tpu_shape(args, text: str):
    """``--tpu [CHIP]``: the shape with the layout XLA:TPU would give it."""
    from ..hlo_text import parse_shape
    from ..tpu import canonical_chip, with_default_layout

    chip = canonical_chip(args.tpu)
    shape = parse_shape(text)
    if _WRITTEN_LAYOUT.search(text):
        raise UsageError(f"--tpu gives a shape written without a layout the layout XLA:TPU "
                         f"chooses, but {text.strip()} has one (drop the layout, or --tpu)")
    args.tpu = chip
    return with_default_layout(shape, chip)


def tpu_note(shape, chip: str) -> List[str]:
    """The lines ``--tpu`` adds: ``on TPU v5e this array is stored as ...: N bytes``."""
    from ..hlo_module import memory_footprint

    n = memory_footprint(shape).padded_bytes
    if shape.is_tuple:
        return [f"on TPU {chip} these arrays are stored as {shape}: {n} bytes ({fmt_bytes(n)})",
                "  (the layouts XLA:TPU gives jit parameters of these shapes when no layout "
                "is requested)"]
    return [f"on TPU {chip} this array is stored as {shape}: {n} bytes ({fmt_bytes(n)})",
            "  (the layout XLA:TPU gives a jit parameter of this shape when no layout "
            "is requested)"]


def load_shape(args, *, need_array: bool = True, always_warn: bool = False):
    """The SHAPE argument as a Shape, with ``--pad`` / ``--padding-value``
    applied; with ``--tpu [CHIP]``, a shape written without a layout first gets
    the one XLA:TPU chooses (``--tpu SHAPE`` reads as the default chip)."""
    from ..hlo_text import parse_shape

    if getattr(args, "tpu", None) is not None and args.shape is None:
        from ..tpu import canonical_chip

        try:
            canonical_chip(args.tpu)
        except XlaShapeError:
            args.shape, args.tpu = args.tpu, DEFAULT_TPU  # '--tpu SHAPE'
        else:
            raise UsageError("the following arguments are required: SHAPE")
    if args.shape is None:
        raise UsageError("the following arguments are required: SHAPE")
    proto = _shape_proto_file(args.shape)
    text = read_shape_text(args.shape) if proto is None else str(proto)
    if getattr(args, "tpu", None) is not None:
        shape = _tpu_shape(args, text)
    else:
        shape = parse_shape(text) if proto is None else proto
    pad = getattr(args, "pad", None)
    pv = getattr(args, "padding_value", None)
    if pad is not None or pv is not None:
        if not shape.is_array:
            raise UsageError("--pad and --padding-value apply to array shapes only, "
                             f"not to {shape}")
        layout = shape.layout
        changes = {}
        if pad is not None:
            dims = int_list(pad, "--pad")
            if len(dims) != len(shape.dimensions):
                raise UsageError(
                    f"--pad needs one width per dimension: the shape has "
                    f"{len(shape.dimensions)} dimensions, --pad gives {len(dims)} ({pad})")
            for d, (w, s) in enumerate(zip(dims, shape.dimensions)):
                if w < s:
                    raise UsageError(f"--pad width {w} for dimension {d} is smaller "
                                     f"than its size {s}")
            count = 1
            for w in dims:
                count *= w
            if count > INT64_MAX:
                raise UsageError(f"--pad {pad}: the padded array would have {count} elements, "
                                 "more than a 64-bit count can hold")
            changes["padded_dimensions"] = tuple(dims)
        if pv is not None:
            changes["padding_value"] = _padding_value(shape, pv)
        shape = shape.with_layout(layout.replace(**changes))
    if need_array and not shape.is_array:
        raise UsageError(f"{shape} is not an array shape; this command needs an array "
                         "(try 'xlashape describe' for tuples, tokens and buffers)")
    warn_if_invalid(shape, always_warn)
    return shape


# -- standard input as a file ------------------------------------------------------------

def spool_stdin() -> str:
    """The path of a new temporary file holding all of standard input (the
    caller removes it): ``hlo -`` and ``memory -`` read their input as a file
    (more than once, or its start before the rest)."""
    import shutil  # here, not at the top: xlashape --version imports this module
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


# -- warnings and errors ---------------------------------------------------------------


def warn(message: str) -> None:
    """One ``xlashape: warning: ...`` line on stderr, made printable."""
    sys.stderr.write(printable(f"{PROG}: warning: {message}") + "\n")


def warn_if_invalid(shape, always: bool = False) -> None:
    """One stderr line if XLA's ShapeUtil::ValidateShape would reject ``shape``;
    the command goes on (its numbers may still help to see why). Unless
    ``always``, nothing is said when the layout cannot even be planned: the
    command then fails with that error itself."""
    from ..errors import InvalidShapeError
    from ..shape_util import validate_shape

    try:
        validate_shape(shape)
    except InvalidShapeError as e:
        if not always and shape.is_array and not shape.is_unbounded_dynamic:
            from ..tiling import plan

            try:
                plan(shape)
            except XlaShapeError:
                return  # the command reports this error itself
        warn(f"XLA would reject this shape: {e}")


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


def report_error(e: BaseException) -> int:
    sys.stderr.write(f"{PROG}: error: {error_text(e)}\n")
    return 2


def fmt_bytes(n: Optional[int], _cache: dict = {}) -> str:  # noqa: B006 - a deliberate cache
    """Bytes as XLA's out-of-memory report prints them (``1.00G``); ``?`` for
    unknown. Cached, since a dump repeats the same sizes many times."""
    if n is None:
        return "?"
    text = _cache.get(n)
    if text is None:
        from ..tiling import format_bytes

        if len(_cache) > 1 << 16:
            _cache.clear()
        text = _cache[n] = format_bytes(n)
    return text
