"""XLA's ``BufferAssigner`` pass over a module's buffers, before the heap
simulator: which XLA buffer gets an allocation of its own, which goes into
an allocation made before it, and which waits for the heap simulator.

``AssignBuffersForComputations`` takes the buffers of the computations that
run on their own in its order (:mod:`xlashape.memory.buffer_order`) and, for
each (``AssignSingleHloBuffer``): an entry parameter, a constant or a buffer
holding a tuple gets an allocation of its own; any other first tries the
allocations of its instruction's operands (in allocation order), then the
allocations made for parameters the outputs alias and for outputs (the
latest first); a buffer that no allocation takes waits for the heap
simulator unless it is live out of the program, which gets an allocation of
its own. ``MaybeAssignBuffer`` lets a buffer into an allocation of its memory
space that is at least as large, writable (not a parameter no output
aliases, not a constant), not a tuple's, and whose every value is live
apart from the buffer's (or ends where it starts, at an instruction that
may take its operand's memory: ``CanShareOperandBufferWithUser``); a buffer
live out takes only an allocation of exactly its size.

:func:`first_pass` replays it from a dump (sizes, live ranges, the values
file, the module text) for the what-if of :mod:`xlashape.memory.whatif`,
with the edits' sizes and aliasing; on the unedited module it gives the
allocations the dump has (:func:`check`).
"""

from __future__ import annotations

from typing import Dict, List, Optional, Set, Tuple

import numpy as np

from ..allocation_kinds import TEMPORARY, kind_of
from .buffer_order import BIGGEST_FIRST, TOPOLOGICAL, computation_kinds, post_order_positions
from .sharing import _split_gte

__all__ = ["Buffer", "Buffers", "SimAllocation", "first_pass"]


class Buffer:
    """One XLA buffer: its values (``ids``), memory space ``color``,
    ``size`` (its largest value's), and what it is: an entry parameter
    (``param``: ``(number, index)``), a ``constant``, holding a ``tuple``,
    ``live_out``; ``thread_local``: of a computation run inside one
    instruction; ``key``: its place in XLA's order."""

    __slots__ = ("ids", "color", "size", "param", "constant", "tuple", "live_out",
                 "thread_local", "key")

    def __init__(self, ids):
        self.ids = sorted(ids)
        self.color = 0
        self.size = 0
        self.param = None
        self.constant = False
        self.tuple = False
        self.live_out = False
        self.thread_local = False
        self.key = ()


