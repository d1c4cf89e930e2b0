"""Two compiles of one program side by side: ``xlashape memory diff A B``.

Two models (:class:`~xlashape.memory.ModuleMemory`, each from
:func:`xlashape.memory.analyze`: a dump, an HLO file, a ``.hlo.pb``, an
out-of-memory report) compared; it reads no file and computes no figure of
its own, it subtracts the models':

- every figure's delta (XLA's ``CompiledMemoryStats`` fields and the peak
  fields, each only when both sides have it);
- buffers (the values of the buffer assignment; for an out-of-memory report
  its listed allocations) added, removed, grown or shrunk, matched by
  **JAX op path and instruction name** (the name without XLA's ``.N``
  numbering suffix, plus the index into a tuple), never by allocation
  number, which changes with every compile; several buffers with one key are
  paired largest with largest;
- layouts that changed: a matched buffer whose shape text differs, and the
  bytes it costs;
- donations lost / gained: an entry parameter whose donated buffer an output
  reuses on one side only, and why the other side does not (the audit's
  donations, :attr:`ModuleMemory.audit`);
- copies added / removed: the audit's layout copies and moves between memory
  spaces on one side only (matched by what they copy: their kind and shapes);
- the peak: its size, position and instruction on each side, and the
  buffers live at it that appear, disappear or change.
"""

from __future__ import annotations

import collections
import re
from typing import Dict, List, NamedTuple, Optional, Tuple

from ..allocation_kinds import OUTPUT, PARAMETER
from .figures import DIFF_FIELDS, PEAK_FIELDS
from .verdict import module_peak

__all__ = ["Buffer", "ModuleDiff", "diff_modules", "buffers_of", "FIGURES"]

#: the figures compared (XLA's names), in this order
FIGURES = DIFF_FIELDS

_SUFFIX = re.compile(r"\.\d+$")


class Buffer(NamedTuple):
    """One buffer of one side: the matching ``key`` (op path, instruction
    name without its number, tuple index), ``label`` as XLA writes it,
    ``size`` / ``unpadded`` bytes, ``shape`` text, allocation ``kind`` and
    memory ``space``."""

    key: Tuple[str, str, str]
    label: str
    size: int
    unpadded: Optional[int]
    shape: Optional[str]
    kind: str
    space: int

    def to_json(self) -> dict:
        return {"label": self.label, "op_path": self.key[0] or None, "size_in_bytes": self.size,
                "unpadded_size_in_bytes": self.unpadded, "shape": self.shape,
                "kind": self.kind, "memory_space": self.space}


_TOP = re.compile(r"^jit\([^()/]*\)")


def _key(name: str, label: str, op_path: Optional[str], shape: Optional[str] = None
         ) -> Tuple[str, str, str]:
    """The matching key: the op path with the top function's name dropped
    (``jit(step)/dot_general`` and ``jit(step_v2)/dot_general`` match), the
    instruction name without its ``.N`` suffix, and the tuple index; without
    an op path the array type too (``copy.5`` of ``s32[]`` is not ``copy.8``
    of ``f32[16,1024,1024]``)."""
    index = label[len(name):] if label.startswith(name) else ""
    op = _TOP.sub("jit(*)", op_path) if op_path else ""
    base = _SUFFIX.sub("", name)
    if not op and shape:
        base += " " + (_dims(shape) or "")
    return (op, base, index)


def buffers_of(m) -> List[Buffer]:
    """The buffers of a module: each value of each allocation (or, for an
    allocation the model lists without values, the allocation)."""
    allocs = m.allocations
    locations = m.locations
    out = []
    for a in allocs:
        if a.value_details:
            for v in a.value_details:
                if v.size_in_bytes is None or (v.shape or "").startswith("("):
                    continue  # tuple pointer tables: not a buffer a user made
                loc = locations.get(v.name)
                out.append(Buffer(_key(v.name, v.label, loc.op_name if loc else None, v.shape),
                                  v.label,
                                  v.size_in_bytes, v.unpadded_size_in_bytes, v.shape, a.kind,
                                  a.memory_space))
        else:
            # an out-of-memory report's label is the instruction's text: its name
            name = (a.values[0] if a.values else
                    (a.label or a.kind).split(" = ")[0].strip().lstrip("%"))
            if a.kind == PARAMETER and a.parameter_number is not None:
                name = f"parameter {a.parameter_number}"
            loc = locations.get(a.values[0]) if a.values else None
            op = a.op_name or (loc.op_name if loc else None)
            out.append(Buffer(_key(name, name, op, a.shape), name, a.size_in_bytes or 0,
                              a.unpadded_size_in_bytes, a.shape, a.kind, a.memory_space))
    return out


def _match(a: List[Buffer], b: List[Buffer], key):
    """Pairs of buffers with one ``key(buffer)``, largest with largest, and
    the buffers of each side left over."""
    ka: Dict[tuple, List[Buffer]] = {}
    kb: Dict[tuple, List[Buffer]] = {}
    for x in a:
        ka.setdefault(key(x), []).append(x)
    for y in b:
        kb.setdefault(key(y), []).append(y)
    pairs, left_a, left_b = [], [], []
    for k in list(ka) + [k for k in kb if k not in ka]:
        xs = sorted(ka.get(k, ()), key=lambda x: -x.size)
        ys = sorted(kb.get(k, ()), key=lambda x: -x.size)
        n = min(len(xs), len(ys))
        pairs.extend(zip(xs[:n], ys[:n]))
        left_a.extend(xs[n:])
        left_b.extend(ys[n:])
    return pairs, left_a, left_b


