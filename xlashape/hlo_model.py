"""The model of an HLO module that the readers build: :class:`HloModule`,
:class:`Computation`, :class:`Instruction`, :class:`Operand`; how a
computation is used (its call kind: :data:`COMPUTATION_KINDS`,
:func:`call_kind`) and what an instruction's result is in memory
(:data:`RESULT_KINDS`, :func:`result_kind`); and the module header's
attributes XLA's memory accounting depends on, parsed
(:func:`parse_entry_computation_layout`, :func:`parse_input_output_alias`,
:func:`parse_buffer_donor`).

The text reader (:mod:`xlashape.hlo_reader`) and the protobuf reader
(:mod:`xlashape.hlo_proto`) both make these objects. An instruction keeps
its operand and attribute text and parses them on first use, so streaming
over a dump only pays for what is read.

>>> parse_input_output_alias("{ {0}: (1, {}, may-alias) }")[0].parameter_number
1
>>> call_kind("while", "body")
'while_body'
"""

from __future__ import annotations

import re
from typing import Dict, Iterator, List, NamedTuple, Optional, Tuple

from . import hlo_text
from .errors import HloParseError, ShapeTypeError
from .hlo_syntax import (_ARRAY_SHAPE, _COMMENT, _STRING, _attr_matches, _balanced, _match_close,
                         _open_string, _shape_at, _split_top, _unquote)
from .hlo_warnings import WarningList, _clip
from .shape import Shape

__all__ = [
    "Instruction",
    "Operand",
    "Computation",
    "HloModule",
    "EntryComputationLayout",
    "Alias",
    "BufferDonor",
    "COMPUTATION_KINDS",
    "EMBEDDED_KINDS",
    "VIEW_OPCODES",
    "RESULT_KINDS",
    "call_kind",
    "has_data",
    "result_kind",
    "parse_entry_computation_layout",
    "parse_input_output_alias",
    "parse_buffer_donor",
]

# -- how computations are used --------------------------------------------------

#: Computation kinds: how the instructions that call a computation use it.
#: ``entry`` (the ENTRY computation), ``fusion`` (a fusion body, ``calls=`` of a
#: fusion), ``to_apply`` (the reducer / comparator / map function of reduce,
#: reduce-window, all-reduce, reduce-scatter, scatter, select-and-scatter,
#: sort, map), ``while_body`` / ``while_condition``, ``conditional_branch``,
#: ``call`` (``to_apply=`` of a call), ``async`` (the computation an
#: async-start wraps), ``custom_call`` (``called_computations=`` of a
#: custom-call), ``called`` (another caller). ``None``: never called.
COMPUTATION_KINDS = ("entry", "fusion", "to_apply", "while_body", "while_condition",
                     "conditional_branch", "call", "async", "custom_call", "called")

#: Kinds whose instructions are not materialized in memory: they run inside
#: the calling instruction (XLA's "embedded" call context), so their values
#: get no buffers of their own.
EMBEDDED_KINDS = frozenset(("fusion", "to_apply", "custom_call"))

# Opcodes that may call computations (the others are not searched for calls).
_CALLER_OPCODES = frozenset((
    "fusion", "call", "while", "conditional", "reduce", "reduce-window", "map", "sort",
    "scatter", "select-and-scatter", "all-reduce", "all-reduce-start", "reduce-scatter",
    "custom-call", "async-start", "async-update", "async-done", "topk"))

# Results that share the buffer of an operand (or of the caller's operand):
# XLA allocates nothing new for them (a tuple only its small index table).
VIEW_OPCODES = frozenset((
    "get-tuple-element", "bitcast", "tuple", "while", "call", "conditional",
    "optimization-barrier", "domain", "add-dependency", "copy-done", "async-done",
    "async-update", "send-done", "recv-done", "all-gather-done", "all-reduce-done",
    "collective-permute-done"))

#: What an instruction's result is in memory (:attr:`Instruction.result`).
RESULT_KINDS = ("buffer", "view", "embedded", "none")


