"""What if: a module's memory figures after an edit, without compiling again.

An accounting step (:func:`what_if`, ``analyze(..., what_if=[...])``,
``xlashape memory DUMP --what-if EDIT``): the edits are applied to what the
dump says -- every value's size, which allocation holds it, which parameter
an output aliases -- and the temporaries are packed again with the heap
simulator of :mod:`xlashape.memory.packing`; the figures follow with XLA's
rules (:mod:`xlashape.memory.peak`). Edits (:func:`parse_edit`):

``undonate`` / ``undonate:N``
    the entry parameters (parameter ``N``) stop being aliased to outputs: each
    output they held gets an allocation of its own, and the temporaries XLA
    had put in the donated buffer go to the heap;
``donate:N``
    parameter ``N`` becomes aliased to the first output of its shape that no
    parameter holds: that output's allocation goes;
``dtype:FROM=TO``
    every buffer of element type ``FROM`` (``bf16``, ``f32``, ...) holds
    ``TO`` instead (on TPU with the tiling XLA gives ``TO`` where the buffer
    had XLA's default tiling for ``FROM``);
``layout:NAME=LAYOUT``
    instruction ``NAME``'s result takes ``LAYOUT`` (``{1,0:T(8,128)}`` or a
    whole shape ``f32[8,128]{1,0}``);
``drop:NAME``
    instruction ``NAME``'s buffers are gone (as rematerialization or a fusion
    would make them); refused for an entry parameter or a value of the
    program's output.

It is a prediction under stated assumptions (:data:`ASSUMPTIONS`): XLA keeps
the schedule, the fusions and the sharing decisions it made, and only the
edited sizes and aliasing change. An edit that cannot be applied under them
is refused with the reason, never guessed.
"""

from __future__ import annotations

import copy
import re
from typing import Callable, Dict, List, NamedTuple, Optional, Tuple

from ..allocation_kinds import PARAMETER, TEMPORARY, kind_of
from ..errors import HloParseError, ShapeValueError, XlaShapeError
from ..hlo_text import parse_layout, parse_shape
from ..primitive_types import PrimitiveType, primitive_type_from_name
from ..sizes import HOST_MEMORY_SPACE
from ..tiling import format_bytes
from .assignment import Buffers, check, first_pass
from .heapsim import trace_peak
from .model import WhatIf
from .operand_sharing import OperandSharing
from .packing import HeapModel
from .peak import PeakBuilder
from .sharing import MSA_COLORS
from .verdict import Verdict

__all__ = ["Edit", "parse_edit", "what_if", "ASSUMPTIONS", "judge_what_if", "EDIT_HELP",
           "fix_prediction", "refused_what_if"]

#: what every prediction assumes
ASSUMPTIONS = (
    "a prediction by xlashape, not XLA's report: XLA would compile the edited program again",
    "XLA keeps the same schedule, fusions and live ranges, and shares memory between the same "
    "values; only the edited buffers' sizes and the entry's aliasing change",
    "the temporaries are packed again by xlashape's copy of XLA's heap simulator",
    "on TPU, memory-space assignment keeps the same values in VMEM with the same live ranges",
)

EDIT_HELP = ("undonate, undonate:N, donate:N, dtype:FROM=TO (e.g. dtype:bf16=f32), "
             "layout:NAME=LAYOUT (e.g. layout:fusion.3={1,0:T(8,128)}), drop:NAME")

_EDIT = re.compile(r"(undonate|donate|dtype|layout|drop)(?::(.*))?$", re.S)


class Edit(NamedTuple):
    """One parsed edit: ``kind`` (``undonate``, ``donate``, ``dtype``,
    ``layout``, ``drop``), the ``text`` the user wrote, and its arguments:
    ``number`` (a parameter), ``name`` (an instruction), ``source`` /
    ``target`` (element types), ``layout`` (text)."""

    kind: str
    text: str
    number: Optional[int] = None
    name: Optional[str] = None
    source: Optional[PrimitiveType] = None
    target: Optional[PrimitiveType] = None
    layout: Optional[str] = None


def _primitive(text: str, edit: str) -> PrimitiveType:
    try:
        t = primitive_type_from_name(text.strip().lower())
    except XlaShapeError:
        t = None
    if t is None:
        raise ShapeValueError(f"what-if {edit!r}: {text!r} is not an XLA element type "
                              "(bf16, f16, f32, f64, s8, s32, u8, pred, ...)")
    return t


