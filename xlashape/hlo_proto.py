"""HLO modules from XLA's protobuf dumps (``*.hlo.pb``), in the text reader's model.

:func:`read_hlo_proto_module` turns an ``HloProto`` (``--xla_dump_hlo_as_proto``
writes one per module: ``*.hlo.pb``, or ``*.hlo.pb.gz``) or a bare
``HloModuleProto`` (``as_serialized_hlo_module_proto()``) into the same
:class:`~xlashape.hlo_module.HloModule` / ``Computation`` / ``Instruction``
objects that :func:`~xlashape.hlo_module.parse_hlo_module` builds from text:
computations in the proto's order, the ENTRY, instructions with real
:class:`~xlashape.Shape` objects (layouts included), the root, operands,
called computations (with their kinds: fusion, while body, ...), metadata,
and the module header's ``entry_computation_layout``, ``input_output_alias``
and ``buffer_donor``. Each instruction's ``attributes_text`` is written the
way XLA's text printer writes it (``kind=kLoop, calls=%f,
metadata={op_name="..." stack_frame_id=3}``, ...) for the fields this
schema declares, the first time it is read (:class:`ProtoInstruction`).
:meth:`HloProtoModule.to_text` writes the whole module as HLO text.

Two readers build the same model. The compiled one (:mod:`xlashape._protoscan`)
reads each instruction's name, id, opcode, shape, operand and callee ids
from the module's serialized bytes (those protobuf has just parsed, or the
message serialized again) and makes the objects in C, one Shape per
distinct ShapeProto: about a fifth of the time of the reference, which reads
protobuf's message objects field by field (:func:`_reference_module`). The
reference reads what the compiled reader declines (an encoding protobuf
reads otherwise than a plain walk would: a message field given twice, which
protobuf merges, a varint of more than 64 bits, a group; names that must be
sanitized; anything malformed) and is the only source of error messages;
``tests/test_protos_compiled.py`` compares the two models.

The result is an :class:`HloProtoModule` (a subclass of ``HloModule``) that
also holds what only the proto has: the ``schedule`` (instruction names per
computation, in order), the stack frames (:meth:`HloProtoModule.stack_trace`),
instruction and computation ids, and the message itself (``proto``, with
``buffer_assignment`` when XLA wrote one).

Differences from the text of the same module: names and ids come from the
proto; operands are written without their shapes (``%p``, not
``f32[2]{0} %p``: look the operand up by name for its shape); instructions
that newer XLA leaves out of its text (the get-tuple-elements it prints as
``%while.6#1``) are present, as they are in the module; literals, windows,
shardings and the other undeclared fields are not in ``attributes``;
``backend_config`` is the string the compiler stored (XLA's text re-prints
it from its parsed form).

Names that HLO text cannot hold as one name (a newline, a space, a quote, a
leading digit: never in a module XLA wrote, whose names its NameUniquer
sanitizes) are sanitized the same way (``_`` for each such character) and
made unique with a ``.N`` suffix, in the model and so in its text; quoted
strings escape every character that could end a line, so that
:meth:`HloProtoModule.to_text` reads back as the same instructions whatever
the proto holds.
"""

from __future__ import annotations

import gc
import re
from typing import Dict, List, NamedTuple, Optional, Tuple

from . import protos as _pb
from .errors import ProtoDecodeError, XlaShapeError
from .hlo_text import DQ_STRING
from .hlo_model import Computation, HloModule, Instruction, call_kind
from .shape import Shape
from .shape_proto import _shape_from_message

try:
    from . import _protoscan
except ImportError:  # pragma: no cover - only without a build
    _protoscan = None

__all__ = [
    "HloProtoModule",
    "ProtoInstruction",
    "StackFrame",
    "read_hlo_proto_module",
    "module_from_proto",
]


class StackFrame(NamedTuple):
    """One frame of a stack trace (innermost first in :meth:`HloProtoModule.stack_trace`)."""

    file_name: str
    function_name: str
    line: int
    column: int
    end_line: int
    end_column: int