def _by_name(x: Buffer):
    return x.key


def _by_op_path(x: Buffer):
    # a fusion renamed by another compile (multiply_add_fusion -> loop_add_fusion):
    # the same op path, tuple index and array type
    return (x.key[0], x.key[2], _dims(x.shape)) if x.key[0] else ("", id(x))


def _by_position(x: Buffer):
    # a parameter or output of a program whose arguments are named otherwise:
    # the same kind and array type
    return (x.kind, _dims(x.shape)) if x.kind in (PARAMETER, OUTPUT) else ("", id(x))


def _pair(a: List[Buffer], b: List[Buffer]):
    """Pairs (x, y): first by op path and instruction name, then the rest by
    op path and type, then parameters and outputs by type; ``None`` for a
    buffer of one side only."""
    pairs = []
    for key in (_by_name, _by_op_path, _by_position):
        got, a, b = _match(a, b, key)
        pairs.extend(got)
    pairs.extend((x, None) for x in a)
    pairs.extend((None, y) for y in b)
    return pairs


def _donated(m) -> Dict[int, int]:
    """``parameter number -> bytes`` of the donated buffers an output reuses
    (the module's audit)."""
    out: Dict[int, int] = {}
    audit = getattr(m, "audit", None)
    for d in audit.donations if audit is not None else ():
        if d.aliased:
            out[d.parameter] = out.get(d.parameter, 0) + (d.bytes or 0)
    return out


def _unused_reasons(m) -> Dict[int, str]:
    """``parameter number -> why`` no output reuses a donated buffer of it."""
    audit = getattr(m, "audit", None)
    return {d.parameter: d.reason for d in (audit.unused_donations if audit is not None else ())
            if d.reason}


def _copies(m) -> List[Tuple[tuple, Buffer]]:
    """The audit's layout copies and moves between memory spaces as buffers,
    each with what it copies (the key two compiles are matched by)."""
    audit = getattr(m, "audit", None)
    if audit is None:
        return []
    out = []
    for c in audit.layout_copies:
        out.append((("layout copy", c.source, c.target),
                    Buffer(("", "", ""), c.instruction, c.bytes or 0, None,
                           f"{c.source} -> {c.target}", "layout copy", 0)))
    for mv in audit.space_moves:
        out.append((("move", mv.kind, mv.shape, mv.from_space, mv.to_space),
                    Buffer(("", "", ""), mv.instruction, mv.bytes or 0, None, mv.shape,
                           f"move {mv.kind}", mv.to_space)))
    return out


def _one_side(xs, ys) -> List[Buffer]:
    """The buffers of ``xs`` whose key ``ys`` has fewer of (a multiset difference)."""
    left = collections.Counter(k for k, _ in ys)
    out = []
    for k, b in xs:
        if left[k]:
            left[k] -= 1
        else:
            out.append(b)
    return sorted(out, key=lambda b: -b.size)


def _figure(m, k):
    if k in PEAK_FIELDS:
        return None if m.peak is None else m.peak.figures.get(k)
    return getattr(m, k, None)