def parse_edit(text) -> Edit:
    """The :class:`Edit` of ``text``; raises
    :class:`~xlashape.ShapeValueError` (a ``ValueError``) naming what is
    wrong."""
    if isinstance(text, Edit):
        return text
    if not isinstance(text, str):
        raise ShapeValueError(f"a what-if edit is text ({EDIT_HELP}), not {type(text).__name__}")
    s = text.strip()
    m = _EDIT.match(s)
    if not m:
        raise ShapeValueError(f"what-if {text!r}: expected one of {EDIT_HELP}")
    kind, arg = m.group(1), m.group(2)
    if kind in ("undonate", "donate"):
        if arg is None or arg == "":
            if kind == "donate":
                raise ShapeValueError(f"what-if {text!r}: donate needs the parameter: donate:N")
            return Edit(kind, s)
        if not arg.strip().isdigit() or len(arg.strip()) > 9:
            raise ShapeValueError(f"what-if {text!r}: {kind}:N takes a parameter number")
        return Edit(kind, s, number=int(arg))
    if not arg:
        raise ShapeValueError(f"what-if {text!r}: {kind} needs an argument ({EDIT_HELP})")
    if kind == "drop":
        return Edit(kind, s, name=arg.strip().lstrip("%"))
    left, eq, right = arg.partition("=")
    if not eq or not left.strip() or not right.strip():
        raise ShapeValueError(f"what-if {text!r}: expected {kind}:A=B ({EDIT_HELP})")
    if kind == "dtype":
        return Edit(kind, s, source=_primitive(left, s), target=_primitive(right, s))
    right = right.strip()
    try:
        if right.startswith("{"):
            parse_layout(right)
        else:
            parse_shape(right)
    except (HloParseError, XlaShapeError) as e:
        raise ShapeValueError(f"what-if {text!r}: {right!r} is neither a layout nor a shape "
                              f"({e})") from None
    return Edit(kind, s, name=left.strip().lstrip("%"), layout=right)


class _Alloc:
    """One allocation that is not temporary, as the edits leave it."""

    __slots__ = ("index", "kind", "color", "ids", "live_out", "param", "thread_local",
                 "size", "touched")

    def __init__(self, a):
        self.index = a.index
        self.kind = kind_of(a)
        self.color = a.color
        self.ids = [v.id for v in a.values]
        self.live_out = a.maybe_live_out
        self.param = (a.parameter_number, tuple(a.parameter_index or ())) \
            if a.parameter_number is not None else None
        self.thread_local = a.is_thread_local
        self.size = a.size
        self.touched = False


class _State:
    """The module as the edits leave it: value sizes, the allocations that
    are not temporary, the values the heap packs per memory space, and the
    values gone."""

    def __init__(self, model: HeapModel, replay: bool = False):
        self.model = model
        self.replay = replay
        entry = model.rec.entry
        self.aliases = [(a.parameter_number, tuple(a.parameter_index), tuple(a.output_index))
                        for a in (entry.aliases if entry is not None else ())]
        self.size: Dict[int, int] = {vid: v.size for vid, v in model.values.items()}
        self.allocs: List[_Alloc] = [_Alloc(a) for a in model.rec.allocations
                                     if kind_of(a) != TEMPORARY]
        self.heap_ids = model.heap_ids() if model.layout is not None else {}
        self.dropped: set = set()
        self.units_changed = False
        self.unedited = False             # set by _base_figures: no edit applied
        #: the values' live ranges as the edits leave them (the dump's until
        #: an edit moves one: :func:`_evictions`)
        self.ranges: Dict[int, Tuple[int, int]] = model.ranges

    def alloc_size(self, a: _Alloc) -> int:
        ids = [i for i in a.ids if i not in self.dropped]
        if not ids:
            return 0
        if not a.touched:
            return a.size
        return max(self.size[i] for i in ids)


def _values_named(model: HeapModel, name: str) -> List[int]:
    return [vid for vid, v in model.values.items() if v.name == name]


def _kept_by_caller(model: HeapModel, ids) -> Optional[str]:
    """Why the values ``ids`` cannot be dropped (an entry parameter, the
    program's output: a value at the entry's root, the root's tuple too), or
    ``None``: from the values file's positions, else from the
    allocations' parameter mark."""
    entry = model.rec.entry
    root = entry.root[0] if entry is not None and entry.root is not None else None
    params = {name for name, _ in entry.params.values()} if entry is not None else set()
    records = model.value_records or {}
    parameter_values = {v.id for a in model.rec.allocations or () if kind_of(a) == PARAMETER
                        for v in a.values}
    for vid in ids:
        r = records.get(vid)
        if r is None:
            if vid in parameter_values:
                return "an entry parameter (the caller gives it)"
            continue
        if r.opcode == "parameter" and r.positions and r.positions[0][0] in params:
            return "an entry parameter (the caller gives it)"
        if root is not None and any(p[0] == root for p in r.positions):
            return "the program's output (the caller takes it)"
    return None