class Buffers:
    """The XLA buffers of a module, from its values file, module text, buffer
    assignment (colors, sizes) and live ranges."""

    def __init__(self, rec, values, module, find, *, order: str = BIGGEST_FIRST,
                 size_of=None, aliases=None, positions=None):
        self.values = values
        self.instructions, self.computations = module
        self.rec = rec
        entry = rec.entry
        self.root = entry.root[0] if entry is not None and entry.root is not None else None
        ba = {v.id: v for a in rec.allocations or () for v in a.values}
        self.ba = ba
        if size_of is None:
            def size_of(vid):
                return ba[vid].size
        self.size_of = size_of
        parent: Dict[object, object] = {}

        def root_of(x):
            while parent.get(x, x) != x:
                x = parent[x]
            return x

        self.at: Dict[Tuple[str, Tuple[int, ...]], List[int]] = {}
        for vid in sorted(values):
            for p in values[vid].positions:
                self.at.setdefault((p[0], tuple(p[1])), []).append(vid)
        self.aliased_params: Set[Tuple[int, Tuple[int, ...]]] = set()
        if aliases is None:
            aliases = [(a.parameter_number, tuple(a.parameter_index), tuple(a.output_index))
                       for a in (entry.aliases if entry is not None else ())]
        self.aliases = list(aliases)
        if entry is not None:
            for number, pindex, oindex in self.aliases:
                pname = entry.params.get(number, (None,))[0]
                pv = self.at.get((pname, tuple(pindex)), [None])[0]
                ov = self.at.get((self.root, tuple(oindex)), [None])[0]
                if pv is not None and ov is not None:
                    x, y = root_of(find(pv)), root_of(find(ov))
                    if x != y:
                        parent[y] = x
                    self.aliased_params.add((number, tuple(pindex)))
        groups: Dict[object, List[int]] = {}
        for vid in values:
            if vid in ba:
                groups.setdefault(root_of(find(vid)), []).append(vid)
        # a parameter no output aliases is read-only: where its buffer also
        # holds other values (an in-place update of the donated parameter),
        # XLA's copy insertion gives them a copy of their own
        self.copied: List[int] = []
        pnames = {name: n for n, (name, _) in (entry.params.items() if entry is not None else ())}
        for key, ids in list(groups.items()):
            if len(ids) < 2:
                continue
            for vid in ids:
                r = values[vid]
                if r.opcode != "parameter" or not r.positions:
                    continue
                name, index = r.positions[0]
                if name in pnames and (pnames[name], tuple(index)) not in self.aliased_params:
                    ids.remove(vid)
                    groups[("param", vid)] = [vid]
                    self.copied.append(pnames[name])
                    break
        kinds = computation_kinds(self.computations)
        # the thread-local buffers are not replayed: their order does not matter
        if positions is None:
            positions = post_order_positions(self.computations, kinds, False)
        pos = [positions, {}]
        params = {}
        if entry is not None:
            for n, (name, _) in entry.params.items():
                params[name] = n
        self.by_value: Dict[int, Buffer] = {}
        self.all: List[Buffer] = []
        big = 1 << 62
        entry_name = self._entry_name()
        for ids in groups.values():
            b = Buffer(ids)
            first = b.ids[0]
            b.color = ba[first].color
            b.size = max(size_of(i) for i in ids)
            comp = self._comp(first)
            b.thread_local = bool(kinds.get(comp))
            for i in ids:
                r = values[i]
                name, index = r.positions[0] if r.positions else (None, ())
                if r.opcode == "constant":
                    b.constant = True
                if name in params and self._comp(i) == entry_name and \
                        r.opcode == "parameter":
                    b.param = (params[name], tuple(index))
                if ba[i].shape_text.startswith("("):
                    b.tuple = True
                if any(p[0] == self.root for p in r.positions):
                    b.live_out = True
            p = min((pos[1 if b.thread_local else 0].get(self._defining(i), big) for i in ids),
                    default=big)
            lo = 0 if b.live_out else 1
            b.key = (p, -b.size, lo, first) if order == TOPOLOGICAL else (-b.size, lo, p, first)
            self.all.append(b)
            for i in ids:
                self.by_value[i] = b
        self.all.sort(key=lambda b: b.key)

    def _entry_name(self) -> Optional[str]:
        for c in self.computations.values():
            if c.is_entry:
                return c.name
        return None

    def _defining(self, vid: int) -> Optional[str]:
        r = self.values.get(vid)
        return r.positions[0][0] if r is not None and r.positions else None

    def _comp(self, vid: int) -> Optional[str]:
        ins = self.instructions.get(self._defining(vid))
        return None if ins is None else ins.computation


class SimAllocation:
    """An allocation of the replayed pass: its ``color``, ``size``, the
    values in it (``ids``), whether it is ``readonly`` / ``reusable``, its
    ``kind`` and the :class:`Buffer` that made it."""

    __slots__ = ("color", "size", "ids", "readonly", "reusable", "kind", "buffer", "live_out")

    def __init__(self, buf: Buffer, kind: str, readonly: bool, reusable: bool):
        self.color = buf.color
        self.size = buf.size
        self.ids = list(buf.ids)
        self.readonly = readonly
        self.reusable = reusable
        self.kind = kind
        self.buffer = buf
        self.live_out = buf.live_out


class _Interference:
    """``BufferAssigner::LiveRangeInterferes`` over the dump's live ranges."""

    def __init__(self, buffers: Buffers, ranges, sharing, sequence):
        self.b = buffers
        self.ranges = ranges
        self.sharing = sharing
        self.time = {name: t for t, name in enumerate(sequence) if name}

    def end_position(self, vid: int):
        r = self.b.values.get(vid)
        if r is None or not r.positions:
            return None
        best = None
        for name, index in r.positions:
            t = self.time.get(name, -1)
            if best is None or t > best[0]:
                best = (t, name, tuple(index))
        return best[1], best[2]

    def can_share_as_operand(self, user: int, operand: int) -> bool:
        end = self.end_position(operand)
        if end is None or self.sharing is None:
            return False
        ui, uidx = self.sharing.defining(user)
        if ui is None or ui.opcode == "copy":
            return False
        oi = self.sharing.position_instruction(end[0], end[1])
        if oi is None or oi.name not in ui.operand_names:
            return False
        return self.sharing.can_share(oi, end[1], ui, uidx, operand)

    def interferes(self, new: int, old: int) -> bool:
        r1, r2 = self.ranges.get(new), self.ranges.get(old)
        if r1 is None or r2 is None:
            return True
        s1, e1 = r1
        s2, e2 = r2
        if s1 > e2 or s2 > e1:
            return False
        if e1 == s2:
            return not self.can_share_as_operand(old, new)
        if e2 == s1:
            return not self.can_share_as_operand(new, old)
        return True


