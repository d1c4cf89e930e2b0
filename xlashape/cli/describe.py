"""``xlashape describe SHAPE``: every part of a shape, its sizes and its tiled
dimensions."""

from __future__ import annotations

from typing import List

from ..errors import XlaShapeError
from ._common import EXAMPLE_SHAPE, PROG, add_command
from ._output import field, write_json, write_lines
from ._shape_arg import add_shape_args, load_shape, shape_required_in_usage
from ._sizes import fmt_bytes, tpu_note
from ..sizes import memory_footprint
from ..layout import COMBINE_DIMENSION, memory_space_name
from ..shape import UNBOUNDED_SIZE
from ..shape_util import byte_size_of
from ..tiling import plan

NAME = "describe"


def add_parser(subparsers):
    p = add_command(
        subparsers, NAME,
        "Show the parts of a shape: element type, dimensions, layout, tiles, "
        "memory space, logical and physical bytes, physical dimensions",
        f"{PROG} describe '{EXAMPLE_SHAPE}'\n"
        f"  {PROG} describe --tpu v6e 'bf16[8,1,1280]'   "
        "# with the layout XLA:TPU gives a jit parameter of that shape")
    add_shape_args(p, tpu=True)
    p.add_argument("--json", action="store_true",
                   help="print a JSON object (shape, kind, element_type, dimensions, layout "
                        "fields, tile_levels, unpadded_bytes, padded_bytes, "
                        "physical_dimensions, ...; a tuple lists its elements; with --tpu "
                        "the chip in \"tpu\")")
    p.add_argument("--proto", action="store_true",
                   help="print XLA's ShapeProto of the shape instead: its bytes in hex "
                        "(what XLA's Shape::ToProto serializes) and protobuf's text format "
                        "(with --json: \"proto_hex\" and \"proto_text\")")
    shape_required_in_usage(p)
    return p


def _proto_lines(shape) -> List[str]:
    from google.protobuf import text_format  # only --proto loads protobuf's runtime

    msg = shape.to_proto_message()
    data = msg.SerializeToString()
    text = text_format.MessageToString(msg).splitlines()
    return [field("ShapeProto", f"{len(data)} bytes"), data.hex(), ""] + text


def run(args) -> int:
    shape, chip = load_shape(args, need_array=False, always_warn=True)
    if args.proto:
        from google.protobuf import text_format  # only --proto loads protobuf's runtime

        if args.json:
            msg = shape.to_proto_message()
            write_json({"shape": str(shape), "proto_hex": msg.SerializeToString().hex(),
                        "proto_text": text_format.MessageToString(msg)})
        else:
            write_lines(_proto_lines(shape))
        return 0
    if args.json:
        obj = describe_json(shape)
        if chip:
            obj["tpu"] = chip
        write_json(obj)
        return 0
    out: List[str] = tpu_note(shape, chip) if chip else []
    if shape.is_array:
        _describe_array(shape, out)
    elif shape.is_buffer:
        out.append(f"{str(shape):<15} a buffer b(...) holding one array:")
        _describe_array(shape.buffer_shape, out, "  ")
    elif shape.is_token:
        out.append("token[]: an ordering token; it holds no data (0 bytes)")
    elif shape.is_opaque:
        out.append("opaque[]: an opaque handle; its size is the pointer size")
    else:
        fp = memory_footprint(shape)
        leaves = shape.tuple_shapes
        out.append(field("shape", str(shape)))
        out.append(field("tuple", f"{len(leaves)} elements "
                          f"(XLA keeps a table of {len(leaves)} pointers for the tuple itself)"))
        for i, sub in enumerate(leaves):
            sfp = memory_footprint(sub)
            out.append(f"  {{{i}}} {sub}: {fmt_bytes(sfp.bytes)} logical, "
                       f"{fmt_bytes(sfp.padded_bytes)} with padding")
        unknown = "unknown: an unbounded dynamic dimension (?) has no size"
        out.append(field("logical bytes", unknown if fp.bytes is None else
                         f"{fp.bytes} ({fmt_bytes(fp.bytes)}) in the arrays"))
        out.append(field("physical bytes", unknown if fp.padded_bytes is None else
                         f"{fp.padded_bytes} ({fmt_bytes(fp.padded_bytes)}) with all tile padding"))
        for sp, b, pb in fp.by_space:
            out.append(f"  S({sp}) {memory_space_name(sp)}: {fmt_bytes(b)} logical, "
                       f"{fmt_bytes(pb)} padded")
    write_lines(out)
    return 0


def _dims_text(shape) -> str:
    return "[" + ",".join(_dim_text(shape, i) for i in range(len(shape.dimensions))) + "]"


def _dim_text(shape, i: int) -> str:
    """Dimension ``i`` as XLA prints it: ``?`` unbounded, ``<=N`` bounded dynamic."""
    d = shape.dimensions[i]
    if d == UNBOUNDED_SIZE:
        return "?"
    return f"<={d}" if shape.dynamic_dimensions[i] else str(d)