def _resized(shape, target: PrimitiveType, platform: Optional[str], chip):
    """``shape`` holding ``target`` elements (on TPU with the tiling XLA gives
    ``target`` where ``shape`` has XLA's default tiling), or ``None``."""
    from ..tpu import default_layout    # the TPU layouts only where a TPU dtype edit needs them
    new = shape.replace(element_type=target)
    layout = shape.layout
    if platform == "tpu" and layout is not None and layout.tiles:
        name = (chip.name if chip is not None else None) or "v5e"
        try:
            old_default = default_layout(shape.without_layout(), name)
            new_default = default_layout(new.without_layout(), name)
        except XlaShapeError:
            return None
        if tuple(layout.tiles) == tuple(old_default.tiles):
            new = new.with_layout(layout.replace(
                tiles=new_default.tiles, element_size_in_bits=new_default.element_size_in_bits))
        else:
            return None
    return new


def _apply(state: _State, edit: Edit, out: WhatIf, mm, opts) -> None:
    model = state.model
    rec = model.rec
    platform = mm.platform
    sizes = opts.sizes
    chip = mm.chip
    if edit.kind in ("undonate", "donate"):
        _aliasing(state, edit, out)
        return
    if edit.kind == "drop":
        ids = _values_named(model, edit.name)
        if not ids:
            out.refused.append(f"{edit.text}: no buffer of the buffer assignment is defined by "
                               f"{edit.name!r}")
            return
        kept = _kept_by_caller(model, ids)
        if kept is not None:
            out.refused.append(f"{edit.text}: {edit.name} is {kept}: neither rematerialization "
                               "nor a fusion removes it")
            return
        state.dropped.update(ids)
        for a in state.allocs:
            if any(i in state.dropped for i in a.ids):
                a.touched = True
        gone = sum(state.size[i] for i in ids)
        out.applied.append(f"{edit.text}: {len(ids)} buffer(s) of {edit.name} gone "
                           f"({gone} bytes)")
        return
    if edit.kind == "layout":
        ids = _values_named(model, edit.name)
        ids = [i for i in ids if model.values[i].index == ()]
        if not ids:
            out.refused.append(f"{edit.text}: no buffer of the buffer assignment is defined by "
                               f"{edit.name!r}")
            return
        for vid in ids:
            v = model.values[vid]
            if v.shape is None or not v.shape.is_array:
                out.refused.append(f"{edit.text}: {v.label} is not an array ({v.shape_text})")
                return
            try:
                if edit.layout.startswith("{"):
                    new = v.shape.with_layout(parse_layout(edit.layout))
                else:
                    new = parse_shape(edit.layout)
                    if new.without_layout() != v.shape.without_layout():
                        out.refused.append(f"{edit.text}: {new.without_layout()} is not the "
                                           f"shape of {v.label} ({v.shape.without_layout()})")
                        return
            except (HloParseError, XlaShapeError) as e:
                out.refused.append(f"{edit.text}: {e}")
                return
            size, _, problem = sizes.of(new, platform, chip)
            if size is None:
                out.refused.append(f"{edit.text}: xlashape cannot size {new}: {problem}")
                return
            _resize(state, vid, size)
            out.applied.append(f"{edit.text}: {v.label} {v.size} -> {size} bytes")
        return
    # dtype
    n = 0
    delta = 0
    kept = []
    for vid, v in model.values.items():
        if v.shape is None or v.shape.is_tuple or not v.shape.is_array:
            continue
        if v.shape.element_type is not edit.source:
            continue
        new = _resized(v.shape, edit.target, platform, chip)
        if new is None:
            kept.append(v.label)
            continue
        size, _, problem = sizes.of(new, platform, chip)
        if size is None:
            kept.append(v.label)
            continue
        if size != state.size[vid]:
            delta += size - state.size[vid]
            _resize(state, vid, size)
        n += 1
    if n == 0 and not kept:
        out.refused.append(f"{edit.text}: no buffer holds {_tname(edit.source)}")
        return
    change = ("-" if delta < 0 else "+") + format_bytes(abs(delta))
    out.applied.append(f"{edit.text}: {n} buffers re-sized ({change} over all of them, "
                       f"{delta:+d} bytes)")
    gone = _noop_converts(state, edit)
    if gone:
        out.applied.append(f"{edit.text}: {len(gone)} conversions between "
                           f"{_tname(edit.source)} and {_tname(edit.target)} become no-ops XLA "
                           f"removes ({', '.join(gone[:4])}{' ...' if len(gone) > 4 else ''})")
    if kept:
        out.refused.append(
            f"{edit.text}: {len(kept)} buffers have a layout XLA:TPU chose for "
            f"{_tname(edit.source)} other than its default (the first: {kept[0]}): which "
            f"tiling it would give {_tname(edit.target)} is not known, they keep their size")


