"""Which values share memory in XLA's heaps, from a dump's text files.

The text route's heap (:class:`xlashape.memory.peak.PeakBuilder`) replays
each temporary allocation from its values' offsets and live ranges; what it
cannot read off those is which values share one buffer. Two writers of
traces, two rules:

The heap simulator (XLA's ``HeapSimulator::RunComputation``; every temporary
allocation but those below) defines values in the order of their live
ranges (start, end, value id). A value shares the memory of another
(SHARE_WITH) when it belongs to the same XLA buffer as a value already
placed (``HloAliasAnalysis``: the values a while loop carries, a
conditional's branch results, an in-place operation's operand and output --
dynamic-update-slice, scatter, fusions around them, ``output_to_operand_aliasing``),
or when an operand's value ends where it starts and
``CanShareOperandBufferWithUser`` allows it (elementwise users, fusions
elementwise on the operand, sort, in-place operations...; a backend hook
decides too, and XLA:TPU's is in no dump). The simulator gives a shared
value its canonical value's chunk and any two values live at one time that
do not share disjoint chunks, so the assignment records every decision: a
value whose chunk is the chunk of a buffer still live when it starts shares
that buffer, and no other does (:func:`overlap` finds a heap that breaks
this). Values of one XLA buffer that live apart (a loop's value before and
after the loop) are joined by :func:`alias_buffers`, from the values file
and the module text, when the exact pairs are wanted.

Memory-space assignment exports its own trace for the memory it places (its
alternate memory: on TPU, VMEM ``S(1)`` -- ``S(3)`` on v4;
:data:`MSA_COLORS`): every value that is read, from its start to its last
read (for a value last read by a conditional, each branch's part apart:
:func:`computation_start`), with no SHARE_WITH. That needs each value's uses
(``*-buffer-assignment-values.txt``, :class:`SharingFacts`). XLA:TPU's
``ConcatBitcast`` custom-call is a view of the buffers it concatenates
(:data:`VIEW_TARGETS`).
"""

import re
from bisect import bisect_left
from heapq import heappop, heappush
from typing import Dict, List, Optional, Tuple

from ..errors import XlaShapeError
from ..live_range import ValueRecord, read_values_file

__all__ = ["SharingFacts", "MSA_COLORS", "VIEW_TARGETS", "PROTO_HINT", "overlap",
           "computation_start", "alias_buffers"]


#: the memory spaces whose temporary allocation XLA's memory-space assignment
#: places (its alternate memory), per platform: on TPU, VMEM ``S(1)`` (v5e, v5p,
#: v6e) or ``S(3)`` (v4); found on the real corpora (their heap-simulator traces
#: are the one memory-space assignment exports: no SHARE_WITH, a value from its
#: definition to its last use)
MSA_COLORS = {"tpu": frozenset((1, 3))}

#: custom-call targets whose value is a view of its operands' memory (XLA:TPU's
#: in-place concatenation): no buffer of its own; its operands stay live
#: until its last reader
VIEW_TARGETS = frozenset(("ConcatBitcast",))

PROTO_HINT = "read the .hlo.pb: --xla_dump_hlo_as_proto"


class SharingFacts:
    """What the heap replay may need of a dump beyond sizes and live ranges:
    the values file (``*-buffer-assignment-values.txt``: each value's uses
    and defining instruction, :func:`~xlashape.live_range.read_values_file`),
    read the first time it is asked for (``values_path`` may be ``None``:
    not in the dump), and what the module text gave its source
    (``conditionals``: the names of its conditional instructions;
    ``module``: ``(instructions by name, computations by name)`` when the
    source parsed the whole module, else ``None``). A read that fails is kept
    in ``error`` (the caller decides what to drop)."""

    def __init__(self, values_path=None, *, conditionals=None, module=None):
        self.values_path = values_path
        self.conditionals = conditionals
        self._module = module
        self.error: Optional[Exception] = None
        self._values = None
        self._values_read = False
        self._defined: Optional[Dict[str, str]] = None

    def values(self) -> Optional[Dict[int, ValueRecord]]:
        """``value id -> ValueRecord``, or ``None`` without a values file."""
        if not self._values_read:
            self._values_read = True
            if self.values_path is not None:
                try:
                    self._values = read_values_file(self.values_path)
                except (OSError, XlaShapeError) as e:
                    self.error = e
        return self._values

    def give(self, conditionals, module=None) -> None:
        """What the one pass over the module text found: the names of its
        conditionals and, when it parsed the whole module, the
        :class:`~xlashape.hlo_module.HloModule`."""
        self.conditionals = conditionals
        if module is not None:
            self._module = ({i.name: i for i in module.instructions()},
                            {c.name: c for c in module.computations})

    def defines_conditional(self) -> bool:
        """Whether a value of the values file is defined by a conditional
        (then the replay may need the whole module: :meth:`module`)."""
        return any(r.opcode == "conditional" for r in (self.values() or {}).values())

    def module(self):
        """``(instructions by name, computations by name)`` of the module
        text, or ``None`` when its source did not parse it whole."""
        return self._module

    def is_conditional(self, name: str) -> bool:
        """Whether instruction ``name`` is a conditional: from the values file
        when it defines a value, else from the module text's conditionals."""
        if self._defined is None:
            values = self.values() or {}
            self._defined = {r.positions[0][0]: r.opcode for r in values.values() if r.positions}
        got = self._defined.get(name)
        if got is not None:
            return got == "conditional"
        if self._module is not None:
            ins = self._module[0].get(name)
            return ins is not None and ins.opcode == "conditional"
        return name in (self.conditionals or ())