class HloProtoModule(HloModule):
    """An :class:`~xlashape.hlo_module.HloModule` read from XLA's protobuf.

    Besides the text model: ``id`` (the module's id), ``proto`` (the
    ``HloProto`` message, with ``buffer_assignment`` when XLA wrote one),
    ``schedule`` (``{computation name: (instruction name, ...)}``, ``None``
    when the module is not scheduled), ``instruction_ids`` and
    ``computation_ids`` (``{id: name}``).
    """

    def __init__(self, name=None, attributes=None):
        super().__init__(name, attributes)
        self.id = 0
        self.proto = None
        self.schedule: Optional[Dict[str, Tuple[str, ...]]] = None
        self.instruction_ids: Dict[int, str] = {}
        self.computation_ids: Dict[int, str] = {}
        self._frames = None

    @property
    def buffer_assignment(self):
        """The ``BufferAssignmentProto`` message, or ``None``."""
        if self.proto is not None and self.proto.HasField("buffer_assignment"):
            return self.proto.buffer_assignment
        return None

    def to_text(self) -> str:
        """The module as HLO text that :func:`~xlashape.hlo_module.parse_hlo_module`
        reads back into the same computations, instructions, shapes,
        operands, calls and metadata (header attributes, ``ENTRY``,
        ``ROOT``; operands without their shapes)."""
        out = ["HloModule " + _module_name(self.name or "m")
               + "".join(f", {k}={v}" for k, v in self.attributes.items()), ""]
        for comp in self.computations:
            head = ("ENTRY " if comp.is_entry else "") + "%" + comp.name
            if comp.signature:
                head += " " + comp.signature
            out.append(head + " {")
            for ins in comp.instructions:
                attrs = ins.attributes_text
                out.append(f"  {'ROOT ' if ins.is_root else ''}%{ins.name} = {ins.shape} "
                           f"{_token(ins.opcode)}({ins.operands_text})"
                           + (", " + attrs if attrs else ""))
            out.append("}")
            out.append("")
        return "\n".join(out)

    def stack_trace(self, frame_id) -> List[StackFrame]:
        """The frames of ``stack_frame_id`` (an instruction's
        ``metadata["stack_frame_id"]``, an int or its text), innermost first;
        ``[]`` for 0 or an id the module does not have."""
        index = self.proto.hlo_module.stack_frame_index if self.proto is not None else None
        try:
            fid = int(frame_id)
        except (TypeError, ValueError):
            return []
        if index is None:
            return []
        out = []
        seen = set()
        while 0 < fid <= len(index.stack_frames) and fid not in seen:
            seen.add(fid)
            frame = index.stack_frames[fid - 1]
            loc_id = frame.file_location_id
            if 0 < loc_id <= len(index.file_locations):
                loc = index.file_locations[loc_id - 1]
                out.append(StackFrame(
                    _at(index.file_names, loc.file_name_id),
                    _at(index.function_names, loc.function_name_id),
                    loc.line, loc.column, loc.end_line, loc.end_column))
            fid = frame.parent_frame_id  # 0: the outermost frame
        return out


def _slot_descriptor(cls, name):
    for klass in cls.__mro__:
        if name in klass.__dict__:
            return klass.__dict__[name]
    raise AttributeError(name)  # pragma: no cover - Instruction always has it


_ATTRIBUTES_TEXT = _slot_descriptor(Instruction, "attributes_text")


# the fields of its own (_ip, _index, _called): C fields the compiled reader
# fills, or slots without a build
_BASES = (Instruction,) if _protoscan is None else (Instruction, _protoscan.ProtoInstructionBase)


class ProtoInstruction(*_BASES):
    """An :class:`~xlashape.hlo_module.Instruction` read from a proto: its
    ``attributes_text`` is written from the proto the first time it is
    read (most uses of a large module never read it). It keeps its
    computation's message and its index there until then, not a message of
    its own."""

    __slots__ = ("_ip", "_called", "_index") if _protoscan is None else ()

    @property
    def attributes_text(self) -> str:
        text = _ATTRIBUTES_TEXT.__get__(self, type(self))
        if text is None:
            text = _attributes_text(self._ip.instructions[self._index], self.opcode,
                                    self._called)
            _ATTRIBUTES_TEXT.__set__(self, text)
            self._ip = None
        return text

    @attributes_text.setter
    def attributes_text(self, value) -> None:
        _ATTRIBUTES_TEXT.__set__(self, value)


