"""What XLA did with a program's buffers: an accounting step on the records.

:func:`audit_module` reads what the sources collected in their one pass
(:class:`~xlashape.memory.records.ModuleRecords`: the entry, the header of
the module before optimizations, the module's copies) and the model the
accounting made of them (sizes, the peak), and says three things a JAX
user acts on (:class:`~xlashape.memory.model.ModuleAudit`):

- **donations**: each entry-parameter buffer the module before optimizations
  marks as donated (jax's ``donate_argnums`` becomes ``input_output_alias``
  when jax pairs the argument with an output of its own type, else
  ``buffer_donor``), whether the compiled module's ``input_output_alias``
  reuses it, and if not why. XLA's rule (``OptimizeInputOutputBufferAlias``)
  pairs donors with outputs per memory space by their buffer's byte size on
  the platform -- padding included, whatever the type or shape -- the
  largest first, each output at most once. So a donation goes unused when no
  output of the same memory space has its byte size (another type, another
  layout, padding on TPU) or every such output is taken (by jax's own
  pairing or by another donor). A donation jax itself drops (no output with
  as many elements: only a Python warning, "Some donated buffers were not
  usable") never reaches XLA and is in no dump.
- **layout copies**: instructions whose only effect is to change a value's
  layout or tiling: a ``copy`` between two layouts, a ``transpose`` that
  moves its elements (one that only relabels dimensions is a bitcast), a
  fusion that wraps one of them (XLA:CPU's ``wrapped_copy``); a copy that
  keeps the layout (a returned parameter, a copy XLA adds for an alias) is
  none. Each is traced to the entry layout that made it: the entry
  parameter it reads (through bitcasts, tuple elements and moves between
  memory spaces) or the output it becomes, with what to request instead.
- **moves between memory spaces**: ``copy-start``/``copy-done`` pairs and
  copies whose source and destination memory spaces differ (host offload to
  ``S(5)`` and back; on TPU XLA's own prefetches into VMEM).
"""

from __future__ import annotations

from typing import Dict, List, Optional, Tuple

from ..errors import XlaShapeError
from ..hlo_module import parse_entry_computation_layout
from ..padding import default_entry_layouts, format_text, origin_of
from ..shape import Shape
from ..shape_util import transpose_is_bitcast
from ..sizes import HOST_MEMORY_SPACE, buffers_of, memory_space_of, shape_text
from ..tiling import format_bytes
from .model import Donation, LayoutCopy, ModuleAudit, ModuleMemory, SpaceMove, space_label
from .records import CopyFacts, CopyRecord, EntryRecord, ModuleRecords

__all__ = ["audit_module"]

Index = Tuple[int, ...]


def _idx(index) -> str:
    return "{" + ",".join(map(str, index or ())) + "}"


def _entry_layout(entry: EntryRecord) -> Tuple[List[Optional[Shape]], Optional[Shape]]:
    """The compiled module's entry layout: each parameter's shape and the
    result's (the header's ``entry_computation_layout``; else the entry's
    parameters and root)."""
    if entry.layout is not None:
        return list(entry.layout[0]), entry.layout[1]
    text = entry.attributes.get("entry_computation_layout")
    if text:
        try:
            ecl = parse_entry_computation_layout(text)
            return list(ecl.parameters), ecl.result
        except XlaShapeError:
            pass
    n = max(entry.params) + 1 if entry.params else 0
    params = [entry.params[i][1] if i in entry.params else None for i in range(n)]
    return params, (entry.root[2] if entry.root is not None else None)


def _sub(shape: Optional[Shape], index: Index) -> Optional[Shape]:
    for i in index:
        if shape is None or not shape.is_tuple or not 0 <= i < len(shape.tuple_shapes):
            return None
        shape = shape.tuple_shapes[i]
    return shape