def call_kind(opcode: str, attribute: str) -> str:
    """The kind of a computation named in ``attribute`` (``calls``,
    ``to_apply``, ``body``, ...) of an instruction with ``opcode``.

    >>> call_kind("fusion", "calls"), call_kind("while", "body"), call_kind("reduce", "to_apply")
    ('fusion', 'while_body', 'to_apply')
    """
    if opcode == "fusion":
        return "fusion"
    if opcode == "while":
        if attribute == "body":
            return "while_body"
        if attribute == "condition":
            return "while_condition"
        return "called"
    if opcode == "conditional":
        return "conditional_branch"
    if opcode == "call":
        return "call"
    if opcode == "custom-call":
        return "custom_call"
    if opcode.startswith("async-") or (attribute == "calls" and opcode.endswith(
            ("-start", "-update", "-done"))):
        return "async"
    if attribute in ("to_apply", "select", "scatter"):
        return "to_apply"
    return "called"


_KIND_ORDER = {k: i for i, k in enumerate(
    ("entry", "while_body", "while_condition", "conditional_branch", "call", "async",
     "called", "fusion", "to_apply", "custom_call"))}


def _main_kind(kinds) -> Optional[str]:
    """One kind for a computation used in several ways: a use that
    materializes values wins over an embedded one."""
    if not kinds:
        return None
    return min(kinds, key=lambda k: _KIND_ORDER.get(k, 99))


# The attributes that can name computations.
_CALL_KEYS = ("calls", "to_apply", "body", "condition", "branch_computations", "true_computation",
              "false_computation", "called_computations", "select", "scatter")
# The attributes that can name computations, per opcode (others: all of them).
_CALL_KEYS_BY_OPCODE = {
    "fusion": ("calls",), "while": ("condition", "body"), "call": ("to_apply",),
    "conditional": ("branch_computations", "true_computation", "false_computation"),
    "reduce": ("to_apply",), "reduce-window": ("to_apply",), "map": ("to_apply",),
    "sort": ("to_apply",), "scatter": ("to_apply",), "all-reduce": ("to_apply",),
    "all-reduce-start": ("to_apply",), "reduce-scatter": ("to_apply",),
    "select-and-scatter": ("select", "scatter"), "topk": ("to_apply",),
}
# A list of computations is "{a, b}": a "{" value holding another "{" or an
# "=" names none (and would make the names read grow with the square of a
# garbage line's length).
_CALL_VALUE = re.compile(r"\{[^{}=]*\}|%?[\w.\-]+")
_NAME_REF = re.compile(r"%?([A-Za-z_][\w.\-]*)")
# one item of a metadata={...} block: key="quoted" or key=value
_META_ITEM = re.compile(r'([A-Za-z_]\w*)=(' + hlo_text.DQ_STRING + r'|[^\s}]+)')


def _calls_in(opcode: str, attrs: str):
    """``(key, callee, kind)`` for every computation an instruction's
    attribute text names, in the order of the text."""
    found = []
    for key in _CALL_KEYS_BY_OPCODE.get(opcode, _CALL_KEYS):
        if key not in attrs:
            continue
        kind = call_kind(opcode, key)
        for start, vpos in _attr_matches(attrs, key):
            vm = _CALL_VALUE.match(attrs, vpos)
            if vm is not None:
                found.append((start, key, kind, vm.group()))
    found.sort()
    for _, key, kind, value in found:
        for name in _NAME_REF.findall(value.strip("{}")):
            yield key, name, kind


def _add_call_kind(call_kinds: dict, callee: str, kind: str) -> None:
    """call_kinds[callee] gains ``kind`` (a new set if it has none); a value
    that is not a set is a ShapeTypeError, as the compiled scanner says it."""
    kinds = call_kinds.get(callee)
    if kinds is None:
        call_kinds[callee] = {kind}
    elif type(kinds) is not set:
        raise ShapeTypeError(f"call_kinds[{callee!r}] must be a set of call kinds, not "
                             f"{type(kinds).__name__}")
    else:
        kinds.add(kind)


# -- the data model ------------------------------------------------------------


class Operand(NamedTuple):
    """One operand of an instruction: its name, and its shape when the text
    writes it inline (``f32[2]{0} %p``), else ``None``."""

    name: str
    shape: Optional[Shape]