def _at(names, one_based: int) -> str:
    return names[one_based - 1] if 0 < one_based <= len(names) else ""


# What a quoted string escapes, as XLA's CEscape does: the backslash, the
# quote, and every character that is not printable ASCII and could end a line
# for a reader (str.splitlines ends lines at \v, \f, \x1c-\x1e, \x85,
# U+2028, U+2029 too): control characters as \n, \r, \t or octal, the
# others as the octal of their UTF-8 bytes.
_ESCAPED = re.compile(r'[\\"\x00-\x1f\x7f\x85\u2028\u2029]')
_ESCAPES = {"\\": "\\\\", '"': '\\"', "\n": "\\n", "\r": "\\r", "\t": "\\t"}


def _escape(m) -> str:
    c = m.group()
    got = _ESCAPES.get(c)
    return got if got is not None else "".join(f"\\{b:03o}" for b in c.encode("utf-8"))


def _q(text: str) -> str:
    """A string as XLA's text quotes it (CEscape-like: backslash, quote,
    control characters), on one line whatever it holds."""
    if text.isprintable() and '"' not in text and "\\" not in text:
        return '"' + text + '"'          # (isprintable: no line break of any kind)
    return '"' + _ESCAPED.sub(_escape, text) + '"'


# A name as XLA's HLO lexer reads one (and the text reader, after "%"):
# NameUniquer::GetSanitizedName makes every name XLA gives one of these.
_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_.\-]*\Z")
_NOT_NAME_CHAR = re.compile(r"[^A-Za-z0-9_.\-]")
_NAME_FIRST = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz_")
# over names joined by "\n": a character no name has, a line (a name) that
# does not start as one (an empty one too)
_NOT_NAME_CHAR_OR_NL = re.compile(r"[^A-Za-z0-9_.\-\n]")
_BAD_FIRST_CHAR = re.compile(r"\n(?![A-Za-z_])")


def _sanitized(name: str) -> str:
    """``name`` as XLA's ``NameUniquer::GetSanitizedName`` makes it: a first
    character that is not a letter or ``_`` becomes ``_``, every other
    character outside ``[A-Za-z0-9_.-]`` becomes ``_`` (one per character
    here, one per UTF-8 byte there); an empty name is ``_``."""
    out = _NOT_NAME_CHAR.sub("_", name) or "_"
    return out if out[0] in _NAME_FIRST else "_" + out[1:]


def _renames(names: List[str]) -> Dict[str, str]:
    """``{name: new name}`` for each of ``names`` that the HLO text could not
    hold as one name (a newline, a space, a quote, a leading digit, ...; XLA's
    own names never do): sanitized as XLA does and made unique among
    ``names`` with a ``.N`` suffix, as XLA's NameUniquer would. Empty (one
    search over all the names at once) when every name is fine."""
    joined = "\n".join(names)
    if (joined.count("\n") == len(names) - 1 and _NOT_NAME_CHAR_OR_NL.search(joined) is None
            and joined[:1] in _NAME_FIRST and _BAD_FIRST_CHAR.search(joined) is None):
        return {}
    taken = set(names)
    out: Dict[str, str] = {}
    for name in names:
        if name in out or _NAME.match(name):
            continue
        base = new = _sanitized(name)
        k = 0
        while new in taken:
            k += 1
            new = f"{base}.{k}"
        taken.add(new)
        out[name] = new
    return out


def _token(text: str) -> str:
    """An opcode, fusion kind or comparison direction as printed: characters
    that could not be part of one (a newline, a parenthesis, ...) as ``_``."""
    got = _TOKENS.get(text)
    if got is None:
        got = _NOT_NAME_CHAR.sub("_", text)
        if len(_TOKENS) < 4096:          # a few dozen opcodes and kinds
            _TOKENS[text] = got
    return got


_TOKENS: Dict[str, str] = {}