class _Sizes:
    """Byte sizes of buffers on the module's platform and chip."""

    def __init__(self, mm: ModuleMemory, opts):
        self.platform = mm.platform
        self.chip = mm.chip
        self.cache = opts.sizes

    def of(self, shape: Optional[Shape]) -> Tuple[Optional[int], Optional[int]]:
        if shape is None or shape.is_tuple or shape.is_token:
            return None, None
        size, unpadded, _ = self.cache.of(shape, self.platform, self.chip)
        return size, unpadded


class _Output:
    __slots__ = ("index", "shape", "size", "unpadded", "space")

    def __init__(self, index, shape, size, unpadded, space):
        self.index, self.shape, self.size, self.unpadded, self.space = (
            index, shape, size, unpadded, space)


def _no_layout(shape: Shape) -> Tuple:
    """What makes two arrays the same whatever their layouts: type and dimensions."""
    return (shape.element_type, tuple(shape.dimensions))


def _elements(shape: Shape) -> int:
    n = 1
    for d in shape.dimensions:
        n *= d
    return n


# -- donations ----------------------------------------------------------------------------


def _donations(rec: ModuleRecords, mm: ModuleMemory, sizes: _Sizes, audit: ModuleAudit) -> None:
    after = rec.entry
    before = rec.before
    params, result = _entry_layout(after)
    if before is not None:
        audit.donations_from = "before optimizations"
        marked = [(a.parameter_number, tuple(a.parameter_index), "input_output_alias")
                  for a in before.aliases]
        marked += [(d.parameter_number, tuple(d.parameter_index), "buffer_donor")
                   for d in before.donors]
    else:
        audit.donations_from = "after optimizations"
        marked = [(a.parameter_number, tuple(a.parameter_index), "input_output_alias")
                  for a in after.aliases]
        marked += [(d.parameter_number, tuple(d.parameter_index), "buffer_donor")
                   for d in after.donors]
        if marked:
            audit.notes.append(
                "the module before optimizations is not in the input (a dump has it as "
                "*before_optimizations.txt): the donations listed are the compiled module's "
                "aliases and the donors it left unused, which jax's marks normally are")
    seen = {}
    for p, index, how in marked:
        if (p, index) not in seen:
            seen[(p, index)] = how
    if not seen:
        return
    aliased: Dict[Tuple[int, Index], Index] = {}
    taker: Dict[Index, Tuple[int, Index]] = {}
    for a in after.aliases:
        aliased[(a.parameter_number, tuple(a.parameter_index))] = tuple(a.output_index)
        taker[tuple(a.output_index)] = (a.parameter_number, tuple(a.parameter_index))
    outputs: List[_Output] = []
    if result is not None:
        for index, sub in buffers_of(result):
            if sub.is_tuple:
                continue
            size, unpadded = sizes.of(sub)
            outputs.append(_Output(index, sub, size, unpadded, memory_space_of(sub)))
    dynamic = result is not None and _is_dynamic(result)
    for (p, index), how in sorted(seen.items()):
        shape = _sub(params[p] if 0 <= p < len(params) else None, index)
        size, unpadded = sizes.of(shape)
        out = aliased.get((p, index))
        why = reason = fix = None
        if out is None:
            why, reason, fix = _why_unused(p, index, shape, size, unpadded, outputs, taker,
                                           dynamic, sizes)
        audit.donations.append(Donation(p, index, shape_text(shape) if shape is not None else None,
                                        size, out is not None, out, reason, fix, how, why))


def _is_dynamic(shape: Shape) -> bool:
    if shape.is_tuple:
        return any(_is_dynamic(s) for s in shape.tuple_shapes)
    return bool(getattr(shape, "is_dynamic", False))


def _out_text(o: _Output) -> str:
    return f"output {_idx(o.index)}, {shape_text(o.shape)}"