def _describe_array(shape, out: List[str], indent: str = "") -> None:
    et = shape.element_type
    lay = shape.layout

    def row(key, value):
        out.append(field(key, value, indent))

    row("shape", str(shape))
    dt = et.dtype
    row("element type", f"{et.hlo_name}: {et.bit_width} bit{'' if et.bit_width == 1 else 's'}, "
        f"{et.byte_width} byte"
        f"{'s' if et.byte_width != 1 else ''} per element unpacked"
        + (f" (numpy {dt})" if dt is not None else " (no numpy dtype)"))
    n = len(shape.dimensions)
    count = 1
    for d in shape.dimensions:
        count *= d if d != UNBOUNDED_SIZE else 1
    dim_desc = ", ".join(f"{i}: {_dim_text(shape, i)}" for i in range(n))
    row("dimensions", f"{_dims_text(shape)}: rank {n}"
        + (f" (dimension {dim_desc})" if n else " (a scalar)")
        + ("" if shape.is_unbounded_dynamic
           else f", {count} element{'' if count == 1 else 's'}"))
    dyn = []
    for i, (d, f) in enumerate(zip(shape.dimensions, shape.dynamic_dimensions)):
        if f:
            dyn.append(f"dimension {i} unbounded (?)" if d == UNBOUNDED_SIZE
                       else f"dimension {i} bounded dynamic, at most {d}")
    row("dynamic", "; ".join(dyn) if dyn else "none (all dimensions static)")
    if lay is None:
        row("layout", "none (XLA would use the default {" + ",".join(map(str, range(n - 1, -1, -1))) + "})")
        return
    m2m = lay.minor_to_major
    row("layout", f"{lay}")
    row("minor_to_major", "{" + ",".join(map(str, m2m)) + "}" + "  (first = most minor: changes fastest in memory)")
    row("major_to_minor", "(" + ",".join(map(str, lay.major_to_minor)) + ")"
        + "  (the order JAX/numpy users think in)")
    if n:
        order = ", ".join(f"dim {d} ({_dim_text(shape, d)})" for d in reversed(m2m)
                          if 0 <= d < n)
        row("memory order", f"major to minor: {order}")
    if lay.tiles:
        row("tiles", "T" + "".join(str(t) for t in lay.tiles))
        try:
            levels = tile_levels(shape, plan(shape))
        except XlaShapeError as e:
            row("  (tiles)", f"cannot apply: {e}")
        else:
            for i, lv in enumerate(levels):
                parts = []
                for dims, gs, t, count in zip(lv["dimensions"] or [None] * len(lv["group_sizes"]),
                                              lv["group_sizes"], lv["group_tiles"],
                                              lv["tile_counts"]):
                    if i == 0:
                        names = "*".join("a new size-1 dim" if d is None else f"dim {d}"
                                         for d in dims)
                        what = f"{names} ({gs})"
                    else:
                        what = str(gs)
                    parts.append(f"{what} by {t} -> {count} x {t}")
                tile = str(lay.tiles[i])
                where = "the minor-most physical dims" if i == 0 else "the result of the previous level"
                row(f"  level {i + 1}", f"{tile} on {where}: " + "; ".join(parts))
    if lay.tail_padding_alignment_in_elements != 1:
        row("tail padding", f"L({lay.tail_padding_alignment_in_elements}): element count rounded "
            f"up to a multiple of {lay.tail_padding_alignment_in_elements}")
    bits = lay.element_size_in_bits
    row("element size", f"E({bits}): {bits} bits per element in memory" if bits
        else f"{et.byte_width * 8} bits (the type's byte width; no E(n))")
    row("memory space", f"S({lay.memory_space}): {lay.memory_space_name}")
    if lay.split_configs:
        row("split configs", "SC" + "".join(str(s) for s in lay.split_configs))
    if lay.dynamic_shape_metadata_prefix_bytes:
        row("metadata", f"M({lay.dynamic_shape_metadata_prefix_bytes}): bytes of dynamic-size "
            "metadata before the data (not counted in sizes, as in XLA)")
    if lay.padded_dimensions:
        row("padded dims", f"{list(lay.padded_dimensions)} (the legacy padded_dimensions field), "
            f"padding value {lay.padding_value}")
    if shape.is_unbounded_dynamic:
        row("bytes", "unknown: an unbounded dimension (?) has no size")
        return
    logical = byte_size_of(shape)
    row("logical bytes", f"{logical} ({fmt_bytes(logical)})  ShapeUtil::ByteSizeOf: elements x element size")
    try:
        p = plan(shape)
    except XlaShapeError as e:
        row("physical bytes", f"unknown: {e}")
        return
    phys = p.size_in_bytes
    ratio = f", {phys / logical:.1f}x" if logical else ""
    row("physical bytes", f"{phys} ({fmt_bytes(phys)})  with all tile padding{ratio}")
    row("physical dims", "[" + ",".join(map(str, p.physical_dimensions)) + "]"
        + f"  (major to minor, after tiling; {p.element_count} slot"
        + ("" if p.element_count == 1 else "s") + ")")