def _convert_chain(model: HeapModel, ins) -> Optional[List[PrimitiveType]]:
    """The element types along an instruction that only converts one operand
    (a ``convert``, or a fusion whose body is converts and bitcasts of its
    one parameter): ``[operand type, each convert's type...]``, else
    ``None``."""
    instructions, computations = model.rec.facts.module()
    if ins.opcode == "convert":
        src = instructions.get(ins.operand_names[0].split("#")[0]) if ins.operand_names else None
        if src is None or src.shape is None or not src.shape.is_array:
            return None
        return [src.shape.element_type, ins.shape.element_type]
    if ins.opcode != "fusion" or not ins.called_computations or len(ins.operand_names) != 1:
        return None
    body = computations.get(ins.called_computations[0])
    if body is None:
        return None
    chain = []
    for i in body.instructions:
        if i.opcode == "parameter":
            if i.shape is None or not i.shape.is_array:
                return None
            chain.insert(0, i.shape.element_type)
        elif i.opcode == "convert":
            chain.append(i.shape.element_type)
        elif i.opcode != "bitcast":
            return None
    return chain if len(chain) >= 2 else None


def _noop_converts(state: _State, edit: Edit) -> List[str]:
    """Drop the values of conversions that the element-type edit makes no-ops
    (every type along them ``FROM`` or ``TO``): XLA's simplifier removes them.
    A live-out one stays (it is the output) and its operand's value goes
    instead: the producer writes the output."""
    model = state.model
    if model.rec.facts is None or model.rec.facts.module() is None:
        return []
    instructions = model.rec.facts.module()[0]
    values = model.value_records
    root = model.rec.entry.root[0] if model.rec.entry and model.rec.entry.root else None
    names = []
    for vid, v in model.values.items():
        if v.index != () or vid in state.dropped:
            continue
        ins = instructions.get(v.name)
        if ins is None:
            continue
        chain = _convert_chain(model, ins)
        if chain is None or not any(t is edit.source for t in chain):
            continue
        if not all(t is edit.source or t is edit.target for t in chain):
            continue
        r = values.get(vid)
        if r is not None and any(p[0] == root for p in r.positions):
            src = [i for i, w in model.values.items()
                   if w.name == ins.operand_names[0].split("#")[0] and w.index == ()
                   and not (values.get(i) and values[i].opcode == "parameter")]
            state.dropped.update(src)
        else:
            state.dropped.add(vid)
        names.append(v.name)
    return names


def _tname(t: PrimitiveType) -> str:
    return str(t)


def _resize(state: _State, vid: int, size: int) -> None:
    state.size[vid] = size
    for a in state.allocs:
        if vid in a.ids:
            a.touched = True
    state.units_changed = True


def _aliasing(state: _State, edit: Edit, out: WhatIf) -> None:
    if state.replay:
        _aliasing_replay(state, edit, out)
        return
    model = state.model
    rec = model.rec
    entry = rec.entry
    aliases = list(entry.aliases) if entry is not None else []
    values = model.value_records
    root = entry.root[0] if entry is not None and entry.root is not None else None
    params = {a.param: a for a in state.allocs if a.param is not None}

    def own(a: _Alloc) -> set:
        """The values of a parameter's own XLA buffer (the parameter itself)."""
        pname = entry.params.get(a.param[0], (None,))[0]
        return {i for i in a.ids if values.get(i) is not None and values[i].positions
                and values[i].positions[0] == (pname, a.param[1])}

    if edit.kind == "undonate":
        chosen = [x for x in aliases if edit.number is None or x.parameter_number == edit.number]
        if not chosen:
            out.refused.append(f"{edit.text}: " + ("no parameter is donated" if edit.number is None
                               else f"parameter {edit.number} is not donated"))
            return
        for al in chosen:
            a = params.get((al.parameter_number, tuple(al.parameter_index)))
            if a is None or not a.live_out:
                out.refused.append(f"{edit.text}: parameter {al.parameter_number}'s allocation "
                                   "is not aliased in the buffer assignment")
                continue
            keep = own(a)
            moved = [i for i in a.ids if i not in keep]
            outputs = [i for i in moved if values.get(i) is not None and values[i].positions
                       and any(p[0] == root for p in values[i].positions)]
            out_group = set(outputs)
            find = model.find
            keys = {find(i) for i in outputs}
            out_group |= {i for i in moved if find(i) in keys}
            temps = [i for i in moved if i not in out_group]
            a.ids = [i for i in a.ids if i in keep]
            a.live_out = False
            a.touched = True
            na = copy.copy(a)
            na.index = None
            na.kind = "output"
            na.ids = sorted(out_group)
            na.live_out = True
            na.param = None
            state.allocs.append(na)
            for i in temps:
                state.heap_ids.setdefault(a.color, []).append(i)
            state.units_changed = True
            evicted = _evictions(state, out_group)
            if evicted:
                out.applied.append(_eviction_note(edit, evicted))
            out.applied.append(
                f"{edit.text}: parameter {al.parameter_number} no longer aliased; its output "
                f"gets an allocation of its own ({state.alloc_size(na)} bytes)"
                + (f"; {len(temps)} temporaries XLA had put in the donated buffer go to the heap"
                   if temps else ""))
        return
    # donate:N
    n = edit.number
    cands = [a for a in state.allocs if a.param is not None and a.param[0] == n]
    if not cands:
        out.refused.append(f"{edit.text}: the module has no parameter {n}")
        return
    if any(a.live_out for a in cands):
        out.refused.append(f"{edit.text}: parameter {n} is already donated")
        return
    if len(cands) > 1:
        out.refused.append(f"{edit.text}: parameter {n} is a tuple of buffers: donate its "
                           "elements in JAX and compile again")
        return
    p = cands[0]
    pshape = _shape_of(model, own(p))
    taken = {(x.output_index and tuple(x.output_index)) for x in aliases}
    best = None
    for a in state.allocs:
        if a.kind != "output" or a.color != p.color or a.param is not None:
            continue
        oshape = _shape_of(model, [i for i in a.ids if values.get(i) is not None
                                   and any(q[0] == root for q in values[i].positions)])
        if oshape is None or pshape is None or oshape != pshape:
            continue
        if state.alloc_size(a) != state.alloc_size(p):
            continue
        best = a
        break
    if best is None:
        out.refused.append(f"{edit.text}: no output has parameter {n}'s shape "
                           f"({pshape}) and an allocation of its own")
        return
    state.allocs.remove(best)
    p.ids = p.ids + best.ids
    p.live_out = True
    p.touched = True
    state.units_changed = True
    out.applied.append(f"{edit.text}: parameter {n} aliased to the output in allocation "
                       f"{best.index} ({state.alloc_size(p)} bytes)")
    del taken


