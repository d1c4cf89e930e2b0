"""Read out-of-memory reports: libtpu's, and XLA:GPU's errors and logs. The
one parser of these formats (``xlashape memory`` and ``xlashape hlo`` read
through it); each report is a typed record, :class:`OomReport` (TPU) or
:class:`GpuOomReport` (XLA:GPU).

XLA:GPU's form is the exception ``RESOURCE_EXHAUSTED: Out of memory while
trying to allocate 150.00GiB with allocator GPU_0_bfc on device 0``, and in
XLA's log around it the BFC allocator's failure ("Allocator (GPU_0_bfc) ran
out of memory trying to allocate 150.00GiB (rounded to 161061273600)"), its
stats (``Limit:``, ``InUse:``) and summary, XLA's scheduler's "base limit",
and the rematerialization warning ("Can't reduce memory use below X by
rematerialization; only reduced to Y"); the autotuner's variant says the
same while trying configurations. :class:`GpuOomReport` holds the request,
the allocator, the limit where the log gives it, and
:func:`buffers_of_request` finds the buffers of that size in a dump.

libtpu's reports:

Two forms exist. The exception JAX raises when a program does not fit is
two lines, with totals only::

    RESOURCE_EXHAUSTED: E1000: CompileTimeHbmOom: Ran out of memory on HBM, the total
    memory required for HLO temporaries (16.00G) exceeds available HBM (15.75G). HLO module: jit_f.

The detailed report (in the exception text of older releases, and in the
libtpu log when the program is compiled with
``LIBTPU_INIT_ARGS=--xla_tpu_no_crash_on_oom=true TPU_LOG_DIR=DIR``: it is
in ``DIR``'s WARNING log) adds the usage breakdown and the largest
allocations, each with its padded and unpadded size::

    Ran out of memory in memory space hbm. Used 18.94G of 15.75G hbm. Exceeded hbm capacity by 3.19G.
    ...
      Largest program allocations in hbm:

      1. Size: 2.50G
         Operator: op_name="jit(train_step)/mlp/broadcast_in_dim" source_file="model.py" source_line=151
         Shape: bf16[8,1280,1,16384]{3,2,1,0:T(8,128)(2,1)}
         Unpadded size: 320.00M
         Extra memory due to padding: 2.19G (8.0x expansion)
         XLA label: broadcast.3115 = broadcast(param.7), dimensions={0,1,3}
         Allocation type: HLO temp
         ==========================

Sizes in these reports are rounded as :func:`xlashape.tiling.format_bytes`
prints them (``2.50G``); :func:`parse_size` turns them back into an
approximate byte count. A log file may hold several reports (libtpu tries
more than one allocation before it gives up): :func:`read_oom_reports`
returns them all, in order.

>>> (r,) = read_oom_reports('''Ran out of memory in memory space hbm. Used 18.94G of 15.75G hbm. Exceeded hbm capacity by 3.19G.
...   Largest program allocations in hbm:
...   1. Size: 512B
...      Shape: (f32[8]{0:T(256)}, s32[]{:T(128)})
...      XLA label: tuple.3 = tuple(a, b)
...      Allocation type: HLO temp
...      ==========================''')
>>> r.used_text, r.limit_text, r.excess_text, r.allocations[0].size_text, r.allocations[0].label
('18.94G', '15.75G', '3.19G', '512B', 'tuple.3 = tuple(a, b)')
"""

from __future__ import annotations

import re
from typing import Callable, Dict, Iterable, List, NamedTuple, Optional, Tuple

from . import hlo_text
from .errors import HloParseError
from .hlo_warnings import HloWarning
from .shape import Shape

__all__ = ["OomReport", "OomAllocation", "GpuOomReport", "RematWarning", "read_oom_reports",
           "distinct_reports", "counted_report", "buffers_of_request", "parse_size",
           "parse_gpu_size", "looks_like_oom_report", "BREAKDOWN_HINT", "OOM_REPORT"]

#: The name under which listings of a module's instructions (``xlashape hlo``)
#: put the allocations of an out-of-memory report, as their computation.
OOM_REPORT = "(out-of-memory report)"

#: Where the per-buffer breakdown is when the two-line exception is all one has.
BREAKDOWN_HINT = (
    "the two-line exception holds totals only; for the per-buffer breakdown, compile again "
    "with LIBTPU_INIT_ARGS=--xla_tpu_no_crash_on_oom=true TPU_LOG_DIR=DIR (libtpu then writes "
    "the detailed report, with the largest allocations, to DIR's WARNING log; give that file "
    "to 'xlashape memory'), or with XLA_FLAGS=--xla_dump_to=DIR for the buffer assignment of "
    "a program that fits")

_OP_NAME = re.compile(r"op_name=(" + hlo_text.DQ_STRING + ")")
_GLOG = re.compile(r"^[IWEF]\d{4} \d\d:\d\d:\d\d\.\d+\s+\d+\s+[^\]\s]+\]\s?")
# a size as the reports print it; the blank before a unit is taken only with
# the unit (an optional \s* next to the \s* that follows in the patterns
# below backtracked quadratically over a long run of spaces)
_SIZE = r"(-?\d+(?:\.\d+)?(?:\s*(?:[KMGTPE]i?B?|B))?)"
_DETAILED = re.compile(r"Ran out of memory in memory space (\w+)\.(?:\s*Used " + _SIZE + r" of "
                       + _SIZE + r" \w+\.)?(?:\s*Exceeded \w+ capacity by " + _SIZE + r"\.)?")
_SHORT = re.compile(r"Ran out of memory on (\w+),\s*(.*?)\(" + _SIZE + r"\)\s*exceeds available \w+ \("
                    + _SIZE + r"\)")
_MODULE = re.compile(r"HLO module:\s*([^\s]+?)\.?(?:\s|$)")
_USAGE_HEAD = re.compile(r"\s*Total (\w+) usage\s*>=\s*" + _SIZE + r"\s*:")
_OUTPUT = re.compile(r"\s*Output size " + _SIZE + r"; shares " + _SIZE + r" with arguments")
_PROGRAM_HEAD = re.compile(r"\s*Program (\w+) requirement " + _SIZE + r"\s*:")
# the label's words are one blank apart; two blanks end it. The label is
# matched lazily by one character class (no group repeated per character:
# that held ~150 bytes per character, 1.1 GB for an 8 MB line), and a match
# whose label holds two blanks is none (the reader checks)
_BREAKDOWN = re.compile(r"\s{2,}([A-Za-z][\w\- ]*?)\s{2,}(" + _SIZE[1:-1]
                        + r"|unknown size)\b(.*)$")
