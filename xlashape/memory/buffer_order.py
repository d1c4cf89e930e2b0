"""The order in which XLA's buffer assignment makes its allocations, and how
it then combines the temporary ones.

XLA's ``BufferAssigner`` creates allocations in this order: those memory-space
assignment placed (``AssignPresetBuffers``: one per memory space, on TPU its
VMEM); then, for the XLA buffers of the computations that run on their own
(the entry, while bodies and conditions, conditional branches, calls), one
allocation per buffer that needs one -- an entry parameter, a constant, a
buffer holding a tuple, a buffer live out of the program that no earlier
allocation could take -- in the order ``AssignBuffersForComputations`` sorts
the buffers (``kBiggestFirst``: larger first, then live out first, then
earlier in the call graph's post order; ``kTopological``: post order first);
every other buffer waits for the heap simulator, which then makes one
allocation per memory space (smallest memory space first); last, one per
buffer of the computations that run inside one instruction (thread-local).

``CombineTempAllocations`` then moves the temporary allocations after the
others with ``std::partition`` (which is not stable: it swaps the first
temporary with the last other allocation, and so on) and places the
temporaries of one memory space end to end, each at an offset rounded up to
the memory space's alignment, in the order the partition left them: the
memory space's temporary allocation.

:func:`temporary_layout` rebuilds that order from a dump (no offset read),
and checks it on what the dump does say: the order of the other
allocations, and which memory space's temporary allocation comes first.
"""

from __future__ import annotations

from typing import Dict, Iterable, List, Optional, Tuple

from ..allocation_kinds import CONSTANT, PARAMETER, TEMPORARY, THREAD_LOCAL, kind_of
from .heapsim import align_up
from .sharing import _split_gte

__all__ = ["post_order_positions", "computation_kinds", "TempUnit", "temporary_layout",
           "BIGGEST_FIRST", "TOPOLOGICAL", "partition"]

BIGGEST_FIRST = "biggest-first"
TOPOLOGICAL = "topological"

#: callers whose computations run inside one instruction (thread-local)
_THREAD_LOCAL_CALLERS = frozenset((
    "custom-call", "all-reduce", "reduce-scatter", "all-reduce-start", "map", "reduce",
    "reduce-window", "scatter", "select-and-scatter", "sort", "fusion"))


#: opcodes that call computations
_CALLERS = _THREAD_LOCAL_CALLERS | frozenset((
    "while", "conditional", "call", "async-start", "async-update", "async-done"))


def _called(ins) -> List[str]:
    """The computations an instruction calls, in XLA's order (a while's body
    before its condition)."""
    if ins.opcode not in _CALLERS:
        return []
    if ins.opcode == "while":
        out = []
        for key in ("body", "condition"):
            v = ins.attribute(key)
            if v:
                out.append(v.strip().lstrip("%"))
        return out
    return list(ins.called_computations)


def computation_kinds(computations) -> Dict[str, bool]:
    """``GatherComputationsByAllocationType``: computation name -> whether its
    buffers are thread-local (``False``: global), for the computations the
    entry reaches."""
    entry = next((c for c in computations.values() if c.is_entry), None)
    out: Dict[str, bool] = {}
    if entry is None:
        return out
    work = [(entry.name, False)]
    while work:
        name, local = work.pop(0)
        if name in out:
            continue
        comp = computations.get(name)
        if comp is None:
            continue
        out[name] = local
        for ins in comp.instructions:
            for callee in _called(ins):
                sub = local or ins.opcode in _THREAD_LOCAL_CALLERS
                work.append((callee, sub))
    return out


def _users(comp) -> Dict[str, int]:
    n: Dict[str, int] = {}
    for ins in comp.instructions:
        for name in ins.operand_names:
            base = _split_gte(name)[0]
            n[base] = n.get(base, 0) + 1
    return n


def _control_predecessors(ins) -> List[str]:
    text = ins.attribute("control-predecessors")
    if not text:
        return []
    return [x.strip().lstrip("%") for x in text.strip("{}").split(",") if x.strip()]


def instruction_post_order(comp) -> List[str]:
    """``HloComputation::MakeInstructionPostOrder`` (depth first from each
    instruction nothing uses, in the text's order; operands in order, control
    predecessors first)."""
    by_name = {i.name: i for i in comp.instructions}
    users = _users(comp)
    state: Dict[str, int] = {}
    out: List[str] = []
    for start in comp.instructions:
        if users.get(start.name):
            continue
        stack = [start.name]
        while stack:
            cur = stack[-1]
            s = state.get(cur, 0)
            if s == 0:
                state[cur] = 1
                ins = by_name.get(cur)
                if ins is None:
                    continue
                for name in reversed(ins.operand_names):
                    base = _split_gte(name)[0]
                    if base in by_name and state.get(base, 0) != 2:
                        stack.append(base)
                for name in _control_predecessors(ins):
                    if name in by_name and state.get(name, 0) != 2:
                        stack.append(name)
            else:
                stack.pop()
                if s != 2:
                    state[cur] = 2
                    out.append(cur)
    return out