def _eviction_note(edit, evicted: List[str]) -> str:
    """What ``undonate`` does to an output that memory-space assignment
    evicted from VMEM into the donated buffer."""
    return (f"{edit.text}: the output was copied from VMEM into the donated buffer "
            f"({', '.join(evicted)}: memory-space assignment's eviction); without the "
            "donation its producer writes it in device memory, as XLA:TPU does: the "
            "VMEM buffer and the copy go")


def _evictions(state: _State, outputs) -> List[str]:
    """Outputs memory-space assignment copied from its memory (VMEM) into a
    donated buffer (``copy-start`` of a VMEM value): the VMEM value, the copy's
    other buffers (its tuple table, its sync flag) are dropped. Returns the
    copies' names."""
    model = state.model
    values = model.value_records
    msa = MSA_COLORS.get(model.platform or "", ())
    names = []
    for vid in outputs:
        r = values.get(vid)
        if r is None or r.opcode != "copy-start" or not r.positions or not r.operands:
            continue
        copy_name = r.positions[0][0]
        src = [i for i, v in model.values.items() if v.name == r.operands[0] and v.index == ()
               and v.color in msa]
        if not src:
            continue
        # the producer writes the output where the VMEM value was made: the
        # output lives from there (a temporary that ended there no longer
        # takes its memory)
        starts = [state.ranges[i][0] for i in src if i in state.ranges]
        if starts and vid in state.ranges and min(starts) < state.ranges[vid][0]:
            if state.ranges is model.ranges:
                state.ranges = dict(model.ranges)
            state.ranges[vid] = (min(starts), state.ranges[vid][1])
        state.dropped.update(src)
        state.dropped.update(i for i, v in model.values.items()
                             if v.name == copy_name and i != vid)
        names.append(copy_name)
    return names


def _aliasing_replay(state: _State, edit: Edit, out: WhatIf) -> None:
    """Undonate / donate by changing the entry's aliasing and replaying XLA's
    assignment pass (:mod:`xlashape.memory.assignment`)."""
    model = state.model
    entry = model.rec.entry
    values = model.value_records
    if edit.kind == "undonate":
        gone = [x for x in state.aliases if edit.number is None or x[0] == edit.number]
        if not gone:
            out.refused.append(f"{edit.text}: " + ("no parameter is donated" if edit.number is None
                               else f"parameter {edit.number} is not donated"))
            return
        state.aliases = [x for x in state.aliases if x not in gone]
        root = entry.root[0] if entry is not None and entry.root is not None else None
        pairs = [f"parameter {n}" + (f"{{{','.join(map(str, pidx))}}}" if pidx else "")
                 + f" -> output {{{','.join(map(str, oidx))}}}" for n, pidx, oidx in gone]
        out.applied.append(f"{edit.text}: no longer aliased: " + ", ".join(pairs))
        for n, pidx, oidx in gone:
            outs = [vid for vid, r in values.items()
                    if any(p[0] == root and tuple(p[1]) == tuple(oidx) for p in r.positions)]
            evicted = _evictions(state, outs)
            if evicted:
                out.applied.append(_eviction_note(edit, evicted))
        return
    n = edit.number
    if entry is None or n not in entry.params:
        out.refused.append(f"{edit.text}: the module has no parameter {n}")
        return
    if any(x[0] == n for x in state.aliases):
        out.refused.append(f"{edit.text}: parameter {n} is already donated")
        return
    pname, pshape = entry.params[n]
    if pshape is None or pshape.is_tuple:
        out.refused.append(f"{edit.text}: parameter {n} is a tuple of buffers: donate its "
                           "elements in JAX and compile again")
        return
    root = entry.root[0] if entry.root is not None else None
    taken = {x[2] for x in state.aliases}
    found = None
    for vid in sorted(values):
        for name, idx in values[vid].positions:
            if name != root or tuple(idx) in taken:
                continue
            v = model.values.get(vid)
            if v is None or v.shape is None or v.shape != pshape:
                continue
            if found is None or tuple(idx) < found:
                found = tuple(idx)
    if found is None:
        out.refused.append(f"{edit.text}: no output of parameter {n}'s shape ({pshape}) that no "
                           "parameter holds")
        return
    state.aliases.append((n, (), found))
    out.applied.append(f"{edit.text}: parameter {n} aliased to output "
                       f"{{{','.join(map(str, found))}}}")


