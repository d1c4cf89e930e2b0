"""XLA's ``CanShareOperandBufferWithUser``: may a value take its operand's memory?

When a value starts where one of its operands' values ends, XLA's heap
simulator lets it take that value's memory if
``HloDataflowAnalysis::CanShareOperandBufferWithUser`` allows it (and the
backend's hint, ``AliasInfo::MayAlias``, does not decide otherwise). The
rule, from the module text and the values file:

- never with a constant operand, never for a ``copy``;
- yes when the user is an in-place operation on that operand at that output
  (dynamic-update-slice, scatter, fusions around them,
  ``output_to_operand_aliasing``) and the shapes (with layouts) are equal;
- the backend's hint: XLA:GPU decides fusions itself (the operand reaches the
  output along elementwise operations, bitcasts, an in-place
  dynamic-update-slice or scatter; a reduction's input is read before any
  output is written), all-reduce, and custom-calls (no, but for cuBLASLt's
  bias and the Cholesky factor); XLA:CPU and XLA:TPU give none that the
  corpora show;
- otherwise only with equal shapes: a loop or input fusion whose parameter's
  every transitive use inside it is elementwise (or a tuple); an output
  fusion ``add(dot|convolution, operand)`` whose operand has that one use;
  while and conditional; dynamic-update-slice, scatter (operand 0),
  triangular-solve (operand 1); sort (the operand used by it alone); a call
  whose callee's root is elementwise on it; any instruction elementwise on
  that operand.

:class:`OperandSharing` answers it for the values of one module
(:meth:`OperandSharing.candidates`: the operand values a value may take the
memory of, in XLA's order).
"""

from __future__ import annotations

from typing import Dict, List, Optional, Sequence, Tuple

from ..live_range import ValueRecord
from .sharing import _in_place_pairs, _split_gte

__all__ = ["OperandSharing", "ELEMENTWISE"]

#: opcodes XLA counts as elementwise (``HloInstruction::IsOpElementwise``)
ELEMENTWISE = frozenset((
    "abs", "round-nearest-afz", "round-nearest-even", "ceil", "count-leading-zeros", "convert",
    "bitcast-convert", "copy", "cosine", "erf", "exponential", "exponential-minus-one", "floor",
    "imag", "is-finite", "log", "log-plus-one", "not", "negate", "popcnt", "real",
    "reduce-precision", "rsqrt", "sign", "sine", "sqrt", "cbrt", "tan", "tanh", "logistic",
    "add", "atan2", "compare", "complex", "divide", "maximum", "minimum", "multiply", "power",
    "remainder", "subtract", "and", "or", "xor", "shift-left", "shift-right-arithmetic",
    "shift-right-logical", "stochastic-convert",
    "select", "clamp", "map",
))


def _subshape(shape, index: Tuple[int, ...]):
    for k in index:
        if shape is None or not shape.is_tuple or k >= len(shape.tuple_shapes):
            return None
        shape = shape.tuple_shapes[k]
    return shape


def _bit_width(shape) -> Optional[int]:
    try:
        return shape.element_type.bit_width
    except AttributeError:
        return None


class _Body:
    """A called computation's instructions by name, their users (``name ->
    [(user, operand number)]``), its parameters by number and its root."""

    __slots__ = ("by_name", "users", "params", "root")

    def __init__(self, comp):
        self.by_name = {i.name: i for i in comp.instructions}
        self.users: Dict[str, List[Tuple[object, int]]] = {}
        self.params: Dict[int, object] = {}
        for ins in comp.instructions:
            if ins.opcode == "parameter" and ins.parameter_number is not None:
                self.params[ins.parameter_number] = ins
            for k, name in enumerate(ins.operand_names):
                base = _split_gte(name)[0]
                self.users.setdefault(base, []).append((ins, k))
        self.root = comp.root