_HLO_TEMP_DETAIL = re.compile(r"Unpadded \(" + _SIZE + r"\)\s*Padded \(" + _SIZE + r"\)")
_LIST_HEAD = re.compile(r"\s*Largest program (allocations|arguments and outputs) in (\w+):")
_ENTRY = re.compile(r"\s*(\d{1,19})\.\s*Size:\s*" + _SIZE + r"\s*$")
_PADDING = re.compile(_SIZE + r"\s*\(([\d.]+|inf)x expansion\)")
_UNITS = {"": 0, "K": 1, "M": 2, "G": 3, "T": 4, "P": 5, "E": 6}


_PARSE_SIZE = re.compile(r"(-?\d+(?:\.\d+)?) ?([KMGTPE]?)i?B?")


def parse_size(text: Optional[str]) -> Optional[int]:
    """A size as the reports print it (``2.50G``, ``512B``, ``188.0K``) in
    bytes: the printed figure times the unit (powers of 1024), rounded to
    an integer. The reports round, so this is the figure they show, not the
    exact count. ``None`` for ``None`` or text that is not a size.

    >>> parse_size("2.50G"), parse_size("512B"), parse_size("188.0K")
    (2684354560, 512, 192512)
    """
    if text is None:
        return None
    # blanks collapsed first: \s* on both sides of optional parts backtracks
    # quadratically over a long run of them
    m = _PARSE_SIZE.fullmatch(" ".join(text.split()))
    if m is None:
        return None
    return int(round(float(m.group(1)) * (1024 ** _UNITS[m.group(2)])))


class OomAllocation:
    """One entry of a report's "Largest program allocations" (``section``
    ``"program"``) or "Largest program arguments and outputs" (``section``
    ``"arguments and outputs"``) list: its ``rank`` in the list, the texts
    as printed (``size_text``, ``unpadded_text``, ``padding_text``,
    ``expansion_text``, ``shape_text``, ``operator``, ``label``,
    ``allocation_type``), the parsed ``shape`` (``None`` when absent or when
    it does not parse), and the ``line`` it starts on.

    A tuple-shaped allocation is the tuple's table of pointers to its
    elements (the report says 512B), not the elements themselves.
    """

    __slots__ = ("rank", "section", "size_text", "unpadded_text", "padding_text",
                 "expansion_text", "shape_text", "shape", "operator", "label",
                 "allocation_type", "line", "report")

    def __init__(self, rank: int, section: str, size_text: str, line: int):
        self.rank = rank
        self.section = section
        self.size_text = size_text
        self.line = line
        self.unpadded_text = None
        self.padding_text = None
        self.expansion_text = None
        self.shape_text = None
        self.shape: Optional[Shape] = None
        self.operator = None
        self.label = None
        self.allocation_type = None
        #: which report of the input it is listed in (from 1)
        self.report = 0

    @property
    def size(self) -> Optional[int]:
        """The printed size in bytes (approximate: see :func:`parse_size`)."""
        return parse_size(self.size_text)

    @property
    def unpadded_size(self) -> Optional[int]:
        """The printed unpadded size in bytes; the report leaves it out for
        allocations without a shape."""
        return parse_size(self.unpadded_text)

    @property
    def padding(self) -> Optional[int]:
        """The printed "Extra memory due to padding" in bytes (``0`` when the
        report gives an unpadded size but no padding line)."""
        if self.padding_text is not None:
            return parse_size(self.padding_text)
        return 0 if self.unpadded_text is not None else None

    @property
    def instruction_name(self) -> Optional[str]:
        """The instruction named by the XLA label (``broadcast.3115`` in
        ``broadcast.3115 = broadcast(...)``), if the label names one."""
        if not self.label:
            return None
        m = re.match(r"%?([A-Za-z_][\w.\-]*)\s*=", self.label)
        return m.group(1) if m else None

    @property
    def op_name(self) -> Optional[str]:
        """The ``op_name`` of the Operator line (the JAX source operation)."""
        if not self.operator:
            return None
        m = _OP_NAME.search(self.operator)
        return hlo_text.unescape_string(m.group(1)[1:-1]) if m else None

    def __repr__(self):
        return (f"<OomAllocation {self.rank}. {self.size_text} {self.shape_text or ''} "
                f"{self.label or ''}>")


class OomReport:
    """One out-of-memory report.

    ``form``: ``"detailed"`` (the report with its allocation lists) or
    ``"short"`` (the two-line exception: totals only, see
    :data:`BREAKDOWN_HINT`). ``memory_space`` (``hbm``), ``used_text`` /
    ``limit_text`` / ``excess_text`` as printed and ``used_bytes`` /
    ``limit_bytes`` / ``excess_bytes`` parsed, ``module_name`` (when the
    report names it), ``usage`` (the "Total hbm usage" lines: reserved,
    program, arguments), ``output_text`` / ``output_shares_text`` ("Output
    size X; shares Y with arguments"), ``program`` (the "Program hbm
    requirement" lines, e.g. ``HLO temp``), ``temp_unpadded_text`` /
    ``temp_padded_text`` (from the HLO temp line), ``allocations`` (the
    :class:`OomAllocation` entries of both lists), ``line`` and ``message``
    (the line that starts the report).
    """

    platform = "tpu"

    def __init__(self, form: str, memory_space: str, line: int, message: str):
        self.form = form
        self.memory_space = memory_space
        self.line = line
        self.message = message
        self.used_text: Optional[str] = None
        self.limit_text: Optional[str] = None
        self.excess_text: Optional[str] = None
        self.required_what: Optional[str] = None
        self.module_name: Optional[str] = None
        self.usage: Dict[str, str] = {}
        self.usage_total_text: Optional[str] = None
        self.output_text: Optional[str] = None
        self.output_shares_text: Optional[str] = None
        self.program_total_text: Optional[str] = None
        self.program: Dict[str, str] = {}
        self.temp_unpadded_text: Optional[str] = None
        self.temp_padded_text: Optional[str] = None
        self.allocations: List[OomAllocation] = []
        #: XLA's rematerialization warning logged before the report, if any
        self.remat: Optional[RematWarning] = None

    used_bytes = property(lambda self: parse_size(self.used_text),
                          doc="Memory the program needs, in bytes (as printed, rounded).")
    limit_bytes = property(lambda self: parse_size(self.limit_text),
                           doc="Memory available, in bytes (as printed, rounded).")

    @property
    def excess_bytes(self) -> Optional[int]:
        """How much too much, in bytes: printed in the detailed report, else
        used minus limit."""
        if self.excess_text is not None:
            return parse_size(self.excess_text)
        if self.used_bytes is not None and self.limit_bytes is not None:
            return self.used_bytes - self.limit_bytes
        return None

    @property
    def argument_bytes(self) -> Optional[int]:
        return parse_size(self.usage.get("arguments"))

    @property
    def output_bytes(self) -> Optional[int]:
        return parse_size(self.output_text)

    @property
    def alias_bytes(self) -> Optional[int]:
        return parse_size(self.output_shares_text)

    @property
    def temp_bytes(self) -> Optional[int]:
        return parse_size(self.program.get("HLO temp"))

    @property
    def has_breakdown(self) -> bool:
        return self.form == "detailed"

    def __repr__(self):
        return (f"<OomReport {self.form} {self.memory_space}: used {self.used_text} of "
                f"{self.limit_text}, {len(self.allocations)} allocations, line {self.line}>")


