"""``xlashape explain SHAPE``: why a shape takes the memory it takes: sizes,
expansion, where the padding comes from, and what to change."""

from __future__ import annotations

from ._common import PROG, add_command
from ._output import write_json, write_lines
from ._shape_arg import add_shape_args, load_shape, shape_required_in_usage
from ._sizes import tpu_note
from ..padding import padding_report
from ..tiling import format_bytes, format_expansion

NAME = "explain"


def add_parser(subparsers):
    p = add_command(
        subparsers, NAME,
        "Explain the memory a shape takes: unpadded and padded size, expansion, "
        "which dimensions and tile levels cause the padding, and what to change",
        f"{PROG} explain 'f32[8,1,1024]{{1,2,0:T(8,128)}}'   "
        "# sizes printed as XLA's out-of-memory report prints them\n"
        f"  {PROG} explain --tpu v5e 'f32[100,5]'   "
        "# with the layout XLA:TPU gives a jit parameter of that shape")
    add_shape_args(p, tpu=True)
    p.add_argument("--json", action="store_true",
                   help="print a JSON object (with --tpu: the predicted shape in \"shape\", "
                        "its size in \"padded_bytes\", the chip in \"tpu\")")
    shape_required_in_usage(p)
    return p


def run(args) -> int:
    shape, chip = load_shape(args)
    rep = padding_report(shape)
    if args.json:
        obj = report_json(shape, rep)
        if chip:
            obj["tpu"] = chip
        write_json(obj)
        return 0
    out = tpu_note(shape, chip) if chip else []
    out.append(str(rep.shape))
    out.append(f"  unpadded size  {format_bytes(rep.unpadded_bytes)} ({rep.unpadded_bytes} bytes)")
    out.append(f"  padded size    {format_bytes(rep.padded_bytes)} ({rep.padded_bytes} bytes)")
    out.append(f"  {format_expansion(rep.expansion)}")
    out.append("  physical dims  [" + ",".join(map(str, rep.physical_dimensions)) + "]")
    if rep.sources:
        out.append("where the padding comes from:")
        for s in rep.sources:
            out.append(f"  - {s.description}")
    else:
        out.append("no padding: every slot of the buffer holds an element")
    if rep.suggestions:
        out.append("suggestions:")
        for s in rep.suggestions:
            out.append(f"  - {s}")
    write_lines(out)
    return 0


def report_json(shape, rep) -> dict:
    """The JSON object of ``explain --json`` (its keys are relied on by scripts)."""
    obj = {
        "shape": str(rep.shape),
        "unpadded_bytes": rep.unpadded_bytes,
        "padded_bytes": rep.padded_bytes,
        "expansion": rep.expansion,
        "physical_dimensions": list(rep.physical_dimensions),
        "sources": [
            {k: (list(v) if isinstance(v, tuple) else v) for k, v in (
                ("kind", s.kind), ("level", s.level), ("dimensions", s.dimensions),
                ("size", s.size), ("padded_size", s.padded_size), ("factor", s.factor),
                ("description", s.description))}
            for s in rep.sources],
        "suggestions": [str(s) for s in rep.suggestions],
    }
    if shape.layout.padded_dimensions:
        obj["padded_dimensions"] = list(shape.layout.padded_dimensions)
    return obj