def post_order_positions(computations, kinds: Dict[str, bool], thread_local: bool
                         ) -> Dict[str, int]:
    """Instruction name -> its position in ``AssignBuffersForComputations``'s
    order (the call graph in reverse post order from the entry, each
    computation's instructions in post order), over the global computations
    (or the thread-local ones: ``thread_local``). XLA prints a module's
    computations in post order (``MakeComputationPostOrder``, the call
    graph's traversal): the text's order, reversed, is the reverse post
    order."""
    positions: Dict[str, int] = {}
    n = 0
    for name in reversed(list(computations)):
        if name not in kinds or kinds[name] is not thread_local:
            continue
        for ins_name in instruction_post_order(computations[name]):
            positions[ins_name] = n
            n += 1
    return positions


class TempUnit:
    """One temporary allocation before ``CombineTempAllocations``: its
    memory ``color``, ``kind`` (``"preset"``: memory-space assignment's;
    ``"tuple"``: an XLA buffer holding a tuple; ``"heap"``: the heap
    simulator's), the value ids it holds and its ``size`` (``None`` until
    known: a heap's is the packing's)."""

    __slots__ = ("color", "kind", "ids", "size")

    def __init__(self, color: int, kind: str, ids: Tuple[int, ...], size: Optional[int]):
        self.color = color
        self.kind = kind
        self.ids = ids
        self.size = size

    def __repr__(self):
        return f"<TempUnit {self.kind} c{self.color} {self.size} {self.ids[:3]}>"


def partition(flags: List[bool]) -> List[int]:
    """The permutation libstdc++'s ``std::partition`` makes of a sequence
    whose elements are kept in front where ``flags`` is true: the original
    index of each element, in the order it ends up."""
    order = list(range(len(flags)))
    first, last = 0, len(order)
    while True:
        while True:
            if first == last:
                return order
            if flags[order[first]]:
                first += 1
            else:
                break
        last -= 1
        while True:
            if first == last:
                return order
            if not flags[order[last]]:
                last -= 1
            else:
                break
        order[first], order[last] = order[last], order[first]
        first += 1


class Layout:
    """What :func:`temporary_layout` found: ``units`` (the
    :class:`TempUnit` of every temporary allocation, in the order
    ``CombineTempAllocations`` meets them), ``colors`` (memory spaces in the
    order their combined allocation comes), and ``problem`` (why the order
    could not be confirmed from the dump, or ``None``)."""

    def __init__(self):
        self.units: List[TempUnit] = []
        self.colors: List[int] = []
        self.problem: Optional[str] = None
        self.positions: Dict[str, int] = {}

    def place(self, color: int, alignment: int) -> Tuple[List[Tuple[TempUnit, int]], Optional[int]]:
        """The units of one memory space at their offsets (each at the
        combined size so far rounded up to ``alignment``; the first at 0), and
        the combined size (``None`` while a unit's size is not known)."""
        out = []
        size = 0
        first = True
        for u in self.units:
            if u.color != color:
                continue
            if u.size is None:
                return out, None
            base = 0 if first else align_up(size, alignment)
            out.append((u, base))
            size = base + u.size
            first = False
        return out, size


def _shape_is_tuple(v) -> bool:
    return v.shape_text.startswith("(")