def _module_name(name: str) -> str:
    """The module's name as the ``HloModule`` line can hold it: whitespace
    (line breaks included) and commas as ``_``."""
    return re.sub(r"[\s,]", "_", name) or "m"


# OpMetadata fields in the order XLA's text prints them (field number -> rank),
# and which are strings (quoted).
_METADATA_ORDER = {1: 0, 2: 1, 3: 2, 4: 3, 17: 4, 18: 5, 19: 6, 12: 7, 16: 8, 15: 9}
_METADATA_STRINGS = frozenset((1, 2, 3, 12, 16))


def _metadata_text(md) -> str:
    items = []
    for fd, value in md.ListFields():
        rank = _METADATA_ORDER.get(fd.number)
        if rank is None:
            continue
        if fd.number in _METADATA_STRINGS:
            items.append((rank, f"{fd.name}={_q(value)}"))
        else:
            items.append((rank, f"{fd.name}={value}"))
    if not items:
        return ""
    items.sort()
    return "{" + " ".join(t for _, t in items) + "}"


# How each opcode names the computations it calls (called_computation_ids in order).
_CALL_ATTRS = {
    "fusion": ("calls",),
    "while": ("condition", "body"),
    "call": ("to_apply",),
    "select-and-scatter": ("select", "scatter"),
}
_TO_APPLY = frozenset(("reduce", "reduce-window", "map", "sort", "scatter", "all-reduce",
                       "all-reduce-start", "reduce-scatter", "topk"))
# Opcodes whose text always has dimensions={...}, even when empty.
_ALWAYS_DIMENSIONS = frozenset(("broadcast", "reduce", "transpose"))


def _call_keys(opcode: str, n: int) -> List[str]:
    """The attribute naming each of the *n* called computations, in
    ``called_computation_ids`` order."""
    keys = _CALL_ATTRS.get(opcode)
    if opcode == "while" and n == 2:
        return ["body", "condition"]  # XLA keeps the body first
    if keys is not None and len(keys) == n:
        return list(keys)
    if opcode == "conditional":
        return ["branch_computations"] * n
    if opcode in _TO_APPLY and n == 1:
        return ["to_apply"]
    if opcode == "custom-call":
        return ["called_computations"] * n
    return ["calls"] * n


_LIST_KEYS = frozenset(("branch_computations", "called_computations"))


def _called_text(opcode: str, names: List[str]) -> List[str]:
    if not names:
        return []
    keys = _call_keys(opcode, len(names))
    if opcode == "while" and len(names) == 2:
        return [f"condition=%{names[1]}", f"body=%{names[0]}"]
    if keys[0] in _LIST_KEYS or (keys[0] == "calls" and len(names) > 1):
        return [keys[0] + "={" + ", ".join("%" + n for n in names) + "}"]
    return [f"{k}=%{n}" for k, n in zip(keys, names)]


def _attributes_text(inst, opcode: str, called) -> str:
    f = {fd.number: value for fd, value in inst.ListFields()}
    parts = []
    if opcode == "get-tuple-element":
        parts.append(f"index={f.get(13, 0)}")
    dims = f.get(14)
    if opcode == "iota":
        if dims:
            parts.append(f"iota_dimension={dims[0]}")
    elif dims or opcode in _ALWAYS_DIMENSIONS:
        parts.append("dimensions={" + ",".join(map(str, dims or ())) + "}")
    if 11 in f:
        parts.append(f"kind={_token(f[11])}")
    if called:
        parts.extend(_called_text(opcode, called))
    if 63 in f:
        parts.append(f"direction={_token(f[63])}")
    if 28 in f:
        parts.append(f"custom_call_target={_q(f[28])}")
    if 65 in f:
        parts.append("custom_call_has_side_effect=true")
    if f.get(26, 0) > 0:
        parts.append(f"channel_id={f[26]}")
    if 47 in f:
        parts.append("is_host_transfer=true")
    if 7 in f:
        md = _metadata_text(f[7])
        if md:
            parts.append("metadata=" + md)
    if 43 in f:
        raw = f[43]
        try:
            cfg = raw.decode("utf-8")
        except UnicodeDecodeError:
            cfg = raw.decode("latin-1")
        parts.append("backend_config=" + (cfg if _prints_raw(cfg) else _q(cfg)))
    return ", ".join(parts)