def overlap(starts, ends, offsets, extents, exclusive: int,
             ordered: bool = False) -> Optional[Tuple[int, int]]:
    """Two buffers live at one time whose chunks ``[offset, offset + extent)``
    overlap, or ``None``: a heap the rule explains has none. A buffer lives
    from its start to its end, the end itself excluded when ``exclusive``;
    ``ordered``: the buffers come in the order of their starts."""
    n = len(starts)
    order = range(n) if ordered else sorted(range(n), key=starts.__getitem__)
    ending: List[int] = []   # last position * n + buffer, a heap
    los: List[int] = []      # the chunks live now, by offset
    his: List[int] = []
    ids: List[int] = []
    push, pop = heappush, heappop
    for i in order:
        size = extents[i]
        s = starts[i]
        e = ends[i] - exclusive
        if size <= 0 or e < s:
            continue
        bound = s * n
        while ending and ending[0] < bound:
            j = pop(ending) % n
            k = bisect_left(los, offsets[j])   # live chunks never share an offset
            del los[k], his[k], ids[k]
        lo = offsets[i]
        hi = lo + size
        k = bisect_left(los, lo)
        if k and his[k - 1] > lo:
            return ids[k - 1], i
        if k < len(los) and los[k] < hi:
            return ids[k], i
        los.insert(k, lo)
        his.insert(k, hi)
        ids.insert(k, i)
        push(ending, e * n + i)
    return None


def computation_start(name: str, instructions, computations, time, depth: int = 0) -> Optional[int]:
    """The first program position of a computation, its nested ones included
    (XLA's HloLiveRange computation span)."""
    c = computations.get(name)
    if c is None or depth > 64:
        return None
    first = None
    for ins in c.instructions:
        t = time.get(ins.name)
        if t is not None and (first is None or t < first):
            first = t
        for callee in ins.called_computations:
            if callee in computations and computations[callee].kind in (
                    "while_body", "while_condition", "conditional_branch", "call", "async"):
                t = computation_start(callee, instructions, computations, time, depth + 1)
                if t is not None and (first is None or t < first):
                    first = t
    return first


_ALIASING = re.compile(r"\{([\d,\s]*)\}\s*:\s*\((\d{1,9}),\s*\{([\d,\s]*)\}\)")


def _index_of(text: str) -> Tuple[int, ...]:
    return tuple(int(x) for x in text.replace(" ", "").split(",") if x)


def _split_gte(name: str) -> Tuple[str, Tuple[int, ...]]:
    """``x#1#0`` (XLA prints a get-tuple-element inline) -> ``("x", (1, 0))``."""
    base, *rest = name.split("#")
    return base, tuple(int(x) for x in rest if x.isdigit())


def _leaf_indices(shape, prefix=()) -> List[Tuple[int, ...]]:
    if shape is None or not shape.is_tuple:
        return [prefix]
    out: List[Tuple[int, ...]] = []
    for k, sub in enumerate(shape.tuple_shapes):
        out.extend(_leaf_indices(sub, prefix + (k,)))
    return out