try:
    # the fields in C, so that the compiled scanner fills them directly
    from ._hloscan import InstructionBase as _InstructionFields
except ImportError:  # pragma: no cover - only without a build
    class _InstructionFields:
        __slots__ = ("computation", "name", "shape", "opcode", "is_root", "line",
                     "operands_text", "attributes_text", "_operands", "_attributes",
                     "_reader", "_comp")


#: the operand shapes of instructions made without a reader (its cache)
_OPERAND_SHAPES: Dict[str, Shape] = {}


class Instruction(_InstructionFields):
    """One HLO instruction.

    ``computation`` (name, ``None`` outside any computation), ``name``
    (without ``%``), ``shape`` (a
    :class:`~xlashape.Shape` with layout), ``opcode``, ``is_root``, ``line``
    (1-based line where it starts). ``operands`` and ``attributes`` are parsed
    on first use, so streaming over a dump only pays for what is read.
    """

    __slots__ = ()

    def __init__(self, computation, name, shape, opcode, *, is_root=False, line=0,
                 operands_text="", attributes_text="", attributes=None, reader=None,
                 comp=None):
        self._comp = comp
        self.computation = computation
        self.name = name
        self.shape = shape
        self.opcode = opcode
        self.is_root = is_root
        self.line = line
        self.operands_text = operands_text
        self.attributes_text = attributes_text
        self._operands = None
        self._attributes = attributes
        self._reader = reader

    # -- lazily parsed parts ----------------------------------------------
    @property
    def operands(self) -> Tuple[Operand, ...]:
        """Operands in order. ``parameter(N)`` and ``constant(...)`` have none
        (see :attr:`argument`)."""
        if self._operands is None:
            self._operands = self._parse_operands()
        return self._operands

    @property
    def operand_names(self) -> Tuple[str, ...]:
        """The operands' names (without ``%``), in order."""
        if self.opcode in ("parameter", "constant"):
            return ()
        t = self.operands_text
        if "[" not in t and "(" not in t and "/" not in t and '"' not in t:
            return tuple(x.strip().lstrip("%") for x in t.split(",") if x.strip())
        return tuple(o.name for o in self.operands)

    @property
    def computation_object(self) -> Optional["Computation"]:
        """The :class:`Computation` the instruction belongs to (``None``
        outside any computation); :attr:`computation` is its name."""
        return self._comp

    @property
    def computation_kind(self) -> Optional[str]:
        """How this instruction's computation is used: one of
        :data:`COMPUTATION_KINDS`, or ``None`` (outside any computation, a
        computation nothing calls, or a caller not read yet)."""
        c = self._comp
        return None if c is None else c.kind

    @property
    def result(self) -> str:
        """What the result is in memory: ``"buffer"`` (XLA allocates new
        memory for it), ``"view"`` (it is the buffer of an operand or of the
        caller's operand: get-tuple-element, bitcast, tuple, a parameter of a
        computation other than the entry, while, call, conditional, the
        ``*-done`` half of an asynchronous pair, ...), ``"embedded"`` (inside
        a fusion body, reducer or other computation that runs within one
        instruction: no buffer of its own), ``"none"`` (a token: no data).

        A tuple's elements are its operands' buffers; XLA only adds a small
        table of pointers to them, which counts as the tuple's own memory
        (see :func:`xlashape.memory.tuple_table_size`)."""
        c = self._comp
        return result_kind(self.opcode, self.shape, c, c is not None and c.usage()[1])

    @property
    def argument(self) -> str:
        """The raw text between the opcode's parentheses (``0`` for
        ``parameter(0)``, the literal for ``constant``)."""
        return self.operands_text.strip()

    @property
    def parameter_number(self) -> Optional[int]:
        if self.opcode != "parameter":
            return None
        try:
            return int(self.argument)
        except ValueError:
            return None

    @property
    def attributes(self) -> Dict[str, str]:
        """Attributes after the operand list, ``name -> raw text`` (strings
        keep their quotes; blocks keep their braces)."""
        if self._attributes is None:
            attrs = {}
            for part in _split_top(self.attributes_text):
                part = part.strip()
                if not part:
                    continue
                key, eq, value = part.partition("=")
                attrs[key.strip()] = value.strip() if eq else ""
            self._attributes = attrs
        return self._attributes

    def attribute(self, key: str, default: Optional[str] = None) -> Optional[str]:
        """The raw text of one attribute, or ``default``.

        Cheaper than :attr:`attributes` on long lines: it finds ``key=`` at the
        top level (not inside a quoted string) without splitting the rest.
        """
        if self._attributes is not None:
            return self._attributes.get(key, default)
        text = self.attributes_text
        if key + "=" not in text:
            return default
        for start, vpos in _attr_matches(text, key):
            if _open_string(text[:start]) or not _balanced(text[:start]):
                continue  # inside a string or a block: not a top-level attribute
            if text.startswith(("{", "("), vpos):
                end = _match_close(text, vpos)
                if end < 0:
                    break
            elif text.startswith('"', vpos):
                sm = _STRING.match(text, vpos)
                end = sm.end() if sm else len(text)
            else:
                end = text.find(",", vpos)
                if end < 0:
                    end = len(text)
            return text[vpos:end].strip()
        return self.attributes.get(key, default)

    @property
    def kind(self) -> Optional[str]:
        """``kind=`` of a fusion (``kLoop``, ``kInput``, ``kOutput``, ``kCustom``)."""
        return self.attribute("kind")

    @property
    def called_computations(self) -> Tuple[str, ...]:
        """Names in ``calls=``, ``to_apply=``, ``body=``, ``condition=`` and
        ``branch_computations=``, without ``%``."""
        out = []
        for key in ("calls", "to_apply", "condition", "body", "branch_computations"):
            v = self.attribute(key)
            if v:
                out.extend(_NAME_REF.findall(v.strip("{}")))
        return tuple(out)

    @property
    def metadata(self) -> Dict[str, str]:
        """``metadata={op_type="..." op_name="..." source_file=... source_line=...}``
        as a dict of unquoted strings."""
        raw = self.attributes.get("metadata", "")
        return {k: _unquote(v) for k, v in _META_ITEM.findall(raw)}

    def _parse_operands(self) -> Tuple[Operand, ...]:
        if self.opcode in ("parameter", "constant"):
            return ()
        out = []
        reader = self._reader      # its shape cache, when a reader made the instruction
        for part in _split_top(self.operands_text):
            part = _COMMENT.sub(" ", part).strip()
            if not part:
                continue
            shape = None
            if part[0] == "(" or _ARRAY_SHAPE.match(part) or part.startswith(("token[", "opaque[")):
                try:
                    shape, end = (_shape_at(part, 0, _OPERAND_SHAPES) if reader is None
                                  else reader.shape_at(part, 0))
                except HloParseError as e:
                    raise HloParseError(
                        f"operand of {self.name}: {e.message}",
                        e.text, e.position) from None
                part = part[end:].strip()
            out.append(Operand(part.lstrip("%"), shape))
        return tuple(out)

    def __repr__(self):
        root = "ROOT " if self.is_root else ""
        return f"<Instruction {root}{self.name} = {self.shape} {self.opcode}(...) line {self.line}>"


