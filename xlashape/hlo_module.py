"""Read HLO module text: dumps and hand-written modules. The HLO text
reader's public face: :func:`parse_hlo_module`, :func:`iter_instructions`,
:func:`read_hlo_file`, and the names of the modules behind them, re-exported
here so that ``from xlashape.hlo_module import ...`` gives every one of them:

- :mod:`xlashape.hlo_model`: the model (:class:`HloModule`,
  :class:`Computation`, :class:`Instruction`, :class:`Operand`, the call
  kinds, :func:`result_kind`, the header's attributes parsed);
- :mod:`xlashape.hlo_reader`: :class:`HloReader`, the line reader, and
  :func:`uses_compiled_scanner` (its compiled fast lane, ``_hloscan``);
- :mod:`xlashape.hlo_blocks`: :class:`TextBlocks` and :class:`EntryBlocks`,
  text read in big blocks;
- :mod:`xlashape.hlo_calls`: :func:`scan_calls`, the call graph in one fast
  pass;
- :mod:`xlashape.hlo_warnings`: :class:`HloWarning`, :class:`WarningList`;
- :mod:`xlashape._files`: :func:`open_text`, :func:`check_regular_file`,
  :func:`source_kind`;
- :mod:`xlashape.sizes`: :func:`memory_footprint`, :class:`Footprint`,
  :func:`shape_text`.

XLA writes a module as text like this (XLA's shapes and layout documentation
explains the shapes)::

    HloModule jit_f, entry_computation_layout={(bf16[8,128]{1,0})->bf16[8,128]{1,0}}

    %fused_computation (param_0: bf16[8,128]) -> bf16[8,128] {
      %param_0 = bf16[8,128]{1,0:T(8,128)(2,1)} parameter(0)
      ROOT %add.1 = bf16[8,128]{1,0:T(8,128)(2,1)} add(%param_0, %param_0)
    }

    ENTRY %main.3 (p0: bf16[8,128]) -> bf16[8,128] {
      %p0 = bf16[8,128]{1,0:T(8,128)(2,1)} parameter(0)
      ROOT %fusion = bf16[8,128]{1,0:T(8,128)(2,1)} fusion(%p0), kind=kLoop, calls=%fused_computation
    }

Each instruction is ``[ROOT] name = shape opcode(operands), attribute=value, ...``.
This module turns such text into :class:`Instruction` objects carrying real
:class:`~xlashape.Shape` objects, so sizes, padding and memory spaces can be
computed for every value in a program.

It reads line by line (:class:`HloReader`), so a dump of any size streams
through in memory bounded by its longest line (about twice that line, read
in linear time however long it is), and it is forgiving where a tool must
be: a line it cannot make sense of is reported (line number and reason) and
skipped, never fatal; the first :data:`MAX_KEPT_WARNINGS` warnings are kept
and all are counted (:class:`WarningList`). It handles what real dumps contain: nested computations and
fusions, tuples with ``/*index=N*/`` comments, tokens, attribute blocks such as
``metadata={...}`` or ``backend_config={...}`` holding braces and quoted
strings, ``//`` and ``/* */`` comments, ``ENTRY``, ``entry_computation_layout``,
the stack-frame tables newer XLA appends, and instructions written across
several lines by hand (as XLA's documentation writes them).

It reads HLO only. The text of an out-of-memory error ("Ran out of memory in
memory space hbm ... Largest program allocations in hbm: ...") is read by
:mod:`xlashape.oom_report` (:func:`~xlashape.oom_report.read_oom_reports`);
``xlashape hlo`` lists a report's allocations under the name
:data:`OOM_REPORT`, kept here for the code that looks for it.

>>> m = parse_hlo_module('''
... ENTRY %main {
...   %p = f32[3,5]{1,0:T(2,2)} parameter(0)
...   ROOT %n = f32[3,5]{1,0:T(2,2)} negate(f32[3,5]{1,0:T(2,2)} %p), metadata={op_name="neg"}
... }''')
>>> [(i.name, i.opcode, str(i.shape)) for i in m.instructions()]
[('p', 'parameter', 'f32[3,5]{1,0:T(2,2)}'), ('n', 'negate', 'f32[3,5]{1,0:T(2,2)}')]
>>> m.entry.root.operands[0].name, m.entry.root.metadata["op_name"]
('p', 'neg')
>>> memory_footprint(m.entry.root.shape)[:2]   # logical bytes, bytes with tile padding
(60, 96)
"""

from __future__ import annotations

import os as _os
from typing import Callable, Dict, Iterator, List, Optional