class _Overlaps:
    """The live ranges of the values in the allocations of ``indices`` (the
    aliased parameters' and the outputs'), in growing numpy arrays, so that a
    buffer is checked against all of them at once: an allocation with a value
    that overlaps one of the buffer's by more than an end point surely
    interferes (:meth:`_Interference.interferes` is true without asking the
    sharing rule); only the pairs that touch at an end point are left to
    ask. An allocation with a value of no live range always interferes."""

    def __init__(self, ranges, dropped):
        self.ranges = ranges
        self.dropped = dropped
        self.n = 0
        self.start = np.zeros(64, np.int64)
        self.end = np.zeros(64, np.int64)
        self.owner = np.zeros(64, np.int64)
        self.vid = np.zeros(64, np.int64)
        self.owners = 0
        self.unranged: Set[int] = set()

    def add(self, position: int, ids) -> None:
        self.owners = max(self.owners, position + 1)
        for i in ids:
            if i in self.dropped:
                continue
            r = self.ranges.get(i)
            if r is None:
                self.unranged.add(position)
                continue
            if self.n == len(self.start):
                for name in ("start", "end", "owner", "vid"):
                    old = getattr(self, name)
                    new = np.zeros(2 * len(old), np.int64)
                    new[:len(old)] = old
                    setattr(self, name, new)
            self.start[self.n], self.end[self.n] = r
            self.owner[self.n] = position
            self.vid[self.n] = i
            self.n += 1

    def against(self, ids):
        """For the values ``ids`` of a buffer (each with a live range):
        ``(ruled_out, touching)``, a bool per position of ``indices`` (true:
        surely interferes) and, per position, the ``(new, old)`` pairs
        whose ranges touch at an end point."""
        out = np.zeros(self.owners, bool)
        for p in self.unranged:
            out[p] = True
        touching: Dict[int, List[Tuple[int, int]]] = {}
        if not self.n:
            return out, touching
        s2, e2 = self.start[:self.n], self.end[:self.n]
        owner, vid = self.owner[:self.n], self.vid[:self.n]
        for i in ids:
            s1, e1 = self.ranges[i]
            meet = (s1 <= e2) & (s2 <= e1)
            ends = (e1 == s2) | (e2 == s1)
            out[owner[meet & ~ends]] = True
            for k in np.flatnonzero(meet & ends).tolist():
                touching.setdefault(int(owner[k]), []).append((i, int(vid[k])))
        return out, touching


class _Once:
    """``f(*args)``, computed at the first call."""

    __slots__ = ("f", "args", "got")

    def __init__(self, f, *args):
        self.f, self.args, self.got = f, args, None

    def __call__(self):
        if self.got is None:
            self.got = self.f(*self.args)
        return self.got