_CONFIG_STRING = re.compile(DQ_STRING)
_BRACKET = re.compile(r"[{}()\[\]]")
_INNERMOST = re.compile(r"\{[^{}()\[\]]*\}|\([^{}()\[\]]*\)|\[[^{}()\[\]]*\]")


def _prints_raw(config: str) -> bool:
    """Whether a ``backend_config`` can be printed as it is. XLA prints one
    that starts with ``{`` as it is (JSON, or an MLIR attribute dictionary
    such as ``{mode = 83 : ui8}``), any other quoted: here only one that is a
    single bracketed value on one line (its strings closed, its brackets
    matched, the first closing at the end, no comment), so that no quote,
    bracket or line break of a malformed one can run into the attributes or
    lines after it; any other is quoted."""
    if not (config.startswith("{") and config.endswith("}")) or not config.isprintable():
        return False
    rest = _CONFIG_STRING.sub("", config)
    if '"' in rest or "/*" in rest or "*/" in rest:
        return False
    # inside the outer braces, matched brackets removed from the innermost
    # out (one pass per level of nesting) leave none
    inner, before = rest[1:-1], None
    while inner != before:
        before, inner = inner, _INNERMOST.sub("", inner)
    return _BRACKET.search(inner) is None


def _index_text(index) -> str:
    return "{" + ",".join(map(str, index)) + "}"


def _header_attributes(mp, entry_shape) -> Dict[str, str]:
    attrs: Dict[str, str] = {}
    if mp.HasField("schedule") and len(mp.schedule.sequences):
        attrs["is_scheduled"] = "true"
    if entry_shape is not None:
        params = ", ".join(str(p) for p in entry_shape[0])
        attrs["entry_computation_layout"] = "{(" + params + ")->" + str(entry_shape[1]) + "}"
    if mp.HasField("input_output_alias") and len(mp.input_output_alias.entries):
        kinds = {0: "may-alias", 1: "may-alias", 2: "must-alias"}
        items = [f"{_index_text(e.output_shape_index)}: ({e.parameter_number}, "
                 f"{_index_text(e.parameter_shape_index)}, {kinds.get(e.kind, 'may-alias')})"
                 for e in mp.input_output_alias.entries]
        attrs["input_output_alias"] = "{ " + ", ".join(items) + " }"
    if mp.HasField("buffer_donor") and len(mp.buffer_donor.entries):
        items = [f"({e.parameter_number}, {_index_text(e.parameter_shape_index)})"
                 for e in mp.buffer_donor.entries]
        attrs["buffer_donor"] = "{ " + ", ".join(items) + " }"
    return attrs


def _program_shape(ps, where: str, shapes) -> Tuple[Tuple[Shape, ...], Shape]:
    params = tuple(shapes(p, f"{where}.parameters[{i}]") for i, p in enumerate(ps.parameters))
    result = shapes(ps.result, f"{where}.result")
    return params, result


def module_from_proto(proto) -> HloProtoModule:
    """An :class:`HloProtoModule` from an ``HloProto`` or ``HloModuleProto``
    message of :mod:`xlashape.protos`."""
    return _module_from_proto(proto, None)


def _module_from_proto(proto, data) -> HloProtoModule:
    """The module of ``proto``; ``data``: the serialized bytes of its
    ``hlo_module`` if the caller has them (else they are serialized here
    for the compiled reader)."""
    # Hundreds of thousands of new objects, none of them garbage: the cyclic
    # collector's passes over them would cost more than building them.
    enabled = gc.isenabled()
    gc.disable()
    try:
        if isinstance(proto, _pb.HloModuleProto):
            wrapped = _pb.HloProto()
            wrapped.hlo_module.CopyFrom(proto)  # a copy: the caller keeps theirs
            proto = wrapped
        if not isinstance(proto, _pb.HloProto):
            raise ProtoDecodeError(
                "expected an xla.HloProto or xla.HloModuleProto message, "
                f"got {type(proto).__name__}")
        if _protoscan is not None:
            if data is None:
                data = proto.hlo_module.SerializeToString()
            try:
                module = _compiled_module(proto, data)
            except XlaShapeError:
                module = None          # the reference says what is wrong
            if module is not None:
                return module
        return _reference_module(proto)
    finally:
        if enabled:
            gc.enable()