def looks_like_oom_report(text: str) -> bool:
    """True if ``text`` (or its first part) holds an out-of-memory report:
    libtpu's (detailed or two-line) or XLA:GPU's (the ``RESOURCE_EXHAUSTED``
    exception, the BFC allocator's log, the rematerialization warning)."""
    return ("Ran out of memory in memory space" in text or "Ran out of memory on " in text
            or "CompileTimeHbmOom" in text or _GPU_ANY.search(text) is not None)


class _TpuParser:
    """libtpu's reports, one line at a time (the state machine behind
    :func:`read_oom_reports`).

    :meth:`feed` returns the allocations the line completes (an entry is
    complete at the next entry, its ``=====`` line, the next report or log
    message, or :meth:`finish`). A line may hold several fields (a report
    pasted onto one line): each field starts at its label."""

    def __init__(self, on_warning: Optional[Callable[[HloWarning], None]] = None):
        self.on_warning = on_warning
        self.reports: List[OomReport] = []
        self.cur: Optional[OomReport] = None
        self.entry: Optional[OomAllocation] = None
        self.section = "program"
        self.in_list = False
        self.block: Optional[str] = None       # "usage" / "program" while reading their lines
        self._hlo_text = hlo_text

    def _close_entry(self, done: List[OomAllocation]) -> None:
        if self.entry is not None:
            done.append(self.entry)
            self.entry = None

    def finish(self) -> List[OomAllocation]:
        done: List[OomAllocation] = []
        self._close_entry(done)
        self.cur = None
        # a report without a module name belongs to the module named before it
        # (libtpu names it once, then logs the allocator's reports)
        name = None
        for r in self.reports:
            if r.module_name is None:
                r.module_name = name
            else:
                name = r.module_name
        return done

    def feed(self, raw: str, lineno: int) -> List[OomAllocation]:
        done: List[OomAllocation] = []
        line = raw.rstrip("\r\n")
        gm = _GLOG.match(line)
        if gm is not None:
            line = line[gm.end():]
        m = _DETAILED.search(line)
        sm = None if m is not None else _SHORT.search(line)
        if m is not None or sm is not None:
            self._close_entry(done)
            if m is not None:
                cur = OomReport("detailed", m.group(1).lower(), lineno, line.strip())
                cur.used_text, cur.limit_text, cur.excess_text = (
                    _norm(m.group(2)), _norm(m.group(3)), _norm(m.group(4)))
                rest = line[m.end():]
            else:
                cur = OomReport("short", sm.group(1).lower(), lineno, line.strip())
                cur.required_what = sm.group(2).strip().rstrip(",").strip() or None
                cur.used_text, cur.limit_text = _norm(sm.group(3)), _norm(sm.group(4))
                rest = ""
            self.cur = cur
            self.reports.append(cur)
            self.in_list = False
            self.section = "program"
            self.block = None
            mm = _MODULE.search(line)
            if mm:
                cur.module_name = mm.group(1)
            if rest.strip():
                self._fields(rest, lineno, done)
            return done
        cur = self.cur
        if cur is None:
            return done
        if gm is not None:
            # another log message: the report (continuation lines carry no
            # log prefix) has ended
            self._close_entry(done)
            self.cur = None
            return done
        if cur.module_name is None:
            mm = _MODULE.search(line)
            if mm:
                cur.module_name = mm.group(1)
        if cur.form == "short":
            return done
        s = line.strip()
        if not s:
            self.block = None
            return done
        hm = _USAGE_HEAD.match(line)
        if hm:
            cur.usage_total_text = _norm(hm.group(2))
            self.block = "usage"
            return done
        hm = _PROGRAM_HEAD.match(line)
        if hm:
            cur.program_total_text = _norm(hm.group(2))
            self.block = "program"
            return done
        om = _OUTPUT.match(line)
        if om:
            cur.output_text, cur.output_shares_text = _norm(om.group(1)), _norm(om.group(2))
            return done
        lm = _LIST_HEAD.match(line)
        if lm:
            self._close_entry(done)
            self.section = "program" if lm.group(1) == "allocations" else "arguments and outputs"
            self.in_list = True
            self.block = None
            return done
        if self.block is not None and not self.in_list:
            bm = _BREAKDOWN.match(line)
            if bm and "  " not in bm.group(1):
                name = bm.group(1).strip()
                value = bm.group(2)
                target = cur.usage if self.block == "usage" else cur.program
                target[name] = value if value == "unknown size" else _norm(value)
                if name == "HLO temp":
                    dm = _HLO_TEMP_DETAIL.search(bm.group(3))
                    if dm:
                        cur.temp_unpadded_text, cur.temp_padded_text = (
                            _norm(dm.group(1)), _norm(dm.group(2)))
                return done
        if s.startswith("====="):
            self._close_entry(done)
            return done
        self._fields(line, lineno, done)
        return done

    def _fields(self, text: str, lineno: int, done: List[OomAllocation]) -> None:
        """The entry starts (``N. Size: X``) and fields (``Shape: ...``) in
        ``text``, each up to the next label."""
        marks = list(_LABEL.finditer(text))
        for k, lm in enumerate(marks):
            value = text[lm.end():marks[k + 1].start() if k + 1 < len(marks) else len(text)]
            value = value.strip()
            if lm.group("rank") is not None:
                size = _SIZE_AT.match(value)
                if size is None:
                    continue
                self._close_entry(done)
                self.entry = OomAllocation(int(lm.group("rank")), self.section,
                                           _norm(size.group(1)), lineno)
                self.entry.report = len(self.reports)
                self.cur.allocations.append(self.entry)
                continue
            entry = self.entry
            if entry is None:
                continue
            key = lm.group("key")
            if key == "Operator":
                entry.operator = value
            elif key == "Shape":
                entry.shape_text = value
                entry.line = lineno
                try:
                    entry.shape = self._hlo_text.parse_shape(value)
                except HloParseError as e:
                    if self.on_warning is not None:
                        self.on_warning(HloWarning(lineno, f"bad shape in report (allocation "
                                                           f"{entry.rank}): {e.message}"))
            elif key == "Unpadded size":
                entry.unpadded_text = _norm(value)
            elif key == "Extra memory due to padding":
                pm = _PADDING.match(value)
                if pm:
                    entry.padding_text, entry.expansion_text = _norm(pm.group(1)), pm.group(2) + "x"
                else:
                    entry.padding_text = _norm(value)
            elif key == "XLA label":
                entry.label = value
            else:
                entry.allocation_type = value