def _in_place_pairs(ins, instructions, roots, depth: int = 0
                    ) -> List[Tuple[Tuple[int, Tuple[int, ...]], Tuple[int, ...]]]:
    """XLA's in-place ``((operand number, operand index), output index)``
    pairs of an instruction (AliasInfo::GetInPlaceInputOutputPairs, default
    rules): dynamic-update-slice, scatter, all-reduce-start, a fusion whose
    output comes from one of them on a fusion parameter, and the
    ``output_to_operand_aliasing`` of fusions, custom-calls and async-starts.
    ``roots``: computation name -> its root instruction."""
    op = ins.opcode
    if op in ("dynamic-update-slice", "scatter", "all-reduce-start"):
        n = len(ins.operand_names)
        n = 1 if op == "dynamic-update-slice" else (n - 1) // 2 if op == "scatter" else n
        return [((0, ()), ())] if n == 1 else [((k, ()), (k,)) for k in range(n)]
    pairs = []
    if op == "fusion" and depth < 8:
        called = ins.called_computations
        comp_root = roots.get(called[0]) if called else None
        if comp_root is not None:
            for leaf in _leaf_indices(ins.shape):
                src, idx = _follow(comp_root, leaf, instructions)
                if src is None:
                    continue
                for (k, kidx), out in _in_place_pairs(src, instructions, roots, depth + 1):
                    if out != idx or k >= len(src.operand_names):
                        continue
                    base, more = _split_gte(src.operand_names[k])
                    p, pidx = _follow(instructions.get(base), more + kidx, instructions)
                    if p is not None and p.opcode == "parameter" and p.parameter_number is not None:
                        pairs.append(((p.parameter_number, pidx), leaf))
    if op in ("fusion", "custom-call", "async-start"):
        text = ins.attribute("output_to_operand_aliasing")
        if text:
            for m in _ALIASING.finditer(text):
                pairs.append(((int(m.group(2)), _index_of(m.group(3))), _index_of(m.group(1))))
    return pairs


def _follow(ins, index: Tuple[int, ...], instructions):
    """Through tuples, get-tuple-elements and bitcasts back to the
    instruction whose output ``index`` is (XLA's FollowTupleIndirection and
    FollowNoOpIndirection)."""
    for _ in range(256):
        if ins is None:
            return None, index
        if ins.opcode == "tuple" and index:
            if index[0] >= len(ins.operand_names):
                return None, index
            base, more = _split_gte(ins.operand_names[index[0]])
            ins, index = instructions.get(base), more + index[1:]
        elif ins.opcode == "get-tuple-element":
            base, more = _split_gte(ins.operand_names[0]) if ins.operand_names else ("", ())
            k = ins.attribute("index")
            if k is None or not k.isdigit():
                return None, index
            ins, index = instructions.get(base), more + (int(k),) + index
        elif ins.opcode == "bitcast" and not index:
            base, more = _split_gte(ins.operand_names[0]) if ins.operand_names else ("", ())
            ins, index = instructions.get(base), more
        else:
            return ins, index
    return None, index


def alias_buffers(values: Dict[int, ValueRecord], module):
    """XLA's HloAliasAnalysis buffers over the values file: the values a
    while loop carries (its operand, its body's and condition's parameter,
    its body's root and its own value at each index), a conditional's
    branch roots and its value, and the operand and output of in-place
    operations are one buffer. Returns ``find(value id)``, one key per
    buffer (entry input/output aliasing is left out: parameters are not in a
    heap)."""
    instructions, computations = module
    parent: Dict[int, int] = {}

    def find(x: int) -> int:
        root = x
        while parent.get(root, root) != root:
            root = parent[root]
        while parent.get(x, x) != root:
            parent[x], x = root, parent[x]
        return root

    def union(x: int, others) -> None:
        for y in others:
            a, b = find(x), find(y)
            if a != b:
                parent[max(a, b)] = min(a, b)

    at: Dict[Tuple[str, Tuple[int, ...]], List[int]] = {}
    for vid, r in values.items():
        for pos in r.positions:
            at.setdefault(pos, []).append(vid)
    callers: Dict[str, Tuple[str, str]] = {}
    roots = {c.name: c.root for c in computations.values() if c.root is not None}
    for ins in instructions.values():
        if ins.opcode == "while":
            for key, how in (("body", "body"), ("condition", "condition")):
                name = (ins.attribute(key) or "").lstrip("%")
                if name:
                    callers[name] = (ins.name, how)
        elif ins.opcode == "conditional":
            for name in ins.called_computations:
                callers[name] = (ins.name, "branch")
    pairs_of: Dict[str, list] = {}
    for vid, r in values.items():
        for u in r.uses:
            user = instructions.get(u.instruction)
            if user is None:
                continue
            if user.opcode == "while":
                union(vid, at.get((user.name, u.index), ()))
            pairs = pairs_of.get(user.name)
            if pairs is None:
                pairs = pairs_of[user.name] = _in_place_pairs(user, instructions, roots)
            for (k, kidx), out in pairs:
                if k == u.operand and kidx == u.index:
                    union(vid, at.get((user.name, out), ()))
        for n, (name, index) in enumerate(r.positions):
            ins = instructions.get(name)
            if ins is None or ins.computation not in callers:
                continue
            caller, how = callers[ins.computation]
            if n == 0 and ins.opcode == "parameter" and how != "branch":
                union(vid, at.get((caller, index), ()))
            if ins.is_root and how != "condition":
                union(vid, at.get((caller, index), ()))
    return find