class Computation:
    """A named computation: its instructions in order, whether it is the
    ``ENTRY``, its signature text ``(p: f32[2]) -> f32[2]`` and its line."""

    __slots__ = ("name", "is_entry", "signature", "line", "instructions", "kinds", "_usage")

    def __init__(self, name, is_entry=False, signature="", line=0):
        self.name = name
        self.is_entry = is_entry
        self.signature = signature
        self.line = line
        self.instructions: List[Instruction] = []
        #: every way the module uses this computation (see :data:`COMPUTATION_KINDS`)
        self.kinds: set = {"entry"} if is_entry else set()
        self._usage = (-1, None, False)

    def usage(self) -> Tuple[Optional[str], bool]:
        """``(kind, is_embedded)``, remembered until ``kinds`` grows (it only
        ever grows, as callers are read)."""
        u = self._usage
        n = len(self.kinds)
        if u[0] != n:
            kinds = self.kinds
            u = self._usage = (n, _main_kind(kinds),
                               bool(kinds) and all(k in EMBEDDED_KINDS for k in kinds))
        return u[1], u[2]

    @property
    def kind(self) -> Optional[str]:
        """How the computation is used (:data:`COMPUTATION_KINDS`); when it is
        used in several ways, a use that materializes values wins. ``None``
        if nothing calls it (or its caller has not been read yet)."""
        return self.usage()[0]

    @property
    def is_embedded(self) -> bool:
        """True if every use runs it inside one instruction (fusion body,
        reducer, ...): its values are not materialized in memory."""
        return self.usage()[1]

    @property
    def root(self) -> Optional[Instruction]:
        """The ``ROOT`` instruction (XLA's rule: else the last one)."""
        for ins in self.instructions:
            if ins.is_root:
                return ins
        return self.instructions[-1] if self.instructions else None

    def __iter__(self):
        return iter(self.instructions)

    def __len__(self):
        return len(self.instructions)

    def __repr__(self):
        entry = "ENTRY " if self.is_entry else ""
        return f"<Computation {entry}{self.name}: {len(self.instructions)} instructions>"