def _shape_of(model: HeapModel, ids) -> Optional[object]:
    for i in ids:
        v = model.values.get(i)
        if v is not None and v.shape is not None:
            return v.shape
    return None


class _Figures(NamedTuple):
    figures: Dict[str, Optional[int]]
    device_peak: Optional[int]
    reasons: Dict[str, str]


def _replayed(state: _State):
    """XLA's assignment pass replayed with the edits: its allocations and the
    values it leaves to the heap."""
    model = state.model
    rec = model.rec
    buffers = Buffers(rec, model.value_records, rec.facts.module(), model.find,
                      size_of=state.size.__getitem__, aliases=state.aliases,
                      positions=getattr(model.layout, "positions", None))
    sharing = model.sharing or OperandSharing(model.value_records, rec.facts.module(),
                                              model.platform)
    allocs, deferred = first_pass(buffers, state.ranges, sharing, rec.live.sequence,
                                  dropped=state.dropped,
                                  preset_colors=MSA_COLORS.get(model.platform or "", ()))
    return buffers, allocs, deferred


def _replay_valid(model: HeapModel) -> Optional[str]:
    """``None`` when replaying XLA's assignment pass on the unedited module
    gives the dump's allocations, else why not."""
    if model.reason is not None or model.find is None:
        return model.reason or "the values file and the module text are needed"
    try:
        buffers, allocs, deferred = _replayed(_State(model))
    except (KeyError, XlaShapeError) as e:
        return f"the replay failed ({e})"
    model._unedited_replay = (buffers, allocs, deferred)
    why = check(model.rec, buffers, allocs, deferred)
    if why is not None:
        return why
    heap = {i for ids in model.heap_ids().values() for i in ids}
    if set(deferred) != heap:
        return "the replay leaves other values to the heap simulator than the dump's"
    return None


def _base_figures(model: HeapModel, mm, opts, replay: bool) -> _Figures:
    """:func:`_figures` of the unedited module, computed once per model (the
    replay of :func:`_replay_valid` reused)."""
    cache = model.__dict__.setdefault("_base_figures", {})
    if replay not in cache:
        state = _State(model, replay)
        state.unedited = True
        cache[replay] = _figures(state, mm, opts, getattr(model, "_unedited_replay", None))
    return cache[replay]


def _figures(state: _State, mm, opts, replayed=None) -> _Figures:
    """XLA's figures of the edited module (see the module docstring);
    ``replayed``: :func:`_replayed` of ``state`` if known."""
    if state.replay:
        buffers, allocs, deferred = replayed or _replayed(state)
        statics = []
        for a in allocs:
            if a.kind == "tuple" and not a.live_out:
                continue
            statics.append((a.kind == "parameter", a.live_out, a.color, a.size, a.ids, False))
        replayed = {i for a in allocs for i in a.ids}
        for a in state.model.rec.allocations:
            k = kind_of(a)
            if k == TEMPORARY or any(v.id in replayed for v in a.values):
                continue
            ids = [v.id for v in a.values]
            statics.append((False, a.maybe_live_out, a.color,
                            max((state.size[i] for i in ids), default=0), ids,
                            a.is_thread_local))
        heap_ids: Dict[int, List[int]] = {}
        for i in deferred:
            heap_ids.setdefault(buffers.ba[i].color, []).append(i)
        return _figures_of(state, mm, statics, heap_ids)
    statics = [(a.kind == PARAMETER, a.live_out, a.color, state.alloc_size(a), a.ids,
                a.thread_local) for a in state.allocs]
    heap_ids = {c: list(ids) for c, ids in state.heap_ids.items()}
    return _figures_of(state, mm, statics, heap_ids)