def temporary_layout(rec, values, module, find, *, order: str, preset_colors=frozenset(),
                     positions: Optional[Dict[str, int]] = None) -> Layout:
    """The temporary allocations of ``rec`` (a dump's records) as XLA's buffer
    assignment made them before combining them (see the module docstring):
    ``values`` (the values file), ``module`` (``(instructions, computations)``
    by name), ``find`` (XLA's buffers: :func:`~xlashape.memory.sharing.alias_buffers`),
    ``order`` (:data:`BIGGEST_FIRST` or :data:`TOPOLOGICAL`),
    ``preset_colors`` (memory spaces memory-space assignment placed),
    ``positions`` (:func:`post_order_positions` of the global computations,
    if known; kept as ``Layout.positions``)."""
    out = Layout()
    instructions, computations = module
    kinds = computation_kinds(computations)
    # the thread-local allocations come after every temporary: their order
    # among themselves moves none, so only the global computations' order counts
    if positions is None:
        positions = post_order_positions(computations, kinds, False)
    out.positions = positions
    pos = [positions, {}]

    # XLA's buffers, with the entry's parameters joined to the outputs they alias
    parent: Dict[int, int] = {}

    def root_of(x):
        while parent.get(x, x) != x:
            x = parent[x]
        return x

    def key_of(vid):
        return root_of(find(vid))

    entry = rec.entry
    root_name = entry.root[0] if entry is not None and entry.root is not None else None
    at: Dict[Tuple[str, Tuple[int, ...]], int] = {}
    for vid, r in values.items():
        for p in r.positions:
            at.setdefault((p[0], tuple(p[1])), vid)
    if entry is not None:
        for a in entry.aliases:
            pname = entry.params.get(a.parameter_number, (None,))[0]
            pv = at.get((pname, tuple(a.parameter_index)))
            ov = at.get((root_name, tuple(a.output_index)))
            if pv is not None and ov is not None:
                x, y = key_of(pv), key_of(ov)
                if x != y:
                    parent[max(x, y)] = min(x, y)
    live_out = set()
    for vid, r in values.items():
        if any(p[0] == root_name for p in r.positions):
            live_out.add(key_of(vid))

    def defining(vid) -> Optional[str]:
        r = values.get(vid)
        return r.positions[0][0] if r is not None and r.positions else None

    def comp_of(name) -> Optional[str]:
        ins = instructions.get(name)
        return None if ins is None else ins.computation

    big = 1 << 62

    def sort_key(group: List, pass_no: int):
        size = max(v.size for v in group)
        buf = key_of(group[0].id)
        first = min(v.id for v in group)
        p = min((pos[pass_no].get(defining(v.id), big) for v in group), default=big)
        lo = 0 if buf in live_out else 1
        if order == TOPOLOGICAL:
            return (p, -size, lo, first)
        return (-size, lo, p, first)

    def groups_of(a):
        g: Dict[int, List] = {}
        for v in a.values:
            g.setdefault(key_of(v.id), []).append(v)
        return list(g.values())

    def pass_of(group) -> int:
        first = min(group, key=lambda v: v.id)
        comp = comp_of(defining(first.id))
        return 1 if kinds.get(comp) else 0

    seq: List[Tuple[tuple, int, object]] = []      # (sort key, pass, item)
    presets: Dict[int, TempUnit] = {}
    heaps: Dict[int, List[int]] = {}
    for a in rec.allocations:
        kind = kind_of(a)
        if kind == TEMPORARY:
            if a.color in preset_colors:
                presets[a.color] = TempUnit(a.color, "preset", tuple(v.id for v in a.values),
                                            None)
                continue
            for group in groups_of(a):
                if any(_shape_is_tuple(v) for v in group):
                    unit = TempUnit(a.color, "tuple", tuple(sorted(v.id for v in group)),
                                    max(v.size for v in group))
                    seq.append((sort_key(group, 0), 0, unit))
                else:
                    heaps.setdefault(a.color, []).extend(v.id for v in group)
            continue
        groups = groups_of(a)
        if not groups:
            continue
        if kind == THREAD_LOCAL:
            p = 1
        else:
            p = min(pass_of(g) for g in groups)
        creator = min(sort_key(g, p) for g in groups)
        seq.append((creator, p, a.index))
    first_pass = sorted((x for x in seq if x[1] == 0), key=lambda x: x[0])
    second_pass = sorted((x for x in seq if x[1] == 1), key=lambda x: x[0])
    items: List[object] = [presets[c] for c in sorted(presets)]
    items += [x[2] for x in first_pass]
    items += [TempUnit(c, "heap", tuple(heaps[c]), None) for c in sorted(heaps)]
    items += [x[2] for x in second_pass]
    flags = [not isinstance(x, TempUnit) for x in items]
    final = [items[i] for i in partition(flags)]
    others = [x for x in final if not isinstance(x, TempUnit)]
    out.units = [x for x in final if isinstance(x, TempUnit)]
    colors: List[int] = []
    for u in out.units:
        if u.color not in colors:
            colors.append(u.color)
    out.colors = colors
    # the order among the thread-local allocations does not move a temporary:
    # compare the others with those masked
    second = {x[2] for x in second_pass}
    want = [a.index for a in rec.allocations if kind_of(a) != TEMPORARY]
    others = [-1 if x in second else x for x in others]
    want = [-1 if x in second else x for x in want]
    if others != want:
        out.problem = ("the order XLA made its allocations in is not the one xlashape "
                       "rebuilds from the dump (the other allocations come out in another "
                       "order), so the order of the temporaries may differ too")
    else:
        temp_colors = [a.color for a in rec.allocations if kind_of(a) == TEMPORARY]
        if temp_colors != colors:
            out.problem = ("the temporary allocations of the memory spaces come in another "
                           f"order in the dump ({temp_colors}) than rebuilt ({colors})")
    return out