def _why_unused(p: int, index: Index, shape: Optional[Shape], size: Optional[int],
                unpadded: Optional[int], outputs: List[_Output], taker, dynamic: bool,
                sizes: _Sizes) -> Tuple[str, str, Optional[str]]:
    """Why no output reuses parameter ``p``'s buffer at ``index`` (a word of
    :data:`~xlashape.memory.model.DONATION_WHY`, and a sentence), and what
    would make the donation usable (XLA's rule: see the module docstring)."""
    who = f"parameter {p}" + (_idx(index) if index else "")
    stop = f"or stop donating {who}: as the program is, no output can reuse it"
    if shape is None or size is None:
        return "unknown", f"{who} is not in the compiled module's entry layout", None
    if dynamic:
        return ("dynamic", "the result's shape is dynamic: XLA aliases no donated buffer to it",
                "give the outputs static shapes, " + stop)
    space = memory_space_of(shape)
    mine = [o for o in outputs if o.space == space]
    same = [o for o in mine if o.size == size]
    b = f"{size} bytes ({format_bytes(size)})" if size >= 1024 else f"{size} bytes"
    if same:
        free = [o for o in same if o.index not in taker]
        if free:
            return ("unexplained",
                    f"{_out_text(free[0])} takes the same {b} and reuses no parameter, yet the "
                    "compiled module does not alias them", None)
        took = ", ".join(
            f"output {_idx(o.index)} by parameter {taker[o.index][0]}"
            + (_idx(taker[o.index][1]) if taker[o.index][1] else "") for o in same[:4])
        more = f" and {len(same) - 4} more" if len(same) > 4 else ""
        return ("taken", f"every output of {b} is already taken: {took}{more} (XLA gives each output "
                "at most one donated buffer)",
                f"return one more output of {b} (any type or shape), " + stop)
    if not mine:
        elsewhere = [o for o in outputs if o.size == size]
        text = (f"no output is in memory space S({space}) ({space_label(space)}), where "
                "the parameter is: XLA reuses a donated buffer only for an output in its own "
                "memory space")
        if elsewhere:
            text += (f"; {_out_text(elsewhere[0])} has its {b} but is in "
                     f"S({elsewhere[0].space}) ({space_label(elsewhere[0].space)})")
        return ("memory-space", text, f"return an output of {b} in S({space}) (out_shardings with the "
                      f"argument's memory kind), " + stop)
    what = f"it takes {b}"
    rule = ("XLA reuses a donated buffer only for an output of exactly its byte size, "
            "padding included, whatever its type or shape")
    twin = [o for o in mine if _no_layout(o.shape) == _no_layout(shape)]
    if twin:
        o = twin[0]
        text = (f"{what}; {_out_text(o)}, the same array in another layout, takes {o.size} "
                f"bytes: {rule}")
        platform = sizes.platform
        out_origin = origin_of(o.shape, kind="output", platform=platform)
        par_origin = origin_of(shape, kind="parameter", platform=platform)
        if out_origin == "requested" and par_origin != "requested":
            fix = (f"request output {_idx(o.index)} in {who}'s layout {_plain(shape)} "
                   f"({format_text(shape.layout)}), or drop the output's requested layout")
        elif par_origin == "requested" and out_origin != "requested":
            fix = (f"request {who} in output {_idx(o.index)}'s layout {_plain(o.shape)} "
                   f"({format_text(o.shape.layout)}), or drop the parameter's requested layout")
        else:
            fix = (f"request output {_idx(o.index)} in {who}'s layout {_plain(shape)} "
                   f"({format_text(shape.layout)}), " + stop)
        return "layout", text, fix
    count = [o for o in mine if _elements(o.shape) == _elements(shape)]
    if count:
        o = count[0]
        if o.unpadded is not None and o.unpadded == unpadded:
            text = (f"{what}; {_out_text(o)}, holds the same {o.unpadded} bytes of data but "
                    f"takes {o.size} bytes, padded otherwise on this chip: {rule}")
            return "padding", text, (
                f"return output {_idx(o.index)} in the parameter's shape, "
                f"{_dims_text(shape)} (reshape it outside the jitted function), so that both "
                f"take {b}, " + stop)
        text = (f"{what}; {_out_text(o)}, has as many elements (so jax handed the donation to "
                f"XLA) but takes {o.size} bytes: {rule}")
        return "size", text, (
            f"return an output of {b} ({_dims_text(shape)} like the parameter, for instance: "
            "convert outside the jitted function), " + stop)
    return ("size", f"{what}; no output in memory space S({space}) takes as many: {rule}",
            f"return an output of {b} (any type or shape), " + stop)