_LABEL = re.compile(r"(?:^|(?<=\s))(?:(?P<rank>\d{1,19})\.\s*Size:|(?P<key>Operator|Shape|Unpadded size|"
                    r"Extra memory due to padding|XLA label|Allocation type):)")
_SIZE_AT = re.compile(_SIZE + r"(?:\s|$)")


# -- XLA:GPU -------------------------------------------------------------------------
#
# The formats, from XLA's sources (xla/tsl/framework/bfc_allocator.cc,
# allocator.cc's AllocatorStats::DebugString, stream_executor's
# tf_allocator_adapter.cc and device memory allocators,
# xla/service/hlo_rematerialization.cc, xla/service/gpu/gpu_hlo_schedule.cc),
# with the older wordings seen in released logs. Sizes are
# tsl::strings::HumanReadableNumBytes ("150.00GiB", "880.28MiB", "512B").

_HSIZE = r"(\d+(?:\.\d+)?\s*(?:[KMGTPE]i?)?B)"
_GPU_EXCEPTION = re.compile(
    r"Out of (host )?memory (?:while trying to allocate|allocating) (\d+(?:\.\d+)?\s*(?:[KMGTPE]i?B|B|bytes))"
    r"(?:\s+with allocator (\w+))?(?:\s+on device (\d{1,19}))?")
_GPU_SE_ALLOC = re.compile(r"Failed to allocate request for " + _HSIZE + r"\s*\((\d{1,19})B?\)"
                           r"(?: on device ordinal (\d{1,19}))?")
_BFC_FAIL = re.compile(r"Allocator \(([^)]*)\) ran out of memory trying to allocate " + _HSIZE
                       + r"(?: \(rounded to (?P<rounded>\d{1,19})\))?(?:\s*from the \w+ end)?"
                       + r"(?:\s*requested by op ?(?P<op>\S*))?(?: with freed_by_count=\d+)?\s*\.?"
                       + r"(?P<retry>\s*The caller indicates that this is not a failure)?")
_BFC_STAT = re.compile(r"^\s*(Limit|InUse|MaxInUse|NumAllocs|MaxAllocSize|Reserved|PeakReserved|"
                       r"LargestFreeBlock):\s+(-?\d{1,19})\s*$")
_BFC_SUMMARY = re.compile(r"Allocator memory summary: rounded request " + _HSIZE + r".*?"
                          r"pool size " + _HSIZE + r", pool limit " + _HSIZE)
_BFC_OLD_SUMMARY = re.compile(r"total_region_allocated_bytes_:\s*(\d{1,19})\s+memory_limit_:\s*(\d{1,19})")
_BFC_INUSE_TOTAL = re.compile(r"Sum Total of in-use chunks: " + _HSIZE)
_BFC_CHUNKS = re.compile(r"^\s*(\d{1,19}) Chunks of size (\d{1,19}) totalling " + _HSIZE)
_REMAT = re.compile(r"Can't reduce memory use below " + _HSIZE + r"(?: \((\d{1,19}) bytes\))? by "
                    r"rematerialization; only reduced to " + _HSIZE + r"(?: \((\d{1,19}) bytes\))?"
                    r"(?:, down from " + _HSIZE + r"(?: \((\d{1,19}) bytes\))? originally)?")
_SCHED_LIMIT = re.compile(r"The byte size of input/output arguments \((\d{1,19})\) exceeds the base "
                          r"limit \((\d{1,19})\)")
_EXECUTABLE = re.compile(r"\[executable_name='([^']*)'\]")
_AUTOTUNE = re.compile(r"autotun|Failed to get configs|Failed to determine best|algorithm picker|"
                       r"algorithm_picker", re.IGNORECASE)
# XLA's autotuner (xla/backends/autotuner: config_assigner.cc's "Could not get
# config for HLO: <instruction>. Status: ..." and "Failed to get configs for: N
# out of M instructions. See logs for all failures. Example failure: ...",
# the tuner's "All configs failed during profiling." with "Failures (N):" and
# one "EXECUTION FAILED: <status>" per configuration (Failure::ToString);
# older releases: autotuner.cc's "Autotuning failed for HLO: ... with error:",
# and "Failed to get configs for fusion.3: ...")
_AUTOTUNE_EVENT = re.compile(
    r"(?P<summary>Failed to get configs for: (?P<nfail>\d{1,9}) out of (?P<ntotal>\d{1,9}) "
    r"instructions)"
    r"|(?P<instruction>(?:Could not get config for HLO|Autotuning failed for HLO|Autotuner could "
    r"not (?:find|compile) any (?:supported )?configs for HLO): %?(?P<name>[\w.\-]{1,256}) = )"
    r"|(?P<instruction_old>Failed to get configs for %?(?P<name_old>[\w.\-]{1,256}): )"
    r"|(?P<all_failed>All configs failed during profiling|No valid config found)"
    r"|(?P<listed>Failures \((?P<nlisted>\d{1,9})\):)"
    r"|(?P<failure>(?:EXECUTION|COMPILATION|REDZONE CHECK) FAILED: |WRONG RESULTS: )")
_AUTOTUNE_HINT = re.compile(r"configs? f|FAILED: |WRONG RESULTS|Failures \(|Autotun|No valid config")
_GPU_ANY = re.compile(r"Out of (?:host )?memory (?:while trying to allocate|allocating) \d|"
                      r"ran out of memory trying to allocate|by rematerialization; only reduced to|"
                      r"Failed to allocate request for \d")