def _figures_of(state: _State, mm, statics, heap_ids) -> _Figures:
    """The figures from the allocations that are not temporary (``statics``:
    ``(is parameter, live out, color, size, value ids, thread-local)``) and
    the values the heap packs per memory space."""
    model = state.model
    platform = mm.platform
    host = HOST_MEMORY_SPACE if platform != "cpu" else None
    f: Dict[str, Optional[int]] = {k: 0 for k in WhatIf.FIELDS}
    reasons: Dict[str, str] = {}
    fixed: Dict[int, int] = {}
    for is_param, live_out, color, size, ids, thread_local in statics:
        ids = [i for i in ids if i not in state.dropped]
        if not ids:
            continue
        if is_param and color != host:
            f["argument_size_in_bytes"] += size
            if live_out:
                f["alias_size_in_bytes"] += size
        if live_out and color != host:
            f["output_size_in_bytes"] += size
        if thread_local:
            continue
        fixed[color] = fixed.get(color, 0) + max(state.size[i] for i in ids)
    size_of = state.size.__getitem__
    heap_ids = {c: [i for i in ids if i not in state.dropped] for c, ids in heap_ids.items()}
    if model.reason is not None:
        packed = {}
    elif state.unedited and _same_heaps(heap_ids, model.heap_ids()):
        packed = model.pack()              # the dump's sizes: the packing --packing made
    else:
        packed = model.pack(size_of=size_of, heap_ids=heap_ids,
                            ranges=None if state.ranges is model.ranges else state.ranges)
    temp = 0
    heap_peak: Dict[int, int] = {}
    temp_known = model.reason is None
    for color, cp in packed.items():
        if cp.reason is not None:
            if color in MSA_COLORS.get(platform or "", ()):
                got = _msa_peak(state, mm, color)
                if got is None:
                    reasons["peak_memory_in_bytes"] = ("memory-space assignment's heap (VMEM) "
                                                       "could not be replayed")
                else:
                    heap_peak[color] = got
                continue
            temp_known = False
            reasons.setdefault("temp_size_in_bytes", cp.reason)
            reasons.setdefault("peak_memory_in_bytes", cp.reason)
            continue
        if color != host:
            temp += cp.size or 0
        if cp.events:
            heap_peak[color] = trace_peak(cp.events, {i: size_of(i) for i in cp.heap_ids})[0]
    if model.reason is not None:
        reasons["temp_size_in_bytes"] = reasons["peak_memory_in_bytes"] = model.reason
    if platform == "tpu":
        f["temp_size_in_bytes"] = None
        reasons["temp_size_in_bytes"] = ("XLA:TPU takes it from libtpu's allocator, which runs "
                                         "after the buffer assignment")
    elif temp_known:
        f["temp_size_in_bytes"] = temp
    else:
        f["temp_size_in_bytes"] = None
    static = sum(fixed.values())
    device_peak = None
    if platform == "cpu":
        # XLA:CPU's figure leaves the temporaries out; device memory holds
        # them too, at their heap's highest point (the module's own peak: peak.py)
        f["peak_memory_in_bytes"] = static
        device_peak = fixed.get(0, 0) + heap_peak.get(0, 0) if temp_known else None
    elif "peak_memory_in_bytes" in reasons:
        f["peak_memory_in_bytes"] = None
    else:
        f["peak_memory_in_bytes"] = static + max(heap_peak.values(), default=0)
        device_peak = fixed.get(0, 0) + heap_peak.get(0, 0)
    return _Figures(f, device_peak, reasons)


def _same_heaps(a: Dict[int, List[int]], b: Dict[int, List[int]]) -> bool:
    """Whether two ``color -> value ids`` hold the same values per memory
    space (the heap simulator orders them itself)."""
    keys = {c for c, ids in a.items() if ids} | {c for c, ids in b.items() if ids}
    return all(set(a.get(c, ())) == set(b.get(c, ())) for c in keys)


def _msa_peak(state: _State, mm, color: int) -> Optional[int]:
    """The highest point of memory-space assignment's heap of ``color`` with
    the values' sizes as edited (its trace rule: :class:`PeakBuilder`)."""
    model = state.model
    rec = model.rec
    temps = [a for a in model.temps if a.color == color]
    if not temps or rec.live is None:
        return None
    builder = PeakBuilder(rec.live, mm.platform, facts=rec.facts)
    offset = 0
    for a in temps:
        b = copy.copy(a)
        vals = []
        for v in a.values:
            if v.id in state.dropped:
                continue
            size = state.size.get(v.id, v.size)
            vals.append(v._replace(size=size, offset=offset))
            offset += size + 1
        b.values = vals
        b.size = offset
        try:
            builder.add(b)
        except XlaShapeError:
            return None
    if builder.undecided is not None:
        return None
    return max((h.best for h in builder.heaps), default=0)


def _replay_of(model: HeapModel) -> Optional[str]:
    """:func:`_replay_valid`, computed once per model."""
    if not hasattr(model, "_replay_why"):
        model._replay_why = _replay_valid(model)
    return model._replay_why


