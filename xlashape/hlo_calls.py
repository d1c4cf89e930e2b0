"""How each computation of an HLO module is used, from one fast pass over its
text (:func:`scan_calls`): XLA prints a computation before the instructions
that call it, so a reader streaming the text learns that a computation is a
fusion body or a reducer only after its instructions; this first pass gives
the whole call graph to :class:`~xlashape.hlo_reader.HloReader` up front.

It looks only at the attributes that name computations, in chunks of a few
MB, in C when the compiled scanner is built (``_hloscan.scan_calls_chunk``;
the Python lane here otherwise, and under ``XLASHAPE_PURE_PYTHON=1``).
"""

from __future__ import annotations

import re
from typing import Callable, Dict, List, Optional

from ._files import _open_binary, source_kind
from .errors import ShapeTypeError
from .hlo_model import _add_call_kind, call_kind
from .hlo_reader import uses_compiled_scanner

try:
    from ._hloscan import scan_calls_chunk as _scan_calls_chunk
except ImportError:  # pragma: no cover - only without a build
    _scan_calls_chunk = None

__all__ = ["scan_calls"]

_CALLS_B = re.compile(
    rb", (calls|to_apply|body|condition|branch_computations|true_computation|false_computation"
    rb"|called_computations|select|scatter)=(\{|%?[\w.\-]+)")
_BRACE_END_B = re.compile(rb"[{}=\n]")   # a "{" value ends at "}" (the others: not one)
_OPCODE_B = re.compile(rb"[\s)\]}]([a-z][a-z0-9_\-]*)\(")
_NAME_REF_B = re.compile(rb"%?([A-Za-z_][\w.\-]*)")
_SCAN_CHUNK = 1 << 23


def scan_calls(source, progress: Optional[Callable[[int], None]] = None) -> Dict[str, set]:
    """How each computation of a module is used, from one fast pass over its
    text: ``{computation name: frozenset of kinds}`` (see
    :data:`~xlashape.hlo_model.COMPUTATION_KINDS`; the entry computation is not listed).
    ``source``: a path, or the text as ``str`` or ``bytes``. Give the result to
    ``HloReader(call_kinds=...)``.

    It looks only at the attributes that name computations (``calls=``,
    ``to_apply=``, ``body=``, ``condition=``, ``branch_computations=``, ...),
    in chunks of a few MB, so memory stays flat for a file of any size;
    ``progress(bytes_read)`` is called after each chunk of a file.

    >>> scan_calls("ENTRY e {\\n  ROOT r = f32[] reduce(a, b), dimensions={0}, to_apply=add\\n}")
    {'add': frozenset({'to_apply'})}
    """
    kinds: Dict[str, set] = {}
    try:
        return _scan_calls(source, kinds, progress)
    finally:
        # one shared frozenset per combination of kinds, not a set per name:
        # a big module has hundreds of thousands of computations
        shared: Dict[frozenset, frozenset] = {}
        for name, v in kinds.items():
            f = frozenset(v)
            kinds[name] = shared.setdefault(f, f)


def _scan_calls(source, kinds, progress) -> Dict[str, set]:
    kind = source_kind(source)
    if kind == "text":
        _scan_chunk(source.encode("utf-8", "replace") if isinstance(source, str)
                    else bytes(source), kinds)
        return kinds
    if kind != "path":
        raise ShapeTypeError("scan_calls() takes a path, or the text as str or bytes, "
                             f"not {type(source).__name__}")
    with _open_binary(source) as f:
        # as TextBlocks.blocks: a line longer than a chunk is carried as
        # pieces and joined once, so each byte is searched for "\n" once
        tail: List[bytes] = []
        done = 0
        while True:
            block = f.read(_SCAN_CHUNK)
            if not block:
                break
            done += len(block)
            if progress is not None:
                progress(done)
            cut = block.rfind(b"\n")
            if cut < 0:
                tail.append(block)
                continue
            start = 0
            if tail:
                # the carried line alone (lines are scanned independently),
                # then the whole lines after it: no copy of both at once
                start = block.find(b"\n") + 1
                tail.append(block[:start])
                chunk = b"".join(tail)
                tail.clear()
                _scan_chunk(chunk, kinds)
                del chunk
            if start <= cut:
                _scan_chunk(block if start == 0 and cut + 1 == len(block)
                            else block[start:cut + 1], kinds)
            if cut + 1 < len(block):
                tail.append(block[cut + 1:])
            del block
        if tail:
            chunk = b"".join(tail)
            tail.clear()
            _scan_chunk(chunk, kinds)
    return kinds


def _scan_chunk(chunk: bytes, kinds: Dict[str, set]) -> None:
    if uses_compiled_scanner():
        _scan_calls_chunk(chunk, kinds, call_kind)
        return
    _scan_chunk_python(chunk, kinds)


def _scan_chunk_python(chunk: bytes, kinds: Dict[str, set]) -> None:
    # Linear however long a line is: the start of a match's line is searched
    # for only in the text since the previous match, and the end of a "{...}"
    # value (the first "}" or newline) is remembered for the values after it.
    last_line = -1
    opcode = ""
    rfind = chunk.rfind
    line_start = seen = 0
    stop_from = stop_at = -1
    pos = 0
    n = len(chunk)
    while True:
        m = _CALLS_B.search(chunk, pos)
        if m is None:
            break
        value = m.group(2)
        if value == b"{":
            k = m.end()
            if not stop_from <= k <= stop_at:
                stop_from = k
                e = _BRACE_END_B.search(chunk, k)
                stop_at = n if e is None else e.start()
            if stop_at >= n or chunk[stop_at:stop_at + 1] != b"}":
                pos = m.start() + 1
                continue
            value = chunk[m.end() - 1:stop_at + 1]
            pos = stop_at + 1
        else:
            pos = m.end()
        mstart = m.start()
        cut = rfind(b"\n", seen, mstart)
        if cut >= 0:
            line_start = cut + 1
        seen = mstart
        start = line_start
        if start != last_line:
            last_line = start
            eq = chunk.find(b"=", start, mstart)
            om = _OPCODE_B.search(chunk, eq if eq >= 0 else start, mstart)
            while om is not None and om.group(1) == b"b":  # b(...) is a buffer shape
                om = _OPCODE_B.search(chunk, om.end(), mstart)
            opcode = om.group(1).decode() if om is not None else ""
        kind = call_kind(opcode, m.group(1).decode())
        for name in _NAME_REF_B.findall(value.strip(b"{}")):
            _add_call_kind(kinds, name.decode("utf-8", "replace"), kind)