_GPU_KEYWORDS = re.compile(r"emory|allocate|Limit|InUse|Chunks|chunks|byte size|LargestFreeBlock|"
                           r"executable_name|total_region|autotun|Failed to|FAILED|WRONG RESULTS|"
                           r"Failures \(|config")
_BINARY_UNITS = {"B": 0, "KiB": 1, "MiB": 2, "GiB": 3, "TiB": 4, "PiB": 5, "EiB": 6}


def parse_gpu_size(text: Optional[str]) -> Optional[int]:
    """A size as XLA:GPU logs it (tsl's HumanReadableNumBytes: ``150.00GiB``,
    ``512B``; or ``33762398024 bytes``) in bytes: exact for bytes, else the
    printed figure times its unit, rounded (the text is rounded: see
    :attr:`GpuOomReport.requested_bytes` for the exact figure when the log
    gives it). ``None`` for text that is not a size.

    >>> parse_gpu_size("150.00GiB"), parse_gpu_size("33762398024 bytes"), parse_gpu_size("512B")
    (161061273600, 33762398024, 512)
    """
    if text is None:
        return None
    m = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*(bytes|B|[KMGTPE]iB|[KMGTPE]B?)\s*", text)
    if m is None:
        return None
    unit = m.group(2)
    if unit == "bytes":
        return int(float(m.group(1)))
    power = _BINARY_UNITS.get(unit)
    if power is None:
        power = _UNITS[unit[0]]
    return int(round(float(m.group(1)) * (1024 ** power)))


class RematWarning(NamedTuple):
    """XLA's "Can't reduce memory use below X by rematerialization; only
    reduced to Y, down from Z originally": the memory ``target`` the
    rematerialization pass aimed at (derived from the device's memory
    limit, not the limit itself), what the program still needs after it
    (``reduced_to``) and before (``original``), in bytes (exact when the log
    prints the byte count, else from the rounded text), and the ``line``."""

    target_bytes: Optional[int]
    reduced_to_bytes: Optional[int]
    original_bytes: Optional[int]
    line: int
    text: str


class AutotuneBlock:
    """The failures XLA's autotuner listed for one instruction: the
    ``instruction`` it could not configure (``gemm_fusion_dot.3``; ``None``
    for the exception's "Example failure", which does not name it) and its
    ``shape_text`` / ``shape`` (its output, from the log's HLO), ``listed``
    (the "Failures (N)" count), ``failures`` (the failure lines read),
    ``out_of_memory`` (those that ran out of memory), ``requests`` (the
    sizes they asked for, as printed, each once), ``example`` (the block is
    the exception's example of a failure the log lists too) and ``line``."""

    __slots__ = ("instruction", "shape_text", "shape", "listed", "failures", "out_of_memory",
                 "requests", "example", "line", "all_failed")

    def __init__(self, instruction: Optional[str], line: int, example: bool = False):
        self.instruction = instruction
        self.shape_text: Optional[str] = None
        self.shape: Optional[Shape] = None
        self.listed: Optional[int] = None
        self.failures = 0
        self.out_of_memory = 0
        self.requests: List[str] = []
        self.example = example
        self.line = line
        #: "All configs failed during profiling" was read for it
        self.all_failed = False

    @property
    def configs_failed(self) -> int:
        """How many configurations failed: XLA's count when it printed one."""
        return self.listed if self.listed is not None else self.failures

    def __repr__(self):
        return (f"<AutotuneBlock {self.instruction or 'example'}: {self.configs_failed} failed, "
                f"{self.out_of_memory} out of memory>")


class AutotuneFailure:
    """XLA's autotuner could not configure some instructions of a program
    (XLA:GPU's ``config_assigner``: "Failed to get configs for: 2 out of 5
    instructions", each failure "EXECUTION FAILED: RESOURCE_EXHAUSTED: Out of
    memory ..."): one compile-time event, however many lines repeat its
    failures. ``failed_instructions`` / ``instructions`` (the counts XLA
    gives, ``None`` when the text has no summary), ``blocks``
    (:class:`AutotuneBlock`, in order) and ``summary_line``."""

    __slots__ = ("failed_instructions", "instructions", "blocks", "summary_line")

    def __init__(self):
        self.failed_instructions: Optional[int] = None
        self.instructions: Optional[int] = None
        self.blocks: List[AutotuneBlock] = []
        self.summary_line: Optional[int] = None

    @property
    def named(self) -> List[AutotuneBlock]:
        """The blocks of the instructions the log names, each instruction once."""
        seen = set()
        out = []
        for b in self.blocks:
            if b.instruction is not None and b.instruction not in seen:
                seen.add(b.instruction)
                out.append(b)
        return out

    def counted(self) -> List[AutotuneBlock]:
        """The blocks whose failures count: the named ones; the exception's
        example only when the text names none (it repeats one of them)."""
        named = self.named
        return named if named else [b for b in self.blocks if b.example][:1] or self.blocks[:1]

    def to_json(self) -> dict:
        return {"failed_instructions": self.failed_instructions,
                "instructions": self.instructions,
                "blocks": [{"instruction": b.instruction, "shape": b.shape_text,
                            "configs_failed": b.configs_failed, "out_of_memory": b.out_of_memory,
                            "requests": list(b.requests), "example": b.example, "line": b.line}
                           for b in self.blocks]}

    def __repr__(self):
        return (f"<AutotuneFailure {self.failed_instructions} of {self.instructions} instructions, "
                f"{len(self.blocks)} blocks>")


