"""``xlashape index SHAPE I,J,...``: logical index -> element offset in the
physical buffer (with its byte and bit position), and ``--offset N`` back to
the index it holds or ``padding``."""

from __future__ import annotations

import re

from ._common import PROG, UsageError, add_command, int64, int_list
from ._output import write_json, write_lines
from ._shape_arg import add_shape_args, load_shape
from ..tiling import plan

NAME = "index"

_INDEX_TEXT = re.compile(r"^\(?\s*-?\d+(\s*,\s*-?\d+)*\s*\)?$")


def add_parser(subparsers):
    p = add_command(
        subparsers, NAME,
        "Map a logical index to its element offset in the physical buffer "
        "(and byte/bit offset), or an offset back to its index or 'padding'",
        f"{PROG} index 'f32[3,5]{{1,0:T(2,2)}}' 2,3 --offset 9   # 17; 9 is padding")
    add_shape_args(p)
    p.add_argument("index", nargs="*", metavar="I,J,...", help="logical indices, comma-separated")
    p.add_argument("--offset", type=int64, action="append", metavar="N",
                   help="element offset to map back (repeatable)")
    p.add_argument("--json", action="store_true",
                   help="print a JSON object: shape, bits_per_element, slots, and for each index "
                        "and offset its element_offset, byte_offset, bit_offset and index "
                        "(null for a padding slot)")
    return p


def take_extra(args, extra) -> bool:
    """argparse stops filling ``I,J ...`` at the first option; indices given
    after an option (``index S --pad 3,5 1,2``) arrive as extra arguments."""
    if all(_INDEX_TEXT.match(x) for x in extra):
        args.index = list(args.index) + list(extra)
        return True
    return False


def _byte_text(p, off: int) -> str:
    bits = p.element_bits
    start = off * bits
    if bits % 8 == 0 and start % 8 == 0:
        return f"byte offset {start // 8}"
    if bits == 1:
        return f"byte offset {start // 8}, bit {start % 8}"
    return f"byte offset {start // 8}, bits {start % 8}-{start % 8 + bits - 1} (low bits first)"


def run(args) -> int:
    shape = load_shape(args).shape
    p = plan(shape)
    if not args.index and args.offset is None:
        raise UsageError("give a logical index (e.g. 2,3) or --offset N")
    if args.json:
        write_json(_json(shape, p, args))
        return 0
    out = [str(shape)]
    for text in args.index:
        idx = tuple(int_list(text, "an index"))
        off = p.linear_index(idx)
        out.append(f"({','.join(map(str, idx))}) -> element offset {off}, {_byte_text(p, off)}")
    for off in args.offset or ():
        ix = p.multidimensional_index(off)
        where = "padding" if ix is None else "(" + ",".join(map(str, ix)) + ")"
        out.append(f"element offset {off} ({_byte_text(p, off)}) -> {where}")
    write_lines(out)
    return 0


def _position(p, off: int) -> dict:
    start = off * p.element_bits
    return {"element_offset": off, "byte_offset": start // 8, "bit_offset": start % 8}


def _json(shape, p, args) -> dict:
    indices = []
    for text in args.index:
        idx = int_list(text, "an index")
        indices.append({"index": idx, **_position(p, p.linear_index(tuple(idx)))})
    offsets = []
    for off in args.offset or ():
        ix = p.multidimensional_index(off)
        offsets.append({**_position(p, off), "index": None if ix is None else list(ix),
                        "padding": ix is None})
    return {"shape": str(shape), "bits_per_element": p.element_bits, "slots": p.element_count,
            "indices": indices, "offsets": offsets}
