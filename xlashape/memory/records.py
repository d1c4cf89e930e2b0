"""The records every source makes, and the one pass accounts for.

A source (:mod:`~xlashape.memory.source_dump`, ``source_proto``,
``source_hlo``, ``source_oom``, ``source_jax``) reads its input -- each file
once -- into one :class:`ModuleRecords` per module or report; the accounting
(:func:`xlashape.memory.account.account`) turns them into the model. The
records are the readers' own types where a reader has one
(:class:`xlashape.xla_dump.BufferAllocation` with its
:class:`~xlashape.xla_dump.BufferValue` objects, :class:`xlashape.live_range.LiveRanges`,
:class:`xlashape.live_range.Location`, the out-of-memory reports of
:mod:`xlashape.oom_report`), plus :class:`EntryRecord`, what the figures need
of a module's entry computation.
"""

from __future__ import annotations

import pathlib
from typing import Callable, Dict, List, NamedTuple, Optional, Tuple

from ..errors import UnreadableInputError

from ..hlo_blocks import EntryBlocks, TextBlocks
from ..hlo_model import Alias, BufferDonor
from ..hlo_warnings import WarningList
from ..live_range import LiveRanges, Location
from ..shape import Shape
from ..xla_dump import BufferAllocation, MemorySpaceUsage, read_memory_usage_report

__all__ = ["EntryRecord", "ModuleRecords", "Reading", "CopyRecord", "CopyFacts"]


class EntryRecord:
    """What the memory figures need of a module: the header's
    ``attributes`` (``entry_computation_layout``, ``input_output_alias``,
    ``buffer_donor`` as XLA prints them, and their parsed ``aliases`` /
    ``donors``; ``layout``: the entry computation layout as ``(parameter
    shapes, result shape)`` when the source has it parsed), the entry's ``params`` (``number -> (instruction name,
    Shape)``) and ``root`` (``(name, opcode, Shape, operand names of a
    tuple)``), how many ``instructions`` were read, ``platform_hint``
    (``gpu``/``cpu`` from custom-call targets and backend configs) and
    ``shardings`` (parameter number -> the ``sharding={...}`` text XLA
    prints on that entry parameter, for a partitioned program)."""

    __slots__ = ("attributes", "aliases", "donors", "layout", "params", "root", "instructions",
                 "platform_hint", "last", "shardings")

    def __init__(self):
        self.attributes: Dict[str, str] = {}
        self.layout: Optional[Tuple[Tuple[Shape, ...], Shape]] = None
        self.aliases: Tuple[Alias, ...] = ()
        self.donors: Tuple[BufferDonor, ...] = ()
        self.params: Dict[int, Tuple[Optional[str], Shape]] = {}
        self.root: Optional[Tuple[str, str, Shape, Tuple[str, ...]]] = None
        self.instructions = 0
        self.platform_hint: Optional[str] = None
        self.last = None
        self.shardings: Dict[int, str] = {}


class CopyRecord(NamedTuple):
    """One instruction that copies a value (what the audit of
    :mod:`xlashape.memory.audit` judges): ``name``, ``opcode`` (``copy``,
    ``transpose``, ``copy-start``, ``copy-done``, or ``fusion`` for a fusion
    whose body only wraps one ``copy`` or ``transpose``, as XLA:CPU writes a
    relayout), ``computation`` (``None``: the entry; else the name of the
    computation it is in: a loop body, a branch...), its result ``shape``,
    its (first) ``operand``'s name and ``operand_shape`` (``None`` when the
    source could not see it); for a wrapping fusion the ``wrapped`` opcode
    and the wrapped instruction's own operand and result shapes
    (``wrapped_from`` / ``wrapped_to``: the same array in two layouts, where
    the fusion's result may be a bitcast of it); ``dimensions``: a
    transpose's permutation."""

    name: str
    opcode: str
    computation: Optional[str]
    shape: Shape
    operand: Optional[str]
    operand_shape: Optional[Shape]
    wrapped: Optional[str] = None
    wrapped_from: Optional[Shape] = None
    wrapped_to: Optional[Shape] = None
    dimensions: Optional[Tuple[int, ...]] = None