class GpuOomReport:
    """One XLA:GPU out-of-memory failure: what was asked for and by whom.

    - ``requested_text`` as printed; ``requested_bytes``: the byte count
      when the message gives it ("N bytes", ``requested_exact`` True), else
      the allocator's "(rounded to N)" (the request rounded up to a multiple
      of 256 bytes: ``rounded_bytes``), else the printed text's figure
      (rounded to two decimals);
    - ``allocator`` (``GPU_0_bfc``; ``None`` when the message names none),
      ``device`` (the ordinal), ``host_memory`` (the request was for pinned
      host memory), ``executable_name`` (``jit__lambda``), ``origin``:
      ``"allocator"`` (running the program), ``"autotuner"`` (XLA's autotuner
      ran out while trying configurations: the program itself may fit);
    - ``memory_limit_bytes`` and ``memory_limit_source`` where the log gives
      the limit: the allocator's stats (``Limit:``, exact), XLA's scheduler
      ("exceeds the base limit (N)", exact) or the allocator's summary
      ("pool limit 105.00GiB", rounded); ``in_use_bytes`` (``InUse:`` or
      "Sum Total of in-use chunks"), ``largest_free_block_bytes``,
      ``chunks_in_use`` (``[(count, size)]`` from the allocator's summary),
      ``io_bytes`` (XLA's scheduler: the program's arguments and outputs);
    - ``remat`` (:class:`RematWarning`), ``retries`` (the allocator's
      "not a failure" warnings before: ``[(allocator, size text)]``),
      ``line`` (where the failure is reported), ``messages`` (the lines read,
      the first :data:`MAX_MESSAGES`);
    - ``autotune`` (:class:`AutotuneFailure`): XLA's autotuner could not
      configure some instructions because every configuration it tried ran
      out of memory (``origin`` ``"autotuner"``); the exception and XLA's log
      repeat the failed request once per configuration and instruction, and
      all of it is this one report (``attempts`` counts the repeats).
    """

    platform = "gpu"
    form = "gpu"
    has_breakdown = False

    def __init__(self):
        self.requested_text: Optional[str] = None
        self.requested_bytes: Optional[int] = None
        self.requested_exact = False
        self.rounded_bytes: Optional[int] = None
        self.allocator: Optional[str] = None
        self.device: Optional[int] = None
        self.host_memory = False
        self.executable_name: Optional[str] = None
        self.op_name: Optional[str] = None
        self.origin = "allocator"
        self.memory_limit_bytes: Optional[int] = None
        self.memory_limit_source: Optional[str] = None
        self.in_use_bytes: Optional[int] = None
        self.peak_in_use_bytes: Optional[int] = None
        self.largest_free_block_bytes: Optional[int] = None
        self.chunks_in_use: List[Tuple[int, int]] = []
        self.io_bytes: Optional[int] = None
        self.remat: Optional[RematWarning] = None
        self.retries: List[Tuple[str, str]] = []
        self.line: Optional[int] = None
        self.messages: List[str] = []
        self.autotune: Optional[AutotuneFailure] = None
        #: the out-of-memory lines read for this one failure (the autotuner's repeat it)
        self.attempts = 0
        self._seen: set = set()

    # the names the TPU report has, so that code listing reports can show both
    memory_space = "device"
    allocations = property(lambda self: [], doc="none: XLA:GPU's messages list no buffers")
    module_name = property(lambda self: self.executable_name)
    limit_bytes = property(lambda self: self.memory_limit_bytes)

    @property
    def used_bytes(self) -> Optional[int]:
        """What the program needs as XLA estimated it (the rematerialization
        warning's "only reduced to"), else ``None``."""
        return None if self.remat is None else self.remat.reduced_to_bytes

    @property
    def excess_bytes(self) -> Optional[int]:
        if self.used_bytes is None or self.memory_limit_bytes is None:
            return None
        return self.used_bytes - self.memory_limit_bytes

    def _note(self, line: str) -> None:
        if len(self.messages) < MAX_MESSAGES:
            self.messages.append(line.strip())
        if "(rounded to " in line:
            self._rounded = True

    _rounded = False

    @property
    def allocator_rounded(self) -> bool:
        """The messages give the allocator's rounding of the request ("(rounded to N)")."""
        return self._rounded

    def _set_limit(self, value: int, source: str, rank: int) -> None:
        # the exact figures win over the rounded one
        if self.memory_limit_bytes is None or rank < self._limit_rank:
            self.memory_limit_bytes, self.memory_limit_source, self._limit_rank = value, source, rank

    _limit_rank = 9

    def _out_of_memory(self, m, line: int) -> None:
        """A ``_GPU_EXCEPTION`` match ("Out of memory while trying to allocate
        SIZE with allocator A on device D"): the request (exact when given in
        bytes), host memory or not, the allocator and the device."""
        text = m.group(2)
        self._request(text, int(text.split()[0]) if text.endswith("bytes") else None, line)
        self.host_memory = self.host_memory or bool(m.group(1))
        if m.group(3):
            self.allocator = m.group(3)
        if m.group(4):
            self.device = int(m.group(4))

    def _request(self, text: str, exact: Optional[int], line: int) -> None:
        if exact is not None and not self.requested_exact:
            self.requested_text = text.replace(" ", "")
            self.requested_bytes, self.requested_exact = exact, True
        elif self.requested_text is None:
            self.requested_text = text.replace(" ", "")
            self.requested_bytes = parse_gpu_size(text)
        if self.line is None:
            self.line = line

    def matches_size(self, size: int) -> bool:
        """Whether a buffer of ``size`` bytes is what was asked for: equal to
        the exact request, or rounding to the allocator's 256-byte
        rounding, or printing as the request's rounded text."""
        if self.requested_exact and self.requested_bytes is not None:
            if size == self.requested_bytes:
                return True
        if self.rounded_bytes is not None and -(-size // 256) * 256 == self.rounded_bytes:
            return True
        if not self.requested_exact and self.requested_text is not None:
            return _human(size) == self.requested_text.replace("bytes", "B")
        return False

    def to_json(self) -> dict:
        d = {k: getattr(self, k) for k in (
            "requested_text", "requested_bytes", "requested_exact", "rounded_bytes", "allocator",
            "device", "host_memory", "executable_name", "origin", "memory_limit_bytes",
            "memory_limit_source", "in_use_bytes", "largest_free_block_bytes", "io_bytes", "line")}
        d["attempts"] = self.attempts
        d["autotune"] = None if self.autotune is None else self.autotune.to_json()
        d["chunks_in_use"] = [{"count": c, "size": s} for c, s in self.chunks_in_use]
        d["remat"] = None if self.remat is None else {
            "target_bytes": self.remat.target_bytes, "reduced_to_bytes": self.remat.reduced_to_bytes,
            "original_bytes": self.remat.original_bytes, "line": self.remat.line}
        return d

    def __repr__(self):
        return (f"<GpuOomReport {self.requested_text} with {self.allocator or 'an allocator'}, "
                f"limit {self.memory_limit_bytes}, line {self.line}>")


def _human(n: int) -> str:
    """tsl::strings::HumanReadableNumBytes: ``512B``, ``150.00GiB``."""
    if n < 1024:
        return f"{n}B"
    units = "KMGTPE"
    value = float(n)
    i = -1
    while value >= 1024 and i < len(units) - 1:
        value /= 1024
        i += 1
    return f"{value:.2f}{units[i]}iB"


# the order in which XLA:GPU's messages about one failure come
_STAGES = {"schedule": 0, "remat": 1, "bfc": 2, "exception": 3}


_SCHEDULER_LIMIT = "XLA's scheduler's base limit, the memory jax's allocator may take"

#: the messages a :class:`GpuOomReport` keeps (a log may repeat one failure many times)
MAX_MESSAGES = 64


def _shape_at(text: str) -> Tuple[Optional[str], Optional[Shape]]:
    """The shape that starts ``text`` (an instruction's after its ``=``), as
    printed and parsed (``(None, None)`` when there is none)."""
    text = text.lstrip()
    if text.startswith("("):
        depth = 0
        end = None
        for i, c in enumerate(text[:_MAX_SHAPE_TEXT]):
            depth += (c == "(") - (c == ")")
            if depth == 0:
                end = i + 1
                break
        if end is None:
            return None, None
        shape_text = text[:end]
    else:
        m = _ARRAY_SHAPE_AT.match(text)
        if m is None:
            return None, None
        shape_text = m.group(0)
    try:
        return shape_text, hlo_text.parse_shape(shape_text)
    except HloParseError:
        return shape_text, None


_MAX_SHAPE_TEXT = 8192
_ARRAY_SHAPE_AT = re.compile(r"[a-z][a-z0-9]{0,15}\[[^\]]{0,4096}\](?:\{[^{}]{0,4096}\})?")


class _GpuParser:
    """XLA:GPU's messages about running out of memory, grouped into one
    :class:`GpuOomReport` per failure: a message that comes earlier in the
    sequence (scheduler, rematerialization, allocator, exception) than one
    already read, or a second of the same kind, starts the next failure."""

    def __init__(self):
        self.reports: List[GpuOomReport] = []
        self.cur: Optional[GpuOomReport] = None
        self.stage = -1

    def _report(self, stage: str) -> GpuOomReport:
        k = _STAGES[stage]
        if self.cur is None or k < self.stage or stage in self.cur._seen:
            self.cur = GpuOomReport()
            self.reports.append(self.cur)
        self.cur._seen.add(stage)
        self.stage = k
        return self.cur

    def _event(self, kind: str) -> GpuOomReport:
        """The report of the autotuner's failure being read, or a new one:
        an instruction or a summary after the summary (the exception, which
        XLA raises last) starts the next failure; the scheduler's and
        rematerialization's messages of the same compile are kept."""
        r = self.cur
        a = None if r is None else r.autotune
        if a is not None and not (kind in ("summary", "instruction") and a.summary_line is not None):
            return r
        if r is None or a is not None or r.requested_text is not None or r._seen & {"bfc", "exception"}:
            r = self.cur = GpuOomReport()
            self.reports.append(r)
        r.autotune = AutotuneFailure()
        r.origin = "autotuner"
        r._seen.add("exception")
        self.stage = _STAGES["exception"]
        return r

    def _autotune(self, line: str, marks: list, lineno: int) -> None:
        """The autotuner's lines: each mark starts a field that runs to the
        next one (the exception may come pasted onto one line)."""
        r = None
        for k, m in enumerate(marks):
            seg = line[m.end():marks[k + 1].start() if k + 1 < len(marks) else len(line)]
            kind = m.lastgroup
            if kind == "summary":
                r = self._event("summary")
                a = r.autotune
                a.failed_instructions, a.instructions = int(m.group("nfail")), int(m.group("ntotal"))
                a.summary_line = lineno
                a.blocks.append(AutotuneBlock(None, lineno, example=True))
            elif kind in ("instruction", "instruction_old"):
                r = self._event("instruction")
                b = AutotuneBlock(m.group("name") or m.group("name_old"), lineno)
                if kind == "instruction":
                    b.shape_text, b.shape = _shape_at(seg)
                r.autotune.blocks.append(b)
                self._failure(r, b, seg, lineno, counted=kind == "instruction_old")
            else:
                r = self._event("more")
                blocks = r.autotune.blocks
                b = blocks[-1] if blocks else None
                if kind == "all_failed":
                    if b is None or b.all_failed:
                        b = AutotuneBlock(None, lineno)
                        blocks.append(b)
                    b.all_failed = True
                    continue
                if b is None:
                    b = AutotuneBlock(None, lineno)
                    blocks.append(b)
                if kind == "listed":
                    b.listed = int(m.group("nlisted"))
                else:
                    self._failure(r, b, seg, lineno, counted=True)
        if r is not None:
            r._note(line)

    @staticmethod
    def _failure(r: GpuOomReport, b: AutotuneBlock, text: str, lineno: int, counted: bool) -> None:
        """One configuration's failure (``counted``: a failure line), out of
        memory if ``text`` says so."""
        m = _GPU_EXCEPTION.search(text)
        se = None if m is not None else _GPU_SE_ALLOC.search(text)
        if counted:
            b.failures += 1
        if m is None and se is None:
            return
        if not counted:
            b.failures += 1
        b.out_of_memory += 1
        r.attempts += 1
        if m is not None:
            size = m.group(2)
            r._out_of_memory(m, lineno)
        else:
            size = se.group(1)
            r._request(size, int(se.group(2)), lineno)
        size = size.replace(" ", "")
        if size not in b.requests:
            b.requests.append(size)

    def feed(self, raw: str, lineno: int) -> None:
        line = raw.rstrip("\r\n")
        marks = list(_AUTOTUNE_EVENT.finditer(line)) if _AUTOTUNE_HINT.search(line) else None
        if marks:
            self._autotune(line, marks, lineno)
            return
        m = _SCHED_LIMIT.search(line)
        if m:
            cur = self.cur
            if cur is not None and cur.autotune is not None and "schedule" not in cur._seen:
                # logged after the autotuner's failures: the same compile
                r = cur
                r._seen.add("schedule")
            else:
                r = self._report("schedule")
            r.io_bytes = int(m.group(1))
            r._set_limit(int(m.group(2)), _SCHEDULER_LIMIT, 1)
            r._note(line)
            return
        m = _REMAT.search(line)
        if m:
            r = self._report("remat")
            r.remat = RematWarning(_exact_or(m.group(2), m.group(1)), _exact_or(m.group(4), m.group(3)),
                                   _exact_or(m.group(6), m.group(5)), lineno, m.group(0))
            r._note(line)
            return
        m = _BFC_FAIL.search(line)
        if m:
            if m.group("retry"):
                # the allocator's "not a failure" warning: recorded, no failure yet
                if self.cur is None:
                    self.cur = GpuOomReport()
                    self.reports.append(self.cur)
                    self.stage = -1
                self.cur.retries.append((m.group(1), m.group(2).replace(" ", "")))
                return
            # the allocator's own message about a request the autotuner made
            r = self.cur if self.cur is not None and self.cur.autotune is not None \
                else self._report("bfc")
            r.allocator = m.group(1)
            r._request(m.group(2), None, lineno)
            if m.group("rounded"):
                r.rounded_bytes = int(m.group("rounded"))
                if not r.requested_exact:
                    r.requested_bytes = r.rounded_bytes
            if m.group("op"):
                r.op_name = m.group("op")
            if _AUTOTUNE.search(line):
                r.origin = "autotuner"
            r._note(line)
            return
        r = self.cur
        m = _GPU_EXCEPTION.search(line)
        if m:
            r = self._report("exception")
            r._out_of_memory(m, lineno)
            em = _EXECUTABLE.search(line)
            if em:
                r.executable_name = em.group(1)
            if _AUTOTUNE.search(line):
                r.origin = "autotuner"
            r._note(line)
            return
        m = _GPU_SE_ALLOC.search(line)
        if m:
            r = self._report("exception")
            r._request(m.group(1), int(m.group(2)), lineno)
            if m.group(3):
                r.device = int(m.group(3))
            if _AUTOTUNE.search(line):
                r.origin = "autotuner"
            r._note(line)
            return
        if r is None:
            return
        em = _EXECUTABLE.search(line)
        if em and r.executable_name is None:
            r.executable_name = em.group(1)
        m = _BFC_STAT.match(_strip_glog(line))
        if m:
            key, value = m.group(1), int(m.group(2))
            if key == "Limit" and value > 0:
                r._set_limit(value, "the allocator's stats (Limit)", 0)
            elif key == "InUse":
                r.in_use_bytes = value
            elif key == "MaxInUse":
                r.peak_in_use_bytes = value
            elif key == "LargestFreeBlock":
                r.largest_free_block_bytes = value
            return
        m = _BFC_OLD_SUMMARY.search(line)
        if m:
            r._set_limit(int(m.group(2)), "the allocator's summary (memory_limit_)", 0)
            return
        m = _BFC_SUMMARY.search(line)
        if m:
            r._set_limit(parse_gpu_size(m.group(3)), "the allocator's summary (pool limit, rounded)", 2)
            return
        m = _BFC_INUSE_TOTAL.search(line)
        if m and r.in_use_bytes is None:
            r.in_use_bytes = parse_gpu_size(m.group(1))
            return
        m = _BFC_CHUNKS.match(_strip_glog(line))
        if m:
            r.chunks_in_use.append((int(m.group(1)), int(m.group(2))))

    def finish(self) -> List[GpuOomReport]:
        # retries alone (the allocator coped) are not a failure
        return [r for r in self.reports if r.requested_text is not None or r.remat is not None]


def _strip_glog(line: str) -> str:
    gm = _GLOG.match(line) or _TS_LOG.match(line)
    return line[gm.end():] if gm else line


_TS_LOG = re.compile(r"^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\.\d+:\s+[IWEF]\s+\S+\]\s?")


def _exact_or(exact: Optional[str], text: Optional[str]) -> Optional[int]:
    if exact is not None:
        return int(exact)
    return parse_gpu_size(text)


def read_oom_reports(source, *, on_warning: Optional[Callable[[HloWarning], None]] = None
                     ) -> List:
    """Every out-of-memory report in ``source`` (text, a file object or an
    iterable of lines: an exception message, a libtpu log, XLA:GPU's log),
    in order: :class:`OomReport` for libtpu's (``platform`` ``"tpu"``),
    :class:`GpuOomReport` for XLA:GPU's (``platform`` ``"gpu"``). Lines
    outside reports are ignored; a listed allocation whose shape does not
    parse is kept without a shape and reported to ``on_warning`` with its
    line number. The one parser of these formats: ``xlashape memory`` and
    ``xlashape hlo`` read reports through it."""
    if isinstance(source, str):
        source = source.splitlines()
    tpu = _TpuParser(on_warning)
    gpu = _GpuParser()
    lineno = 0
    for raw in source:
        lineno += 1
        tpu.feed(raw, lineno)
        if _GPU_KEYWORDS.search(raw) is not None:
            gpu.feed(raw, lineno)
    tpu.finish()
    reports = [(r.line, r) for r in tpu.reports]
    for g in gpu.finish():
        if g.requested_text is None and tpu.reports:
            # XLA's rematerialization warning in libtpu's log: it belongs to
            # the TPU report that follows it
            nxt = [r for r in tpu.reports if r.line > g.remat.line]
            if nxt and nxt[0].remat is None:
                nxt[0].remat = g.remat
            continue
        reports.append((g.line if g.line is not None else g.remat.line, g))
    reports.sort(key=lambda x: x[0])
    return [r for _, r in reports]


def distinct_reports(reports: List) -> List:
    """``reports`` without the repeats libtpu logs (it logs the same report
    again when it suppresses the crash): a report equal to the one before
    it is left out."""
    out = []
    previous = None
    for r in reports:
        key = _report_key(r)
        if key == previous:
            continue
        previous = key
        out.append(r)
    return out


def _report_key(r) -> tuple:
    if isinstance(r, GpuOomReport):
        return ("gpu", r.requested_text, r.allocator, r.line)
    return (r.module_name, r.form, r.used_text, r.limit_text, r.excess_text,
            tuple((a.section, a.size_text, a.shape_text, a.label) for a in r.allocations))


def counted_report(reports: List):
    """The report that counts when a log holds several (libtpu tries more
    than one allocation before it gives up, and XLA:GPU may fail more than
    once): the last one, after :func:`distinct_reports`. ``None`` when
    there is none. The earlier ones are superseded: adding their
    allocations up counts the same program several times."""
    d = distinct_reports(reports)
    return d[-1] if d else None


def buffers_of_request(report: GpuOomReport, allocations: Iterable) -> List:
    """The allocations (``xlashape.memory.Allocation``, from the dump of the
    same program) whose size is what the allocator was asked for (see
    :meth:`GpuOomReport.matches_size`), largest first."""
    out = [a for a in allocations
           if getattr(a, "size_in_bytes", None) is not None and report.matches_size(a.size_in_bytes)]
    return out


def _norm(text: Optional[str]) -> Optional[str]:
    return None if text is None else text.replace(" ", "")