# -- the header's attributes -------------------------------------------------------


class EntryComputationLayout(NamedTuple):
    """The ``entry_computation_layout={(P0, P1, ...)->R}`` of a module header:
    the entry parameters' shapes and the result shape, with the layouts (and
    memory spaces) the caller sees."""

    parameters: Tuple[Shape, ...]
    result: Shape


class Alias(NamedTuple):
    """One entry of ``input_output_alias={ {1}: (0, {}, may-alias) }``: output
    element ``output_index`` shares the buffer of parameter
    ``parameter_number`` at ``parameter_index`` (``kind`` ``may-alias`` or
    ``must-alias``)."""

    output_index: Tuple[int, ...]
    parameter_number: int
    parameter_index: Tuple[int, ...]
    kind: str


class BufferDonor(NamedTuple):
    """One entry of ``buffer_donor={ (0, {}) }``: a parameter buffer the
    program may reuse for any output."""

    parameter_number: int
    parameter_index: Tuple[int, ...]


_ALIAS_ENTRY = re.compile(
    r"\{([\d,\s]*)\}\s*:\s*\(\s*(\d+)\s*(?:,\s*\{([\d,\s]*)\}\s*)?(?:,\s*([\w\-]+)\s*)?\)")
_DONOR_ENTRY = re.compile(r"\(\s*(\d+)\s*(?:,\s*\{([\d,\s]*)\}\s*)?\)")


def _index(text: Optional[str]) -> Tuple[int, ...]:
    return tuple(int(x) for x in (text or "").replace(" ", "").split(",") if x)


def parse_entry_computation_layout(text: str) -> EntryComputationLayout:
    """``{(f32[2]{0}, s32[]{:T(128)})->f32[2]{0}}`` (the attribute's value, as
    the header prints it) as an :class:`EntryComputationLayout`.

    >>> ecl = parse_entry_computation_layout("{(f32[2]{0}, s32[])->(f32[2]{0})}")
    >>> [str(p) for p in ecl.parameters], str(ecl.result)
    (['f32[2]{0}', 's32[]'], '(f32[2]{0})')
    """
    t = text.strip()
    if t.startswith("{") and t.endswith("}"):
        t = t[1:-1].strip()
    if not t.startswith("("):
        raise HloParseError("entry_computation_layout must be '{(parameters)->result}'", text, 0)
    params, end = hlo_text.parse_shape_prefix(t, 0)
    rest = t[end:].lstrip()
    if not rest.startswith("->"):
        raise HloParseError("entry_computation_layout must be '{(parameters)->result}': "
                            "no '->' after the parameters", text, 0)
    rest = rest[2:].strip()
    result, end = hlo_text.parse_shape_prefix(rest, 0)
    if rest[end:].strip():
        raise HloParseError("unexpected text after the result shape of "
                            "entry_computation_layout: " + _clip(rest[end:]), text, 0)
    return EntryComputationLayout(tuple(params.tuple_shapes), result)