class CopyFacts:
    """What a source saw of a module's copies in its one pass (see
    :class:`CopyRecord`): ``copies`` in program text order, and ``forwards``:
    for the entry's instructions that pass a buffer on without computing
    (``bitcast``, ``get-tuple-element``, ``copy-start``, ``copy-done``), the
    instruction they read (name -> ``(operand name, tuple index or None)``),
    so that a copy can be traced back to the entry parameter it reads and
    forward to the output it becomes."""

    __slots__ = ("copies", "forwards")

    def __init__(self):
        self.copies: List[CopyRecord] = []
        self.forwards: Dict[str, Tuple[str, Optional[int]]] = {}

    def __repr__(self):
        return f"<CopyFacts: {len(self.copies)} copies>"


class ModuleRecords:
    """What one source read of one module (or one out-of-memory report).

    Identity: ``name``, ``source`` (``hlo``, ``dump``, ``oom``, ``jax``,
    ``memory-report``), ``path`` (as the user gave it), ``platform`` (from
    the file names, or ``None``), ``optimized`` (``False`` for a module
    before optimizations), ``from_proto``.

    Contents, each ``None`` where the input has none: ``entry``
    (:class:`EntryRecord`), ``allocations`` (the buffer assignment's
    :class:`~xlashape.xla_dump.BufferAllocation` records), ``live``
    (:class:`~xlashape.live_range.LiveRanges`, the text route),
    ``facts`` (what the sharing rule may need: :class:`~xlashape.memory.peak.SharingFacts`),
    ``buffer_assignment_proto`` (the
    ``HloProto`` or ``BufferAssignmentProto`` message whose heap-simulator
    traces the proto route replays: its logical buffers are the values of
    ``allocations``, by id), ``peak_reasons`` (peak fields the source knows
    the input cannot determine), ``memory_report``
    (:class:`~xlashape.xla_dump.MemorySpaceUsage` per memory space, or the
    ``MemoryUsageReportProto``'s entries), ``oom`` (a TPU or GPU out-of-memory
    report of :mod:`xlashape.oom_report`), ``memory_analysis`` (jax's
    ``memory_analysis()`` fields), ``devices`` / ``device_kind`` (how many
    devices the program was compiled for and their kind, when the source
    knows: a JAX object) and ``parameter_shardings`` (entry parameter number
    -> its sharding as jax states it, ``P('data', None) over mesh data=8``;
    a JAX object's, else ``None``).

    ``locations``: instruction name -> :class:`~xlashape.live_range.Location`
    for the instructions the model names; ``library_calls``: the custom calls
    to cuBLAS / cuDNN (name -> ``(custom_call_target, arity of the result
    tuple)``), whose last result element is the library's workspace. ``warnings`` / ``notes``: strings
    the source has to say about this module; ``reasons``: XLA fields the
    source knows to be undetermined, with why.

    For the audit (:mod:`xlashape.memory.audit`): ``before`` (the
    :class:`EntryRecord` of the module before optimizations, its header
    only: the donations as jax marked them; ``None`` when the input has no
    such module) and ``copies`` (:class:`CopyFacts`; ``None`` when the source
    did not look).
    """

    def __init__(self, name: Optional[str], source: str, path: Optional[str] = None):
        self.name = name
        self.source = source
        self.path = path
        self.platform: Optional[str] = None
        self.optimized = True
        self.from_proto = False
        self.entry: Optional[EntryRecord] = None
        self.allocations: Optional[List[BufferAllocation]] = None
        #: the file the allocations were read from (warnings name it)
        self.allocations_file: Optional[str] = None
        self.live: Optional[LiveRanges] = None
        self.live_error: Optional[str] = None
        #: what the heap's sharing rule may ask of the dump (the values file,
        #: the module's conditionals): a :class:`~xlashape.memory.peak.SharingFacts`
        self.facts = None
        self.buffer_assignment_proto = None
        self.peak_reasons: Dict[str, str] = {}
        #: a buffer assignment without its module (no names, no shapes)
        self.no_module = False
        self.memory_report: Optional[List[MemorySpaceUsage]] = None
        self.memory_report_error: Optional[str] = None
        #: a memory-usage report alone: per memory space (color, total bytes,
        #: [(allocation index, size, defining positions)])
        self.report_allocations: Optional[list] = None
        self.oom = None
        self.memory_analysis: Optional[dict] = None
        self.before: Optional[EntryRecord] = None
        self.copies: Optional[CopyFacts] = None
        self.devices: Optional[int] = None
        self.device_kind: Optional[str] = None
        self.parameter_shardings: Optional[Dict[int, str]] = None
        self.locations: Dict[str, Location] = {}
        self.library_calls: Dict[str, Tuple[str, int]] = {}
        self.warnings: List[str] = []
        self.notes: List[str] = []
        self.reasons: Dict[str, str] = {}

    def read_report(self, path: Optional[str]) -> None:
        """Read the memory-usage report (text) at ``path`` into
        ``memory_report``; a report that cannot be read is kept as
        ``memory_report_error``."""
        if path is None:
            return
        try:
            self.memory_report = read_memory_usage_report(pathlib.Path(path))   # a Path: a file
        except (OSError, UnreadableInputError) as e:
            self.memory_report_error = str(e)

    def __repr__(self):
        n = None if self.allocations is None else len(self.allocations)
        return f"<ModuleRecords {self.name} ({self.source}): {n} allocations>"