def what_if(mm, rec, edits, opts, model: Optional[HeapModel] = None) -> WhatIf:
    """The :class:`~xlashape.memory.model.WhatIf` of ``edits`` (texts or
    :class:`Edit`) on a module (``mm``, the model so far; ``rec``, its
    records)."""
    parsed = [e if isinstance(e, Edit) else parse_edit(e) for e in edits]
    out = WhatIf([e.text for e in parsed])
    out.assumptions = [a for a in ASSUMPTIONS if mm.platform == "tpu" or "on TPU" not in a]
    if rec.allocations is None:
        out.refused = [f"{e.text}: the input has no buffer assignment (give the dump: "
                       "XLA_FLAGS=--xla_dump_to=DIR)" for e in parsed]
        for k in WhatIf.FIELDS:
            out.after[k] = None
            out.reasons[k] = "no buffer assignment"
        return out
    model = model if model is not None else HeapModel(rec, mm.platform)
    why = _replay_of(model)
    replay = why is None
    if not replay:
        out.assumptions.append(
            "XLA's assignment pass is not replayed for this module (" + why + "): the values "
            "that shared an allocation with a parameter or an output stay where the dump has "
            "them (an undonated output's own values take an allocation of their own, the "
            "temporaries that were in the donated buffer go to the heap)")
    base = _base_figures(model, mm, opts, replay)
    out.before = dict(base.figures)
    out.before["device_memory_peak_bytes"] = base.device_peak
    state = _State(model, replay)
    for e in parsed:
        _apply(state, e, out, mm, opts)
    got = _figures(state, mm, opts)
    out.after = dict(got.figures)
    out.after["device_memory_peak_bytes"] = got.device_peak
    out.reasons = dict(got.reasons)
    xla = mm.peak.figures.get("peak_memory_in_bytes") if mm.peak is not None else None
    mine = base.figures.get("peak_memory_in_bytes")
    if xla is not None and mine is not None and xla != mine:
        out.assumptions.append(f"xlashape's replay of the unedited module gives "
                               f"peak_memory_in_bytes {mine}, XLA's is {xla}: the prediction "
                               "carries that difference")
    return out


def refused_what_if(edits, why: str) -> WhatIf:
    """A :class:`~xlashape.memory.model.WhatIf` that could not be made:
    every edit refused with ``why``, every figure ``None``."""
    parsed = [e if isinstance(e, Edit) else parse_edit(e) for e in edits]
    out = WhatIf([e.text for e in parsed])
    out.refused = [f"{e.text}: {why}" for e in parsed]
    for k in WhatIf.FIELDS:
        out.after[k] = None
        out.reasons[k] = why
    return out


def judge_what_if(w: WhatIf, limit_bytes: int, limit_name: str, *,
                  limit_basis: Optional[str] = None, device_platform: Optional[str] = None,
                  module_platform: Optional[str] = None) -> Optional[Verdict]:
    """The :class:`~xlashape.memory.verdict.Verdict` of a prediction: its
    device-memory peak (its ``peak_memory_in_bytes`` when that is the same)
    against ``limit_bytes``; ``limit_basis``, ``device_platform`` and
    ``module_platform`` as :func:`~xlashape.memory.verdict.judge` gives
    them."""
    dev = w.after.get("device_memory_peak_bytes")
    peak = w.after.get("peak_memory_in_bytes")
    if dev is None and peak is None:
        return None
    if dev is None or dev == peak:
        peak_name = "peak_memory_in_bytes"
    else:
        peak, peak_name = dev, "device_memory_peak_bytes"
    return Verdict(peak, limit_bytes, peak_name, limit_name, limit_basis, device_platform,
                   module_platform)


def fix_prediction(mm, rec, allocation_index: int, size_in_bytes: int, opts,
                   model: Optional[HeapModel] = None) -> Optional[Tuple[int, str, Optional[int]]]:
    """``(peak after, its name, the same peak before)`` if the values of
    allocation ``allocation_index`` took ``size_in_bytes`` (a padding fix):
    XLA's ``peak_memory_in_bytes`` rule, or ``device_memory_peak_bytes``
    where XLA's peak counts other memory too; ``None`` when it cannot be
    predicted."""
    if rec.allocations is None:
        return None
    target = next((a for a in rec.allocations if a.index == allocation_index), None)
    if target is None:
        return None
    model = model if model is not None else HeapModel(rec, mm.platform)
    replay = _replay_of(model) is None
    base = _base_figures(model, mm, opts, replay)
    state = _State(model, replay)
    for v in target.values:
        if v.size > size_in_bytes and not v.shape_text.startswith("("):
            _resize(state, v.id, size_in_bytes)
    got = _figures(state, mm, opts)
    peak = got.figures["peak_memory_in_bytes"]
    if got.device_peak is not None and got.device_peak != peak:
        return got.device_peak, "device_memory_peak_bytes", base.device_peak
    if peak is None:
        return None
    return peak, "peak_memory_in_bytes", base.figures["peak_memory_in_bytes"]


del Callable, Tuple