def _require_unique(names: List[str], where: str) -> None:
    """Refuse a name given twice (:class:`ProtoDecodeError` naming ``where``,
    formatted with the name's index ``i``)."""
    if len(set(names)) == len(names):
        return
    seen = set()
    for i, name in enumerate(names):
        if name in seen:
            raise ProtoDecodeError(where.format(i=i) + f": {name!r} is given twice (XLA's "
                                   "names are unique in a module)")
        seen.add(name)


class _Shapes:
    """Shapes of ShapeProto messages, one per distinct serialized bytes."""

    def __init__(self):
        self.cache: Dict[bytes, Shape] = {}

    def __call__(self, msg, where: str) -> Shape:
        key = msg.SerializeToString()
        got = self.cache.get(key)
        if got is None:
            got = _shape_from_message(msg, where, 0)
            self.cache[key] = got
        return got

    def of_bytes(self, key: bytes) -> Optional[Shape]:
        """The shape of a ShapeProto's bytes (for the compiled reader; it
        keeps one per distinct bytes); ``None`` for one the reference must
        explain."""
        try:
            return _shape_from_message(_pb.parse_message(_pb.ShapeProto, key), "ShapeProto", 0)
        except XlaShapeError:
            return None


def _computation_names(mp) -> Tuple[Dict[int, str], Dict[str, str], Optional[int]]:
    """``({computation id: name}, {name: new name}, entry id)``, after what
    XLA's HloModule::CreateFromProto checks too: no computation without
    instructions (one has a root), computation ids and names unique."""
    # (Besides the sense: each empty computation costs 2 bytes of file and
    # hundreds of bytes of model, a way to blow memory up.)
    names = []
    comp_ids: Dict[int, int] = {}
    for ci, cp in enumerate(mp.computations):
        if not len(cp.instructions):
            raise ProtoDecodeError(f"HloModuleProto.computations[{ci}] ({cp.name!r}): a "
                                   "computation without instructions")
        if comp_ids.setdefault(cp.id, ci) != ci:
            raise ProtoDecodeError(f"HloModuleProto.computations[{ci}].id: {cp.id} is also "
                                   f"the id of computations[{comp_ids[cp.id]}]")
        names.append(cp.name)
    _require_unique(names, "HloModuleProto.computations[{i}].name")
    # names the HLO text can hold (to_text, and memory's proto route, read
    # the module through it): XLA's own always are; others are sanitized
    comp_renames = _renames(names)
    comp_names: Dict[int, str] = {}
    for ci, cp in enumerate(mp.computations):
        comp_names[cp.id] = comp_renames.get(cp.name, cp.name)
    entry_id = mp.entry_computation_id
    if entry_id not in comp_names:
        by_name = [cp.id for cp in mp.computations if cp.name == mp.entry_computation_name]
        entry_id = by_name[0] if by_name else (mp.computations[-1].id if len(mp.computations)
                                                else None)
    return comp_names, comp_renames, entry_id


def _new_module(proto, comp_names: Dict[int, str]) -> HloProtoModule:
    mp = proto.hlo_module
    module = HloProtoModule(mp.name)
    module.id = mp.id
    module.proto = proto
    module.mode = "hlo"
    module.computation_ids = dict(comp_names)
    return module


def _computation(cp, where: str, cname: str, is_entry: bool, shape) -> Computation:
    signature = ""
    if cp.HasField("program_shape"):
        ps = cp.program_shape
        params, result = _program_shape(ps, f"{where}.program_shape", shape)
        names = [_sanitized(n) if not _NAME.match(n) else n for n in ps.parameter_names]
        signature = "(" + ", ".join(
            f"{names[i] if i < len(names) else f'p{i}'}: {p.human_string()}"
            for i, p in enumerate(params)) + f") -> {result.human_string()}"
    return Computation(cname, is_entry, signature, 0)