# the names of the modules behind the reader: this module is their public face
from ._files import check_regular_file, open_text, source_kind
from .hlo_blocks import EntryBlocks, TextBlocks
from .hlo_calls import scan_calls
from .hlo_model import (COMPUTATION_KINDS, EMBEDDED_KINDS, RESULT_KINDS, VIEW_OPCODES, Alias,
                        BufferDonor, Computation, EntryComputationLayout, HloModule, Instruction,
                        Operand, call_kind, has_data, parse_buffer_donor,
                        parse_entry_computation_layout, parse_input_output_alias, result_kind)
from .hlo_reader import HloReader, uses_compiled_scanner
from .hlo_warnings import MAX_KEPT_WARNINGS, HloWarning, WarningList
from .oom_report import OOM_REPORT
from .sizes import Footprint, memory_footprint, shape_text

__all__ = [
    "Instruction",
    "Operand",
    "Computation",
    "HloModule",
    "HloReader",
    "HloWarning",
    "WarningList",
    "MAX_KEPT_WARNINGS",
    "Footprint",
    "EntryComputationLayout",
    "Alias",
    "BufferDonor",
    "OOM_REPORT",
    "COMPUTATION_KINDS",
    "EMBEDDED_KINDS",
    "VIEW_OPCODES",
    "RESULT_KINDS",
    "call_kind",
    "scan_calls",
    "TextBlocks",
    "EntryBlocks",
    "has_data",
    "result_kind",
    "uses_compiled_scanner",
    "parse_entry_computation_layout",
    "parse_input_output_alias",
    "parse_buffer_donor",
    "parse_hlo_module",
    "read_hlo_file",
    "open_text",
    "source_kind",
    "check_regular_file",
    "iter_instructions",
    "memory_footprint",
    "shape_text",
]


# -- the entry points --------------------------------------------------------------


def iter_instructions(source, *, on_warning: Optional[Callable[[HloWarning], None]] = None
                      ) -> Iterator[Instruction]:
    """Stream the instructions of HLO text: ``source`` is a string, a file
    object, or any iterable of lines; or a path (``os.PathLike``, e.g.
    ``pathlib.Path``), which is read the fastest way, in constant memory:
    a first pass learns how each computation is used (:func:`scan_calls`),
    so every instruction's :attr:`~Instruction.computation_kind` and
    :attr:`~Instruction.result` are known as it is yielded, then the file is
    read by blocks (:class:`TextBlocks`) with a streaming reader (its
    computations are not kept).

    >>> [i.opcode for i in iter_instructions("a = f32[2]{0} parameter(0)\\nb = f32[2]{0} abs(a)")]
    ['parameter', 'abs']
    """
    if isinstance(source, _os.PathLike):
        return _iter_file(source, on_warning)
    if isinstance(source, str):
        source = source.splitlines()
    return HloReader(on_warning).read(source)


def _iter_file(path, on_warning) -> Iterator[Instruction]:
    kinds = scan_calls(path)
    with open_text(path) as f:
        yield from HloReader(on_warning, call_kinds=kinds, streaming=True).read(TextBlocks(f))


def parse_hlo_module(source, *, on_warning: Optional[Callable[[HloWarning], None]] = None
                     ) -> HloModule:
    """Parse HLO module text into an :class:`HloModule`.

    ``source`` is a string, a file object or an iterable of lines. Lines that
    cannot be read are skipped and listed in ``module.warnings`` (the first
    :data:`MAX_KEPT_WARNINGS`; ``module.warnings.total`` counts them all).
    """
    if isinstance(source, str):
        source = source.splitlines()
    reader = HloReader(on_warning)
    comps: Dict[Optional[str], Computation] = {}
    order: List[Computation] = []
    for ins in reader.read(source):
        c = comps.get(ins.computation)
        if c is None:
            known = ins._comp
            if known is None or reader.computations.get(known.name) is not known:
                # outside any computation, or a name defined twice: keep the
                # instructions together by name
                known = reader.computations.get(ins.computation) if ins.computation else None
            c = Computation(ins.computation, line=ins.line) if known is None else known
            comps[ins.computation] = c
            order.append(c)
        c.instructions.append(ins)
    # computations without instructions still belong to the module
    for name, c in reader.computations.items():
        if name not in comps:
            comps[name] = c
            order.append(c)
    order.sort(key=lambda c: c.line if c.line else (1 << 62))
    module = HloModule(reader.module_name, reader.module_attributes)
    module.computations = order
    module.warnings = reader.warnings
    module.fused_computations = set(reader.fused_computations)
    module.applied_computations = set(reader.applied_computations)
    module.lines_read = reader.lines_read
    return module


def read_hlo_file(path, **kwargs) -> HloModule:
    """:func:`parse_hlo_module` on a file (``.gz`` files are decompressed)."""
    with open_text(path) as f:
        return parse_hlo_module(TextBlocks(f), **kwargs)
