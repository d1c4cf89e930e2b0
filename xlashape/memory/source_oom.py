"""The source of out-of-memory reports: TPU (libtpu) and GPU (XLA:GPU), as records.

:func:`xlashape.oom_report.read_oom_reports` is the one parser of both; each
report it finds (a libtpu log repeats a report when it suppresses the crash:
those are dropped) becomes one :class:`~xlashape.memory.records.ModuleRecords`
holding it.
"""

from __future__ import annotations

from typing import List, Optional

from ..errors import UnreadableInputError
from ..oom_report import distinct_reports, read_oom_reports
from .records import ModuleRecords, Reading

__all__ = ["oom_records"]


def oom_records(lines, reading: Reading, path: Optional[str]) -> List[ModuleRecords]:
    """One record per distinct report in ``lines`` (text, a file object or
    lines); the last is the one that counts (libtpu logs a report for each
    allocation it tries)."""
    reports = read_oom_reports(lines, on_warning=reading.warn)
    if not reports:
        raise UnreadableInputError(f"no out-of-memory report found in {path or 'the input'}")
    out = []
    for r in distinct_reports(reports):
        rec = ModuleRecords(getattr(r, "module_name", None) or getattr(r, "executable_name", None),
                            "oom", path)
        rec.oom = r
        out.append(rec)
    return out