class OperandSharing:
    """``CanShareOperandBufferWithUser`` over one module: ``values`` (the
    values file: value id -> :class:`~xlashape.live_range.ValueRecord`),
    ``module`` (``(instructions by name, computations by name)``, the whole
    module text parsed) and the ``platform`` whose backend hint applies."""

    def __init__(self, values: Dict[int, ValueRecord], module, platform: Optional[str]):
        self.values = values
        self.instructions, self.computations = module
        self.platform = platform
        self._at: Dict[str, List[int]] = {}
        for vid in sorted(values):
            for name, index in values[vid].positions:
                if index == ():
                    self._at.setdefault(name, []).append(vid)
        self._bodies: Dict[str, _Body] = {}
        self._roots = {c.name: c.root for c in self.computations.values() if c.root is not None}
        self._users: Optional[Dict[str, List[str]]] = None
        self._gte: Optional[Dict[str, "_Gte"]] = None
        self._candidates: Dict[int, List[int]] = {}

    # -- what the heap simulator asks -----------------------------------------------

    def defining(self, vid: int) -> Tuple[Optional[object], Tuple[int, ...]]:
        """The instruction that defines value ``vid`` and the index into its
        result (``(None, ())`` when the text does not have it)."""
        r = self.values.get(vid)
        if r is None or not r.positions:
            return None, ()
        name, index = r.positions[0]
        return self.instructions.get(name), index

    def candidates(self, vid: int) -> List[int]:
        """The values of value ``vid``'s operands (their whole results), in
        operand order then by value id, whose memory XLA lets it take when
        they end where it starts: only values an operand defines (XLA asks
        ``IsUserOf`` of the value's defining instruction; a get-tuple-element
        defines none). Kept per value: it reads only the module text."""
        got = self._candidates.get(vid)
        if got is None:
            got = self._candidates[vid] = self._find_candidates(vid)
        return got

    def _find_candidates(self, vid: int) -> List[int]:
        user, user_index = self.defining(vid)
        if user is None or user.opcode == "copy":
            return []
        out: List[int] = []
        for name in user.operand_names:
            if "#" in name:
                continue
            for ov in self._at.get(name, ()):
                if ov == vid:
                    continue
                operand, operand_index = self.defining(ov)
                if operand is None or operand.name != name:
                    continue
                if self.can_share(operand, operand_index, user, user_index, ov):
                    out.append(ov)
        return out

    def position_instruction(self, name: str, index: Tuple[int, ...]):
        """The instruction at a value's position ``(name, index)`` as a
        user's operand names it: a get-tuple-element XLA prints inline
        (``x#1``) stands for itself with that name."""
        ins = self.instructions.get(name)
        if ins is not None:
            return ins
        g = self._gtes().get(name)
        return g

    def _gtes(self):
        if self._gte is None:
            self._gte = {}
            for vid, r in self.values.items():
                if len(r.positions) < 2:
                    continue
                base, index = r.positions[0]
                base_ins = self.instructions.get(base)
                if base_ins is None or not index:
                    continue
                for name, idx in r.positions[1:]:
                    if idx == () and name not in self.instructions:
                        text = base + "".join(f"#{k}" for k in index)
                        self._gte[name] = _Gte(text, _subshape(base_ins.shape, index))
        return self._gte

    # -- the rule ----------------------------------------------------------------

    def can_share(self, operand, operand_index, user, user_index, operand_value: int) -> bool:
        if user.opcode == "custom-call" and user_index == (1,):
            target = (user.attribute("custom_call_target") or "").strip('"')
            if target in ("__cublas$lt$matmul", "__cublas$lt$matmul$f8"):
                return False
        if operand.opcode == "constant":
            return False
        a = _subshape(operand.shape, operand_index)
        b = _subshape(user.shape, user_index)
        if a is None or b is None:
            return False
        equal = a == b
        if equal and self._must_alias(user, user_index, operand_value):
            return True
        hint = self._hint(operand, operand_index, user, user_index)
        if hint is not None:
            return hint
        if not equal:
            return False
        op = user.opcode
        k = self._operand_number(user, operand.name)
        if op == "fusion":
            body = self._body(user)
            if body is None or k is None:
                return False
            param = body.params.get(k)
            if param is None:
                return False
            kind = user.kind
            if kind in ("kLoop", "kInput"):
                return self._transitively_elementwise(body, param)
            root = body.root
            if kind == "kOutput" and root is not None and root.opcode == "add":
                ops = [_split_gte(n)[0] for n in root.operand_names]
                matched = next((j for j, n in enumerate(ops)
                                if body.by_name.get(n) is not None
                                and body.by_name[n].opcode in ("convolution", "dot")), None)
                if matched is None:
                    return False
                other = 1 if matched == 0 else 0
                uses = body.users.get(param.name, [])
                return len(uses) == 1 and uses[0][0] is root and uses[0][1] == other
        if op in ("while", "conditional"):
            return True
        if op in ("dynamic-update-slice", "scatter", "triangular-solve", "set-dimension-size"):
            idx = [j for j, n in enumerate(user.operand_names) if n == operand.name]
            want = 1 if op == "triangular-solve" else 0
            return len(idx) == 1 and idx[0] == want
        if op == "sort":
            if len(self._users_of(operand.name)) != 1:
                return False
            if len(user.operand_names) == 1:
                return True
            idx = [j for j, n in enumerate(user.operand_names) if n == operand.name]
            return bool(user_index) and len(idx) == 1 and user_index[0] == idx[0]
        if op == "call":
            r = self.values.get(operand_value)
            uses = r.uses if r is not None else ()
            callee = user.called_computations[0] if user.called_computations else None
            root = self._roots.get(callee) if callee else None
            caller_use = any(u.instruction == user.name for u in uses)
            callee_use = root is not None and any(
                u.instruction == root.name and self._elementwise_on(root, u.operand, None)
                for u in uses)
            return len(uses) == 2 and caller_use and callee_use
        if k is None:
            return False
        return self._elementwise_on(user, k, None)

    def _must_alias(self, user, user_index, operand_value: int) -> bool:
        r = self.values.get(operand_value)
        if r is None:
            return False
        pairs = _in_place_pairs(user, self.instructions, self._roots)
        for (k, kidx), out in pairs:
            if out != tuple(user_index):
                continue
            for u in r.uses:
                if u.instruction == user.name and u.operand == k and tuple(u.index) == tuple(kidx):
                    return True
        return False

    def _hint(self, operand, operand_index, user, user_index) -> Optional[bool]:
        if self.platform != "gpu":
            return None
        op = user.opcode
        if op in ("all-reduce", "collective-broadcast"):
            n = len(user.operand_names)
            return n == 1 or (len(user_index) == 1 and user_index[0] < n
                              and user.operand_names[user_index[0]] == operand.name)
        if op == "custom-call":
            target = (user.attribute("custom_call_target") or "").strip('"')
            if target == "__cublas$lt$matmul":
                config = user.attribute("backend_config") or ""
                beta_zero = '"beta":0' in config.replace(" ", "") or "beta" not in config
                ops = user.operand_names
                return (not beta_zero) and len(ops) > 2 and ops[2] == operand.name
            if target == "__cusolver$cholesky":
                return len(user_index) == 1 and user_index[0] == 0
            return False
        if op == "fusion":
            return self._gpu_fusion(operand, user, user_index)
        return None

    def _gpu_fusion(self, operand, user, user_index) -> Optional[bool]:
        """XLA:GPU's ``FusionCanShareBufferHint``."""
        b = _subshape(user.shape, user_index)
        a = operand.shape
        if b is None or a is None:
            return False
        if not a == b:
            if not a.is_array or not b.is_array:
                return False
            if _elements(a) != _elements(b) or _bit_width(a) != _bit_width(b):
                return False
        body = self._body(user)
        k = self._operand_number(user, operand.name)
        if body is None or k is None or k not in body.params:
            return False
        param = body.params[k]
        output = body.root
        if output is None:
            return False
        if output.opcode == "tuple":
            if not user_index:
                return False
            ops = output.operand_names
            if user_index[0] >= len(ops):
                return False
            output = body.by_name.get(_split_gte(ops[user_index[0]])[0])
            if output is None:
                return False
        non_bitcast = output
        if non_bitcast.opcode == "bitcast":
            nb = body.by_name.get(_split_gte(non_bitcast.operand_names[0])[0]) \
                if non_bitcast.operand_names else None
            non_bitcast = nb if nb is not None else non_bitcast
        hero = self._reduction_hero(body)
        queue = [param]
        seen = {param.name}
        found = False
        while queue:
            cur = queue.pop(0)
            if cur is output:
                found = True
            if hero is not None and cur is hero:
                continue
            for hlo, j in body.users.get(cur.name, []):
                if hlo.name not in seen:
                    seen.add(hlo.name)
                    queue.append(hlo)
                if hlo is non_bitcast and hlo.opcode == "scatter":
                    n_in = len(hlo.shape.tuple_shapes) if hlo.shape.is_tuple else 1
                    first = next((i for i, n in enumerate(hlo.operand_names)
                                  if _split_gte(n)[0] == cur.name), None)
                    count = sum(1 for n in hlo.operand_names if _split_gte(n)[0] == cur.name)
                    if first is not None and first < n_in and count == 1:
                        continue
                if (non_bitcast.opcode == "dynamic-update-slice" and hlo.opcode == "dynamic-slice"
                        and non_bitcast.operand_names and hlo.operand_names
                        and _split_gte(non_bitcast.operand_names[0])[0]
                        == _split_gte(hlo.operand_names[0])[0]):
                    upd = body.by_name.get(_split_gte(non_bitcast.operand_names[1])[0]) \
                        if len(non_bitcast.operand_names) > 1 else None
                    if upd is None or hlo.shape != upd.shape:
                        return False
                    if not (_effective_scalar(hlo.shape) and _effective_scalar(upd.shape)):
                        if hlo.operand_names[1:] != non_bitcast.operand_names[2:]:
                            return False
                    continue
                first = next((i for i, n in enumerate(hlo.operand_names)
                              if _split_gte(n)[0] == cur.name), 0)
                if ((not self._elementwise_on(hlo, first, body) or hlo.opcode == "copy")
                        and hlo.opcode not in ("bitcast", "tuple") and hlo is not hero):
                    if (hlo is not non_bitcast or hlo.opcode != "dynamic-update-slice"
                            or first != 1):
                        return False
        return found

    @staticmethod
    def _reduction_hero(body: "_Body"):
        """The reduce a reduction fusion's emitter computes first (its hero),
        or ``None``."""
        root = body.root
        roots = []
        if root is not None and root.opcode == "tuple":
            roots = [body.by_name.get(_split_gte(n)[0]) for n in root.operand_names]
        elif root is not None:
            roots = [root]
        for r in roots:
            cur = r
            for _ in range(64):
                if cur is None:
                    break
                if cur.opcode == "reduce":
                    return cur
                if cur.opcode in ("bitcast", "convert") or cur.opcode in ELEMENTWISE:
                    nxt = [body.by_name.get(_split_gte(n)[0]) for n in cur.operand_names]
                    nxt = [x for x in nxt if x is not None and x.opcode != "parameter"
                           and x.opcode != "constant"]
                    if len(nxt) != 1:
                        break
                    cur = nxt[0]
                    continue
                break
        return None

    # -- helpers -------------------------------------------------------------------

    def _body(self, user) -> Optional[_Body]:
        called = user.called_computations
        if not called:
            return None
        name = called[0]
        got = self._bodies.get(name)
        if got is None:
            comp = self.computations.get(name)
            if comp is None:
                return None
            got = self._bodies[name] = _Body(comp)
        return got

    @staticmethod
    def _operand_number(user, name: str) -> Optional[int]:
        for j, n in enumerate(user.operand_names):
            if n == name:
                return j
        return None

    def _users_of(self, name: str) -> List[str]:
        if self._users is None:
            users: Dict[str, List[str]] = {}
            for ins in self.instructions.values():
                for n in set(ins.operand_names):
                    users.setdefault(n, []).append(ins.name)
            self._users = users
        return self._users.get(name, [])

    def _elementwise_on(self, ins, k: int, body: Optional[_Body]) -> bool:
        """``HloInstruction::IsElementwiseOnOperand(k)`` (``body``: the
        computation ``ins`` is in, to look up its operands' shapes)."""
        op = ins.opcode
        if op == "fusion":
            fb = self._body(ins)
            if fb is None or k not in fb.params:
                return False
            work = [fb.params[k]]
            seen = {fb.params[k].name}
            while work:
                cur = work.pop(0)
                for u, j in fb.users.get(cur.name, []):
                    if u.name in seen:
                        continue
                    if self._elementwise(u, None, fb) or all(
                            self._elementwise(u, i, fb) for i, n in enumerate(u.operand_names)
                            if _split_gte(n)[0] == cur.name):
                        work.append(u)
                        seen.add(u.name)
                    else:
                        return False
            return True
        return self._elementwise(ins, k, body)

    def _elementwise(self, ins, k: Optional[int], body: Optional[_Body]) -> bool:
        op = ins.opcode
        if op == "dynamic-update-slice":
            return k == 0
        if op == "bitcast-convert":
            src = None
            if ins.operand_names:
                name = _split_gte(ins.operand_names[0])[0]
                src = (body.by_name.get(name) if body is not None else None) \
                    or self.instructions.get(name)
            if src is None or _bit_width(ins.shape) != _bit_width(src.shape):
                return False
            return True
        if op == "fusion":
            return False if k is None else self._elementwise_on(ins, k, body)
        return op in ELEMENTWISE

    def _transitively_elementwise(self, body: _Body, start) -> bool:
        """``AreTransitiveUsesElementwiseOrTuple`` inside a fused computation."""
        stack = [start]
        visited = set()
        while stack:
            cur = stack.pop()
            visited.add(cur.name)
            for u, _ in body.users.get(cur.name, []):
                for j, n in enumerate(u.operand_names):
                    if _split_gte(n)[0] != cur.name:
                        continue
                    if not self._elementwise_on(u, j, body) and u.opcode != "tuple":
                        return False
                if u.name not in visited:
                    stack.append(u)
        return True


def _elements(shape) -> int:
    n = 1
    for d in shape.dimensions:
        n *= d
    return n


def _effective_scalar(shape) -> bool:
    return shape.is_array and all(d == 1 for d in shape.dimensions)


class _Gte:
    """A get-tuple-element XLA prints inline in its user's operands
    (``x#1``): its ``name`` is that text."""

    opcode = "get-tuple-element"
    called_computations = ()
    computation = None
    kind = None

    def __init__(self, name: str, shape):
        self.name = name
        self.shape = shape
        self.operand_names = (_split_gte(name)[0],)

    def attribute(self, key, default=None):
        return default