def _note_calls(module: HloProtoModule, kinds: Dict[str, set], opcode: str,
                called: List[str]) -> None:
    for key, callee in zip(_call_keys(opcode, len(called)), called):
        if key == "calls" and opcode == "fusion":
            module.fused_computations.add(callee)
        elif key == "to_apply":
            module.applied_computations.add(callee)
        kinds.setdefault(callee, set()).add(call_kind(opcode, key))


def _compiled_module(proto, data) -> Optional[HloProtoModule]:
    """The module read by the compiled reader (:mod:`xlashape._protoscan`):
    the same objects as :func:`_reference_module`'s, or ``None`` for a
    module that reader leaves to the reference (a malformed one, names that
    must be sanitized, a field protobuf merges)."""
    mp = proto.hlo_module
    scan = _protoscan.ModuleScan(data)
    if not scan.ok:
        return None
    cps = list(mp.computations)
    if scan.instructions_per_computation != [len(cp.instructions) for cp in cps]:
        return None
    comp_names, comp_renames, entry_id = _computation_names(mp)
    names = scan.names()
    if names is None or len(set(names)) != len(names) or _renames(names):
        return None
    inst_names = scan.instruction_ids(names)
    if inst_names is None:
        return None
    module = _new_module(proto, comp_names)
    module.instruction_ids = inst_names
    shapes = _Shapes()
    comps = []
    for ci, cp in enumerate(cps):
        cname = comp_renames.get(cp.name, cp.name)
        comps.append(_computation(cp, f"HloModuleProto.computations[{ci}]", cname,
                                  cp.id == entry_id, shapes))
    calls = scan.build(ProtoInstruction, comps, cps, [cp.root_id for cp in cps], names,
                       shapes.of_bytes)
    if calls is None:
        return None
    kinds: Dict[str, set] = {}
    for ins, ids in calls:
        if ids is None:
            return None
        try:
            called = [comp_names[cid] for cid in ids]
        except KeyError:
            return None
        if called:
            ins._called = called
            _note_calls(module, kinds, ins.opcode, called)
    module.computations.extend(comps)
    _finish(module, mp, comp_names, inst_names, entry_id, kinds, shapes)
    return module


def _reference_module(proto) -> HloProtoModule:
    """The module read through protobuf's message objects: the reference
    (and the only source of error messages) for :func:`_compiled_module`."""
    mp = proto.hlo_module
    shape = _Shapes()
    comp_names, comp_renames, entry_id = _computation_names(mp)
    module = _new_module(proto, comp_names)
    # First pass: every instruction's id and name (operands may refer forward
    # across computations only through called computations, but ids are
    # module-wide).
    inst_names: Dict[int, str] = {}
    count = 0
    for ci, cp in enumerate(mp.computations):
        for ii, ip in enumerate(cp.instructions):
            inst_names[ip.id] = ip.name
        count += len(cp.instructions)
    if len(inst_names) != count:          # ids are module-wide and unique in XLA
        seen: Dict[int, str] = {}
        for ci, cp in enumerate(mp.computations):
            for ii, ip in enumerate(cp.instructions):
                where = f"HloModuleProto.computations[{ci}].instructions[{ii}]"
                if seen.setdefault(ip.id, where) != where:
                    raise ProtoDecodeError(f"{where}.id: {ip.id} is also the id of "
                                           f"{seen[ip.id]}")
    all_names = list(inst_names.values())       # (one per instruction, the ids being unique)
    _require_unique(all_names, "HloModuleProto: the name of instruction {i} (counted over the "
                    "module)")
    renames = _renames(all_names)
    if renames:
        inst_names = {k: renames.get(v, v) for k, v in inst_names.items()}
    module.instruction_ids = inst_names

    kinds: Dict[str, set] = {}
    for ci, cp in enumerate(mp.computations):
        where = f"HloModuleProto.computations[{ci}]"
        cname = comp_renames.get(cp.name, cp.name)
        comp = _computation(cp, where, cname, cp.id == entry_id, shape)
        root_id = cp.root_id
        append = comp.instructions.append
        for ii, ip in enumerate(cp.instructions):
            # (an instruction without a shape has element type 0 there: refused)
            s = shape(ip.shape, f"{where}.instructions[{ii}].shape")
            opcode = ip.opcode
            if opcode == "parameter":
                operands_text = str(ip.parameter_number)
            elif not opcode:                    # XLA writes none
                raise ProtoDecodeError(f"{where}.instructions[{ii}]: an instruction without "
                                       "an opcode")
            else:
                try:
                    operands_text = ", ".join(["%" + inst_names[oid] for oid in ip.operand_ids])
                except KeyError:
                    k, oid = next((k, o) for k, o in enumerate(ip.operand_ids)
                                  if o not in inst_names)
                    raise ProtoDecodeError(f"{where}.instructions[{ii}].operand_ids[{k}]: "
                                           f"no instruction with id {oid}") from None
            called = ()
            if ip.called_computation_ids:
                try:
                    called = [comp_names[cid] for cid in ip.called_computation_ids]
                except KeyError:
                    k, cid = next((k, c) for k, c in enumerate(ip.called_computation_ids)
                                  if c not in comp_names)
                    raise ProtoDecodeError(
                        f"{where}.instructions[{ii}].called_computation_ids[{k}]: "
                        f"no computation with id {cid}") from None
                _note_calls(module, kinds, opcode, called)
            name = ip.name
            if renames:
                name = renames.get(name, name)
            ins = ProtoInstruction(cname, name, s, opcode, is_root=ip.id == root_id,
                                   line=0, operands_text=operands_text, attributes_text=None,
                                   comp=comp)
            ins._ip = cp
            ins._index = ii
            ins._called = called
            append(ins)
        module.computations.append(comp)
    _finish(module, mp, comp_names, inst_names, entry_id, kinds, shape)
    return module