class ModuleDiff:
    """What changed from module ``a`` to module ``b`` (see the module
    docstring); :meth:`to_json` is ``xlashape memory diff --json``."""

    def __init__(self, a, b):
        self.a, self.b = a, b
        self.figures = {}
        for k in FIGURES:
            x, y = _figure(a, k), _figure(b, k)
            if x is None and y is None:
                continue
            self.figures[k] = (x, y, None if x is None or y is None else y - x)
        ba, bb = buffers_of(a), buffers_of(b)
        self.added: List[Buffer] = []
        self.removed: List[Buffer] = []
        self.changed: List[Tuple[Buffer, Buffer]] = []
        self.layouts: List[Tuple[Buffer, Buffer]] = []
        #: matched buffers now in another kind of allocation (a value that
        #: lived in a donated parameter's buffer and now needs its own output)
        self.moved: List[Tuple[Buffer, Buffer]] = []
        for x, y in _pair(ba, bb):
            if x is None:
                self.added.append(y)
            elif y is None:
                self.removed.append(x)
            else:
                if x.size != y.size:
                    self.changed.append((x, y))
                if x.kind != y.kind:
                    self.moved.append((x, y))
                if x.shape != y.shape and _dims(x.shape) == _dims(y.shape):
                    self.layouts.append((x, y))
        self.added.sort(key=lambda x: -x.size)
        self.removed.sort(key=lambda x: -x.size)
        self.changed.sort(key=lambda p: -abs(p[1].size - p[0].size))
        self.layouts.sort(key=lambda p: -abs(p[1].size - p[0].size))
        da, db = _donated(a), _donated(b)
        self.donations_lost = sorted((p, da[p]) for p in da if p not in db)
        self.donations_gained = sorted((p, db[p]) for p in db if p not in da)
        #: parameter number -> why the side that lost (or never had) its
        #: reuse does not use the donation, when that side donated it
        ra, rb = _unused_reasons(a), _unused_reasons(b)
        self.donation_reasons = {p: rb[p] for p, _ in self.donations_lost if p in rb}
        self.donation_reasons.update({p: ra[p] for p, _ in self.donations_gained if p in ra})
        ca, cb = _copies(a), _copies(b)
        #: layout copies and moves between memory spaces of one side only
        self.copies_added = _one_side(cb, ca)
        self.copies_removed = _one_side(ca, cb)
        self.peak_a, self.peak_b = module_peak(a), module_peak(b)
        self.live_added: List[Buffer] = []
        self.live_removed: List[Buffer] = []
        self.live_changed: List[Tuple[Buffer, Buffer]] = []
        la, lb = _live(a), _live(b)
        for x, y in _pair(la, lb):
            if x is None:
                self.live_added.append(y)
            elif y is None:
                self.live_removed.append(x)
            elif x.size != y.size:
                self.live_changed.append((x, y))

    def growths(self) -> List[Tuple[str, int, int]]:
        """``(name, a, b)`` of each figure ``--max-growth`` judges: the peak
        (XLA's ``peak_memory_in_bytes`` when both sides have it, else the
        device-memory peak or an out-of-memory report's use) and the total
        (arguments + outputs + temporaries - aliased, when both sides know
        their temporaries: XLA:CPU's peak leaves the temporaries out)."""
        out = []
        x, y, _ = self.figures.get("peak_memory_in_bytes", (None, None, None))
        if x is not None and y is not None:
            out.append(("peak_memory_in_bytes", x, y))
        elif self.peak_a is not None and self.peak_b is not None:
            out.append((self.peak_b[1], self.peak_a[0], self.peak_b[0]))

        def total(m):
            if m.temp_size_in_bytes is None:
                return None
            return (sum(x or 0 for x in (m.argument_size_in_bytes, m.output_size_in_bytes,
                                        m.temp_size_in_bytes)) - (m.alias_size_in_bytes or 0))

        ta, tb = total(self.a), total(self.b)
        if ta is not None and tb is not None:
            out.append(("arguments + outputs + temporaries - aliased", ta, tb))
        return out

    def to_json(self) -> dict:
        def side(m, p):
            pa = m.peak
            return {"name": m.name, "path": m.path, "source": m.source, "platform": m.platform,
                    "peak_bytes": None if p is None else p[0],
                    "peak_name": None if p is None else p[1],
                    "peak_time": None if pa is None else pa.peak_time,
                    "peak_instruction": None if pa is None else pa.peak_instruction}

        return {
            "a": side(self.a, self.peak_a), "b": side(self.b, self.peak_b),
            "figures": {k: {"a": x, "b": y, "delta": d} for k, (x, y, d) in self.figures.items()},
            "growth": [{"figure": n, "a": x, "b": y, "delta": y - x,
                        "fraction": (y - x) / x if x else None} for n, x, y in self.growths()],
            "buffers_added": [x.to_json() for x in self.added],
            "buffers_removed": [x.to_json() for x in self.removed],
            "buffers_changed": [_pair_json(x, y) for x, y in self.changed],
            "layouts_changed": [_pair_json(x, y) for x, y in self.layouts],
            "buffers_moved": [_pair_json(x, y) for x, y in self.moved],
            "donations_lost": [{"parameter_number": p, "bytes": n,
                                "reason": self.donation_reasons.get(p)}
                               for p, n in self.donations_lost],
            "donations_gained": [{"parameter_number": p, "bytes": n,
                                  "reason": self.donation_reasons.get(p)}
                                 for p, n in self.donations_gained],
            "copies_added": [x.to_json() for x in self.copies_added],
            "copies_removed": [x.to_json() for x in self.copies_removed],
            "peak": {"live_added": [x.to_json() for x in self.live_added],
                     "live_removed": [x.to_json() for x in self.live_removed],
                     "live_changed": [_pair_json(x, y) for x, y in self.live_changed]},
        }


def _pair_json(x: Buffer, y: Buffer) -> dict:
    return {"a": x.to_json(), "b": y.to_json(), "delta": y.size - x.size}


def _dims(shape: Optional[str]) -> Optional[str]:
    """The shape text without its layout (``f32[8,128]{1,0:T(8,128)}`` ->
    ``f32[8,128]``)."""
    if shape is None:
        return None
    return re.sub(r"\{[^{}]*\}", "", shape)


def _live(m) -> List[Buffer]:
    pa = m.peak
    if pa is None:
        return []
    return [Buffer(_key(b.instruction, b.label, b.op_name, b.shape), b.label, b.size,
                   b.unpadded_size,
                   b.shape, b.kind, b.color) for b in pa.live_at_peak]


def diff_modules(a, b) -> ModuleDiff:
    """:class:`ModuleDiff` of two :class:`~xlashape.memory.ModuleMemory`."""
    return ModuleDiff(a, b)