def _dims_text(shape: Shape) -> str:
    """``f32[1000,3]``: a shape's type and dimensions without its layout."""
    text = shape_text(shape)
    return text[: text.index("{")] if "{" in text else text


def _plain(shape: Shape) -> str:
    """A shape's layout without its memory space, as XLA prints it."""
    layout = shape.layout
    return str(layout.replace(memory_space=0)) if layout is not None else "{}"


# -- copies ---------------------------------------------------------------------------------


def _relayout(src: Optional[Shape], dst: Optional[Shape], opcode: str,
              dims: Optional[Tuple[int, ...]]) -> Optional[bool]:
    """Whether an instruction from ``src`` to ``dst`` changes the layout:
    a copy between two layouts (the memory space aside), a transpose that
    moves elements. ``None`` when a shape is not known."""
    if src is None or dst is None or src.is_tuple or dst.is_tuple:
        return None
    if src.layout is None or dst.layout is None:
        return None
    a, b = src.layout.replace(memory_space=0), dst.layout.replace(memory_space=0)
    if opcode == "transpose":
        if dims is None or len(dims) != len(dst.dimensions):
            return True
        try:
            return not (transpose_is_bitcast(src, dst, dims, ignore_element_type=True)
                        and a.tiles == b.tiles)
        except XlaShapeError:
            return True
    return a != b


class _Trace:
    """The entry's parameters and outputs by the names that carry them:
    backwards from a copy's operand to the parameter it reads, forwards from
    a copy to the output it becomes (through bitcasts, tuple elements and
    copy-start/copy-done, :attr:`CopyFacts.forwards`)."""

    def __init__(self, entry: EntryRecord, facts: CopyFacts):
        self.forwards = facts.forwards
        self.params = {name: n for n, (name, _) in entry.params.items() if name}
        self.outputs: Dict[str, Index] = {}
        root = entry.root
        if root is not None:
            if root[1] == "tuple":
                for j, name in enumerate(root[3]):
                    self._mark(name, (j,))
            else:
                self._mark(root[0], ())

    def _mark(self, name: Optional[str], index: Index) -> None:
        steps = 0
        while name and name not in self.outputs and steps < 64:
            self.outputs[name] = index
            got = self.forwards.get(name)
            name = got[0] if got is not None and got[1] is None else None
            steps += 1

    def parameter(self, name: Optional[str]) -> Optional[Tuple[int, Index]]:
        """The entry parameter (number, tuple index) whose buffer ``name``
        reads, or ``None``."""
        index: List[int] = []
        steps = 0
        while name and name not in self.params and steps < 64:
            got = self.forwards.get(name)
            if got is None:
                return None
            name, i = got
            if i is not None:
                index.insert(0, i)
            steps += 1
        if name in self.params:
            return self.params[name], tuple(index)
        return None