def first_pass(buffers: Buffers, ranges, sharing, sequence, *, aliased=None,
               dropped=frozenset(), preset_colors=frozenset()
               ) -> Tuple[List[SimAllocation], List[int]]:
    """The allocations ``AssignBuffersForComputations`` makes for the
    computations that run on their own, and the values it leaves to the heap
    simulator (see the module docstring). ``aliased``: the entry parameters
    ``(number, index)`` an output aliases (default the dump's);
    ``dropped``: values that are gone."""
    if aliased is None:
        aliased = buffers.aliased_params
    check = _Interference(buffers, ranges, sharing, sequence)
    allocs: List[SimAllocation] = []
    where: Dict[int, SimAllocation] = {}
    indices: List[SimAllocation] = []
    deferred: List[int] = []
    instructions = buffers.instructions
    values = buffers.values
    overlaps = _Overlaps(ranges, dropped)
    position = {}                      # id(allocation) -> its place in indices
    made: Dict[int, int] = {}          # id(allocation) -> its place in allocs

    def index(a: SimAllocation) -> None:
        position[id(a)] = len(indices)
        indices.append(a)
        overlaps.add(position[id(a)], a.ids)

    def maybe(a: SimAllocation, buf: Buffer, known=None) -> bool:
        if a.color != buf.color or buf.size > a.size or a.readonly or not a.reusable:
            return False
        k = position.get(id(a))
        if known is not None and k is not None:
            # the overlaps are known at once: ask only the pairs that touch
            out, touching = known()
            if out[k]:
                return False
            for new, old in touching.get(k, ()):
                if check.interferes(new, old):
                    return False
            if buf.live_out and a.size != buf.size:
                return False
            return accept(a, buf)
        for old in a.ids:
            if old in dropped:
                continue
            for new in buf.ids:
                if check.interferes(new, old):
                    return False
                ni = instructions.get(buffers._defining(new))
                if ni is not None and ni.opcode == "copy":
                    ops = {_split_gte(n)[0] for n in ni.operand_names}
                    if any(p[0] in ops for p in values[old].positions):
                        return False
        if buf.live_out and a.size != buf.size:
            return False
        return accept(a, buf)

    def accept(a: SimAllocation, buf: Buffer) -> bool:
        a.ids.extend(buf.ids)
        a.live_out = a.live_out or buf.live_out
        for i in buf.ids:
            where[i] = a
        if id(a) in position:
            overlaps.add(position[id(a)], buf.ids)
        return True

    for buf in buffers.all:
        if buf.thread_local or buf.color in preset_colors:
            continue
        live = [i for i in buf.ids if i not in dropped]
        if not live:
            continue
        if buf.constant:
            a = SimAllocation(buf, "constant", True, True)
        elif buf.param is not None:
            has_alias = buf.param in aliased
            a = SimAllocation(buf, "parameter", not has_alias, True)
            if not has_alias:
                a.live_out = False
            if has_alias:
                index(a)
        elif buf.tuple:
            a = SimAllocation(buf, "tuple", False, False)
        else:
            a = None
            done = False
            known = None
            if indices and all(i in ranges for i in buf.ids) and not any(
                    getattr(instructions.get(buffers._defining(i)), "opcode", None) == "copy"
                    for i in buf.ids):
                known = _Once(overlaps.against, buf.ids)
            for vid in buf.ids:
                r = values.get(vid)
                if r is None or not r.positions or r.positions[0][1] != () or \
                        buffers.ba[vid].shape_text.startswith("("):
                    continue
                ins = instructions.get(r.positions[0][0])
                if ins is None:
                    continue
                tried = set()
                cands = []
                for name in ins.operand_names:
                    base, more = _split_gte(name)
                    for ov in buffers.at.get((base, more), ()):
                        got = where.get(ov)
                        if got is not None and id(got) not in tried:
                            tried.add(id(got))
                            cands.append(got)
                cands.sort(key=lambda x: made[id(x)])
                for c in cands:
                    if maybe(c, buf, known):
                        done = True
                        break
                if done:
                    break
            if not done:
                if known is None:
                    order = range(len(indices) - 1, -1, -1)
                else:
                    order = np.flatnonzero(~known()[0])[::-1].tolist()
                for k in order:
                    c = indices[k]
                    if maybe(c, buf, known):
                        done = True
                        break
            if done:
                continue
            if not buf.live_out:
                deferred.extend(buf.ids)
                continue
            a = SimAllocation(buf, "output", False, True)
            index(a)
        made[id(a)] = len(allocs)
        allocs.append(a)
        for i in buf.ids:
            where[i] = a
    return allocs, deferred


def check(rec, buffers: Buffers, allocs: List[SimAllocation], deferred: List[int]
          ) -> Optional[str]:
    """Why the replayed pass differs from the dump's allocations (``None``:
    each allocation of the dump that is neither temporary nor thread-local
    holds the same values as one of the replay's, and the heap's values are
    the deferred ones)."""
    mine = {frozenset(a.ids) for a in allocs}
    for a in rec.allocations or ():
        k = kind_of(a)
        if k in (TEMPORARY, "thread-local"):
            continue
        ids = frozenset(v.id for v in a.values)
        if all(buffers.by_value[i].thread_local for i in ids if i in buffers.by_value):
            continue
        if ids not in mine:
            return f"allocation {a.index} holds other values in the replay"
    return None