def _finish(module: HloProtoModule, mp, comp_names: Dict[int, str], inst_names: Dict[int, str],
            entry_id: Optional[int], kinds: Dict[str, set], shape) -> None:
    """The computations' kinds, the header's attributes and the schedule."""
    computations = {c.name: c for c in module.computations}
    for name, ks in kinds.items():
        c = computations.get(name)
        if c is not None:
            c.kinds.update(ks)

    entry_shape = None
    if mp.HasField("host_program_shape") and (len(mp.host_program_shape.parameters)
                                              or mp.host_program_shape.HasField("result")):
        entry_shape = _program_shape(mp.host_program_shape,
                                     "HloModuleProto.host_program_shape", shape)
    elif entry_id is not None:
        ecp = [cp for cp in mp.computations if cp.id == entry_id][0]
        if ecp.HasField("program_shape"):
            entry_shape = _program_shape(ecp.program_shape, "entry program_shape", shape)
    module.attributes = _header_attributes(mp, entry_shape)

    if mp.HasField("schedule") and len(mp.schedule.sequences):
        sched: Dict[str, Tuple[str, ...]] = {}
        for cid, seq in sorted(mp.schedule.sequences.items()):
            cname = comp_names.get(cid)
            if cname is None:
                raise ProtoDecodeError(
                    f"HloModuleProto.schedule.sequences: no computation with id {cid}")
            names = []
            for k, iid in enumerate(seq.instruction_ids):
                n = inst_names.get(iid)
                if n is None:
                    raise ProtoDecodeError(
                        f"HloModuleProto.schedule.sequences[{cid}].instruction_ids[{k}]: "
                        f"no instruction with id {iid}")
                names.append(n)
            sched[cname] = tuple(names)
        module.schedule = sched


def read_hlo_proto_module(source) -> HloProtoModule:
    """An :class:`HloProtoModule` from a ``*.hlo.pb`` / ``*.hlo.pb.gz`` path,
    the bytes of an ``HloProto`` or ``HloModuleProto``, or such a message.

    Malformed bytes, and ids that refer to nothing, raise
    :class:`~xlashape.errors.ProtoDecodeError` naming the file and field.
    """
    if isinstance(source, (_pb.HloProto, _pb.HloModuleProto)):
        return module_from_proto(source)
    proto, data = _pb._read_hlo_proto(source)
    return _module_from_proto(proto, data)
