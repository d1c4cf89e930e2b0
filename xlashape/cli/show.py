"""``xlashape show SHAPE``: the pictures of XLA's shapes documentation for any
layout: the logical array with letters, the memory order, and the offset of
every element with tile boundaries; optionally a PNG/SVG drawing."""

from __future__ import annotations

import itertools

from ._common import PROG, UsageError, add_command, int64
from ._output import write_json, write_lines
from ._shape_arg import add_shape_args, load_shape
from ..render import MissingMatplotlib, PictureLimits, memory_order, save_picture, show_text
from ..tiling import plan

NAME = "show"


def add_parser(subparsers):
    p = add_command(
        subparsers, NAME,
        "Draw the pictures of XLA's shapes documentation: the logical array with letters, "
        "the memory order (padding as 0), and the offset of every element with tile boundaries",
        f"{PROG} show 'f32[2,3]{{0,1}}' --pad 3,5     # a d 0 b e 0 c f 0 0 0 0 0 0 0")
    add_shape_args(p)
    p.add_argument("--rows", type=int64, default=12, help="rows of each grid to draw (default 12)")
    p.add_argument("--cols", type=int64, default=16, help="columns of each grid (default 16)")
    p.add_argument("--slices", type=int64, default=2, help="2-D slices of a 3-D+ array (default 2)")
    p.add_argument("--slots", type=int64, default=128, help="memory slots to list (default 128)")
    p.add_argument("--no-offsets", action="store_true", help="leave out the offset grid")
    p.add_argument("--png", metavar="FILE", help="also draw the picture to a PNG file (needs matplotlib)")
    p.add_argument("--svg", metavar="FILE", help="also draw the picture to an SVG file (needs matplotlib)")
    p.add_argument("--json", action="store_true",
                   help="print a JSON object: shape, elements, slots, padding_slots, "
                        "padding_value, memory_order (the logical index in each of the first "
                        "--slots slots, null for padding) and offsets (of the elements in the "
                        "--rows x --cols corner of the first --slices slices)")
    return p


def run(args) -> int:
    shape = load_shape(args).shape
    try:
        limits = PictureLimits(args.rows, args.cols, args.slices, args.slots)
    except ValueError as e:
        raise UsageError(str(e)) from None
    p = plan(shape)  # validate before drawing anything
    text = None if args.json else show_text(shape, limits, offsets=not args.no_offsets)
    # Files first: a bad path or a missing matplotlib fails before any output.
    wrote = []
    for path, fmt in ((args.png, "png"), (args.svg, "svg")):
        if path:
            try:
                save_picture(shape, path, fmt)
            except MissingMatplotlib as e:
                raise UsageError(str(e)) from None
            wrote.append(path)
    if args.json:
        obj = _json(shape, p, limits, offsets=not args.no_offsets)
        obj["files"] = wrote
        write_json(obj)
    else:
        write_lines(text.split("\n") + [f"wrote {path}" for path in wrote])
    return 0


def _json(shape, p, limits, offsets: bool) -> dict:
    dims = p.dimensions
    n = 1
    for d in dims:
        n *= d
    shown = min(p.element_count, limits.slots)
    obj = {"shape": str(shape), "elements": n, "slots": p.element_count,
           "padding_slots": p.element_count - n}
    if shape.layout.padded_dimensions:
        obj["padded_dimensions"] = list(shape.layout.padded_dimensions)
    obj["padding_value"] = shape.layout.padding_value
    obj["memory_order"] = [None if ix is None else list(ix) for ix in memory_order(p, shown)]
    obj["memory_order_complete"] = shown == p.element_count
    if offsets:
        rows = min(dims[-2], limits.rows) if len(dims) >= 2 else 1
        cols = min(dims[-1], limits.cols) if dims else 1
        lead = itertools.islice(itertools.product(*(range(d) for d in dims[:-2])), limits.slices)
        obj["offsets"] = [
            {"slice": list(s),
             "rows": [[p.linear_index(s + ((r, c) if len(dims) >= 2 else (c,) if dims else ()))
                       for c in range(cols)] for r in range(rows)]}
            for s in lead]
    return obj
