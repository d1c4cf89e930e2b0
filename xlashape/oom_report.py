"""Read TPU out-of-memory reports, as libtpu prints them.

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
from typing import Callable, Dict, Iterable, List, Optional, Tuple

from .errors import HloParseError
from .hlo_module import HloWarning, _clip, _hlo_text
from .shape import Shape

__all__ = ["OomReport", "OomAllocation", "read_oom_reports", "parse_size", "looks_like_oom_report",
           "BREAKDOWN_HINT"]

#: Where the per-buffer breakdown is when the two-line exception is all one has.
BREAKDOWN_HINT = (
    "the two-line exception holds totals only; for the per-buffer breakdown, compile again "
    "with LIBTPU_INIT_ARGS=--xla_tpu_no_crash_on_oom=true TPU_LOG_DIR=DIR (libtpu then writes "
    "the detailed report, with the largest allocations, to DIR's WARNING log; give that file "
    "to 'xlashape memory'), or with XLA_FLAGS=--xla_dump_to=DIR for the buffer assignment of "
    "a program that fits")

_GLOG = re.compile(r"^[IWEF]\d{4} \d\d:\d\d:\d\d\.\d+\s+\d+\s+[^\]\s]+\]\s?")
_SIZE = r"(-?\d+(?:\.\d+)?\s*[KMGTPE]?i?B?)"
_DETAILED = re.compile(r"Ran out of memory in memory space (\w+)\.\s*Used " + _SIZE + r" of "
                       + _SIZE + r" \w+\.(?:\s*Exceeded \w+ capacity by " + _SIZE + r"\.)?")
_SHORT = re.compile(r"Ran out of memory on (\w+),\s*(.*?)\(" + _SIZE + r"\)\s*exceeds available \w+ \("
                    + _SIZE + r"\)")
_MODULE = re.compile(r"HLO module:\s*([^\s]+?)\.?(?:\s|$)")
_USAGE_HEAD = re.compile(r"\s*Total (\w+) usage\s*>=\s*" + _SIZE + r"\s*:")
_OUTPUT = re.compile(r"\s*Output size " + _SIZE + r"; shares " + _SIZE + r" with arguments")
_PROGRAM_HEAD = re.compile(r"\s*Program (\w+) requirement " + _SIZE + r"\s*:")
_BREAKDOWN = re.compile(r"\s{2,}([A-Za-z][\w \-]*?)\s{2,}(" + _SIZE[1:-1] + r"|unknown size)\b(.*)$")
_HLO_TEMP_DETAIL = re.compile(r"Unpadded \(" + _SIZE + r"\)\s*Padded \(" + _SIZE + r"\)")
_LIST_HEAD = re.compile(r"\s*Largest program (allocations|arguments and outputs) in (\w+):")
_ENTRY = re.compile(r"\s*(\d+)\.\s*Size:\s*" + _SIZE + r"\s*$")
_FIELD = re.compile(r"\s*(Operator|Shape|Unpadded size|Extra memory due to padding|XLA label|"
                    r"Allocation type):\s?(.*?)\s*$")
_PADDING = re.compile(_SIZE + r"\s*\(([\d.]+|inf)x expansion\)")
_UNITS = {"": 0, "K": 1, "M": 2, "G": 3, "T": 4, "P": 5, "E": 6}


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
    m = re.fullmatch(r"\s*(-?\d+(?:\.\d+)?)\s*([KMGTPE]?)i?B?\s*", text)
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
                 "allocation_type", "line")

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
        m = re.search(r'op_name="((?:[^"\\]|\\.)*)"', self.operator)
        return m.group(1) if m else None

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
    """True if ``text`` (or its first part) holds an out-of-memory report."""
    return ("Ran out of memory in memory space" in text or "Ran out of memory on " in text
            or "CompileTimeHbmOom" in text)


def read_oom_reports(source, *, on_warning: Optional[Callable[[HloWarning], None]] = None
                     ) -> List[OomReport]:
    """Every out-of-memory report in ``source`` (text, a file object or an
    iterable of lines: an exception message, a libtpu log file, ...), in
    order. Lines outside reports are ignored; a listed allocation whose
    shape does not parse is kept without a shape and reported to
    ``on_warning`` with its line number."""
    if isinstance(source, str):
        source = source.splitlines()
    hlo_text = _hlo_text()
    reports: List[OomReport] = []
    cur: Optional[OomReport] = None
    entry: Optional[OomAllocation] = None
    section = "program"
    in_list = False
    block: Optional[str] = None        # "usage" / "program" while reading their lines
    last_module: Optional[str] = None
    lineno = 0
    for raw in source:
        lineno += 1
        line = raw.rstrip("\r\n")
        gm = _GLOG.match(line)
        if gm is not None:
            line = line[gm.end():]
        m = _DETAILED.search(line)
        sm = None if m is not None else _SHORT.search(line)
        if m is not None or sm is not None:
            if m is not None:
                cur = OomReport("detailed", m.group(1).lower(), lineno, line.strip())
                cur.used_text, cur.limit_text, cur.excess_text = (
                    _norm(m.group(2)), _norm(m.group(3)), _norm(m.group(4)))
            else:
                cur = OomReport("short", sm.group(1).lower(), lineno, line.strip())
                cur.required_what = sm.group(2).strip().rstrip(",").strip() or None
                cur.used_text, cur.limit_text = _norm(sm.group(3)), _norm(sm.group(4))
            reports.append(cur)
            entry = None
            in_list = False
            block = None
            mm = _MODULE.search(line)
            if mm:
                cur.module_name = last_module = mm.group(1)
            continue
        if cur is None:
            continue
        if gm is not None:
            # another log message: the report (continuation lines carry no
            # log prefix) has ended
            cur = None
            entry = None
            continue
        if cur.module_name is None:
            mm = _MODULE.search(line)
            if mm:
                cur.module_name = last_module = mm.group(1)
        if cur.form == "short":
            continue
        s = line.strip()
        if not s:
            block = None
            continue
        hm = _USAGE_HEAD.match(line)
        if hm:
            cur.usage_total_text = _norm(hm.group(2))
            block = "usage"
            continue
        hm = _PROGRAM_HEAD.match(line)
        if hm:
            cur.program_total_text = _norm(hm.group(2))
            block = "program"
            continue
        om = _OUTPUT.match(line)
        if om:
            cur.output_text, cur.output_shares_text = _norm(om.group(1)), _norm(om.group(2))
            continue
        lm = _LIST_HEAD.match(line)
        if lm:
            section = "program" if lm.group(1) == "allocations" else "arguments and outputs"
            in_list = True
            block = None
            entry = None
            continue
        if block is not None and not in_list:
            bm = _BREAKDOWN.match(line)
            if bm:
                name = bm.group(1).strip()
                value = bm.group(2)
                target = cur.usage if block == "usage" else cur.program
                target[name] = value if value == "unknown size" else _norm(value)
                if name == "HLO temp":
                    dm = _HLO_TEMP_DETAIL.search(bm.group(3))
                    if dm:
                        cur.temp_unpadded_text, cur.temp_padded_text = _norm(dm.group(1)), _norm(dm.group(2))
                continue
        if not in_list:
            continue
        em = _ENTRY.match(line)
        if em:
            entry = OomAllocation(int(em.group(1)), section, _norm(em.group(2)), lineno)
            cur.allocations.append(entry)
            continue
        if s.startswith("====="):
            entry = None
            continue
        fm = _FIELD.match(line)
        if fm and entry is not None:
            key, value = fm.group(1), fm.group(2)
            if key == "Operator":
                entry.operator = value
            elif key == "Shape":
                entry.shape_text = value
                try:
                    entry.shape = hlo_text.parse_shape(value)
                except HloParseError as e:
                    if on_warning is not None:
                        on_warning(HloWarning(lineno, f"shape of allocation {entry.rank} does "
                                                      f"not parse: {e.message}"))
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
            continue
    # a report without a module name belongs to the module named before it
    # (libtpu names it once, then logs the allocator's reports)
    name = None
    for r in reports:
        if r.module_name is None:
            r.module_name = name
        else:
            name = r.module_name
    return reports


def _norm(text: Optional[str]) -> Optional[str]:
    return None if text is None else text.replace(" ", "")