def _copies(rec: ModuleRecords, mm: ModuleMemory, sizes: _Sizes, audit: ModuleAudit) -> None:
    facts = rec.copies
    if facts is None:
        return
    params, result = _entry_layout(rec.entry) if rec.entry is not None else ([], None)
    trace = _Trace(rec.entry, facts) if rec.entry is not None else None
    live = None
    if mm.peak is not None and mm.peak.live_at_peak is not None:
        live = {b.instruction for b in mm.peak.live_at_peak}
    done_of = {c.operand: c.name for c in facts.copies if c.opcode == "copy-done"}
    unknown = 0
    for c in facts.copies:
        op = c.opcode
        if op == "copy-done":
            continue
        if op == "copy-start":
            dst = c.shape.tuple_shapes[0] if c.shape.is_tuple and c.shape.tuple_shapes else None
            src = c.operand_shape if c.operand_shape is not None and not c.operand_shape.is_tuple \
                else (c.shape.tuple_shapes[1] if c.shape.is_tuple and len(c.shape.tuple_shapes) > 1
                      else None)
            if dst is None or src is None:
                continue
            _move(audit, c, src, dst, sizes, done_of.get(c.name))
            if _relayout(src, dst, "copy", None):
                _layout_copy(audit, c, "copy", src, dst, dst, sizes, trace, params, result, live,
                             done_of.get(c.name))
            continue
        if op == "fusion":
            src, dst, inner = c.wrapped_from, c.wrapped_to, c.wrapped
        else:
            src, dst, inner = c.operand_shape, c.shape, op
        if c.operand_shape is not None and not c.operand_shape.is_tuple and not c.shape.is_tuple \
                and memory_space_of(c.operand_shape) != memory_space_of(c.shape):
            _move(audit, c, c.operand_shape, c.shape, sizes, None)
        moved = _relayout(src, dst, inner, c.dimensions)
        if moved is None:
            unknown += 1
            continue
        if moved:
            _layout_copy(audit, c, inner, src, dst, c.shape, sizes, trace, params, result, live,
                         None)
    if unknown:
        audit.notes.append(f"{unknown} copies outside the entry computation could not be judged "
                           "(their operand's shape is not beside them in the text)")
    audit.layout_copies.sort(key=lambda x: (-(x.bytes or 0), x.instruction))


def _move(audit: ModuleAudit, c: CopyRecord, src: Shape, dst: Shape, sizes: _Sizes,
          done: Optional[str]) -> None:
    a, b = memory_space_of(src), memory_space_of(dst)
    if a == b:
        return
    kind = ("to-host" if b == HOST_MEMORY_SPACE else "from-host" if a == HOST_MEMORY_SPACE
            else "prefetch" if a == 0 else "eviction" if b == 0 else "move")
    audit.space_moves.append(SpaceMove(c.name, done, c.computation, sizes.of(dst)[0], a, b,
                                       c.operand, shape_text(dst), kind))


def _layout_copy(audit: ModuleAudit, c: CopyRecord, inner: str, src: Shape, dst: Shape,
                 result: Shape, sizes: _Sizes, trace: Optional[_Trace], params, out_shape,
                 live, done: Optional[str]) -> None:
    """One layout copy, with the entry layout that made it and the fix."""
    size = sizes.of(result)[0]
    at_peak = None if live is None else (c.name in live or (done is not None and done in live))
    platform = sizes.platform
    what = "transpose" if inner == "transpose" else "copy"
    made_by = requested = fix = None
    param = out = None
    if trace is not None and c.computation is None:
        param = trace.parameter(c.operand)
        out = trace.outputs.get(done or c.name)
    p_shape = _sub(params[param[0]], param[1]) if param is not None and param[0] < len(params) \
        else None
    o_shape = _sub(out_shape, out) if out is not None else None
    p_req = origin_of(p_shape, kind="parameter", platform=platform) == "requested" \
        if p_shape is not None else None
    o_req = origin_of(o_shape, kind="output", platform=platform) == "requested" \
        if o_shape is not None else None
    # which entry layout made it: the requested one when only one side was
    # requested; else the parameter it reads (its layout is what the program
    # could not use), else the output it becomes
    side = None
    if param is not None and out is not None:
        side = "output" if (o_req and not p_req) else "parameter"
    elif param is not None:
        side = "parameter"
    elif out is not None:
        side = "output"
    if side == "parameter":
        who = f"parameter {param[0]}" + (_idx(param[1]) if param[1] else "")
        made_by, requested = who, p_req
        how = "requested " if p_req else "default " if p_req is False else ""
        cause = (f"{who} arrives in its {how}layout {_plain(src)} and the program reads it in "
                 f"{_plain(dst)}: a {what}")
        fix = _fix_parameter(who, src, dst, inner, c.dimensions, platform, sizes)
        if out is not None and o_req:
            cause += f" (output {_idx(out)} is requested in {_plain(dst)} too)"
    elif side == "output":
        who = f"output {_idx(out)}"
        made_by, requested = who, o_req
        how = "requested " if o_req else "default " if o_req is False else ""
        cause = (f"the program computes {who} in {_plain(src)} and returns it in its {how}layout "
                 f"{_plain(dst)}: a {what}")
        fix = _fix_output(who, src, dst, o_shape, inner, c.dimensions, platform)
    else:
        where = "" if c.computation is None else f" in computation {c.computation}"
        cause = (f"a {what} from {_plain(src)} to {_plain(dst)} between two instructions{where}, "
                 "whose layouts XLA chose (no entry layout made it)")
    audit.layout_copies.append(LayoutCopy(
        c.name, c.opcode, c.computation, size, c.operand, shape_text(src), shape_text(dst),
        at_peak, made_by, requested, cause, fix))


