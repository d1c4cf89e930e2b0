"""``xlashape describe SHAPE``: every part of a shape, its sizes and its tiled
dimensions."""

from __future__ import annotations

from typing import List

from ..errors import XlaShapeError
from ._common import EXAMPLE_SHAPE, PROG, add_command, add_shape_args, fmt_bytes, load_shape
from ._output import field, write_lines

NAME = "describe"


def add_parser(subparsers):
    p = add_command(
        subparsers, NAME,
        "Show the parts of a shape: element type, dimensions, layout, tiles, "
        "memory space, logical and physical bytes, physical dimensions",
        f"{PROG} describe '{EXAMPLE_SHAPE}'")
    add_shape_args(p)
    return p


def run(args) -> int:
    from ..hlo_module import memory_footprint
    from ..layout import memory_space_name

    shape = load_shape(args, need_array=False, always_warn=True)
    out: List[str] = []
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
    from ..shape import UNBOUNDED_SIZE

    d = shape.dimensions[i]
    if d == UNBOUNDED_SIZE:
        return "?"
    return f"<={d}" if shape.dynamic_dimensions[i] else str(d)


def _describe_array(shape, out: List[str], indent: str = "") -> None:
    from ..layout import COMBINE_DIMENSION
    from ..shape import UNBOUNDED_SIZE
    from ..shape_util import byte_size_of
    from ..tiling import plan

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
            p = plan(shape)
            phys = [d for d in reversed(m2m)]
            for i, lv in enumerate(p.levels):
                parts = []
                for grp, gs, t in zip(lv.groups, lv.group_sizes, lv.tile):
                    if i == 0:
                        names = []
                        for j in grp:
                            a = len(phys) + lv.prepend - lv.k + j - lv.prepend
                            names.append(f"dim {phys[a]}" if 0 <= a < len(phys) else "a new size-1 dim")
                        what = "*".join(names)
                        what = f"{what} ({gs})"
                    else:
                        what = str(gs)
                    parts.append(f"{what} by {t} -> {-(-gs // t)} x {t}")
                tile = "(" + ",".join("*" if x == COMBINE_DIMENSION else str(x)
                                      for x in lay.tiles[i].dimensions) + ")"
                where = "the minor-most physical dims" if i == 0 else "the result of the previous level"
                row(f"  level {i + 1}", f"{tile} on {where}: " + "; ".join(parts))
        except XlaShapeError as e:
            row("  (tiles)", f"cannot apply: {e}")
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