def _tile_text(shape) -> list:
    return [["*" if x == COMBINE_DIMENSION else x for x in t.dimensions]
            for t in shape.layout.tiles]


def tile_levels(shape, p) -> list:
    """Each tile level of ``p`` (the plan of ``shape``) as a dict: ``tile``
    (as written, ``"*"`` for a combined dimension), then per group of
    dimensions the tile covers (``*`` combines a dimension into the next):
    ``dimensions`` (first level only: the logical dimensions in each group,
    ``None`` for a size-1 dimension the level adds; ``None`` for later
    levels, which tile the result of the previous one), ``group_sizes``
    (combined size), ``group_tiles`` (the tile's bound) and ``tile_counts``
    (tiles along the group, rounded up)."""
    written = _tile_text(shape)
    out = []
    for level in p.tile_levels:
        dims = None
        if level.index == 0:
            dims = [[d[0] if d else None for d in e.inputs] for e in level.entries]
        out.append({"tile": written[level.index], "dimensions": dims,
                    "group_sizes": [e.size for e in level.entries],
                    "group_tiles": [e.tile_size for e in level.entries],
                    "tile_counts": [e.count for e in level.entries]})
    return out


def describe_json(shape) -> dict:
    """The JSON object of ``describe --json``."""
    if shape.is_array:
        return _array_json(shape)
    if shape.is_buffer:
        inner = _array_json(shape.buffer_shape)
        return {"shape": str(shape), "kind": "buffer", "buffer_shape": inner,
                "unpadded_bytes": inner["unpadded_bytes"], "padded_bytes": inner["padded_bytes"]}
    if shape.is_token:
        return {"shape": str(shape), "kind": "token", "unpadded_bytes": 0, "padded_bytes": 0}
    if shape.is_opaque:
        return {"shape": str(shape), "kind": "opaque", "unpadded_bytes": None,
                "padded_bytes": None}
    fp = memory_footprint(shape)
    return {"shape": str(shape), "kind": "tuple",
            "elements": [describe_json(sub) for sub in shape.tuple_shapes],
            "unpadded_bytes": fp.bytes, "padded_bytes": fp.padded_bytes,
            "memory_spaces": [{"memory_space": sp, "unpadded_bytes": b, "padded_bytes": pb}
                              for sp, b, pb in fp.by_space]}


def _array_json(shape) -> dict:
    et = shape.element_type
    lay = shape.layout
    unbounded = shape.is_unbounded_dynamic
    count = None
    if not unbounded:
        count = 1
        for d in shape.dimensions:
            count *= d
    obj = {
        "shape": str(shape),
        "kind": "array",
        "element_type": et.hlo_name,
        "bit_width": et.bit_width,
        "byte_width": et.byte_width,
        "numpy_dtype": None if et.dtype is None else str(et.dtype),
        "dimensions": [None if d == UNBOUNDED_SIZE else d for d in shape.dimensions],
        "dynamic_dimensions": list(shape.dynamic_dimensions),
        "elements": count,
        "layout": None if lay is None else str(lay),
    }
    p = error = None
    if lay is not None:
        obj.update({
            "minor_to_major": list(lay.minor_to_major),
            "major_to_minor": list(lay.major_to_minor),
            "tiles": _tile_text(shape),
            "tile_levels": [],
            "element_size_in_bits": lay.element_size_in_bits,
            "tail_padding_alignment_in_elements": lay.tail_padding_alignment_in_elements,
            "memory_space": lay.memory_space,
            "memory_space_name": lay.memory_space_name,
            "split_configs": [str(c) for c in lay.split_configs],
            "dynamic_shape_metadata_prefix_bytes": lay.dynamic_shape_metadata_prefix_bytes,
        })
        if lay.padded_dimensions:
            obj["padded_dimensions"] = list(lay.padded_dimensions)
            obj["padding_value"] = lay.padding_value
        if not unbounded:
            try:
                p = plan(shape)
            except XlaShapeError as e:
                error = str(e)
            else:
                obj["tile_levels"] = tile_levels(shape, p)
    obj["unpadded_bytes"] = None if unbounded else byte_size_of(shape)
    obj["padded_bytes"] = None if p is None else p.size_in_bytes
    obj["physical_dimensions"] = None if p is None else list(p.physical_dimensions)
    obj["slots"] = None if p is None else p.element_count
    obj["bits_per_element"] = None if p is None else p.element_bits
    if error is not None:
        obj["error"] = error
    return obj