def _bitcast_layout(dst: Shape, dims: Tuple[int, ...]):
    """The operand layout in which a transpose into ``dst`` by ``dims`` moves
    no element (a bitcast): the result's order of dimensions, mapped back."""
    return dst.layout.replace(minor_to_major=tuple(dims[r] for r in dst.layout.minor_to_major),
                              memory_space=0)


def _fix_parameter(who: str, src: Shape, dst: Shape, inner: str, dims, platform,
                   sizes: _Sizes) -> Optional[str]:
    if inner == "transpose":
        if dims is None:
            return None
        try:
            want = _bitcast_layout(dst, dims)
        except (XlaShapeError, IndexError):
            return None
    else:
        want = dst.layout.replace(memory_space=0)
    defaults = default_entry_layouts(src, platform, sizes.chip.name if sizes.chip else None) or []
    if want in defaults and src.layout.replace(memory_space=0) not in defaults:
        return (f"drop the requested layout of {who} (no Format for it): XLA's default {want} "
                "is the layout the program reads it in")
    return (f"request {who} in layout {want} ({format_text(want)}): the layout the program "
            "reads it in, so the argument arrives in it")


def _fix_output(who: str, src: Shape, dst: Shape, o_shape: Optional[Shape], inner: str, dims,
                platform) -> Optional[str]:
    if o_shape is None:
        return None
    if inner == "transpose":
        if dims is None:
            return None
        try:
            order = tuple(dims.index(d) for d in src.layout.minor_to_major)
            want = dst.layout.replace(minor_to_major=order, memory_space=0)
        except (XlaShapeError, ValueError):
            return None
    else:
        if _no_layout(src) != _no_layout(o_shape):
            return None      # the output is a reshape (a bitcast) of the copy's result
        want = src.layout.replace(memory_space=0)
    defaults = default_entry_layouts(o_shape, platform) or []
    if want in defaults and o_shape.layout.replace(memory_space=0) not in defaults:
        return (f"drop the requested layout of {who} (no Format for it): XLA's default {want} "
                "is the layout the program computes it in")
    return (f"request {who} in layout {want} ({format_text(want)}): the layout the program "
            "computes it in")


# -- the step -----------------------------------------------------------------------------


def audit_module(rec: ModuleRecords, mm: ModuleMemory, opts) -> Optional[ModuleAudit]:
    """The :class:`~xlashape.memory.model.ModuleAudit` of one module from its
    records and its model (``mm``: sizes on its platform and chip, the
    peak); ``None`` without an entry computation (an out-of-memory report, a
    buffer assignment alone)."""
    if rec.entry is None:
        return None
    audit = ModuleAudit()
    sizes = _Sizes(mm, opts)
    _donations(rec, mm, sizes, audit)
    _copies(rec, mm, sizes, audit)
    return audit
