"""The SHAPE argument of ``describe``, ``explain``, ``show`` and ``index``:
HLO text, ``-`` for standard input, or a ``*.pb`` file of XLA's ShapeProto;
with ``--pad`` / ``--padding-value`` applied to its layout, and (``describe``
and ``explain``) ``--tpu [CHIP]``, which gives a shape written without a
layout the one XLA:TPU chooses.

A command adds the arguments with :func:`add_shape_args` and reads them with
:func:`load_shape`, which returns the shape and the chip (``None`` without
``--tpu``) and leaves ``args`` as argparse made it. Only the commands that
take a SHAPE import this module (it loads numpy and the model; ``xlashape
--version`` must not).
"""

from __future__ import annotations

import math
import os
import re
import sys
import warnings
from typing import NamedTuple, Optional

import numpy as np

from ..errors import InvalidShapeError, XlaShapeError
from ..hlo_text import parse_shape
from ..shape import Shape
from ..shape_util import validate_shape
from ..tiling import plan
from ..tpu import CHIPS, canonical_chip, with_default_layout
from ._common import INT64_MAX, INT64_MIN, INT_TEXT, UsageError, int_list, warn

#: The chip ``--tpu`` means without one (and for ``--tpu SHAPE``).
DEFAULT_TPU = "v5e"

# Shape text read from standard input longer than this is refused (a shape is
# at most a few kilobytes; this keeps `xlashape explain - < big.bin` bounded).
MAX_STDIN_SHAPE_CHARS = 1 << 20

#: The largest ShapeProto file SHAPE may name.
MAX_PROTO_SHAPE_BYTES = 1 << 24

PAD_HELP = ("pad dimension d to width Wd before tiling: the legacy padded_dimensions field "
            "of XLA's older shapes documentation, which has no HLO text syntax")

_WRITTEN_LAYOUT = re.compile(r"\]\s*\{")


class LoadedShape(NamedTuple):
    """What :func:`load_shape` read: ``shape, chip = load_shape(args)``."""

    shape: Shape
    #: The chip ``--tpu`` named, as :data:`xlashape.tpu.CHIPS` spells it;
    #: ``None`` without ``--tpu``.
    chip: Optional[str]


# -- the arguments ---------------------------------------------------------------------


def add_shape_args(p, padding: bool = True, tpu: bool = False) -> None:
    """The SHAPE positional (text, or - for standard input) and, unless
    ``padding`` is false, ``--pad`` and ``--padding-value``; with ``tpu``,
    ``--tpu [CHIP]`` (see :func:`load_shape`)."""
    p.add_argument("shape", metavar="SHAPE", nargs="?" if tpu else None,
                   help="an XLA shape as HLO text, e.g. 'f32[2,3]{0,1}' (quote it for the "
                        "shell), - to read it from standard input, or a FILE.pb holding "
                        "XLA's serialized ShapeProto")
    if tpu:
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


# -- reading them ------------------------------------------------------------------------


def load_shape(args, *, need_array: bool = True, always_warn: bool = False) -> LoadedShape:
    """The SHAPE argument as a Shape, with ``--pad`` / ``--padding-value``
    applied, and the chip of ``--tpu [CHIP]`` (``None`` without it): with
    ``--tpu``, a shape written without a layout first gets the one XLA:TPU
    chooses (``--tpu SHAPE`` reads as the default chip). ``args`` is not
    changed."""
    shape_arg = args.shape
    tpu_arg = getattr(args, "tpu", None)
    if tpu_arg is not None and shape_arg is None:
        try:
            canonical_chip(tpu_arg)
        except XlaShapeError:
            shape_arg, tpu_arg = tpu_arg, DEFAULT_TPU  # '--tpu SHAPE'
        else:
            raise UsageError("the following arguments are required: SHAPE")
    if shape_arg is None:
        raise UsageError("the following arguments are required: SHAPE")
    proto = _shape_proto_file(shape_arg)
    text = read_shape_text(shape_arg) if proto is None else str(proto)
    chip = None
    if tpu_arg is not None:
        shape, chip = _tpu_shape(tpu_arg, text)
    else:
        shape = parse_shape(text) if proto is None else proto
    pad = getattr(args, "pad", None)
    pv = getattr(args, "padding_value", None)
    if pad is not None or pv is not None:
        shape = _padded(shape, pad, pv)
    if need_array and not shape.is_array:
        raise UsageError(f"{shape} is not an array shape; this command needs an array "
                         "(try 'xlashape describe' for tuples, tokens and buffers)")
    warn_if_invalid(shape, always_warn)
    return LoadedShape(shape, chip)


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


def _shape_proto_file(arg: str) -> Optional[Shape]:
    """A Shape from a file of XLA's serialized ``ShapeProto`` when SHAPE
    names an existing ``*.pb`` file; else ``None`` (SHAPE is text)."""
    if not arg.endswith(".pb") or not os.path.isfile(arg):
        return None
    try:
        with open(arg, "rb") as fh:
            data = fh.read(MAX_PROTO_SHAPE_BYTES + 1)
    except OSError as e:
        raise UsageError(f"{arg} cannot be read: {e}") from None
    if len(data) > MAX_PROTO_SHAPE_BYTES:
        raise UsageError(f"{arg} is larger than {MAX_PROTO_SHAPE_BYTES} bytes: not one ShapeProto")
    return Shape.from_proto(data)


def _tpu_shape(chip_arg: str, text: str):
    """``--tpu [CHIP]``: ``(the shape with the layout XLA:TPU would give it,
    the chip's canonical name)``."""
    chip = canonical_chip(chip_arg)
    shape = parse_shape(text)
    if _WRITTEN_LAYOUT.search(text):
        raise UsageError(f"--tpu gives a shape written without a layout the layout XLA:TPU "
                         f"chooses, but {text.strip()} has one (drop the layout, or --tpu)")
    return with_default_layout(shape, chip), chip


def _padded(shape: Shape, pad: Optional[str], pv: Optional[str]) -> Shape:
    """``shape`` with ``--pad W0,W1,...`` and ``--padding-value V`` in its
    layout (either may be ``None``)."""
    if not shape.is_array:
        raise UsageError("--pad and --padding-value apply to array shapes only, "
                         f"not to {shape}")
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
    return shape.with_layout(shape.layout.replace(**changes))


# -- --padding-value ---------------------------------------------------------------------


def _number(text: str):
    if INT_TEXT.match(text):
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


def _padding_value(shape: Shape, text: str):
    """``--padding-value`` as a number the element type can hold (as the
    Python API demands when it fills the padding), else a UsageError."""
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
        raise UsageError(f"--padding-value {text} cannot be held by {et.hlo_name} ({dt}): "
                         f"{problem}")
    return value


# -- a shape XLA would reject ------------------------------------------------------------


def warn_if_invalid(shape: Shape, always: bool = False) -> None:
    """One stderr line if XLA's ShapeUtil::ValidateShape would reject ``shape``;
    the command goes on (its numbers may still help to see why). Unless
    ``always``, nothing is said when the layout cannot even be planned: the
    command then fails with that error itself."""
    try:
        validate_shape(shape)
    except InvalidShapeError as e:
        if not always and shape.is_array and not shape.is_unbounded_dynamic:
            try:
                plan(shape)
            except XlaShapeError:
                return  # the command reports this error itself
        warn(f"XLA would reject this shape: {e}")