class Reading:
    """What a source needs to know while it reads: ``warn`` (each
    :class:`~xlashape.hlo_module.HloWarning` / :class:`~xlashape.xla_dump.DumpWarning`
    of an unreadable line or skipped file; the first ones are kept in
    ``warnings``, all counted), ``progress(done, total)`` on long inputs,
    ``peak`` (read what the peak needs: live ranges, values), ``prefer``
    (``"text"`` or ``"proto"`` for a dump holding both), ``platform`` (the
    user's, or ``None``) and ``full_module`` (parse a dumped module's text
    whole, not its entry alone: the exact sharing pairs need it).

    A source that must remove what it made (a JAX compile's temporary dump
    directory) hands the removal to :meth:`later`; :func:`~xlashape.memory.analyze`
    calls :meth:`close` once the accounting pass has read everything it
    needs (the values file, read only when the sharing rule asks, included)."""

    def __init__(self, on_warning=None, progress=None, *, peak: bool = True,
                 prefer: str = "text", platform: Optional[str] = None,
                 full_module: bool = False):
        self._on_warning = on_warning
        self.progress = progress
        self.peak = peak
        self.prefer = prefer
        self.platform = platform
        self.full_module = full_module
        self.warnings = WarningList()
        self._cleanups: List[Callable[[], None]] = []

    def later(self, cleanup: Callable[[], None]) -> None:
        """Run ``cleanup`` when the analysis is built (:meth:`close`)."""
        self._cleanups.append(cleanup)

    def close(self) -> None:
        """Run the cleanups handed to :meth:`later`, last first (each once)."""
        while self._cleanups:
            self._cleanups.pop()()

    def warn(self, w) -> None:
        self.warnings.append(w)
        if self._on_warning is not None:
            self._on_warning(w)

    def text_blocks(self, stream, total: Optional[int], *, entry_only: bool = True) -> TextBlocks:
        """The module text of ``stream`` in blocks (its entry computation's
        lines only, with ``entry_only``), calling ``progress(done, total)``
        as it is read."""
        report = self.progress
        kind = EntryBlocks if entry_only else TextBlocks
        return kind(stream, None if report is None else (lambda done: report(done, total)))