def parse_input_output_alias(text: str) -> Tuple[Alias, ...]:
    """``{ {0}: (1, {}, may-alias) }`` as :class:`Alias` entries.

    >>> parse_input_output_alias("{ {0}: (0, {}, may-alias), {1,2}: (3, {0}, must-alias) }")
    (Alias(output_index=(0,), parameter_number=0, parameter_index=(), kind='may-alias'), Alias(output_index=(1, 2), parameter_number=3, parameter_index=(0,), kind='must-alias'))
    """
    return tuple(Alias(_index(m.group(1)), int(m.group(2)), _index(m.group(3)),
                       m.group(4) or "may-alias")
                 for m in _ALIAS_ENTRY.finditer(text))


def parse_buffer_donor(text: str) -> Tuple[BufferDonor, ...]:
    """``{ (0, {}), (2, {1}) }`` as :class:`BufferDonor` entries."""
    return tuple(BufferDonor(int(m.group(1)), _index(m.group(2)))
                 for m in _DONOR_ENTRY.finditer(text))


class HloModule:
    """A parsed module: ``name``, ``attributes`` (raw text after the name on the
    ``HloModule`` line, e.g. ``entry_computation_layout``), ``computations`` in
    order, and the ``warnings`` for skipped lines. The header attributes XLA's
    memory accounting depends on are also given parsed:
    :attr:`entry_computation_layout`, :attr:`input_output_alias`,
    :attr:`buffer_donor`."""

    def __init__(self, name=None, attributes=None):
        self.name = name
        self.attributes: Dict[str, str] = attributes or {}
        self.computations: List[Computation] = []
        self.warnings: WarningList = WarningList()
        self.fused_computations: set = set()
        self.applied_computations: set = set()
        self.lines_read = 0

    @property
    def entry_computation_layout(self) -> Optional[EntryComputationLayout]:
        """The header's ``entry_computation_layout``, parsed (``None`` if absent).
        Raises :class:`~xlashape.HloParseError` if it does not parse."""
        text = self.attributes.get("entry_computation_layout")
        return None if text is None else parse_entry_computation_layout(text)

    @property
    def input_output_alias(self) -> Tuple[Alias, ...]:
        """The header's ``input_output_alias`` entries (donated parameters
        whose buffers the outputs reuse); ``()`` if absent."""
        return parse_input_output_alias(self.attributes.get("input_output_alias", ""))

    @property
    def buffer_donor(self) -> Tuple[BufferDonor, ...]:
        """The header's ``buffer_donor`` entries; ``()`` if absent."""
        return parse_buffer_donor(self.attributes.get("buffer_donor", ""))

    @property
    def entry(self) -> Optional[Computation]:
        for c in self.computations:
            if c.is_entry:
                return c
        return None

    def computation(self, name: str) -> Computation:
        """The computation called ``name`` (with or without ``%``)."""
        name = name.lstrip("%")
        for c in self.computations:
            if c.name == name:
                return c
        raise KeyError(f"no computation named {name!r}; the module has "
                       f"{[c.name for c in self.computations]}")

    def instructions(self) -> Iterator[Instruction]:
        for c in self.computations:
            yield from c.instructions

    def instruction(self, name: str) -> Instruction:
        name = name.lstrip("%")
        for ins in self.instructions():
            if ins.name == name:
                return ins
        raise KeyError(f"no instruction named {name!r}")

    def __repr__(self):
        n = sum(len(c) for c in self.computations)
        return f"<HloModule {self.name}: {len(self.computations)} computations, {n} instructions>"


# -- what a result is in memory -------------------------------------------------


def has_data(shape: Shape) -> bool:
    """True unless the shape holds only tokens (or nothing)."""
    if shape.is_tuple:
        return any(has_data(s) for s in shape.tuple_shapes)
    return not shape.is_token


def result_kind(opcode: str, shape: Shape, computation: Optional["Computation"],
                embedded: bool) -> str:
    """:attr:`Instruction.result` from its parts (``embedded``: the
    computation's :meth:`Computation.usage` says so)."""
    if embedded:
        return "embedded"
    if not has_data(shape):
        return "none"
    if opcode == "parameter":
        return "view" if computation is not None and not computation.is_entry else "buffer"
    if opcode in VIEW_OPCODES:
        return "view"
    return "buffer"
